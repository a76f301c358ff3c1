"""``fstrain jobs``: deploy the pipeline stages as scheduled Hopsworks jobs.

One YAML file names a use case, its stages, their schedules and resources::

    use_case: ccfraud
    project: fraud                       # Hopsworks project (--project, else $HOPSWORKS_PROJECT)
    environment: fstrain-pipeline        # the jobs' Python environment (created if missing ...)
    base_environment: python-feature-pipeline  # ... by cloning this one
    install: wheel                       # wheel | requirements | none
    schedule: "@daily"                   # default for every stage
    resources: {memory: 2048, cores: 1, gpus: 0}
    stages:
      features: {schedule: "@hourly", args: {policy: strict}}
      dataset:  {schedule: "@weekly"}
      train:    {schedule: "@weekly", args: {training_dataset_version: latest}}
      validate: {schedule: null}         # runs inside the train job, on the model it registered

``deploy`` (1) uploads the entry script ``fstrain_job.py`` into ``Resources/jobs``; (2) installs
fstrain into the environment through the SDK's environment API (``install: wheel`` uploads the
wheel given with ``--wheel``, else one built from the source checkout, and calls
``Environment.install_wheel``; ``install: requirements`` uploads ``requirements:`` and calls
``install_requirements``; see :mod:`fstrain.cli.job_install`); (3) creates or updates
(``create_job`` is a PUT upsert) one ``PYTHON`` job per stage, named ``<prefix>_<stage>``, whose
``defaultArgs`` are the stage's ``fstrain`` arguments, and sets its Quartz schedule (seconds first,
e.g. ``"0 0 * ? * * *"``; ``@hourly``/``@daily``/``@weekly``/``@monthly``/``@yearly`` accepted).

**Stages hand exact refs on.** With both ``train`` and ``validate`` in the config, the train
job runs the validation right after training, in the same job run, on the exact ``NAME:VERSION``
the training registered (the arguments read ``train ... --then validate {model} ...``; ``{model}``
is filled from the training's result). So validation never picks "the latest model by clock",
and a failed validation (exit 3), or one that passed only under a policy deviation (exit 4),
fails the train job's execution. The ``validate`` job is still
created, unscheduled, to re-validate a given version by hand
(``fstrain jobs run <prefix>_validate --args "validate NAME:VERSION ..."``); without a version it
refuses to run. ``training_dataset_version: latest`` is resolved when the job runs to the newest
version whose creation completed (a version whose materialization job failed is skipped).

Job arguments never fix ``--start``/``--end``: the feature stage reads its window from
``HOPS_START_TIME``/``HOPS_END_TIME``, which the scheduler sets per run and ``run --start --end``
sets for a backfill (the later stages never read them; ``dataset --anchor end-time`` ends its
relative split windows at ``HOPS_END_TIME``). ``--dry-run`` prints, without connecting, the shell commands that do what
each job does (``fstrain jobs exec ...``, pasteable with ``HOPSWORKS_*`` set); ``--json`` prints
the job definitions instead.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

import feature_store
from feature_views import USE_CASES, get_use_case
from fstrain.cli import job_install
from fstrain.cli.errors import exit_code, guarded
from fstrain.kernel.config import validation_message
from fstrain.kernel.errors import ConfigError
from fstrain.kernel.window import resolve_window

STAGES = ("features", "dataset", "train", "validate")
ENTRY_SCRIPT = "fstrain_job.py"
JOBS_DIR = "Resources/jobs"
DEFAULT_ENVIRONMENT = "fstrain-pipeline"
BASE_ENVIRONMENT = "python-feature-pipeline"
#: The environments a Hopsworks 5.2 cluster ships (read-only; cloned, never modified).
BUILT_IN_ENVIRONMENTS = ("python-feature-pipeline", "python-training-pipeline",
                         "pandas-training-pipeline", "torch-training-pipeline",
                         "tensorflow-training-pipeline", "jupyter-python")
#: Separates chained stages in one job's arguments; ``{model}`` is the previous stage's model.
THEN = "--then"
MODEL_PLACEHOLDER = "{model}"
EXIT_USER_ERROR = 2

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
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
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

    memory: int = Field(default=2048, ge=256)
    cores: float = Field(default=1, gt=0)
    gpus: int = Field(default=0, ge=0)


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
    base_environment: str = BASE_ENVIRONMENT
    install: Literal["wheel", "requirements", "none"] = "wheel"
    requirements: Path | None = None
    schedule: str | None = None
    schedule_start: datetime | None = None
    resources: Resources = Field(default_factory=Resources)
    job_prefix: str | None = None
    app_path: str | None = None
    stages: dict[Literal["features", "dataset", "train", "validate"], StageConfig] = Field(min_length=1)

    @field_validator("use_case")
    @classmethod
    def _known_use_case(cls, value: str) -> str:
        if value not in USE_CASES:
            raise ValueError(f"use case must be one of {', '.join(USE_CASES)}. Got {value!r} instead")
        return value

    @field_validator("job_prefix")
    @classmethod
    def _job_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9_]+", value):
            raise ValueError(f"job_prefix must match [A-Za-z0-9_]+. Got {value!r} instead")
        return value

    @property
    def prefix(self) -> str:
        """Job names are ``<prefix>_<stage>``."""
        return self.job_prefix or f"fstrain_{self.use_case}"


def load_config(path: Path, *, project: str | None = None) -> JobsConfig:
    """Read and validate a jobs YAML file (errors name the file and the field).

    The project is ``project`` (``--project``), else the YAML's ``project:``, else
    ``$HOPSWORKS_PROJECT``; a relative ``requirements:`` is relative to the YAML file.
    """
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"jobs config '{path}' does not exist.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"jobs config '{path}' cannot be read ({type(exc).__name__}).") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"jobs config '{path}' is not valid YAML{where}: {problem}.") from None
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
            "Resources/jobs folder holds the entry script). Add `project: <name>`, pass "
            "--project or set HOPSWORKS_PROJECT."
        )
    if config.install != "none" and config.environment in BUILT_IN_ENVIRONMENTS:
        raise ConfigError(
            f"jobs config '{path}': environment {config.environment!r} is a built-in Hopsworks "
            "environment, which is read-only, so fstrain cannot be installed into it. Name the "
            f"jobs' own environment (e.g. `environment: {DEFAULT_ENVIRONMENT}`); deploy clones "
            f"base_environment ({config.base_environment!r}) into it. Or set `install: none` if "
            "fstrain is already there."
        )
    if config.install == "requirements":
        if config.requirements is None:
            raise ConfigError(f"jobs config '{path}': install: requirements needs "
                              "`requirements: path/to/requirements.txt` (a file naming fstrain).")
        if not config.requirements.is_absolute():
            config.requirements = Path(path).resolve().parent / config.requirements
    return config


# -- job definitions ---------------------------------------------------------------------------


def _flags(stage: str, args: dict[str, Any]) -> list[str]:
    out: list[str] = []
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
    return out


def _validate_args(use_case: str, args: dict[str, Any], *, chained: bool) -> list[str]:
    """``validate NAME:VERSION ...`` (``{model}`` when chained after train)."""
    args = dict(args)
    model = args.pop("model_name", None) or get_use_case(use_case).registry_model_name
    version = args.pop("version", None)
    if chained:
        if version is not None:
            raise ConfigError(
                "jobs config: stages.validate.args.version cannot be set when the config has a "
                "train stage: validation runs on the version that training registers."
            )
        ref = model  # the validate job itself refuses to run until given NAME:VERSION
    elif isinstance(version, int) and not isinstance(version, bool) and version >= 1:
        ref = f"{model}:{version}"
    else:
        raise ConfigError(
            "jobs config: stage 'validate' without a train stage needs args.version (a "
            f"positive integer; validating 'the latest' model is not supported). Got "
            f"{version!r} instead."
        )
    return ["validate", ref, *_flags("validate", args)]


def _cli_args(stage: str, use_case: str, args: dict[str, Any]) -> list[str]:
    """``<stage> ...`` arguments of the ``fstrain`` CLI for a non-validate stage."""
    args = dict(args)
    out = [stage, use_case]
    if stage == "train":
        version = args.pop("training_dataset_version", None)
        if version is None:
            raise ConfigError(
                "jobs config: stage 'train' needs args.training_dataset_version (a number, or "
                "'latest' for the newest completed version when the job runs)."
            )
        if version != "latest" and (not isinstance(version, int) or isinstance(version, bool) or version < 1):
            raise ConfigError(
                "jobs config: stages.train.args.training_dataset_version must be a positive "
                f"integer or 'latest'. Got {version!r} instead."
            )
        out += ["--training-dataset-version", str(version)]
    if stage == "dataset" and "anchor" not in args and _relative_split(use_case, args):
        # Hopsworks cannot tell a job the data's last event time: anchor the relative windows
        # at the end of the scheduled window (HOPS_END_TIME, set for every scheduled run).
        args["anchor"] = "end-time"
    return out + _flags(stage, args)


def _relative_split(use_case: str, args: dict[str, Any]) -> bool:
    """Whether the dataset stage splits by windows counted back from an anchor."""
    if any(k in args for k in ("test_window", "validation_window", "train_window")):
        return True
    explicit = {"split", "test_size", "validation_size"} & set(args)
    return not explicit and get_use_case(use_case).split.get("test_window") is not None


def _backend(args: list[str]) -> list[str]:
    return [*args, "--backend", "hopsworks", "--json"]


def _schedule(config: JobsConfig, stage: str, st: StageConfig) -> dict[str, Any] | None:
    source = config.schedule if st.schedule == "inherit" else st.schedule
    if source is None:
        return None
    try:
        cron = to_quartz(source)
    except ConfigError as exc:
        raise ConfigError(f"jobs config: stages.{stage}.schedule: {exc}") from None
    return {"cron_expression": cron, "source": source,
            "start_time": None if config.schedule_start is None
            else config.schedule_start.isoformat()}


def job_definitions(config: JobsConfig) -> list[dict[str, Any]]:
    """One job definition per stage: name, PYTHON job config, schedule (or None), and the
    pasteable shell command doing what the job does."""
    app_path = config.app_path or f"hdfs:///Projects/{config.project}/{JOBS_DIR}/{ENTRY_SCRIPT}"
    chained = "train" in config.stages and "validate" in config.stages
    if chained and config.stages["validate"].schedule not in (None, "inherit"):
        raise ConfigError(
            "jobs config: stages.validate.schedule must be null when the config has a train "
            "stage: validation runs inside the train job, on the model that job registered."
        )
    validate: list[str] = []
    if "validate" in config.stages:
        validate = _backend(_validate_args(config.use_case, config.stages["validate"].args,
                                           chained=chained))
    out = []
    for stage in STAGES:
        if stage not in config.stages:
            continue
        st = config.stages[stage]
        resources = st.resources or config.resources
        schedule = None if stage == "validate" and chained else _schedule(config, stage, st)
        if stage == "validate":
            args = list(validate)
        else:
            args = _backend(_cli_args(stage, config.use_case, st.args))
            if stage == "train" and chained:
                args += [THEN, "validate", MODEL_PLACEHOLDER, *validate[2:]]
        out.append({
            "name": f"{config.prefix}_{stage}",
            "stage": stage,
            "command": "fstrain jobs exec " + shlex.join(args),
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


def shell_plan(config: JobsConfig, definitions: list[dict[str, Any]]) -> str:
    """What ``deploy --dry-run`` prints: a commented shell script a user can paste."""
    intro = (f"# fstrain jobs for use case {config.use_case}: deploy installs fstrain "
             f"(install: {config.install}) into environment {config.environment!r} (cloned "
             f"from {config.base_environment!r} if missing).")
    how = ("# Each command below does what its job does; set HOPSWORKS_HOST and "
           "HOPSWORKS_API_KEY first (inside a job, the job's own credentials are used).")
    lines = [intro, how]
    if config.project is not None:
        lines.append(f"export HOPSWORKS_PROJECT={shlex.quote(config.project)}")
    for d in definitions:
        schedule = d["schedule"]
        when = "unscheduled" if schedule is None else f"schedule {schedule['cron_expression']}"
        if schedule is not None and schedule["source"].startswith("@"):
            when += f" ({schedule['source']})"
        args = shlex.split(d["config"]["defaultArgs"])
        if args[0] == "validate" and ":" not in args[1]:
            versioned = shlex.join(["validate", f"{args[1]}:VERSION", *args[2:]])
            hint = (f"# job {d['name']}: {when}; it validates the version it is given, e.g. "
                    f"`fstrain jobs run {d['name']} --args {shlex.quote(versioned)}`")
            lines += [hint, f"# fstrain jobs exec {versioned}"]
        else:
            lines += [f"# job {d['name']}: {when}", d["command"]]
    return "\n".join(lines)


ENTRY_SCRIPT_TEXT = '''"""fstrain job entry point, uploaded by `fstrain jobs deploy` (runs one pipeline stage)."""
import sys

from fstrain.cli.app import app
from fstrain.cli.jobs import job_main

sys.exit(job_main(sys.argv[1:], app))
'''


def job_main(argv: list[str], app: Callable[..., Any]) -> int:
    """What a deployed job runs: ``fstrain <stage> ...``, then any stages chained after
    ``--then``, each given the previous stage's model as ``{model}``. ``app`` is the ``fstrain``
    command (the typer app, or the root click command) that runs each stage in-process.

    ``--training-dataset-version latest`` is resolved by the train stage to the newest
    completed version (:func:`fstrain.kernel.versions.resolve_training_dataset_version`). Returns the first non-zero exit code (2: user error, 3:
    validation failed), else 0. A train stage that reused a validated model (unchanged inputs)
    runs no chained validation: its latest validation stands (a new run would detach an
    approval) and gives the exit code, as ``fstrain run`` does.
    """
    segments: list[list[str]] = [[]]
    for token in argv:
        if token == THEN:
            segments.append([])
        else:
            segments[-1].append(token)
    refused = _check_validate_stages(segments)
    if refused is not None:
        return _user_error(refused)
    model: str | None = None
    standing: str | None = None  # the reused model's validation status
    for segment in segments:
        if MODEL_PLACEHOLDER in segment:
            if model is None:
                return _user_error(f"'{MODEL_PLACEHOLDER}' needs a train stage before it.")
            if standing is not None:
                print(f"model {model} was reused (unchanged inputs): its latest validation "
                      f"({standing}) stands, no new validation run", file=sys.stderr)
                continue
            segment = [model if token == MODEL_PLACEHOLDER else token for token in segment]
        code, result = _run_stage(segment, app)
        if code != 0:
            return code
        if segment and segment[0] == "train":
            if not isinstance(result, dict) or "name" not in result or "version" not in result:
                return _user_error("the train stage printed no model ref (run it with --json).")
            model = f"{result['name']}:{result['version']}"
            if result.get("reused") and result.get("validation_status") not in (None, "pending"):
                standing = str(result["validation_status"])
    return 0 if standing is None else exit_code(standing)


def _check_validate_stages(segments: list[list[str]]) -> str | None:
    """The gates and threshold strategy of every ``validate`` stage, checked before the first
    stage runs (a bad gate was found only after the chained train stage had run); the
    message of the first bad one, else None."""
    from validation.policy import check_extra_gates, normalize_strategy

    def values(segment: list[str], flag: str) -> list[str]:
        return [*(value for token, value in zip(segment, segment[1:]) if token == flag),
                *(token.split("=", 1)[1] for token in segment if token.startswith(flag + "="))]

    for segment in segments:
        if segment[:1] != ["validate"]:
            continue
        try:
            check_extra_gates(values(segment, "--gate"), replace="--replace-gates" in segment)
            for strategy in values(segment, "--threshold-strategy"):
                normalize_strategy(strategy)
        except ConfigError as exc:
            return str(exc)
    return None


def _user_error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USER_ERROR


def _run_stage(argv: list[str], app: Callable[..., Any]) -> tuple[int, Any]:
    """Run one ``fstrain`` command in-process; returns its exit code and its JSON result."""
    argv = list(argv)
    if argv[:1] == ["validate"] and len(argv) > 1 and ":" not in argv[1]:
        return _user_error(
            f"validate {argv[1]}: a job validates an exact version, NAME:VERSION (run it with "
            f"args 'validate {argv[1]}:<version> ...'); it never picks the latest by time."), None

    shown = sys.stdout

    class Tee(io.StringIO):
        """Shows the stage's output as it comes, and keeps it to read the result from."""

        def write(self, text: str) -> int:
            shown.write(text)
            return super().write(text)

    captured = Tee()
    code = 0
    with contextlib.redirect_stdout(captured):
        try:
            app(args=argv, prog_name="fstrain")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, _last_json(captured.getvalue())


def _last_json(text: str) -> Any:
    """The last JSON document printed at the start of a line (SDK banners are skipped)."""
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith(("{", "[")):
            try:
                return json.loads("\n".join(lines[i:]))
            except json.JSONDecodeError:
                continue
    return None


# -- talking to Hopsworks (through the project's job service) ---------------------------------


def deploy(project: Any, definitions: list[dict[str, Any]], config: JobsConfig | None = None,
           *, wheel: Path | None = None) -> dict[str, Any]:
    """Upload the entry script, install fstrain into the jobs' environment (per
    ``config.install``; nothing without a config), then create/update each job and schedule."""
    service = project.get_jobs()
    folder = f"/Projects/{project.name}/{JOBS_DIR}"  # where the jobs' appPath points
    installed = None
    with tempfile.TemporaryDirectory() as tmp:
        if config is not None and config.install != "none":
            if config.install == "wheel":
                artifact = (job_install.check_artifact(wheel, "wheel") if wheel is not None
                            else job_install.build_wheel(Path(tmp) / "wheel"))
            else:
                assert config.requirements is not None  # load_config checked it
                artifact = job_install.check_artifact(config.requirements, "requirements file")
            installed = service.install(
                artifact, kind=config.install, environment=config.environment,
                base_environment=config.base_environment, folder=folder)
        results = service.deploy(definitions, ENTRY_SCRIPT, ENTRY_SCRIPT_TEXT, folder)
    return {"project": getattr(project, "name", None), "environment": installed, "jobs": results}


def list_jobs(project: Any, prefix: str) -> list[dict[str, Any]]:
    """Jobs whose name starts with ``prefix``, with their schedule."""
    return project.get_jobs().list(prefix)


def run_definition(name: str, start: str | None, end: str | None, wait: bool,
                   args: str | None = None) -> dict[str, Any]:
    """What ``run`` will do: the job, its ``[start, end)`` window (validated) and arguments
    (None: the job's default arguments)."""
    if (start is None) != (end is None):
        raise ConfigError("jobs run: give both --start and --end (a [start, end) window), or "
                          "neither to use the job's default window.")
    window = resolve_window(start, end, environ={})
    return {"job": name,
            "start_time": None if window.start is None else window.start.isoformat(),
            "end_time": None if window.end is None else window.end.isoformat(),
            "args": args,
            "await_termination": wait}


def run_job(project: Any, plan: dict[str, Any]) -> dict[str, Any]:
    """Start the job of ``plan`` (from :func:`run_definition`) with its window and args."""
    return project.get_jobs().run(plan)


# -- command line ------------------------------------------------------------------------------

jobs_app = typer.Typer(
    help="Deploy, list and run the pipeline stages as scheduled Hopsworks jobs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
DryRun = Annotated[bool, typer.Option("--dry-run", help="Print what would be done; do not connect.")]
ProjectOpt = Annotated[str | None, typer.Option(
    "--project", help="Hopsworks project (default: the YAML's, else $HOPSWORKS_PROJECT).")]
AsJson = Annotated[bool, typer.Option("--json", help="With --dry-run: the job definitions as JSON.")]


def _guard(func: Any) -> None:
    guarded(func)


def _connect(project: str | None) -> Any:
    return feature_store.login(backend="hopsworks", project=project)


@jobs_app.command("deploy")
def deploy_command(
    config: Annotated[Path, typer.Argument(metavar="CONFIG.yaml", help="Jobs YAML (use case, stages, schedules, resources).")],
    project: ProjectOpt = None,
    wheel: Annotated[Path | None, typer.Option(help="fstrain wheel to install (default: built from this source checkout).")] = None,
    dry_run: DryRun = False,
    as_json: AsJson = False,
) -> None:
    """Install fstrain into the jobs' environment, create or update one job per stage and its
    Quartz schedule."""
    def body() -> None:
        cfg = load_config(config, project=project)
        definitions = job_definitions(cfg)
        if dry_run:
            typer.echo(json.dumps(definitions, indent=2) if as_json
                       else shell_plan(cfg, definitions))
            return
        typer.echo(json.dumps(deploy(_connect(cfg.project), definitions, cfg, wheel=wheel),
                              indent=2))

    _guard(body)


@jobs_app.command("list")
def list_command(
    config: Annotated[Path | None, typer.Argument(metavar="[CONFIG.yaml]", help="Only this config's jobs.")] = None,
    prefix: Annotated[str, typer.Option(help="Job name prefix (default fstrain_ or the config's).")] = "fstrain_",
    project: ProjectOpt = None,
    dry_run: DryRun = False,
) -> None:
    """List the fstrain jobs and their schedules (with --dry-run: those CONFIG defines)."""
    def body() -> None:
        cfg = None if config is None else load_config(config, project=project)
        if dry_run:
            if cfg is None:
                raise ConfigError("jobs list --dry-run needs CONFIG.yaml (nothing to list offline).")
            rows = [{"name": d["name"], "schedule": d["schedule"] and d["schedule"]["cron_expression"],
                     "command": d["command"]} for d in job_definitions(cfg)]
            typer.echo(json.dumps(rows, indent=2))
            return
        chosen = prefix if cfg is None else cfg.prefix + "_"
        target = project if cfg is None else cfg.project
        typer.echo(json.dumps(list_jobs(_connect(target), chosen), indent=2))

    _guard(body)


@jobs_app.command("run")
def run_command(
    name: Annotated[str, typer.Argument(help="Job name, e.g. fstrain_ccfraud_features.")],
    start: Annotated[str | None, typer.Option(help="Backfill window start (ISO-8601) → HOPS_START_TIME.")] = None,
    end: Annotated[str | None, typer.Option(help="Backfill window end, exclusive → HOPS_END_TIME.")] = None,
    args: Annotated[str | None, typer.Option("--args", help="Arguments for this run instead of the job's default, e.g. 'validate ccfraud_xgb:7 --backend hopsworks --json'.")] = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Wait for the execution to finish.")] = False,
    project: ProjectOpt = None,
    dry_run: DryRun = False,
) -> None:
    """Run a deployed job now, optionally over a backfill window ``[start, end)``."""
    def body() -> None:
        plan = run_definition(name, start, end, wait, args)
        if dry_run:
            typer.echo(json.dumps(plan, indent=2))
            return
        typer.echo(json.dumps(run_job(_connect(project), plan), indent=2, default=str))

    _guard(body)


@jobs_app.command("exec", context_settings={"allow_extra_args": True,
                                            "ignore_unknown_options": True})
def exec_command(ctx: typer.Context) -> None:
    """Do what a job does, here: ``fstrain jobs exec <stage> ... [--then validate {model} ...]``
    (the arguments of a job, as ``deploy --dry-run`` prints them)."""
    if not ctx.args:
        typer.echo("error: jobs exec needs a job's arguments, e.g. 'features ccfraud "
                   "--backend hopsworks --json'.", err=True)
        raise typer.Exit(EXIT_USER_ERROR)
    raise typer.Exit(job_main(list(ctx.args), ctx.find_root().command))


__all__ = ["CRON_ALIASES", "JobsConfig", "job_definitions", "job_main", "jobs_app",
           "load_config", "shell_plan", "to_quartz"]
