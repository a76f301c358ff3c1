"""The store location: only ``features``, ``run``, ``demo`` and ``keys new`` make a store; every
other command refuses a root that holds none, in one line naming the folder and where the root
came from (``--root``, ``FSTRAIN_HOME`` or the default ``./.fstrain``), and creates nothing."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fstrain.cli.app import app


def _cli(*args: str, env: dict[str, str | None] | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def _refused(result, path, origin: str) -> str:
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and "Traceback" not in line
    assert str(path) in line and origin in line
    assert "holds no store" in line or "does not exist" in line
    return line


def test_read_commands_refuse_a_missing_root_and_create_nothing(tmp_path, monkeypatch):
    missing = tmp_path / "nope"
    line = _refused(_cli("registry", "list", "--root", str(missing)), missing, "from --root")
    assert "does not exist" in line and "fstrain features" in line
    _refused(_cli("fg", "list", env={"FSTRAIN_HOME": str(missing)}), missing, "from FSTRAIN_HOME")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FSTRAIN_HOME")
    shown = _cli("td", "show", "adult_income", "1", env={"FSTRAIN_HOME": None})
    _refused(shown, tmp_path / ".fstrain", "the default ./.fstrain")
    for args in (("train", "adult", "-t", "1"), ("dataset", "adult"), ("validate", "adult_model"),
                 ("doctor", "adult_model"), ("registry", "verify"), ("keys", "list"),
                 ("users", "list")):
        _refused(_cli(*args, "--root", "newstore"), tmp_path / "newstore", "from --root")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no .fstrain, no newstore


def test_an_empty_folder_is_no_store_and_a_store_without_models_lists_nothing(tmp_path):
    from fstrain.project import Project

    empty = tmp_path / "empty"
    empty.mkdir()
    line = _refused(_cli("registry", "list", "--root", str(empty)), empty, "from --root")
    assert "holds no store" in line and list(empty.iterdir()) == []
    store = tmp_path / "store"
    Project(store).get_feature_store()  # a store with features, no model registry
    listed = _cli("registry", "list", "--root", str(store))
    assert listed.exit_code == 0 and "No model versions found" in listed.output
    policy = _cli("registry", "policy", "show", "adult_income", "--root", str(store))
    assert policy.exit_code == 0 and "use case adult" in policy.output, policy.output
    assert sorted(p.name for p in store.iterdir()) == ["feature_store"]


def test_the_library_opens_without_creating_when_asked(tmp_path):
    import fstrain
    from fstrain.kernel.errors import StoreNotFoundError

    with pytest.raises(StoreNotFoundError, match=r"nope \(from root\) does not exist"):
        fstrain.login(root=tmp_path / "nope", create=False)
    assert not (tmp_path / "nope").exists()
    assert fstrain.login(root=tmp_path / "made").root.is_dir()  # a notebook's first call
