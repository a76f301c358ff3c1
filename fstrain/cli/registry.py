"""``fstrain registry``: list, show, report and sign off model versions (``registry_app``).

``list``, ``show``, ``report`` and ``diff`` only read the registry; ``approve`` and ``reject``
append a reviewer's sign-off to a version's append-only history. ``--root`` is the store root (default ``$FSTRAIN_HOME``, else
``./.fstrain``); the registry lives in ``<root>/model_registry``.
"""

from __future__ import annotations

import json
import webbrowser
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from fstrain.cli.audit import approve_command, reject_command, signed_by, verify_command
from fstrain.cli.audit import EXIT_BROKEN
from fstrain.cli.audit import history_row
from fstrain.cli.dossier import dossier_command
from fstrain.cli.errors import fail
from fstrain.cli.options import JsonOpt, RootOpt
from fstrain.cli.policy import policy_app
from fstrain.cli.registry_open import open_registry, resolve_ref
from fstrain.cli.trainer_config import config_line, trained_with
from fstrain.kernel.errors import FeatureStoreError, InvalidArgumentError
from model_registry.history import approval_state
from model_registry.statuses import is_approved, passed_gates
from validation.report_index import latest_scorecard
from validation.report_index import checked_status
from validation.report_index import write_report_index

registry_app = typer.Typer(
    help="Browse the model registry (list, show, report, diff, dossier), sign off versions "
    "(approve, reject) and set each model's gate policy (policy).",
    no_args_is_help=True,
)
registry_app.add_typer(policy_app, name="policy")

_KEY_METRICS = 3


@registry_app.command("list")
def list_command(
    name: Annotated[str | None, typer.Argument(help="Only this model.")] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List model versions: name, version, training metrics (measured on the validation split
    at training time), validation status, approval, TD version, created."""
    try:
        registry = _open(root)
        models = [] if registry is None else registry.list_models(name)
    except FeatureStoreError as exc:
        _fail(exc)
    rows = []
    for m in models:
        status, approval, report = checked_status(m)
        rows.append({
            "name": m.name,
            "version": m.version,
            "framework": m.framework,
            "metrics": m.training_metrics,
            "validation_status": status,
            "approval_status": approval,
            "verification": report.state,
            "training_dataset_version": m.training_dataset_version,
            "feature_view": _fv(m.feature_view_name, m.feature_view_version),
            "created": m.created,
        })
    broken = [r for r in rows if r["verification"] == "broken"]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        if broken:
            raise typer.Exit(EXIT_BROKEN)
        return

    table = Table(title="Model registry" if name is None else f"Model '{name}'")
    for column in ("name", "version", "training metrics (validation split)", "status",
                   "approval", "record", "TD version", "created"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["name"],
            str(row["version"]),
            _key_metrics(row["metrics"]),
            row["validation_status"],
            row["approval_status"],
            row["verification"],
            "-"
            if row["training_dataset_version"] is None
            else str(row["training_dataset_version"]),
            (row["created"] or "")[:19],
        )
    console = Console(width=160)
    console.print(table)
    if not rows:
        console.print("No model versions found.")
    for row in broken:
        typer.echo(f"{row['name']}:{row['version']} unverified: {row['approval_status']}",
                   err=True)
    if broken:
        raise typer.Exit(EXIT_BROKEN)


@registry_app.command("show")
def show_command(
    ref: Annotated[
        str, typer.Argument(metavar="NAME[:VERSION]", help="Model (latest if no version).")
    ],
    root: RootOpt = None,
    as_json: JsonOpt = False,
    full: Annotated[bool, typer.Option("--full", help="Everything: every file, the whole lineage and scorecard summary.")] = False,
) -> None:
    """Show one version: identity, metrics, lineage in brief, history (``--full``: manifest,
    files, the whole lineage and the scorecard summary).

    Without ``:VERSION`` the latest version is shown.
    """
    try:
        model = _resolve(root, ref, verify=False)
        verification = model.require_verified()
        manifest = model.manifest
        tags = model.get_tags()
        history = model.history()
        scorecard, href = latest_scorecard(model)
    except FeatureStoreError as exc:
        _fail(exc)

    payload: dict[str, Any] = {
        "name": model.name,
        "version": model.version,
        "model_path": str(model.model_path),
        "validation_status": model.validation_status,
        "approval_status": approval_state(history),
        "history": history,
        "latest_scorecard": href,
        "tags": tags,
        "manifest": manifest,
        "lineage": manifest.get("lineage") or {},
        "scorecard": scorecard,
        "scorecard_summary": None if scorecard is None else summarize_scorecard(scorecard),
        "verification": verification.to_dict(),
    }
    if as_json:
        typer.echo(json.dumps(payload if full else _compact(payload), indent=2, default=str))
        return
    if full:
        _print_show(payload)
    else:
        _print_compact(payload)


def lineage_summary(manifest: dict[str, Any]) -> dict[str, Any]:
    """Feature view, training-dataset version, group commits, split, seed and split hashes."""
    lineage = manifest.get("lineage") or {}
    td = lineage.get("training_dataset") or {}
    spec = td.get("split_spec") or {}
    return {
        "feature_view": _fv(manifest.get("feature_view_name"), manifest.get("feature_view_version")),
        "training_dataset_version": manifest.get("training_dataset_version"),
        "feature_group_commits": td.get("feature_group_commits"),
        "split": spec.get("strategy"),
        "seed": td.get("seed"),
        "split_sha256": {s: (m or {}).get("sha256") for s, m in (td.get("splits") or {}).items()},
    }


def _model_kind(manifest: dict[str, Any]) -> str | None:
    trainer = ((manifest.get("training_config") or {}).get("trainer") or {}).get("model")
    record = (manifest.get("predictor") or {}).get("loader")
    return trainer or (None if record in (None, "fstrain") else record)


def _compact(payload: dict[str, Any]) -> dict[str, Any]:
    manifest = payload["manifest"]
    code = manifest.get("code_version") or {}
    return {
        "name": payload["name"], "version": payload["version"],
        "framework": manifest.get("framework"), "model": _model_kind(manifest),
        "validation_status": payload["validation_status"],
        "approval_status": payload["approval_status"], "created": manifest.get("created"),
        "metrics": manifest.get("metrics") or {},
        "test_metrics": {k: v for k, v in ((payload["scorecard"] or {}).get("metrics") or {}).items()
                         if isinstance(v, (int, float)) and not isinstance(v, bool)},
        "hyperparameters": manifest.get("hyperparameters"),
        "training_config": trained_with(manifest),
        "lineage": lineage_summary(manifest),
        "code": {"fstrain_version": code.get("fstrain_version"),
                 "source_commit": manifest.get("git_commit")},
        "history": [{**{k: e.get(k) for k in ("seq", "kind", "created", "status")},
                     "signed_by": signed_by(e)} for e in payload["history"]],
        "verification": payload["verification"],
        "latest_scorecard": payload["latest_scorecard"], "path": payload["model_path"],
    }


def _print_compact(payload: dict[str, Any]) -> None:
    c = _compact(payload)
    lin = c["lineage"]
    lines = [
        f"model {c['name']}:{c['version']}  {c['model'] or c['framework']}  "
        f"status {c['validation_status']}  approval {c['approval_status']}  "
        f"created {(c['created'] or '')[:19]}",
        "metrics: " + (", ".join(f"{k}={v:.4g}" for k, v in c["metrics"].items()
                                 if isinstance(v, (int, float))) or "-"),
    ]
    if c["test_metrics"]:
        keys = ("roc_auc", "pr_auc", "f1", "accuracy", "log_loss", "rmse", "r2")
        lines.append("test (latest validation): " + ", ".join(
            f"test_{k}={c['test_metrics'][k]:.4g}" for k in keys if k in c["test_metrics"]))
    lines += [
        "hyperparameters: " + (", ".join(f"{k}={v}" for k, v in
                                         list((c["hyperparameters"] or {}).items())[:12]) or "-"),
        config_line(c["training_config"]),
        f"lineage: {lin['feature_view'] or '-'} / training dataset "
        f"v{lin['training_dataset_version']}  split {lin['split']}  seed {lin['seed']}",
        "  commits: " + (", ".join(f"{g}@{v}" for g, v in
                                   (lin["feature_group_commits"] or {}).items()) or "-"),
        "  sha256: " + (", ".join(f"{s} {(h or '')[:12]}" for s, h in
                                  lin["split_sha256"].items()) or "-"),
        f"code: fstrain {c['code']['fstrain_version']} @ {c['code']['source_commit'] or 'unknown'}",
        "history: " + ("; ".join(f"#{e['seq']} {e['kind']} {e['status'] or ''} "
                                 f"{(e['created'] or '')[:19]}".strip() for e in c["history"])
                       or "never validated"),
        f"record: {c['verification']['state']} ({c['verification']['signed']} of "
        f"{c['verification']['records']} records signed, head "
        f"{(c['verification']['head'] or '-')[:16]})",
        f"scorecard: {c['latest_scorecard'] or '-'}",
        f"path: {c['path']}   (--full for files, the whole lineage and the scorecard summary)",
    ]
    typer.echo("\n".join(lines))


def summarize_scorecard(scorecard: Any) -> dict[str, Any]:
    """A short view of a scorecard: its top-level scalars, metric scalars and check counts."""
    if not isinstance(scorecard, dict):
        return {"scorecard": type(scorecard).__name__}
    summary: dict[str, Any] = {
        k: v for k, v in scorecard.items() if isinstance(v, (str, int, float, bool)) or v is None
    }
    metrics = scorecard.get("metrics")
    if isinstance(metrics, dict):
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                summary[f"metrics.{k}"] = v
    checks = scorecard.get("checks") or scorecard.get("gates")
    if isinstance(checks, list) and all(isinstance(c, dict) for c in checks):
        failed = [str(c.get("name", i)) for i, c in enumerate(checks) if c.get("passed") is False]
        summary["checks"] = len(checks)
        summary["checks_failed"] = failed
    return summary


@registry_app.command("report")
def report_command(
    root: RootOpt = None,
    open_browser: Annotated[bool, typer.Option("--open", help="Open index.html in a browser.")] = False,
) -> None:
    """Write ``index.html`` listing every model version with status, key metrics and a link to
    its current review page (``review-pages/<model>/<version>.html``: the latest run's
    scorecard with every sign-off recorded since), for a compliance reviewer. Every validation
    run, approval and rejection writes it again, so it is never a stale snapshot."""
    try:
        registry = _open(root)
    except FeatureStoreError as exc:
        _fail(exc)
    if registry is None:
        _fail(InvalidArgumentError("No model registry under the store root yet: run a pipeline first."))
    try:
        index, entries = write_report_index(registry)
    except FeatureStoreError as exc:
        _fail(exc)
    typer.echo(str(index))
    broken = [e for e in entries if e["status"] == "unverified"]
    for entry in broken:
        typer.echo(f"{entry['name']}:{entry['version']} unverified: {entry['approval']}", err=True)
    if open_browser:
        webbrowser.open(index.as_uri())
    if broken:
        raise typer.Exit(EXIT_BROKEN)


@registry_app.command("diff")
def diff_command(
    first: Annotated[str, typer.Argument(metavar="NAME:V1")],
    second: Annotated[str, typer.Argument(metavar="NAME:V2")],
    force: Annotated[bool, typer.Option(
        "--force", help="Compare versions of two different models.")] = False,
    resamples: Annotated[int, typer.Option(
        help="Resamples of the paired bootstrap (at least 10).")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the paired bootstrap.")] = 0,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare version V2 against V1: model type, hyperparameters, metrics and lineage; both
    re-scored on the test rows they share, each metric's change with a 95% paired bootstrap
    interval (better or worse only when it excludes 0); then their scorecards.

    Two different models are refused unless --force; test splits that differ (another
    training-dataset version or split content) are warned about, and only the rows both hold
    are compared.
    """
    from fstrain.tools.rescore import score_test_rows
    from validation.compare import compare_versions, verdicts
    from validation.report_site import diff_scorecards, diff_to_markdown

    try:
        models, cards = [], []
        for ref in (first, second):
            model = _resolve(root, ref)
            card, _ = latest_scorecard(model)
            models.append(model)
            cards.append(card if isinstance(card, dict) and "metrics" in card else None)
        comparison = compare_versions(models[0], models[1], score=score_test_rows, force=force,
                                      resamples=resamples, seed=seed)
    except FeatureStoreError as exc:
        _fail(exc)
    model_diff = diff_models(models[0].manifest, models[1].manifest)
    card1, card2 = cards
    scorecards = (diff_scorecards(card1, card2)
                  if card1 is not None and card2 is not None else None)
    if as_json:
        typer.echo(json.dumps({"model": model_diff, "comparison": comparison.to_dict(),
                               "scorecards": scorecards}, indent=2, default=str))
        return
    labels = [f"{m.name}:{m.version}" for m in models]
    for warning in comparison.warnings:
        typer.echo(f"WARNING: {warning}")
    typer.echo(model_diff_text(model_diff, labels))
    typer.echo("\n" + comparison.to_text(warnings=False))
    if scorecards is None:
        missing = [label for label, card in zip(labels, cards) if card is None]
        typer.echo(f"\nNo scorecard for {', '.join(missing)} (run fstrain validate): their "
                   "gates not compared.")
    else:
        typer.echo("\n" + diff_to_markdown(scorecards, verdicts(comparison)))


def _changes(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, list[Any]]:
    a, b = a or {}, b or {}
    return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def diff_models(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """What differs between two manifests: model type, hyperparameters, metrics, lineage."""
    la, lb = lineage_summary(a), lineage_summary(b)
    return {
        "model_type": _changes({"framework": a.get("framework"), "model": _model_kind(a)},
                               {"framework": b.get("framework"), "model": _model_kind(b)}),
        "hyperparameters": _changes(a.get("hyperparameters"), b.get("hyperparameters")),
        "metrics": _changes(a.get("metrics"), b.get("metrics")),
        "lineage": _changes(la, lb),
        "code": _changes({"source_commit": a.get("git_commit")},
                         {"source_commit": b.get("git_commit")}),
    }


def model_diff_text(diff: dict[str, Any], labels: list[str]) -> str:
    """Human lines per section; a section without changes says it is identical. Differences
    are computed for hyperparameters and metrics only (a seed or a version is a name, not a
    quantity)."""
    lines = [f"{labels[0]} vs {labels[1]}"]
    for section, title in (("model_type", "Model type"), ("hyperparameters", "Hyperparameters"),
                           ("metrics", "Metrics"), ("lineage", "Lineage"), ("code", "Code")):
        changes = diff[section]
        if not changes:
            lines.append(f"{title}: identical")
            continue
        lines.append(f"{title}:")
        for key, (x, y) in changes.items():
            if (section in ("hyperparameters", "metrics") and isinstance(x, (int, float))
                    and isinstance(y, (int, float)) and not isinstance(x, bool)):
                lines.append(f"  {key}: {x:.6g} → {y:.6g} ({y - x:+.4g})")
            else:
                lines.append(f"  {key}: {x} → {y}")
    return "\n".join(lines)


@registry_app.command("delete")
def delete_command(
    ref: Annotated[str, typer.Argument(metavar="NAME:VERSION")],
    force: Annotated[bool, typer.Option("--force", help="Delete even a version that passed validation or was approved.")] = False,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete one model version; one that passed validation or was approved (a deployment
    candidate) is refused unless ``--force``."""
    try:
        if ":" not in ref:
            raise InvalidArgumentError(
                f"delete needs an explicit version, NAME:VERSION. Got {ref!r} instead."
            )
        model = _resolve(root, ref, verify=False)
        approval = approval_state(model.history())
        in_use = passed_gates(model.validation_status) or is_approved(approval)
        if in_use and not force:
            raise InvalidArgumentError(
                f"model {model.name}:{model.version} is a deployment candidate (validation "
                f"{model.validation_status}, approval {approval}); pass --force to delete it."
            )
        model.delete()
    except FeatureStoreError as exc:
        _fail(exc)
    payload = {"name": model.name, "version": model.version, "deleted": True}
    typer.echo(json.dumps(payload) if as_json else f"deleted model {model.name}:{model.version}")


registry_app.command("approve")(approve_command)
registry_app.command("reject")(reject_command)
registry_app.command("verify")(verify_command)
registry_app.command("dossier")(dossier_command)


@registry_app.command("export-onnx")
def export_onnx_command(
    ref: Annotated[str, typer.Argument(metavar="NAME[:VERSION]")],
    atol: Annotated[float, typer.Option(help="Largest allowed |ONNX - native| probability on the test split.")] = 1e-4,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Export a version (preprocessing + model) to ONNX, check it with ONNX Runtime against the
    native model on its test split, and attach onnx/model.onnx (hashed in the manifest)."""
    try:
        out = _resolve(root, ref).export("onnx", atol=atol)
    except FeatureStoreError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    typer.echo(f"{out['model']}: {out['path']} (sha256 {out['sha256'][:12]}), max |ONNX - "
               f"native| {out['max_abs_diff']:.2g} on {out['rows']} test rows")


# ---------------------------------------------------------------------------------- helpers


def _open(root: Path | None) -> Any:
    """The local project's registry under ``root``, or None when it holds no registry yet."""
    return open_registry(root)


def _resolve(root: Path | None, ref: str, *, verify: bool = True) -> Any:
    """The version ``ref`` names, verified (refused when it does not verify) unless
    ``verify=False``."""
    return resolve_ref(root, ref, verify=verify)


def _key_metrics(metrics: dict[str, float]) -> str:
    items = list(metrics.items())[:_KEY_METRICS]
    text = ", ".join(f"{k}={v:.4g}" for k, v in items)
    return text + (", …" if len(metrics) > _KEY_METRICS else "") if text else "-"


def _fv(name: str | None, version: int | None) -> str | None:
    return None if name is None else f"{name}:{version}"


def _schema_text(model_schema: dict[str, Any] | None, part: str) -> str | None:
    schema = (model_schema or {}).get(part)
    if not schema:
        return None
    if "columnar_schema" in schema:
        return ", ".join(f"{c.get('name')}:{c.get('type')}" for c in schema["columnar_schema"])
    return json.dumps(schema.get("tensor_schema"))


def _print_show(payload: dict[str, Any]) -> None:
    console = Console(width=160)
    manifest = payload["manifest"]
    head = Table(title=f"Model '{payload['name']}' version {payload['version']}", show_header=False)
    head.add_column("field")
    head.add_column("value")
    fields = {
        "framework": manifest.get("framework"),
        "status": payload["validation_status"],
        "approval": payload["approval_status"],
        "record": f"{payload['verification']['state']} (head {payload['verification']['head']})",
        "latest scorecard": payload["latest_scorecard"],
        "created": manifest.get("created"),
        "description": manifest.get("description"),
        "metrics": json.dumps(manifest.get("metrics") or {}),
        "feature view": _fv(
            manifest.get("feature_view_name"), manifest.get("feature_view_version")
        ),
        "TD version": manifest.get("training_dataset_version"),
        "git commit": manifest.get("git_commit"),
        "libraries": ", ".join(f"{k} {v}" for k, v in (manifest.get("libraries") or {}).items()),
        "input schema": _schema_text(manifest.get("model_schema"), "input_schema"),
        "output schema": _schema_text(manifest.get("model_schema"), "output_schema"),
        "hyperparameters": json.dumps(manifest.get("hyperparameters")),
        "tags": json.dumps(payload["tags"]),
        "path": payload["model_path"],
    }
    for key, value in fields.items():
        head.add_row(key, "-" if value is None else str(value))
    console.print(head)
    files = Table(title="Files")
    for column in ("path", "kind", "size", "sha256"):
        files.add_column(column)
    for entry in manifest.get("files", []):
        files.add_row(
            entry["path"], entry.get("kind", ""), str(entry["size"]), entry["sha256"][:16]
        )
    console.print(files)
    console.print("Lineage:")
    console.print_json(json.dumps(payload["lineage"], default=str))
    _print_history(console, payload)
    summary = payload["scorecard_summary"]
    if summary is None:
        console.print("No scorecard.json in this version (not validated).")
    else:
        console.print("Scorecard summary:")
        console.print_json(json.dumps(summary, default=str))


def _print_history(console: Any, payload: dict[str, Any]) -> None:
    table = Table(title="History (append-only)")
    for column in ("#", "event", "when (UTC)", "signed by", "result", "details"):
        table.add_column(column)
    for e in payload["history"]:
        result, details, who = history_row(e)
        table.add_row(str(e["seq"]), e["kind"], e["created"][:19], who, result, details)
    if payload["history"]:
        console.print(table)
    else:
        console.print("No history: this version was never validated or reviewed.")


def _fail(exc: Exception) -> NoReturn:
    fail(exc)
