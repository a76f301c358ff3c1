"""The four pipelines, alone and end to end, on small slices of the real use-case data."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from fstrain.kernel.errors import ConfigError, DataValidationError, NotFoundError
from fstrain.kernel.window import resolve_window
from pipelines import feature, model_validation, training, training_dataset
from fstrain.cli.app import app

SMALL = {
    "adult": {"sample": 3000},
    "flights": {"sample": 8000},
    "ccfraud": {"n_transactions": 20000},
    "mnist": {"sample": 600},
}
FAST_MODEL = {
    "adult": {"params": {"n_estimators": 60}},
    "flights": {"params": {"n_estimators": 60}},
    "ccfraud": {"params": {"n_estimators": 60}},
    "mnist": {"torch": {"epochs": 2}},
}


def _features(project, use_case, **extra):
    return feature.run(project, feature.FeaturePipelineConfig(use_case=use_case, **{**SMALL[use_case], **extra}))


def test_feature_pipeline_is_idempotent(project):
    first = _features(project, "adult")
    fs = project.get_feature_store()
    before = fs.get_feature_group("adult_employment", 1).read().sort_values("person_id").reset_index(drop=True)
    second = _features(project, "adult")
    after = fs.get_feature_group("adult_employment", 1).read().sort_values("person_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(before, after)
    assert {r.name for r in first.feature_groups} == {"adult_demographics", "adult_employment"}
    employment = next(r for r in second.feature_groups if r.name == "adult_employment")
    assert employment.unchanged and second.wrote_nothing  # a re-run writes no commit
    fg = fs.get_feature_group("adult_demographics", 1)
    assert fg.get_tag("pii") is True and fg.get_feature_tags("sex")["pii"] is True
    assert fg.get_feature("age").description  # descriptions from the source spec
    assert fg.expectation_suite is not None and fg.validation_ingestion_policy == "STRICT"


def test_window_contract(project, monkeypatch):
    assert resolve_window().start is None
    monkeypatch.setenv("HOPS_START_TIME", "2024-03-01T00:00:00Z")
    monkeypatch.setenv("HOPS_END_TIME", "2024-03-08T00:00:00Z")
    window = resolve_window()
    assert window.start == pd.Timestamp("2024-03-01", tz="UTC")
    explicit = resolve_window("2024-01-01", "2024-01-02")
    assert explicit.end == pd.Timestamp("2024-01-02", tz="UTC")  # arguments win
    _features(project, "ccfraud")
    tx = project.get_feature_store().get_feature_group("transactions", 1).read(start_time=None, end_time=None)
    monkeypatch.delenv("HOPS_START_TIME")
    monkeypatch.delenv("HOPS_END_TIME")
    times = project.get_feature_store().get_feature_group("transactions", 1).read()["event_time"]
    assert len(times) == len(tx)
    assert times.min() >= pd.Timestamp("2024-03-01", tz="UTC")
    assert times.max() < pd.Timestamp("2024-03-08", tz="UTC")


def test_mnist_feature_pipeline_checks_paths(project, tmp_path):
    image_dir = tmp_path / "images"
    _features(project, "mnist", image_dir=str(image_dir))
    frame = project.get_feature_store().get_feature_group("mnist_images", 1).read()
    assert len(frame) == 600 and all(Path(p).exists() for p in frame["image_path"])
    from feature_views.mnist import source as mnist

    missing = mnist.check_paths(frame.assign(image_path=frame["image_path"] + ".moved"))
    assert len(missing) == 600


def test_dataset_training_and_validation_stages(project):
    _features(project, "adult")
    ref = training_dataset.run(project, training_dataset.TrainingDatasetConfig(use_case="adult", seed=3))
    again = training_dataset.run(project, training_dataset.TrainingDatasetConfig(use_case="adult", seed=3))
    assert (again.version, again.reused) == (1, True)  # unchanged inputs: nothing created
    forced = training_dataset.run(project, training_dataset.TrainingDatasetConfig(
        use_case="adult", seed=3, force=True))
    assert (ref.version, forced.version, forced.reused) == (1, 2, False)
    model_ref = training.run(project, training.TrainingPipelineConfig(
        use_case="adult", training_dataset_version=2, model=FAST_MODEL["adult"]))
    model = project.get_model_registry().get_model(model_ref.name, model_ref.version)
    assert model.validation_status == "pending"
    assert model.training_dataset_version == 2 and model.feature_view_name == "adult_income"
    assert model.manifest["lineage"]["training_dataset"]["feature_group_commits"]
    inputs = [c["name"] for c in model.manifest["model_schema"]["input_schema"]["columnar_schema"]]
    assert "sex" not in inputs and "person_id" not in inputs and "workclass" in inputs
    result = model_validation.run(project, model_validation.ModelValidationConfig(
        model_name=model_ref.name, gates=["roc_auc >= 0.6"], replace_gates=True,
        bootstrap_resamples=20, shap_samples=30))
    assert result.status == "passed (policy deviation)"  # replacing the gates deviates
    card = json.loads(Path(result.scorecard_html).with_name("scorecard.json").read_text())
    assert card["gate_selection"]["replaced_defaults"] is True
    assert {s["column"] for s in card["bias"]["slices"]} == {"sex", "race", "age", "sex×race"}
    assert card["threshold"]["chosen_on"] == "validation"
    assert card["evaluation"]["threshold_chosen_on"] == "validation"
    assert (Path(result.scorecard_html).parent / "images" / "roc.png").exists()
    assert project.get_model_registry().get_model(
        model_ref.name, model_ref.version).validation_status == "passed (policy deviation)"
    failed = model_validation.run(project, model_validation.ModelValidationConfig(
        model_name=model_ref.name, version=model_ref.version, gates=["roc_auc >= 0.999"],
        bootstrap_resamples=20, shap_samples=10))
    assert failed.status == "failed"
    assert any(g.startswith("roc_auc >= 0.999 (value ") for g in failed.failing_gates)
    history = project.get_model_registry().get_model(model_ref.name, model_ref.version).history()
    assert [(e["seq"], e.get("status")) for e in history] == [
        (0, None), (1, "passed (policy deviation)"), (2, "failed")]


def test_config_errors_are_clear(project):
    with pytest.raises(NotFoundError, match="Did you mean 'adult'"):
        feature.run(project, feature.FeaturePipelineConfig(use_case="adlt"))
    _features(project, "adult")
    training_dataset.run(project, training_dataset.TrainingDatasetConfig(use_case="adult", seed=1))
    with pytest.raises(ConfigError, match="xgbost"):
        training.run(project, training.TrainingPipelineConfig(
            use_case="adult", training_dataset_version=1, model={"model": "xgbost"}))


def test_strict_policy_stops_bad_data(project, monkeypatch):
    from feature_views.adult import source as adult

    real = adult.load

    def broken(**kwargs):
        frames = real(**kwargs)
        frames["adult_employment"].loc[0, "hours_per_week"] = -5
        return frames

    monkeypatch.setattr(adult, "load", broken)
    with pytest.raises(DataValidationError, match="hours_per_week"):
        _features(project, "adult")


def _last_card(root, name):
    folder = sorted((root / "model_registry" / name / "1" / "history").iterdir())[-1]
    return (folder / "scorecard.json").read_text()


def _cli(root, *args):
    return CliRunner().invoke(app, [*args, "--root", str(root)])


def test_cli_exit_codes_and_json(tmp_path):
    root = tmp_path / "cli"
    assert _cli(root, "features", "adult", "--sample", "2000").exit_code == 0
    out = _cli(root, "dataset", "adult", "--seed", "1", "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)["version"] == 1
    ranked = _cli(root, "select-features", "adult", "-t", "1", "--max-rows", "500", "--json")
    assert ranked.exit_code == 0, ranked.output
    table = json.loads(ranked.stdout)
    assert table["task"] == "classification" and table["rows_used"] == 500
    assert [f["rank"] for f in table["features"]] == list(range(1, len(table["features"]) + 1))
    assert "sex" not in {f["feature"] for f in table["features"]}  # helper columns are not ranked
    text = _cli(root, "select-features", "adult", "-t", "1", "--max-rows", "500")
    assert "mutual" in text.stdout.lower() or "rank" in text.stdout.lower()
    assert _cli(root, "select-features", "adult", "-t", "9").exit_code == 2
    out = _cli(root, "train", "adult", "-t", "1", "--param", "n_estimators=40", "--json")
    assert out.exit_code == 0, out.output
    name = json.loads(out.stdout)["name"]
    added = _cli(root, "validate", f"{name}:1", "--gate", "pr_auc >= 0.1", "--json")
    sources = {g["name"]: g["source"] for g in
               json.loads(added.stdout and _last_card(root, name)) ["gates"]["results"]}
    assert sources["pr_auc >= 0.1"] == "command line"  # --gate adds to the defaults
    assert sources["roc_auc >= 0.85"] == "use-case default"
    assert _cli(root, "validate", f"{name}:1", "--gate", "roc_auc >= 0.5",
                "--replace-gates").exit_code == 4  # passed under a policy deviation
    assert json.loads(_last_card(root, name))["gate_selection"]["replaced_defaults"] is True
    failed = _cli(root, "validate", f"{name}:1", "--gate", "roc_auc >= 0.9999", "--json")
    assert failed.exit_code == 3
    assert "roc_auc >= 0.9999 (value" in json.loads(failed.stdout)["verdict"]
    bad = _cli(root, "train", "adult", "-t", "7")
    assert bad.exit_code == 2 and "Traceback" not in bad.output and "version 7" in bad.output
    assert _cli(root, "features", "nope").exit_code == 2
    listing = _cli(root, "registry", "list", "--json")
    assert json.loads(listing.stdout)[0]["validation_status"] == "failed"
    report = _cli(root, "registry", "report")
    assert report.exit_code == 0 and Path(report.stdout.strip()).exists()


@pytest.mark.parametrize("use_case", ["flights", "ccfraud", pytest.param("mnist", marks=pytest.mark.slow)])
def test_end_to_end_on_a_small_slice(project, use_case):
    _features(project, use_case)
    td = training_dataset.run(project, training_dataset.TrainingDatasetConfig(use_case=use_case))
    ref = training.run(project, training.TrainingPipelineConfig(
        use_case=use_case, training_dataset_version=td.version, model=FAST_MODEL[use_case]))
    result = model_validation.run(project, model_validation.ModelValidationConfig(
        model_name=ref.name, bootstrap_resamples=20, shap_samples=20))
    assert result.status in ("passed", "failed")
    assert result.key_value is not None and result.key_value > (0.55 if use_case != "mnist" else 0.5)
    assert Path(result.scorecard_html).exists()
    model = project.get_model_registry().get_model(ref.name, ref.version)
    assert model.validation_status == result.status
    if use_case != "mnist":
        _assert_no_late_data(project, use_case, ref)


def _assert_no_late_data(project, use_case, ref):
    """The shipped history is loaded in one commit today but declares when its rows became
    known (flights' weather: the end of its hour, joined as known; ccfraud's cc_fraud labels:
    their transaction's time), so the version reports no late rows, the doctor does not flag
    the model, and an as-known join over the group still matches the rows."""
    from fstrain.tools.doctor import diagnose

    report = diagnose(project, f"{ref.name}:{ref.version}", rerun=False)
    finding = {f.check: f for f in report.findings}["late_data"]
    assert finding.severity == "ok", finding.title
    (group,) = finding.evidence["groups"]
    assert group["late"] == 0 and group["matched"] > 0
    fs = project.get_feature_store()
    if use_case == "flights":  # the view itself joins weather as known
        assert group["as_known"] and group["kept_out"] > 0.9 * group["rows"]
        X, _ = fs.get_feature_view("flights_delay", 1).training_data()
        assert "known_at" not in X.columns and X["temp"].notna().mean() > 0.95
    else:
        from feature_views.ccfraud.view import query

        known = fs.create_feature_view("ccfraud_known", version=1, query=query(fs),
                                       labels=["is_fraud"], as_known=True)
        _, y = known.training_data()
        frauds = len(fs.get_feature_group("cc_fraud", 1).read())
        assert frauds > 0 and int(y["is_fraud"].fillna(0).sum()) == frauds


def _adult_dataset(project):
    _features(project, "adult")
    return training_dataset.run(project, training_dataset.TrainingDatasetConfig(use_case="adult", seed=5))


def test_workers_need_a_torch_model(project):
    td = _adult_dataset(project)
    with pytest.raises(ConfigError, match="workers=2 needs a PyTorch model .*, xgboost or "
                                          "lightgbm; 'sklearn_rf'"):
        training.run(project, training.TrainingPipelineConfig(
            use_case="adult", training_dataset_version=td.version, workers=2,
            model={"model": "sklearn_rf", "params": {}}))


@pytest.mark.parametrize("model", ["mlp", "xgboost", "sklearn_rf"])
def test_tune_with_workers_is_refused_not_ignored(model):
    # the tuned refit trains on one process: --workers would be dropped without a word
    with pytest.raises(ValueError, match="ignore --workers"):
        training.TrainingPipelineConfig(use_case="adult", training_dataset_version=1,
                                        tune=True, workers=2, model={"model": model})


def test_num_cpus_sizes_ray_and_is_refused_where_it_would_be_ignored_or_hang():
    def config(**kw):
        return training.TrainingPipelineConfig(use_case="adult", training_dataset_version=1,
                                               model={"model": "mlp"}, **kw)

    assert config(workers=2).ray_cpus == 2 and config(workers=4).ray_cpus == 4
    assert config(workers=2, num_cpus=8).ray_cpus == 8 and config(tune=True).ray_cpus == 2
    with pytest.raises(ValueError, match="single-process run would ignore it"):
        config(num_cpus=4)
    with pytest.raises(ValueError, match="num_cpus=2 is fewer than workers=3"):
        config(workers=3, num_cpus=2)


def test_the_cli_refuses_num_cpus_without_ray(tmp_path):
    from typer.testing import CliRunner

    from fstrain.cli.app import app

    out = CliRunner().invoke(app, ["train", "adult", "-t", "1", "--num-cpus", "4",
                                   "--root", str(tmp_path)])
    assert out.exit_code == 2 and "would ignore it" in out.output


@pytest.mark.slow
def test_tuned_training_registers_the_refit_best_config(project):
    td = _adult_dataset(project)
    ref = training.run(project, training.TrainingPipelineConfig(
        use_case="adult", training_dataset_version=td.version, tune=True,
        model={"params": {"n_estimators": 16}, "tune": {"num_samples": 3, "max_concurrent": 2}}))
    model = project.get_model_registry().get_model(ref.name, ref.version)
    tuning = model.manifest["training_config"]["tuning"]
    assert len(tuning["trials"]) == 3 and tuning["best_metric"] is not None
    # the same vocabulary as an untuned model: the best trial's held-out validation score
    assert model.training_metrics == {"validation_roc_auc": tuning["best_metric"]}
    registry = project.get_model_registry()
    assert registry.get_best_model(ref.name, "roc_auc").version == ref.version
    assert registry.get_best_model(ref.name, "auc", "max").version == ref.version


@pytest.mark.slow
def test_data_parallel_training_through_the_pipeline(project):
    td = _adult_dataset(project)
    ref = training.run(project, training.TrainingPipelineConfig(
        use_case="adult", training_dataset_version=td.version, workers=2,
        model={"model": "mlp", "params": {}, "torch": {"epochs": 2, "batch_size": 128}}))
    model = project.get_model_registry().get_model(ref.name, ref.version)
    assert model.framework == "torch"
    assert model.training_metrics["validation_roc_auc"] > 0.6  # beats chance: 2 epochs, 3k rows


def test_lightgbm_through_training_and_validation(project):
    _features(project, "adult")
    td = training_dataset.run(project, training_dataset.TrainingDatasetConfig(use_case="adult", seed=3))
    model_ref = training.run(project, training.TrainingPipelineConfig(
        use_case="adult", training_dataset_version=td.version,
        model={"model": "lightgbm", "params": {"n_estimators": 60}}))
    model = project.get_model_registry().get_model(model_ref.name, model_ref.version)
    assert model.training_config["trainer"]["model"] == "lightgbm"
    assert model.manifest["libraries"]["lightgbm"] == "4.6.0"
    assert (Path(model.model_path) / "model" / "model.txt").is_file()
    result = model_validation.run(project, model_validation.ModelValidationConfig(
        model_name=model_ref.name, version=model_ref.version, gates=["roc_auc >= 0.6"],
        replace_gates=True, bootstrap_resamples=20, shap_samples=30))
    assert result.status == "passed (policy deviation)"
    card = json.loads(Path(result.scorecard_html).with_name("scorecard.json").read_text())
    assert card["explanation"]["method"].startswith("lightgbm pred_contrib")


@pytest.mark.parametrize("make, message", [
    (lambda: feature.FeaturePipelineConfig(use_case="adult", ingestion_policy="sometimes"),
     r"FeaturePipelineConfig: option 'ingestion_policy'.*'sometimes'"),
    (lambda: training_dataset.TrainingDatasetConfig(use_case="adult", sed=3),
     r"unknown field 'sed'\. Did you mean 'seed'\?"),
    (lambda: training.TrainingPipelineConfig(use_case="adult", training_dataset_version=0),
     r"option 'training_dataset_version'.*greater than or equal to 1; got 0"),
    (lambda: model_validation.ModelValidationConfig.model_validate({}),
     r"ModelValidationConfig: missing field 'model_name'"),
])
def test_pipeline_configs_raise_config_errors_naming_the_option(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


@pytest.mark.parametrize("args, message", [
    (["features", "adult", "--policy", "sometimes"],
     "error: FeaturePipelineConfig: option 'ingestion_policy': Input should be 'always' or "
     "'strict'; got 'sometimes'"),
    (["dataset", "adult", "--data-format", "xml"],
     "error: TrainingDatasetConfig: option 'data_format': Input should be 'parquet', 'csv' or "
     "'jsonl'; got 'xml'"),
    (["train", "adult", "-t", "1", "--track", "wandb"],
     "error: TrainingPipelineConfig: option 'track': Input should be 'mlflow'; got 'wandb'"),
])
def test_cli_options_are_checked_by_the_config_and_named_once(tmp_path, args, message):
    """The CLI passes its string options to the configs' model_validate; pydantic runs the
    configs' own __init__ there, whose ConfigError is raised as it was (it came back wrapped
    in a second ValidationError, its title written twice), and nothing is written."""
    out = _cli(tmp_path / "store", *args)
    assert out.exit_code == 2 and out.output.strip() == message
    assert not (tmp_path / "store").exists()
    with pytest.raises(ConfigError) as raised:
        feature.FeaturePipelineConfig.model_validate({"use_case": "adult", "sample": "many"})
    assert str(raised.value).count("FeaturePipelineConfig") == 1


def test_cross_validation_is_recorded_with_the_model(project):
    _features(project, "adult")
    td = training_dataset.run(project, training_dataset.TrainingDatasetConfig(use_case="adult", seed=3))
    ref = training.run(project, training.TrainingPipelineConfig(
        use_case="adult", training_dataset_version=td.version, model=FAST_MODEL["adult"], cv=3))
    model = project.get_model_registry().get_model(ref.name, ref.version)
    cv = model.training_config["cross_validation"]
    assert cv["k"] == 3 and cv["metric"] == "auc" and cv["stratified"]
    assert 0.6 < cv["summary"]["auc"]["mean"] <= 1.0
    train_rows = len(project.get_feature_store().get_feature_view("adult_income", 1)
                     .get_train_validation_test_split(td.version)[0])
    assert sum(f["val_rows"] for f in cv["folds"]) == train_rows
    from fstrain.cli.train import _folds_summary  # the train command's line for it

    payload: dict = {}
    line = _folds_summary(project, ref, payload, "cross_validation", "cross-validation ({k} folds)")
    mean, std = cv["summary"]["auc"]["mean"], cv["summary"]["auc"]["std"]
    assert line == f"\ncross-validation (3 folds): auc {mean:.4f} ± {std:.4f}"
    assert payload == {"cross_validation": cv["summary"]}
    with pytest.raises(ConfigError, match="option 'cv'"):
        training.TrainingPipelineConfig(use_case="adult", training_dataset_version=1, cv=1)
