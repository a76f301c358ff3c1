"""The dossier page (``index.html``) of :mod:`validation.dossier`, and reading a model card's
sections back from its HTML.

Every value on the page passes through :func:`esc` (text and attributes alike): notes,
override reasons, owner text, names and paths are shown as text, never as markup. Links point
only at files inside the dossier folder.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote

from validation.scorecard import esc, fmt, html_page, html_table

SECTIONS = (("model", "Model"), ("verification", "Verification"),
            ("model-card", "Model card"), ("scorecards", "Scorecards"),
            ("history", "Signed history"), ("lineage", "Lineage"),
            ("training", "Training"), ("versions", "Versions of this model"),
            ("frameworks", "EU AI Act Annex IV and SR 11-7"))


def render_dossier(d: Mapping[str, Any]) -> str:
    """The whole page of dossier ``d`` (its JSON form)."""
    model = d["model"]
    title = f"Audit dossier: {model['name']} v{model['version']}"
    nav = " · ".join(f'<a href="#{key}">{esc(name)}</a>' for key, name in SECTIONS)
    body = [f"<header><h1>{esc(title)}</h1>{_banner(d)}<p>{nav}</p></header>",
            _model(d), _verification(d), _card(d), _scorecards(d), _history(d), _lineage(d),
            _training(d), _versions(d), _frameworks(d),
            f"<footer><p>Generated {esc(d.get('generated'))} by fstrain "
            f"{esc((d.get('generated_by') or {}).get('fstrain_version') or '')}. Every file of "
            "this folder is listed with its sha256 in <code>SHA256SUMS</code> (check with "
            "<code>sha256sum -c SHA256SUMS</code>) and <code>dossier.json</code>.</p></footer>"]
    return html_page(title, "\n".join(body))


def _link(path: str | None, text: str) -> str:
    if not path:
        return esc("(missing)")
    return f'<a href="{esc(quote(path))}">{esc(text)}</a>'


def _section(key: str, inner: str) -> str:
    name = dict(SECTIONS)[key]
    return f'<section id="{esc(key)}"><h2>{esc(name)}</h2>{inner}</section>'


def _banner(d: Mapping[str, Any]) -> str:
    v = d["verification"]
    if v["ok"]:
        signed = "signed" if v.get("signed") else "UNSIGNED (the store has no trust list)"
        return (f'<p class="verified"><strong>Verified</strong>: the history is intact and '
                f"{esc(signed)}; chain head <code>{esc(v.get('head') or '-')}</code>.</p>")
    count = len(v["problems"])
    return (f'<p class="warning"><strong>DOES NOT VERIFY</strong>: {count} problem(s) found; '
            'see <a href="#verification">Verification</a>. Nothing below can be relied on '
            "until they are explained.</p>")


def _model(d: Mapping[str, Any]) -> str:
    m = d["model"]
    rows = [["Name", m["name"]], ["Version", m["version"]], ["Framework", m["framework"]],
            ["Model", m.get("model") or m.get("loader")], ["Description", m.get("description")],
            ["Created", m.get("created")],
            ["Recorded validation status", m.get("validation_status")],
            ["Code", f"fstrain {m.get('fstrain_version')} @ {m.get('source_commit') or 'unknown'}"],
            ["Libraries", ", ".join(f"{k} {v}" for k, v in (m.get("libraries") or {}).items())],
            ["Backend", m.get("backend")],
            ["Files that load through pickle", ", ".join(m.get("unsafe_files") or []) or "none"]]
    return _section("model", html_table(["Item", "Value"], rows)
                    + f"<p>{_link('manifest.json', 'manifest.json')} (as stored).</p>")


def _verification(d: Mapping[str, Any]) -> str:
    v = d["verification"]
    m = d["model"]
    lines = "".join(f"<li>{esc(p)}</li>" for p in v["problems"])
    facts = [["Result", "intact" if v["ok"] else "DOES NOT VERIFY"],
             ["Chain head (pin it: registry verify --head)", v.get("head") or "-"],
             ["Trusted owner (pinned)", v.get("trusted_owner") or "none pinned"],
             ["Trust list rooted at", v.get("trust_owner") or "no trust list"],
             ["Records", f"{v.get('records', '-')} ({v.get('signed_records', '-')} signed)"],
             ["Signed", "yes" if v.get("signed", False) else "no (unsigned records)"],
             ["Checked", v.get("checked_at") or d.get("generated")]]
    extra = "".join(f"<p>{esc(n)}</p>" for n in v.get("notes") or [])
    return _section("verification", html_table(["Item", "Value"], facts) + extra
                    + (f'<ul class="warning">{lines}</ul>' if lines else "")
                    + f"<p>To check again: <code>fstrain registry verify {esc(m['name'])}:"
                    f"{esc(m['version'])} --head {esc(v.get('head') or 'HEAD')}</code>.</p>")


def _card(d: Mapping[str, Any]) -> str:
    card = d["model_card"]
    if card["run"] is None:
        return _section("model-card", "<p>No model card: the version was never validated.</p>")
    head = (f"<p>From validation run {esc(card['run'])}: {_link(card['html'], 'the model card')}"
            " (byte for byte as recorded).")
    if card.get("completeness") is not None:
        owner = card.get("owner") or {}
        share = f"{float(card['completeness']):.0%}"
        head += (f" Completeness of what the owner must write: {esc(share)}; owner texts: "
                 f"{esc(owner.get('source'))}, signed by {esc(owner.get('signed_by'))}.")
    head += "</p>"
    flags = "".join(f"<li>{esc(c)}</li>" for c in card.get("contradictions") or [])
    if flags:
        head += ('<div class="warning"><p><strong>The owner\'s text contradicts the generated '
                 f"findings:</strong></p><ul>{flags}</ul></div>")
    missing = card.get("missing") or []
    if missing:
        head += f"<p>Not written by the owner: {esc(', '.join(map(str, missing)))}.</p>"
    return _section("model-card", head + "".join(_card_section(s) for s in card["sections"]))


def _card_section(s: Mapping[str, Any]) -> str:
    """One section: who wrote it, the generated findings, then the owner's texts, labelled."""
    out = [f"<h3>{esc(s.get('title'))}</h3><p><em>{esc(s.get('source'))}</em></p>"]
    facts = s.get("facts") or []
    if facts:
        out.append("<p>Generated by fstrain from the validation run:</p><ul>"
                   + "".join(f"<li>{esc(f)}</li>" for f in facts) + "</ul>")
    for text in s.get("owner") or []:
        out.append(f'<div class="owner"><p>Written by the owner ({esc(text.get("label"))}):'
                   f"</p><p>{esc(text.get('text'))}</p></div>")
    out += [f'<p class="warning">{esc(f)}</p>' for f in s.get("flags") or []]
    return "".join(out)


def _scorecards(d: Mapping[str, Any]) -> str:
    runs = d["scorecards"]
    if not runs:
        return _section("scorecards", "<p>No scorecard: the version was never validated.</p>")
    parts = []
    for r in runs:
        state = "" if r["unchanged"] else (' <span class="warning">a file of this run differs '
                                           "from the hash its record names</span>")
        ev = r.get("evaluation") or {}
        metrics = [[k, fmt(m["value"]), _interval(m)] for k, m in r["metrics"].items()]
        gates = [[g["name"], g.get("source"), fmt(g.get("value")), g.get("status")]
                 for g in r["gates"]]
        parts.append(
            f'<h3 id="run-{esc(r["run"])}">Run {esc(r["run"])}: {esc(r["status"])}, '
            f"{esc(r['created'])}</h3>{state}"
            f"<p>{_link(r['scorecard_html'], 'Scorecard')} · "
            f"{_link(r['model_card_html'], 'model card')} · test split: "
            f"{esc(ev.get('rows'))} rows of training dataset v"
            f"{esc(ev.get('training_dataset_version'))}; {esc(r['slices'])} subgroup slices."
            + (" The default gates were REPLACED in this run." if r.get("replaced_default_gates")
               else "") + "</p>"
            + html_table(["Metric", "Value (test)", "95% interval"], metrics, numeric=[1])
            + html_table(["Gate", "Source", "Value", "Status"], gates))
    return _section("scorecards", "".join(parts))


def _interval(m: Mapping[str, Any]) -> str:
    if m.get("lower") is None or m.get("upper") is None:
        return "-"
    return f"[{fmt(m['lower'])}, {fmt(m['upper'])}]"


def _signer(e: Mapping[str, Any]) -> list[str]:
    s = e.get("signer")
    if not isinstance(s, Mapping):
        return ["unsigned", "-", "-", str(e.get("reviewer") or e.get("user") or "-")]
    return [str(s.get("name")), str(s.get("role")), str(s.get("fingerprint")),
            str(s.get("acting_for") or s.get("person") or "-")]


def _history(d: Mapping[str, Any]) -> str:
    ok = d["verification"]["ok"]
    rows = []
    for e in d["history"]:
        detail = "; ".join(str(x) for x in (
            e.get("note"), e.get("override_reason") and f"override: {e['override_reason']}",
            e.get("problem"), e.get("failing_gates") and "failing: "
            + "; ".join(e["failing_gates"])) if x)
        checked = "; ".join(e.get("verification") or []) or ("verifies" if ok else "-")
        rows.append([e["seq"], e.get("kind"), e.get("created"), *_signer(e), e.get("status"),
                     detail, (e.get("record_sha256") or "")[:16], (e.get("prev") or "-")[:16],
                     checked])
    table = html_table(["#", "Event", "When (UTC)", "Signed by", "Role", "Key fingerprint",
                        "Person", "Result", "Note", "Record sha256", "Previous",
                        "Verification"], rows)
    files = "".join(
        f"<li>run {esc(e['seq'])}: {esc(ev['path'])}: {esc(ev['state'])}</li>"
        for e in d["history"] for ev in e.get("evidence", [])
        if ev["state"] != "matches its record")
    return _section("history", (table if rows else "<p>No history record.</p>")
                    + (f'<ul class="warning">{files}</ul>' if files else
                       "<p>Every file a record covers matches the sha256 it names.</p>"))


def _lineage(d: Mapping[str, Any]) -> str:
    lin = d["lineage"]
    fv = lin.get("feature_view") or {}
    split = lin.get("split") or {}
    head = [["Feature view", f"{fv.get('name')}:{fv.get('version')}" if fv else "-"],
            ["Training dataset version", lin.get("training_dataset_version")],
            ["Split", f"{split.get('strategy')} {split.get('splits')}"],
            ["Seed", lin.get("seed")], ["Content hash", lin.get("content_hash")],
            ["Created", lin.get("created_at")]]
    commits = [[g, c] for g, c in (lin.get("feature_group_commits") or {}).items()]
    splits = [[n, s.get("rows"), s.get("sha256"), json.dumps(s.get("label_distribution"))]
              for n, s in (lin.get("splits") or {}).items()]
    return _section("lineage", html_table(["Item", "Value"], head)
                    + "<h3>Feature-group commits</h3>"
                    + html_table(["Feature group", "Commit"], commits)
                    + "<h3>Training-dataset splits</h3>"
                    + html_table(["Split", "Rows", "Content sha256", "Labels"], splits))


def _training(d: Mapping[str, Any]) -> str:
    t = d["training"]
    shown = {k: v for k, v in t.items() if v not in (None, {}, [])}
    return _section("training", f"<pre>{esc(json.dumps(shown, indent=2, default=str))}</pre>")


def _versions(d: Mapping[str, Any]) -> str:
    rows = [[v["version"], v["training_dataset_version"], v["validation_status"], v["created"]]
            for v in d["versions"]]
    return _section("versions", html_table(["Version", "Training dataset", "Status",
                                            "Created"], rows))


def _frameworks(d: Mapping[str, Any]) -> str:
    rows = d["frameworks"]
    body = []
    for r in rows:
        where = (f'<a href="#{esc(r["where"].lstrip("#"))}">{esc(r["where"].lstrip("#"))}</a>'
                 if r["where"] else esc("nowhere"))
        body.append(f'<tr class="{esc(r["status"].replace(" ", "-"))}"><td>'
                    f"{esc(r['framework'])}</td><td>{esc(r['ref'])}</td><td>{esc(r['asks'])}"
                    f"</td><td>{esc(r['status'])}</td><td>{where}</td><td>{esc(r['answer'])}"
                    "</td></tr>")
    head = "".join(f"<th>{esc(h)}</th>" for h in ("Framework", "Item", "Asks", "Status",
                                                  "Where", "What the dossier shows"))
    return _section("frameworks", "<p>A checklist for the reviewer, not legal advice.</p>"
                    f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}"
                    "</tbody></table>")


class _CardSections(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sections: list[dict[str, Any]] = []
        self._title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section" and a.get("id"):
            self.sections.append({"key": a["id"], "source": a.get("data-source") or "",
                                  "title": ""})
        self._title = tag == "h2" and bool(self.sections)

    def handle_data(self, data: str) -> None:
        if self._title:
            self.sections[-1]["title"] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self._title = False


def card_sections(page: str) -> list[dict[str, Any]]:
    """``[{key, title, source}]`` of a model card page's sections (``source``: generated,
    owner, generated+owner, todo)."""
    parser = _CardSections()
    parser.feed(page)
    return parser.sections
