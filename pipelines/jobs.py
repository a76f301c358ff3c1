"""``fstrain jobs``: deploy the pipeline stages as scheduled Hopsworks jobs.

One YAML file names a use case, its stages, their schedules and resources::

    use_case: ccfraud
    project: fraud                       # Hopsworks project (default $HOPSWORKS_PROJECT)
    environment: python-feature-pipeline # Python environment the jobs run in
    schedule: "@daily"                   # default for every stage
    resources: {memory: 2048, cores: 1, gpus: 0}
    stages:
      features: {schedule: "@hourly", args: {policy: strict}}
      dataset:  {schedule: "@weekly"}
      train:    {schedule: "@weekly", args: {training_dataset_version: latest}}
      validate: {schedule: null}         # unscheduled: run by hand or by a trigger

``deploy`` creates or updates (Hopsworks' ``create_job`` is a PUT upsert) one ``PYTHON`` job per
stage, named ``<prefix>_<stage>``, whose ``appPath`` is the uploaded entry script
``hdfs:///Projects/<project>/Resources/jobs/fstrain_job.py`` and whose ``defaultArgs`` are the
``fstrain <stage> ...`` arguments, then sets its Quartz schedule (seconds first, e.g.
``"0 0 * ? * * *"``; ``@hourly``/``@daily``/``@weekly``/``@monthly``/``@yearly`` are accepted).
Job arguments never fix ``--start``/``--end``: every stage reads its window from
``HOPS_START_TIME``/``HOPS_END_TIME``, which the scheduler sets per run and ``run --start --end``
sets for a backfill. ``--dry-run`` prints the definitions as JSON without connecting.
"""

from __future__ import annotations

import json
import re
import shlex
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fstrain.kernel.errors import ConfigError
from pipelines.config_base import validation_message

STAGES = ("features", "dataset", "train", "validate")
ENTRY_SCRIPT = "fstrain_job.py"
JOBS_DIR = "Resources/jobs"
DEFAULT_ENVIRONMENT = "python-feature-pipeline"

#: ``@alias`` → Quartz cron (seconds minutes hours day-of-month month day-of-week year).
CRON_ALIASES = {
    "@hourly": "0 0 * ? * * *",
    "@daily": "0 0 0 ? * * *",
    "@midnight": "0 0 0 ? * * *",
    "@weekly": "0 0 0 ? * SUN *",
    "@monthly": "0 0 0 1 * ? *",
    "@yearly": "0 0 0 1 1 ? *",
    "@annually": "0 0 0 1 1 ? *",
}
_MONTHS = {m: i + 1 for i, m in enumerate(
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"])}
_DAYS = {d: i + 1 for i, d in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
#: (field name, lowest, highest, names)
_FIELDS = (
    ("seconds", 0, 59, {}), ("minutes", 0, 59, {}), ("hours", 0, 23, {}),
    ("day-of-month", 1, 31, {}), ("month", 1, 12, _MONTHS), ("day-of-week", 1, 7, _DAYS),
    ("year", 1970, 2099, {}),
)
_FORBIDDEN_ARGS = {
    "start": "the window comes from HOPS_START_TIME/HOPS_END_TIME (use `fstrain jobs run "
             "NAME --start ... --end ...` for a backfill)",
    "end": "the window comes from HOPS_START_TIME/HOPS_END_TIME (use `fstrain jobs run "
           "NAME --start ... --end ...` for a backfill)",
    "backend": "jobs always run with --backend hopsworks",
    "root": "jobs keep their local cache in the job's working directory",
}


# -- cron --------------------------------------------------------------------------------------


def to_quartz(expression: str) -> str:
    """A validated 7-field Quartz cron expression for ``expression`` (or an ``@alias``).

    Raises :class:`ConfigError` naming the bad field and value.
    """
    if not isinstance(expression, str) or not expression.strip():
        raise ConfigError(f"schedule must be a Quartz cron expression or an @alias. Got {expression!r} instead.")
    text = expression.strip()
    if text.startswith("@"):
        alias = CRON_ALIASES.get(text.lower())
        if alias is None:
            raise ConfigError(
                f"schedule {expression!r}: unknown alias. Use one of {', '.join(CRON_ALIASES)} "
                "or a Quartz cron expression such as '0 0 * ? * * *'."
            )
        return alias
    fields = text.upper().split()
    if len(fields) == 5:
        minute, hour, dom, month, dow = fields
        dom, dow = (dom, "?") if dow == "*" else ("?", dow)
        raise ConfigError(
            f"schedule {expression!r} has 5 fields, like a Unix cron. Hopsworks uses Quartz cron: "
            "seconds minutes hours day-of-month month day-of-week [year], with '?' in one of the "
            f"day fields; probably '0 {minute} {hour} {dom} {month} {dow} *' (Quartz counts "
            "days of the week 1=SUN..7=SAT)."
        )
    if len(fields) not in (6, 7):
        raise ConfigError(
            f"schedule {expression!r} must have 6 or 7 fields (seconds minutes hours "
            f"day-of-month month day-of-week [year]). Got {len(fields)} instead."
        )
    if len(fields) == 6:
        fields.append("*")
    for value, (name, lo, hi, names) in zip(fields, _FIELDS, strict=True):
        _check_field(expression, name, value, lo, hi, names)
    dom, dow = fields[3], fields[5]
    if (dom == "?") == (dow == "?"):
        raise ConfigError(
            f"schedule {expression!r}: exactly one of day-of-month ({dom!r}) and day-of-week "
            f"({dow!r}) must be '?' in Quartz cron, e.g. '0 0 0 ? * * *' (daily) or "
            "'0 0 0 1 * ? *' (monthly)."
        )
    return " ".join(fields)


def _check_field(expression: str, name: str, value: str, lo: int, hi: int,
                 names: dict[str, int]) -> None:
    def bad(why: str) -> ConfigError:
        return ConfigError(
            f"schedule {expression!r}: {name} field {value!r} is invalid ({why}). Allowed: "
            f"{lo}-{hi}{', names ' + '/'.join(names) if names else ''}, '*', ranges a-b, "
            "lists a,b, steps */n"
            f"{', ?' if name in ('day-of-month', 'day-of-week') else ''}."
        )

    def number(token: str) -> int:
        if token in names:
            return names[token]
        if not token.isdigit():
            raise bad(f"'{token}' is not a number")
        n = int(token)
        if not lo <= n <= hi:
            raise bad(f"{n} is outside {lo}-{hi}")
        return n

    if value == "?":
        if name not in ("day-of-month", "day-of-week"):
            raise bad("'?' is only allowed in day-of-month and day-of-week")
        return
    if name == "day-of-month" and re.fullmatch(r"L(-\d{1,2})?|LW|\d{1,2}W", value):
        return
    if name == "day-of-week" and re.fullmatch(r"([1-7]|[A-Z]{3})?L|([1-7]|[A-Z]{3})#[1-5]", value):
        return
    for item in value.split(","):
        if not item:
            raise bad("empty list item")
        base, _, step = item.partition("/")
        if step:
            if not step.isdigit() or int(step) == 0:
                raise bad(f"step '{step}' must be a positive number")
        if base == "*":
            continue
        if "-" in base:
            first, _, last = base.partition("-")
            if number(first) > number(last):
                raise bad(f"range {base} runs backwards")
        else:
            number(base)


# -- config ------------------------------------------------------------------------------------


class Resources(BaseModel):
    """``resourceConfig`` of a Python job: memory in MB, cores, GPUs."""

    model_config = ConfigDict(extra="forbid")

    memory: int = Field(2048, ge=256)
    cores: float = Field(1, gt=0)
    gpus: int = Field(0, ge=0)


class StageConfig(BaseModel):
    """One stage: its arguments, schedule (``null``: unscheduled) and resources."""

    model_config = ConfigDict(extra="forbid")

    schedule: str | None = "inherit"
    args: dict[str, Any] = Field(default_factory=dict)
    resources: Resources | None = None
    environment: str | None = None

    @field_validator("args")
    @classmethod
    def _no_fixed_window(cls, args: dict[str, Any]) -> dict[str, Any]:
        for key in args:
            normalized = key.replace("-", "_").lstrip("_")
            if normalized in _FORBIDDEN_ARGS:
                raise ValueError(f"argument '{key}' is not allowed: {_FORBIDDEN_ARGS[normalized]}")
        return args


class JobsConfig(BaseModel):
    """The YAML file of ``fstrain jobs deploy``."""

    model_config = ConfigDict(extra="forbid")

    use_case: str
    project: str | None = None
    environment: str = DEFAULT_ENVIRONMENT
    schedule: str | None = None
    schedule_start: datetime | None = None
    resources: Resources = Field(default_factory=Resources)
    job_prefix: str | None = None
    app_path: str | None = None
    stages: dict[Literal["features", "dataset", "train", "validate"], StageConfig] = Field(min_length=1)

    @field_validator("use_case")
    @classmethod
    def _known_use_case(cls, value: str) -> str:
        from feature_views import USE_CASES

        if value not in USE_CASES:
            raise ValueError(f"use case must be one of {', '.join(USE_CASES)}. Got {value!r} instead")
        return value

    @field_validator("job_prefix")
    @classmethod
    def _job_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9_]+", value):
            raise ValueError(f"job_prefix must match [A-Za-z0-9_]+. Got {value!r} instead")
        return value


def load_config(path: Path, *, project: str | None = None) -> JobsConfig:
    """Read and validate a jobs YAML file (errors name the file and the field)."""
    import os

    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"jobs config '{path}' does not exist.") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"jobs config '{path}' is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"jobs config '{path}' must be a mapping (use_case, stages, ...). "
                          f"Got {type(data).__name__} instead.")
    try:
        config = JobsConfig.model_validate(data)
    except ValidationError as exc:
        message = validation_message(exc, JobsConfig.model_fields, title=False)
        raise ConfigError(f"jobs config '{path}': {message}") from None
    config.project = project or config.project or os.environ.get("HOPSWORKS_PROJECT") or None
    if config.project is None and config.app_path is None:
        raise ConfigError(
            f"jobs config '{path}': missing field 'project' (the Hopsworks project whose "
            "Resources/jobs folder holds the entry script). Add `project: <name>` or set "
            "HOPSWORKS_PROJECT."
        )
    return config


# -- job definitions ---------------------------------------------------------------------------


def _cli_args(stage: str, use_case: str, args: dict[str, Any]) -> list[str]:
    """``fstrain <stage> ...`` arguments (without ``fstrain``)."""
    from feature_views import get_use_case

    args = dict(args)
    if stage == "validate":
        model = args.pop("model_name", None) or get_use_case(use_case).registry_model_name
        version = args.pop("version", None)
        out = [stage, f"{model}:{version}" if version not in (None, "latest") else model]
    else:
        out = [stage, use_case]
    if stage == "train":
        version = args.pop("training_dataset_version", None)
        if version is None:
            raise ConfigError(
                "jobs config: stage 'train' needs args.training_dataset_version (a number, or "
                "'latest' for the newest version when the job runs)."
            )
        if version != "latest" and (not isinstance(version, int) or isinstance(version, bool) or version < 1):
            raise ConfigError(
                "jobs config: stages.train.args.training_dataset_version must be a positive "
                f"integer or 'latest'. Got {version!r} instead."
            )
        out += ["--training-dataset-version", str(version)]
    for key, value in args.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            out += [flag] if value else []
        elif isinstance(value, list):
            for item in value:
                out += [flag, str(item)]
        elif isinstance(value, dict):
            raise ConfigError(f"jobs config: stages.{stage}.args.{key} must be a scalar or a list.")
        elif value is not None:
            out += [flag, str(value)]
    return [*out, "--backend", "hopsworks", "--json"]


def job_definitions(config: JobsConfig) -> list[dict[str, Any]]:
    """One job definition per stage: name, PYTHON job config, schedule (or None)."""
    prefix = config.job_prefix or f"fstrain_{config.use_case}"
    app_path = config.app_path or f"hdfs:///Projects/{config.project}/{JOBS_DIR}/{ENTRY_SCRIPT}"
    out = []
    for stage in STAGES:
        if stage not in config.stages:
            continue
        st = config.stages[stage]
        resources = st.resources or config.resources
        source = config.schedule if st.schedule == "inherit" else st.schedule
        schedule = None
        if source is not None:
            try:
                cron = to_quartz(source)
            except ConfigError as exc:
                raise ConfigError(f"jobs config: stages.{stage}.schedule: {exc}") from None
            schedule = {"cron_expression": cron, "source": source,
                        "start_time": None if config.schedule_start is None
                        else config.schedule_start.isoformat()}
        args = _cli_args(stage, config.use_case, st.args)
        out.append({
            "name": f"{prefix}_{stage}",
            "stage": stage,
            "command": "fstrain " + shlex.join(args),
            "config": {
                "type": "pythonJobConfiguration",
                "jobType": "PYTHON",
                "appPath": app_path,
                "defaultArgs": shlex.join(args),
                "environmentName": st.environment or config.environment,
                "resourceConfig": resources.model_dump(),
                "logRedirection": True,
            },
            "schedule": schedule,
        })
    return out


ENTRY_SCRIPT_TEXT = '''"""fstrain job entry point, uploaded by `fstrain jobs deploy` (runs one pipeline stage)."""
import sys

from pipelines.jobs import job_main

sys.exit(job_main(sys.argv[1:]))
'''


def job_main(argv: list[str]) -> int:
    """What a deployed job runs: ``fstrain <stage> ...``; ``--training-dataset-version latest``
    is resolved to the newest version of the use case's feature view first."""
    from pipelines.cli import app

    argv = list(argv)
    if "latest" in argv and "--training-dataset-version" in argv:
        i = argv.index("--training-dataset-version")
        if argv[i + 1] == "latest":
            argv[i + 1] = str(_latest_training_dataset(argv[1]))
    try:
        app(args=argv, prog_name="fstrain")
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _latest_training_dataset(use_case: str) -> int:
    import feature_store
    from feature_views import get_use_case

    uc = get_use_case(use_case)
    fv = feature_store.login(backend="hopsworks").get_feature_store().get_feature_view(
        uc.feature_view_name, uc.feature_view_version)
    versions = [td.version for td in fv.get_training_datasets()]
    if not versions:
        raise ConfigError(f"feature view '{fv.name}' has no training dataset yet: run the "
                          "dataset stage first.")
    return max(versions)


# -- talking to Hopsworks (through the project's job service) ---------------------------------


def deploy(project: Any, definitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Upload the entry script, then create/update each job and its schedule."""
    return project.get_jobs().deploy(definitions, ENTRY_SCRIPT, ENTRY_SCRIPT_TEXT, JOBS_DIR)


def list_jobs(project: Any, prefix: str) -> list[dict[str, Any]]:
    """Jobs whose name starts with ``prefix``, with their schedule."""
    return project.get_jobs().list(prefix)


def run_definition(name: str, start: str | None, end: str | None, wait: bool) -> dict[str, Any]:
    """What ``run`` will do: the job and its ``[start, end)`` window (validated)."""
    from fstrain.kernel.window import resolve_window

    if (start is None) != (end is None):
        raise ConfigError("jobs run: give both --start and --end (a [start, end) window), or "
                          "neither to use the job's default window.")
    window = resolve_window(start, end, environ={})
    return {"job": name,
            "start_time": None if window.start is None else window.start.isoformat(),
            "end_time": None if window.end is None else window.end.isoformat(),
            "await_termination": wait}


def run_job(project: Any, plan: dict[str, Any]) -> dict[str, Any]:
    """Start the job of ``plan`` (from :func:`run_definition`) with its window."""
    return project.get_jobs().run(plan)


# -- command line ------------------------------------------------------------------------------

jobs_app = typer.Typer(
    help="Deploy, list and run the pipeline stages as scheduled Hopsworks jobs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
DryRun = Annotated[bool, typer.Option("--dry-run", help="Print the job definitions as JSON; do not connect.")]


def _guard(func: Any) -> None:
    from pipelines.cli_errors import guarded

    guarded(func)


def _connect() -> Any:
    import feature_store

    return feature_store.login(backend="hopsworks")


@jobs_app.command("deploy")
def deploy_command(
    config: Annotated[Path, typer.Argument(metavar="CONFIG.yaml", help="Jobs YAML (use case, stages, schedules, resources).")],
    project: Annotated[str | None, typer.Option(help="Hopsworks project (default: the YAML's, else $HOPSWORKS_PROJECT).")] = None,
    dry_run: DryRun = False,
) -> None:
    """Create or update one job per stage and its Quartz schedule."""
    def body() -> None:
        definitions = job_definitions(load_config(config, project=project))
        if dry_run:
            typer.echo(json.dumps(definitions, indent=2))
            return
        typer.echo(json.dumps(deploy(_connect(), definitions), indent=2))

    _guard(body)


@jobs_app.command("list")
def list_command(
    config: Annotated[Path | None, typer.Argument(metavar="[CONFIG.yaml]", help="Only this config's jobs.")] = None,
    prefix: Annotated[str, typer.Option(help="Job name prefix (default fstrain_ or the config's).")] = "fstrain_",
    dry_run: DryRun = False,
) -> None:
    """List the fstrain jobs and their schedules (with --dry-run: those CONFIG defines)."""
    def body() -> None:
        if dry_run:
            if config is None:
                raise ConfigError("jobs list --dry-run needs CONFIG.yaml (nothing to list offline).")
            rows = [{"name": d["name"], "schedule": d["schedule"] and d["schedule"]["cron_expression"],
                     "command": d["command"]} for d in job_definitions(load_config(config))]
            typer.echo(json.dumps(rows, indent=2))
            return
        chosen = prefix
        if config is not None:
            cfg = load_config(config)
            chosen = (cfg.job_prefix or f"fstrain_{cfg.use_case}") + "_"
        typer.echo(json.dumps(list_jobs(_connect(), chosen), indent=2))

    _guard(body)


@jobs_app.command("run")
def run_command(
    name: Annotated[str, typer.Argument(help="Job name, e.g. fstrain_ccfraud_features.")],
    start: Annotated[str | None, typer.Option(help="Backfill window start (ISO-8601) → HOPS_START_TIME.")] = None,
    end: Annotated[str | None, typer.Option(help="Backfill window end, exclusive → HOPS_END_TIME.")] = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Wait for the execution to finish.")] = False,
    dry_run: DryRun = False,
) -> None:
    """Run a deployed job now, optionally over a backfill window ``[start, end)``."""
    def body() -> None:
        plan = run_definition(name, start, end, wait)
        if dry_run:
            typer.echo(json.dumps(plan, indent=2))
            return
        typer.echo(json.dumps(run_job(_connect(), plan), indent=2, default=str))

    _guard(body)


__all__ = ["CRON_ALIASES", "JobsConfig", "job_definitions", "jobs_app", "load_config", "to_quartz"]
