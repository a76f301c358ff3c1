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
from validation import evaluate_tasks
from validation.evaluation_data import EvaluationData, EvaluationSettings
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


__all__ = ["GATE_SOURCES", "STANDARD_BINARY_GATES", "STANDARD_GATES", "Evaluation",
           "EvaluationData", "EvaluationSettings", "GateSpec", "evaluate", "select_gates", "task_of"]
