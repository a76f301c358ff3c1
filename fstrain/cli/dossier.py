"""``fstrain registry dossier NAME:VERSION --out DIR``: an auditor's folder for one version.

The version is verified (:mod:`model_registry.audit.verify`) and the dossier written whatever
the result (:mod:`validation.dossier`): one that does not verify gets a dossier that says so on
its first line, and the command then exits 1 (0 when intact). ``--out`` must lie outside the
store and be new or empty (``--force``: write into a non-empty folder, replacing an earlier
dossier there and leaving other files alone); a refusal writes nothing and exits 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from fstrain.cli.errors import fail
from fstrain.cli.options import JsonOpt, RootOpt
from fstrain.cli.registry_open import open_registry, resolve_ref
from fstrain.kernel.build_info import source_info
from fstrain.kernel.errors import FeatureStoreError, InvalidArgumentError
from fstrain.kernel.store_root import resolve_root
from model_registry.audit.verify import verify_version
from validation.dossier import check_out_folder, collect_dossier, write_dossier

EXIT_BROKEN = 1


def dossier_command(
    ref: Annotated[str, typer.Argument(metavar="NAME:VERSION")],
    out: Annotated[Path, typer.Option("--out", help="The folder to write (outside the store, "
                                                    "new or empty).")],
    force: Annotated[bool, typer.Option(
        "--force", help="Write into a non-empty folder (an earlier dossier there is "
        "replaced, other files are left alone).")] = False,
    head: Annotated[str | None, typer.Option(
        "--head", help="A head hash noted earlier: it must still be in the version's chain.")
    ] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write an auditor's dossier of one version: model card, every scorecard, the signed
    history with its verification, lineage, and what EU AI Act Annex IV and SR 11-7 ask, item
    by item, with where the dossier answers it (or that it does not)."""
    try:
        if ":" not in ref:
            raise InvalidArgumentError(f"a dossier describes one version: NAME:VERSION. Got "
                                       f"{ref!r} instead.")
        index, report = write_version_dossier(root, ref, out, force=force, head=head)
    except FeatureStoreError as exc:
        fail(exc)
    if as_json:
        typer.echo(json.dumps({"index": str(index), "verification": report}, indent=2))
    else:
        state = report["state"] if report["ok"] else f"DOES NOT VERIFY: {report['reason']}"
        typer.echo(f"{index}\n{ref}: {state}; head {report.get('head') or '-'}")
    if not report["ok"]:
        raise typer.Exit(EXIT_BROKEN)


def write_version_dossier(root: Path | None, ref: str, out: Path, *, force: bool,
                          head: str | None) -> tuple[Path, dict[str, Any]]:
    """Verify version ``ref`` of the store at ``root`` and write its dossier into ``out``;
    ``(index.html, the verify report as shown)``."""
    model = resolve_ref(root, ref, verify=False)
    registry = open_registry(root)
    project_root = resolve_root(root)
    check_out_folder(out, store_roots=[project_root], force=force)  # before any work

    view = model.stored_view()  # what the backend holds now; verified and shown as is
    report = verify_version(view, head=head)
    store = model.trust_store
    trust = store.read() if store is not None else None
    shown = {**report.to_dict(), "reason": report.reason(),
             "signed": report.state == "verified", "signed_records": report.signed,
             "trusted_owner": None if trust is None else trust.pinned,
             "trust_owner": (None if trust is None or trust.trust is None
                             else trust.trust.root.fingerprint)}
    dossier = collect_dossier(
        view, shown, versions=registry.get_models(model.name),
        trust_dir=None if store is None else store.directory,
        generated_by=dict(source_info()))
    return write_dossier(dossier, out, store_roots=[project_root], force=force), shown
