"""``model.export(format)``: ``onnx`` is fstrain's own format (the trainers' exporter, no entry
point), and ``model.export("onnx")`` attaches a graph that ONNX Runtime runs to the native model's
probabilities on the version's test split, through the registry's public API only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import ConfigError, IntegrityError, InvalidArgumentError
from model_registry.exporters import known_formats

KINDS = {
    "sklearn_logreg": {},
    "xgboost": {"params": {"n_estimators": 15}},
    "lightgbm": {"params": {"n_estimators": 15}},
    "mlp": {"torch": {"epochs": 2, "checkpoint": False}},
}


@pytest.fixture(scope="module")
def store(tmp_path_factory, binary_data):
    """A local project: the trainer tests' binary data (``conftest.py``) as a feature group, a feature view and
    a train/test training dataset (validation is carved from train, as the pipeline does)."""
    import feature_store

    project = feature_store.login(root=tmp_path_factory.mktemp("export") / "store")
    fs = project.get_feature_store()
    X_tr, y_tr, X_va, y_va = binary_data
    X, y = pd.concat([X_tr, X_va]), pd.concat([y_tr, y_va])
    people = fs.get_or_create_feature_group("people", version=1, primary_key=["pid"])
    people.insert(pd.concat([X, y], axis=1).assign(pid=np.arange(len(X))))
    fv = fs.create_feature_view("people", version=1, query=people.select_all(),
                                labels=["label"])
    version, _ = fv.create_train_test_split(test_size=0.25, seed=2)
    return project, fv, version


def _register(store, kind: str, tmp_path: Path):
    """Train ``kind`` as the training pipeline does and register it with its lineage."""
    from feature_store.core.carve import read_three_way
    from fstrain.trainers import train

    project, fv, version = store
    (X_tr, X_va, _X_te, y_tr, y_va, _y_te), carve = read_three_way(fv, version)
    result = train({"model": kind, **KINDS[kind]}, X_tr, y_tr, X_va, y_va,
                   workdir=tmp_path / "work")
    folder = tmp_path / "model"
    folder.mkdir()
    result.model.save(folder)
    flavor = "torch" if kind == "mlp" else "python"
    model = getattr(project.get_model_registry(), flavor).create_model(
        f"people_{kind}", feature_view=fv, training_dataset_version=version,
        training_config={"validation_split": carve})
    return model.save(str(folder))


def _onnx_equals_native(model, check: dict) -> None:
    """The attached graph, run in ONNX Runtime on the test split, answers as the native
    model (loaded from the registry) does."""
    import onnxruntime as ort

    from fstrain.trainers.onnx_export import PROBABILITIES, onnx_inputs
    from fstrain.trainers.predictor import load_predictor

    folder = Path(model.download())  # verifies every file against the manifest
    files = {f["path"]: f for f in model.manifest["files"]}
    assert files["onnx/model.onnx"]["sha256"] == check["sha256"]
    assert json.loads((folder / "onnx" / "check.json").read_text())["sha256"] == check["sha256"]
    predictor = load_predictor(folder)
    _, X_test, _, _ = model.get_feature_view(init=False).get_train_test_split(
        model.training_dataset_version)
    session = ort.InferenceSession(str(folder / "onnx" / "model.onnx"),
                                   providers=["CPUExecutionProvider"])
    onnx_proba = session.run([PROBABILITIES], onnx_inputs(predictor.schema, X_test))[0]
    native = predictor.predict_proba(X_test)
    np.testing.assert_allclose(onnx_proba[:, 1], native, atol=1e-5)
    assert check["rows"] == len(X_test) and check["split"] == "test"


def test_onnx_is_fstrains_own_format_without_any_entry_point(monkeypatch):
    """Regression: the registry found its own exporter only through install metadata, so a
    source tree without ``pip install -e .`` (or a stale install) could not export."""
    from importlib import metadata

    from fstrain.trainers import onnx_exporter
    from model_registry import exporters

    monkeypatch.setattr(metadata, "entry_points", lambda **_: [])
    assert "onnx" in known_formats()
    assert exporters.get_exporter("onnx") is onnx_exporter.export


@pytest.mark.parametrize("kind", list(KINDS))
def test_export_onnx_through_the_python_api(store, tmp_path, kind):
    model = _register(store, kind, tmp_path)
    check = model.export("onnx")
    assert check["passed"] and check["max_abs_diff"] < 1e-5 and check["path"] == "onnx/model.onnx"
    assert check["kind"] == kind and check["training_dataset_version"] == store[2]
    _onnx_equals_native(model, check)


def test_a_failed_check_attaches_nothing(store, tmp_path):
    model = _register(store, "sklearn_logreg", tmp_path)
    before = model.manifest["files"]
    with pytest.raises(IntegrityError, match="nothing was attached"):
        model.export("onnx", atol=0.0)  # tighter than float32 arithmetic
    assert model.manifest["files"] == before
    assert not (Path(model.download()) / "onnx").exists()


def test_unknown_format_and_options_are_refused(store, tmp_path):
    model = _register(store, "sklearn_logreg", tmp_path)
    with pytest.raises(ConfigError, match=r"no exporter for format 'tflite'\. Known formats: "
                                          r".*onnx"):
        model.export("tflite")
    with pytest.raises(InvalidArgumentError, match="It accepts: atol"):
        model.export("onnx", tolerance=1e-3)
    with pytest.raises(InvalidArgumentError, match="atol must be a finite number"):
        model.export("onnx", atol=-1)
    assert not any(f["path"].startswith("onnx/") for f in model.manifest["files"])


def test_a_model_not_trained_by_fstrain_is_refused(store, binary_data, tmp_path):
    from sklearn.linear_model import LogisticRegression
    from skops.io import dump

    project, fv, version = store
    X, y = binary_data[0], binary_data[1]
    folder = tmp_path / "external"
    folder.mkdir()
    dump(LogisticRegression().fit(X[["income"]], y["label"]), folder / "model.skops")
    registry = project.get_model_registry()
    with_lineage = registry.sklearn.create_model(
        "people_external", feature_view=fv, training_dataset_version=version).save(str(folder))
    with pytest.raises(ConfigError, match="was not trained by fstrain"):
        with_lineage.export("onnx")
    without = registry.sklearn.create_model("people_bare").save(str(folder))
    with pytest.raises(ConfigError, match="registered without its lineage"):
        without.export("onnx")
