"""Who may write a record, and the rules of a sign-off (four eyes, the latest run, supersede).

:func:`resolve_signer` turns the active key (``--key``, ``$FSTRAIN_KEY``, or a :class:`Signer`
given by code such as the web app) into the signer of one action, checked against the store's
trust list: a store without a trust list writes unsigned records (and refuses a key, which
nothing could check); a store with one refuses unsigned, unknown, revoked and wrong-role keys.

:func:`signoff_payload` checks an approval or rejection against the version's history:

* it names the run it signs (default the latest) and that run must still be the latest;
* approving a run that did not pass needs an ``override`` reason;
* a second sign-off of the same run (approving again, approving after a rejection, rejecting
  after an approval) needs ``supersede`` (why), and says which sign-off it supersedes;
* four eyes, in a store with a trust list: the approver's person neither trained the version
  (its creation record) nor signed any of its validation runs.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping, Sequence
from typing import Any

from fstrain.kernel.errors import InvalidArgumentError, UnauthorizedError
from model_registry.audit import keys
from model_registry.audit.identity import ACTION_ROLES, Signer, role_allows
from model_registry.audit.layout import record_path
from model_registry.audit.trust import TrustList, TrustStore

SIGNOFF_KINDS = ("approval", "rejection")


def resolve_signer(trust_store: TrustStore | None, action: str, *, label: str,
                   signer: Signer | None = None,
                   key: str | os.PathLike[str] | None = None) -> tuple[TrustList | None,
                                                                         Signer | None]:
    """The verified trust list and the signer of ``action`` (``creation``, ``validation``,
    ``approval``, ``rejection``); ``(None, None)`` in a store without a trust list.

    Raises:
        UnauthorizedError: a signed store and no key, or a key that is unknown, revoked or in
            a role that may not take ``action``; or a key for a store without a trust list.
        VerificationError: the trust list does not verify.
    """
    trust = None if trust_store is None else trust_store.load()
    path = keys.key_path(key) if signer is None else None
    if trust is None:
        if signer is not None or path is not None:
            raise UnauthorizedError(
                f"{label}: a signing key is set ({path or signer.identity.name if signer else ''})"
                " but this store has no trust list, so nothing could check the signature. "
                "Enrol an owner first (fstrain keys new NAME --role owner --out PATH), or "
                f"unset {keys.ENV_KEY} to work unsigned."
            )
        return None, None
    if signer is None:
        if path is None:
            raise UnauthorizedError(
                f"{label}: this store has a trust list, so every {action} is signed; set "
                f"{keys.ENV_KEY} (or --key) to your enrolled private key."
            )
        signer = trust.signer(keys.load_private_key(path))
    else:
        known = trust.signer(signer.key)  # the trust list's identity, not the caller's
        signer = (known if signer.acting_for is None
                  else known.acting_as(signer.acting_for, signer.acting_role))
    return trust, _check_role(signer, action, label)


def _check_role(signer: Signer, action: str, label: str) -> Signer:
    if signer.identity.role == "service" and signer.acting_for is None:
        raise UnauthorizedError(
            f"{label}: service key {signer.identity.name} signs only for a signed-in person "
            "(Signer.acting_as(person))."
        )
    if not role_allows(signer.role, action):
        allowed = " or ".join(ACTION_ROLES.get(action, ()))
        who = (f"{signer.person} (through service key {signer.identity.name})"
               if signer.acting_for else f"key {signer.identity.name}")
        raise UnauthorizedError(
            f"{label}: a {action} is signed by a {allowed} key; {who} acts as a {signer.role}."
        )
    return signer


def _latest(history: Sequence[Mapping[str, Any]], kinds: tuple[str, ...]) -> Mapping[str, Any] | None:
    for event in reversed(history):
        if event["kind"] in kinds:
            return event
    return None


def _target_run(history: Sequence[Mapping[str, Any]], run: int | None,
                label: str) -> Mapping[str, Any] | None:
    runs = [e for e in history if e["kind"] == "validation"]
    latest = runs[-1] if runs else None
    if run is None:
        return latest
    chosen = next((e for e in runs if e["seq"] == run), None)
    if chosen is None:
        raise InvalidArgumentError(
            f"{label} has no validation run {run} (runs: "
            f"{', '.join(str(e['seq']) for e in runs) or 'none'})."
        )
    if latest is not None and chosen["seq"] != latest["seq"]:
        raise InvalidArgumentError(
            f"{label}: run {run} is no longer the latest validation run (run {latest['seq']} "
            "is); review the latest run and sign off on it."
        )
    return chosen


def _persons_who_made(history: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """person → what they did to the version (trained it, signed run N)."""
    out: dict[str, str] = {}
    for event in history:
        person = (event.get("signer") or {}).get("person")
        if person and event["kind"] == "creation":
            out.setdefault(person, "trained it (history/0000)")
        elif person and event["kind"] == "validation":
            out.setdefault(person, f"signed its validation run {event['seq']}")
    return out


def check_four_eyes(history: Sequence[Mapping[str, Any]], signer: Signer, label: str) -> None:
    """Refuse an approval by a person who trained the version or signed one of its runs.

    Raises:
        UnauthorizedError: naming the person and what they did.
    """
    made = _persons_who_made(history)
    if signer.person in made:
        raise UnauthorizedError(
            f"{label}: four eyes: {signer.person} {made[signer.person]}, so another reviewer "
            "must approve it."
        )
    creation = next((e for e in history if e["kind"] == "creation"), None)
    if creation is None or not creation.get("signature"):
        raise UnauthorizedError(
            f"{label}: who trained it is not on a signed record (it was created before the "
            "store had a trust list), so four eyes cannot be checked; retrain it as a new "
            "signed version."
        )


def signoff_payload(history: Sequence[Mapping[str, Any]], decision: str, *,
                    hashes: Mapping[int, str], signer: Signer | None, note: str,
                    reviewer: str | None, override: str | None, supersede: str | None,
                    run: int | None, label: str) -> dict[str, Any]:
    """Check a sign-off against the history (see the module doc); its payload.

    ``hashes`` maps each record's seq to the sha256 of its stored bytes (the run's evidence).

    Raises:
        InvalidArgumentError: a bad decision, note, reviewer, run, override or supersede.
        UnauthorizedError: the four-eyes rule (signed stores).
    """
    if decision not in SIGNOFF_KINDS:
        raise InvalidArgumentError(f"decision must be 'approval' or 'rejection'. Got {decision!r}.")
    who = _reviewer(signer, reviewer, label)
    if not isinstance(note, str) or not note.strip():
        raise InvalidArgumentError(f"{label}: a sign-off needs a non-empty note.")
    for flag, value in (("--override", override), ("--supersede", supersede)):
        if value is not None and not value.strip():
            raise InvalidArgumentError(f"{label}: {flag} needs a reason (non-empty text).")
    target = _target_run(history, run, label)
    status = None if target is None else target.get("status")
    if decision == "approval" and status != "passed" and override is None:
        raise InvalidArgumentError(f"{label} {_why_not_passed(target)}; approving it needs "
                                   "--override with a reason.")
    prior = _prior_signoff(history, target)
    _check_supersede(prior, decision, supersede, label)
    if signer is not None:
        _check_signed_run(target, label)
        if decision == "approval":
            check_four_eyes(history, signer, label)
    seq = None if target is None else int(target["seq"])
    return {"reviewer": who, "note": note.strip(),
            "override_reason": None if override is None else override.strip(),
            "validation_seq": seq, "validation_status": status,
            "run_record_sha256": None if seq is None else hashes.get(seq),
            "supersedes": None if prior is None else prior["seq"],
            "supersede_reason": None if supersede is None else supersede.strip()}


def _why_not_passed(target: Mapping[str, Any] | None) -> str:
    """Why a run is not a plain pass: never validated, failed, or passed only under a policy
    deviation (``passed (policy deviation)``, :mod:`model_registry.statuses`)."""
    if target is None:
        return "was never validated"
    if str(target.get("status")).startswith("passed"):
        changes = "; ".join(target.get("policy_deviation") or []) or "gates changed"
        return (f"passed its latest validation (run {target['seq']}) only under a policy "
                f"deviation ({changes})")
    return (f"failed its latest validation (run {target['seq']}: "
            + (", ".join(target.get("failing_gates") or []) or "failed") + ")")


def _reviewer(signer: Signer | None, reviewer: str | None, label: str) -> str:
    if signer is None:
        if reviewer is not None and not reviewer.strip():
            raise InvalidArgumentError(f"{label}: a sign-off needs a non-empty reviewer.")
        return (reviewer or os.environ.get("FSTRAIN_USER") or _os_user()).strip()
    if reviewer is not None and reviewer not in (signer.identity.name, signer.person):
        raise InvalidArgumentError(
            f"{label}: --reviewer {reviewer!r} is not the signing key's identity "
            f"({signer.identity.name}, person {signer.person}); the reviewer is whoever signs. "
            "Drop --reviewer or sign with your own key."
        )
    return signer.person


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return "unknown"


def _prior_signoff(history: Sequence[Mapping[str, Any]],
                   target: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The sign-off in force on ``target`` (the newest one after it), or None."""
    signoff = _latest(history, SIGNOFF_KINDS)
    if signoff is None:
        return None
    if target is not None and signoff["seq"] < target["seq"]:
        return None  # given on an older run
    return signoff


def _check_supersede(prior: Mapping[str, Any] | None, decision: str, supersede: str | None,
                     label: str) -> None:
    if prior is not None and supersede is None:
        done = "approved" if prior["kind"] == "approval" else "rejected"
        doing = ("approving it again" if decision == prior["kind"] == "approval"
                 else "rejecting it again" if decision == prior["kind"]
                 else "approving it now" if decision == "approval" else "rejecting it now")
        raise InvalidArgumentError(
            f"{label}: its run {prior.get('validation_seq')} was already {done} (history event "
            f"{prior['seq']}); {doing} needs --supersede \"why\"."
        )
    if prior is None and supersede is not None:
        raise InvalidArgumentError(
            f"{label}: --supersede given, but no sign-off of its latest run is in force to "
            "supersede."
        )


def _check_signed_run(target: Mapping[str, Any] | None, label: str) -> None:
    if target is not None and not target.get("signature"):
        raise UnauthorizedError(
            f"{label}: its run {target['seq']} ({record_path(int(target['seq']))}) is unsigned "
            "(recorded before the store had a trust list); validate it again with a signed key "
            "before signing off."
        )
