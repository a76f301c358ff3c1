"""Input checks shared by all trainers: labels → class indices, features → clean dtypes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import InvalidArgumentError, SchemaMismatchError


def _native(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


@dataclass(frozen=True)
class LabelInfo:
    """The label column and its classes (index ``i`` of a probability row is ``classes[i]``).

    A regression label has no classes (``classes == ()``): values pass through as floats.
    """

    name: str
    classes: tuple[Any, ...]

    @property
    def n_classes(self) -> int:
        """Number of classes."""
        return len(self.classes)

    @property
    def task(self) -> str:
        """``binary``, ``multiclass`` or ``regression``."""
        if not self.classes:
            return "regression"
        return "binary" if self.n_classes == 2 else "multiclass"

    def encode(self, y: pd.DataFrame | pd.Series, *, split: str) -> np.ndarray:
        """Map labels to class indices ``0..K-1`` (regression: float values); unseen labels
        raise naming the values."""
        series = label_series(y, split=split)
        if self.task == "regression":
            return series.to_numpy(dtype=np.float64)
        codes = np.asarray(pd.Index(list(self.classes)).get_indexer(series), dtype=np.int64)
        if (codes < 0).any():
            unseen = sorted({str(v) for v, c in zip(series, codes, strict=True) if c < 0})[:5]
            raise InvalidArgumentError(
                f"Label column {self.name!r} of the {split} split has values not seen in the "
                f"train split: {', '.join(unseen)}. Use a stratified split or drop those rows."
            )
        return codes

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Class indices → original labels (regression values pass through)."""
        if self.task == "regression":
            return np.asarray(codes, dtype=np.float64)
        return np.asarray(self.classes)[np.asarray(codes, dtype=np.int64)]

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (for ``predictor.json``)."""
        return {"name": self.name, "classes": list(self.classes)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LabelInfo:
        """Inverse of :meth:`to_json`."""
        return cls(name=data["name"], classes=tuple(data["classes"]))


def label_series(y: pd.DataFrame | pd.Series, *, split: str) -> pd.Series:
    """The single label column of ``y``; NaN labels raise naming the split and the count."""
    if isinstance(y, pd.DataFrame):
        if y.shape[1] != 1:
            raise InvalidArgumentError(
                f"y of the {split} split must have exactly one label column; got "
                f"{list(y.columns)}."
            )
        y = y.iloc[:, 0]
    if not isinstance(y, pd.Series):
        y = pd.Series(np.asarray(y), name="label")
    missing = int(y.isna().sum())
    if missing:
        raise InvalidArgumentError(
            f"Label column {y.name!r} of the {split} split has {missing} missing value(s); "
            "drop or fill them before training."
        )
    return y


def label_info(y_train: pd.DataFrame | pd.Series, task: str = "auto") -> LabelInfo:
    """Classes of the train split (sorted), checked against ``task``; no classes for
    ``task="regression"`` (the label must be numeric)."""
    series = label_series(y_train, split="train")
    if task == "regression":
        if not pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
            raise InvalidArgumentError(
                f"task='regression' needs a numeric label; column {series.name!r} is "
                f"{series.dtype}."
            )
        return LabelInfo(name=str(series.name), classes=())
    classes = tuple(_native(v) for v in sorted(series.unique().tolist()))
    if len(classes) < 2:
        raise InvalidArgumentError(
            f"Label column {series.name!r} of the train split has a single class "
            f"{classes!r}; a classifier needs at least two."
        )
    info = LabelInfo(name=str(series.name), classes=classes)
    if task == "binary" and info.n_classes != 2:
        raise InvalidArgumentError(
            f"task='binary' but label column {info.name!r} has {info.n_classes} classes."
        )
    return info


@dataclass(frozen=True)
class FeatureSchema:
    """Feature columns seen at training time and how each is treated."""

    names: tuple[str, ...]
    dtypes: dict[str, str] = field(default_factory=dict)
    numeric: tuple[str, ...] = ()
    categorical: tuple[str, ...] = ()

    @classmethod
    def infer(cls, X: pd.DataFrame, *, exclude: tuple[str, ...] = ()) -> FeatureSchema:
        """Numeric (incl. datetime → epoch seconds) vs categorical (object/category/bool/str)."""
        if not isinstance(X, pd.DataFrame):
            raise InvalidArgumentError(f"X must be a pandas DataFrame; got {type(X).__name__}.")
        if X.shape[1] == 0:
            raise InvalidArgumentError("X has no feature columns.")
        numeric, categorical = [], []
        for col in X.columns:
            if col in exclude:
                continue
            dtype = X[col].dtype
            if pd.api.types.is_bool_dtype(dtype) or not (
                pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_datetime64_any_dtype(dtype)
            ):
                categorical.append(str(col))
            else:
                numeric.append(str(col))
        return cls(
            names=tuple(str(c) for c in X.columns),
            dtypes={str(c): str(X[c].dtype) for c in X.columns},
            numeric=tuple(numeric),
            categorical=tuple(categorical),
        )

    def prepare(self, X: pd.DataFrame) -> pd.DataFrame:
        """Select/reorder the training columns and normalise dtypes for the preprocessor.

        Numeric → float (float32/float64 columns unchanged; others float64, datetimes as epoch
        seconds, nullable ints with NaN); categorical → object holding ``str`` values and
        ``np.nan`` for missing.
        """
        missing = [c for c in self.names if c not in X.columns]
        if missing:
            raise SchemaMismatchError(
                f"X is missing feature column(s) {missing} the model was trained on "
                f"(expected {list(self.names)})."
            )
        out = {}
        for col in self.numeric:
            s = X[col]
            if isinstance(s.dtype, np.dtype) and s.dtype.kind == "f":
                out[col] = s  # float32/float64 as they are: no copy
                continue
            if pd.api.types.is_datetime64_any_dtype(s.dtype):
                s = s.astype("int64", copy=False).astype("float64") / 1e9
                s[X[col].isna()] = np.nan
            out[col] = pd.to_numeric(s, errors="coerce").astype("float64", copy=False)
        for col in self.categorical:
            s = X[col]
            mask = s.isna().to_numpy()
            values = s.astype(str).to_numpy(dtype=object)
            values[mask] = np.nan
            out[col] = values
        return pd.DataFrame(out, index=X.index)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (for ``predictor.json``)."""
        return {
            "names": list(self.names),
            "dtypes": self.dtypes,
            "numeric": list(self.numeric),
            "categorical": list(self.categorical),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FeatureSchema:
        """Inverse of :meth:`to_json`."""
        return cls(
            names=tuple(data["names"]),
            dtypes=dict(data["dtypes"]),
            numeric=tuple(data["numeric"]),
            categorical=tuple(data["categorical"]),
        )
