"""``fstrain jobs``: job definitions per stage, cron conversion, aliases, errors (dry run), and
what ``deploy``/``run`` send to a (fake) job API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from feature_store.hopsworks.jobs import HopsworksJobs
from fstrain.kernel.errors import ConfigError
from fstrain.cli import jobs
from fstrain.cli.app import app
from fstrain.cli.jobs import jobs_app, to_quartz

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "pipelines" / "jobs_example.yaml"


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(jobs_app, list(args))


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _config(**overrides: Any) -> dict:
    data = {"use_case": "ccfraud", "project": "fraud", "schedule": "@daily",
            "stages": {"features": {}, "dataset": {},
                       "train": {"args": {"training_dataset_version": 3}}, "validate": {}}}
    data.update(overrides)
    return data


def test_dry_run_prints_one_python_job_per_stage():
    result = _invoke("deploy", str(EXAMPLE), "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    defs = json.loads(result.output)
    assert [d["stage"] for d in defs] == ["features", "dataset", "train", "validate"]
    assert [d["name"] for d in defs] == [f"fstrain_ccfraud_{s}" for s in
                                         ("features", "dataset", "train", "validate")]
    for d in defs:
        cfg = d["config"]
        assert cfg["jobType"] == "PYTHON"
        assert cfg["appPath"] == "hdfs:///Projects/fraud_detection/Resources/jobs/fstrain_job.py"
        assert cfg["environmentName"] == "fstrain-pipeline"
        assert cfg["defaultArgs"].split()[0] == d["stage"]
        assert "--backend hopsworks" in cfg["defaultArgs"]
        assert "--start" not in cfg["defaultArgs"] and "--end" not in cfg["defaultArgs"]
        assert set(cfg["resourceConfig"]) == {"memory", "cores", "gpus"}
    by_stage = {d["stage"]: d for d in defs}
    assert by_stage["features"]["config"]["defaultArgs"] == (
        "features ccfraud --policy strict --n-transactions 100000 --backend hopsworks --json")
    assert by_stage["features"]["schedule"]["cron_expression"] == "0 0 * ? * * *"
    assert by_stage["dataset"]["schedule"] == {"cron_expression": "0 0 0 ? * SUN *",
                                               "source": "@weekly", "start_time": None}
    assert by_stage["train"]["config"]["resourceConfig"] == {"memory": 8192, "cores": 4.0, "gpus": 0}
    assert by_stage["train"]["config"]["defaultArgs"] == (
        "train ccfraud --training-dataset-version latest --backend hopsworks --json "
        "--then validate '{model}' --backend hopsworks --json")
    # the validate job validates the version it is given; train runs it on its own model
    assert by_stage["validate"]["config"]["defaultArgs"] == (
        "validate ccfraud_xgb --backend hopsworks --json")
    assert by_stage["validate"]["schedule"] is None


@pytest.mark.parametrize(
    ("alias", "quartz"),
    [("@hourly", "0 0 * ? * * *"), ("@daily", "0 0 0 ? * * *"), ("@DAILY", "0 0 0 ? * * *"),
     ("@weekly", "0 0 0 ? * SUN *"), ("@monthly", "0 0 0 1 * ? *"), ("@yearly", "0 0 0 1 1 ? *"),
     ("0 0 12 * * ?", "0 0 12 * * ? *"), ("0 15 10 ? * mon-fri", "0 15 10 ? * MON-FRI *"),
     ("0 0/5 14,18 * * ? 2030", "0 0/5 14,18 * * ? 2030"), ("0 0 0 L * ?", "0 0 0 L * ? *"),
     ("0 0 9 ? * 6#3", "0 0 9 ? * 6#3 *")],
)
def test_schedules_convert_to_seven_field_quartz(alias, quartz):
    assert to_quartz(alias) == quartz


@pytest.mark.parametrize(
    ("cron", "message"),
    [("0 0 * * *", "5 fields, like a Unix cron.*'0 0 0 \\* \\* \\? \\*'"),
     ("@fortnightly", "unknown alias"),
     ("0 0 25 * * ?", "hours field '25'.*outside 0-23"),
     ("0 60 * ? * *", "minutes field '60'"),
     ("0 0 0 * * *", "exactly one of day-of-month"),
     ("0 0 0 ? * ?", "exactly one of day-of-month"),
     ("0 0 5-2 ? * *", "runs backwards"),
     ("0 0 */0 ? * *", "step '0'"),
     ("0 0 0 ? FOO * *", "month field 'FOO'"),
     ("0 ? 0 1 * ?", "only allowed in day-of-month"),
     ("0 0 0 ? * * * *", "6 or 7 fields"),
     ("", "Quartz cron expression or an @alias")],
)
def test_bad_cron_expressions_are_rejected_clearly(cron, message):
    with pytest.raises(ConfigError, match=message):
        to_quartz(cron)


def test_bad_cron_in_yaml_names_the_stage_and_exits_2(tmp_path):
    data = _config()
    data["stages"]["dataset"] = {"schedule": "0 0 25 * * ?"}
    result = _invoke("deploy", str(_write(tmp_path, data)), "--dry-run")
    assert result.exit_code == 2
    assert "stages.dataset.schedule" in result.output and "hours field '25'" in result.output
    assert "Traceback" not in result.output


def test_stage_schedule_null_means_unscheduled_and_default_is_inherited(tmp_path):
    data = _config()
    data["stages"]["validate"] = {"schedule": None}
    defs = jobs.job_definitions(jobs.load_config(_write(tmp_path, data)))
    by_stage = {d["stage"]: d for d in defs}
    assert by_stage["validate"]["schedule"] is None
    assert by_stage["features"]["schedule"]["cron_expression"] == "0 0 0 ? * * *"
    assert "--training-dataset-version 3" in by_stage["train"]["config"]["defaultArgs"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("use_case"), "missing field 'use_case'"),
        (lambda d: d.pop("stages"), "missing field 'stages'"),
        (lambda d: d.update(stages={}), "stages"),
        (lambda d: d.update(use_case="taxi"), "use case must be one of"),
        (lambda d: d.update(color="red"), "unknown field 'color'"),
        (lambda d: d["stages"].update(deploy={}), "stages.deploy"),
        (lambda d: d["stages"]["train"].update(args={}), "training_dataset_version"),
        (lambda d: d["stages"]["features"].update(args={"start": "2024-01-01"}),
         "argument 'start' is not allowed.*HOPS_START_TIME"),
        (lambda d: d["stages"]["features"].update(resources={"memory": 10}), "memory"),
        (lambda d: d.update(job_prefix="bad name"), "job_prefix"),
    ],
)
def test_missing_or_bad_fields_are_named(tmp_path, monkeypatch, mutate, message):
    data = _config()
    mutate(data)
    with pytest.raises(ConfigError, match=message):
        jobs.job_definitions(jobs.load_config(_write(tmp_path, data)))


def test_project_is_required_unless_in_the_environment(tmp_path, monkeypatch):
    data = _config()
    data.pop("project")
    path = _write(tmp_path, data)
    monkeypatch.delenv("HOPSWORKS_PROJECT", raising=False)
    with pytest.raises(ConfigError, match="missing field 'project'"):
        jobs.load_config(path)
    monkeypatch.setenv("HOPSWORKS_PROJECT", "envproj")
    defs = jobs.job_definitions(jobs.load_config(path))
    assert defs[0]["config"]["appPath"].startswith("hdfs:///Projects/envproj/")


def test_run_dry_run_window_and_errors():
    ok = _invoke("run", "fstrain_ccfraud_features", "--start", "2024-01-01",
                 "--end", "2024-01-02", "--dry-run")
    assert ok.exit_code == 0, ok.output
    plan = json.loads(ok.output)
    assert plan["start_time"].startswith("2024-01-01T00:00:00")
    assert plan["end_time"].startswith("2024-01-02T00:00:00")
    half = _invoke("run", "x", "--start", "2024-01-01", "--dry-run")
    assert half.exit_code == 2 and "both --start and --end" in half.output
    backwards = _invoke("run", "x", "--start", "2024-01-02", "--end", "2024-01-01", "--dry-run")
    assert backwards.exit_code == 2 and "before its end" in backwards.output


def test_list_dry_run_shows_names_and_schedules():
    result = _invoke("list", str(EXAMPLE), "--dry-run")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert rows[0] == {"name": "fstrain_ccfraud_features", "schedule": "0 0 * ? * * *",
                       "command": "fstrain jobs exec features ccfraud --policy strict "
                                  "--n-transactions 100000 --backend hopsworks --json"}


# -- deploy and run against a fake SDK (shapes checked by sdk_call against the table) ----------


class FakeSchedule:
    cron_expression = "0 0 0 ? * * *"
    enabled = True


class FakeExecution:
    id, state, final_status = 1, "INITIALIZING", "UNDEFINED"


class FakeJob:
    def __init__(self, name: str, log: list, scheduled: bool) -> None:
        self.name, self.log = name, log
        self.config: dict = {}
        self.job_schedule = FakeSchedule() if scheduled else None

    def schedule(self, cron_expression: str, start_time: Any = None, **kwargs: Any) -> None:
        self.log.append(("schedule", self.name, cron_expression, start_time))

    def unschedule(self) -> None:
        self.log.append(("unschedule", self.name))

    def run(self, args: Any = None, await_termination: bool = True, *, start_time: Any = None,
            end_time: Any = None) -> str:
        self.log.append(("run", self.name, await_termination, start_time, end_time))
        return FakeExecution()


class FakeJobApi:
    def __init__(self, log: list) -> None:
        self.log = log

    def get_configuration(self, type: str) -> dict:
        self.log.append(("get_configuration", type))
        return {"type": "pythonJobConfiguration", "appPath": None, "files": None}

    def create_job(self, name: str, config: dict) -> FakeJob:
        self.log.append(("create_job", name, config))
        return FakeJob(name, self.log, scheduled=True)

    def get_job(self, name: str) -> FakeJob | None:
        return FakeJob(name, self.log, scheduled=False) if name.startswith("fstrain_") else None


class FakeDatasetApi:
    def __init__(self, log: list) -> None:
        self.log = log

    def exists(self, path: str) -> bool:
        return False

    def mkdir(self, path: str) -> str:
        self.log.append(("mkdir", path))
        return path

    def upload(self, local_path: str, upload_path: str, overwrite: bool = False) -> str:
        self.log.append(("upload", Path(local_path).read_text(), upload_path, overwrite))
        return upload_path


class FakeProject:
    name = "fraud"

    def __init__(self) -> None:
        self.log: list = []

    def get_job_api(self) -> FakeJobApi:
        return FakeJobApi(self.log)

    def get_dataset_api(self) -> FakeDatasetApi:
        return FakeDatasetApi(self.log)

    def get_jobs(self) -> HopsworksJobs:
        return HopsworksJobs(self)


def test_deploy_uploads_the_entry_script_then_upserts_jobs_and_schedules(tmp_path):
    data = _config(schedule_start="2024-01-01T00:00:00+00:00")
    data["stages"]["validate"] = {"schedule": None}
    project = FakeProject()
    results = jobs.deploy(project, jobs.job_definitions(jobs.load_config(_write(tmp_path, data))))
    log = project.log
    assert log[0] == ("mkdir", "/Projects/fraud/Resources/jobs")
    assert log[1][0] == "upload" and "job_main" in log[1][1] and log[1][2:] == ("/Projects/fraud/Resources/jobs", True)
    created = [e for e in log if e[0] == "create_job"]
    assert [e[1] for e in created] == [f"fstrain_ccfraud_{s}" for s in
                                       ("features", "dataset", "train", "validate")]
    config = created[0][2]
    assert config["files"] is None  # server defaults kept, ours merged over them
    assert config["appPath"].endswith("/Resources/jobs/fstrain_job.py")
    schedules = [e for e in log if e[0] == "schedule"]
    assert len(schedules) == 3 and schedules[0][2] == "0 0 0 ? * * *"
    assert schedules[0][3].isoformat() == "2024-01-01T00:00:00+00:00"
    assert ("unschedule", "fstrain_ccfraud_validate") in log
    assert results["jobs"][3] == {"name": "fstrain_ccfraud_validate", "schedule": None}


def test_run_passes_the_backfill_window_to_the_job():
    project = FakeProject()
    plan = jobs.run_definition("fstrain_ccfraud_features", "2024-01-01", "2024-01-02", False)
    out = jobs.run_job(project, plan)
    (_, name, wait, start, end), = [e for e in project.log if e[0] == "run"]
    assert (name, wait) == ("fstrain_ccfraud_features", False)
    assert (start.isoformat(), end.isoformat()) == ("2024-01-01T00:00:00+00:00",
                                                    "2024-01-02T00:00:00+00:00")
    assert out["execution"] == {"id": 1, "state": "INITIALIZING", "final_status": "UNDEFINED"}
    from fstrain.kernel.errors import NotFoundError

    with pytest.raises(NotFoundError, match="fstrain jobs deploy"):
        jobs.run_job(project, jobs.run_definition("other", None, None, True))


def test_entry_script_runs_the_fstrain_cli(tmp_path, monkeypatch):
    compile(jobs.ENTRY_SCRIPT_TEXT, "fstrain_job.py", "exec")
    assert jobs.job_main(["--help"], app) == 0
    # a user error in a stage is the CLI's exit code 2, so the Hopsworks execution fails
    code = jobs.job_main(["dataset", "taxi", "--root", str(tmp_path), "--backend", "local"], app)
    assert code == 2


# -- stages hand exact refs on ------------------------------------------------------------------


def test_train_job_validates_the_version_it_registered(adult_store, adult_copy):
    """The train job's arguments chain validation on the exact NAME:VERSION it registered
    (run here on the local backend, on a copy of the session's adult store: the chaining is
    the same code a Hopsworks job runs)."""
    import feature_store
    from fstrain.cli.app import app

    local = ["--root", str(adult_copy), "--backend", "local", "--json"]
    name, first = adult_store.name, adult_store.version
    status = feature_store.login(root=adult_copy).get_model_registry().get_model(
        name, first).validation_status
    chained = CliRunner().invoke(app, [
        "jobs", "exec", "train", "adult", "-t", str(adult_store.training_dataset_version),
        "--param", "n_estimators=20", *local, "--then", "validate", "{model}",  # 60 in the store
        "--gate", "roc_auc >= 0.5", "--replace-gates", *local])
    assert chained.exit_code == 4, chained.output  # --replace-gates: a policy deviation
    trained = json.loads(chained.stdout[:chained.stdout.index("\n}\n") + 2])
    assert trained == {"name": name, "version": first + 1, "reused": False}
    registry = feature_store.login(root=adult_copy).get_model_registry()
    assert registry.get_model(name, first + 1).validation_status == "passed (policy deviation)"
    assert registry.get_model(name, first).validation_status == status  # not touched


def test_a_validate_job_refuses_to_guess_the_version():
    code = jobs.job_main(["validate", "ccfraud_xgb", "--backend", "hopsworks", "--json"], app)
    assert code == 2
    assert jobs.job_main(["validate", "{model}", "--backend", "hopsworks"], app) == 2


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["stages"]["validate"].update(schedule="@daily"),
         "stages.validate.schedule must be null"),
        (lambda d: d["stages"]["validate"].update(args={"version": 3}),
         "version cannot be set when the config has a train stage"),
        (lambda d: d["stages"].pop("train"), "needs args.version"),
    ],
)
def test_validate_stage_rules(tmp_path, mutate, message):
    data = _config()
    mutate(data)
    with pytest.raises(ConfigError, match=message):
        jobs.job_definitions(jobs.load_config(_write(tmp_path, data)))


def test_validate_alone_validates_the_version_it_names(tmp_path):
    data = _config(stages={"validate": {"args": {"version": 4, "gate": "roc_auc >= 0.8"}}})
    (definition,) = jobs.job_definitions(jobs.load_config(_write(tmp_path, data)))
    assert definition["config"]["defaultArgs"] == (
        "validate ccfraud_xgb:4 --gate 'roc_auc >= 0.8' --backend hopsworks --json")


def test_dry_run_prints_commands_a_user_can_paste(tmp_path):
    import shlex

    result = _invoke("deploy", str(EXAMPLE), "--dry-run", "--project", "other")
    assert result.exit_code == 0, result.output
    commands = [line for line in result.output.splitlines() if not line.startswith("#")]
    assert commands[0] == "export HOPSWORKS_PROJECT=other"
    for line in commands[1:]:
        assert shlex.split(line)[:3] == ["fstrain", "jobs", "exec"], line
    assert "fstrain jobs exec train ccfraud --training-dataset-version latest" in result.output
    assert "validate ccfraud_xgb:VERSION" in result.output


def test_project_option_and_yaml_project_reach_the_login(tmp_path, monkeypatch):
    """`--project` beats the YAML's `project:`, which beats $HOPSWORKS_PROJECT, for deploy,
    list and run (the login names the project it tried)."""
    monkeypatch.setenv("HOPSWORKS_HOST", "127.0.0.1:1")
    monkeypatch.setenv("HOPSWORKS_API_KEY", "key")
    monkeypatch.setenv("HOPSWORKS_PROJECT", "from_env")
    monkeypatch.setenv("HOPSWORKS_LOGIN_TIMEOUT", "1")
    seen = []
    import feature_store

    real_login = feature_store.login

    def recording_login(**kwargs: Any) -> Any:
        seen.append(kwargs.get("project"))
        return real_login(**kwargs)

    monkeypatch.setattr(feature_store, "login", recording_login)
    path = _write(tmp_path, _config(project="from_yaml"))
    for argv, expected in [
        (["deploy", str(path)], "from_yaml"),
        (["deploy", str(path), "--project", "from_flag"], "from_flag"),
        (["list", str(path)], "from_yaml"),
        (["list", "--project", "from_flag"], "from_flag"),
        (["run", "fstrain_ccfraud_features", "--project", "from_flag"], "from_flag"),
    ]:
        result = _invoke(*argv)
        assert result.exit_code == 2 and "cannot reach Hopsworks" in result.output, result.output
        assert seen[-1] == expected, argv


@pytest.mark.parametrize(
    ("use_case", "args", "anchored"),
    [("ccfraud", {}, True), ("flights", {}, True),  # relative default splits
     ("ccfraud", {"anchor": "2024-07-01"}, False),  # the user's anchor is kept
     ("ccfraud", {"split": "random", "test_size": 0.2, "validation_size": 0.1}, False),
     ("adult", {}, False)],  # a stratified split needs no anchor
)
def test_dataset_jobs_anchor_relative_windows_at_the_scheduled_window_end(tmp_path, use_case,
                                                                          args, anchored):
    """Hopsworks cannot read the data's last event time from a job: a relative split is anchored
    at HOPS_END_TIME (`--anchor end-time`) unless the config says otherwise."""
    data = _config(use_case=use_case, stages={"dataset": {"args": args}})
    (defn,) = jobs.job_definitions(jobs.load_config(_write(tmp_path, data)))
    default_args = defn["config"]["defaultArgs"]
    assert ("--anchor end-time" in default_args) is anchored
    if "anchor" in args:
        assert f"--anchor {args['anchor']}" in default_args
