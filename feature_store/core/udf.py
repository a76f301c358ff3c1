"""Hopsworks ``@udf`` transformation functions run on pandas, with train-fitted statistics.

The Hopsworks SDK describes a transformation function as an ``hsfs.hopsworks_udf.HopsworksUdf``
(what ``@udf`` returns, and what every function of ``hopsworks.hsfs.builtin_transformations``
is); ``hsfs.transformation_function.TransformationFunction`` wraps one. This module turns such
an object into a model-dependent transformation of a feature view:

* :func:`feature_store.core.transformations.from_sdk` maps the SDK's five built-ins that
  :mod:`.transformations` implements (``min_max_scaler``, ``standard_scaler``, ``robust_scaler``, ``label_encoder``,
  ``one_hot_encoder``) onto those implementations when bound to one feature with the default
  output names, and wraps anything else in :class:`UdfTransformation`.
* :class:`UdfTransformation` runs the UDF's own code through the SDK (``mode="pandas"`` and
  ``"default"`` get pandas Series, ``mode="python"`` gets one row's values at a time, as the
  SDK's Python engine does), with the statistics it declares (``statistics=
  TransformationStatistics("x")``) computed on the **train split only** in the shape the SDK
  reads (``min``, ``max``, ``mean``, ``std_dev``, 100 ``percentiles`` where ``percentiles[i]``
  is the ``i+1``-th percentile, ``unique_values``, ``histogram`` ...), and its
  ``transformation_context``.
* Output names follow ``hsfs.transformation_function.TransformationFunction``: a model-dependent
  function writes ``{fn}_{features joined by _}_`` (one output) or ``..._{i}`` (several), unless
  the UDF sets them with ``.alias(...)``; a single output named after an input it does not drop
  keeps that input's name. Dropped inputs are the UDF's ``drop=``.

Nothing here imports the SDK: the objects come from the user and are used by duck typing. What
needs the SDK itself (rebuilding a stored UDF, listing the built-ins) is passed in as
:class:`SdkObjects` by the composition root (``fstrain.sdk_objects``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError, InvalidArgumentError, SchemaMismatchError

__all__ = ["SdkObjects", "UdfTransformation", "feature_statistics"]

class SdkObjects(Protocol):
    """What the local backend needs from the SDK (implemented by ``fstrain.sdk_objects``)."""

    def load_udf(self, data: dict[str, Any]) -> Any:
        """A ``HopsworksUdf`` rebuilt from its JSON."""

    def builtin_transformation_functions(self, featurestore_id: int = 1) -> list[Any]:
        """The SDK's built-in transformation functions."""

    def model_dependent_transformation_functions(
        self, transformations: list[Any], statistics: dict[str, Any]
    ) -> list[Any]:
        """The SDK's ``TransformationFunction`` objects for fitted local transformations."""


# --------------------------------------------------------------------------- statistics


def feature_statistics(series: pd.Series) -> dict[str, Any]:
    """Statistics of one train-split column in the shape ``FeatureTransformationStatistics``
    reads (nulls excluded; numeric statistics only for numeric columns)."""
    non_null = series.dropna()
    count = len(series)
    stats: dict[str, Any] = {
        "count": count,
        "num_non_null_values": len(non_null),
        "num_null_values": int(count - len(non_null)),
        "completeness": float(len(non_null) / count) if count else None,
    }
    values = [v.item() if isinstance(v, np.generic) else v for v in pd.unique(non_null)]
    try:
        values = sorted(values)
    except TypeError:
        pass
    counts = non_null.value_counts(sort=False)
    histogram = [{"value": (k.item() if isinstance(k, np.generic) else k), "count": int(c)}
                 for k, c in counts.items()]
    stats["approx_num_distinct_values"] = stats["exact_num_distinct_values"] = len(values)
    numeric = (pd.api.types.is_numeric_dtype(series.dtype)
               and not pd.api.types.is_bool_dtype(series.dtype))
    if numeric and len(non_null):
        x = non_null.to_numpy(dtype="float64")
        stats.update(
            min=float(x.min()), max=float(x.max()), sum=float(x.sum()), mean=float(x.mean()),
            std_dev=float(x.std(ddof=0)),
            percentiles=[float(p) for p in np.percentile(x, np.arange(1, 101))],
        )
    stats["extended_statistics"] = {"unique_values": values, "histogram": histogram}
    return stats


def sdk_statistics(tf: Any, stats: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``tf``'s fitted statistics in the SDK's shape, keyed by the UDF's statistics argument.

    A :class:`UdfTransformation`'s statistics already are; a built-in's are mapped onto the fields
    the SDK's own built-in reads (``min``/``max``, ``mean``/``std_dev``, ``percentiles`` with the
    quartiles at indices 24, 49 and 74, ``unique_values``). The argument of the SDK's built-ins
    is ``feature``.
    """
    if isinstance(tf, UdfTransformation):
        return {k: dict(v) for k, v in stats.items()}
    if tf.name == "min_max_scaler":
        out: dict[str, Any] = {"min": stats["min"], "max": stats["max"]}
    elif tf.name == "standard_scaler":
        out = {"mean": stats["mean"], "std_dev": stats["std"]}
    elif tf.name == "robust_scaler":
        percentiles: list[Any] = [None] * 100
        percentiles[24], percentiles[49], percentiles[74] = stats["p25"], stats["p50"], stats["p75"]
        out = {"percentiles": percentiles}
    else:  # label_encoder, one_hot_encoder
        out = {"extended_statistics": {"unique_values": list(stats["values"])}}
    return {"feature": out}


# --------------------------------------------------------------------------- the transformation


class UdfTransformation:
    """A Hopsworks UDF bound to feature-view columns, run locally.

    Attributes:
        name: the UDF's function name.
        inputs: the columns it reads, in argument order.
        dropped: the inputs it drops from the output frame (its ``drop=``).
    """

    multi_output = False  # output names never depend on statistics here

    def __init__(self, udf: Any) -> None:
        self.udf = udf
        self.name = str(udf.function_name)
        self.inputs = list(udf.transformation_features)
        self.dropped = list(udf.dropped_features or [])
        self.feature = self.inputs[0]
        self.params: dict[str, Any] = {}
        if udf.execution_mode.name not in ("DEFAULT", "PANDAS", "PYTHON"):
            raise InvalidArgumentError(
                f"Transformation {self.name}: execution mode {udf.execution_mode!r} is not "
                "supported. Use mode='default', 'pandas' or 'python'."
            )

    def __repr__(self) -> str:
        return f"UdfTransformation({self.name}({', '.join(self.inputs)}))"

    @property
    def key(self) -> str:
        """Key of this transformation's statistics: ``f"{name}_{inputs joined by _}"``."""
        return f"{self.name}_{'_'.join(self.inputs)}"

    def output_names(self, stats: Mapping[str, Any] | None = None) -> list[str]:
        """The output columns (see the module docstring for the SDK's naming rule)."""
        udf = self.udf
        n = len(udf.return_types)
        if not getattr(udf, "_generate_output_col_name", True) and udf.output_column_names:
            return list(udf.output_column_names)
        if n == 1 and self.name in self.inputs and self.name not in self.dropped:
            return [self.name]
        base = f"{self.name}_{'_'.join(self.inputs)}_"
        return [base] if n == 1 else [f"{base}{i}" for i in range(n)]

    def fit_frame(self, frame: pd.DataFrame) -> dict[str, Any]:
        """Statistics the UDF declares, on the train split, keyed by the UDF's argument name.

        Raises:
            InvalidArgumentError: a statistics column holds ``±inf`` (its mean, deviation and
                percentiles would be infinite or NaN, and the UDF fitted on nothing meaningful).
        """
        mapping = self.udf._statistics_argument_mapping
        for c in self.udf.statistics_features:
            self._check_finite(c, frame[c])
        return {mapping[c]: feature_statistics(frame[c]) for c in self.udf.statistics_features}

    def _check_finite(self, column: str, series: pd.Series) -> None:
        if not (pd.api.types.is_float_dtype(series.dtype)):
            return
        values = series.to_numpy(dtype="float64", na_value=np.nan)
        infinite = np.isinf(values)
        if infinite.any():
            raise InvalidArgumentError(
                f"Transformation {self.name}({', '.join(self.inputs)}): feature '{column}' "
                f"must be finite in the train split for the statistics the function declares. "
                f"Got {float(values[infinite][0])!r} instead ({int(infinite.sum())} row(s)). "
                "Replace infinities before fitting."
            )

    def transform_frame(self, frame: pd.DataFrame, stats: Mapping[str, Any]) -> pd.DataFrame:
        """Run the UDF over ``frame``'s input columns; output columns named by
        :meth:`output_names`, index preserved."""
        udf = copy.deepcopy(self.udf)
        if udf.statistics_features:
            udf.transformation_statistics = {k: dict(v) for k, v in stats.items()}
        names = self.output_names(stats)
        udf.output_column_names = names
        fn = udf._get_udf(online=False, engine_type="python")
        columns = [frame[c] for c in self.inputs]
        try:
            if udf.execution_mode.name == "PYTHON":
                rows = [fn(*vals) for vals in zip(*(c.tolist() for c in columns), strict=True)]
                out = (pd.DataFrame(rows, columns=names, index=frame.index) if len(names) > 1
                       else pd.DataFrame({names[0]: rows}, index=frame.index))
            else:
                result = fn(*columns)
                out = (result.to_frame(names[0]) if isinstance(result, pd.Series)
                       else pd.DataFrame(result))
                out.columns = names
                out.index = frame.index
        except (InvalidArgumentError, SchemaMismatchError):
            raise
        except Exception as exc:  # the user's UDF code: report which one failed
            raise InvalidArgumentError(
                f"Transformation function {self.name}({', '.join(self.inputs)}) failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the SDK's own serialisation of the UDF, source code included)."""
        return {"name": self.name, "udf": json.loads(self.udf.json())}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], sdk: SdkObjects | None) -> UdfTransformation:
        """Rebuild from :meth:`to_dict` (through ``sdk.load_udf``).

        Raises:
            ConfigError: no SDK objects were given (the store was not opened by ``login``).
        """
        if sdk is None:
            raise ConfigError(
                f"Transformation function {data.get('name')!r} is a stored Hopsworks UDF; "
                "rebuilding it needs the Hopsworks SDK. Open the store with fstrain.login()."
            )
        return cls(sdk.load_udf(dict(data["udf"])))
