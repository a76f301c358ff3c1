"""The per-task steps of :func:`validation.evaluate.evaluate`: binary classification,
regression and multi-class classification. Each fills the scorecard and returns its figures,
the baseline's metrics and the primary metric that ``better_than_*`` gates compare."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError
from validation.bias import slice_report
from validation.calibration import calibration_report
from validation.evaluation_data import EvaluationData, EvaluationSettings, as_binary, positive_class
from validation.explain import by_column, explain, readable_names
from validation.metrics import (
    baseline_metrics,
    bootstrap_ci,
    choose_threshold,
    classification_cis,
    classification_metrics,
    regression_metrics,
)
from validation.plots import (
    attribution_heatmap_png,
    residuals_png,
    shap_importance_png,
    standard_plots,
)
from validation.scorecard import Scorecard

Result = tuple[dict[str, bytes], dict[str, Any], str]


def _output_index(predictor: Any, positive: Any) -> int | None:
    """The network output explaining the positive class (torch modules, Keras on torch); None
    for other models."""
    target = predictor.explain_target
    if target.kind not in ("mlp", "cnn", "keras_mlp"):
        return None
    classes = list(target.classes)
    return classes.index(positive) if positive in classes else len(classes) - 1


def binary(card: Scorecard, predictor: Any, data: EvaluationData,
           settings: EvaluationSettings) -> Result:
    """Metrics, CIs, baseline, calibration, slices and an explanation of a binary classifier."""
    positive = positive_class(data.y_train)
    y_tr, y_va, y_te = (as_binary(y, positive) for y in (data.y_train, data.y_validation,
                                                          data.y_test))
    s_va = np.asarray(predictor.predict_proba(data.X_validation), dtype=float)
    s_te = np.asarray(predictor.predict_proba(data.X_test), dtype=float)
    choice = choose_threshold(y_va, s_va, settings.threshold_strategy,
                              rows_from=data.validation_rows)
    chosen_on = ("validation" if data.validation_rows == EvaluationData.validation_rows
                 else "rows carved from train")
    card.threshold = {**choice.to_dict(), "chosen_on": chosen_on,
                      "warning": data.validation_warning}
    card.evaluation["threshold_chosen_on"] = chosen_on  # binary only: the others have none
    card.metrics = classification_metrics(y_te, s_te, choice.threshold)
    card.confidence_intervals = classification_cis(
        y_te, s_te, choice.threshold, n_resamples=settings.bootstrap_resamples,
        seed=settings.seed,
        metrics=("roc_auc", "pr_auc", "f1", "precision", "recall", "accuracy", "log_loss",
                 "brier"))
    base = baseline_metrics(y_te, prior=float(y_tr.mean()))
    card.baselines = {"majority_class_prior": base}
    card.calibration = calibration_report(y_te, s_te, prior=float(y_tr.mean()))
    bias = None
    if data.helpers.shape[1]:
        bias = slice_report(y_te, s_te, (s_te >= choice.threshold).astype(int), data.helpers,
                            min_slice_size=settings.min_slice_size,
                            min_positives=settings.min_slice_positives,
                            min_negatives=settings.min_slice_negatives,
                            bands=settings.slice_bands or None,
                            intersections=settings.intersections,
                            n_resamples=settings.bootstrap_resamples, seed=settings.seed)
        card.bias = bias.to_dict()
    explanation = explain_model(card, predictor, data.X_test, settings,
                                _output_index(predictor, positive))
    images = standard_plots(y_true=y_te, y_score=s_te, confusion=card.metrics["confusion_matrix"],
                            threshold=choice.threshold, explanation=explanation, bias=bias)
    return images, base, "roc_auc"


def regression(card: Scorecard, predictor: Any, data: EvaluationData,
               settings: EvaluationSettings) -> Result:
    """MAE, RMSE, R² with bootstrap CIs, per-slice errors, a residual plot, and baselines: the
    mean predictor, and (when the use case names its feature) the naive forecast, which is then
    the baseline the model must beat."""
    y = data.y_test.to_numpy(dtype=float)
    pred = np.asarray(predictor.predict(data.X_test), dtype=float)
    card.metrics = regression_metrics(y, pred)
    fns = {
        "mae": lambda t, p: float(np.mean(np.abs(p - t))),
        "rmse": lambda t, p: float(np.sqrt(np.mean((p - t) ** 2))),
        "r2": _r2,
    }
    card.confidence_intervals = {
        name: bootstrap_ci(fn, y, pred, n_resamples=settings.bootstrap_resamples,
                           seed=settings.seed)
        for name, fn in fns.items()
    }
    base = baseline_metrics(y, task="regression", prior=float(data.y_train.mean()))
    card.baselines = {"mean_predictor": base}
    if settings.naive_forecast:
        base = naive_forecast_baseline(data, settings.naive_forecast)
        card.baselines["naive_forecast"] = base
    if data.helpers.shape[1]:
        card.notes.append(_regression_slices(data.helpers, y, pred, settings.min_slice_size))
    explanation = explain_model(card, predictor, data.X_test, settings, class_index=None)
    images = {"residuals": residuals_png(y, pred), **explanation_images(predictor, explanation)}
    return images, base, "rmse"


def _r2(t: np.ndarray, p: np.ndarray) -> float:
    """R² (NaN on a constant resample, which the bootstrap drops)."""
    ss_tot = float(np.sum((t - t.mean()) ** 2))
    return float("nan") if ss_tot == 0 else 1.0 - float(np.sum((t - p) ** 2)) / ss_tot


def naive_forecast_baseline(data: EvaluationData, column: str) -> dict[str, Any]:
    """Regression metrics of predicting each test row's ``column`` (its last observed label);
    rows without one (no history yet) get the training mean."""
    if column not in data.X_test.columns:
        raise ConfigError(
            f"naive_forecast column {column!r} is not a feature of the test split; "
            f"features: {', '.join(map(str, data.X_test.columns))}."
        )
    last = data.X_test[column].to_numpy(dtype=float)
    missing = np.isnan(last)
    guess = np.where(missing, float(data.y_train.mean()), last)
    out = regression_metrics(data.y_test.to_numpy(dtype=float), guess)
    out.update(baseline="naive_forecast", prior=column,
               prior_source=f"feature {column!r} (last observed label); "
                            f"{int(missing.sum())} row(s) without one use the training mean")
    return out


def _regression_slices(helpers: Any, y: np.ndarray, pred: np.ndarray, min_size: int) -> str:
    parts = []
    for column in helpers.columns:
        values = helpers[column].astype(str).to_numpy()
        for value in sorted(set(values)):
            mask = values == value
            mae = float(np.mean(np.abs(pred[mask] - y[mask])))
            judged = "" if int(mask.sum()) >= min_size else " (not judged)"
            parts.append(f"{column}={value}: n={int(mask.sum())}, MAE={mae:.4g}{judged}")
    return ("Regression slices (test split): per helper-column value, size and MAE (slices "
            f"with fewer than {min_size} rows are not judged): " + "; ".join(parts))


def multiclass(card: Scorecard, predictor: Any, data: EvaluationData,
               settings: EvaluationSettings) -> Result:
    """Accuracy, macro F1, log-loss and per-class recall; the majority class as baseline."""
    from sklearn.metrics import accuracy_score, f1_score, log_loss

    proba = np.asarray(predictor.predict_proba(data.X_test), dtype=float)
    proba = proba / proba.sum(axis=1, keepdims=True)  # float32 softmax rows sum to 1 ± 1e-7
    classes = list(predictor.explain_target.classes)
    predicted = np.asarray(classes)[proba.argmax(axis=1)]
    truth = data.y_test.to_numpy()
    card.metrics = {
        "accuracy": float(accuracy_score(truth, predicted)),
        "macro_f1": float(f1_score(truth, predicted, average="macro")),
        "log_loss": float(log_loss(truth, proba, labels=classes)),
        "per_class_recall": {str(c): float((predicted[truth == c] == c).mean()) for c in classes},
    }
    majority = data.y_train.value_counts().idxmax()
    card.baselines = {"majority_class": {"accuracy": float((truth == majority).mean())}}
    card.notes.append("Multi-class model: bias slices need helper columns, which this view has "
                      "none of; the explanation covers the most frequent predicted class.")
    top = int(np.bincount(proba.argmax(axis=1)).argmax())
    explanation = explain_model(card, predictor, data.X_test, settings, class_index=top)
    return explanation_images(predictor, explanation), card.baselines["majority_class"], "accuracy"



def generation(card: Scorecard, predictor: Any, data: EvaluationData,
               settings: EvaluationSettings) -> Result:
    """A fine-tuned language model: held-out loss per response token and perplexity, and exact
    match (whitespace-insensitive) of greedy answers on the test rows whose reference fits the
    generation budget — the short-answer task — overall and per record source when the view
    has a ``source`` helper. The base model without its adapter is the baseline, scored the
    same way on the same rows (``base_perplexity``, ``base_exact_match``)."""
    total, tokens = predictor.nll(data.X_test, data.y_test)
    base_total, _ = predictor.nll(data.X_test, data.y_test, adapter=False)
    loss, base_loss = total / max(tokens, 1), base_total / max(tokens, 1)
    budget = int(predictor.params.get("max_new_tokens", 16))
    refs = data.y_test.astype(str).reset_index(drop=True)
    short = np.asarray([len(predictor.tokenizer.encode(r, add_special_tokens=False)) < budget
                        for r in refs])
    hits, base_hits = (_exact_matches(predictor, data.X_test, refs, short, budget, adapter=a)
                       for a in (True, False))
    card.metrics = {"loss": loss, "perplexity": math.exp(loss), "tokens": int(tokens),
                    "rows": len(refs),
                    "exact_match": float(hits.mean()) if len(hits) else None,
                    "exact_match_rows": int(short.sum()),
                    "base_perplexity": math.exp(base_loss),
                    "base_exact_match": float(base_hits.mean()) if len(hits) else None}
    if "source" in data.helpers.columns and len(hits):
        sources = data.helpers["source"].astype(str).reset_index(drop=True)[short].to_numpy()
        card.metrics["exact_match_by_source"] = {
            s: {"rows": int((sources == s).sum()), "exact_match": float(hits[sources == s].mean()),
                "base_exact_match": float(base_hits[sources == s].mean())}
            for s in sorted(set(sources))}
    base = {"loss": base_loss, "perplexity": math.exp(base_loss),
            "exact_match": card.metrics["base_exact_match"]}
    card.baselines = {"base_model_without_adapter": base}
    card.evaluation["exact_match"] = (f"greedy answers (at most {budget} new tokens) on the "
                                      f"{int(short.sum())} test rows whose reference is shorter "
                                      "than that budget, with the adapter and without it")
    card.notes.append("Language model: no SHAP explanation (the output is text); loss and "
                      "perplexity are per response token, prompt tokens not scored.")
    if predictor.base.get("source") == "generated":
        card.notes.append("The base is a generated test-scale Llama, not a pretrained model: "
                          "its figures show the pipeline works, not what fine-tuning reaches.")
    return {}, base, "perplexity"


def _exact_matches(predictor: Any, X: pd.DataFrame, refs: pd.Series, short: np.ndarray,
                   budget: int, *, adapter: bool) -> np.ndarray:
    """Per short-answer row: does the greedy answer equal the reference (whitespace aside)?"""
    answers = predictor.predict(X.reset_index(drop=True)[short], max_new_tokens=budget,
                                adapter=adapter)
    return np.asarray([" ".join(str(a).split()) == " ".join(r.split())
                       for a, r in zip(answers, refs[short], strict=True)], dtype=bool)


def explain_model(card: Scorecard, predictor: Any, X: pd.DataFrame, settings: EvaluationSettings,
                  class_index: int | None) -> Any:
    """An explanation on a bounded sample, or None with ``card.explanation_error`` set (the
    scorecard shows it as a failed section; the ``explanation_available`` gate fails)."""
    target = predictor.explain_target
    samples = min(settings.shap_samples, 6) if target.kind == "cnn" else settings.shap_samples
    rows = (X.sample(n=min(len(X), max(samples * 3, 50)), random_state=settings.seed)
            if len(X) > 0 else X)
    try:
        inputs = target.transform(rows)
        names = (pixel_names(np.shape(inputs)) if target.kind == "cnn"
                 else target.feature_names)
        explanation = explain(target.model, inputs, feature_names=names,
                              max_samples=samples, background_size=min(50, len(rows)),
                              seed=settings.seed, class_index=class_index,
                              method="linear" if target.kind == "sklearn_logreg" else "auto")
    except Exception as exc:  # noqa: BLE001 - reported, and fails its gate
        card.explanation_error = f"{type(exc).__name__}: {exc}"
        card.notes.append(f"Explanation failed: {card.explanation_error}")
        return None
    columns = list(getattr(getattr(predictor, "schema", None), "names", ()) or ())
    groups = None
    if target.kind != "cnn" and columns:
        groups = by_column(explanation, columns)
        explanation = readable_names(explanation, columns)
    card.explanation = explanation.to_dict()
    if groups is not None:
        card.explanation["by_column"] = groups
    card.explanation["split"] = "test"
    return explanation


def explanation_images(predictor: Any, explanation: Any) -> dict[str, bytes]:
    """The explanation's figures: importance bars, and a pixel heatmap for an image model."""
    if explanation is None:
        return {}
    images = {"shap_importance": shap_importance_png(explanation)}
    if predictor.explain_target.kind == "cnn":
        side = int(np.sqrt(explanation.values.shape[1]) + 0.5)
        images["attribution_heatmap"] = attribution_heatmap_png(explanation, (side, side))
    return images


def pixel_names(shape: Sequence[int]) -> list[str]:
    """``pixel_r_c`` names of an ``(N, C, H, W)`` image input (channel-major)."""
    _, channels, height, width = (list(shape) + [1, 1, 1])[:4]
    prefix = [f"c{c}_" if channels > 1 else "" for c in range(channels)]
    return [f"{p}pixel_{r}_{c}" for p in prefix for r in range(height) for c in range(width)]
