"""Hyperparameter tuning on Ray Tune: Optuna (TPE) proposes, ASHA stops bad trials early.

Every trial trains through the same trainer code as :func:`fstrain.trainers.train` and reports
its validation metric after each boosting round (XGBoost, LightGBM) or epoch (torch), so ASHA can cut a
trial at a rung. The search space comes from ``config.tune.search_space`` (declarative, validated
by :func:`fstrain.trainers.config.validate_search_space`) or :func:`default_search_space`.

Ray starts locally (``num_cpus``, no dashboard, temp dir under ``workdir``) unless
``ray_address`` joins an existing cluster. The caller then trains the best config on
train+validation (the test split never enters tuning).

Integer ranges (``randint``, ``qrandint``, ``lograndint``) are inclusive of ``high``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
import shutil

import pandas as pd

from fstrain.kernel.errors import ConfigError, did_you_mean
from fstrain.trainers.config import (
    BOOSTED_TREE_MODELS,
    METRIC_MODES,
    TrainConfig,
    load_config as _load,
    load_config,
    validate_search_space,
)

#: the training-skill defaults
XGBOOST_SPACE: dict[str, dict[str, Any]] = {
    "max_depth": {"type": "randint", "low": 2, "high": 10},
    "learning_rate": {"type": "loguniform", "low": 1e-3, "high": 0.3},
    "subsample": {"type": "uniform", "low": 0.5, "high": 1.0},
    "colsample_bytree": {"type": "uniform", "low": 0.5, "high": 1.0},
    "min_child_weight": {"type": "loguniform", "low": 0.5, "high": 20.0},
    "reg_lambda": {"type": "loguniform", "low": 1e-3, "high": 10.0},
    "reg_alpha": {"type": "loguniform", "low": 1e-3, "high": 10.0},
    "n_estimators": {"type": "randint", "low": 50, "high": 500},
}
LIGHTGBM_SPACE: dict[str, dict[str, Any]] = {
    "num_leaves": {"type": "lograndint", "low": 8, "high": 256},
    "learning_rate": {"type": "loguniform", "low": 1e-3, "high": 0.3},
    "min_child_samples": {"type": "lograndint", "low": 5, "high": 200},
    "subsample": {"type": "uniform", "low": 0.5, "high": 1.0},
    "subsample_freq": {"type": "choice", "values": [0, 1]},
    "colsample_bytree": {"type": "uniform", "low": 0.5, "high": 1.0},
    "reg_lambda": {"type": "loguniform", "low": 1e-3, "high": 10.0},
    "n_estimators": {"type": "randint", "low": 50, "high": 500},
}
MLP_SPACE: dict[str, dict[str, Any]] = {
    "hidden_sizes": {"type": "choice", "values": [[64], [128, 64], [256, 128], [64, 32]]},
    "dropout": {"type": "uniform", "low": 0.0, "high": 0.5},
    "lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2},
    "weight_decay": {"type": "loguniform", "low": 1e-6, "high": 1e-1},
    "batch_size": {"type": "choice", "values": [32, 64, 128, 256]},
}
CNN_SPACE: dict[str, dict[str, Any]] = {
    "channels": {"type": "choice", "values": [[16, 32], [32, 64]]},
    "dropout": {"type": "uniform", "low": 0.0, "high": 0.5},
    "lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2},
    "weight_decay": {"type": "loguniform", "low": 1e-6, "high": 1e-1},
    "batch_size": {"type": "choice", "values": [32, 64, 128]},
}
SKLEARN_SPACES: dict[str, dict[str, dict[str, Any]]] = {
    "sklearn_logreg": {"C": {"type": "loguniform", "low": 1e-3, "high": 1e2}},
    "sklearn_rf": {
        "n_estimators": {"type": "randint", "low": 50, "high": 400},
        "max_depth": {"type": "randint", "low": 3, "high": 20},
        "min_samples_leaf": {"type": "randint", "low": 1, "high": 20},
    },
}


def default_search_space(model: str) -> dict[str, dict[str, Any]]:
    """The default declarative search space of ``model``."""
    spaces = {"xgboost": XGBOOST_SPACE, "lightgbm": LIGHTGBM_SPACE, "mlp": MLP_SPACE, "cnn": CNN_SPACE, **SKLEARN_SPACES}
    return json.loads(json.dumps(spaces[model]))


@dataclass
class TuneResult:
    """Best hyperparameters and the table of all trials.

    Attributes:
        best_params: the sampled values of the best trial (plain Python values).
        best_config: ``config`` with ``best_params`` applied (for XGBoost, ``n_estimators`` is
            the number of rounds the best trial actually ran, so it can be retrained on
            train+validation without an early-stopping split).
        best_metric: the best trial's best reported value of ``metric``.
        trials: one row per trial: ``trial_id``, sampled params, ``iterations``, last and best
            ``metric``, ``stopped_early`` (fewer iterations than ``max_t``).
    """

    best_params: dict[str, Any]
    best_config: TrainConfig
    best_metric: float
    metric: str
    mode: str
    max_t: int
    trials: pd.DataFrame
    storage_path: Path
    notes: list[str] = field(default_factory=list)


def _ray_space(space: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], set[str]]:
    """Declarative space → Ray Tune distributions; list-valued choices travel as JSON strings."""
    from ray import tune

    out: dict[str, Any] = {}
    json_keys: set[str] = set()
    for name, spec in space.items():
        kind = spec["type"]
        if kind == "choice":
            values = spec["values"]
            if any(isinstance(v, (list, dict)) for v in values):
                json_keys.add(name)
                values = [json.dumps(v) for v in values]
            out[name] = tune.choice(values)
        elif kind == "uniform":
            out[name] = tune.uniform(spec["low"], spec["high"])
        elif kind == "loguniform":
            out[name] = tune.loguniform(spec["low"], spec["high"])
        elif kind == "quniform":
            out[name] = tune.quniform(spec["low"], spec["high"], spec["q"])
        elif kind == "randint":
            out[name] = tune.randint(spec["low"], spec["high"] + 1)
        elif kind == "lograndint":
            out[name] = tune.lograndint(spec["low"], spec["high"] + 1)
        elif kind == "qrandint":
            out[name] = tune.qrandint(spec["low"], spec["high"], spec["q"])
    return out, json_keys


def _decode(sampled: dict[str, Any], json_keys: set[str]) -> dict[str, Any]:
    out = {}
    for key, value in sampled.items():
        value = json.loads(value) if key in json_keys else value
        out[key] = value.item() if hasattr(value, "item") else value
    return out


# Ray appends "/session_<date>_<time>_<usec>_<pid>/sockets/plasma_store" (about 62 characters)
# to its temp dir, and a Unix socket path must stay under 108 bytes (107 usable).
RAY_SOCKET_SUFFIX = 62
SOCKET_PATH_MAX = 107


def _short_temp_dir(workdir: Path) -> tuple[Path, list[str], bool]:
    """A Ray temp dir short enough for its Unix sockets: ``workdir/ray``, else a new folder in
    ``$TMPDIR``, else in ``/tmp``. Returns ``(path, notes, created)``; ``created`` folders are
    removed when the session ends."""
    budget = SOCKET_PATH_MAX - RAY_SOCKET_SUFFIX
    preferred = workdir / "ray"
    if len(str(preferred.resolve())) <= budget:
        preferred.mkdir(parents=True, exist_ok=True)
        return preferred, [], False
    for parent in dict.fromkeys([tempfile.gettempdir(), "/tmp"]):
        # the folder name is about 11 characters: check the parent leaves room for it
        if len(str(Path(parent).resolve())) + 12 > budget or not Path(parent).is_dir():
            continue
        short = Path(tempfile.mkdtemp(prefix="fr-", dir=parent)).resolve()
        return short, [
            f"Ray temp dir {short} (not under workdir: {preferred} is too long for Ray's Unix "
            f"socket paths, which must stay under {SOCKET_PATH_MAX + 1} bytes)"
        ], True

    raise ConfigError(
        f"No temp folder is short enough for Ray's Unix sockets ({SOCKET_PATH_MAX} bytes with "
        f"about {RAY_SOCKET_SUFFIX} added by Ray): {preferred}, {tempfile.gettempdir()} and /tmp "
        "are all too long. Set TMPDIR to a short folder, e.g. TMPDIR=/tmp."
    )


@contextmanager
def ray_session(workdir: Path, *, ray_address: str | None = None,
                num_cpus: int = 2) -> Iterator[list[str]]:
    """Start (and afterwards stop) a local Ray, or join ``ray_address``; yields notes."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    notes: list[str] = []
    owner = False
    created = False
    if ray.is_initialized():
        notes.append("reused the Ray session already running in this process")
    elif ray_address:
        ray.init(address=ray_address, log_to_driver=False)
        owner = True
        notes.append(f"joined Ray cluster at {ray_address}")
    else:
        temp, notes, created = _short_temp_dir(Path(workdir))
        # Ray kills idle workers beyond num_cpus after 1 s; Ray Train's actors count, so Ray
        # Data's read tasks would start fresh processes every epoch (bench/RESULTS.md)
        ray.init(num_cpus=num_cpus, include_dashboard=False, _temp_dir=str(temp.resolve()),
                 log_to_driver=False,
                 _system_config={"num_workers_soft_limit": max(8, 4 * num_cpus)})
        owner = True
    try:
        yield notes
    finally:
        if owner:
            ray.shutdown()
        if created:
            shutil.rmtree(temp, ignore_errors=True)


def _trial(sampled: dict[str, Any], *, base: dict[str, Any], json_keys: list[str],
           data: tuple[Any, ...], nthread: int) -> None:
    """One Ray Tune trial: train with the sampled params, report every round/epoch."""
    from ray import tune

    cfg = _load(base).with_overrides(_decode(sampled, set(json_keys)))
    X_train, y_train, X_val, y_val = data

    def report(row: dict[str, Any]) -> None:
        tune.report({k: v for k, v in row.items() if isinstance(v, (int, float))})

    if cfg.model == "xgboost":
        from fstrain.trainers.tabular import train_xgboost

        train_xgboost(cfg, X_train, y_train, X_val, y_val, report=report, nthread=nthread)
    elif cfg.model == "lightgbm":
        from fstrain.trainers.lightgbm_trainer import train_lightgbm

        train_lightgbm(cfg, X_train, y_train, X_val, y_val, report=report, nthread=nthread)
    elif cfg.model in ("sklearn_logreg", "sklearn_rf"):
        from fstrain.trainers.tabular import train_sklearn

        train_sklearn(cfg, X_train, y_train, X_val, y_val, report=report)
    else:
        import torch

        from fstrain.trainers.torch_models import train_torch

        torch.set_num_threads(max(1, nthread))
        cfg = cfg.model_copy(update={"torch": cfg.torch.model_copy(update={"checkpoint": False})})
        train_torch(cfg, X_train, y_train, X_val, y_val, workdir=None, report=report)


def tune(
    config: TrainConfig | dict[str, Any] | str | Path,
    X_train: pd.DataFrame,
    y_train: pd.DataFrame,
    X_val: pd.DataFrame,
    y_val: pd.DataFrame,
    *,
    workdir: Path,
    ray_address: str | None = None,
    num_cpus: int = 2,
) -> TuneResult:
    """Search hyperparameters with ASHA + Optuna on Ray Tune.

    Args:
        config: base training config; ``config.tune`` holds ``num_samples``,
            ``max_concurrent``, ``search_space`` (default: :func:`default_search_space`),
            ``metric``/``mode`` (default: ``val_<config metric>``), ASHA's ``grace_period``,
            ``reduction_factor`` and ``max_t``.
        workdir: Ray results go to ``workdir/ray_results``; Ray's temp dir to ``workdir/ray``.
        ray_address: join this Ray cluster instead of starting a local one.
        num_cpus: CPUs of the local Ray.

    Raises:
        ConfigError: invalid search space or metric.
    """
    cfg, space, metric, mode, notes_metric = _tuning_plan(load_config(config), y_train)
    max_t = _max_t(cfg, space)
    ray_space, json_keys = _ray_space(space)
    workdir = Path(workdir).resolve()
    storage = workdir / "ray_results"
    storage.mkdir(parents=True, exist_ok=True)
    with ray_session(workdir, ray_address=ray_address, num_cpus=num_cpus) as notes:
        tuner = _tuner(cfg, (X_train, y_train, X_val, y_val), ray_space, json_keys,
                       metric=metric, mode=mode, max_t=max_t, storage=storage)
        # Ray Tune prints its progress ("View detailed results here", TensorBoard hints) on
        # stdout; stdout belongs to the CLI's --json answer, so the progress goes to stderr.
        with redirect_stdout(sys.stderr):
            grid = tuner.fit()
        errors = [r.error for r in grid if r.error is not None]
        if len(errors) == len(grid):
            raise ConfigError(f"Every tuning trial failed; first error: {errors[0]}")
        rows = [_trial_row(result, metric, mode, ray_space, json_keys, max_t)
                for result in grid if result.error is None]
    trials = pd.DataFrame(rows)
    best_col = f"best_{metric}"
    ordered = trials.sort_values(best_col, ascending=(mode == "min"), na_position="last")
    best = ordered.iloc[0]
    best_params = {k: _plain(best[k]) for k in ray_space}
    best_config = cfg.with_overrides(best_params)
    if cfg.model in BOOSTED_TREE_MODELS:
        best_config = best_config.with_overrides({"n_estimators": int(best["best_iteration"])})
    notes.append(
        "Tune: with concurrent trials, which trials ASHA stops depends on the order results "
        "arrive; Optuna's proposals are seeded (config.seed)"
    )
    return TuneResult(
        best_params=best_params, best_config=best_config, best_metric=float(best[best_col]),
        metric=metric, mode=mode, max_t=max_t, trials=trials.reset_index(drop=True),
        storage_path=storage, notes=notes + notes_metric,
    )


def _tuning_plan(cfg: TrainConfig, y_train: pd.DataFrame
                 ) -> tuple[TrainConfig, dict[str, Any], str, str, list[str]]:
    """The config trials train with, the checked search space, the tuning metric and its
    direction, and a note when the trials' metric was switched to the tuning metric."""
    from fstrain.trainers.data import label_info

    if cfg.model in ("catboost", "keras_mlp", "flax_mlp"):
        raise ConfigError(
            f"Tuning (--tune) runs xgboost, lightgbm, scikit-learn and torch models; "
            f"{cfg.model!r} is trained without it. Drop --tune or pick one of those."
        )
    space = cfg.tune.search_space or default_search_space(cfg.model)
    try:
        validate_search_space(space, cfg.model)
    except ValueError as exc:
        raise ConfigError(f"Invalid search space: {exc}") from None
    metric, mode = _tuning_metric(cfg, label_info(y_train, cfg.task).n_classes)
    trained_on = metric.removeprefix("val_")
    if metric.startswith("val_") and trained_on in METRIC_MODES and cfg.metric != trained_on:
        # trials stop early and are ranked on the tuning metric, so they report it every round
        cfg = cfg.model_copy(update={"metric": trained_on})
        return cfg, space, metric, mode, [
            f"trials train with metric={trained_on!r} (tune.metric={metric!r})"]
    return cfg, space, metric, mode, []


def _tuner(cfg: TrainConfig, data: tuple[Any, ...], ray_space: dict[str, Any],
           json_keys: set[str], *, metric: str, mode: str, max_t: int, storage: Path) -> Any:
    """A Ray Tune ``Tuner``: Optuna proposals (seeded, limited concurrency) and ASHA stopping."""
    from ray import tune as rtune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search import ConcurrencyLimiter
    from ray.tune.search.optuna import OptunaSearch

    opts = cfg.tune
    trainable = rtune.with_parameters(
        _trial, base=cfg.model_dump(mode="json"), json_keys=sorted(json_keys),
        data=data, nthread=max(1, int(opts.cpus_per_trial)),
    )
    resources = {"cpu": opts.cpus_per_trial, "gpu": opts.gpus_per_trial}
    searcher = ConcurrencyLimiter(
        OptunaSearch(metric=metric, mode=mode, seed=cfg.seed), max_concurrent=opts.max_concurrent
    )
    scheduler = ASHAScheduler(
        time_attr="training_iteration", max_t=max_t, grace_period=min(opts.grace_period, max_t),
        reduction_factor=opts.reduction_factor,
    )
    return rtune.Tuner(
        rtune.with_resources(trainable, resources),
        param_space=ray_space,
        tune_config=rtune.TuneConfig(
            metric=metric, mode=mode, search_alg=searcher, scheduler=scheduler,
            num_samples=opts.num_samples,
        ),
        run_config=rtune.RunConfig(name="tune", storage_path=str(storage), verbose=0),
    )


def _tuning_metric(cfg: TrainConfig, n_classes: int) -> tuple[str, str]:
    """The metric trials are ranked by (``val_<metric>`` or ``train_loss``) and its direction."""
    from fstrain.trainers.metrics import resolve_metric

    base_metric, base_mode = resolve_metric(cfg, n_classes)
    metric = cfg.tune.metric or f"val_{base_metric}"
    known = {f"val_{m}" for m in ("auc", "pr_auc", "logloss", "accuracy", "f1")} | {"train_loss"}
    if metric not in known:
        raise ConfigError(
            f"tune.metric must be one of {', '.join(sorted(known))}; got {metric!r}."
            + did_you_mean(metric, known)
        )
    bare = metric.removeprefix("val_")
    mode = cfg.tune.mode or ("min" if metric.endswith(("logloss", "loss"))
                             else METRIC_MODES.get(bare, base_mode))
    return metric, mode


def _max_t(cfg: TrainConfig, space: dict[str, dict[str, Any]]) -> int:
    """ASHA's budget: rounds for boosted trees (the space's largest n_estimators), epochs for
    networks, one step for the other models."""
    if cfg.tune.max_t is not None:
        return cfg.tune.max_t
    if cfg.model in BOOSTED_TREE_MODELS:
        n_est = space.get("n_estimators")
        if n_est and n_est["type"] != "choice":
            return int(n_est["high"])
        return int(max(n_est["values"]) if n_est else cfg.params.get("n_estimators", 200))
    if cfg.is_torch:
        return cfg.torch.epochs
    return 1


def _trial_row(result: Any, metric: str, mode: str, ray_space: dict[str, Any],
               json_keys: set[str], max_t: int) -> dict[str, Any]:
    """One finished trial: its parameters, iterations and best/last metric value."""
    hist = result.metrics_dataframe
    values = hist[metric] if hist is not None and metric in hist else pd.Series(dtype=float)
    best_value = values.max() if mode == "max" else values.min()
    iters = int(result.metrics.get("training_iteration", 0))
    best_iter = (
        int(values.idxmax() if mode == "max" else values.idxmin()) + 1 if len(values) else iters
    )
    return {
        "trial_id": result.metrics.get("trial_id"),
        **_decode({k: v for k, v in result.config.items() if k in ray_space}, json_keys),
        "iterations": iters,
        f"last_{metric}": result.metrics.get(metric),
        f"best_{metric}": float(best_value) if len(values) else float("nan"),
        "best_iteration": best_iter,
        "stopped_early": iters < max_t,
    }


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return value
