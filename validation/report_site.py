"""The registry's static report site and scorecard diffs.

* :func:`render_index` writes ``index.html``: every model and version with its validation status,
  key metrics and a *relative* link to that version's ``scorecard.html`` — the site can be
  copied anywhere (or opened from disk) and its links still work.
* :func:`diff_scorecards` / :func:`diff_to_markdown` compare two scorecards (metrics, gates,
  slice figures, disparities, features, lineage) for ``fstrain registry diff NAME:V1 NAME:V2``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from fstrain.kernel.errors import InvalidArgumentError
from model_registry.statuses import approval_word
from validation.metrics import METRIC_DIRECTIONS
from validation.scorecard import (
    badge,
    esc,
    fmt,
    fmt_delta,
    html_page,
    md_table,
)

#: Metrics shown on the index page when at least one model has them.
KEY_METRICS: tuple[str, ...] = (
    "roc_auc", "pr_auc", "f1", "accuracy", "rmse", "r2", "max_abs_dp_difference",
)
#: Per-slice figures compared by :func:`diff_scorecards`.
SLICE_FIGURES: tuple[str, ...] = ("size", "selection_rate", "tpr", "fpr", "precision", "auc")
_DISPARITIES = ("demographic_parity_difference", "equal_opportunity_difference", "auc_gap")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _version_key(v: Any) -> tuple[int, Any]:
    try:
        return (0, int(v))
    except (TypeError, ValueError):
        return (1, str(v))


def _flat_metrics(card: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in (card.get("metrics") or {}).items() if not isinstance(v, dict)}
    bias = card.get("bias") or {}
    out.update(bias.get("figures", {}))
    return out


def _normalise(entry: Mapping[str, Any]) -> dict[str, Any]:
    if "model_name" in entry:  # a scorecard dict
        name, version = entry["model_name"], entry["model_version"]
        metrics = _flat_metrics(entry)
        status = entry.get("status", "no gates")
        created = entry.get("created_at", "")
    else:
        try:
            name, version = entry["name"], entry["version"]
        except KeyError as exc:
            raise InvalidArgumentError(
                f"Each model entry needs 'name' and 'version' (or be a scorecard dict). "
                f"Got keys {sorted(entry)} instead."
            ) from exc
        metrics = dict(entry.get("metrics") or {})
        status = entry.get("status", "no gates")
        created = entry.get("created_at", "")
    href = entry.get("href", _DEFAULT) if "href" in entry else _DEFAULT
    if href is _DEFAULT:
        href = f"{quote(str(name), safe='')}/{quote(str(version), safe='')}/scorecard.html"
    for link in [href, *(h.get("href") for h in entry.get("history") or [])]:
        if link is not None and (_SCHEME.match(link) or link.startswith(("/", "\\"))):
            raise InvalidArgumentError(
                f"Link {link!r} for {name} v{version} must be relative to index.html (no "
                "scheme, no leading slash) so the site can be moved."
            )
    return {"name": str(name), "version": version, "status": str(status), "metrics": metrics,
            "created_at": str(created), "href": href,
            "approval": str(entry.get("approval", "not reviewed")),
            "history": list(entry.get("history") or [])}


_DEFAULT: Any = object()
#: The index's own rules: the page may be as wide as the window allows (a registry with many
#: metric columns fits 1400 px), and the status column stays in view when a wide table is
#: scrolled sideways (sticky at the table's left edge).
INDEX_CSS = """
body{max-width:min(96vw,1500px)}
.versions{overflow-x:auto}
.versions th.status-col,.versions td.status-col{position:sticky;left:0;z-index:1;
box-shadow:2px 0 0 #d0d7de}
.versions td.status-col{background:#fff}
"""


def _history_html(e: Mapping[str, Any]) -> str:
    """The version's append-only history as a list (validation runs link their scorecards)."""
    if not e["history"]:
        return ""
    items = []
    for h in e["history"]:
        when = esc(str(h.get("created") or "")[:19].replace("T", " "))
        signer = h.get("signer")
        who = (esc(f"signed by {signer.get('person')} ({signer.get('role')}, "
                   f"{signer.get('fingerprint')})") if signer
               else esc(f"{h.get('user') or ''}, unsigned"))
        if h["kind"] == "creation":
            text = f"created (trained by {esc(h.get('trained_by') or h.get('user'))})"
        elif h["kind"] == "validation":
            failing = h.get("failing_gates") or []
            deviation = h.get("policy_deviation") or []
            text = (f"run {esc(h['seq'])}: {esc(str(h.get('status', '')).upper())}"
                    + (f" — failing: {esc('; '.join(failing))}" if failing else "")
                    + (f" — policy deviation: {esc('; '.join(deviation))}" if deviation else ""))
            if h.get("href"):
                text = f'<a href="{esc(h["href"])}">{text}</a>'
        else:
            word = approval_word(h)
            text = (f"{esc(word)} by {esc(h.get('reviewer'))} (run {esc(h.get('validation_seq'))})"
                    f": {esc(h.get('note'))}")
            if h.get("override_reason"):
                text += f" — override: {esc(h['override_reason'])}"
        items.append(f'<li class="history-{esc(h["kind"])}">{text} <small>{when} UTC, '
                     f"{who}</small></li>")
    return f'<ol class="history">{"".join(items)}</ol>'


def render_index(models: Sequence[Mapping[str, Any]], *, title: str = "Model registry") -> str:
    """The ``index.html`` of the report site.

    Args:
        models: one entry per model version: a scorecard dict (``Scorecard.to_dict()``), or
            ``{"name", "version", "status", "metrics", "created_at"?, "href"?}``. ``href``
            defaults to ``<name>/<version>/scorecard.html`` and must be relative.
        title: page title.

    Returns:
        A self-contained HTML page: one table per model, newest version first.
    """
    entries = [_normalise(m) for m in models]
    shown = [m for m in KEY_METRICS if any(e["metrics"].get(m) is not None for e in entries)]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        by_name.setdefault(e["name"], []).append(e)
    out = [f"<h1>{esc(title)}</h1>",
           f"<p>{len(by_name)} models, {len(entries)} versions. Status comes from each "
           "version's latest validation run (its acceptance gates; a run that loosened its gate "
           "policy reads POLICY DEVIATION); approval from the newest reviewer sign-off given on "
           "that run (APPROVED (OVERRIDE) when given with --override). Metrics are measured on the held-out test "
           "split. Every run and sign-off is kept in the version's append-only history.</p>"]
    if not entries:
        out.append("<p>No model versions are registered yet.</p>")
    for name in sorted(by_name):
        versions = sorted(by_name[name], key=lambda e: _version_key(e["version"]), reverse=True)
        out.append(f'<section id="model-{esc(name)}"><h2>{esc(name)}</h2>')
        head = "".join(f'<th class="status-col">{esc(h)}</th>' if h == "Status"
                       else f"<th>{esc(h)}</th>" for h in [
            "Version", "Status", "Approval", *(f"{m} (test split)" for m in shown), "Created",
            "Scorecard"])
        rows = []
        for e in versions:
            cells = [f"<td>{esc(e['version'])}</td>",
                     f'<td class="status-col">{badge(e["status"])}</td>',
                     f"<td>{badge(e['approval'])}</td>"]
            cells += [f'<td class="num">{esc(fmt(e["metrics"].get(m)))}</td>' for m in shown]
            cells.append(f"<td>{esc(e['created_at'])}</td>")
            cells.append(f'<td><a href="{esc(e["href"])}">latest scorecard</a></td>'
                         if e["href"] else "<td>not validated</td>")
            rows.append(f'<tr class="version-row" data-model="{esc(name)}" '
                        f'data-version="{esc(e["version"])}">{"".join(cells)}</tr>')

        out.append(f'<div class="versions"><table><thead><tr>{head}</tr></thead>'
                   f"<tbody>{''.join(rows)}</tbody></table></div>")
        out += [f'<div class="history" id="history-{esc(name)}-{esc(e["version"])}"><h3>History '
                f"of v{esc(e['version'])} (append-only)</h3>{_history_html(e)}</div>"
                for e in versions if e["history"]]
        out.append("</section>")
    return html_page(title, "\n".join(out), css=INDEX_CSS)


# --------------------------------------------------------------------------------------------
# diff
# --------------------------------------------------------------------------------------------

def _delta(a: Any, b: Any) -> float | None:
    if isinstance(a, bool) or isinstance(b, bool):
        return None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(b) - float(a)
    return None


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value
    return out


def diff_scorecards(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Compare scorecard ``a`` (older) with ``b`` (newer); every delta is b − a.

    Returns:
        ``{"a", "b", "status", "threshold", "metrics", "gates", "disparities", "slices",
        "features", "lineage"}``; ``metrics`` rows carry ``improved`` (the direction of the
        point estimates' difference, by metric direction: not a verdict, which needs the paired
        interval of :mod:`validation.compare`),
        ``gates`` rows ``changed``, ``slices`` rows the slice figures of slices in either card.
    """
    def ident(c: Mapping[str, Any]) -> dict[str, Any]:
        return {"model_name": c.get("model_name"), "model_version": c.get("model_version"),
                "status": c.get("status"), "created_at": c.get("created_at")}

    la = _flatten("", a.get("lineage") or {}, {})
    lb = _flatten("", b.get("lineage") or {}, {})
    lineage = [{"key": k, "a": la.get(k), "b": lb.get(k)}
               for k in [*la, *(k for k in lb if k not in la)] if la.get(k) != lb.get(k)]
    ta, tb = (a.get("threshold") or {}), (b.get("threshold") or {})
    return {
        "a": ident(a), "b": ident(b),
        "status": {"a": a.get("status"), "b": b.get("status"),
                   "changed": a.get("status") != b.get("status")},
        "threshold": {"a": ta.get("threshold"), "b": tb.get("threshold"),
                      "a_strategy": ta.get("strategy"), "b_strategy": tb.get("strategy"),
                      "delta": _delta(ta.get("threshold"), tb.get("threshold"))},
        "metrics": _diff_metrics(a, b), "gates": _diff_gates(a, b),
        "disparities": _diff_disparities(a, b), "slices": _diff_slices(a, b),
        "features": _diff_features(a, b), "lineage": lineage,
    }


def _union(first: Mapping[Any, Any], second: Mapping[Any, Any]) -> list[Any]:
    """The keys of ``first``, then those only in ``second``, in their orders."""
    return [*first, *(k for k in second if k not in first)]


def _diff_metrics(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    ma, mb = _flat_metrics(a), _flat_metrics(b)
    metrics = []
    for name in [*METRIC_DIRECTIONS, *sorted((set(ma) | set(mb)) - set(METRIC_DIRECTIONS))]:
        if name not in ma and name not in mb:
            continue
        if name in ("n", "positives", "negatives", "threshold") or "[" in name:
            continue
        va, vb = ma.get(name), mb.get(name)
        d = _delta(va, vb)
        higher = METRIC_DIRECTIONS.get(name, False if "difference" in name or "gap" in name
                                       else None)
        improved = None if d is None or higher is None or d == 0 else (d > 0) == higher
        metrics.append({"metric": name, "a": va, "b": vb, "delta": d, "improved": improved})
    return metrics


def _diff_gates(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    ga = {r["name"]: r for r in (a.get("gates") or {}).get("results", [])}
    gb = {r["name"]: r for r in (b.get("gates") or {}).get("results", [])}
    gates = []
    for name in _union(ga, gb):
        ra, rb = ga.get(name, {}), gb.get(name, {})
        sa, sb = ra.get("status", "absent"), rb.get("status", "absent")
        gates.append({"gate": name, "a_status": sa, "b_status": sb, "a_value": ra.get("value"),
                      "b_value": rb.get("value"), "delta": _delta(ra.get("value"),
                                                                 rb.get("value")),
                      "changed": sa != sb})
    return gates


def _diff_disparities(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    da = {d["column"]: d for d in (a.get("bias") or {}).get("disparities", [])}
    db = {d["column"]: d for d in (b.get("bias") or {}).get("disparities", [])}
    disparities = []
    for col in _union(da, db):
        for fig in _DISPARITIES:
            va, vb = da.get(col, {}).get(fig), db.get(col, {}).get(fig)
            disparities.append({"column": col, "figure": fig, "a": va, "b": vb,
                                "delta": _delta(va, vb)})
    return disparities


def _diff_slices(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    sa = {(s["column"], s["value"]): s for s in (a.get("bias") or {}).get("slices", [])}
    sb = {(s["column"], s["value"]): s for s in (b.get("bias") or {}).get("slices", [])}
    slices = []
    for key in _union(sa, sb):
        x, y = sa.get(key, {}), sb.get(key, {})
        row: dict[str, Any] = {"column": key[0], "slice": key[1],
                               "a_judged": x.get("judged"), "b_judged": y.get("judged")}
        for fig in SLICE_FIGURES:
            row[fig] = {"a": x.get(fig), "b": y.get(fig), "delta": _delta(x.get(fig), y.get(fig))}
        slices.append(row)
    return slices


def _diff_features(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    ia = {g["feature"]: g["mean_abs_shap"]
          for g in (a.get("explanation") or {}).get("global_importance", [])}
    ib = {g["feature"]: g["mean_abs_shap"]
          for g in (b.get("explanation") or {}).get("global_importance", [])}
    rank_a = {f: i + 1 for i, f in enumerate(ia)}
    rank_b = {f: i + 1 for i, f in enumerate(ib)}
    importance = [
        {"feature": f, "a": ia.get(f), "b": ib.get(f), "delta": _delta(ia.get(f), ib.get(f)),
         "rank_a": rank_a.get(f), "rank_b": rank_b.get(f)}
        for f in _union(ia, ib)
    ]
    return {"only_in_a": [f for f in ia if f not in ib],
            "only_in_b": [f for f in ib if f not in ia],
            "common": [f for f in ia if f in ib], "importance": importance}


def diff_to_markdown(diff: Mapping[str, Any], verdicts: Mapping[str, str] | None = None) -> str:
    """Render :func:`diff_scorecards` output as Markdown (A = first, B = second scorecard).

    A metric is called better or worse only through ``verdicts`` (metric → verdict of the
    paired comparison on shared test rows, :func:`validation.compare.verdicts`): two
    scorecards' point estimates alone give none."""
    verdicts = verdicts or {}
    a, b = diff["a"], diff["b"]
    la = f"{a['model_name']} v{a['model_version']}"
    lb = f"{b['model_name']} v{b['model_version']}"
    out = [f"# Scorecard diff: {la} → {lb}", "",
           f"- **Status:** {a['status']} → {b['status']}"
           + (" (changed)" if diff["status"]["changed"] else ""),
           f"- **Threshold:** {fmt(diff['threshold']['a'])} ({diff['threshold']['a_strategy']})"
           f" → {fmt(diff['threshold']['b'])} ({diff['threshold']['b_strategy']})", "",
           "## Metrics", "",
           md_table(["Metric", la, lb, "Δ (B − A)", "Verdict (paired interval)"],
                    [[m["metric"], fmt(m["a"]), fmt(m["b"]), fmt_delta(m["delta"]),
                      verdicts.get(m["metric"], "none (no paired interval)")]
                     for m in diff["metrics"]]),
           "", "## Gates", ""]
    out.append(md_table(["Gate", la, lb, "Value A", "Value B", "Δ"],
                        [[g["gate"], g["a_status"], g["b_status"], fmt(g["a_value"]),
                          fmt(g["b_value"]), fmt_delta(g["delta"])] for g in diff["gates"]])
               if diff["gates"] else "_No gates in either scorecard._")
    out += ["", "## Disparities", ""]
    out.append(md_table(["Column", "Figure", la, lb, "Δ"],
                        [[d["column"], d["figure"], fmt(d["a"]), fmt(d["b"]),
                          fmt_delta(d["delta"])] for d in diff["disparities"]])
               if diff["disparities"] else "_No bias evaluation in either scorecard._")
    if diff["slices"]:
        out += ["", "## Slices", "",
                md_table(["Column", "Slice", "Judged A/B",
                          *[f"{f} A→B (Δ)" for f in SLICE_FIGURES]],
                         [[s["column"], s["slice"], f"{fmt(s['a_judged'])}/{fmt(s['b_judged'])}",
                           *[f"{fmt(s[f]['a'])} → {fmt(s[f]['b'])} ({fmt_delta(s[f]['delta'])})"
                             for f in SLICE_FIGURES]] for s in diff["slices"]])]
    feats = diff["features"]
    out += ["", "## Features (SHAP importance)", ""]
    if feats["only_in_a"] or feats["only_in_b"]:
        out.append(f"- Only in {la}: {', '.join(feats['only_in_a']) or '(none)'}")
        out.append(f"- Only in {lb}: {', '.join(feats['only_in_b']) or '(none)'}")
        out.append("")
    out.append(md_table(["Feature", f"Rank {la}", f"Rank {lb}", la, lb, "Δ"],
                        [[f["feature"], fmt(f["rank_a"]), fmt(f["rank_b"]), fmt(f["a"]),
                          fmt(f["b"]), fmt_delta(f["delta"])] for f in feats["importance"]])
               if feats["importance"] else "_No explanation in either scorecard._")
    out += ["", "## Lineage changes", ""]
    out.append(md_table(["Item", la, lb], [[c["key"], c["a"], c["b"]] for c in diff["lineage"]])
               if diff["lineage"] else "_Identical lineage._")
    return "\n".join(out) + "\n"
