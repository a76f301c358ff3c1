"""Data-parallel XGBoost and LightGBM on Ray Train, over a version's verified split files
(Parquet, csv or jsonl).

:func:`train_boosting_on_ray` trains the model :func:`fstrain.trainers.train` would, on
``num_workers`` Ray Train workers (``XGBoostTrainer`` with XGBoost's own collective, or
``LightGBMTrainer`` with ``tree_learner=data_parallel``):

- the driver fits what a single-process run fits on the train split — label encoding, the
  preprocessor and the imbalance weights — by one streamed pass over the train file
  (:class:`StreamedFit`, :func:`~fstrain.trainers.stream.prep.fit_streamed`, equal to the
  in-memory :class:`~fstrain.trainers.tabular.Prepared`), so the saved predictor has the same
  files and the same ``predictor.json`` and the driver never holds a split: data larger than
  the driver's memory trains as long as the workers' shards fit theirs;
- Ray Data reads the version's pinned files (the paths, or a csv or jsonl version's row-aligned
  pieces of text, and the view's shaper a streamed read hands out, checked against their
  sha256; the view's model-dependent transformations
  apply as in memory) and applies that train-fitted preprocessor and label encoding per piece
  (the torch workers' :class:`~fstrain.trainers.stream.prep.StreamPrep` and
  :func:`~fstrain.trainers.stream.ray_feed.pieces_dataset`); the worker weighs its train rows with
  the train-fitted class weights (:meth:`~fstrain.trainers.imbalance.ImbalancePlan.sample_weight`).
  Each rank gets one dataset over its contiguous share of the
  train rows (pieces of row groups, :func:`fstrain.trainers.stream.pieces.rank_pieces`, the same
  dealing the torch workers use), so each row is in exactly one shard and in the same shard
  every run (Ray Train's ``streaming_split(equal=True)`` drops up to ``num_workers - 1`` rows,
  and its blocks go to whichever worker asks first). Every worker records its shard's row
  count and an order-free fingerprint of its rows; the driver checks that together they are
  the train matrix, row for row, before anything is registered;
- every worker reads the whole validation split (it is the early-stopping set: each worker then
  computes the same validation metric on the same model and stops at the same round, and
  LightGBM's metrics, which are per machine, equal the single-process ones);
- rank 0 returns the booster; the driver wraps it exactly as the single-process trainer does
  (:func:`~fstrain.trainers.tabular.finish_booster`: calibration on validation, metrics,
  learning curves), scoring the validation split a row group at a time (it keeps the
  predictions and encoded labels, a few numbers per row, which calibration and the metrics
  need whole) and checking the shards against the train rows' fingerprint from another
  streamed pass.

Distributed histograms differ slightly from one process: XGBoost merges per-worker quantile
sketches and LightGBM finds each feature's bins on one worker's rows, so split candidates (and
so the model) are close to, not equal to, a single-process run's.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError, IntegrityError
from fstrain.trainers.config import TrainConfig
from fstrain.trainers.distributed_record import distributed_record
from fstrain.trainers.result import TrainResult
from fstrain.trainers.calibration import check_method
from fstrain.trainers.imbalance import ImbalancePlan, plan_from_counts
from fstrain.trainers.lightgbm_trainer import lightgbm_history_row, lightgbm_params
from fstrain.trainers.metrics import resolve_metric
from fstrain.trainers.preprocessing import feature_names_out
from fstrain.trainers.stream.pieces import rank_pieces
from fstrain.trainers.stream.prep import fit_streamed
from fstrain.trainers.stream.ray_feed import data_config, dataset_name, pieces_dataset
from fstrain.trainers.stream.split import SplitStream
from fstrain.trainers.tabular import (
    finish_booster,
    use_quantile_dmatrix,
    xgboost_f1,
    xgboost_history_row,
    xgboost_params,
)
from fstrain.trainers.tuning import ray_session

BOOSTERS = ("xgboost", "lightgbm")
SHARD_FILE = "shard_rank{rank}.json"
MODEL_FILE = {"xgboost": "model.ubj", "lightgbm": "model.txt"}
# how the workers talk (the "backend" of the distributed record)
BACKEND = {"xgboost": "xgboost collective", "lightgbm": "lightgbm socket"}


def row_fingerprints(x: np.ndarray, y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """One uint64 per row from the row's values (its matrix row, label and weight)."""
    columns = [x[:, j] for j in range(x.shape[1])] + [np.asarray(y)]
    if w is not None:
        columns.append(np.asarray(w, dtype=np.float32))
    out = np.zeros(len(y), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in columns:
            out = out * np.uint64(1_000_003) + pd.util.hash_array(np.ascontiguousarray(column))
    return out


def fingerprint(x: np.ndarray, y: np.ndarray, w: np.ndarray | None) -> int:
    """The sum (mod 2**64) of :func:`row_fingerprints`: independent of row order, so shards'
    fingerprints add up to the whole matrix's when every row is in exactly one shard."""
    with np.errstate(over="ignore"):
        return int(row_fingerprints(x, y, w).sum(dtype=np.uint64))


def refuse_unsupported(cfg: TrainConfig, *, tune: bool = False,
                       drop_label_issues: bool = False) -> None:
    """Raise :class:`ConfigError` for an option the Ray path cannot honour (never ignored)."""
    who = f"{cfg.model} on Ray workers (--workers > 1)"
    if cfg.model not in BOOSTERS:
        raise ConfigError(f"distributed boosting trains {', '.join(BOOSTERS)}; got {cfg.model!r}.")
    if tune:
        raise ConfigError(f"{who} trains one configuration; --tune runs single-process trials "
                          "on Ray Tune. Tune without --workers, then train the best "
                          "configuration with --workers.")
    if drop_label_issues:
        raise ConfigError(f"{who} reads every train row of the version's file; "
                          "--drop-label-issues trains on a subset held in memory. Drop one.")
    if cfg.imbalance in ("oversample", "undersample"):
        raise ConfigError(f"{who}: imbalance={cfg.imbalance!r} resamples the whole train split, "
                          "which no worker holds. Use imbalance='class_weight' or "
                          "'scale_pos_weight', or train without --workers.")
    if cfg.device == "cuda":
        raise ConfigError(f"{who} runs CPU workers; device='cuda' would not be used. Set "
                          "device: cpu (or auto), or train on one GPU without --workers.")
    method = cfg.params.get("tree_method")
    if cfg.model == "xgboost" and method not in (None, "hist", "approx", "auto"):
        raise ConfigError(f"{who}: tree_method={method!r} has no distributed form in XGBoost; "
                          "use 'hist' (the default) or 'approx', or drop --workers.")


def _collect(shard: Any, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """A worker's shard of one split as ``(x, y)`` arrays (whole Ray Data blocks)."""
    xs, ys = [], []
    for batch in shard.iter_batches(batch_format="numpy", batch_size=None):
        xs.append(np.asarray(batch["x"], dtype=np.float32).reshape(len(batch["y"]), n_features))
        ys.append(np.asarray(batch["y"]))
    if not ys:
        return np.zeros((0, n_features), dtype=np.float32), np.zeros(0)
    return np.concatenate(xs), np.concatenate(ys)


def shard_weights(plan: Any, y: np.ndarray) -> np.ndarray:
    """A train shard's row weights: the imbalance plan's class weights (fitted on the whole
    train split by the driver) for its encoded labels, or ones without them."""
    w = plan.sample_weight(y)
    return np.ones(len(y), dtype=np.float32) if w is None else w


class StreamedFit:
    """The driver's side of distributed boosting, fitted by streamed passes over ``source``
    (a row group at a time; no split is held): the train-fitted
    :class:`~fstrain.trainers.stream.prep.StreamPrep` (schema, preprocessor, label encoding),
    the imbalance plan from the train and validation class counts, and the validation scoring
    :func:`~fstrain.trainers.tabular.finish_booster` asks for
    (:class:`~fstrain.trainers.tabular.BoosterInputs`). Equal to
    :class:`~fstrain.trainers.tabular.Prepared` on the same splits (tested)."""

    def __init__(self, config: TrainConfig, source: Any, *, framework: str) -> None:
        self.source = source
        self.prep, counts = fit_streamed(source, config)
        self.schema, self.preprocessor = self.prep.schema, self.prep.preprocessor
        self.labels, self.numeric_mode = self.prep.labels, config.numeric_mode
        self.n_features = len(feature_names_out(self.preprocessor))
        if self.labels.task == "regression":
            self.plan = ImbalancePlan(strategy="none", record={"strategy": "none",
                                                               "task": "regression"})
        else:
            check_method(config.calibration, self.labels.classes)
            val = np.zeros(self.labels.n_classes, dtype=np.int64)
            for _x, y in self._pieces("validation"):  # also refuses an unseen label, as in memory
                val += np.bincount(y, minlength=len(val))
            self.plan = plan_from_counts(config.imbalance, counts, self.labels.classes,
                                         val_counts=val, framework=framework)

    @property
    def rows_train(self) -> int:
        """Train rows (no resampling on this path)."""
        return int(self.source.rows("train"))

    @property
    def weighted(self) -> bool:
        """Whether train rows carry class weights."""
        return self.plan.class_weight is not None

    def _pieces(self, split: str) -> Any:
        """``(x, y)`` of every piece of ``split`` in file order, preprocessed and encoded."""
        stream = SplitStream(self.source, split, self.prep)
        return map(stream.piece_arrays, rank_pieces(self.source.group_rows[split], 0, 1))

    def fingerprint(self) -> int:
        """:func:`fingerprint` of the whole train matrix (labels and weights included), summed
        a piece at a time."""
        total = 0
        for x, y in self._pieces("train"):
            total = (total + fingerprint(x, y, shard_weights(self.plan, y))) % (1 << 64)
        return total

    def validation_scores(self, predictor: Any) -> tuple[np.ndarray, np.ndarray]:
        """``predictor``'s raw validation probabilities and the encoded labels, scored a piece
        at a time (a booster scores each row on its own: equal to one call on the matrix)."""
        raws, ys = [], []
        for x, y in self._pieces("validation"):
            raws.append(predictor.raw_proba_matrix(x))
            ys.append(y)
        return np.concatenate(raws), np.concatenate(ys)


def _fit_xgboost(spec: dict[str, Any], train: tuple[np.ndarray, ...],
                 val: tuple[np.ndarray, ...]) -> tuple[bytes, list[dict[str, Any]], int]:
    """One worker's part of XGBoost's distributed ``xgb.train`` (inside Ray Train's
    communicator context): the single-process trainer's matrices, history and early stopping."""
    import xgboost as xgb

    params = {"nthread": spec["threads"], **spec["params"]}
    (x, y, w), (xv, yv) = train, val
    weight = w if spec["weighted"] else None
    dtrain: xgb.DMatrix  # a QuantileDMatrix is one
    dval: xgb.DMatrix
    if use_quantile_dmatrix("cpu", x):
        dtrain = xgb.QuantileDMatrix(x, label=y, weight=weight,
                                     max_bin=params.get("max_bin", 256))
        dval = xgb.QuantileDMatrix(xv, label=yv, ref=dtrain)
    else:
        dtrain, dval = xgb.DMatrix(x, label=y, weight=weight), xgb.DMatrix(xv, label=yv)
    history: list[dict[str, Any]] = []

    class _Record(xgb.callback.TrainingCallback):
        def after_iteration(self, model: Any, epoch: int, evals_log: dict[str, Any]) -> bool:
            history.append(xgboost_history_row(epoch, evals_log))
            return False

    callbacks: list[Any] = [_Record()]
    custom = xgboost_f1 if spec["metric"] == "f1" and spec["n_classes"] == 2 else None
    watched = "f1" if custom is not None else params["eval_metric"][-1]
    if spec["early_stopping_rounds"]:
        callbacks.append(xgb.callback.EarlyStopping(
            rounds=spec["early_stopping_rounds"], metric_name=watched, data_name="val",
            maximize=watched in ("auc", "aucpr", "f1"), save_best=True))
    booster = xgb.train(params, dtrain, num_boost_round=spec["rounds"],
                        evals=[(dtrain, "train"), (dval, "val")], callbacks=callbacks,
                        verbose_eval=False, custom_metric=custom)
    best = int(getattr(booster, "best_iteration", booster.num_boosted_rounds() - 1))
    return bytes(booster.save_raw("ubj")), history, best


def _fit_lightgbm(spec: dict[str, Any], train: tuple[np.ndarray, ...],
                  val: tuple[np.ndarray, ...]) -> tuple[bytes, list[dict[str, Any]], int]:
    """One worker's part of LightGBM's data-parallel ``lgb.train`` (network from Ray Train):
    the single-process trainer's datasets, history and early stopping (best trees kept)."""
    import lightgbm as lgb
    from ray.train.lightgbm import get_network_params

    params = {"num_threads": spec["threads"], **spec["params"], **get_network_params(), "pre_partition": True,
              "tree_learner": "data_parallel"}
    (x, y, w), (xv, yv) = train, val
    dataset_params = {"max_bin": params.get("max_bin", 255), "verbosity": -1}
    dtrain = lgb.Dataset(x, label=y, weight=w if spec["weighted"] else None,
                         params=dataset_params)
    dval = lgb.Dataset(xv, label=yv, reference=dtrain, params=dataset_params)
    history: list[dict[str, Any]] = []

    def record(env: Any) -> None:
        history.append(lightgbm_history_row(env.iteration, env.evaluation_result_list))

    callbacks: list[Any] = [record]
    if spec["early_stopping_rounds"]:
        callbacks.append(lgb.early_stopping(spec["early_stopping_rounds"],
                                            first_metric_only=True, verbose=False))
    booster = lgb.train(params, dtrain, num_boost_round=spec["rounds"],
                        valid_sets=[dtrain, dval], valid_names=["train", "val"],
                        callbacks=callbacks)
    best_rounds = booster.best_iteration or booster.current_iteration()
    return booster.model_to_string(num_iteration=best_rounds).encode(), history, best_rounds - 1


def _worker(spec: dict[str, Any]) -> None:
    """Ray Train worker: read this rank's train shard and the validation split, boost, and
    report the shard's row count and fingerprint (rank 0 also the model and its history)."""
    import ray.train

    rank = ray.train.get_context().get_world_rank()
    t0 = time.perf_counter()
    x, y = _collect(ray.train.get_dataset_shard(dataset_name(rank)), spec["n_features"])
    train = (x, y, shard_weights(spec["plan"], y))
    val = _collect(ray.train.get_dataset_shard("validation"), spec["n_features"])
    t_read = time.perf_counter()
    fit = _fit_xgboost if spec["kind"] == "xgboost" else _fit_lightgbm
    model, history, best = fit(spec, train, val)
    shard = {"rank": rank, "rows": len(train[1]), "fingerprint": str(fingerprint(*train)),
             "validation_rows": len(val[1]), "read_seconds": t_read - t0,
             "fit_seconds": time.perf_counter() - t_read}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / SHARD_FILE.format(rank=rank)).write_text(json.dumps(shard))
        if rank == 0:
            (Path(tmp) / MODEL_FILE[spec["kind"]]).write_bytes(model)
            (Path(tmp) / "history.json").write_text(json.dumps(
                {"history": history, "best_iteration": best}))
        ray.train.report({"rank": rank, "rows": shard["rows"]},
                         checkpoint=ray.train.Checkpoint.from_directory(tmp),
                         checkpoint_dir_name="final")


def _datasets(source: Any, data: Any, num_workers: int) -> dict[str, Any]:
    """One Ray Dataset per rank over its contiguous share of the train rows (pieces of row
    groups in file order: every row in exactly one shard, the same shard every run), and one
    over the whole validation split; each reads and preprocesses its pieces in Ray Data tasks."""
    train, validation = (SplitStream(source, split, data.prep)
                         for split in ("train", "validation"))
    out = {dataset_name(rank): pieces_dataset(train, train.pieces(rank, num_workers))
           for rank in range(num_workers)}
    out["validation"] = pieces_dataset(validation, validation.pieces(0, 1))
    return out


def _run_trainer(spec: dict[str, Any], datasets: dict[str, Any], workdir: Path,
                 num_workers: int, cpus: float) -> Any:
    """Fit on Ray Train (XGBoostTrainer or LightGBMTrainer); the result's checkpoint.
    ``cpus`` is each worker's logical CPU share (Ray Data's read tasks need the rest)."""
    from ray.train import RunConfig, ScalingConfig

    if spec["kind"] == "xgboost":
        from ray.train.xgboost import XGBoostTrainer as Trainer
    else:
        from ray.train.lightgbm import LightGBMTrainer as Trainer  # type: ignore[assignment]
    trainer = Trainer(
        _worker, train_loop_config=spec, datasets=datasets,
        dataset_config=data_config(),
        scaling_config=ScalingConfig(num_workers=num_workers, use_gpu=False,
                                     resources_per_worker={"CPU": cpus}),
        run_config=RunConfig(name=f"{spec['kind']}_data_parallel",
                             storage_path=str(workdir / "ray_results")),
    )
    result = trainer.fit()
    if result.checkpoint is None:
        raise IntegrityError(f"{spec['kind']} on Ray: the workers reported no model.")
    return result.checkpoint


def _read_final(checkpoint: Any, kind: str, num_workers: int) -> tuple[Any, dict[str, Any],
                                                                       list[dict[str, Any]]]:
    """The booster, its history record and every rank's shard record from the checkpoint."""
    with checkpoint.as_directory() as folder:
        root = Path(folder)
        raw = (root / MODEL_FILE[kind]).read_bytes()
        record = json.loads((root / "history.json").read_text())
        shards = [json.loads((root / SHARD_FILE.format(rank=r)).read_text())
                  for r in range(num_workers)]
    if kind == "xgboost":
        import xgboost as xgb

        booster = xgb.Booster()
        booster.load_model(bytearray(raw))
        return booster, record, shards
    import lightgbm as lgb

    return lgb.Booster(model_str=raw.decode()), record, shards


def check_shards(shards: list[dict[str, Any]], rows: int, expected: int) -> dict[str, Any]:
    """Check that the workers' shards hold every train row exactly once: their row counts add
    up to the train split's ``rows`` and their fingerprints to the train matrix's ``expected``
    (:meth:`StreamedFit.fingerprint`: labels and weights included). Raises
    :class:`IntegrityError` otherwise; returns the record."""
    got_rows = sum(s["rows"] for s in shards)
    total = sum(int(s["fingerprint"]) for s in shards) % (1 << 64)
    if got_rows != rows or total != expected:
        raise IntegrityError(
            f"the Ray workers' train shards hold {got_rows} rows (fingerprint {total}); the "
            f"train split has {rows} (fingerprint {expected}): some rows were dropped, "
            "duplicated or changed on the way. Nothing was registered.")
    return {"rows": rows, "fingerprint": str(expected), "each_row_once": True}


def _spec(cfg: TrainConfig, data: Any, threads: int) -> tuple[dict[str, Any], tuple[str, str]]:
    """What every worker needs (native params, rounds, early stopping) and the metric."""
    k = data.labels.n_classes
    metric, mode = resolve_metric(cfg, k)
    if cfg.model == "xgboost":
        params, rounds = xgboost_params(cfg, k, metric, "cpu")
    else:
        params, rounds = lightgbm_params(cfg, k, metric)
    if data.plan.scale_pos_weight is not None:
        params["scale_pos_weight"] = data.plan.scale_pos_weight
    spec = {"kind": cfg.model, "params": params, "rounds": rounds, "n_classes": k,
            "metric": metric, "early_stopping_rounds": cfg.early_stopping_rounds,
            "weighted": data.weighted, "plan": data.plan, "n_features": data.n_features,
            "threads": threads}  # per worker, unless params set nthread / num_threads
    return spec, (metric, mode)


def train_boosting_on_ray(
    config: TrainConfig,
    source: Any,
    *,
    workdir: Path,
    num_workers: int = 2,
    ray_address: str | None = None,
    num_cpus: int = 2,
) -> TrainResult:
    """Train ``config`` (xgboost or lightgbm) data-parallel on ``num_workers`` Ray Train
    workers that read their shards of ``source`` (:func:`~fstrain.trainers.stream.source.version_source`: the
    version's verified train and validation files). The driver fits the preprocessing, scores the
    validation split and checks the shards by streamed passes over the same files
    (:class:`StreamedFit`): it never holds a split. See the module docstring.

    Returns the :class:`TrainResult` the single-process trainer returns, with
    ``extra["distributed"]`` (:func:`~fstrain.trainers.distributed_record.distributed_record`):
    world size, backend, per-shard rows and the exactly-once check; the slowest shard's read
    and boosting times are ``extra["shard_read_seconds"]`` and ``["shard_fit_seconds"]``.
    """
    refuse_unsupported(config)
    kind = config.model
    if source.rows("train") < num_workers:  # a worker would get no rows to boost on
        raise ConfigError(f"{kind} on {num_workers} Ray workers: the train split has only "
                          f"{source.rows('train')} rows. Use fewer workers.")
    t0 = time.perf_counter()
    data = StreamedFit(config, source, framework=kind)
    t_prep = time.perf_counter()
    threads = max(1, num_cpus // num_workers)
    spec, metric = _spec(config, data, threads)
    workdir = Path(workdir).resolve()
    with ray_session(workdir, ray_address=ray_address, num_cpus=num_cpus) as notes:
        datasets = _datasets(source, data, num_workers)
        # leave one logical CPU to Ray Data's read/preprocess tasks, or they never schedule
        cpus = max(0.25, (num_cpus - 1) / num_workers)
        checkpoint = _run_trainer(spec, datasets, workdir, num_workers, cpus)
        booster, record, shards = _read_final(checkpoint, kind, num_workers)
    t_fit = time.perf_counter()
    check = check_shards(shards, data.rows_train, data.fingerprint())
    rounds = (booster.num_boosted_rounds() if kind == "xgboost"
              else booster.current_iteration())
    final = {**spec["params"], "n_estimators": rounds, "requested_rounds": spec["rounds"]}
    notes = [*notes, (
        f"{kind} data-parallel on {num_workers} Ray Train workers "
        f"({'XGBoost collective, merged quantile sketches' if kind == 'xgboost' else 'LightGBM data_parallel, bins found per worker'}): "
        "split candidates differ slightly from a single-process run; reproducible for a fixed "
        "seed, data, world size and threads per worker")]
    out = finish_booster(kind, booster, data, config, params=final, history=record["history"],
                         notes=notes, metric=metric,
                         best_iteration=int(record["best_iteration"]), device="cpu",
                         timings=(t0, t_prep, t_fit))
    out.extra["distributed"] = distributed_record(
        world_size=num_workers, backend=BACKEND[kind],
        shards=[{k: s[k] for k in ("rank", "rows", "validation_rows")} for s in shards],
        rows=check["rows"], each_row_once=check["each_row_once"],
        fingerprint=check["fingerprint"], threads_per_worker=threads, ray_address=ray_address)
    # the slowest shard's read and boosting times: timings, kept out of the record
    out.extra["shard_read_seconds"] = max(s["read_seconds"] for s in shards)
    out.extra["shard_fit_seconds"] = max(s["fit_seconds"] for s in shards)
    return out
