"""Validation plots rendered to PNG bytes.

Figures are built with ``matplotlib.figure.Figure`` and drawn by ``FigureCanvasAgg`` directly,
so neither pyplot nor the global backend (``matplotlib.use``) is touched. Every function returns
the bytes of one PNG image; PNG metadata carries no software version, so the same inputs give
the same bytes on one installation.

A curve that is undefined on the data (e.g. ROC with a single class) is drawn as a figure that
says so instead of raising.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from validation.bias import BiasReport
    from validation.explain import Explanation


def _figure(width: float = 5.0, height: float = 4.0) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(fig: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _message(title: str, text: str) -> bytes:
    fig = _figure(5, 2.5)
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True)
    return _png(fig)


def _labels_scores(y_true: Any, y_score: Any) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(y_true, dtype=int).ravel(), np.asarray(y_score, dtype=float).ravel()


def roc_png(y_true: Any, y_score: Any, *, title: str = "ROC curve") -> bytes:
    """ROC curve with its AUC and the chance diagonal."""
    from sklearn.metrics import roc_auc_score, roc_curve

    y, s = _labels_scores(y_true, y_score)
    if len(np.unique(y)) < 2:
        return _message(title, "Undefined: the evaluation set holds a single class.")
    fpr, tpr, _ = roc_curve(y, s)
    fig = _figure()
    ax = fig.add_subplot()
    ax.plot(fpr, tpr, lw=2, label=f"model (AUC = {roc_auc_score(y, s):.3f})")
    ax.plot([0, 1], [0, 1], ls="--", color="grey", label="chance")
    ax.set(xlabel="False positive rate", ylabel="True positive rate", title=title,
           xlim=(0, 1), ylim=(0, 1.01))
    ax.legend(loc="lower right")
    return _png(fig)


def pr_png(y_true: Any, y_score: Any, *, title: str = "Precision-recall curve") -> bytes:
    """Precision-recall curve with average precision and the base-rate line."""
    from sklearn.metrics import average_precision_score, precision_recall_curve

    y, s = _labels_scores(y_true, y_score)
    if y.sum() == 0:
        return _message(title, "Undefined: the evaluation set has no positive rows.")
    precision, recall, _ = precision_recall_curve(y, s)
    fig = _figure()
    ax = fig.add_subplot()
    ax.step(recall, precision, where="post", lw=2,
            label=f"model (AP = {average_precision_score(y, s):.3f})")
    ax.axhline(y.mean(), ls="--", color="grey", label=f"base rate ({y.mean():.3f})")
    ax.set(xlabel="Recall", ylabel="Precision", title=title, xlim=(0, 1), ylim=(0, 1.01))
    ax.legend(loc="upper right")
    return _png(fig)


def confusion_matrix_png(confusion: Mapping[str, int], *, threshold: float | None = None,
                         title: str = "Confusion matrix") -> bytes:
    """Confusion matrix from ``{"tn", "fp", "fn", "tp"}`` counts, annotated with counts."""
    m = np.array([[confusion["tn"], confusion["fp"]], [confusion["fn"], confusion["tp"]]])
    fig = _figure(4.2, 3.8)
    ax = fig.add_subplot()
    im = ax.imshow(m, cmap="Blues")
    for i in range(2):
        for j in range(2):
            ax.text(j, i, f"{m[i, j]:,}", ha="center", va="center",
                    color="white" if m[i, j] > m.max() / 2 else "black", fontsize=12)
    ax.set_xticks([0, 1], ["predicted 0", "predicted 1"])
    ax.set_yticks([0, 1], ["actual 0", "actual 1"])
    ax.set_title(title if threshold is None else f"{title} (threshold {threshold:.3g})")
    fig.colorbar(im, ax=ax, shrink=0.8)
    return _png(fig)


def calibration_png(y_true: Any, y_score: Any, *, n_bins: int = 10,
                    title: str = "Calibration (reliability diagram)") -> bytes:
    """Reliability diagram: mean predicted probability vs observed positive rate per bin."""
    y, s = _labels_scores(y_true, y_score)
    if s.min() < 0 or s.max() > 1:
        return _message(title, "Not drawn: scores are not probabilities (outside [0, 1]).")
    edges = np.linspace(0, 1, n_bins + 1)
    bins = np.clip(np.digitize(s, edges[1:-1], right=False), 0, n_bins - 1)
    mean_pred, frac_pos, counts = [], [], []
    for b in range(n_bins):
        mask = bins == b
        if mask.any():
            mean_pred.append(s[mask].mean())
            frac_pos.append(y[mask].mean())
            counts.append(int(mask.sum()))
    fig = _figure(5, 5.2)
    ax, ax2 = fig.subplots(2, 1, height_ratios=[3, 1], sharex=True)
    ax.plot([0, 1], [0, 1], ls="--", color="grey", label="perfectly calibrated")
    ax.plot(mean_pred, frac_pos, marker="o", lw=2, label="model")
    ax.set(ylabel="Observed positive rate", title=title, xlim=(0, 1), ylim=(0, 1.01))
    ax.legend(loc="upper left")
    ax2.hist(s, bins=edges, color="tab:blue", alpha=0.7)
    ax2.set(xlabel="Mean predicted probability", ylabel="Rows")
    return _png(fig)


def shap_importance_png(explanation: Explanation, *, max_features: int = 20) -> bytes:
    """Horizontal bars of mean |SHAP| per feature (most important on top)."""
    imp = explanation.global_importance()[:max_features]
    fig = _figure(6, max(2.5, 0.3 * len(imp) + 1.2))
    ax = fig.add_subplot()
    names = [n for n, _ in imp][::-1]
    vals = [v for _, v in imp][::-1]
    ax.barh(range(len(vals)), vals, color="tab:blue")
    ax.set_yticks(range(len(vals)), names)
    ax.set(xlabel=f"mean |SHAP| ({explanation.output})", title="Global feature importance")
    return _png(fig)


def shap_beeswarm_png(explanation: Explanation, *, max_features: int = 20,
                      seed: int = 0) -> bytes:
    """Beeswarm-like dot plot: per feature, one dot per row at its SHAP value, coloured by the
    feature value (low → blue, high → red); vertical jitter is seeded."""
    imp = explanation.global_importance()[:max_features]
    index = {n: i for i, n in enumerate(explanation.feature_names)}
    rng = np.random.default_rng(seed)
    fig = _figure(6.5, max(2.5, 0.35 * len(imp) + 1.4))
    ax = fig.add_subplot()
    scatter = None
    for row, (name, _) in enumerate(imp[::-1]):
        j = index[name]
        v = explanation.values[:, j]
        x = explanation.data[:, j].astype(float)
        lo, hi = np.nanmin(x), np.nanmax(x)
        c = (x - lo) / (hi - lo) if hi > lo else np.full_like(x, 0.5)
        jitter = rng.uniform(-0.3, 0.3, size=len(v))
        scatter = ax.scatter(v, row + jitter, c=c, cmap="coolwarm", vmin=0, vmax=1, s=10,
                             alpha=0.8, linewidths=0)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(range(len(imp)), [n for n, _ in imp][::-1])
    ax.set(xlabel=f"SHAP value ({explanation.output})", title="SHAP values per row")
    if scatter is not None:
        cb = fig.colorbar(scatter, ax=ax, ticks=[0, 1])
        cb.ax.set_yticklabels(["low", "high"])
        cb.set_label("feature value")
    return _png(fig)


def attribution_heatmap_png(explanation: Explanation, shape: Sequence[int], *,
                            title: str = "Mean |attribution| per pixel") -> bytes:
    """The mean absolute attribution of every pixel of an image model as a heatmap
    (``shape`` = ``(height, width)``): where the model looks."""
    values = np.abs(np.asarray(explanation.values, dtype=float)).mean(axis=0)
    height, width = int(shape[0]), int(shape[1])
    if values.size % (height * width):
        return _message(title, f"{values.size} attributions do not fit a {height}×{width} image.")
    grid = values.reshape(-1, height, width).sum(axis=0)
    fig = _figure(4.5, 4)
    ax = fig.add_subplot()
    im = ax.imshow(grid, cmap="viridis")
    ax.set(title=f"{title}\n({explanation.method.split(' (')[0]}, {len(explanation.values)} images)",
           xticks=[], yticks=[])
    fig.colorbar(im, ax=ax, label="mean |attribution|")
    return _png(fig)


def residuals_png(y_true: Any, y_pred: Any, *, title: str = "Residuals (test split)") -> bytes:
    """Residual (prediction − label) against prediction, and the residuals' histogram."""
    y = np.asarray(y_true, dtype=float)
    pred = np.asarray(y_pred, dtype=float)
    residual = pred - y
    fig = _figure(9, 3.8)
    scatter, hist = fig.subplots(1, 2)
    scatter.scatter(pred, residual, s=12, alpha=0.7)
    scatter.axhline(0.0, color="grey", linewidth=1)
    scatter.set_xlabel("prediction")
    scatter.set_ylabel("prediction − label")
    scatter.set_title(title)
    hist.hist(residual, bins=min(30, max(5, len(residual) // 3)))
    hist.axvline(0.0, color="grey", linewidth=1)
    hist.set_xlabel("prediction − label")
    hist.set_title(f"mean {residual.mean():.3g}, sd {residual.std():.3g}")
    return _png(fig)


def ablation_png(items: Sequence[str], deltas: Sequence[float], lower: Sequence[float],
                 upper: Sequence[float], *, metric: str, higher_is_better: bool) -> bytes:
    """Each ablated item's metric change (without − with) and its 95% bootstrap interval."""
    n = len(items)
    fig = _figure(7, 1.2 + 0.45 * max(n, 1))
    ax = fig.add_subplot()
    pos = np.arange(n)[::-1]
    d = np.asarray(deltas, dtype=float)
    err = np.vstack([d - np.asarray(lower, dtype=float), np.asarray(upper, dtype=float) - d])
    worse = d < 0 if higher_is_better else d > 0
    ax.barh(pos, d, xerr=np.nan_to_num(err), color=np.where(worse, "tab:red", "tab:green"),
            alpha=0.8, capsize=3)
    ax.axvline(0.0, color="grey", linewidth=1)
    ax.set_yticks(pos, list(items))
    direction = "lower" if higher_is_better else "higher"
    ax.set_xlabel(f"change in {metric} without the item ({direction} = the item helps)")
    ax.set_title("Ablations (95% paired bootstrap intervals)")
    return _png(fig)


def slice_metrics_png(report: BiasReport, column: str,
                      metrics: Sequence[str] = ("selection_rate", "tpr", "fpr")) -> bytes:
    """Horizontal grouped bars of slice metrics for one helper column, with their bootstrap
    intervals as error bars. Slice names sit on the vertical axis (long or many labels never
    overlap); the rate axis is fitted to the largest value so small rates stay visible.
    Unjudged slices are hatched and labelled ``not judged``."""
    slices = report.slices_for(column)
    if not slices:
        return _message(f"Slices of {column}", f"No slices for helper column {column!r}.")
    fig = _figure(7.0, max(2.5, 0.9 + 0.32 * len(slices) * len(metrics)))
    ax = fig.add_subplot()
    height = 0.8 / len(metrics)
    y = np.arange(len(slices))[::-1]
    top = 0.0
    for k, metric in enumerate(metrics):
        vals = np.array([np.nan if getattr(s, metric) is None else getattr(s, metric)
                         for s in slices], dtype=float)
        lows, highs = _interval_arms(slices, metric, vals)
        pos = y + ((len(metrics) - 1) / 2 - k) * height
        bars = ax.barh(pos, np.nan_to_num(vals), height, label=metric,
                       xerr=[lows, highs], error_kw={"elinewidth": 0.8, "capsize": 2})
        top = max(top, float(np.nanmax(np.append(vals + highs, 0.0))))
        for bar, s in zip(bars, slices):
            if not s.judged:
                bar.set_hatch("//")
                bar.set_alpha(0.5)
    labels = [f"{s.value} (n={s.size}{', not judged' if not s.judged else ''})" for s in slices]
    ax.set_yticks(y, labels, fontsize=8)
    ax.set(xlim=(0, min(1.0, max(0.05, top * 1.1))),
           xlabel="rate on the test split (error bars: exact 95% Clopper–Pearson intervals)",
           title=f"Slice metrics by {column}")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=len(metrics))
    return _png(fig)


def _interval_arms(slices: Sequence[Any], metric: str, vals: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Error-bar lengths below and above each value (0 where no interval is known)."""
    lows, highs = np.zeros(len(vals)), np.zeros(len(vals))
    for i, s in enumerate(slices):
        ci = (getattr(s, "intervals", None) or {}).get(metric)
        if ci and np.isfinite(vals[i]):
            lows[i], highs[i] = max(0.0, vals[i] - ci[0]), max(0.0, ci[1] - vals[i])
    return lows, highs


def standard_plots(
    *,
    y_true: Any = None,
    y_score: Any = None,
    confusion: Mapping[str, int] | None = None,
    threshold: float | None = None,
    explanation: Explanation | None = None,
    bias: BiasReport | None = None,
) -> dict[str, bytes]:
    """Every plot a scorecard shows, keyed as :data:`validation.scorecard.PLOT_CAPTIONS` expects
    (``roc``, ``pr``, ``confusion_matrix``, ``calibration``, ``shap_importance``,
    ``shap_beeswarm``, ``slices_<column>``); plots whose inputs are not given are left out."""
    out: dict[str, bytes] = {}
    if y_true is not None and y_score is not None:
        out["roc"] = roc_png(y_true, y_score)
        out["pr"] = pr_png(y_true, y_score)
        out["calibration"] = calibration_png(y_true, y_score)
    if confusion is not None:
        out["confusion_matrix"] = confusion_matrix_png(confusion, threshold=threshold)
    if explanation is not None:
        out["shap_importance"] = shap_importance_png(explanation)
        out["shap_beeswarm"] = shap_beeswarm_png(explanation)
    if bias is not None:
        for column in bias.columns:
            out[f"slices_{column}"] = slice_metrics_png(bias, column)
    return out
