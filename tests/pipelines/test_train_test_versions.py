"""`fstrain train` on a version made by create_train_test_split: a seeded validation split is
carved from train, recorded with the model, and validation carves the same rows."""

from __future__ import annotations

import json
from pathlib import Path

import feature_store
from typer.testing import CliRunner

from fstrain.cli.app import app


def _cli(root, *args):
    return CliRunner().invoke(app, [*args, "--root", str(root)])


def test_train_and_validate_a_train_test_version(tmp_path):
    root = tmp_path / "store"
    assert _cli(root, "features", "adult", "--sample", "3000").exit_code == 0
    project = feature_store.login(root=root)
    from feature_views import get_use_case

    fv = get_use_case("adult").build_feature_view(project.get_feature_store())
    version, _ = fv.create_train_test_split(test_size=0.2, split="stratified", seed=11)
    unsplit, _ = fv.create_training_data(seed=3)

    trained = _cli(root, "train", "adult", "-t", str(version), "--param", "n_estimators=20",
                   "--json")
    assert trained.exit_code == 0, trained.output
    ref = json.loads(trained.output)
    model = project.get_model_registry().get_model(ref["name"], ref["version"])
    carve = model.manifest["training_config"]["validation_split"]
    assert carve["carved_from"] == "train" and carve["strategy"] == "stratified"
    assert carve["seed"] == 11 and carve["fraction"] == 0.2
    assert carve["rows"] == round(fv.get_training_dataset(version).splits["train"]["rows"] * 0.2)
    assert "validation_roc_auc" in model.training_metrics

    validated = _cli(root, "validate", f"{ref['name']}:{ref['version']}", "--json")
    assert validated.exit_code in (0, 3), validated.output
    out = json.loads(validated.output)
    assert out["key_metric"] == "roc_auc"
    card = json.loads(Path(out["scorecard_html"]).with_name("scorecard.json").read_text())
    assert card["threshold"]["detail"].endswith(
        f"on {carve['rows']} rows carved from the train split of training dataset v{version} "
        "(stratified 20%, seed 11), held out from fitting by the training run")
    assert card["threshold"]["warning"] is None and "validation split" not in (
        card["threshold"]["detail"])
    _validate_a_notebook_model(root, project, fv, version)

    refused = _cli(root, "train", "adult", "-t", str(unsplit))
    assert refused.exit_code == 2
    assert "fstrain dataset" in refused.output and "Traceback" not in refused.output
    assert "get_train_validation_test_split" not in refused.output  # no Python advice


def _validate_a_notebook_model(root, project, fv, version):
    """A model fitted on every train row in a notebook carries no carve record: its threshold
    rows are carved from train all the same, and the scorecard says they may have been fitted
    on."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    from fstrain.trainers import formats

    X, _X_te, y, _y_te = fv.get_train_test_split(version)
    text = [c for c in X.columns if X[c].dtype == object]
    pipe = Pipeline([("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"),
                                                  text)], remainder="passthrough")),
                     ("clf", LogisticRegression(max_iter=200))]).fit(X, y.iloc[:, 0])
    formats.save_sklearn(pipe, root.parent / "nb")
    project.get_model_registry().sklearn.create_model(
        "notebook_lr", feature_view=fv, training_dataset_version=version).save(
        str(root.parent / "nb"))
    from pipelines import model_validation

    page = Path(model_validation.run(project, model_validation.ModelValidationConfig(
        model_name="notebook_lr", shap_samples=5, bootstrap_resamples=10)).scorecard_html)
    card = json.loads(page.with_name("scorecard.json").read_text())
    assert "rows carved from the train split of training dataset" in card["threshold"]["detail"]
    assert "may have been fitted on these very rows" in card["threshold"]["warning"]
    assert 'id="threshold-rows"' in page.read_text()
    assert "may have been fitted on" in page.with_name("model_card.md").read_text()


def test_carve_is_reproducible_and_time_ordered(tmp_path):
    root = tmp_path / "store"
    assert _cli(root, "features", "ccfraud", "--n-transactions", "20000").exit_code == 0
    project = feature_store.login(root=root)
    from feature_views import get_use_case
    from feature_store.core.carve import read_three_way

    fv = get_use_case("ccfraud").build_feature_view(project.get_feature_store())
    version, _ = fv.create_train_test_split(test_window="30D", gap="1D", seed=2)
    (X_tr, X_va, *_rest), record = read_three_way(fv, version)
    assert record["strategy"] == "time" and len(X_va) == record["rows"]
    # validation is the latest rows of train: no look-ahead into the rows that train the model
    X_et = fv.get_train_test_split(version, event_time=True)[0]
    latest = X_et.sort_values("event_time", kind="mergesort").tail(len(X_va))
    expected = latest.drop(columns="event_time")[list(X_va.columns)]
    cols = list(X_va.columns)
    assert (X_va.sort_values(cols).reset_index(drop=True)
            .equals(expected.sort_values(cols).reset_index(drop=True)))
    (_, X_va2, *_), again = read_three_way(fv, version, carve=record)
    assert again == record and X_va2.equals(X_va)
