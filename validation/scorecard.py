"""The model-validation scorecard: every figure a compliance reviewer needs, in one record.

A :class:`Scorecard` holds plain JSON-serialisable data (the outputs of :mod:`validation.metrics`,
:mod:`validation.bias`, :mod:`validation.explain` and :mod:`validation.gates`), so it is stored in
the model registry as ``scorecard.json`` and read back with :meth:`Scorecard.from_json`. It renders
as Markdown and as ONE self-contained HTML page (inline CSS, PNG figures inlined as base64 data
URIs, no external URL, no JavaScript), read top to bottom: summary and status, gates, metrics
with confidence intervals against the baseline, plots, slice tables per helper column, SHAP
importance, lineage.

Typical assembly in the model-validation pipeline (threshold chosen on validation, applied on
test)::

    choice = choose_threshold(y_val, s_val, "f1")
    metrics = classification_metrics(y_test, s_test, choice.threshold)
    bias = slice_report(y_test, s_test, s_test >= choice.threshold, helpers_test,
                        bands={"age": [25, 45, 65]})
    expl = explain(model, X_test, max_samples=500, seed=seed)
    base = baseline_metrics(y_test, prior=y_train.mean())
    card = Scorecard(name, version, lineage=..., library_versions=library_versions(),
                     metrics=metrics, threshold=choice.to_dict(),
                     confidence_intervals=classification_cis(y_test, s_test, choice.threshold),
                     baselines={"majority_class_prior": base}, bias=bias.to_dict(),
                     explanation=expl.to_dict())
    card.gates = evaluate_gates(config_gates, card.gate_metrics(), baseline=base,
                                previous=previous_best_metrics).to_dict()
    images = standard_plots(y_true=y_test, y_score=s_test, confusion=metrics["confusion_matrix"],
                            threshold=choice.threshold, explanation=expl, bias=bias)
    html = card.to_html(images)
"""

from __future__ import annotations

import base64
import json
import math
import platform
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from importlib import metadata
from typing import Any

from fstrain.kernel.errors import InvalidArgumentError
from fstrain.kernel.timeutil import utc_now_iso
from model_registry.statuses import passed_gates, run_status
from validation.metrics import METRIC_DIRECTIONS, compare_to_baseline
from validation.render import esc, fmt, fmt_delta, html_table, md_table
from validation.bias_tables import bias_html, bias_markdown
from validation.learning_curves import learning_curves_html, learning_curves_markdown
from validation.signoff import signoff_html, signoff_markdown
from validation.gates import failing_gates
from validation.verdicts import gate_basis

SCHEMA_VERSION = 1

#: Packages whose versions a scorecard records by default.
DEFAULT_PACKAGES: tuple[str, ...] = (
    "fstrain", "numpy", "pandas", "scikit-learn", "xgboost-cpu", "xgboost", "lightgbm", "torch", "shap",
    "matplotlib",
)

#: The order plots appear in (others follow, sorted by name), with their captions.
PLOT_CAPTIONS: dict[str, str] = {
    "roc": "ROC curve on the evaluation split",
    "pr": "Precision-recall curve on the evaluation split",
    "confusion_matrix": "Confusion matrix at the chosen threshold",
    "calibration": "Calibration (reliability diagram)",
    "shap_importance": "Global feature importance (mean |SHAP|)",
    "shap_beeswarm": "SHAP values per explained row",
    "attribution_heatmap": "Mean |attribution| per pixel (where the image model looks)",
    "learning_curves": "Learning curves: train and validation loss and selection metric",
}

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def library_versions(packages: Iterable[str] = DEFAULT_PACKAGES) -> dict[str, str]:
    """Installed versions of ``packages`` (those not installed are left out), plus Python's."""
    out = {"python": platform.python_version()}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


@dataclass
class Scorecard:
    """Validation results of one model version.

    Attributes:
        model_name, model_version: the model in the registry.
        task: ``"classification"`` or ``"regression"``.
        evaluation: what was evaluated, e.g. ``{"split": "test", "rows": 9769,
            "training_dataset_version": 3}``.
        lineage: feature view, training-dataset version, per-feature-group commits (passed in).
        library_versions: package → version (see :func:`library_versions`).
        metrics: :func:`~validation.metrics.classification_metrics` /
            :func:`~validation.metrics.regression_metrics` output on the evaluation split.
        confidence_intervals: metric → :func:`~validation.metrics.bootstrap_ci` output.
        threshold: :meth:`~validation.metrics.ThresholdChoice.to_dict` output, or ``None``.
        baselines: baseline name → its metrics (:func:`~validation.metrics.baseline_metrics`).
        bias: :meth:`~validation.bias.BiasReport.to_dict` output, or ``None``.
        explanation: :meth:`~validation.explain.Explanation.to_dict` output, or ``None``.
        gates: :meth:`~validation.gates.GateReport.to_dict` output (each result with its
            ``source``), or ``None``.
        gate_selection: ``{"replaced_defaults": bool, "gates": [{"gate", "source"}]}``.
        policy: the gate policy the run was judged under and how the run differed from it
            (:meth:`validation.policy.GatePlan.to_record`); a deviation marks the status.
        explanation_error: why the explanation failed, or ``None``.
        calibration: :func:`~validation.calibration.calibration_report` output, or ``None``.
        learning_curves: :func:`~validation.learning_curves.scorecard_summary` of the curves
            saved with the model (with the fit diagnosis), or ``None``.
        notes: free-text remarks for the reviewer.
        created_at: ISO-8601 UTC timestamp.
    """

    model_name: str
    model_version: int | str
    task: str = "classification"
    evaluation: dict[str, Any] = field(default_factory=dict)
    lineage: dict[str, Any] = field(default_factory=dict)
    library_versions: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    confidence_intervals: dict[str, dict[str, Any]] = field(default_factory=dict)
    threshold: dict[str, Any] | None = None
    baselines: dict[str, dict[str, Any]] = field(default_factory=dict)
    bias: dict[str, Any] | None = None
    explanation: dict[str, Any] | None = None
    gates: dict[str, Any] | None = None
    gate_selection: dict[str, Any] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)
    explanation_error: str | None = None
    calibration: dict[str, Any] | None = None
    learning_curves: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    created_at: str = field(default_factory=lambda: utc_now_iso("seconds"))

    def __post_init__(self) -> None:
        if self.task not in ("classification", "regression"):
            raise InvalidArgumentError(
                f"task must be 'classification' or 'regression'. Got {self.task!r} instead."
            )
        if not str(self.model_name):
            raise InvalidArgumentError("model_name must not be empty.")

    # ---------------------------------------------------------------- derived figures

    @property
    def status(self) -> str:
        """``"passed"``, ``"failed"``, or ``"no gates"`` when no gate was evaluated; marked
        ``(policy deviation)`` when the run loosened its gate policy (:attr:`policy`)."""
        results = (self.gates or {}).get("results", [])
        judged = [r for r in results if r.get("passed") is not None]
        word = ("no gates" if not judged
                else "passed" if all(r["passed"] for r in judged) else "failed")
        return run_status(word, deviation=bool(self.policy.get("deviation")))

    def baseline_differences(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Baseline name → metric → ``{"model", "baseline", "delta", "better"}``."""
        return {name: compare_to_baseline(self.metrics, b) for name, b in self.baselines.items()}

    def gate_metrics(self) -> dict[str, Any]:
        """Flat metric values for :func:`~validation.gates.evaluate_gates` (metrics + bias)."""
        out = {k: v for k, v in self.metrics.items() if not isinstance(v, dict)}
        out["undefined"] = dict(self.metrics.get("undefined", {}))
        if self.bias:
            out.update(self.bias.get("figures", {}))
        out["explanation_error"] = self.explanation_error
        out["explanation_method"] = (self.explanation or {}).get("method")
        if self.calibration:
            out["ece"] = self.calibration.get("ece")
        return out

    # ---------------------------------------------------------------- serialisation

    def to_dict(self) -> dict[str, Any]:
        """Every figure as a JSON-serialisable dict (with derived ``status`` and differences)."""
        d = asdict(self)
        d["schema_version"] = SCHEMA_VERSION
        d["status"] = self.status
        d["baseline_differences"] = self.baseline_differences()
        return _jsonable(d)

    def to_json(self, *, indent: int | None = 2) -> str:
        """JSON text of :meth:`to_dict` (NaN/inf are written as ``null``)."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scorecard:
        """Rebuild a scorecard from :meth:`to_dict` output (derived keys are recomputed)."""
        version = data.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise InvalidArgumentError(
                f"Scorecard schema_version {version!r} is not supported; this fstrain reads "
                f"version {SCHEMA_VERSION}."
            )
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def from_json(cls, text: str) -> Scorecard:
        """Parse :meth:`to_json` output."""
        return cls.from_dict(json.loads(text))

    # ---------------------------------------------------------------- rendering

    def to_markdown(self, history: Sequence[Mapping[str, Any]] | None = None,
                    run_seq: int | None = None) -> str:
        """The scorecard as Markdown (no images); ``history``, ``run_seq``: see
        :meth:`to_html`."""
        return scorecard_markdown(self.to_dict(), history, run_seq)

    def to_html(self, images: Mapping[str, bytes] | None = None,
                history: Sequence[Mapping[str, Any]] | None = None,
                run_seq: int | None = None) -> str:
        """ONE self-contained HTML page; ``images`` maps plot name → PNG bytes (inlined);
        ``history`` (the version's history records) adds the sign-off block for run
        ``run_seq`` (default: the latest run)."""
        return scorecard_html(self.to_dict(), images or {}, history, run_seq)


def _jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays, tuples and non-finite floats for strict JSON."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _jsonable(value.tolist())
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return str(value)


def png_data_uri(png: bytes, name: str = "image") -> str:
    """``data:image/png;base64,...`` for PNG bytes; anything else is rejected."""
    if not isinstance(png, (bytes, bytearray)) or not bytes(png).startswith(PNG_SIGNATURE):
        raise InvalidArgumentError(
            f"Image {name!r} is not PNG data (missing the PNG signature); render plots with "
            "validation.plots."
        )
    return "data:image/png;base64," + base64.b64encode(bytes(png)).decode("ascii")





# ============================================================================================
# rendering (shared by validation.model_card and validation.report_site)
# ============================================================================================

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;
max-width:1100px;padding:1.5rem;color:#1f2328;line-height:1.45}
h1{margin-bottom:.2rem}h2{border-bottom:1px solid #d0d7de;padding-bottom:.3rem;margin-top:2rem}
table{border-collapse:collapse;margin:.6rem 0 1rem;font-size:.92rem}
th,td{border:1px solid #d0d7de;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:.2rem .7rem;border-radius:1rem;font-weight:600;color:#fff}
.passed,.approved{background:#1a7f37}.failed,.rejected{background:#cf222e}
.passed-policy-deviation,.failed-policy-deviation,.approved-override{background:#9a6700}
.skipped,.no-gates,.not-reviewed,.not-validated{background:#6e7781}
.warning{background:#ffebe9;border-left:4px solid #cf222e;padding:.3rem .6rem}
tr.not-judged td{color:#6e7781;font-style:italic}
figure{display:inline-block;margin:.5rem 1rem 1rem 0;vertical-align:top}
figure img{max-width:100%;border:1px solid #d0d7de}
figcaption{font-size:.85rem;color:#57606a}
.todo{background:#fff8c5;border-left:4px solid #d4a72c;padding:.3rem .6rem}
code,pre{background:#f6f8fa;padding:.1rem .3rem;border-radius:4px}
.owner{background:#f6f8fa;border-left:4px solid #8250df;padding:.3rem .8rem;margin:.5rem 0}
.generated .label,.owner .label{font-size:.8rem;font-weight:600;color:#57606a;margin:.2rem 0}
"""


def badge(status: str) -> str:
    """A coloured status badge (``passed (policy deviation)`` → class
    ``passed-policy-deviation``)."""
    cls = "-".join("".join(c if c.isalnum() else " " for c in status.lower()).split())
    return f'<span class="badge {esc(cls)}">{esc(status.upper())}</span>'


def html_page(title: str, body: str, *, css: str = "") -> str:
    """A complete self-contained HTML document (inline CSS, no scripts, no external URLs);
    ``css`` adds the page's own rules to the shared ones."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{esc(title)}</title>\n<style>{CSS}{css}</style>\n</head>\n<body>\n{body}\n"
        "</body>\n</html>\n"
    )


def _ci_text(ci: Mapping[str, Any] | None) -> str:
    if not ci or ci.get("lower") is None:
        return "n/a"
    level = round((1 - float(ci.get("alpha", 0.05))) * 100)
    return f"[{fmt(ci['lower'])}, {fmt(ci['upper'])}] ({level}%)"


def _metric_rows(card: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    metrics = card.get("metrics", {})
    cis = card.get("confidence_intervals", {})
    diffs = card.get("baseline_differences", {})
    split = (card.get("evaluation") or {}).get("split", "evaluation")
    headers = ["Metric", f"Value ({split} split)", "Confidence interval"]
    for name in diffs:
        headers += [f"Baseline: {name}", "Δ vs baseline"]
    rows = []
    for name in METRIC_DIRECTIONS:
        if name not in metrics:
            continue
        row = [name + (" ↑" if METRIC_DIRECTIONS[name] else " ↓"), fmt(metrics[name]),
               _ci_text(cis.get(name))]
        for bname in diffs:
            d = diffs[bname].get(name)
            if d is None:
                row += ["n/a", "n/a"]
            else:
                verdict = "" if d["better"] is None else (" (better)" if d["better"]
                                                          else " (not better)")
                row += [fmt(d["baseline"]), fmt_delta(d["delta"]) + verdict]
        rows.append(row)
    return headers, rows


GATE_HEADERS = ["Gate", "Source", "Status", "Value", "Condition", "Computed over", "Detail"]


def _gate_rows(card: Mapping[str, Any]) -> list[list[str]]:
    split = (card.get("evaluation") or {}).get("split", "evaluation")
    rows = []
    for r in (card.get("gates") or {}).get("results", []):
        cond = f"{r['op']} {fmt(r['threshold'])}" if r.get("op") else "n/a"
        over = gate_basis(str(r["name"])) or f"the {split} split"
        rows.append([r["name"], r.get("source", "n/a"), r["status"], fmt(r.get("value")), cond,
                     over, r.get("detail", "")])
    return rows


def verdict(card: Mapping[str, Any]) -> str:
    """``PASSED`` or ``FAILED: <every failing gate with its value and threshold>``, followed
    by the policy deviation when there was one."""
    deviation = policy_text(card)
    if passed_gates(card.get("status")):
        return ("PASSED: every acceptance gate that applies passed"
                + ("" if deviation is None else f", but only under a {deviation}"))
    failing = failing_gates(card.get("gates"))
    return "FAILED: " + ("; ".join(failing) if failing else "no acceptance gate was evaluated")


def policy_text(card: Mapping[str, Any]) -> str | None:
    """The policy-deviation warning of a run that loosened its gate policy, else None."""
    return (card.get("policy") or {}).get("warning") or None


def replaced_gates_text(card: Mapping[str, Any]) -> str | None:
    """The warning shown when the default gates were replaced, else None."""
    if not (card.get("gate_selection") or {}).get("replaced_defaults"):
        return None
    return ("The default acceptance gates (the use case's and fstrain's standard gates) were "
            "REPLACED for this run (--replace-gates): only the gates listed below were applied.")


TOP_K = 15


def explanation_table(ex: Mapping[str, Any]) -> tuple[list[str], list[list[Any]], str]:
    """The top-k features of an explanation as a reader knows them: per original column (the
    encoded categories summed) when the scorecard has that grouping, else the top non-zero
    features; plus a note on what is left out."""
    split = ex.get("split", "test")
    groups = ex.get("by_column")
    if groups:
        rows = [[i + 1, g["column"], fmt(g["mean_abs_shap"]),
                 ", ".join(f"{t['feature']} ({fmt(t['mean_abs_shap'])})"
                           for t in g.get("top_features", []))]
                for i, g in enumerate(groups[:TOP_K])]
        return (["Rank", "Column", f"Mean |SHAP| ({split} split)", "Strongest categories"],
                rows, "Encoded features (one-hot categories) are summed per original column.")
    imp = ex.get("global_importance", [])
    shown = [g for g in imp if g["mean_abs_shap"] > 0][:TOP_K]
    rows = [[i + 1, g["feature"], fmt(g["mean_abs_shap"])] for i, g in enumerate(shown)]
    left = len(imp) - len(shown)
    return (["Rank", "Feature", f"Mean |SHAP| ({split} split)"], rows,
            f"{left} further features (with zero or smaller attribution) are not listed."
            if left else "")


def _summary_rows(card: Mapping[str, Any]) -> list[list[str]]:
    rows = [["Model", card["model_name"]], ["Version", str(card["model_version"])],
            ["Task", card["task"]], ["Status", card["status"]], ["Verdict", verdict(card)]]
    if (card.get("policy") or {}).get("summary"):
        rows.append(["Gate policy", card["policy"]["summary"]])
    gates = (card.get("gates") or {}).get("results", [])
    if gates:
        counts = {s: sum(1 for r in gates if r["status"] == s)
                  for s in ("passed", "failed", "skipped")}
        rows.append(["Gates", f"{counts['passed']} passed, {counts['failed']} failed, "
                              f"{counts['skipped']} skipped of {len(gates)}"])
    for k, v in card.get("evaluation", {}).items():
        rows.append([f"Evaluation: {k}", fmt(v) if not isinstance(v, str) else v])
    t = card.get("threshold")
    if t:
        rows.append(["Decision threshold", f"{fmt(t['threshold'])} ({t.get('detail', '')})"])
    rows.append(["Scorecard created (UTC)", card.get("created_at", "")])
    return rows


def _flatten(prefix: str, value: Any) -> list[list[str]]:
    if isinstance(value, Mapping) and value:
        out: list[list[str]] = []
        for k, v in value.items():
            out += _flatten(f"{prefix}.{k}" if prefix else str(k), v)
        return out
    if isinstance(value, list):
        return [[prefix, ", ".join(str(v) for v in value) if value else "(none)"]]
    return [[prefix, "(none)" if value is None or value == {} else fmt(value)
             if not isinstance(value, str) else value]]


def _plot_order(images: Mapping[str, bytes]) -> list[str]:
    known = [k for k in PLOT_CAPTIONS if k in images]
    return known + sorted(k for k in images if k not in PLOT_CAPTIONS)


def plot_caption(name: str) -> str:
    """Caption of a named plot (``slices_<column>`` → "Slice metrics by <column>")."""
    if name in PLOT_CAPTIONS:
        return PLOT_CAPTIONS[name]
    if name.startswith("slices_"):
        return f"Slice metrics by {name[len('slices_'):]}"
    return name.replace("_", " ")


def figures_html(images: Mapping[str, bytes]) -> str:
    """``<figure>`` elements with inlined PNGs, in the standard plot order."""
    parts = []
    for name in _plot_order(images):
        uri = png_data_uri(images[name], name)
        cap = plot_caption(name)
        parts.append(f'<figure id="plot-{esc(name)}"><img src="{uri}" alt="{esc(cap)}">'
                     f"<figcaption>{esc(cap)}</figcaption></figure>")
    return "\n".join(parts)


def header_html(card: Mapping[str, Any]) -> str:
    """The page's header: title, the status badge (a policy deviation in the status itself,
    with its changes), and the summary table."""
    title = f"Scorecard: {card['model_name']} v{card['model_version']}"
    out = [f"<header><h1>{esc(title)}</h1><p>{badge(card['status'])}</p>"]
    if policy_text(card):
        out.append(f'<p class="warning" id="policy-deviation">{esc(policy_text(card))}</p>')
    return "\n".join([*out, html_table(["Item", "Value"], _summary_rows(card)), "</header>"])


def scorecard_html(card: Mapping[str, Any], images: Mapping[str, bytes],
                   history: Sequence[Mapping[str, Any]] | None = None,
                   run_seq: int | None = None) -> str:
    """Render a scorecard dict (:meth:`Scorecard.to_dict`) as one self-contained HTML page;
    with ``history`` (the version's records) it carries the sign-off block."""
    title = f"Scorecard: {card['model_name']} v{card['model_version']}"
    out = [header_html(card)]
    if history is not None:
        out.append(signoff_html(history, run_seq))

    out.append('<section id="gates"><h2>Acceptance gates</h2>')
    gate_rows = _gate_rows(card)
    replaced = replaced_gates_text(card)
    if replaced:
        out.append(f'<p class="warning" id="gates-replaced">{esc(replaced)}</p>')
    if gate_rows:
        attrs = [f'class="{esc(r[2])}-row"' for r in gate_rows]
        out.append(html_table(GATE_HEADERS, gate_rows, row_attrs=attrs, numeric=[3]))
        out.append("<p>Overall status passes when every gate that is not skipped passes; a gate "
                   "whose metric is undefined fails.</p>")
    else:
        out.append('<p class="todo">No acceptance gates were configured for this model.</p>')
    out.append("</section>")

    out.append('<section id="metrics"><h2>Performance</h2>')
    headers, rows = _metric_rows(card)
    out.append(html_table(headers, rows, numeric=[1]))
    out.append("<p>↑ higher is better, ↓ lower is better. Intervals are percentile bootstrap "
               "intervals over evaluation rows.</p>")
    warning = (card.get("threshold") or {}).get("warning")
    if warning:
        out.append(f'<p class="warning" id="threshold-rows">{esc(warning)}</p>')
    cm = card.get("metrics", {}).get("confusion_matrix")
    if cm:
        out.append("<h3>Confusion matrix at the decision threshold</h3>")
        out.append(html_table(["", "Predicted 0", "Predicted 1"],
                              [["Actual 0", fmt(cm["tn"]), fmt(cm["fp"])],
                               ["Actual 1", fmt(cm["fn"]), fmt(cm["tp"])]], numeric=[1, 2]))
    undefined = card.get("metrics", {}).get("undefined") or {}
    if undefined:
        out.append("<h3>Undefined metrics</h3>")
        out.append(html_table(["Metric", "Reason"], [[k, v] for k, v in undefined.items()]))
    out.append("</section>")

    out.append(calibration_html(card.get("calibration")))
    out.append(learning_curves_html(card.get("learning_curves")))
    if images:
        out.append(f'<section id="plots"><h2>Plots</h2>{figures_html(images)}</section>')

    out.append(bias_html(card.get("bias"), card.get("gates")))

    out.append('<section id="explainability"><h2>Explainability (SHAP)</h2>')
    ex = card.get("explanation")
    if ex:
        out.append(f"<p>Method: {esc(ex['method'])}; explained output: {esc(ex['output'])}; "
                   f"{esc(ex['n_rows'])} rows explained; expected value "
                   f"{esc(fmt(ex['expected_value']))}.{(' ' + esc(ex['note'])) if ex.get('note') else ''}</p>")
        headers, rows, note = explanation_table(ex)
        out.append(html_table(headers, rows, numeric=[0, 2]))
        if note:
            out.append(f"<p>{esc(note)}</p>")
    elif card.get("explanation_error"):
        out.append('<p class="warning" id="explanation-failed"><strong>Explanation FAILED:'
                   f"</strong> {esc(card['explanation_error'])}</p>")
    else:
        out.append('<p class="todo">No explanation was computed.</p>')
    out.append("</section>")

    out.append('<section id="lineage"><h2>Lineage</h2>')
    out.append(html_table(["Item", "Value"], _flatten("", card.get("lineage", {}))))
    out.append("<h3>Library versions</h3>")
    out.append(html_table(["Package", "Version"],
                          [[k, v] for k, v in card.get("library_versions", {}).items()]))
    out.append("</section>")
    if card.get("notes"):
        out.append('<section id="notes"><h2>Notes</h2><ul>'
                   + "".join(f"<li>{esc(n)}</li>" for n in card["notes"]) + "</ul></section>")
    return html_page(title, "\n".join(out))


def calibration_rows(cal: Mapping[str, Any]) -> list[list[str]]:
    """Model vs constant predictor on Brier score and log-loss, plus the ECE."""
    rows = []
    for m in ("brier", "log_loss"):
        worse = m in cal.get("worse_than_constant", [])
        rows.append([f"{m} ↓", fmt(cal[m]), fmt(cal[f"{m}_constant"]),
                     "WORSE than the constant predictor" if worse else "better"])
    rows.append(["expected calibration error (ECE) ↓", fmt(cal["ece"]), "n/a",
                 f"{cal['n_bins']} equal-width bins"])
    return rows


def calibration_html(cal: Mapping[str, Any] | None) -> str:
    """The calibration section (empty when the model has no probabilities)."""
    if not cal:
        return ""
    split = cal.get("split", "test")
    return ('<section id="calibration"><h2>Calibration</h2>'
            + html_table([f"Metric ({split} split)", "Model",
                          f"Constant predictor (p = {fmt(cal['constant_prior'])})", "Verdict"],
                         calibration_rows(cal), numeric=[1, 2])
            + "<p>The constant predictor scores every row with the training split's positive "
              "rate; a model worse than it on Brier score or log-loss fails the standard "
              "gates. The reliability diagram is among the plots.</p></section>")


def scorecard_markdown(card: Mapping[str, Any],
                       history: Sequence[Mapping[str, Any]] | None = None,
                       run_seq: int | None = None) -> str:
    """Render a scorecard dict (:meth:`Scorecard.to_dict`) as Markdown."""
    out = [f"# Scorecard: {card['model_name']} v{card['model_version']}", "",
           f"**Status: {card['status'].upper()}**", "",
           *([f"**WARNING:** {policy_text(card)}", ""] if policy_text(card) else []),
           md_table(["Item", "Value"], _summary_rows(card))]
    if history is not None:
        out += signoff_markdown(history, run_seq)
    out += ["", "## Acceptance gates", ""]
    gate_rows = _gate_rows(card)
    if replaced_gates_text(card):
        out += [f"**WARNING:** {replaced_gates_text(card)}", ""]
    out.append(md_table(GATE_HEADERS, gate_rows)
               if gate_rows else "_No acceptance gates were configured._")
    out += ["", "## Performance", ""]
    headers, rows = _metric_rows(card)
    out.append(md_table(headers, rows))
    warning = (card.get("threshold") or {}).get("warning")
    if warning:
        out += ["", f"**WARNING:** {warning}"]
    cm = card.get("metrics", {}).get("confusion_matrix")
    if cm:
        out += ["", "Confusion matrix at the decision threshold:", "",
                md_table(["", "Predicted 0", "Predicted 1"],
                         [["Actual 0", fmt(cm["tn"]), fmt(cm["fp"])],
                          ["Actual 1", fmt(cm["fn"]), fmt(cm["tp"])]])]
    undefined = card.get("metrics", {}).get("undefined") or {}
    if undefined:
        out += ["", "Undefined metrics:", ""] + [f"- `{k}`: {v}" for k, v in undefined.items()]
    out += learning_curves_markdown(card.get("learning_curves"))
    out += bias_markdown(card.get("bias"), card.get("gates"))
    out += ["", "## Explainability (SHAP)", ""]
    ex = card.get("explanation")
    if ex:
        out.append(f"Method: {ex['method']}; explained output: {ex['output']}; "
                   f"{ex['n_rows']} rows explained.")
        headers, rows, note = explanation_table(ex)
        out += ["", md_table(headers, rows)] + (["", note] if note else [])
    elif card.get("explanation_error"):
        out.append(f"**Explanation FAILED:** {card['explanation_error']}")
    else:
        out.append("_No explanation was computed._")
    out += ["", "## Lineage", "", md_table(["Item", "Value"], _flatten("", card.get("lineage", {}))),
            "", "### Library versions", "",
            md_table(["Package", "Version"], list(card.get("library_versions", {}).items()))]
    if card.get("notes"):
        out += ["", "## Notes", ""] + [f"- {n}" for n in card["notes"]]
    return "\n".join(out) + "\n"
