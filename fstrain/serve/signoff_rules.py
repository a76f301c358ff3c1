"""The sign-off rules as the web application applies them, and the status a page shows.

Every page that shows a status verifies what it shows: :func:`check` runs the registry's
:meth:`verify_history` (files, hashes, chain, signatures, roles, four eyes) and gives each
record its own result. A sign-off goes through the registry's ``sign_off`` with the command
line's rules (four eyes, an override reason to approve a run that did not pass or passed under
a policy deviation, a supersede reason for any second sign-off of a run); in a store with a
trust list it is signed by the server's service key acting for the signed-in person. Before
that, the form must still describe the history: the run number, that run's record sha256 (its
evidence) and the chain's head the reviewer saw.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from fstrain.kernel.errors import FeatureStoreError, InvalidArgumentError, UnauthorizedError
from model_registry.audit.layout import record_hashes
from model_registry.history import approval_state, latest
from model_registry.statuses import is_deviation

_RECORD_PATH = re.compile(r"^history/(\d+)/")


class StaleFormError(InvalidArgumentError):
    """The history changed after the reviewer loaded the page."""


class FourEyesError(InvalidArgumentError):
    """The signed-in person trained or validated the version."""


@dataclass(frozen=True)
class SignOffForm:
    """What an approve/reject form posts (besides its CSRF token)."""

    decision: str  # "approval" or "rejection"
    note: str
    run: int
    evidence: str
    head: str
    override: str | None = None
    supersede: str | None = None


@dataclass
class Checked:
    """A version's history as verified now: the records, each record's result, the problems
    that name no record, the state (``verified``, ``unsigned``, ``broken``), the record hashes
    and the chain's head."""

    history: list[dict[str, Any]]
    checks: dict[int, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    state: str = "unsigned"
    hashes: dict[int, str] = field(default_factory=dict)
    head: str = ""

    @property
    def problem(self) -> str | None:
        """One line saying why the version does not verify, or None."""
        if self.state != "broken":
            return None
        lines = self.problems + [line for c in self.checks.values() for line in c["lines"]]
        more = f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
        return (lines[0] + more) if lines else "does not verify"


def check(model: Any) -> Checked:
    """Verify ``model``'s history (never raises for what it finds)."""
    try:
        report = model.verify_history()
        manifest = model.manifest
        history = model.history()
    except FeatureStoreError as exc:
        return Checked([], problems=[str(exc)], state="broken")
    by_record: dict[int, list[str]] = {}
    loose = []
    for line in report.problems:
        match = _RECORD_PATH.match(line)
        if match:
            by_record.setdefault(int(match.group(1)), []).append(line)
        else:
            loose.append(line)
    checks = {int(e["seq"]): _record_check(e, by_record.get(int(e["seq"]), []))
              for e in history}
    return Checked(history, checks, loose, report.state if report.problems or history
                   else "unsigned", record_hashes(manifest), report.head or "")


def _record_check(event: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    if problems:
        return {"ok": False, "lines": problems, "text": "; ".join(problems)}
    block = event.get("signer") or {}
    if not event.get("signature"):
        return {"ok": True, "lines": [], "text": "intact, unsigned"}
    acting = f", acting for {block.get('acting_for')}" if block.get("acting_for") else ""
    return {"ok": True, "lines": [], "text": f"verified: signed by {block.get('name')} "
                                             f"({block.get('fingerprint')}){acting}"}


def deviation_text(event: dict[str, Any]) -> str | None:
    """How a validation run departed from its gate policy (each change, before → after), or
    None."""
    if event.get("kind") != "validation":
        return None
    if is_deviation(event.get("status")) or event.get("policy_deviation"):
        return "policy deviation: " + ("; ".join(event.get("policy_deviation") or [])
                                       or "gates changed")
    if event.get("replaced_default_gates"):  # a run recorded before gate policies
        return "policy deviation: default gates replaced"
    return None


def evidence_of(event: dict[str, Any] | None, hashes: dict[int, str]) -> str:
    """The evidence hash of a record: a run's own record sha256 (what a sign-off of it names);
    for a sign-off, the run record it signed."""
    if not event:
        return ""
    if event.get("kind") in ("approval", "rejection"):
        return str(event.get("run_record_sha256") or "")
    return hashes.get(int(event["seq"]), "")


def actor_text(event: dict[str, Any]) -> str:
    """Who acted, as the record says: the person (a service key's acting-for person)."""
    block = event.get("signer") or {}
    if block.get("person"):
        return str(block["person"])
    if event.get("kind") in ("approval", "rejection"):
        return str(event.get("reviewer") or event.get("user") or "unknown")
    return str(event.get("user") or "unknown")


def status_of(model: Any) -> dict[str, Any]:
    """The status line of a version: validation result with any policy deviation, the
    sign-off with any override, and whether its history verifies."""
    return status_from(check(model))


def status_from(checked: Checked) -> dict[str, Any]:
    """:func:`status_of` from a history already checked."""
    history = checked.history
    if checked.state == "broken":
        return {"text": "unverified", "tone": "bad", "detail": checked.problem,
                "verification": "does not verify"}
    run = latest(history, ("validation",))
    validation = "not validated" if run is None else str(run.get("status"))
    deviation = None if run is None else deviation_text(dict(run))
    if deviation and not is_deviation(validation):  # a run recorded before gate policies
        validation += " (policy deviation)"
    approval = approval_state(history)  # "approved (override)" when given with --override
    tone = ("good" if validation == "passed" and approval == "approved"
            else "bad" if validation.startswith("failed") or approval == "rejected" else "warn")
    return {"text": f"{validation} · {approval}", "tone": tone, "detail": None,
            "verification": checked.state if history else "no history"}


def persons_involved(history: list[dict[str, Any]]) -> set[str]:
    """Everyone who trained or validated the version, by the records' signer or user."""
    out = set()
    for e in history:
        if e.get("kind") in ("validation", "creation"):
            person = (e.get("signer") or {}).get("person") or e.get("user")
            if person:
                out.add(str(person))
    return out


def check_form(checked: Checked, form: SignOffForm, *, label: str) -> None:
    """Refuse a form that describes another history than the stored one."""
    run = latest(checked.history, ("validation",))
    if run is None:
        if form.run != 0:
            raise StaleFormError(f"{label}: the form names run {form.run}, which is not stored.")
    else:
        evidence = evidence_of(dict(run), checked.hashes)
        if form.run != run["seq"] or form.evidence != evidence:
            raise StaleFormError(
                f"{label}: the form was for run {form.run} (evidence "
                f"{form.evidence[:12] or '-'}), but the latest run is {run['seq']} (evidence "
                f"{evidence[:12]}). Reload the page and read the new run before signing."
            )
    if form.head != checked.head:
        raise StaleFormError(
            f"{label}: the history changed since the page was loaded (its head is now "
            f"{checked.head[:12] or '-'}, the form saw {form.head[:12] or '-'}). Reload the "
            "page before signing."
        )


def sign_off(model: Any, person: str, form: SignOffForm, service: Any) -> dict[str, Any]:
    """Record ``person``'s sign-off through the registry after the web's checks.

    ``service`` is the server's service key (a :class:`model_registry.audit.Signer`) or None
    in a store without a trust list (then the record is unsigned and four eyes compares the
    records' users, as the registry cannot).

    Raises:
        StaleFormError, FourEyesError, InvalidArgumentError; UnauthorizedError when the
        service key may not act for ``person`` as a reviewer; VerificationError.
    """
    label = f"model {model.name}:{model.version}"
    checked = check(model)
    check_form(checked, form, label=label)
    if service is None and person in persons_involved(checked.history):
        raise FourEyesError(f"{label}: four eyes: {person} trained or validated this version; "
                            "another reviewer must sign it off.")
    signer = None if service is None else service.acting_as(person, "reviewer")
    try:
        return dict(model.sign_off(
            form.decision, note=form.note, override=form.override or None,
            supersede=form.supersede or None, run=form.run or None, signer=signer,
            reviewer=person if signer is None else None))
    except UnauthorizedError as exc:
        if "four eyes" in str(exc):
            raise FourEyesError(str(exc)) from exc
        raise
