"""The sign-off block of a scorecard: every approval and rejection of a version, as its history
records hold them.

Each row names who signed (the record's ``signer`` block: key name, role, fingerprint, the person
a service key acted for), when, the note, the override reason and the hash of the evidence the
sign-off signed. A record written in a store without a trust list carries no signer: its
identity fields read ``unsigned`` (with the free-text reviewer and operating-system user it did
record), so an unsigned sign-off never looks like a signed one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from validation.render import esc, html_table, md_table

UNSIGNED = "unsigned"
SIGNOFF_KINDS = {"approval": "approved", "rejection": "rejected"}
SIGNOFF_HEADERS = ["Decision", "Run", "Name", "Role", "Key fingerprint", "Time (UTC)", "Note",
                   "Override reason", "Evidence sha256"]
#: Where a sign-off record may hold the hash of the evidence it signed (newest name first).
EVIDENCE_KEYS = ("evidence_sha256", "run_sha256", "run_record_sha256", "validation_sha256")


def signer_of(record: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The record's ``signer`` block, or None for an unsigned record."""
    signer = (record or {}).get("signer")
    return signer if isinstance(signer, Mapping) and signer.get("fingerprint") else None


def signer_text(record: Mapping[str, Any] | None) -> str:
    """``name (role, SHA256:…)``, ``… acting for P`` for a service key, or ``unsigned``."""
    signer = signer_of(record)
    if signer is None:
        return UNSIGNED
    text = f"{signer.get('name')} ({signer.get('role')}, {signer.get('fingerprint')})"
    acting = signer.get("acting_for")
    if acting and acting != signer.get("name"):
        text += f", acting for {acting}"
    return text


def _evidence(record: Mapping[str, Any]) -> str:
    """The evidence hash the sign-off names; an unsigned record's is marked as such (it names
    the run, but nobody signed it)."""
    signed = signer_of(record) is not None
    for key in EVIDENCE_KEYS:
        if record.get(key):
            return str(record[key]) if signed else f"{record[key]} ({UNSIGNED})"
    return "not recorded" if signed else UNSIGNED


def _note(record: Mapping[str, Any]) -> str:
    note = str(record.get("note") or "")
    if record.get("supersedes") is not None:
        note += (f" (supersedes sign-off {record['supersedes']}: "
                 f"{record.get('supersede_reason') or 'no reason given'})")
    return note


def signoff_rows(history: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """One row per approval or rejection, oldest first."""
    rows = []
    for e in history:
        if e.get("kind") not in SIGNOFF_KINDS:
            continue
        signer = signer_of(e)
        if signer is None:
            who = e.get("reviewer") or e.get("user") or ""
            name = f"{UNSIGNED} (recorded name: {who})" if who else UNSIGNED
            role = fingerprint = UNSIGNED
        else:
            name = str(signer.get("acting_for") or signer.get("person") or signer.get("name"))
            if signer.get("name") and signer.get("name") != name:
                name += f" (key {signer['name']})"
            role, fingerprint = str(signer.get("role")), str(signer.get("fingerprint"))
        run = e.get("validation_seq")
        rows.append([SIGNOFF_KINDS[e["kind"]], "n/a" if run is None else f"run {run}", name,
                     role, fingerprint, str(e.get("created") or "")[:19].replace("T", " "),
                     _note(e), str(e.get("override_reason") or "none"),
                     _evidence(e)])
    return rows


def _pending(history: Sequence[Mapping[str, Any]], run_seq: int | None) -> str:
    runs = [e["seq"] for e in history if e.get("kind") == "validation"]
    seq = run_seq if run_seq is not None else (max(runs) if runs else None)
    if seq is None:
        return "No validation run yet: nothing to sign off."
    signed = [e for e in history if e.get("kind") in SIGNOFF_KINDS
              and e.get("validation_seq") == seq]
    if signed:
        return ""
    return (f"Run {seq} has no sign-off yet. Approvals and rejections are recorded after the "
            "validation run; `fstrain registry report` renders the current list.")


def signoff_html(history: Sequence[Mapping[str, Any]], run_seq: int | None = None) -> str:
    """The sign-off section (``run_seq``: the run this page shows; default the latest)."""
    rows = signoff_rows(history)
    out = ['<section id="signoff"><h2>Sign-off</h2>']
    pending = _pending(history, run_seq)
    if pending:
        out.append(f'<p class="todo" id="signoff-pending">{esc(pending)}</p>')
    if rows:
        attrs = [f'class="signoff-row {esc(r[0])}-row"' for r in rows]
        out.append(html_table(SIGNOFF_HEADERS, rows, row_attrs=attrs))
    out.append("</section>")
    return "\n".join(out)


def signoff_markdown(history: Sequence[Mapping[str, Any]], run_seq: int | None = None
                     ) -> list[str]:
    """The sign-off section as Markdown lines."""
    out = ["", "## Sign-off", ""]
    pending = _pending(history, run_seq)
    if pending:
        out.append(f"_{pending}_")
    rows = signoff_rows(history)
    if rows:
        out += ["", md_table(SIGNOFF_HEADERS, rows)]
    return out
