"""CatBoost, Keras and Flax models through the real pipelines on the adult use case: the CLI
trains and registers them, and the model-validation pipeline loads and scores them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines import feature, model_validation, training_dataset
from fstrain.cli.app import app

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def adult_root(tmp_path_factory):
    """A project root with the adult feature groups (3,000 people) and one training dataset."""
    import fstrain

    root = tmp_path_factory.mktemp("adult")
    project = fstrain.login(root=str(root))
    feature.run(project, feature.FeaturePipelineConfig(use_case="adult", sample=3000))
    training_dataset.run(project, training_dataset.TrainingDatasetConfig(use_case="adult",
                                                                         seed=3))
    return root


def _train_and_validate(root: Path, model: str, *params: str) -> tuple[dict, dict]:
    import fstrain

    args = ["train", "adult", "-t", "1", "--model", model, "--json", "--root", str(root)]
    for p in params:
        args += ["--param", p]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    ref = json.loads(out.output[out.output.index("{"):])
    project = fstrain.login(root=str(root))
    result = model_validation.run(project, model_validation.ModelValidationConfig(
        model_name=ref["name"], version=ref["version"], gates=["roc_auc >= 0.75"],
        replace_gates=True, bootstrap_resamples=20, shap_samples=20))
    card = json.loads(Path(result.scorecard_html).with_name("scorecard.json").read_text())
    manifest = project.get_model_registry().get_model(ref["name"], ref["version"]).manifest
    return card, manifest


def test_catboost_from_the_cli_validated_with_its_own_shap(adult_root):
    card, manifest = _train_and_validate(adult_root, "catboost", "n_estimators=200")
    assert card["status"] == "passed (policy deviation)" and card["metrics"]["roc_auc"] > 0.75
    assert card["explanation"]["method"].startswith("catboost ShapValues")
    features = {f["feature"] for f in card["explanation"]["global_importance"]}
    assert "occupation" in features  # a categorical column explained whole, not one-hot
    assert card["bias"]  # slices on the helper columns
    paths = {f["path"] for f in manifest["files"]}
    assert "model/model.cbm" in paths and manifest["training_config"]["trainer"]["model"] == (
        "catboost")


@pytest.mark.parametrize("step", ["fit", "custom"])
def test_keras_from_the_cli_validated_with_gradients(adult_root, step):
    card, manifest = _train_and_validate(adult_root, "keras_mlp", "epochs=4", "batch_size=128",
                                         f"train_step={step}")
    assert card["status"] == "passed (policy deviation)" and card["metrics"]["roc_auc"] > 0.75
    assert "integrated gradients" in card["explanation"]["method"]
    assert card["explanation"]["by_column"] and card["bias"]
    assert "model/model.keras" in {f["path"] for f in manifest["files"]}
    assert manifest["hyperparameters"]["train_step"] == step


def test_flax_from_the_cli_validated_with_kernel_shap(adult_root):
    card, manifest = _train_and_validate(adult_root, "flax_mlp", "epochs=3", "batch_size=128")
    assert card["status"] == "passed (policy deviation)" and card["metrics"]["roc_auc"] > 0.75
    assert card["explanation"]["method"].startswith("shap.KernelExplainer")
    assert card["explanation"]["by_column"] and card["bias"]
    assert "model/flax_params.safetensors" in {f["path"] for f in manifest["files"]}
    assert set(manifest["hyperparameters"]) >= {"hidden_sizes", "epochs", "learning_rate"}
    # the checkpoints stay for --resume, which continues from the newest one
    runs = list((adult_root / "runs").glob("*/checkpoints/ckpt_00002.msgpack"))
    assert len(runs) == 1
    out = CliRunner().invoke(app, ["train", "adult", "-t", "1", "--model", "flax_mlp", "--param",
                                   "epochs=3", "--param", "batch_size=128", "--resume",
                                   "--json", "--root", str(adult_root)])
    assert out.exit_code == 0, out.output


def test_registry_export_onnx_checks_on_the_test_split_and_attaches(adult_root):
    import fstrain

    out = CliRunner().invoke(app, ["train", "adult", "-t", "1", "--model", "lightgbm", "--param",
                                   "n_estimators=40", "--json", "--root", str(adult_root)])
    assert out.exit_code == 0, out.output
    ref = json.loads(out.output[out.output.index("{"):])
    label = f"{ref['name']}:{ref['version']}"
    # a check tighter than float32 arithmetic fails and attaches nothing
    strict = CliRunner().invoke(app, ["registry", "export-onnx", label, "--atol", "0",
                                      "--root", str(adult_root)])
    assert strict.exit_code == 2 and "nothing was attached" in strict.output
    model = fstrain.login(root=str(adult_root)).get_model_registry().get_model(
        ref["name"], ref["version"])
    assert not any(f["path"].startswith("onnx/") for f in model.manifest["files"])
    done = CliRunner().invoke(app, ["registry", "export-onnx", label, "--json",
                                    "--root", str(adult_root)])
    assert done.exit_code == 0, done.output
    check = json.loads(done.output)
    assert check["passed"] and check["split"] == "test" and check["rows"] > 500
    model = fstrain.login(root=str(adult_root)).get_model_registry().get_model(
        ref["name"], ref["version"])
    files = {f["path"]: f for f in model.manifest["files"]}
    assert files["onnx/model.onnx"]["sha256"] == check["sha256"]
    assert files["onnx/model.onnx"]["kind"] == "attachment" and "onnx/check.json" in files
    model.verify()  # the attachments are hashed with the model's files
