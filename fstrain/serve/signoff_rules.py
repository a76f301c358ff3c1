"""The sign-off rules as the web application applies them, and the status a page shows.

The rules are the command line's (the registry's history API): four eyes (nobody signs off a
version they trained or validated), an override reason to approve a run that did not pass, a
supersede reason for any second sign-off (never a silent duplicate), and the form must still
describe the history: the run number, its evidence hash and the newest event the reviewer saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fstrain.kernel.errors import FeatureStoreError, InvalidArgumentError


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
    head: int
    override: str | None = None
    supersede: str | None = None


def checked_history(model: Any) -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]],
                                         str | None]:
    """The version's history, each record's check result, and what keeps the whole history
    from verifying (None when it does)."""
    try:
        history = model.history()
    except FeatureStoreError as exc:
        return [], {}, str(exc)
    checks = {int(e["seq"]): {"ok": True, "text": "intact, unsigned"} for e in history}
    return history, checks, None


def deviation_text(event: dict[str, Any]) -> str | None:
    """How a validation run departed from its policy, or None."""
    if event.get("kind") != "validation":
        return None
    if event.get("replaced_default_gates"):
        return "policy deviation: default gates replaced"
    return None


def evidence_of(event: dict[str, Any] | None) -> str:
    """The hash a sign-off of ``event`` refers to (the run's scorecard sha256)."""
    if not event:
        return ""
    return str(event.get("scorecard_sha256") or "")


def actor_text(event: dict[str, Any]) -> str:
    """Who acted, as the record says."""
    if event.get("kind") in ("approval", "rejection"):
        return str(event.get("reviewer") or event.get("user") or "unknown")
    return str(event.get("user") or "unknown")


def status_of(model: Any) -> dict[str, Any]:
    """The status line of a version: validation result with any policy deviation, the
    sign-off with any override, and whether its history verifies."""
    history, _checks, problem = checked_history(model)
    return status_from(history, problem)


def status_from(history: list[dict[str, Any]], problem: str | None) -> dict[str, Any]:
    """:func:`status_of` from a history already read (and what keeps it from verifying)."""
    from model_registry.history import approval_state, latest

    if problem is not None:
        return {"text": "unverified", "tone": "bad", "detail": problem,
                "verification": "does not verify"}
    run = latest(history, ("validation",))
    signoff = latest(history, ("approval", "rejection"))
    validation = "not validated" if run is None else str(run.get("status"))
    deviation = None if run is None else deviation_text(dict(run))
    if deviation:
        validation += " (policy deviation)"
    approval = approval_state(history)
    if approval == "approved" and signoff is not None and signoff.get("override_reason"):
        approval = "approved (override)"
    tone = ("good" if validation == "passed" and approval.startswith("approved")
            else "bad" if validation.startswith("failed") or approval == "rejected" else "warn")
    return {"text": f"{validation} · {approval}", "tone": tone, "detail": None,
            "verification": "unsigned" if history else "no history"}


def persons_involved(history: list[dict[str, Any]]) -> set[str]:
    """Everyone who trained or validated the version (whom four eyes excludes)."""
    return {str(e.get("user")) for e in history
            if e.get("kind") in ("validation", "creation") and e.get("user")}


def check_form(history: list[dict[str, Any]], form: SignOffForm, *, label: str) -> None:
    """Refuse a form that describes another history than the stored one."""
    from model_registry.history import latest

    run = latest(history, ("validation",))
    head = history[-1]["seq"] if history else 0
    if run is None:
        if form.run != 0:
            raise StaleFormError(f"{label}: the form names run {form.run}, which is not stored.")
    elif form.run != run["seq"] or form.evidence != evidence_of(dict(run)):
        raise StaleFormError(
            f"{label}: the form was for run {form.run} (evidence {form.evidence[:12] or '-'}), "
            f"but the latest run is {run['seq']} (evidence {evidence_of(dict(run))[:12]}). "
            "Reload the page and read the new run before signing."
        )
    if form.head != head:
        raise StaleFormError(
            f"{label}: the history changed since the page was loaded (newest event {head}, the "
            f"form saw {form.head}). Reload the page before signing."
        )


def sign_off(model: Any, person: str, form: SignOffForm) -> dict[str, Any]:
    """Record ``person``'s sign-off through the registry after the web's checks."""
    from model_registry.history import approval_state

    label = f"model {model.name}:{model.version}"
    history = model.history()
    check_form(history, form, label=label)
    if person in persons_involved(history):
        raise FourEyesError(f"{label}: {person} trained or validated this version; another "
                            "reviewer must sign it off (four eyes).")
    state = approval_state(history)
    if state != "not reviewed" and not (form.supersede or "").strip():
        raise InvalidArgumentError(
            f"{label} is already {state} on run {form.run}; a new sign-off supersedes it and "
            "needs a reason."
        )
    if form.supersede:
        raise InvalidArgumentError(f"{label}: superseding a sign-off needs the signed audit "
                                   "trail, which this store does not have yet.")
    return dict(model.sign_off(form.decision, reviewer=person, note=form.note,
                               override=form.override or None))
