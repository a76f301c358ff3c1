"""``evaluate``: one model on its evaluation data → a :class:`~validation.scorecard.Scorecard`
and its figures. The model-validation pipeline loads the configuration, the model and the data,
calls :func:`evaluate`, and records the result through the model registry.

Binary classifiers get metrics with bootstrap intervals at a threshold chosen on the
*validation* split and applied to the *test* split, the constant-prior baseline, calibration,
slice metrics and disparities on the helper columns, and an explanation. Regressions and
multi-class models get their own, smaller sets. The gates come from :func:`select_gates`: the
use case's defaults plus fstrain's standard gates, plus any extra ones; replacing the defaults
is explicit and recorded on the scorecard.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError
from validation.gates import EXPLANATION_GATE, evaluate_gates, parse_gate
from validation.scorecard import Scorecard

#: Gates fstrain applies to every binary classifier unless the defaults are replaced: a model
#: must beat the constant (training prior) predictor on log-loss and Brier score, and it must be
#: explainable.
STANDARD_BINARY_GATES = ("better_than_baseline(log_loss)", "better_than_baseline(brier)",
                         EXPLANATION_GATE)
STANDARD_GATES = (EXPLANATION_GATE,)
GATE_SOURCES = ("use-case default", "fstrain standard", "config file", "command line")


@dataclass(frozen=True)
class GateSpec:
    """One gate string and where it came from (one of :data:`GATE_SOURCES`)."""

    gate: str
    source: str


def select_gates(defaults: Sequence[str], extra: Sequence[str] | None, *, task: str,
                 source: str = "config file", replace: bool = False) -> list[GateSpec]:
    """The gates of one run: the use case's ``defaults`` and fstrain's standard gates for
    ``task`` (``binary``, ``multiclass`` or ``regression``), plus ``extra`` from ``source``;
    with ``replace`` only ``extra``. A gate listed twice is kept once, with its first source."""
    if source not in GATE_SOURCES[2:]:
        raise ConfigError(f"gate source must be 'config file' or 'command line'. Got {source!r}.")
    if replace and not extra:
        raise ConfigError("replace_gates needs at least one gate to replace the defaults with.")
    standard = (STANDARD_BINARY_GATES if task == "binary" else ()
                if task == "generation" else STANDARD_GATES)  # text output: no SHAP gate
    specs = [] if replace else ([GateSpec(g, "use-case default") for g in defaults]
                                + [GateSpec(g, "fstrain standard") for g in standard])
    specs += [GateSpec(g, source) for g in extra or []]
    seen: dict[str, GateSpec] = {}
    for spec in specs:
        seen.setdefault(parse_gate(spec.gate).name, spec)
    return list(seen.values())


@dataclass
class EvaluationData:
    """The rows to evaluate on. ``X_*`` are model inputs only (helper columns removed);
    ``helpers`` holds the test rows' helper columns, in the same order. ``validation_rows``
    says where the validation rows come from, after their count (``"rows carved from the
    train split ..."`` for a train/test version); ``validation_warning`` is shown beside the
    threshold when those rows may not have been held out from fitting."""

    X_validation: pd.DataFrame
    X_test: pd.DataFrame
    y_train: pd.Series
    y_validation: pd.Series
    y_test: pd.Series
    helpers: pd.DataFrame
    validation_rows: str = "rows of the validation split"
    validation_warning: str | None = None


@dataclass(frozen=True)
class EvaluationSettings:
    """How to evaluate (from the pipeline's configuration)."""

    threshold_strategy: str | float = "f1"
    min_slice_size: int = 30
    min_slice_positives: int = 10
    min_slice_negatives: int = 10
    shap_samples: int = 200
    bootstrap_resamples: int = 200
    seed: int = 0
    slice_bands: Mapping[str, Sequence[float]] = field(default_factory=dict)
    intersections: Sequence[tuple[str, str]] = ()
    naive_forecast: str | None = None  # feature = last observed label (regression baseline)


@dataclass
class Evaluation:
    """The outcome: the scorecard and its PNG figures (name → bytes)."""

    card: Scorecard
    images: dict[str, bytes]


def task_of(predictor: Any, y_train: pd.Series) -> str:
    """``regression``, ``binary``, ``multiclass`` or ``generation`` (a language model)."""
    if getattr(predictor, "task", None) == "generation":
        return "generation"
    if predictor.explain_target.classes == ():
        return "regression"
    return "binary" if int(y_train.nunique()) <= 2 else "multiclass"


def evaluate(predictor: Any, data: EvaluationData, card: Scorecard, gates: Sequence[GateSpec],
             settings: EvaluationSettings, previous: tuple[Mapping[str, Any], str] | None = None
             ) -> Evaluation:
    """Evaluate ``predictor`` on ``data`` into ``card`` (which carries identity and lineage).

    Args:
        predictor: a loaded model (``predict_proba``/``predict`` and ``explain_target``).
        data: validation and test rows, labels and the test rows' helper columns.
        card: the scorecard to fill.
        gates: from :func:`select_gates`.
        settings: thresholds, sample sizes, seeds, slice bands.
        previous: the best previously passed version's test metrics and its label, if any.

    Returns:
        The filled scorecard (gates evaluated, each result with its source) and its figures.
    """
    from validation import evaluate_tasks

    task = task_of(predictor, data.y_train)
    card.task = task if task in ("regression", "generation") else "classification"
    run = {"binary": evaluate_tasks.binary, "regression": evaluate_tasks.regression,
           "multiclass": evaluate_tasks.multiclass, "generation": evaluate_tasks.generation}[task]
    images, baseline, primary = run(card, predictor, data, settings)
    _apply_gates(card, gates, baseline, previous, primary)
    return Evaluation(card, images)


def _apply_gates(card: Scorecard, gates: Sequence[GateSpec], baseline: Mapping[str, Any],
                 previous: tuple[Mapping[str, Any], str] | None, primary: str) -> None:
    prev_metrics, prev_label = previous if previous else (None, "previous version")
    if prev_metrics is not None:
        card.baselines[f"best_passed_{prev_label.replace(' ', '_')}"] = dict(prev_metrics)
    report = evaluate_gates([g.gate for g in gates], card.gate_metrics(), baseline=baseline,
                            previous=prev_metrics, previous_label=prev_label,
                            primary_metric=primary).to_dict()
    for result, spec in zip(report["results"], gates):
        result["source"] = spec.source
    card.gates = report
    sources = {g.source for g in gates}
    card.gate_selection = {
        "replaced_defaults": not ({"use-case default", "fstrain standard"} & sources),
        "gates": [{"gate": g.gate, "source": g.source} for g in gates],
    }


def explain_model(card: Scorecard, predictor: Any, X: pd.DataFrame, settings: EvaluationSettings,
                  class_index: int | None) -> Any:
    """An explanation on a bounded sample, or None with ``card.explanation_error`` set (the
    scorecard shows it as a failed section; the ``explanation_available`` gate fails)."""
    from validation.explain import explain

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
        from validation.explain import by_column, readable_names

        groups = by_column(explanation, columns)
        explanation = readable_names(explanation, columns)
    card.explanation = explanation.to_dict()
    if groups is not None:
        card.explanation["by_column"] = groups
    card.explanation["split"] = "test"
    return explanation


def explanation_images(predictor: Any, explanation: Any) -> dict[str, bytes]:
    """The explanation's figures: importance bars, and a pixel heatmap for an image model."""
    from validation.plots import attribution_heatmap_png, shap_importance_png

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


def positive_class(y: pd.Series) -> Any:
    """The positive label of a binary target (``True``, else the largest value)."""
    values = sorted(y.dropna().unique().tolist())
    return True if True in values else values[-1]


def as_binary(y: pd.Series, positive: Any) -> np.ndarray:
    """0/1 labels."""
    return (y == positive).astype(int).to_numpy()
