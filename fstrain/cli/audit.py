"""``fstrain registry verify``, ``approve`` and ``reject``: checking and signing the history.

``verify [NAME[:VERSION]] [--head HASH]`` checks the trust list once and every version's files,
chain, signatures and rules (:mod:`model_registry.audit.verify`): exit 0 when intact, else
exit 1 with one line per broken item, naming the file and what is wrong. It says which owner
it trusted (``$FSTRAIN_TRUSTED_OWNER``), or warns in one line that none is pinned.

Truncation: a hash chain cannot see its newest record deleted together with its index row.
Every sign-off prints the version's new head; ``--head`` checks that head (or any later one)
is still in the chain.

``approve``/``reject NAME:VERSION --note … [--run N] [--override why] [--supersede why]`` sign
off run N (default the latest, which it must be) with the active key (``--key`` or
``$FSTRAIN_KEY``): in a store with a trust list a reviewer's, and never one whose person
trained the version or signed one of its runs (four eyes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from fstrain.cli.errors import fail
from fstrain.cli.options import JsonOpt, RootOpt
from fstrain.cli.registry_open import open_registry, parse_ref, resolve_ref
from fstrain.kernel.errors import FeatureStoreError, InvalidArgumentError
from model_registry.audit.trust import TRUST_DIR, TrustStore
from model_registry.audit.verify import verify_registry
from model_registry.statuses import approval_word

EXIT_BROKEN = 1

KeyOpt = Annotated[Path | None, typer.Option(
    "--key", help="Private key that signs (default $FSTRAIN_KEY); needed once the store has a "
    "trust list.")]
NoteOpt = Annotated[str, typer.Option("--note", help="The reviewer's note.")]
RunOpt = Annotated[int | None, typer.Option(
    "--run", help="The validation run signed off (default the latest; it must be the latest).")]
SupersedeOpt = Annotated[str | None, typer.Option(
    "--supersede", help="Why this sign-off replaces the one in force on the same run.")]
ReviewerOpt = Annotated[str | None, typer.Option(
    "--reviewer", help="Optional; must be the signing key's name or person (the reviewer is "
    "whoever signs).")]


def verify_command(
    ref: Annotated[str | None, typer.Argument(metavar="[NAME[:VERSION]]",
                                              help="Only this model or version.")] = None,
    head: Annotated[str | None, typer.Option(
        "--head", help="A head hash noted earlier (printed by every sign-off): it must still be "
        "in NAME:VERSION's chain.")] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Verify the trust list and every version's files, history chain and signatures; exit 0
    when intact, else 1 with one line per problem."""
    try:
        registry = open_registry(root)
        if registry is None:
            raise InvalidArgumentError("No model registry under the store root yet: nothing to "
                                       "verify.")
        name, version = (None, None) if ref is None else parse_ref(ref)
        result = verify_registry(registry, name=name, version=version, head=head)
    except FeatureStoreError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps({"ok": result.ok, "trust": {
            "problems": result.trust.problems, "notes": result.trust.notes,
            "owner": None if result.trust.trust is None else result.trust.trust.root.fingerprint},
            "versions": [v.to_dict() for v in result.versions],
            "policies": result.policies}, indent=2))
    else:
        _print_verification(result)
    if not result.ok:
        raise typer.Exit(EXIT_BROKEN)


def _print_verification(result: Any) -> None:
    trust = result.trust
    if trust.trust is None and not trust.problems:
        typer.echo("unsigned store: no trust list, so records are chained and hashed but not "
                   "signed (fstrain keys new NAME --role owner starts one)")
    for note in trust.notes:
        typer.echo(note)
    for report in result.versions:
        head = (report.head or "-")[:16]
        typer.echo(f"{report.ref}: {report.state} ({report.records} records, {report.signed} "
                   f"signed, head {head})")
    for line in result.problem_lines():
        typer.echo(line, err=True)
    if result.ok:
        typer.echo(f"OK: {len(result.versions)} version(s) verified")


def approve_command(
    ref: Annotated[str, typer.Argument(metavar="NAME:VERSION")],
    note: NoteOpt,
    override: Annotated[str | None, typer.Option(
        "--override", help="Reason to approve although the run did not pass, or passed only "
        "under a policy deviation (reads 'approved (override)').")] = None,
    supersede: SupersedeOpt = None,
    run: RunOpt = None,
    key: KeyOpt = None,
    reviewer: ReviewerOpt = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Approve a version's latest validation run (append-only; a run that did not pass needs
    --override, a second sign-off of the same run --supersede)."""
    _sign_off(ref, "approval", note=note, override=override, supersede=supersede, run=run,
              key=key, reviewer=reviewer, root=root, as_json=as_json)


def reject_command(
    ref: Annotated[str, typer.Argument(metavar="NAME:VERSION")],
    note: Annotated[str, typer.Option("--note", help="Why the version is rejected.")],
    supersede: SupersedeOpt = None,
    run: RunOpt = None,
    key: KeyOpt = None,
    reviewer: ReviewerOpt = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Reject a version's latest validation run (appended to its history;
    get_best_model(require_approval=True) skips it)."""
    _sign_off(ref, "rejection", note=note, override=None, supersede=supersede, run=run,
              key=key, reviewer=reviewer, root=root, as_json=as_json)


def _sign_off(ref: str, decision: str, *, note: str, override: str | None,
              supersede: str | None, run: int | None, key: Path | None, reviewer: str | None,
              root: Path | None, as_json: bool) -> None:
    try:
        if ":" not in ref:
            raise InvalidArgumentError(f"Sign off a specific version: NAME:VERSION. Got {ref!r}.")
        model = resolve_ref(root, ref)
        event = model.sign_off(decision, note=note, reviewer=reviewer, override=override,
                               supersede=supersede, run=run, key=key)
        head = model.head
    except FeatureStoreError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps({**event, "head": head}, indent=2))
        return
    typer.echo(signoff_line(model, decision, event, head))


def signoff_line(model: Any, decision: str, event: dict[str, Any], head: str | None) -> str:
    """What a sign-off prints: who, in which role, with which key, on which run; the new head."""
    word = "approved" if decision == "approval" else "rejected"
    signer = event.get("signer")
    who = (f"{signer['person']} ({signer['role']}, key {signer['name']} {signer['fingerprint']})"
           if signer else f"{event['reviewer']} (unsigned: this store has no trust list)")
    extra = f" (override: {event['override_reason']})" if event.get("override_reason") else ""
    if event.get("supersedes") is not None:
        extra += f" (supersedes event {event['supersedes']}: {event['supersede_reason']})"
    return (f"{model.name}:{model.version} {word} by {who} as history event {event['seq']}, for "
            f"validation run {event['validation_seq']} "
            f"({event['validation_status'] or 'not validated'}){extra}\n"
            f"head {head}  (keep it: fstrain registry verify {model.name}:{model.version} "
            "--head HASH checks no record after it was removed)")


def _fail(exc: Exception) -> Any:
    fail(exc)


def signed_by(event: dict[str, Any]) -> str:
    """``alice (reviewer, SHA256:…)`` for a signed record, ``bob, unsigned`` for one without."""
    signer = event.get("signer")
    if signer:
        via = f" via {signer['name']}" if signer.get("acting_for") else ""
        return f"{signer['person']} ({signer['role']}{via}, {signer['fingerprint']})"
    return f"{event.get('user') or '?'}, unsigned"


def history_row(event: dict[str, Any]) -> tuple[str, str, str]:
    """``(result, details, signed by)`` of one history event, for the history table."""
    kind = event["kind"]
    if kind == "creation":
        fv = event.get("feature_view") or {}
        details = (f"trained by {event.get('trained_by')} from {fv.get('name')}:"
                   f"{fv.get('version')} training dataset v{event.get('training_dataset_version')}")
        return "created", details, signed_by(event)
    if kind == "validation":
        details = ("failing: " + "; ".join(event.get("failing_gates") or [])
                   if event.get("failing_gates") else "all gates passed")
        if event.get("policy_deviation"):
            details += "; policy deviation: " + "; ".join(event["policy_deviation"])
        details += f"; scorecard sha256 {str(event.get('scorecard_sha256') or '')[:12]}"
        return str(event.get("status") or ""), details, signed_by(event)
    details = (f"reviewer {event.get('reviewer')}: {event.get('note')}"
               + (f" (override: {event['override_reason']})" if event.get("override_reason")
                  else "")
               + (f" (supersedes event {event['supersedes']}: {event.get('supersede_reason')})"
                  if event.get("supersedes") is not None else "")
               + f"; on run {event.get('validation_seq')}")

    return approval_word(event), details, signed_by(event)


def signing_note(store_root: Path) -> str:
    """One line saying whether the store's records are signed (the demo prints it)."""
    if not TrustStore(Path(store_root) / TRUST_DIR).exists():
        return ("records: unsigned (this store has no trust list; `fstrain keys new NAME --role "
                "owner --out PATH` starts one, then every record is signed)")
    return "records: signed with the store's trust list (`fstrain registry verify` checks them)"
