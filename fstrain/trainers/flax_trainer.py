"""JAX/Flax MLP (``flax_mlp``): explicit train state, one pure jitted update, resumable.

The style a JAX practitioner expects:

- **explicit state**: a ``flax.training.train_state.TrainState`` (params, ``optax`` optimiser
  state, step) passed in and returned, never mutated;
- **a pure update**: ``train_step(state, x, y, w, dropout_key) -> (state, loss)`` is
  ``jax.jit``-compiled once (the last batch is padded with zero-weight rows so every batch has
  the same shape);
- **separate PRNG keys** derived from the config seed: ``init`` (parameters), ``dropout``
  (folded with the optimiser step inside the update) and ``shuffle`` (folded with the epoch);
  their key data are recorded in the model's config. No global RNG is touched;
- **optax**: gradient clipping (global norm 1) + AdamW with a per-step cosine decay;
- **checkpoints** after every ``checkpoint_every`` epochs: params, optimiser state, step and
  the early-stopping state as ``flax.serialization`` msgpack (data only: no code is loaded)
  with a JSON sidecar (epoch, history, keys, config fingerprint, lineage, the msgpack's
  sha256). ``resume`` continues from the newest one and reproduces the uninterrupted run.

The returned model holds the best epoch's parameters (early stopping on the validation split),
saved as safetensors.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError
from fstrain.trainers.config import TrainConfig
from fstrain.trainers.metrics import classification_metrics, resolve_metric
from fstrain.trainers.nn_common import (
    MatrixPredictor,
    NNOptions,
    epoch_row,
    improved,
    load_common,
    nn_curves,
    softmax,
    train_eval_rows,
)
from fstrain.trainers.result import TrainResult
from fstrain.trainers.tabular import Prepared, Reporter
from fstrain.trainers import formats

KEEP_CHECKPOINTS = 2


def import_jax() -> Any:
    """``jax``, or a ConfigError naming the extra that installs JAX, Flax and optax."""
    try:
        import flax  # noqa: F401
        import jax
        import optax  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the extra is installed in CI
        raise ConfigError(
            "model 'flax_mlp' needs jax, flax and optax: pip install 'fstrain[jax]'."
        ) from exc
    return jax


@functools.cache
def mlp_class() -> type:
    """The Flax ``linen`` MLP (logits out; dropout only when ``train=True``)."""
    from flax import linen as nn

    class MLP(nn.Module):
        hidden_sizes: tuple[int, ...]
        dropout: float
        n_classes: int

        @nn.compact
        def __call__(self, x: Any, *, train: bool) -> Any:
            for width in self.hidden_sizes:
                x = nn.relu(nn.Dense(width)(x))
                if self.dropout > 0:
                    x = nn.Dropout(self.dropout, deterministic=not train)(x)
            return nn.Dense(self.n_classes)(x)

    return MLP


def build_module(arch: dict[str, Any]) -> Any:
    """The MLP module of a saved ``arch``."""
    return mlp_class()(hidden_sizes=tuple(arch["hidden_sizes"]), dropout=float(arch["dropout"]),
                       n_classes=int(arch["n_classes"]))


def prng_keys(seed: int) -> dict[str, Any]:
    """Independent keys for parameter init, dropout and shuffling, derived from ``seed``."""
    jax = import_jax()
    root = jax.random.key(seed)
    return {name: jax.random.fold_in(root, i)
            for i, name in enumerate(("init", "dropout", "shuffle"))}


def key_record(keys: dict[str, Any]) -> dict[str, list[int]]:
    """The keys' raw data (JSON), recorded with the model."""
    jax = import_jax()
    return {name: [int(v) for v in jax.random.key_data(k).tolist()] for name, k in keys.items()}


def make_state(module: Any, n_inputs: int, opts: NNOptions, total_steps: int,
               init_key: Any) -> tuple[Any, Any]:
    """A fresh ``TrainState`` (initialised params, clipping + AdamW with cosine decay) and
    the learning-rate schedule (step -> rate)."""
    import jax.numpy as jnp
    import optax
    from flax.training import train_state

    params = module.init({"params": init_key}, jnp.zeros((1, n_inputs), jnp.float32),
                         train=False)["params"]
    schedule = optax.cosine_decay_schedule(opts.learning_rate, max(1, total_steps))
    tx = optax.chain(optax.clip_by_global_norm(1.0),
                     optax.adamw(schedule, weight_decay=opts.weight_decay))
    return train_state.TrainState.create(apply_fn=module.apply, params=params, tx=tx), schedule


@functools.cache
def jitted_functions() -> tuple[Any, Any]:
    """``(train_step, logits)``, both pure and ``jax.jit``-compiled."""
    import jax
    import jax.numpy as jnp
    import optax

    @jax.jit
    def train_step(state: Any, x: Any, y: Any, w: Any, dropout_key: Any) -> tuple[Any, Any]:
        step_key = jax.random.fold_in(dropout_key, state.step)

        def loss_fn(params: Any) -> Any:
            logits = state.apply_fn({"params": params}, x, train=True,
                                    rngs={"dropout": step_key})
            losses = optax.softmax_cross_entropy_with_integer_labels(logits, y)
            return jnp.sum(losses * w) / jnp.maximum(jnp.sum(w), 1e-12)

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        return state.apply_gradients(grads=grads), loss

    @functools.partial(jax.jit, static_argnums=0)
    def logits(module: Any, params: Any, x: Any) -> Any:
        return module.apply({"params": params}, x, train=False)

    return train_step, logits


def run_epoch(state: Any, data: Prepared, weights: np.ndarray, batch_size: int,
              keys: dict[str, Any], epoch: int) -> tuple[Any, float]:
    """One pass over the train split in a shuffle drawn from ``fold_in(shuffle, epoch)``."""
    import jax

    train_step, _ = jitted_functions()
    n = len(data.y_train)
    bs = min(batch_size, n)
    order = np.asarray(jax.random.permutation(jax.random.fold_in(keys["shuffle"], epoch), n))
    n_batches = math.ceil(n / bs)
    pad = n_batches * bs - n
    idx = np.concatenate([order, order[:pad]])
    live = np.concatenate([np.ones(n, np.float32), np.zeros(pad, np.float32)])
    total, rows = 0.0, 0.0
    for b in range(n_batches):
        sl = slice(b * bs, (b + 1) * bs)
        w = weights[idx[sl]] * live[sl]
        state, loss = train_step(state, data.X_train[idx[sl]], data.y_train[idx[sl]], w,
                                 keys["dropout"])
        total += float(loss) * float(w.sum())
        rows += float(w.sum())
    return state, total / max(rows, 1e-12)


@dataclass
class Tracker:
    """Early-stopping state (checkpointed with the train state)."""

    mode: str
    patience: int | None
    best_score: float | None = None
    best_epoch: int | None = None
    best_params: Any = None
    wait: int = 0

    def update(self, epoch: int, score: float, params: Any) -> bool:
        """Record an epoch's score; True when training should stop."""
        if improved(score, self.best_score, self.mode):
            self.best_score, self.best_epoch, self.best_params, self.wait = (
                score, epoch, params, 0)
        else:
            self.wait += 1
        return self.patience is not None and self.wait >= self.patience


def train_flax(
    config: TrainConfig,
    X_train: pd.DataFrame,
    y_train: pd.DataFrame,
    X_val: pd.DataFrame,
    y_val: pd.DataFrame,
    *,
    workdir: Path,
    lineage: dict[str, Any] | None = None,
    resume: bool = False,
    report: Reporter | None = None,
) -> TrainResult:
    """Fit the Flax MLP epoch by epoch; checkpoints under ``workdir/checkpoints``."""
    jax = import_jax()
    t0 = time.perf_counter()
    opts = NNOptions.from_config(config, {})
    data = Prepared(config, X_train, y_train, X_val, y_val, framework="flax")
    k = data.labels.n_classes
    metric, mode = resolve_metric(config, k)
    keys = prng_keys(config.seed)
    arch = {"n_inputs": int(data.X_train.shape[1]), "n_classes": k,
            "hidden_sizes": list(opts.hidden_sizes), "dropout": opts.dropout,
            "prng_keys": key_record(keys), "seed": config.seed, "jax_version": jax.__version__}
    module = build_module(arch)
    steps_per_epoch = math.ceil(len(data.y_train) / min(opts.batch_size, len(data.y_train)))
    state, schedule = make_state(module, arch["n_inputs"], opts, opts.epochs * steps_per_epoch,
                                 keys["init"])
    tracker = Tracker(mode=mode, patience=opts.patience)
    ckpt = Checkpoints(Path(workdir) / "checkpoints", config.fingerprint(), lineage or {})
    history: list[dict[str, Any]] = []
    start = 0
    if resume:
        state, history, start = ckpt.restore(state, tracker)
    loop = _Loop(module, data, opts, keys, report, seed=config.seed, metric=metric,
                 schedule=schedule)
    state = loop.run(state, tracker, history, start, ckpt, every=int(
        opts.option("checkpoint_every") or 1))
    best_params = tracker.best_params if tracker.best_params is not None else state.params
    predictor = FlaxPredictor(params=jax.device_get(best_params), schema=data.schema,
                              preprocessor=data.preprocessor, labels=data.labels, arch=arch)
    proba = predictor.predict_proba_matrix(data.X_val)
    best = tracker.best_epoch
    return TrainResult(
        model=predictor, metrics=classification_metrics(data.y_val, proba, k), history=history,
        params={**opts.to_json(), "seed": config.seed}, imbalance=data.plan.record,
        nondeterminism=["JAX on CPU with explicit PRNG keys: the same parameters for a fixed "
                        "seed, data and XLA build; resuming reproduces the uninterrupted run"],
        config=config, metric=metric, mode=mode, best_iteration=best, device="cpu",
        checkpoint_dir=ckpt.directory,
        curves=nn_curves(history, metric, mode, best, "Flax"),
        extra={"train_seconds": time.perf_counter() - t0, "rows_train": len(data.y_train),
               "epochs_run": len(history), "resumed_from": start or None,
               "prng_keys": arch["prng_keys"]},
    )


class _Loop:
    """The epoch loop: train, score, early-stop, checkpoint, report."""

    def __init__(self, module: Any, data: Prepared, opts: NNOptions, keys: dict[str, Any],
                 report: Reporter | None, *, seed: int, metric: str, schedule: Any) -> None:
        self.module, self.data, self.opts, self.keys, self.report = (
            module, data, opts, keys, report)
        self.metric_key, self.schedule = f"val_{metric}", schedule
        sw = data.sample_weight
        self.weights = (np.ones(len(data.y_train), np.float32) if sw is None
                        else np.asarray(sw, np.float32))
        self.fit_rows = train_eval_rows(len(data.y_train), seed)

    def proba(self, params: Any, X: np.ndarray) -> np.ndarray:
        _, logits = jitted_functions()
        return softmax(np.asarray(logits(self.module, params, X)))

    def run(self, state: Any, tracker: Tracker, history: list[dict[str, Any]], start: int,
            ckpt: Checkpoints, *, every: int) -> Any:
        d = self.data
        for epoch in range(start, self.opts.epochs):
            state, objective = run_epoch(state, d, self.weights, self.opts.batch_size,
                                         self.keys, epoch)
            lr = float(self.schedule(int(state.step) - 1))  # the rate of the epoch's last step
            row = epoch_row(epoch, d.labels.n_classes, (d.y_val, self.proba(state.params,
                                                                              d.X_val)),
                            (d.y_train[self.fit_rows],
                             self.proba(state.params, d.X_train[self.fit_rows])),
                            train_objective=objective, lr=lr)
            stop = tracker.update(epoch, row[self.metric_key], state.params)
            history.append(row)
            last = stop or epoch + 1 == self.opts.epochs
            if (epoch + 1) % every == 0 or last:
                ckpt.save(epoch, state, tracker, history)
            if self.report is not None:
                self.report(row)
            if stop:
                break
        return state


class Checkpoints:
    """``ckpt_<epoch>.msgpack`` (flax.serialization) + ``ckpt_<epoch>.json`` sidecars."""

    def __init__(self, directory: Path, fingerprint: str, lineage: dict[str, Any]) -> None:
        self.directory = Path(directory)
        self.fingerprint = fingerprint
        self.lineage = lineage

    def _target(self, state: Any, tracker: Tracker) -> dict[str, Any]:
        return {"params": state.params, "opt_state": state.opt_state, "step": state.step,
                "best_params": tracker.best_params if tracker.best_params is not None
                else state.params}

    def save(self, epoch: int, state: Any, tracker: Tracker,
             history: list[dict[str, Any]]) -> Path:
        """Write epoch ``epoch``'s checkpoint atomically; keep the newest two."""
        from flax import serialization

        self.directory.mkdir(parents=True, exist_ok=True)
        blob = serialization.to_bytes(self._target(state, tracker))
        name = f"ckpt_{epoch:05d}"
        meta = {"epoch": epoch, "fingerprint": self.fingerprint, "lineage": self.lineage,
                "sha256": hashlib.sha256(blob).hexdigest(), "history": history,
                "tracker": {"best_score": tracker.best_score, "best_epoch": tracker.best_epoch,
                            "wait": tracker.wait}}
        for suffix, payload in ((".msgpack", blob), (".json", json.dumps(meta).encode())):
            tmp = self.directory / f".{name}{suffix}.tmp"
            tmp.write_bytes(payload)
            tmp.replace(self.directory / f"{name}{suffix}")
        for old in sorted(self.directory.glob("ckpt_*.json"))[:-KEEP_CHECKPOINTS]:
            old.unlink()
            old.with_suffix(".msgpack").unlink(missing_ok=True)
        return self.directory / f"{name}.msgpack"

    def restore(self, state: Any, tracker: Tracker) -> tuple[Any, list[dict[str, Any]], int]:
        """``(state, history, next epoch)`` from the newest checkpoint; refuses one written
        by another config or lineage, or whose bytes changed."""
        from flax import serialization

        sidecars = sorted(self.directory.glob("ckpt_*.json"))
        if not sidecars:
            raise ConfigError(f"resume: no Flax checkpoint in {str(self.directory)!r}; train "
                              "without --resume first.")
        meta = json.loads(sidecars[-1].read_text())
        blob = sidecars[-1].with_suffix(".msgpack").read_bytes()
        if meta["fingerprint"] != self.fingerprint or meta["lineage"] != self.lineage:
            raise ConfigError(
                f"resume: checkpoint {sidecars[-1].name} was written for another config or "
                f"training dataset (lineage {meta['lineage']} vs {self.lineage}); train "
                "without --resume.")
        if hashlib.sha256(blob).hexdigest() != meta["sha256"]:
            raise ConfigError(f"resume: {sidecars[-1].with_suffix('.msgpack').name} does not "
                              "match the sha256 its sidecar recorded; it was changed.")
        restored = serialization.from_bytes(self._target(state, tracker), blob)
        state = state.replace(params=restored["params"], opt_state=restored["opt_state"],
                              step=restored["step"])
        tr = meta["tracker"]
        tracker.best_score, tracker.best_epoch, tracker.wait = (
            tr["best_score"], tr["best_epoch"], tr["wait"])
        tracker.best_params = restored["best_params"] if tr["best_epoch"] is not None else None
        return state, list(meta["history"]), int(meta["epoch"]) + 1


class FlaxPredictor(MatrixPredictor):
    """Flax MLP parameters over the preprocessed feature matrix (logits out)."""

    framework = "flax"

    def __init__(self, *, params: Any, **kwargs: Any) -> None:
        super().__init__(kind="flax_mlp", **kwargs)
        self.model = params
        self.module = build_module(self.arch)

    def logits(self, X: np.ndarray) -> np.ndarray:
        """The module's logits (jitted, dropout off)."""
        _, logits = jitted_functions()
        return np.asarray(logits(self.module, self.model, X))

    def save(self, directory: Path) -> dict[str, Any]:
        """skops preprocessor + ``model/flax_params.safetensors`` + predictor.json."""
        directory = Path(directory)
        files = self._save_common(directory)
        files += formats.save_flax(self.model, directory / "model", self.arch)
        body = {"features": self.schema.to_json(), "arch": self.arch, "params": self.arch}
        return self._write_manifest(directory, body, files)


def load_flax_predictor(directory: Path, info: dict[str, Any]) -> FlaxPredictor:
    """Rebuild a :class:`FlaxPredictor` from safetensors parameters."""
    import_jax()
    schema, preprocessor, labels = load_common(directory, info)
    params, arch = formats.load_flax(Path(directory) / "model")
    return FlaxPredictor(params=params, schema=schema, preprocessor=preprocessor,
                         labels=labels, arch=arch)
