"""Exporters: ``model.export(exporter)`` runs an exporter passed itself, and, deprecated for one
release, ``model.export(format)`` still finds a third party's format among the
``fstrain.model_exporters`` entry points of the installed distributions (with a
``DeprecationWarning``). Each plugin test installs a small plugin distribution (a ``.dist-info``
folder and its module) on ``sys.path``, as pip would, and the real ``importlib.metadata``
discovery finds it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from model_registry.errors import ModelNotSavedError
from model_registry.exporters import ENTRY_POINT_GROUP, known_formats

SUMMARY = '''
from model_registry.exporters import Exported

def export(model, /, *, unit="bytes"):
    if unit not in ("bytes", "kib"):
        raise ValueError(unit)
    size = sum(f["size"] for f in model.manifest["files"] if f["kind"] == "model")
    size = size if unit == "bytes" else size / 1024
    return Exported(files={"summary/size.json": {"size": size, "unit": unit},
                           "summary/note.txt": b"model files only"},
                    record={"size": size, "unit": unit})

def not_exported(model, /):
    return {"size": 0}
'''


def _install(site: Path, dist: str, points: dict[str, str], *, extras: tuple[str, ...] = (),
             module: tuple[str, str] | None = None) -> None:
    """A plugin distribution under ``site``: its metadata, entry points and module."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.4", f"Name: {dist}", "Version: 1.0",
             *(f"Provides-Extra: {e}" for e in extras)]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    body = "".join(f"{name} = {target}\n" for name, target in points.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{body}")
    if module is not None:
        (site / f"{module[0]}.py").write_text(textwrap.dedent(module[1]))


@pytest.fixture
def site(tmp_path, monkeypatch):
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    return path


@pytest.fixture
def saved(registry, model_dir):
    return registry.python.create_model("plugged").save(str(model_dir))


def test_a_plugin_format_is_found_run_and_attached(site, saved):
    _install(site, "fstrain-summary", {"summary": "fstrain_summary_a:export"},
             module=("fstrain_summary_a", SUMMARY))
    assert {"summary", "onnx"} <= set(known_formats())
    with pytest.warns(DeprecationWarning, match=r"'fstrain\.model_exporters' entry points, which "
                                                r"go in the next release; pass the exporter "
                                                r"itself instead: model\.export\(export, \.\.\.\)"):
        record = saved.export("summary", unit="kib")
    assert record == {"size": pytest.approx((9 + 4) / 1024), "unit": "kib"}  # the 2 model files
    files = {f["path"] for f in saved.manifest["files"]}
    assert {"summary/size.json", "summary/note.txt"} <= files
    saved.verify()  # each attachment hashed in the manifest
    folder = Path(saved.download())
    assert (folder / "summary" / "note.txt").read_bytes() == b"model files only"


@pytest.mark.filterwarnings("ignore:.*fstrain.model_exporters.*entry points:DeprecationWarning")
def test_an_unknown_option_or_format_attaches_nothing(site, saved):
    _install(site, "fstrain-summary", {"summary": "fstrain_summary_b:export"},
             module=("fstrain_summary_b", SUMMARY))
    before = saved.manifest["files"]
    with pytest.raises(InvalidArgumentError, match=r"format 'summary'\. It accepts: unit"):
        saved.export("summary", units="kib")
    with pytest.raises(ConfigError, match=r"no exporter for format 'tflite'\. Known formats: "
                                          r"onnx, summary"):
        saved.export("tflite")
    with pytest.raises(InvalidArgumentError, match="format must be a format name .* or an "
                                                   "exporter"):
        saved.export("")
    assert saved.manifest["files"] == before


@pytest.mark.filterwarnings("ignore:.*fstrain.model_exporters.*entry points:DeprecationWarning")
def test_an_unimportable_plugin_names_the_extra_to_install(site, saved):
    _install(site, "tflite-export", {"tflite": "fstrain_no_such_module:export"},
             extras=("tflite",))
    with pytest.raises(ConfigError, match=r"the 'tflite' exporter \(fstrain_no_such_module:"
                                          r"export\) cannot be imported .*pip install "
                                          r"'tflite-export\[tflite\]'"):
        saved.export("tflite")


@pytest.mark.filterwarnings("ignore:.*fstrain.model_exporters.*entry points:DeprecationWarning")
def test_a_format_declared_twice_or_a_wrong_return_is_refused(site, saved):
    _install(site, "fstrain-summary", {"summary": "fstrain_summary_c:export",
                                       "broken": "fstrain_summary_c:not_exported"},
             module=("fstrain_summary_c", SUMMARY))
    _install(site, "other-summary", {"summary": "other_summary:export"})
    with pytest.raises(ConfigError, match="declared by more than one exporter"):
        saved.export("summary")
    with pytest.raises(ConfigError, match="returned dict, not an Exported"):
        saved.export("broken")
    assert not any(f["path"].startswith("summary/") for f in saved.manifest["files"])


def test_an_unsaved_model_cannot_be_exported(registry):
    with pytest.raises(ModelNotSavedError):
        registry.python.create_model("draft").export("onnx")


def test_an_exporter_passed_itself_runs_without_any_entry_point(site, saved, recwarn):
    """The replacement of the entry points: the exporter object, no lookup, no warning."""
    import importlib

    (site / "fstrain_summary_d.py").write_text(textwrap.dedent(SUMMARY))
    module = importlib.import_module("fstrain_summary_d")
    record = saved.export(module.export, unit="bytes")
    assert record == {"size": 9 + 4, "unit": "bytes"}
    assert {"summary/size.json", "summary/note.txt"} <= {f["path"] for f in saved.manifest["files"]}
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
    with pytest.raises(InvalidArgumentError, match=r"format 'export'\. It accepts: unit"):
        saved.export(module.export, units="kib")
    with pytest.raises(ConfigError, match="'not_exported' exporter returned dict"):
        saved.export(module.not_exported)


def test_onnx_declared_again_by_another_package_is_refused(site, saved):
    """fstrain's own format is not shadowed by a plugin; an entry point that names fstrain's own
    exporter (an older install of fstrain declared one) is the same exporter, not a clash."""
    from model_registry.exporters import get_exporter

    _install(site, "old-fstrain", {"onnx": "fstrain.trainers.onnx_exporter:export"})
    from fstrain.trainers.onnx_exporter import export

    assert get_exporter("onnx") is export
    _install(site, "onnx-rival", {"onnx": "onnx_rival:export"})
    with pytest.raises(ConfigError, match=r"format 'onnx' is fstrain's own .*onnx_rival:export"):
        saved.export("onnx")
