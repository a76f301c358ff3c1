"""Contract: the model-registry behaviour the pipelines rely on, on every backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fstrain.kernel.errors import InvalidArgumentError, NotFoundError


def _model_dir(tmp_path: Path, content: str) -> Path:
    folder = tmp_path / f"model_{abs(hash(content))}"
    folder.mkdir()
    (folder / "model.json").write_text(json.dumps({"weights": content}))
    (folder / "config.json").write_text("{}")
    return folder


def _save(backend, tmp_path, content: str, **kwargs):
    model = backend.mr.python.create_model(
        backend.n("contract_model"), metrics={"auc": 0.75}, description="contract", **kwargs
    )
    return model.save(str(_model_dir(tmp_path, content)))


def test_save_assigns_versions_and_get_returns_them(backend, tmp_path):
    first = _save(backend, tmp_path, "a")
    second = _save(backend, tmp_path, "b")
    assert second.version == first.version + 1
    got = backend.mr.get_model(backend.n("contract_model"), first.version)
    assert got.version == first.version and got.training_metrics == {"auc": 0.75}
    assert [m.version for m in backend.mr.get_models(backend.n("contract_model"))] == [
        first.version, second.version
    ]


def test_download_returns_the_saved_files(backend, tmp_path):
    model = _save(backend, tmp_path, "weights-1")
    folder = Path(backend.mr.get_model(model.name, model.version).download())
    assert json.loads((folder / "model.json").read_text()) == {"weights": "weights-1"}
    assert (folder / "config.json").is_file()


def test_validation_status_starts_pending_and_persists(backend, tmp_path):
    model = _save(backend, tmp_path, "s")
    assert model.validation_status == "pending"
    model.set_validation_status("passed")
    assert backend.mr.get_model(model.name, model.version).validation_status == "passed"
    with pytest.raises(InvalidArgumentError, match="validation status"):
        model.set_validation_status("great")


def test_attachments_are_part_of_the_version(backend, tmp_path):
    model = _save(backend, tmp_path, "att")
    model.write_attachment("scorecard.json", {"roc_auc": 0.9})
    model.add_attachment("images/roc.png", b"\x89PNG fake")
    folder = Path(backend.mr.get_model(model.name, model.version).download())
    assert json.loads((folder / "scorecard.json").read_text()) == {"roc_auc": 0.9}
    assert (folder / "images" / "roc.png").read_bytes() == b"\x89PNG fake"


def test_missing_model_raises_not_found(backend):
    with pytest.raises(NotFoundError):
        backend.mr.get_model(backend.n("no_such_model"), 1)
