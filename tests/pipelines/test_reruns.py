"""Scheduled re-runs and honest output, through the real CLI on real embedded stores: a re-run
on unchanged inputs creates nothing and says so, `fstrain run` exits as `validate` does, label
windows on `fstrain dataset` (never from HOPS_*), windows refused where there is no event time,
the effective trainer configuration shown, and help readable at 80 columns.

The stores are shared: the session's adult store (copied where a test adds to it) and one small
airquality store per module, trained and validated once with a gate it fails."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from typer.testing import CliRunner

from fstrain.cli.app import app


def _cli(root, *args, env=None):
    return CliRunner().invoke(app, [*args, "--root", str(root)], env=env)


def _json(result):
    return json.loads(result.output[result.output.index("{"):])


@pytest.fixture(scope="module")
def airquality_store(tmp_path_factory):
    """airquality's four pipelines once (153 rows): training dataset v1, model
    air_quality_ozone:1, validated once with an extra gate it fails (rmse <= 0.01)."""
    import feature_store
    from pipelines import feature, model_validation, training, training_dataset

    root = tmp_path_factory.mktemp("airquality_reruns") / "store"
    project = feature_store.login(backend="local", root=root)
    feature.run(project, feature.FeaturePipelineConfig(use_case="airquality"))
    td = training_dataset.run(project, training_dataset.TrainingDatasetConfig(use_case="airquality"))
    ref = training.run(project, training.TrainingPipelineConfig(
        use_case="airquality", training_dataset_version=td.version))
    model_validation.run(project, model_validation.ModelValidationConfig(
        model_name=ref.name, version=ref.version, gates=["rmse <= 0.01"], gate_source="command line",
        bootstrap_resamples=20, shap_samples=20))
    return root


@pytest.fixture
def aq_copy(airquality_store, tmp_path):
    target = tmp_path / "aq"
    shutil.copytree(airquality_store, target)
    return target


def _versions(root):
    import feature_store

    project = feature_store.login(backend="local", root=root)
    fv = project.get_feature_store().get_feature_view("air_quality_ozone", 1)
    model = project.get_model_registry().get_model("air_quality_ozone", 1)
    return ([td.version for td in fv.get_training_datasets()],
            [m.version for m in project.get_model_registry().get_models("air_quality_ozone")],
            len(model.history()))


def test_run_on_unchanged_inputs_creates_nothing_and_exits_with_the_latest_validation(aq_copy):
    before = _versions(aq_copy)
    result = _cli(aq_copy, "run", "airquality", "--json")
    assert result.exit_code == 3, result.output  # its latest validation failed, as validate's
    row = _json(result)
    assert row["reused"] is True and row["status"] == "failed"
    assert row["training_dataset_version"] == 1 and row["model"] == "air_quality_ozone:1"
    assert "rmse <= 0.01" in row["verdict"]
    assert _versions(aq_copy) == before  # no version, no model, no validation run


def test_dataset_and_train_stages_reuse_unless_forced(adult_store, adult_copy):
    same = _cli(adult_copy, "dataset", "adult", "--json")
    assert same.exit_code == 0, same.output
    assert _json(same) == {"feature_view": "adult_income", "feature_view_version": 1,
                           "version": adult_store.training_dataset_version, "reused": True}
    human = _cli(adult_copy, "dataset", "adult", "--seed", "42")  # the use case's own seed
    assert human.exit_code == 0, human.output
    assert human.output.startswith(
        f"feature view adult_income v1 → training dataset v{adult_store.training_dataset_version}"
        " (reused")
    trained = _cli(adult_copy, "train", "adult", "-t", "1", "--param", "n_estimators=60", "--json")
    assert trained.exit_code == 0, trained.output
    assert _json(trained) == {"name": adult_store.name, "version": adult_store.version,
                              "reused": True, "validation_status": "failed"}
    # a train job on unchanged inputs runs no chained validation: the latest one stands
    local = ["--root", str(adult_copy), "--json"]
    job = CliRunner().invoke(app, ["jobs", "exec", "train", "adult", "-t", "1", "--param",
                                   "n_estimators=60", *local, "--then", "validate", "{model}",
                                   *local])
    assert job.exit_code == 3, job.output  # as validate exits on that failed run
    import feature_store

    model = feature_store.login(root=adult_copy).get_model_registry().get_model(
        adult_store.name, adult_store.version)
    assert [e["kind"] for e in model.history()] == ["creation", "validation"]
    forced = _cli(adult_copy, "dataset", "adult", "--force", "--json")
    assert forced.exit_code == 0, forced.output
    assert _json(forced)["version"] == adult_store.training_dataset_version + 1
    assert _json(forced)["reused"] is False


def test_dataset_label_window_filters_by_event_time_and_never_reads_hops(aq_copy):
    hops = {"HOPS_START_TIME": "1973-08-01T00:00:00Z", "HOPS_END_TIME": "1973-09-01T00:00:00Z"}
    scheduled = _cli(aq_copy, "dataset", "airquality", "--json", env=hops)
    assert scheduled.exit_code == 0, scheduled.output
    assert _json(scheduled)["version"] == 1 and _json(scheduled)["reused"] is True
    windowed = _cli(aq_copy, "dataset", "airquality", "--start", "1973-06-01")
    assert windowed.exit_code == 0, windowed.output
    assert "training dataset v2" in windowed.output
    assert "open end: every row from 1973-06-01T00:00:00+00:00 on" in windowed.output
    import feature_store

    fv = feature_store.login(root=aq_copy).get_feature_store().get_feature_view(
        "air_quality_ozone", 1)
    first = {v: min(X["date"].min() for X in
                    fv.get_train_validation_test_split(v, event_time=True)[:3]).strftime("%Y-%m-%d")
             for v in (1, 2)}
    assert first[1] < "1973-06-01" <= first[2]  # v1 has May's labels, v2 none before June
    again = _cli(aq_copy, "dataset", "airquality", "--start", "1973-06-01", "--json")
    assert _json(again) == {**_json(again), "version": 2, "reused": True}


def test_a_window_or_time_split_without_event_time_is_refused(tmp_path):
    for args in (("features", "adult", "--start", "2024-01-01"),
                 ("dataset", "adult", "--end", "2024-01-01"),
                 ("run", "adult", "--start", "2024-01-01", "--end", "2024-02-01"),
                 ("dataset", "adult", "--split", "time")):
        result = _cli(tmp_path / "store", *args)  # refused before any work
        assert result.exit_code == 2, (args, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "'adult' has no event time" in lines[0], (args, lines)
        assert "{" not in lines[0]  # a plain sentence, no internal spec


def test_the_scheduler_window_on_a_use_case_without_event_time_is_said_not_to_apply(adult_copy):
    hops = {"HOPS_START_TIME": "2024-01-01T00:00:00Z", "HOPS_END_TIME": "2024-02-01T00:00:00Z"}
    result = _cli(adult_copy, "features", "adult", "--sample", "3000", env=hops)  # as the workflow
    assert result.exit_code == 0, result.output
    assert ("use case 'adult' has no event time: the scheduler window "
            "[2024-01-01T00:00:00+00:00, 2024-02-01T00:00:00+00:00) from "
            "HOPS_START_TIME/HOPS_END_TIME does not apply; every row is loaded") in result.output


def test_scheduler_variables_that_cannot_be_read_are_named(tmp_path):
    garbage = _cli(tmp_path / "s", "features", "ccfraud", env={"HOPS_START_TIME": "garbage"})
    assert garbage.exit_code == 2 and "HOPS_START_TIME must be" in garbage.output, garbage.output
    anchor = _cli(tmp_path / "none", "dataset", "ccfraud", "--anchor", "end-time",
                  env={"HOPS_END_TIME": "soon"})  # named before the (missing) store is opened
    assert anchor.exit_code == 2 and "HOPS_END_TIME" in anchor.output, anchor.output


def test_empty_window_said_once_and_an_open_window_says_what_it_means(aq_copy):
    empty = _cli(aq_copy, "run", "airquality", "--start", "1980-01-01", "--end", "1980-02-01")
    assert empty.exit_code == 0, empty.output
    assert empty.output.count("holds no rows") == 1, empty.output
    open_end = _cli(aq_copy, "features", "airquality", "--start", "1973-09-01")
    assert open_end.exit_code == 0, open_end.output
    assert "[1973-09-01T00:00:00+00:00, +inf) (open end: every row from" in open_end.output
    for command in ("features", "run", "dataset"):
        assert "window is open" in _cli(aq_copy, command, "--help").output.replace("\n  ", " ")


def test_the_workflow_offers_every_use_case():
    from pathlib import Path

    from feature_views import USE_CASES

    workflow = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "pipelines.yml"
    inputs = yaml.safe_load(workflow.read_text())[True]["workflow_dispatch"]["inputs"]
    assert inputs["use_case"]["options"] == list(USE_CASES)


def test_the_effective_trainer_configuration_is_shown(adult_store):
    shown = _cli(adult_store.root, "train", "adult", "-t", "1", "--show-config", "--json")
    assert shown.exit_code == 0, shown.output
    payload = _json(shown)
    assert payload["trainer"]["params"]["n_estimators"] == 300  # the use case's default
    assert payload["demo_overrides"] == {"model": {"params": {"n_estimators": 150}}}["model"]
    human = _cli(adult_store.root, "train", "adult", "-t", "1", "--show-config",
                 "--param", "max_depth=3")
    assert "max_depth: 3" in human.output and "params.n_estimators=150" in human.output
    show = _cli(adult_store.root, "registry", "show", f"{adult_store.name}:{adult_store.version}")
    assert show.exit_code == 0, show.output
    assert "trained with: model=xgboost" in show.output
    assert "differs from the use case's defaults: params.n_estimators=60 (default 300)" in show.output


def test_every_command_help_is_readable_at_80_columns():
    """Every command's help, rendered at 80 columns, shows each option's full name. Typer
    ships its own copy of click (``typer._click``), so options are recognised by their
    ``param_type_name``, not by ``isinstance`` against the separately installed click (which
    matched none and left the check empty); the count of names checked guards that."""
    import click.testing
    import typer

    def commands(command, path):
        yield path, command
        if hasattr(command, "list_commands"):
            context = command.make_context("fstrain", [], resilient_parsing=True)
            for name in command.list_commands(context):
                yield from commands(command.get_command(context, name), [*path, name])

    root = typer.main.get_command(app)
    checked = names = 0
    for path, command in commands(root, []):
        result = click.testing.CliRunner().invoke(root, [*path, "--help"], env={"COLUMNS": "80"},
                                    terminal_width=80, prog_name="fstrain")
        assert result.exit_code == 0, (path, result.output)
        assert "…" not in result.output, (path, result.output)
        for param in command.params:
            if param.param_type_name == "option" and not param.hidden:
                for name in param.opts:
                    assert name in result.output, (path, name)
                    names += 1
        assert max(len(line) for line in result.output.splitlines()) <= 80, path
        checked += 1
    assert checked > 40
    assert names > 200, names  # long option names of every command, each found in its help
