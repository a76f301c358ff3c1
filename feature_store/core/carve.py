"""Train, validation and test rows of any split training-dataset version.

A version made by ``create_train_validation_test_split`` is read as it is. One made by
``create_train_test_split`` has no validation split, yet training (early stopping, tuning) and
validation (the threshold) need one: a seeded validation split is carved from its train rows —
the latest ``fraction`` by event time for a time split (no look-ahead), else a stratified (by the
label) or random draw with ``numpy.random.default_rng(seed)``. The carve is recorded with the
model (``training_config["validation_split"]``), so the model-validation pipeline carves the
same rows again. An unsplit version (``create_training_data``) is refused in CLI terms.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError

DEFAULT_FRACTION = 0.2


def read_three_way(fv: Any, version: int, *, carve: Mapping[str, Any] | None = None,
                   helpers: bool = False) -> tuple[tuple[Any, ...], dict[str, Any] | None]:
    """``((X_tr, X_va, X_te, y_tr, y_va, y_te), record)``; ``record`` is None when the version
    has its own validation split, else how validation was carved (pass it back as ``carve``
    to carve the same rows)."""
    td = fv.get_training_dataset(version)
    names = tuple(td.splits)
    if "validation" in names:
        return fv.get_train_validation_test_split(
            version, training_helper_columns=helpers), None
    if names != ("train", "test"):
        raise ConfigError(
            f"training dataset v{version} of {fv.name} v{fv.version} is not split (splits "
            f"{list(names)}): training needs train rows and a held-out test split. Create a "
            "split version with `fstrain dataset <use case>` (or create_train_test_split / "
            "create_train_validation_test_split in Python) and train on that."
        )
    spec = td.split_spec or {}
    record = dict(carve or {})
    record.setdefault("carved_from", "train")
    record.setdefault("fraction", DEFAULT_FRACTION)
    record.setdefault("seed", int(td.seed))
    record.setdefault("strategy", "time" if spec.get("strategy") == "time" else "stratified")
    X_tr, X_te, y_tr, y_te = fv.get_train_test_split(version, training_helper_columns=helpers)
    times = None
    if record["strategy"] == "time":
        with_time = fv.get_train_test_split(version, event_time=True)[0]
        times = _event_times(with_time)
        if times is None:
            record["strategy"] = "stratified"
    validation, record["strategy"] = _positions(record, y_tr, times)
    record["rows"] = int(validation.sum())
    keep = ~validation
    out = (X_tr[keep].reset_index(drop=True), X_tr[validation].reset_index(drop=True),
           X_te, y_tr[keep].reset_index(drop=True), y_tr[validation].reset_index(drop=True), y_te)
    return out, record


def train_keys(fv: Any, version: int, carve: Mapping[str, Any] | None) -> pd.DataFrame:
    """The root group's primary key and event time of the train rows :func:`read_three_way`
    returns (same rows, same order); ``carve`` is its record for a carved version."""
    td = fv.get_training_dataset(version)
    if "validation" in tuple(td.splits):
        X = fv.get_train_validation_test_split(version, primary_key=True, event_time=True)[0]
    else:
        if not carve:
            raise ConfigError(f"training dataset v{version} of {fv.name} has no validation "
                              "split: pass the carve record its training run used.")
        X, _X_te, y, _y_te = fv.get_train_test_split(version, primary_key=True, event_time=True)
        times = _event_times(X) if carve.get("strategy") == "time" else None
        X = X[~_positions(carve, y, times)[0]]
    features = set(fv.feature_names)
    return X[[c for c in X.columns if c not in features]].reset_index(drop=True)


def _event_times(X: pd.DataFrame) -> pd.Series | None:
    stamps = [c for c in X.columns if pd.api.types.is_datetime64_any_dtype(X[c])]
    return X[stamps[0]] if stamps else None


def _positions(record: Mapping[str, Any], y: pd.DataFrame,
               times: pd.Series | None) -> tuple[np.ndarray, str]:
    """A boolean mask of the train rows that become validation, and the strategy used."""
    fraction = float(record["fraction"])
    if not 0.0 < fraction < 1.0:
        raise ConfigError(f"the carved validation fraction must be in (0, 1). Got {fraction!r}.")
    n = len(y)
    k = int(n * fraction)
    if k == 0 or k == n:
        raise ConfigError(
            f"the train split has {n} rows: too few to carve a validation split of {fraction:.0%}."
        )
    mask = np.zeros(n, dtype=bool)
    if record["strategy"] == "time" and times is not None:
        order = np.argsort(pd.to_datetime(times, utc=True).to_numpy(), kind="mergesort")
        mask[order[n - k:]] = True
        return mask, "time"
    rng = np.random.default_rng(int(record["seed"]))
    labels = y.iloc[:, 0] if isinstance(y, pd.DataFrame) else y
    classes = labels.nunique(dropna=False)
    if record["strategy"] == "stratified" and classes <= max(2, n // 20):
        for value in pd.unique(labels):
            rows = np.flatnonzero((labels == value).to_numpy())
            take = max(1, int(round(len(rows) * fraction))) if len(rows) > 1 else 0
            mask[rng.permutation(rows)[:take]] = True
        return mask, "stratified"
    mask[rng.permutation(n)[:k]] = True
    return mask, "random"
