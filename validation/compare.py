"""A reviewer's comparison of two registered model versions (what ``registry diff`` judges by).

Three questions, in this order:

1. **The same model?** Two versions of one registered model are a before and after; two
   different models (different names) are compared only when asked (``force``), and the
   result says so.
2. **The same test rows?** A version was tested on the test split of the training-dataset
   version it was trained on; the model's lineage names the feature view, the version and that
   split's content sha256. When the two versions name different content, a warning says so and
   the comparison runs on the rows both test splits share (matched on the root feature group's
   primary key and event time), each model scored on its own version's read of those rows. A
   shared row whose label differs between the two reads is left out and counted.
3. **Better or worse?** Every metric's difference B − A gets a 95% paired bootstrap interval
   (:mod:`validation.paired`, the one ``fstrain ablate`` uses): both models' metric on the same
   resampled rows. A version is called better or worse on a metric only when the whole interval
   lies on one side of 0; a difference of ±0.0005 inside an interval that holds 0 is "no clear
   difference".

The rows are re-scored by the caller (``score(model) -> RowScores``): loading a version's
predictor belongs to the trainers, reading its test split to the feature store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import FeatureStoreError, InvalidArgumentError
from validation.metrics import METRIC_DIRECTIONS, metric_function
from validation.paired import NO_CLEAR_DIFFERENCE, UNDETERMINED, interval_verdict, paired_delta

#: The threshold-free metrics each task is compared on (accuracy for multiclass: the predicted
#: class; thresholded binary metrics are left out, each version's threshold being its own).
TASK_METRICS: dict[str, tuple[str, ...]] = {
    "binary": ("roc_auc", "pr_auc", "log_loss", "brier"),
    "multiclass": ("accuracy",),
    "regression": ("rmse", "mae"),
}


@dataclass(frozen=True)
class TestedOn:
    """What a version was tested on, from its lineage."""

    feature_view: str | None
    feature_view_version: int | None
    training_dataset_version: int | None
    sha256: str | None
    rows: int | None

    @classmethod
    def of(cls, manifest: Mapping[str, Any]) -> TestedOn:
        """The test split a manifest's lineage names (fields None where it names none)."""
        lineage = manifest.get("lineage") or {}
        view = lineage.get("feature_view") or {}
        test = ((lineage.get("training_dataset") or {}).get("splits") or {}).get("test") or {}
        return cls(view.get("name", manifest.get("feature_view_name")),
                   view.get("version", manifest.get("feature_view_version")),
                   lineage.get("training_dataset_version",
                               manifest.get("training_dataset_version")),
                   test.get("sha256"), test.get("rows"))

    def same_content_as(self, other: TestedOn) -> bool:
        """True when both name the same test rows: the same content sha256, or (no hash
        recorded) the same immutable training-dataset version of the same feature view."""
        if self.sha256 and other.sha256:
            return self.sha256 == other.sha256
        return (self.training_dataset_version is not None
                and (self.feature_view, self.feature_view_version,
                     self.training_dataset_version)
                == (other.feature_view, other.feature_view_version,
                    other.training_dataset_version))

    def describe(self) -> str:
        """``adult_income:1 training dataset v1, test sha256 c37db0cc7a07 (600 rows)``."""
        view = (f"{self.feature_view}:{self.feature_view_version}" if self.feature_view
                else "no feature view")
        sha = f"test sha256 {self.sha256[:12]}" if self.sha256 else "no test hash recorded"
        rows = "" if self.rows is None else f" ({self.rows} rows)"
        return f"{view} training dataset v{self.training_dataset_version}, {sha}{rows}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"feature_view": self.feature_view,
                "feature_view_version": self.feature_view_version,
                "training_dataset_version": self.training_dataset_version,
                "sha256": self.sha256, "rows": self.rows}


@dataclass
class RowScores:
    """One version's predictions on its own test rows (row-aligned arrays).

    ``scores`` is P(positive class) for a binary task, the predicted class for multiclass and
    the prediction for regression; ``keys`` holds the root group's primary key and event time
    (None when the feature view selects neither).
    """

    task: str
    label: str
    y: np.ndarray
    scores: np.ndarray
    keys: pd.DataFrame | None = None
    positive: Any = None


@dataclass
class Comparison:
    """The verdicts of B against A (see :meth:`to_dict`)."""

    a: str
    b: str
    split_a: TestedOn
    split_b: TestedOn
    same_test_split: bool
    resamples: int
    seed: int
    warnings: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: both test splits, the row counts, one row per metric (``a``, ``b``,
        ``delta`` = B − A, ``lower``/``upper`` of its interval, ``verdict`` for B)."""
        return {"a": self.a, "b": self.b, "test_split_a": self.split_a.to_dict(),
                "test_split_b": self.split_b.to_dict(),
                "same_test_split": self.same_test_split, "warnings": list(self.warnings),
                "rows": dict(self.rows), "metrics": [dict(m) for m in self.metrics],
                "bootstrap": {"resamples": self.resamples, "seed": self.seed,
                              "method": "paired percentile, 95%"}}

    def to_text(self, *, warnings: bool = True) -> str:
        """The comparison for a terminal: the warnings first (unless ``warnings=False``, for a
        caller that printed them already), then one line per metric."""
        lines = [f"WARNING: {w}" for w in self.warnings] if warnings else []
        if not self.metrics:
            lines.append(f"No paired comparison of {self.a} and {self.b} on test rows "
                         "(see the warnings): no verdict.")
            return "\n".join(lines)
        lines.append(
            f"Paired comparison on {self.rows.get('shared', 0)} test rows "
            f"({'the same test split' if self.same_test_split else 'shared by both splits'}); "
            f"B = {self.b} against A = {self.a}, 95% paired bootstrap interval "
            f"({self.resamples} resamples, seed {self.seed}):")
        lines.append(f"  {'metric':<10} {'A':>8} {'B':>8} {'B − A':>9}   95% interval"
                     "          verdict for B")
        for m in self.metrics:
            lines.append(f"  {m['metric']:<10} {_num(m['a']):>8} {_num(m['b']):>8} "
                         f"{_signed(m['delta']):>9}   [{_signed(m['lower'])}, "
                         f"{_signed(m['upper'])}]  {m['verdict']}")
        return "\n".join(lines)


def refuse_unrelated(a: Any, b: Any, *, force: bool) -> list[str]:
    """Refuse two different registered models (InvalidArgumentError naming both) unless
    ``force``; with it, the warning to show."""
    if a.name == b.name:
        return []
    what = (f"{a.name}:{a.version} and {b.name}:{b.version} are versions of two different "
            f"models ('{a.name}' and '{b.name}')")
    if not force:
        raise InvalidArgumentError(
            f"{what}: a diff compares a version with another version of the same model. "
            "Compare two versions of one model, or pass --force (force=True) to compare "
            "these anyway.")
    return [f"{what}; compared because --force was given."]


def compare_versions(a: Any, b: Any, *, score: Callable[[Any], RowScores],
                     force: bool = False, resamples: int = 1000, seed: int = 0) -> Comparison:
    """Compare registered version ``b`` against ``a`` on test rows both were tested on.

    ``score(model)`` re-scores a version's predictor on its own test split. Raises
    :class:`InvalidArgumentError` for two different models without ``force`` (before anything
    is scored) and for fewer than 10 ``resamples``; a version that cannot be re-scored (a
    :class:`FeatureStoreError` from ``score``) gives a warning and no verdict.
    """
    if resamples < 10:
        raise InvalidArgumentError(f"resamples must be at least 10. Got {resamples}.")
    warnings = refuse_unrelated(a, b, force=force)
    split_a, split_b = TestedOn.of(a.manifest), TestedOn.of(b.manifest)
    same = split_a.same_content_as(split_b)
    la, lb = f"{a.name}:{a.version}", f"{b.name}:{b.version}"
    if not same:
        warnings.append(f"the test splits differ: {la} was tested on {split_a.describe()}, "
                        f"{lb} on {split_b.describe()}; their scorecards' test metrics are not "
                        "comparable, so both are re-scored on the rows the two splits share.")
    result = Comparison(la, lb, split_a, split_b, same, resamples, seed, warnings)
    try:
        scores_a, scores_b = score(a), score(b)
    except FeatureStoreError as exc:
        result.warnings.append(f"the versions could not be re-scored on their test rows "
                               f"({exc}): no paired metric.")
        return result
    problem = _incomparable(scores_a, scores_b)
    if problem:
        result.warnings.append(problem)
        return result
    pair = _pair_rows(scores_a, scores_b, same)
    result.rows = pair.counts
    result.warnings += pair.notes
    if pair.reason:
        result.warnings.append(pair.reason)
        return result
    result.metrics = _metrics(scores_a, scores_b, pair, resamples=resamples, seed=seed)
    return result


def _incomparable(a: RowScores, b: RowScores) -> str | None:
    if a.task != b.task:
        return f"the versions solve different tasks ({a.task} and {b.task}): no paired metric."
    if a.label != b.label:
        return (f"the versions predict different labels ('{a.label}' and '{b.label}'): no "
                "paired metric.")
    if a.task == "binary" and a.positive != b.positive:
        return (f"the versions take different positive classes ({a.positive!r} and "
                f"{b.positive!r}): no paired metric.")
    return None


@dataclass
class _Pairs:
    rows_a: np.ndarray
    rows_b: np.ndarray
    counts: dict[str, int]
    notes: list[str]
    reason: str | None = None


def _pair_rows(a: RowScores, b: RowScores, same_split: bool) -> _Pairs:
    """Positions of the shared rows in each version's test rows, in the same order."""
    counts = {"a": len(a.y), "b": len(b.y)}
    none = np.zeros(0, dtype=int)
    keys_a, keys_b = a.keys, b.keys
    if keys_a is None or keys_b is None or list(keys_a.columns) != list(keys_b.columns):
        if same_split and len(a.y) == len(b.y):  # the same rows, bit for bit, in order
            idx = np.arange(len(a.y))
            return _labels_agree(a, b, idx, idx, {**counts, "shared": len(idx)}, [])
        return _Pairs(none, none, {**counts, "shared": 0}, [],
                      "the test rows cannot be matched (the feature views do not select the "
                      "same root primary key and event time): no paired metric.")
    notes = []
    cols = list(keys_a.columns)
    left, right = keys_a.copy(), keys_b.copy()
    left["_row_a"], right["_row_b"] = np.arange(len(left)), np.arange(len(right))
    dup = int(left.duplicated(cols, keep=False).sum() + right.duplicated(cols, keep=False).sum())
    if dup:
        notes.append(f"{dup} test rows share their key ({', '.join(cols)}) with another row "
                     "and are left out.")
        left = left[~left.duplicated(cols, keep=False)]
        right = right[~right.duplicated(cols, keep=False)]
    merged = left.merge(right, on=cols, how="inner").sort_values("_row_a")
    rows_a, rows_b = merged["_row_a"].to_numpy(), merged["_row_b"].to_numpy()
    return _labels_agree(a, b, rows_a, rows_b, {**counts, "shared": len(rows_a)}, notes)


def _labels_agree(a: RowScores, b: RowScores, rows_a: np.ndarray, rows_b: np.ndarray,
                  counts: dict[str, int], notes: list[str]) -> _Pairs:
    same = pd.Series(a.y[rows_a]).reset_index(drop=True).eq(
        pd.Series(b.y[rows_b]).reset_index(drop=True)).to_numpy()
    mismatched = int((~same).sum())
    if mismatched:
        notes.append(f"{mismatched} shared rows carry different labels in the two test splits "
                     "and are left out.")
        rows_a, rows_b = rows_a[same], rows_b[same]
    counts = {**counts, "shared": len(rows_a), "label_mismatch": mismatched}
    pairs = _Pairs(rows_a, rows_b, counts, notes)
    if len(rows_a) < 2:
        pairs.reason = (f"the test splits share {len(rows_a)} rows with the same label: too "
                        "few to compare on.")
    return pairs


def _metric_fn(task: str, name: str) -> Callable[[np.ndarray, np.ndarray], Any]:
    if task == "binary":
        return metric_function(name)
    if name == "accuracy":
        return lambda y, s: float(np.mean(y == s))
    if name == "rmse":
        return lambda y, s: float(np.sqrt(np.mean((np.asarray(s, float) - y) ** 2)))
    return lambda y, s: float(np.mean(np.abs(np.asarray(s, float) - y)))


def _metrics(a: RowScores, b: RowScores, pair: _Pairs, *, resamples: int,
             seed: int) -> list[dict[str, Any]]:
    y = a.y[pair.rows_a]
    if a.task == "binary":
        y = (y == a.positive).astype(int)
    elif a.task == "regression":
        y = y.astype(float)
    sa, sb = a.scores[pair.rows_a], b.scores[pair.rows_b]
    rows = []
    for name in TASK_METRICS.get(a.task, ()):
        fn = _metric_fn(a.task, name)
        higher = METRIC_DIRECTIONS[name]
        delta, lower, upper = paired_delta(fn, y, sa, sb, resamples=resamples, seed=seed)
        rows.append({"metric": name, "higher_is_better": higher, "a": _finite(fn(y, sa)),
                     "b": _finite(fn(y, sb)), "delta": _finite(delta), "lower": _finite(lower),
                     "upper": _finite(upper),
                     "verdict": interval_verdict(lower, upper, higher)})
    return rows


def verdicts(comparison: Comparison) -> dict[str, str]:
    """Metric → verdict for B (``better``, ``worse``, ``no clear difference``,
    ``undetermined``)."""
    return {m["metric"]: m["verdict"] for m in comparison.metrics}


def _finite(value: Any) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4f}"


__all__ = ["Comparison", "NO_CLEAR_DIFFERENCE", "TASK_METRICS", "RowScores", "TestedOn",
           "UNDETERMINED", "compare_versions", "refuse_unrelated", "verdicts"]
