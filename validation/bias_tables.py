"""The bias section of a scorecard: per helper column, its slice table and its disparity table.

Every slice says why it was or was not judged, against the minimums; its rates carry exact
intervals. Every disparity figure is shown over the judged slices and over all groups, each
with its bootstrap interval and the slices at its extremes; its verdicts are those of the
acceptance gates that name it (:mod:`validation.verdicts`), never a limit of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from validation.fairness import DISPARITY_FIGURES
from validation.render import esc, fmt, html_table, md_table, with_interval
from validation.verdicts import disparity_verdicts, verdict_word, verdicts_by_figure

SLICE_HEADERS = ["Slice", "Rows", "Positives", "Negatives", "Base rate",
                 "Selection rate [95% CI]", "TPR [95% CI]", "FPR [95% CI]", "Precision", "AUC",
                 "Judged", "Why", "Note"]
JUDGED = SLICE_HEADERS.index("Judged")
DISPARITY_HEADERS = ["Disparity", "Judged slices", "95% CI", "Between (judged)",
                     "All groups", "95% CI", "Between (all groups)", "Gate", "Verdict"]


def _judging(bias: Mapping[str, Any], s: Mapping[str, Any], negatives: int) -> str:
    """The slice's own reason, or (a scorecard written before slices carried one) the same
    reason rebuilt from its counts and the report's minimums."""
    if s.get("judging"):
        return str(s["judging"])
    checks = [(s["size"], bias.get("min_slice_size", 0), "rows"),
              (s["positives"], bias.get("min_positives", 0), "positives"),
              (negatives, bias.get("min_negatives", 0), "negatives")]
    short = [f"{have} {what} < {need}" for have, need, what in checks if have < need]
    if short:
        return "skipped: " + ", ".join(short)
    return "judged: " + ", ".join(f"{have} {what} >= {need}" for have, need, what in checks)


def slice_rows(bias: Mapping[str, Any], column: str) -> list[list[str]]:
    """Rows of the slice table of one helper column (rates with their intervals)."""
    rows = []
    for s in bias.get("slices", []):
        if s["column"] != column:
            continue
        ci = s.get("intervals") or {}
        negatives = s.get("negatives")
        if negatives is None:
            negatives = s["size"] - s["positives"]
        rows.append([s["value"], fmt(s["size"]), fmt(s["positives"]), fmt(negatives),
                     fmt(s["base_rate"]),
                     *(with_interval(s[r], ci.get(r)) for r in ("selection_rate", "tpr", "fpr")),
                     fmt(s["precision"]), fmt(s["auc"]), fmt(s["judged"]),
                     _judging(bias, s, negatives), s.get("note", "")])
    return rows


def _ci(interval: Any) -> str:
    return f"[{fmt(interval[0])}, {fmt(interval[1])}]" if interval else "n/a"


def _between(extremes: Mapping[str, Any], notes: Mapping[str, Any], fig: str) -> str:
    ext = extremes.get(fig)
    return f"max {ext[0]} vs min {ext[1]}" if ext else str(notes.get(fig, ""))


def _gate_cells(verdicts: list[dict[str, Any]], fig: str) -> tuple[str, str]:
    """The gates judging one figure (with what each computes over) and their verdicts."""
    gates, words = [], []
    for basis in ("judged slices", "all groups"):
        for v in verdicts_by_figure(verdicts, fig, basis):
            gates.append(f"{v['gate']} (over {basis})")
            words.append(verdict_word(v["passed"]))
    if not gates:
        return "no gate", "not judged (no gate names this figure)"
    return "; ".join(gates), "; ".join(words)


def disparity_rows(d: Mapping[str, Any], gates: Mapping[str, Any] | None) -> list[list[str]]:
    """One row per figure: over judged slices and over all groups, and the gates' verdicts."""
    verdicts = disparity_verdicts(d, gates)
    every = d.get("all_groups") or {}
    rows = []
    for fig in DISPARITY_FIGURES:
        if fig not in d:
            continue
        gate, verdict = _gate_cells(verdicts, fig)
        rows.append([fig, fmt(d.get(fig)), _ci((d.get("intervals") or {}).get(fig)),
                     _between(d.get("extremes") or {}, d.get("notes") or {}, fig),
                     fmt(every.get(fig)) if every else "n/a",
                     _ci((d.get("all_groups_intervals") or {}).get(fig)),
                     _between(d.get("all_groups_extremes") or {}, {}, fig), gate, verdict])
    return rows


def judging_text(bias: Mapping[str, Any]) -> str:
    """How slices are judged and figures computed (shown above the slice tables)."""
    rates = bias.get("rate_intervals") or "percentile-bootstrap intervals over the test rows"
    return (f"A slice is judged only with at least {bias['min_slice_size']} rows, "
            f"{bias.get('min_positives', 0)} positives and {bias.get('min_negatives', 0)} "
            "negatives; the Why column gives each slice's counts against these minimums. "
            f"Slice rates carry {rates}. Each disparity is shown over the judged slices and "
            "over all groups (every slice with a row, as Fairlearn counts groups: leaving small "
            "groups out can hide the worst one), with 95% percentile-bootstrap intervals over "
            "the test rows. The verdicts are the acceptance gates' (one source of limits); a "
            "gate names the figure it reads, over judged slices or all groups.")


def bias_html(bias: Mapping[str, Any] | None, gates: Mapping[str, Any] | None) -> str:
    """The bias section: per column, the slice table and the disparity table."""
    out = ['<section id="bias"><h2>Bias evaluation on helper-column slices</h2>']
    if bias:
        out.append(f"<p>{esc(judging_text(bias))}</p>")
        for d in bias.get("disparities", []):
            col = d["column"]
            out.append(f'<h3 id="slices-{esc(col)}">Helper column <code>{esc(col)}</code></h3>')
            srows = slice_rows(bias, col)
            attrs = [
                f'class="slice-row{"" if r[JUDGED] == "yes" else " not-judged"}" '
                f'data-column="{esc(col)}" data-slice="{esc(r[0])}"' for r in srows
            ]
            out.append(html_table(SLICE_HEADERS, srows, row_attrs=attrs,
                                  numeric=list(range(1, 10))))
            drows = disparity_rows(d, gates)
            dattrs = [f'class="disparity-row" data-column="{esc(col)}" data-figure="{esc(r[0])}"'
                      for r in drows]
            out.append(html_table(DISPARITY_HEADERS, drows, row_attrs=dattrs, numeric=[1, 4]))
    else:
        out.append('<p class="todo">No bias evaluation was run (no helper columns).</p>')
    out.append("</section>")
    return "\n".join(out)


def bias_markdown(bias: Mapping[str, Any] | None, gates: Mapping[str, Any] | None) -> list[str]:
    """The bias section as Markdown lines."""
    out = ["", "## Bias evaluation on helper-column slices", ""]
    if not bias:
        return out + ["_No bias evaluation was run._"]
    out.append(judging_text(bias))
    for d in bias.get("disparities", []):
        out += ["", f"### Helper column `{d['column']}`", "",
                md_table(SLICE_HEADERS, slice_rows(bias, d["column"])), "",
                md_table(DISPARITY_HEADERS, disparity_rows(d, gates))]
    return out
