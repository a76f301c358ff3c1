"""What the materialization job computes besides the rows (the SDK's contract, ``hsfs``
``TransformationFunctionEngine._fit_and_transform`` and ``StatisticsEngine``):

* **transformation statistics**, fitted on the **train split only**, for every feature a
  model-dependent transformation reads (``unique_values`` for ``label_encoder`` /
  ``one_hot_encoder``), stored as one statistics entity with ``beforeTransformation: true``;
* the view's **model-dependent transformations** applied to every split with those statistics:
  the UDFs are the ones the SDK posted with the view (their source code, deserialized with
  ``hsfs``'s own ``TransformationFunction.from_response_json``) and run by the SDK's Python
  engine (``_apply_udf_on_dataframe``), as the cluster's job runs the same UDFs;
* **descriptive statistics of each split** (after transformation), stored as one entity with
  ``splitStatistics``.

Statistics have Deequ's shape and meaning (what the Spark job's profiler reports): ``mean``,
population ``stdDev``, ``minimum``/``maximum``, ``approxPercentiles`` (100 values; here exact,
linear interpolation, where Deequ's KLL sketch is approximate), counts and completeness.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def _data_type(series: pd.Series) -> str:
    if pd.api.types.is_bool_dtype(series) or not pd.api.types.is_numeric_dtype(series):
        return "String"
    return "Integral" if pd.api.types.is_integer_dtype(series) else "Fractional"


def column_statistics(series: pd.Series, name: str, unique: bool = False) -> dict[str, Any]:
    """One column's statistics in the Deequ JSON shape ``FeatureDescriptiveStatistics`` reads."""
    values = series.dropna()
    out: dict[str, Any] = {
        "column": name, "dataType": _data_type(series), "count": len(series),
        "numRecordsNonNull": len(values), "numRecordsNull": int(len(series) - len(values)),
        "completeness": float(len(values) / len(series)) if len(series) else 0.0,
        "approximateNumDistinctValues": int(values.nunique()),
    }
    if out["dataType"] != "String" and len(values):
        v = values.to_numpy(dtype="float64")
        out |= {"mean": float(v.mean()), "stdDev": float(v.std(ddof=0)),
                "minimum": float(v.min()), "maximum": float(v.max()), "sum": float(v.sum()),
                "approxPercentiles": [float(p) for p in np.percentile(v, np.arange(1, 101))]}
    if unique:
        out["unique_values"] = sorted(values.unique().tolist())
    return out


def transformation_functions(view: dict[str, Any]) -> list[Any]:
    """The view's model-dependent transformation functions, as ``hsfs`` objects."""
    from hsfs.transformation_function import TransformationFunction

    found = []
    for tf in view.get("transformationFunctions") or []:
        made = TransformationFunction.from_response_json(tf)
        found += made if isinstance(made, list) else [made]
    return found


def _fit(train: pd.DataFrame, tfs: list[Any]) -> list[dict[str, Any]]:
    """Statistics of every transformation input on the train split (Deequ JSON)."""
    unique = {f for tf in tfs if tf.hopsworks_udf.function_name in ("label_encoder",
                                                                      "one_hot_encoder")
              for f in tf.hopsworks_udf.transformation_features}
    inputs = list(dict.fromkeys(f for tf in tfs for f in tf.hopsworks_udf.transformation_features))
    return [column_statistics(train[c], c, unique=c in unique) for c in inputs]


def _transform(frame: pd.DataFrame, tfs: list[Any]) -> pd.DataFrame:
    from hsfs import engine

    outputs, dropped = [], set()
    for tf in tfs:
        udf = tf.hopsworks_udf
        outputs.append(engine._get_instance()._apply_udf_on_dataframe(udf, frame))
        dropped |= set(udf.dropped_features or [])
    kept = frame.drop(columns=[c for c in frame.columns if c in dropped])
    return pd.concat([kept] + [o.set_axis(frame.index) for o in outputs], axis=1)


def fit_and_transform(view: dict[str, Any], splits: dict[str, pd.DataFrame],
                      fit_on: str = "train") -> tuple[dict[str, pd.DataFrame], dict[str, Any] | None]:
    """Transformed splits and the transformation statistics (``None`` without transformations)."""
    from hsfs.core.feature_descriptive_statistics import FeatureDescriptiveStatistics

    tfs = transformation_functions(view)
    if not tfs:
        return splits, None
    fitted = _fit(splits[fit_on], tfs)
    described = [FeatureDescriptiveStatistics._from_deequ_json(c) for c in fitted]
    for tf in tfs:
        if tf.hopsworks_udf.statistics_required:
            tf.transformation_statistics = described
    out = {name: _transform(part, tfs) for name, part in splits.items()}
    return out, {"beforeTransformation": True, "rowPercentage": 1.0,
                 "featureDescriptiveStatistics": [d.to_dict() for d in described]}


def split_statistics(splits: dict[str, pd.DataFrame]) -> dict[str, Any]:
    """Descriptive statistics of every column of every split (after transformation)."""
    from hsfs.core.feature_descriptive_statistics import FeatureDescriptiveStatistics

    return {"beforeTransformation": False, "rowPercentage": 1.0, "splitStatistics": [
        {"name": name, "featureDescriptiveStatistics": [
            FeatureDescriptiveStatistics._from_deequ_json(column_statistics(part[c], c)).to_dict()
            for c in part.columns]}
        for name, part in splits.items()]}
