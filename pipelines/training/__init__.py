"""Training pipeline: a training-dataset version → a model version in the registry.

``run(project, config)`` reads the train and validation splits of one training-dataset version
(never the test split), trains the configured model (the use case's default, overridden by the
config), and registers it with its validation metrics, hyperparameters, training config and
lineage (feature view + training-dataset version → feature-group commits). The model starts with
``validation_status = "pending"``; only the model-validation pipeline changes that.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator
import pandas as pd

from model_registry.metric_names import canonical, registry_metrics
from fstrain.trainers.config import RESUMABLE_MODELS, load_config
from fstrain.trainers.engine import Engine, EngineChoice, check_engine_options, choose_engine
from fstrain.kernel.config import PipelineConfig
from fstrain.kernel.refs import ModelRef
from fstrain.kernel.versions import resolve_training_dataset_version
from feature_store.core.carve import read_three_way
from feature_views import get_use_case
from fstrain.kernel.errors import ConfigError
from fstrain.trainers import train, train_distributed
from fstrain.trainers.checkpoint import has_checkpoint
from fstrain.trainers.cross_validation import cross_validate
from fstrain.trainers.label_issues import label_issues_step
from fstrain.trainers.nested_cv import nested_cross_validate
from fstrain.trainers.ray_boosting import train_boosting_on_ray
from fstrain.trainers.spark_mllib import SparkSource, train_spark
from fstrain.trainers.torch_models import train_torch_streamed
from fstrain.trainers.tuning import tune
from model_registry.audit.authorize import resolve_signer
from model_registry.naming import check_model_name
from pipelines.training.reuse import reusable_model, training_request
from pipelines.training.tracking import default_tracking_uri, log_training_run

if TYPE_CHECKING:  # pragma: no cover - typing only
    from feature_store.api import Project

_FRAMEWORKS = {"xgboost": "python", "lightgbm": "python", "sklearn_logreg": "sklearn",
               "sklearn_rf": "sklearn", "mlp": "torch", "cnn": "torch", "catboost": "python",
               "keras_mlp": "python", "flax_mlp": "python", "spark_gbt": "python",
               "spark_lr": "python", "lora": "torch"}


class TrainingPipelineConfig(PipelineConfig):
    """Configuration of one training-pipeline run."""

    use_case: str
    training_dataset_version: int | str  # a number, or "latest" (the newest version)
    model: dict[str, Any] = Field(default_factory=dict)  # overrides of the use case's trainer config
    model_name: str | None = None
    tune: bool = False
    ray_address: str | None = None
    # CPUs for Ray (--tune, --workers): a local Ray starts with this many; each of N workers
    # gets num_cpus // N threads. None: 2, or one per worker when there are more workers
    num_cpus: int | None = Field(default=None, ge=1)
    workers: int = Field(default=1, ge=1)  # >1: data-parallel torch/xgboost/lightgbm on Ray Train
    cv: int | None = Field(default=None, ge=2)  # k-fold cross-validation on the train split first
    nested: bool = False  # with tune and cv: nested CV, the outer-fold score of the tuning
    find_label_issues: bool = False  # with cv: Cleanlab on the out-of-fold probabilities
    drop_label_issues: bool = False  # train without the rows find_label_issues flags
    track: Literal["mlflow"] | None = None  # also log the run to an experiment tracker
    tracking_uri: str | None = None  # default: sqlite:///<root>/mlflow.db
    resume: bool = False  # continue from the run's checkpoint; refused when there is none
    resume_or_start: bool = False  # continue from it, or start a new run (and say so)
    force: bool = False  # train a new version even when one was trained on the same TD + config
    description: str = ""
    spark_master: str | None = None  # Spark MLlib models: the master URL (default local[2])

    @field_validator("training_dataset_version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> int | str:
        if value == "latest" or (isinstance(value, str) and value.strip().lower() == "latest"):
            return "latest"
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError("'latest' or an integer greater than or equal to 1")
        return value
    @field_validator("model_name")
    @classmethod
    def _registry_name(cls, value: str | None) -> str | None:
        """Checked before any work: the name also names the run folder under the store."""
        if value is None:
            return value

        return check_model_name(value)

    @model_validator(mode="after")
    def _no_ignored_options(self) -> TrainingPipelineConfig:
        if self.ray_address is not None and not self.tune and self.workers == 1:
            raise ValueError("ray_address is only used by tune=True (--tune) or workers > 1; "
                             "drop it or add --tune")
        if self.resume and self.resume_or_start:
            raise ValueError("resume refuses to start without a checkpoint, resume_or_start "
                             "starts a new run then: pass --resume or --resume-or-start, not both")
        if (self.resume or self.resume_or_start) and self.tune:
            raise ValueError("resume continues a single torch run from its checkpoint; a tuned "
                             "run cannot be resumed. Drop --resume or --tune")
        if self.nested and (not self.tune or self.cv is None):
            raise ValueError("nested cross-validation scores the tuning procedure on outer "
                             "folds: it needs --tune and --cv K (e.g. --tune --cv 3 --nested); "
                             "without tuning, --cv K alone is the honest estimate")
        if self.find_label_issues and (self.cv is None or self.tune or self.nested):
            raise ValueError("find_label_issues reads the out-of-fold probabilities of --cv K "
                             "(e.g. --cv 5 --find-label-issues) and is not combined with --tune "
                             "or --nested")
        if self.drop_label_issues and not self.find_label_issues:
            raise ValueError("drop_label_issues drops the rows find_label_issues flags: add "
                             "--cv K --find-label-issues")
        if self.tracking_uri is not None and self.track is None:
            raise ValueError("tracking_uri is only used with track='mlflow' (--track mlflow); "
                             "add it or drop --tracking-uri")
        if self.num_cpus is not None and not self.tune and self.workers == 1:
            raise ValueError("num_cpus sizes Ray for --tune or --workers N; a single-process "
                             "run would ignore it. Drop --num-cpus or add --tune/--workers")
        if self.num_cpus is not None and self.num_cpus < self.workers:
            raise ValueError(f"num_cpus={self.num_cpus} is fewer than workers={self.workers}: "
                             "every Ray Train worker needs at least one CPU, so the run would "
                             "wait for resources forever. Raise --num-cpus or lower --workers")
        if self.tune and self.workers > 1 and not self.nested:
            raise ValueError("--tune runs single-process trials on Ray Tune and --workers N "
                             "trains one configuration data-parallel; the tuned refit would "
                             "ignore --workers. Tune without --workers, then train the best "
                             "configuration with --workers")
        if self.nested and self.workers > 1:
            raise ValueError("nested cross-validation tunes single-process models in every "
                             "outer fold; drop --workers or --nested")
        return self

    @property
    def ray_cpus(self) -> int:
        """The CPUs Ray is sized with: ``num_cpus``, else 2 or one per worker if more."""
        return self.num_cpus if self.num_cpus is not None else max(2, self.workers)


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` merged into ``base`` (nested dicts merged, everything else replaced)."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def trainer_config(use_case: Any, overrides: dict[str, Any]) -> Any:
    """The validated trainer config of a run (raises ConfigError naming a bad option)."""
    base = dict(use_case.model)
    if overrides.get("model") not in (None, base.get("model")):
        # another model kind: the default's hyperparameters belong to the default model
        base = {k: v for k, v in base.items() if k not in ("model", "params", "torch", "tune")}
    return load_config(deep_merge(base, overrides))


def read_splits(project: Any, use_case: Any, version: int | str,
                carve: dict[str, Any] | None = None) -> tuple[Any, tuple[Any, ...]]:
    """The feature view and ``(X_train, X_val, y_train, y_val)`` of a version (no test split).

    ``version`` may be ``"latest"``. A train/test version gets a validation split carved from
    its train rows (:mod:`feature_store.core.carve`); how is in ``carve`` when a dict is passed.
    """
    fs = project.get_feature_store()
    fv = fs.get_feature_view(use_case.feature_view_name, use_case.feature_view_version)
    version = resolve_training_dataset_version(fv, version)
    (X_tr, X_va, _X_te, y_tr, y_va, _y_te), record = read_three_way(fv, version)
    if carve is not None and record is not None:
        carve.update(record)
    return fv, (X_tr, X_va, y_tr, y_va)


def check_config(config: TrainingPipelineConfig) -> tuple[Any, Any]:
    """The use case and trainer configuration of ``config``, checked without opening a store
    (unknown use case, bad hyperparameters, options the trainer does not take):
    :func:`run` starts with it, and the CLI calls it before it opens the store, so bad input
    is named even where the store is missing."""
    use_case = get_use_case(config.use_case)
    cfg = trainer_config(use_case, config.model)
    _check_resume(config, cfg)
    check_engine_options(cfg, config)
    return use_case, cfg


def run(project: Project, config: TrainingPipelineConfig, *,
        key: str | os.PathLike[str] | None = None) -> ModelRef:
    """Train on a training-dataset version and register the model (status ``pending``); in a
    store with a trust list its creation record is signed by the key at ``key`` (else
    ``$FSTRAIN_KEY``). A model already trained on that version with the same configuration is
    returned instead, ``reused`` (:mod:`pipelines.training.reuse`), unless ``force``."""
    use_case, cfg = check_config(config)
    fs = project.get_feature_store()
    fv0 = fs.get_feature_view(use_case.feature_view_name, use_case.feature_view_version)
    config = config.model_copy(update={"training_dataset_version": resolve_training_dataset_version(
        fv0, config.training_dataset_version)})
    carved: dict[str, Any] = {}
    splits: tuple[Any, ...]
    issues: Any = None
    cross_validation: dict[str, Any] | None = None
    name = config.model_name or use_case.registry_model_name
    request = training_request(config, cfg)
    if not config.force and not config.resume and not config.resume_or_start:
        reused = reusable_model(project, name, fv0, int(config.training_dataset_version), request)
        if reused is not None:
            return ModelRef(name, reused, reused=True)
    signer = _signer(project, name, key)
    workdir = Path(project.root) / "runs" / f"{name}_td{config.training_dataset_version}"
    config, resume_record = _resolve_resume(config, workdir, name)
    choice = choose_engine(cfg, config, fv0, int(config.training_dataset_version))
    fv, splits = fv0, ()
    if choice.frames:
        fv, splits = read_splits(project, use_case, config.training_dataset_version,
                                 carve=carved)
        if config.find_label_issues:
            issues, cross_validation, splits = _label_issues(config, cfg, fv, splits, carved,
                                                             workdir)
    lineage = {"feature_view": fv.name, "feature_view_version": fv.version,
               "training_dataset_version": config.training_dataset_version}
    fitted, example = _fit(choice, config, cfg, splits, workdir, lineage, fv)
    if not choice.frames:  # the engine read the version's files: nothing in memory
        splits = (example,)
    nested = _nested_cv(config, cfg, splits, workdir, fitted) if config.nested else None
    if config.cv is not None and not config.nested and not config.find_label_issues:
        X_tr, _X_va, y_tr, _y_va = splits
        cross_validation = cross_validate(fitted.cfg, X_tr, y_tr, k=config.cv,
                                          workdir=workdir / "cv").to_dict()
    version = _register(project, name, fv, config, fitted, splits[0], {
        "cross_validation": cross_validation,
        "nested_cross_validation": nested,
        # a train/test version: the validation rows carved from train (feature_store.core.carve)
        "validation_split": carved or None,
        "label_issues": issues.to_dict() if issues is not None else None,
        "resume": resume_record,
        "request": request,  # what was asked for: a re-run asking the same reuses this model
    }, reports=(issues,) if issues is not None else (), signer=signer)
    if config.track == "mlflow":
        _track(project, config, name, version, fitted)
    if workdir.exists() and fitted.cfg.model not in RESUMABLE_MODELS:
        shutil.rmtree(workdir, ignore_errors=True)  # torch/flax keep checkpoints for --resume
    return ModelRef(name, version)


@dataclass(frozen=True)
class _Fitted:
    """What training produced: the config trained (tuned, if tuned), the trainer's result, the
    metrics to register and the tuning record (None without ``tune``)."""

    cfg: Any
    result: Any
    metrics: dict[str, Any]
    tuning: dict[str, Any] | None = None


def _nested_cv(config: TrainingPipelineConfig, cfg: Any, splits: tuple[Any, ...],
               workdir: Path, fitted: _Fitted) -> dict[str, Any]:
    """Nested CV of the tuning procedure on the train split (the untuned base config is what
    each outer fold tunes); its mean and std join the model's metrics as
    ``nested_cv_<metric>`` and ``nested_cv_<metric>_std``."""
    X_tr, _X_va, y_tr, _y_va = splits
    result = nested_cross_validate(cfg, X_tr, y_tr, k=config.cv or 2, workdir=workdir / "nested",
                                   ray_address=config.ray_address, num_cpus=config.ray_cpus)
    for metric, stats in result.summary.items():
        fitted.metrics[f"nested_cv_{canonical(metric)}"] = stats["mean"]
        fitted.metrics[f"nested_cv_{canonical(metric)}_std"] = stats["std"]
    return {**result.to_dict(), "data": {"split": "train", "rows": len(X_tr),
                                         "training_dataset_version":
                                             config.training_dataset_version}}


def _track(project: Any, config: TrainingPipelineConfig, name: str, version: int,
           fitted: _Fitted) -> dict[str, str]:
    """Log the registered run to MLflow (:mod:`pipelines.training.tracking`)."""
    model = project.get_model_registry().get_model(name, version)
    result, tc = fitted.result, model.training_config
    trainer = tc.get("trainer") or {}
    params = {**result.params, "fstrain.model": trainer.get("model"),
              "fstrain.seed": trainer.get("seed"), "fstrain.metric": result.metric,
              "fstrain.imbalance": (result.imbalance or {}).get("strategy"),
              "fstrain.tuned": config.tune, "fstrain.cv": config.cv,
              "fstrain.nested": config.nested}
    return log_training_run(
        tracking_uri=config.tracking_uri or default_tracking_uri(Path(project.root)),
        artifact_root=None if config.tracking_uri else Path(project.root) / "mlflow-artifacts",
        model_ref=f"{name}:{version}", model_path=str(model.model_path), params=params,
        metrics=model.training_metrics, curves=result.curves.to_dict() if result.curves else None,
        training_config=tc,
        tags={"fstrain.feature_view": f"{model.feature_view_name}:{model.feature_view_version}",
              "fstrain.training_dataset_version": str(model.training_dataset_version)})


def _label_issues(config: TrainingPipelineConfig, cfg: Any, fv: Any, splits: tuple[Any, ...],
                  carved: dict[str, Any], workdir: Path) -> tuple[Any, dict[str, Any], tuple]:
    """Cleanlab's suspect train rows (:mod:`fstrain.trainers.label_issues`), the cross-validation
    that produced them (it scores the configuration on all train rows), and the splits to
    train on (without the suspects when ``drop_label_issues``)."""
    return label_issues_step(fv, int(config.training_dataset_version), carved or None, cfg,
                             splits, k=int(config.cv or 2), workdir=workdir / "label_issues",
                             drop=config.drop_label_issues)


def _resolve_resume(config: TrainingPipelineConfig, workdir: Path,
                    name: str) -> tuple[TrainingPipelineConfig, dict[str, Any] | None]:
    """``--resume`` without a checkpoint is refused before any work; ``--resume-or-start``
    resumes when there is one, else starts a new run. Returns the config to train with
    (``resume`` set as it will be done) and what the registered run records about it."""
    if not (config.resume or config.resume_or_start):
        return config, None
    version = int(config.training_dataset_version)
    if config.resume:
        _check_resume_version(workdir, name, version)
    flag = "--resume" if config.resume else "--resume-or-start"
    found = has_checkpoint(workdir / "checkpoints")
    if not found and config.resume:
        raise ConfigError(
            f"--resume: model {name!r} has no checkpoint for training dataset v{version} "
            f"({workdir / 'checkpoints'} holds none), so there is nothing to resume. Drop "
            "--resume to start a new run, or pass --resume-or-start to resume when a "
            "checkpoint exists and start otherwise.")
    record = {"requested": flag, "checkpoint_found": found, "started_new_run": not found}
    return config.model_copy(update={"resume": found, "resume_or_start": False}), record


def _check_resume_version(workdir: Path, name: str, version: int) -> None:
    """``--resume`` on a training-dataset version without checkpoints of ``name`` while other
    versions have some: a changed ``--training-dataset-version``, refused by name (it would
    otherwise start a fresh run without a word)."""
    if workdir.exists():
        return
    others = sorted(int(p.name.rsplit("_td", 1)[1]) for p in workdir.parent.glob(f"{name}_td*")
                    if p.is_dir() and p.name.rsplit("_td", 1)[1].isdigit()
                    and p.name.rsplit("_td", 1)[0] == name)
    if others:
        raise ConfigError(
            f"--resume: model {name!r} has no checkpoints for training dataset v{version}; its "
            f"checkpoints are for training dataset "
            f"{', '.join(f'v{v}' for v in others)} ({workdir.parent}). Resume with "
            f"--training-dataset-version {others[-1]}, or drop --resume to train on "
            f"v{version} from scratch.")


def _check_resume(config: TrainingPipelineConfig, cfg: Any) -> None:
    if (config.resume or config.resume_or_start) and cfg.model not in RESUMABLE_MODELS:
        raise ConfigError(
            f"TrainingPipelineConfig: option 'resume' needs a PyTorch model (mlp or cnn) or "
            f"flax_mlp, which "
            f"writes checkpoints; {cfg.model!r} trains in one go. Drop --resume."
        )


def _fit(choice: EngineChoice, config: TrainingPipelineConfig, cfg: Any,
         splits: tuple[Any, ...], workdir: Path, lineage: dict[str, Any],
         fv: Any) -> tuple[_Fitted, Any]:
    """Train on the engine chosen (:mod:`fstrain.trainers.engine`); what was fitted and the
    input example (the train frame, or one train row read from the version's files)."""
    engine, source = choice.engine, choice.source
    if engine is Engine.SPARK:
        return _train_spark(fv, cfg, config, source, workdir)
    if engine is Engine.RAY_TUNE:
        return _tune_and_refit(config, cfg, splits, workdir, lineage), splits[0]
    if engine is Engine.RAY_BOOSTING:
        result = train_boosting_on_ray(cfg, source, workdir=workdir, num_workers=config.workers,
                                       ray_address=config.ray_address, num_cpus=config.ray_cpus)
    elif engine is Engine.STREAMED:
        result = train_torch_streamed(cfg, source, workdir=workdir, lineage=lineage,
                                      resume=config.resume)
    elif engine is Engine.RAY_TRAIN:  # from the version's files (source), or the frames
        frames = (dict(zip(("X_train", "X_val", "y_train", "y_val"), splits, strict=True))
                  if source is None else {})
        result = train_distributed(cfg, **frames, source=source, workdir=workdir,
                                   num_workers=config.workers, ray_address=config.ray_address,
                                   num_cpus=config.ray_cpus, lineage=lineage, resume=config.resume)
    else:
        X_tr, X_va, y_tr, y_va = splits
        result = train(cfg, X_tr, y_tr, X_va, y_va, workdir=workdir, lineage=lineage,
                       resume=config.resume)
    example = (source.read("train", (0, 0, 1))[0] if source is not None and not choice.frames
               else splits[0])
    return _Fitted(cfg, result, registry_metrics(result.metrics)), example


def _tune_and_refit(config: TrainingPipelineConfig, cfg: Any, splits: tuple[Any, ...],
                    workdir: Path, lineage: dict[str, Any]) -> _Fitted:
    """Search on train/validation, then refit the best configuration on both."""
    X_tr, X_va, y_tr, y_va = splits
    tuned = tune(cfg, X_tr, y_tr, X_va, y_va, workdir=workdir / "tune",
                 ray_address=config.ray_address, num_cpus=config.ray_cpus)
    cfg = tuned.best_config
    tuning = {
        "best_params": tuned.best_params, "metric": tuned.metric, "mode": tuned.mode,
        "best_metric": tuned.best_metric, "max_t": tuned.max_t, "notes": list(tuned.notes),
        "trials": tuned.trials.to_dict(orient="records"),
    }
    # the best configuration is refitted on train + validation; its number of rounds is
    # the one the best trial ran, so no early-stopping split is needed
    X_fit = pd.concat([X_tr, X_va], ignore_index=True)
    y_fit = pd.concat([y_tr, y_va], ignore_index=True)
    final_cfg = cfg if cfg.is_torch else cfg.with_overrides({"early_stopping_rounds": None})
    result = train(final_cfg, X_fit, y_fit, X_va, y_va, workdir=workdir / "final",
                   lineage=lineage)
    if result.curves is not None:
        result.curves.notes.append("tuned: the refit trained on train + validation rows, so "
                                   "its validation curve is not held out")
    # the best trial's held-out validation score (the refit saw validation rows)
    return _Fitted(cfg, result, registry_metrics({tuned.metric: tuned.best_metric}), tuning)


def _signer(project: Project, name: str, key: str | os.PathLike[str] | None = None) -> Any:
    """Who signs the model's creation record, settled before any training: in a store with a
    trust list a missing, unknown, revoked or wrong-role key (``key``, else $FSTRAIN_KEY) is
    refused now."""
    registry = project.get_model_registry()
    return resolve_signer(registry.trust_store, "creation", label=f"Model '{name}'", key=key)[1]


def _register(project: Project, name: str, fv: Any, config: TrainingPipelineConfig,
              fitted: _Fitted, X_train: Any, extra_config: dict[str, Any],
              reports: tuple[Any, ...] = (), signer: Any = None) -> Any:
    """Save the trained model into the registry (status ``pending``), its creation record
    signed by ``signer``; its version. ``reports`` (objects with ``write(directory)``) are saved
    next to the model files."""
    cfg, result = fitted.cfg, fitted.result
    with tempfile.TemporaryDirectory(prefix="fstrain-model-") as tmp:
        model_dir = Path(tmp) / "model"
        model_dir.mkdir()
        result.model.save(model_dir)
        if result.curves is not None:  # hashed in the manifest with the model files
            result.curves.write(model_dir)
        for report in reports:  # hashed in the manifest with the model files, too
            report.write(model_dir)
        registry = project.get_model_registry()
        flavor = getattr(registry, _FRAMEWORKS[cfg.model])
        model = flavor.create_model(
            name,
            metrics={k: float(v) for k, v in fitted.metrics.items() if _finite(v)},
            description=config.description or f"{cfg.model} trained on {fv.name} v{fv.version} "
                                              f"training dataset v{config.training_dataset_version}",
            input_example=_input_example(X_train),
            feature_view=fv,
            training_dataset_version=config.training_dataset_version,
            hyperparameters=result.params,
            training_config={
                "trainer": cfg.model_dump(mode="json"),
                "imbalance": result.imbalance,
                "nondeterminism": list(result.nondeterminism),
                "best_iteration": getattr(result, "best_iteration", None),
                "device": getattr(result, "device", None),
                "tuning": fitted.tuning,
                # the trainer's own timings (fstrain doctor reads the preprocessing share)
                "timings": {k: v for k, v in result.extra.items() if k.endswith("_seconds")},
                # data-parallel boosting: world size, shard rows, the exactly-once check
                "distributed": result.extra.get("distributed"),
                # a resumed torch/flax run: the checkpoint it continued from (epoch, step)
                "resumed_from": result.extra.get("resumed_from"),
                **extra_config,
            },
        )
        model.save(str(model_dir), signer=signer)
    return model.version


def _train_spark(fv: Any, cfg: Any, config: TrainingPipelineConfig, files: Any,
                 workdir: Path) -> tuple[_Fitted, Any]:
    """Train a Spark MLlib model on the version's verified Parquet files (``files``, the
    route's :class:`~fstrain.trainers.stream.source.StreamSource`); also return one train row
    as the input example."""
    import pyarrow.parquet as pq

    source = SparkSource(train=files.files["train"], validation=files.files["validation"],
                         features=tuple(fv.feature_names), label=fv.labels[0])
    result = train_spark(cfg, source, workdir=workdir, master=config.spark_master)
    example = pq.ParquetFile(source.train).read_row_group(0, columns=list(source.features))
    return (_Fitted(cfg, result, registry_metrics(result.metrics)),
            example.slice(0, 1).to_pandas())


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _input_example(X: Any) -> dict[str, Any]:
    row = X.head(1).to_dict(orient="records")
    if not row:
        return {}
    return {k: (v.isoformat() if hasattr(v, "isoformat") else (None if v != v else v))
            for k, v in row[0].items()}
