"""The tabular preprocessing: one scikit-learn ``ColumnTransformer``, fitted on train only.

numeric → ``SimpleImputer(mean)`` + ``StandardScaler`` (mean, not median: the median costs a sort
per column) for models that need it, or passed through unchanged for gradient-boosted trees
(``numeric="passthrough"``): their splits ignore monotone rescaling and they learn a default
direction for missing values instead of seeing them as the train mean; categorical (object/category/bool) →
``SimpleImputer(constant "__missing__")`` + ``OneHotEncoder(handle_unknown="ignore")`` (rare
categories grouped when a column has more than ``max_categories``). Output is dense float32.
Only scikit-learn classes are used, so skops can save and load it without trusting custom code.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from fstrain.trainers.data import FeatureSchema

NUMERIC_MODES = ("impute_scale", "passthrough")


def build_preprocessor(
    schema: FeatureSchema, *, max_categories: int | None = 50, numeric: str = "impute_scale"
) -> Any:
    """An unfitted ``ColumnTransformer`` for ``schema``.

    ``numeric`` is ``"impute_scale"`` (mean imputation + standardisation) or ``"passthrough"``
    (values as they are, NaN kept).
    """
    if numeric not in NUMERIC_MODES:
        raise ValueError(f"numeric must be one of {NUMERIC_MODES}; got {numeric!r}.")
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    transformers: list[Any] = []
    if schema.numeric and numeric == "passthrough":
        transformers.append(("num", "passthrough", list(schema.numeric)))
    elif schema.numeric:
        transformers.append(
            (
                "num",
                Pipeline(
                    [
                        ("impute", SimpleImputer(strategy="mean", keep_empty_features=True)),
                        ("scale", StandardScaler()),
                    ]
                ),
                list(schema.numeric),
            )
        )
    if schema.categorical:
        transformers.append(
            (
                "cat",
                Pipeline(
                    [
                        ("impute", SimpleImputer(strategy="constant", fill_value="__missing__")),
                        (
                            "onehot",
                            OneHotEncoder(
                                handle_unknown="ignore",
                                max_categories=max_categories,
                                sparse_output=False,
                                dtype=np.float32,
                            ),
                        ),
                    ]
                ),
                list(schema.categorical),
            )
        )
    return ColumnTransformer(transformers, remainder="drop", sparse_threshold=0.0)


def transform(preprocessor: Any, schema: FeatureSchema, X: pd.DataFrame) -> np.ndarray:
    """Apply a fitted preprocessor to ``X`` → C-contiguous float32 matrix."""
    out = preprocessor.transform(schema.prepare(X))
    return np.ascontiguousarray(out, dtype=np.float32)


def fit_transform(
    schema: FeatureSchema,
    X_train: pd.DataFrame,
    *,
    max_categories: int | None = 50,
    numeric: str = "impute_scale",
) -> tuple[Any, np.ndarray]:
    """Fit a new preprocessor on the train split only and return it with the train matrix."""
    pre = build_preprocessor(schema, max_categories=max_categories, numeric=numeric)
    out = pre.fit_transform(schema.prepare(X_train))
    return pre, np.ascontiguousarray(out, dtype=np.float32)


def feature_names_out(preprocessor: Any) -> list[str]:
    """Names of the transformed columns (``num__age``, ``cat__sex_Male``, ...)."""
    return [str(n) for n in preprocessor.get_feature_names_out()]
