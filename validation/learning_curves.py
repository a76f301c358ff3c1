"""Reading learning curves: a plain-language fit diagnosis, a figure and the scorecard section.

Works on the JSON dict a trainer saves with its model (``learning_curves.json``, schema in
``fstrain/trainers/curves.py``): ``unit``, ``loss``, ``metric``, ``mode``, ``steps``,
``train_loss``, ``val_loss``, ``train_metric``, ``val_metric``, ``best_step``, ``extra``,
``notes``. Nothing here imports the trainers.

The diagnosis (:func:`fit_diagnosis`) uses the loss curves:

- **overfitting**: at the kept step the validation loss is more than :data:`GAP_RATIO` above
  the train loss, or the validation loss rose by more than :data:`RISE_RATIO` above its minimum
  while the train loss kept falling;
- **underfitting**: the validation loss was still falling over the last fifth of the run by
  more than :data:`STILL_FALLING` (more rounds/epochs would help), or the train loss barely
  moved (:data:`FLAT_RATIO`);
- otherwise a **good fit**. A random forest (in-sample train values) is judged on its
  validation curve only.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from validation.plots import _figure, _png

#: validation loss this much above train loss at the kept step: a large gap (overfitting)
GAP_RATIO = 0.25
#: validation loss this much above its minimum after it: overfitting past the best step
RISE_RATIO = 0.05
#: validation loss still falling by this share over the last fifth: underfitting
STILL_FALLING = 0.01
#: train loss at the end above this share of its start: the loss is flat
FLAT_RATIO = 0.98


def _finite(values: Sequence[Any]) -> list[tuple[int, float]]:
    return [(i, float(v)) for i, v in enumerate(values) if v is not None]


def _at(curves: Mapping[str, Any], series: str, index: int) -> float | None:
    values = curves.get(series) or []
    return values[index] if 0 <= index < len(values) else None


def _kept_index(curves: Mapping[str, Any]) -> int:
    steps = list(curves.get("steps") or [])
    best = curves.get("best_step")
    return steps.index(best) if best in steps else len(steps) - 1


def loss_gap(curves: Mapping[str, Any]) -> dict[str, Any] | None:
    """Train and validation loss at the kept step and their relative gap, or None."""
    i = _kept_index(curves)
    train, val = _at(curves, "train_loss", i), _at(curves, "val_loss", i)
    if train is None or val is None or val <= 0:
        return None
    return {"step": curves["steps"][i], "train_loss": train, "val_loss": val,
            "gap": (val - train) / val}


def flat_loss(curves: Mapping[str, Any]) -> dict[str, Any] | None:
    """``{"first", "last", "ratio"}`` when the train loss barely moved over ≥ 3 steps."""
    points = _finite(curves.get("train_loss") or [])
    if len(points) < 3 or points[0][1] <= 0:
        return None
    ratio = points[-1][1] / points[0][1]
    return ({"first": points[0][1], "last": points[-1][1], "ratio": ratio}
            if ratio > FLAT_RATIO else None)


def fit_diagnosis(curves: Mapping[str, Any]) -> dict[str, Any]:
    """``{"verdict", "text", "evidence"}``: overfitting, underfitting, good fit or unknown."""
    unit, loss = curves.get("unit", "step"), curves.get("loss", "loss")
    val = _finite(curves.get("val_loss") or [])
    if not val:
        return {"verdict": "unknown", "evidence": {},
                "text": "No validation loss was recorded, so the fit cannot be judged."}
    evidence: dict[str, Any] = {}
    gap = loss_gap(curves) if unit != "trees" else None
    if gap is not None:
        evidence["gap"] = gap
    low_i, low = min(val, key=lambda p: p[1])
    rise = (val[-1][1] - low) / low if low > 0 else 0.0
    evidence["val_loss_min"] = {"step": curves["steps"][low_i], "value": low, "rise_after": rise}
    if gap is not None and gap["gap"] > GAP_RATIO:
        return {"verdict": "overfitting", "evidence": evidence, "text": (
            f"Overfitting: at the kept {unit} {gap['step']} the validation {loss} "
            f"({gap['val_loss']:.4g}) is {100 * gap['gap']:.0f}% above the train {loss} "
            f"({gap['train_loss']:.4g}). The model fits the train rows much better than new "
            "rows: regularise (shallower trees, more weight decay or dropout), use more data, "
            "or stop earlier.")}
    if rise > RISE_RATIO and low_i < len(curves["steps"]) - 1:
        return {"verdict": "overfitting", "evidence": evidence, "text": (
            f"Overfitting after {unit} {curves['steps'][low_i]}: the validation {loss} rose "
            f"{100 * rise:.0f}% above its minimum while training went on"
            + (f"; early stopping kept {unit} {curves.get('best_step')}."
               if curves.get("best_step") is not None else "."))}
    flat = flat_loss(curves) if unit != "fit" else None
    if flat is not None:
        evidence["flat_train_loss"] = flat
        return {"verdict": "underfitting", "evidence": evidence, "text": (
            f"Underfitting: the train {loss} barely moved ({flat['first']:.4g} → "
            f"{flat['last']:.4g}). Check the labels, the learning rate and that the "
            "parameters are trainable.")}
    tail = val[-max(2, len(val) // 5):]
    if len(val) >= 5 and tail[0][1] > 0 and (tail[0][1] - tail[-1][1]) / tail[0][1] > STILL_FALLING:
        evidence["still_falling"] = {"from": tail[0][1], "to": tail[-1][1]}
        return {"verdict": "underfitting", "evidence": evidence, "text": (
            f"Underfitting: the validation {loss} was still falling at the last {unit} "
            f"({tail[0][1]:.4g} → {tail[-1][1]:.4g} over the last fifth of the run); more "
            f"{unit}s or a larger model would likely help.")}
    gap_text = (f" The validation {loss} is {100 * gap['gap']:.0f}% above the train {loss}."
                if gap is not None else "")
    return {"verdict": "good fit", "evidence": evidence, "text": (
        f"Good fit: the validation {loss} levelled off without rising.{gap_text}")}


def scorecard_summary(curves: Mapping[str, Any]) -> dict[str, Any]:
    """What the scorecard keeps: unit, loss, metric, the kept step's values and the diagnosis
    (the full series stay in the model's ``learning_curves.json``)."""
    i = _kept_index(curves)
    return {
        "unit": curves.get("unit"), "loss": curves.get("loss"), "metric": curves.get("metric"),
        "steps": len(curves.get("steps") or []), "best_step": curves.get("best_step"),
        "at_best": {s: _at(curves, s, i) for s in ("train_loss", "val_loss", "train_metric",
                                                   "val_metric")},
        "diagnosis": fit_diagnosis(curves), "notes": list(curves.get("notes") or []),
    }


def learning_curves_png(curves: Mapping[str, Any]) -> bytes:
    """Loss (left) and selection metric (right), train and validation, best step marked."""
    fig = _figure(9, 3.6)
    steps = list(curves.get("steps") or [])
    unit = curves.get("unit", "step")
    for n, (kind, label) in enumerate((("loss", curves.get("loss", "loss")),
                                       ("metric", curves.get("metric", "metric")))):
        ax = fig.add_subplot(1, 2, n + 1)
        for split, style in (("train", "--"), ("val", "-")):
            points = _finite(curves.get(f"{split}_{kind}") or [])
            if points:
                ax.plot([steps[i] for i, _ in points], [v for _, v in points], style,
                        marker="o" if len(points) < 3 else None,
                        label="train" if split == "train" else "validation")
        if curves.get("best_step") is not None and unit != "fit":
            ax.axvline(curves["best_step"], color="grey", linewidth=0.8, label="kept")
        ax.set_xlabel(unit)
        ax.set_ylabel(label)
        ax.set_title(f"{label} per {unit}")
        ax.legend(fontsize=8)
    return _png(fig)


def learning_curves_html(summary: Mapping[str, Any] | None) -> str:
    """The scorecard's "Learning curves" section (a note when the model has none)."""
    if not summary:
        return ('<section id="learning-curves"><h2>Learning curves</h2><p class="todo">This '
                "model was registered without learning curves.</p></section>")
    d = summary["diagnosis"]
    return ('<section id="learning-curves"><h2>Learning curves</h2>'
            f'<p class="fit-{html.escape(d["verdict"].replace(" ", "-"))}"><strong>'
            f'{html.escape(d["verdict"].capitalize())}.</strong> {html.escape(d["text"])}</p>'
            + "".join(f"<p>{html.escape(n)}</p>" for n in summary.get("notes", []))
            + "<p>The figure is among the plots.</p></section>")


def learning_curves_markdown(summary: Mapping[str, Any] | None) -> list[str]:
    """Markdown lines of the same section."""
    if not summary:
        return ["", "## Learning curves", "", "_Registered without learning curves._"]
    d = summary["diagnosis"]
    return ["", "## Learning curves", "", f"**{d['verdict'].capitalize()}.** {d['text']}",
            *[f"- {n}" for n in summary.get("notes", [])]]
