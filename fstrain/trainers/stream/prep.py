"""The train-fitted preprocessing of a streamed run: :class:`StreamPrep` applies it to every piece,
and :func:`fit_streamed` fits it on a train split too large for memory, in one streamed pass.

The preprocessor is the same scikit-learn ``ColumnTransformer`` as the in-memory path
(:mod:`fstrain.trainers.preprocessing`), so the registered model is unchanged in format. What
its fit needs from the rows is small and exact to gather a piece at a time:

- numeric columns (mean imputation, then standardisation): the count, mean and sum of squared
  deviations of the present values (Chan's pairwise merge). Imputed rows sit at the mean, so the
  scaler's variance is that sum over all rows;
- categorical columns (one-hot, rare categories grouped beyond ``max_categories``): the count of
  every category (missing counted as ``__missing__``, what the imputer fills in). Which
  categories stay is scikit-learn's rule: the ``max_categories - 1`` most frequent, ties broken
  by a stable sort over the sorted categories.

The transformer is then fitted on a small frame built to have exactly these statistics: numeric
columns ``mean ± std`` around the mean (mean and population variance reproduced), categorical
columns every category once, and the kept ones a second time when grouping applies. The
transformed values equal the in-memory fit's to float rounding (tested).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fstrain.trainers.data import FeatureSchema, LabelInfo, label_info, label_series
from fstrain.trainers.stream.pieces import rank_pieces
from fstrain.trainers.stream.source import StreamSource
from fstrain.kernel.errors import InvalidArgumentError
from fstrain.trainers.preprocessing import build_preprocessor, transform

MISSING = "__missing__"


@dataclass(frozen=True)
class StreamPrep:
    """The train-fitted preprocessing applied to every piece (picklable)."""

    schema: FeatureSchema
    preprocessor: Any
    labels: LabelInfo

    def arrays(self, X: pd.DataFrame, y: pd.DataFrame, split: str) -> tuple[np.ndarray, np.ndarray]:
        """Float32 feature matrix and encoded labels of one piece."""
        return transform(self.preprocessor, self.schema, X), self.labels.encode(y, split=split)


class _Moments:
    """Running count/mean/M2 per numeric column and category counts per categorical column."""

    def __init__(self, schema: FeatureSchema) -> None:
        self.schema = schema
        self.rows = 0
        self.n = {c: 0 for c in schema.numeric}
        self.mean = {c: 0.0 for c in schema.numeric}
        self.m2 = {c: 0.0 for c in schema.numeric}
        self.counts: dict[str, Counter[str]] = {c: Counter() for c in schema.categorical}

    def add(self, X: pd.DataFrame) -> None:
        prepared = self.schema.prepare(X)
        self.rows += len(prepared)
        for col in self.schema.numeric:
            values = prepared[col].to_numpy(dtype=np.float64)
            values = values[~np.isnan(values)]
            nb = len(values)
            if not nb:
                continue
            mb = float(values.mean())
            m2b = float(((values - mb) ** 2).sum())
            n, delta = self.n[col], mb - self.mean[col]
            total = n + nb
            self.mean[col] += delta * nb / total
            self.m2[col] += m2b + delta * delta * n * nb / total
            self.n[col] = total
        for col in self.schema.categorical:
            self.counts[col].update(pd.Series(prepared[col]).fillna(MISSING).value_counts()
                                    .to_dict())

    def frame(self, max_categories: int | None) -> pd.DataFrame:
        """A small frame whose fit gives the same transformer as all rows would."""
        cats = {c: _category_rows(self.counts[c], max_categories) for c in self.schema.categorical}
        length = max([2, *(len(v) for v, _ in cats.values())])
        z = np.arange(length, dtype=np.float64)
        z -= z.mean()
        z /= np.sqrt((z * z).mean())
        out: dict[str, Any] = {}
        for col in self.schema.numeric:
            if not self.n[col]:
                out[col] = np.full(length, np.nan)
                continue
            std = np.sqrt(self.m2[col] / max(self.rows, 1))
            out[col] = self.mean[col] + std * z
        for col, (values, pool) in cats.items():
            pad = np.resize(np.asarray(pool, dtype=object), length - len(values))
            out[col] = np.concatenate([np.asarray(values, dtype=object), pad])
        return pd.DataFrame(out)


def _category_rows(counts: Counter[str],
                   max_categories: int | None) -> tuple[list[str], list[str]]:
    """Every category once; when scikit-learn would group rare ones, the kept ones twice (its
    stable ranking by count then puts exactly the rare ones below the kept ones). Also the
    categories padding may repeat: the kept ones only, which keeps that ranking."""
    categories = sorted(counts)
    k = len(categories)
    if max_categories is None or max_categories > k or max_categories <= 1:
        return categories, categories
    observed = np.asarray([counts[c] for c in categories])
    kept = np.argsort(observed, kind="mergesort")[k - (max_categories - 1):]
    again = [categories[int(i)] for i in np.sort(kept)]
    return categories + again, again


def fit_streamed(source: StreamSource, config: Any) -> tuple[StreamPrep, np.ndarray]:
    """One pass over the train split: the fitted :class:`StreamPrep` (numeric columns as
    ``config.numeric_mode`` asks) and the train rows' class counts (for the imbalance plan;
    empty for a regression, whose label values are not counted)."""
    moments: _Moments | None = None
    label_counts: Counter[Any] = Counter()
    first: pd.Series | None = None
    regression = config.task == "regression"
    for piece in rank_pieces(source.group_rows["train"], 0, 1):
        X, y = source.read("train", piece)
        if moments is None:
            moments = _Moments(FeatureSchema.infer(X))
        series = label_series(y, split="train")
        if first is None:
            first = series.head(2)
        if not regression:
            label_counts.update(series.value_counts().to_dict())
        moments.add(X)
    if moments is None or first is None:
        raise InvalidArgumentError("the train split has no rows; there is nothing to train on.")
    labels = label_info(first if regression else pd.Series(list(label_counts), name=first.name),
                        config.task)
    pre = build_preprocessor(moments.schema, max_categories=config.max_categories,
                             numeric=config.numeric_mode)
    pre.fit(moments.frame(config.max_categories))
    counts = np.asarray([label_counts[c] for c in labels.classes], dtype=np.int64)
    return StreamPrep(moments.schema, pre, labels), counts
