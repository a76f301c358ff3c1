"""Learning curves: the per-round / per-epoch record every trainer fills (the trainer contract).

A trainer returns a :class:`LearningCurves` in :attr:`TrainResult.curves`; the training
pipeline writes it as ``learning_curves.json`` next to the model files, so the registry's
manifest hashes it with them. The model-validation pipeline plots it on the scorecard and
``fstrain doctor`` reads it. The JSON is plain data (lists of numbers, ``null`` where a value
is unknown), so a reader needs nothing from this package.

Schema (``schema_version`` 1)::

    unit          "round" (boosting), "epoch" (networks), "trees" (a forest grown tree by
                  tree) or "fit" (one point: the estimator reports nothing per iteration)
    loss          the loss both splits are scored with ("logloss", "rmse", ...)
    metric, mode  the selection metric and "max"/"min"
    steps         0-based round/epoch numbers (tree counts for "trees", iterations for "fit")
    train_loss, val_loss, train_metric, val_metric   one value (or null) per step
    best_step     the step whose model was kept (early stopping), or null
    extra         more per-step series, same length: e.g. "grad_norm_max" and "data_seconds"
                  for torch, the optimised "train_objective" (label smoothing, class weights)
    notes         plain-language remarks on how to read these curves

A trainer added later (CatBoost, Keras, Flax, Spark, LoRA) builds one with
:meth:`LearningCurves.add` per round/epoch, or :func:`from_history` over its history rows
(``train_<name>`` / ``val_<name>`` keys).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fstrain.kernel.errors import InvalidArgumentError

CURVES_FILE = "learning_curves.json"
SCHEMA_VERSION = 1
UNITS = ("round", "epoch", "trees", "fit")
SERIES = ("train_loss", "val_loss", "train_metric", "val_metric")


def _num(value: Any) -> float | None:
    """A finite float, else None (JSON has no NaN)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


@dataclass
class LearningCurves:
    """Train and validation loss and the selection metric per round/epoch (module docstring)."""

    unit: str
    loss: str
    metric: str
    mode: str
    steps: list[int] = field(default_factory=list)
    train_loss: list[float | None] = field(default_factory=list)
    val_loss: list[float | None] = field(default_factory=list)
    train_metric: list[float | None] = field(default_factory=list)
    val_metric: list[float | None] = field(default_factory=list)
    best_step: int | None = None
    extra: dict[str, list[float | None]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: how many non-finite values were replaced by null, per series (a NaN loss shows here)
    non_finite: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise InvalidArgumentError(
                f"LearningCurves.unit must be one of {', '.join(UNITS)}. Got {self.unit!r}.")
        if self.mode not in ("max", "min"):
            raise InvalidArgumentError(f"LearningCurves.mode must be 'max' or 'min'. Got "
                                       f"{self.mode!r}.")

    def add(self, step: int, *, train_loss: Any = None, val_loss: Any = None,
            train_metric: Any = None, val_metric: Any = None, **extra: Any) -> None:
        """Append one round/epoch; ``extra`` series are padded with null where missing."""
        values = {"train_loss": train_loss, "val_loss": val_loss,
                  "train_metric": train_metric, "val_metric": val_metric}
        n = len(self.steps)
        self.steps.append(int(step))
        for name, value in values.items():
            getattr(self, name).append(self._clean(name, value))
        for name in set(self.extra) | set(extra):
            series = self.extra.setdefault(name, [None] * n)
            series.append(self._clean(name, extra.get(name)))

    def _clean(self, name: str, value: Any) -> float | None:
        out = _num(value)
        if out is None and value is not None and not isinstance(value, bool):
            self.non_finite[name] = self.non_finite.get(name, 0) + 1
        return out

    def __len__(self) -> int:
        return len(self.steps)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict, with ``schema_version``."""
        return {"schema_version": SCHEMA_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LearningCurves:
        """Rebuild from :meth:`to_dict` output (checks the version and the series lengths)."""
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise InvalidArgumentError(f"learning curves schema_version {version!r} is not "
                                       f"supported; this fstrain reads {SCHEMA_VERSION}.")
        names = {k: v for k, v in data.items() if k != "schema_version"}
        curves = cls(**names)
        n = len(curves.steps)
        bad = [s for s in (*SERIES, *(f"extra.{k}" for k in curves.extra))
               if len(curves.extra[s[6:]] if s.startswith("extra.") else getattr(curves, s)) != n]
        if bad:
            raise InvalidArgumentError(f"learning curves: series {bad} do not have one value "
                                       f"per step ({n} steps).")
        return curves

    def write(self, directory: Path) -> Path:
        """Write ``learning_curves.json`` into ``directory``; returns its path."""
        path = Path(directory) / CURVES_FILE
        path.write_text(json.dumps(self.to_dict(), indent=1, allow_nan=False), encoding="utf-8")
        return path


def read_curves(directory: Path) -> LearningCurves | None:
    """The curves saved in a model folder, or None when it has none (older models)."""
    path = Path(directory) / CURVES_FILE
    if not path.is_file():
        return None
    return LearningCurves.from_dict(json.loads(path.read_text(encoding="utf-8")))


def from_history(history: Iterable[Mapping[str, Any]], *, unit: str, loss: str, metric: str,
                 mode: str, step_key: str, best_step: int | None,
                 extra_keys: Mapping[str, str] | None = None,
                 train_loss_key: str | None = None, notes: Iterable[str] = ()) -> LearningCurves:
    """Curves from history rows holding ``train_<loss>``, ``val_<loss>``, ``train_<metric>``,
    ``val_<metric>`` (``train_loss_key`` overrides the train-loss column). ``extra_keys`` maps
    a curve's extra series name to the row key it comes from."""
    curves = LearningCurves(unit=unit, loss=loss, metric=metric, mode=mode, best_step=best_step,
                            notes=list(notes))
    for row in history:
        extra = {name: row.get(key) for name, key in (extra_keys or {}).items()}
        curves.add(int(row[step_key]), train_loss=row.get(train_loss_key or f"train_{loss}"),
                   val_loss=row.get(f"val_{loss}"), train_metric=row.get(f"train_{metric}"),
                   val_metric=row.get(f"val_{metric}"), **extra)
    return curves
