"""Model-dependent transformations with Hopsworks semantics.

A transformation is a *bound call*: a built-in function applied to one feature of a feature view,
e.g. ``transformation_functions=[standard_scaler("amount"), label_encoder("cat")]``.

Lifecycle (as ``hsfs.core.transformation_function_engine``):

1. :func:`fit_transformations` computes JSON-able statistics **on the train split only**;
2. :func:`apply_transformations` transforms train, validation, test, batch and serving data with
   those statistics (they are stored with the training dataset version and reloaded later).

Built-ins and their semantics (nulls are excluded from every statistic):

* ``min_max_scaler`` — stats ``min``, ``max``; output ``(x-min)/(max-min)``.
* ``standard_scaler`` — stats ``mean``, ``std`` (population, ddof=0, as scikit-learn's
  ``StandardScaler``); output ``(x-mean)/std``.
* ``robust_scaler`` — stats ``p25``, ``p50``, ``p75`` (linear interpolation, as ``RobustScaler``);
  output ``(x-p50)/(p75-p25)``.
* ``label_encoder`` — stats ``values`` (sorted unique training values); output the value's index
  ``0..n-1``; unseen or null → ``-1``.
* ``one_hot_encoder`` — stats ``values`` and ``columns`` (output column → value); one boolean
  column per training value; unseen or null → all ``False``.

Statistics are computed on the frame passed to ``fit`` only: a test value outside the train range
maps outside ``[0, 1]`` with ``min_max_scaler``.

* **Zero-spread guard.** When the spread (``max-min``, ``std`` or ``p75-p25``) is zero (within
  ``1e-12`` relative to the data's magnitude) every non-null output is ``0.0`` instead of a division
  by zero.
* **Nulls.** Scalers keep nulls as ``NaN``; ``label_encoder`` maps nulls to ``-1`` (like unseen
  values, so the output is a plain ``int64`` column); ``one_hot_encoder`` maps nulls to all
  ``False``.
* **Output names** follow Hopsworks (``transformation_function.py``): a single output is named
  ``{fn}_{feature}_`` (``standard_scaler_amount_``); multiple outputs are ``{fn}_{feature}_{i}``
  where ``i`` is the index of the training value in the sorted ``values`` list
  (``one_hot_encoder_cat_0`` is ``values[0]``). ``stats["columns"]`` maps each output column to
  its value. Built-ins drop their input column.
* Statistics are keyed by ``f"{name}_{feature}"`` (:attr:`TransformationFunction.key`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from feature_store.core.moments import Moments, moments_of
from feature_store.core.udf import UdfTransformation
from fstrain.kernel.canonical_json import INFINITIES
from fstrain.kernel.errors import (
    ConfigError,
    InvalidArgumentError,
    NotFoundError,
    SchemaMismatchError,
    did_you_mean,
)

__all__ = [
    "BUILTINS",
    "TransformationFunction",
    "apply_transformations",
    "fit_transformations",
    "get_transformation_function",
    "label_encoder",
    "min_max_scaler",
    "one_hot_encoder",
    "robust_scaler",
    "standard_scaler",
    "transformation_from_dict",
    "validate_transformations",
]

_ZERO_SPREAD_RTOL = 1e-12


# --------------------------------------------------------------------------- fit/transform kernels


def check_numeric(tf: TransformationFunction, dtype: Any) -> None:
    """Refuse a column of ``dtype`` (the whole train column's pandas dtype) for a scaler."""
    if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)):
        raise InvalidArgumentError(
            f"Transformation {tf.name}('{tf.feature}'): feature '{tf.feature}' must be numeric "
            f"for a scaler. Got dtype {dtype} instead. Use label_encoder or "
            "one_hot_encoder for categorical features."
        )


def check_values(tf: TransformationFunction, count: int, bad: float | None) -> None:
    """Refuse a fit on ``count`` non-null values of which the first non-finite one is ``bad``."""
    if count == 0:
        raise InvalidArgumentError(
            f"Transformation {tf.name}('{tf.feature}'): cannot fit on feature '{tf.feature}' "
            "because the train split has no non-null values. Check the training window or drop "
            "the transformation."
        )
    if bad is not None:
        raise InvalidArgumentError(
            f"Transformation {tf.name}('{tf.feature}'): feature '{tf.feature}' must be finite in "
            f"the train split. Got {bad!r} instead. Replace infinities before fitting."
        )


def first_non_finite(values: np.ndarray) -> float | None:
    """The first of ``values`` that is NaN or ±inf (None: all are finite)."""
    finite = np.isfinite(values)
    return None if finite.all() else float(values[~finite][0])


def _numeric_values(tf: TransformationFunction, series: pd.Series) -> np.ndarray:
    """Non-null values of ``series`` as float64; refuse non-numeric and non-finite input."""
    check_numeric(tf, series.dtype)
    values = series.dropna().to_numpy(dtype="float64")
    check_values(tf, values.size, first_non_finite(values))
    return values


def _to_float(tf: TransformationFunction, series: pd.Series) -> np.ndarray:
    if not (pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype)):
        raise InvalidArgumentError(
            f"Transformation {tf.name}('{tf.feature}'): feature '{tf.feature}' must be numeric. "
            f"Got dtype {series.dtype} instead."
        )
    return series.astype("float64").to_numpy(dtype="float64", na_value=np.nan)


def _scale(
    tf: TransformationFunction, series: pd.Series, center: float, spread: float, magnitude: float
) -> pd.DataFrame:
    x = _to_float(tf, series)
    if spread <= _ZERO_SPREAD_RTOL * max(1.0, abs(magnitude)):
        out = np.where(np.isnan(x), np.nan, 0.0)
    else:
        out = (x - center) / spread
    return pd.DataFrame({tf.output_names()[0]: out}, index=series.index)


def _fit_min_max(tf: TransformationFunction, series: pd.Series) -> dict[str, Any]:
    v = _numeric_values(tf, series)
    return {"min": float(v.min()), "max": float(v.max())}


def _tr_min_max(tf: TransformationFunction, series: pd.Series, s: Mapping[str, Any]) -> pd.DataFrame:
    lo, hi = float(s["min"]), float(s["max"])
    return _scale(tf, series, lo, hi - lo, max(abs(lo), abs(hi)))


def _fit_standard(tf: TransformationFunction, series: pd.Series) -> dict[str, Any]:
    return standard_stats(tf, moments_of(_numeric_values(tf, series)))


def standard_stats(tf: TransformationFunction, found: Moments | None) -> dict[str, Any]:
    """The standard scaler's ``mean`` and population ``std`` from the values' block moments
    (:mod:`feature_store.core.moments`: the same figures bit for bit however the column was fed);
    refused where the sums overflow a double."""
    if found is None:
        raise InvalidArgumentError(
            f"Transformation {tf.name}('{tf.feature}'): the sum of feature '{tf.feature}' "
            "overflows a double in the train split. Rescale the feature before fitting."
        )
    return {"mean": found.mean, "std": math.sqrt(found.m2 / found.n)}


def _tr_standard(tf: TransformationFunction, series: pd.Series, s: Mapping[str, Any]) -> pd.DataFrame:
    mean, std = float(s["mean"]), float(s["std"])
    return _scale(tf, series, mean, std, mean)


def _fit_robust(tf: TransformationFunction, series: pd.Series) -> dict[str, Any]:
    v = _numeric_values(tf, series)
    ranks = quartile_ranks(v.size)
    placed = np.partition(v, sorted(ranks))
    return robust_stats(v.size, {k: float(placed[k]) for k in ranks})


#: the robust scaler's percentiles
_QUARTILES = (25.0, 50.0, 75.0)


def _quartile_indexes(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sorted positions below and above each quartile of ``n`` values and the weight of the
    one above, as ``np.percentile``'s linear method computes them (its own operations)."""
    quantiles = np.true_divide(np.array(_QUARTILES), 100)
    virtual = (n - 1) * quantiles
    previous = np.floor(virtual)
    following = previous + 1
    above, below = virtual >= n - 1, virtual < 0
    previous[above] = following[above] = -1
    previous[below] = following[below] = 0
    previous, following = previous.astype(np.intp), following.astype(np.intp)
    gamma = np.asanyarray(virtual - previous, dtype=virtual.dtype)
    return previous % n, following % n, gamma


def quartile_ranks(n: int) -> list[int]:
    """The ranks (0-based positions in sorted order) of ``n`` values the robust scaler reads."""
    previous, following, _ = _quartile_indexes(n)
    return sorted({int(k) for k in (*previous, *following)})


def robust_stats(n: int, ordered: Mapping[int, float]) -> dict[str, Any]:
    """The robust scaler's ``p25``/``p50``/``p75`` of ``n`` values from their order statistics
    ``ordered`` (rank → value, for :func:`quartile_ranks`), interpolated as ``np.percentile``
    (linear method) does, operation for operation: equal to it bit for bit."""
    previous, following, gamma = _quartile_indexes(n)
    low = np.array([ordered[int(k)] for k in previous], dtype=np.float64)
    high = np.array([ordered[int(k)] for k in following], dtype=np.float64)
    diff = high - low
    out = np.add(low, diff * gamma)
    np.subtract(high, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    p25, p50, p75 = (float(x) for x in out)
    return {"p25": p25, "p50": p50, "p75": p75}


def _tr_robust(tf: TransformationFunction, series: pd.Series, s: Mapping[str, Any]) -> pd.DataFrame:
    p25, p50, p75 = float(s["p25"]), float(s["p50"]), float(s["p75"])
    return _scale(tf, series, p50, p75 - p25, max(abs(p25), abs(p75)))


def _json_scalar(value: Any) -> Any:
    """A JSON-able Python scalar for a category value (numpy/pandas scalars unwrapped)."""
    if isinstance(value, np.generic):
        value = value.item()
    return value


def _fit_categories(tf: TransformationFunction, series: pd.Series) -> dict[str, Any]:
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        raise InvalidArgumentError(
            f"Transformation {tf.name}('{tf.feature}'): feature '{tf.feature}' must be "
            f"categorical (strings, integers or booleans). Got dtype {series.dtype} instead. "
            "Derive a categorical feature (e.g. day of week) first."
        )
    uniques = pd.unique(series.dropna())
    if len(uniques) == 0:
        raise InvalidArgumentError(
            f"Transformation {tf.name}('{tf.feature}'): cannot fit on feature '{tf.feature}' "
            "because the train split has no non-null values. Check the training window or drop "
            "the transformation."
        )
    values = [_json_scalar(u) for u in uniques]
    try:
        values = sorted(values)
    except TypeError as exc:
        kinds = sorted({type(v).__name__ for v in values})
        raise InvalidArgumentError(
            f"Transformation {tf.name}('{tf.feature}'): feature '{tf.feature}' must hold values of "
            f"one comparable type to be encoded. Got a mix of {kinds} instead. Cast the column "
            "to a single type first."
        ) from exc
    return {"values": values}


def _codes(series: pd.Series, values: Sequence[Any]) -> np.ndarray:
    """Index of each row's value in ``values`` (-1 for unseen and null values). Infinite
    categories of a floating column come back from the catalog as ``"inf"``/``"-inf"``
    (:func:`fstrain.kernel.canonical_json.to_jsonable`) and are read back as ``±inf``."""
    if pd.api.types.is_float_dtype(series.dtype):
        values = [INFINITIES.get(v, v) if isinstance(v, str) else v for v in values]
    index = pd.Index(list(values), dtype=object)
    target = series.astype(object).where(series.notna(), None)
    codes = index.get_indexer(pd.Index(target, dtype=object))
    codes[series.isna().to_numpy()] = -1
    return codes.astype("int64")


def _fit_label(tf: TransformationFunction, series: pd.Series) -> dict[str, Any]:
    return _fit_categories(tf, series)


def _tr_label(tf: TransformationFunction, series: pd.Series, s: Mapping[str, Any]) -> pd.DataFrame:
    codes = _codes(series, s["values"])
    return pd.DataFrame({tf.output_names(s)[0]: codes}, index=series.index)


def _fit_one_hot(tf: TransformationFunction, series: pd.Series) -> dict[str, Any]:
    stats = _fit_categories(tf, series)
    stats["columns"] = {f"{tf.key}_{i}": v for i, v in enumerate(stats["values"])}
    return stats


def _tr_one_hot(tf: TransformationFunction, series: pd.Series, s: Mapping[str, Any]) -> pd.DataFrame:
    codes = _codes(series, s["values"])
    names = tf.output_names(s)
    data = {name: codes == i for i, name in enumerate(names)}
    return pd.DataFrame(data, index=series.index, columns=names)


@dataclass(frozen=True)
class _Builtin:
    fit: Callable[[TransformationFunction, pd.Series], dict[str, Any]]
    transform: Callable[[TransformationFunction, pd.Series, Mapping[str, Any]], pd.DataFrame]
    required: tuple[str, ...]
    multi_output: bool = False


_KERNELS: dict[str, _Builtin] = {
    "min_max_scaler": _Builtin(_fit_min_max, _tr_min_max, ("min", "max")),
    "standard_scaler": _Builtin(_fit_standard, _tr_standard, ("mean", "std")),
    "robust_scaler": _Builtin(_fit_robust, _tr_robust, ("p25", "p50", "p75")),
    "label_encoder": _Builtin(_fit_label, _tr_label, ("values",)),
    "one_hot_encoder": _Builtin(_fit_one_hot, _tr_one_hot, ("values",), multi_output=True),
}


# --------------------------------------------------------------------------- the bound call


@dataclass(frozen=True)
class TransformationFunction:
    """A built-in transformation bound to one feature (Hopsworks' ``min_max_scaler("age")``).

    Attributes:
        name: the built-in's name, e.g. ``"standard_scaler"``.
        feature: the input column it transforms (and drops).
        params: JSON-able options (none of the built-ins takes any yet; kept for round trips).
    """

    name: str
    feature: str
    params: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.name not in _KERNELS:
            raise NotFoundError(
                f"Transformation function '{self.name}' does not exist (built-ins: "
                f"{', '.join(sorted(_KERNELS))}).{did_you_mean(str(self.name), _KERNELS)}"
            )
        if not isinstance(self.feature, str) or not self.feature:
            raise InvalidArgumentError(
                f"Transformation {self.name}: feature must be a non-empty column name. "
                f"Got {self.feature!r} instead."
            )
        if not isinstance(self.params, dict):
            raise InvalidArgumentError(
                f"Transformation {self.name}('{self.feature}'): params must be a dict. "
                f"Got {type(self.params).__name__} instead."
            )

    @property
    def key(self) -> str:
        """Key of this transformation's statistics: ``f"{name}_{feature}"``."""
        return f"{self.name}_{self.feature}"

    @property
    def multi_output(self) -> bool:
        """Whether the transformation emits several columns (``{fn}_{feature}_{i}``)."""
        return _KERNELS[self.name].multi_output

    def output_names(self, stats: Mapping[str, Any] | None = None) -> list[str]:
        """Output column names: ``[f"{fn}_{feature}_"]`` or ``f"{fn}_{feature}_{i}"`` per value.

        Multi-output transformations need their fitted ``stats`` (the number of columns is the
        number of training values).
        """
        if not self.multi_output:
            return [f"{self.key}_"]
        if stats is None or "values" not in stats:
            raise InvalidArgumentError(
                f"Transformation {self.name}('{self.feature}'): output names depend on the fitted "
                "statistics. Pass the stats returned by fit()."
            )
        return [f"{self.key}_{i}" for i in range(len(stats["values"]))]

    def fit(self, series: pd.Series) -> dict[str, Any]:
        """Statistics of ``series`` (the train split's column; nulls excluded), JSON-able."""
        return _KERNELS[self.name].fit(self, series)

    def transform(self, series: pd.Series, stats: Mapping[str, Any]) -> pd.DataFrame:
        """Output columns for ``series`` computed with fitted ``stats`` (index preserved)."""
        kernel = _KERNELS[self.name]
        if not isinstance(stats, Mapping):
            raise InvalidArgumentError(
                f"Transformation {self.name}('{self.feature}'): stats must be a dict returned by "
                f"fit(). Got {type(stats).__name__} instead."
            )
        missing = [k for k in kernel.required if k not in stats]
        if missing:
            raise InvalidArgumentError(
                f"Transformation {self.name}('{self.feature}'): stats must contain "
                f"{list(kernel.required)}. Got keys {sorted(stats)} instead (missing {missing}). "
                "Pass the stats returned by fit() for this transformation."
            )
        return kernel.transform(self, series, stats)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form; :func:`transformation_from_dict` reverses it."""
        return {"name": self.name, "feature": self.feature, "params": dict(self.params)}

    @property
    def inputs(self) -> list[str]:
        """The columns the transformation reads."""
        return [self.feature]

    @property
    def dropped(self) -> list[str]:
        """The columns it removes from the output (built-ins drop their input)."""
        return [self.feature]

    def fit_frame(self, frame: pd.DataFrame) -> dict[str, Any]:
        """:meth:`fit` on ``frame[feature]`` (same interface as ``UdfTransformation``)."""
        return self.fit(frame[self.feature])

    def transform_frame(self, frame: pd.DataFrame, stats: Mapping[str, Any]) -> pd.DataFrame:
        """:meth:`transform` on ``frame[feature]``."""
        return self.transform(frame[self.feature], stats)


def min_max_scaler(feature: str) -> TransformationFunction:
    """``(x-min)/(max-min)`` with train-split min/max; output ``min_max_scaler_{feature}_``."""
    return TransformationFunction("min_max_scaler", feature)


def standard_scaler(feature: str) -> TransformationFunction:
    """``(x-mean)/std`` (population std) with train-split stats; output ``standard_scaler_{feature}_``."""
    return TransformationFunction("standard_scaler", feature)


def robust_scaler(feature: str) -> TransformationFunction:
    """``(x-p50)/(p75-p25)`` with train-split percentiles; output ``robust_scaler_{feature}_``."""
    return TransformationFunction("robust_scaler", feature)


def label_encoder(feature: str) -> TransformationFunction:
    """Sorted train-split values → ``0..n-1``; unseen and null → ``-1``; output ``label_encoder_{feature}_``."""
    return TransformationFunction("label_encoder", feature)


def one_hot_encoder(feature: str) -> TransformationFunction:
    """One boolean column ``one_hot_encoder_{feature}_{i}`` per sorted train-split value ``i``."""
    return TransformationFunction("one_hot_encoder", feature)


BUILTINS: dict[str, Callable[[str], TransformationFunction]] = {
    "min_max_scaler": min_max_scaler,
    "standard_scaler": standard_scaler,
    "robust_scaler": robust_scaler,
    "label_encoder": label_encoder,
    "one_hot_encoder": one_hot_encoder,
}


def get_transformation_function(name: str) -> Callable[[str], TransformationFunction]:
    """The built-in factory called ``name`` (``fs.get_transformation_function`` in Hopsworks).

    Raises:
        NotFoundError: ``name`` is not a built-in (with a did-you-mean suggestion).
    """
    try:
        return BUILTINS[name]
    except (KeyError, TypeError):
        raise NotFoundError(
            f"Transformation function {name!r} does not exist (built-ins: "
            f"{', '.join(sorted(BUILTINS))}).{did_you_mean(str(name), BUILTINS)}"
        ) from None


def transformation_from_dict(d: Mapping[str, Any], sdk: Any = None) -> Any:
    """Rebuild a :class:`TransformationFunction` from :meth:`TransformationFunction.to_dict`,
    or a stored Hopsworks UDF (``UdfTransformation.to_dict``) with ``sdk``'s ``load_udf``."""
    if not isinstance(d, Mapping):
        raise ConfigError(
            f"A transformation function must be stored as a dict with 'name' and 'feature'. "
            f"Got {type(d).__name__} instead."
        )
    if "udf" in d:  # a Hopsworks @udf, stored in the SDK's own serialisation
        return UdfTransformation.from_dict(d, sdk)
    unknown = sorted(set(d) - {"name", "feature", "params"})
    missing = sorted({"name", "feature"} - set(d))
    if unknown or missing:
        raise ConfigError(
            f"Stored transformation function {dict(d)!r} must have keys 'name', 'feature' and "
            f"optionally 'params'. Got unknown keys {unknown} and missing keys {missing} instead."
        )
    return TransformationFunction(d["name"], d["feature"], dict(d.get("params") or {}))


# --------------------------------------------------------------------------- the SDK's transformations


_MAPPED_BUILTINS = ("min_max_scaler", "standard_scaler", "robust_scaler", "label_encoder",
                    "one_hot_encoder")


def is_sdk_transformation(obj: Any) -> bool:
    """Whether ``obj`` is the SDK's ``HopsworksUdf`` or ``TransformationFunction``."""
    module = type(obj).__module__
    return (module.startswith(("hsfs.", "hopsworks.hsfs."))
            and type(obj).__name__ in ("HopsworksUdf", "TransformationFunction"))


def _udf_of(obj: Any) -> Any:
    return obj.hopsworks_udf if type(obj).__name__ == "TransformationFunction" else obj


def from_sdk(obj: Any) -> Any:
    """A local transformation for the SDK's ``HopsworksUdf``/``TransformationFunction``.

    Raises:
        InvalidArgumentError: the UDF is not bound to feature names of the view yet.
    """
    udf = _udf_of(obj)
    features = list(udf.transformation_features)
    default_names = bool(getattr(udf, "_generate_output_col_name", True))
    if (udf.function_name in _MAPPED_BUILTINS and len(features) == 1 and default_names
            and not udf.transformation_context):
        return TransformationFunction(udf.function_name, features[0])
    return UdfTransformation(udf)


# --------------------------------------------------------------------------- lists of transformations


def validate_transformations(tfs: Iterable[Any], columns: Iterable[str]) -> list[Any]:
    """Check ``tfs`` against the feature view's ``columns`` and return them as a list.

    Items are bound built-ins (``standard_scaler("amount")``), or the Hopsworks SDK's own
    transformation objects (``hopsworks.hsfs.builtin_transformations.label_encoder("x")``, an
    ``@udf`` bound to features, an ``hsfs`` ``TransformationFunction``), converted with
    :func:`from_sdk`.

    Raises:
        InvalidArgumentError: an item is neither (e.g. the unbound factory ``standard_scaler``
            instead of ``standard_scaler("amount")``), or a feature is transformed twice.
        SchemaMismatchError: a transformed feature is not a column (with a did-you-mean).
    """
    cols = [str(c) for c in columns]
    out: list[Any] = []
    seen: dict[str, Any] = {}
    for tf in tfs:
        if is_sdk_transformation(tf):
            tf = from_sdk(tf)
        if not isinstance(tf, TransformationFunction | UdfTransformation):
            hint = ""
            if callable(tf) and getattr(tf, "__name__", None) in BUILTINS:
                hint = f" Bind it to a feature: {tf.__name__}('column')."
            raise InvalidArgumentError(
                "transformation_functions must be bound calls such as standard_scaler('amount') "
                "or Hopsworks transformation functions such as "
                f"hopsworks.hsfs.builtin_transformations.label_encoder('category'). Got {tf!r} "
                f"instead.{hint}"
            )
        for feature in tf.inputs:
            if feature not in cols:
                raise SchemaMismatchError(
                    f"Transformation {tf.name}('{feature}'): feature '{feature}' is not a column "
                    f"of the feature view (columns: {', '.join(cols)}).{did_you_mean(feature, cols)}"
                )
        for feature in tf.dropped:
            if feature in seen:
                raise InvalidArgumentError(
                    f"Feature '{feature}' must be transformed at most once. Got "
                    f"{seen[feature].name}('{feature}') and {tf.name}('{feature}') instead. "
                    "Keep one of them."
                )
            seen[feature] = tf
        out.append(tf)
    return out


def fit_transformations(
    tfs: Iterable[TransformationFunction], train_frame: pd.DataFrame
) -> dict[str, dict[str, Any]]:
    """Fit every transformation on ``train_frame`` (the train split only).

    Returns:
        JSON-able statistics keyed by :attr:`TransformationFunction.key` (``"{name}_{feature}"``).
    """
    tfs = validate_transformations(tfs, train_frame.columns)
    return {tf.key: tf.fit_frame(train_frame) for tf in tfs}


def apply_transformations(
    tfs: Iterable[TransformationFunction],
    frame: pd.DataFrame,
    stats: Mapping[str, Mapping[str, Any]],
) -> pd.DataFrame:
    """Transform ``frame`` with fitted ``stats``: input columns dropped, outputs appended in order.

    Raises:
        SchemaMismatchError: a transformed feature is missing from ``frame``, or an output column
            name already exists.
        NotFoundError: ``stats`` has no entry for a transformation (fit it on the train split).
    """
    cols = [str(c) for c in frame.columns]
    tfs = validate_transformations(tfs, cols)
    outputs: list[pd.DataFrame] = []
    for tf in tfs:
        if tf.key not in stats:
            raise NotFoundError(
                f"No fitted statistics for transformation {tf.name}('{tf.feature}') (key "
                f"'{tf.key}'; stats hold: {', '.join(sorted(stats)) or 'none'}). Fit the "
                "transformations on the train split with fit_transformations() first."
            )
        outputs.append(tf.transform_frame(frame, stats[tf.key]))
    kept = frame.drop(columns=list(dict.fromkeys(c for tf in tfs for c in tf.dropped)))
    for out in outputs:
        clash = [c for c in out.columns if c in kept.columns]
        if clash:
            raise SchemaMismatchError(
                f"Transformation output column '{clash[0]}' already exists in the frame. Rename "
                "that column or drop the transformation."
            )
    if not outputs:
        return kept
    return pd.concat([kept, *outputs], axis=1)
