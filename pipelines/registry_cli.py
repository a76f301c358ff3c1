"""``fstrain registry``: list, show, report and sign off model versions (``registry_app``).

``list``, ``show``, ``report`` and ``diff`` only read the registry; ``approve`` and ``reject``
append a reviewer's sign-off to a version's append-only history. ``--root`` is the store root (default ``$FSTRAIN_HOME``, else
``./.fstrain``); the registry lives in ``<root>/model_registry``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from fstrain.kernel.errors import FeatureStoreError, InvalidArgumentError

registry_app = typer.Typer(
    help="Browse the model registry (list, show, report, diff) and sign off versions "
    "(approve, reject).",
    no_args_is_help=True,
)

RootOpt = Annotated[
    Path | None,
    typer.Option("--root", help="Store root (default: $FSTRAIN_HOME, else ./.fstrain)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
_KEY_METRICS = 3


@registry_app.command("list")
def list_command(
    name: Annotated[str | None, typer.Argument(help="Only this model.")] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List model versions: name, version, key metrics, status, TD version, created."""
    try:
        registry = _open(root)
        models = [] if registry is None else registry.list_models(name)
    except FeatureStoreError as exc:
        _fail(exc)
    rows = [
        {
            "name": m.name,
            "version": m.version,
            "framework": m.framework,
            "metrics": m.training_metrics,
            "validation_status": m.validation_status,
            "training_dataset_version": m.training_dataset_version,
            "feature_view": _fv(m.feature_view_name, m.feature_view_version),
            "created": m.created,
        }
        for m in models
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Model registry" if name is None else f"Model '{name}'")
    for column in ("name", "version", "key metrics", "status", "TD version", "created"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["name"],
            str(row["version"]),
            _key_metrics(row["metrics"]),
            row["validation_status"],
            "-"
            if row["training_dataset_version"] is None
            else str(row["training_dataset_version"]),
            (row["created"] or "")[:19],
        )
    console = Console(width=160)
    console.print(table)
    if not rows:
        console.print("No model versions found.")


@registry_app.command("show")
def show_command(
    ref: Annotated[
        str, typer.Argument(metavar="NAME[:VERSION]", help="Model (latest if no version).")
    ],
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one version: manifest, lineage and scorecard summary (if scorecard.json exists).

    Without ``:VERSION`` the latest version is shown.
    """
    try:
        model = _resolve(root, ref)
        manifest = model.manifest
        tags = model.get_tags()
        history = model.history()
        scorecard, href = latest_scorecard(model)
    except FeatureStoreError as exc:
        _fail(exc)
    from model_registry.history import approval_state

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
    }
    if as_json:
        typer.echo(json.dumps(payload, indent=2, default=str))
        return
    _print_show(payload)


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
    """Write ``index.html`` listing every model version with status, key metrics and links to
    each version's ``scorecard.html`` (for a compliance reviewer)."""
    from validation.report_site import render_index

    try:
        registry = _open(root)
    except FeatureStoreError as exc:
        _fail(exc)
    if registry is None:
        _fail(InvalidArgumentError("No model registry under the store root yet: run a pipeline first."))
    try:
        entries = [report_entry(model) for model in registry.list_models()]
    except FeatureStoreError as exc:
        _fail(exc)
    index = registry.root / "index.html"
    index.write_text(render_index(entries), encoding="utf-8")
    typer.echo(str(index))
    if open_browser:
        import webbrowser

        webbrowser.open(index.as_uri())


@registry_app.command("diff")
def diff_command(
    first: Annotated[str, typer.Argument(metavar="NAME:V1")],
    second: Annotated[str, typer.Argument(metavar="NAME:V2")],
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare two validated versions' scorecards: metrics, gates, slice figures, features."""
    from validation.report_site import diff_scorecards, diff_to_markdown

    try:
        cards = []
        for ref in (first, second):
            model = _resolve(root, ref)
            card, _ = latest_scorecard(model)
            if not isinstance(card, dict) or "metrics" not in card:
                raise InvalidArgumentError(
                    f"model {model.name}:{model.version} has no scorecard yet. Run "
                    f"'fstrain validate {model.name}:{model.version}' first."
                )
            cards.append(card)
    except FeatureStoreError as exc:
        _fail(exc)
    diff = diff_scorecards(cards[0], cards[1])
    if as_json:
        typer.echo(json.dumps(diff, indent=2, default=str))
    else:
        typer.echo(diff_to_markdown(diff))


@registry_app.command("approve")
def approve_command(
    ref: Annotated[str, typer.Argument(metavar="NAME:VERSION")],
    reviewer: Annotated[str, typer.Option("--reviewer", help="Who signs off.")],
    note: Annotated[str, typer.Option("--note", help="The reviewer's note.")],
    override: Annotated[str | None, typer.Option(
        "--override", help="Reason to approve although the latest validation failed.")] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Approve a version's latest validation run (append-only; a failed run needs --override)."""
    _sign_off(ref, "approval", reviewer, note, override, root, as_json)


@registry_app.command("reject")
def reject_command(
    ref: Annotated[str, typer.Argument(metavar="NAME:VERSION")],
    reviewer: Annotated[str, typer.Option("--reviewer", help="Who signs off.")],
    note: Annotated[str, typer.Option("--note", help="Why the version is rejected.")],
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Reject a version (appended to its history; get_best_model(require_approval=True)
    skips it)."""
    _sign_off(ref, "rejection", reviewer, note, None, root, as_json)


def _sign_off(ref: str, decision: str, reviewer: str, note: str, override: str | None,
              root: Path | None, as_json: bool) -> None:
    try:
        if ":" not in ref:
            raise InvalidArgumentError(f"Sign off a specific version: NAME:VERSION. Got {ref!r}.")
        model = _resolve(root, ref)
        event = model.sign_off(decision, reviewer=reviewer, note=note, override=override)
    except FeatureStoreError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps(event, indent=2))
        return
    word = "approved" if decision == "approval" else "rejected"
    extra = f" (override: {event['override_reason']})" if event["override_reason"] else ""
    typer.echo(f"{model.name}:{model.version} {word} by {event['reviewer']} as history event "
               f"{event['seq']}, for validation run {event['validation_seq']} "
               f"({event['validation_status'] or 'not validated'}){extra}")


def latest_scorecard(model: Any) -> tuple[Any, str | None]:
    """The newest validation run's scorecard dict and its path relative to the version folder
    (a scorecard attached outside the history counts when there is no run); else None."""
    from model_registry.history import event_dir

    run = model.latest_validation()
    if run is not None:
        data = model.read_history_file(run["seq"], "scorecard.json")
        return json.loads(data), f"{event_dir(run['seq'])}/scorecard.html"
    card = _read_scorecard(model.model_path / "scorecard.json")
    html = model.model_path / "scorecard.html"
    return card, ("scorecard.html" if html.is_file() else None)


def report_entry(model: Any) -> dict[str, Any]:
    """One version's row of the report site: status, approval, latest scorecard, history."""
    from model_registry.history import approval_state, event_dir

    history = model.history()
    card, href = latest_scorecard(model)
    prefix = f"{model.name}/{model.version}/"
    runs = [{**{k: e.get(k) for k in ("seq", "kind", "created", "user", "status", "reviewer",
                                      "note", "override_reason", "failing_gates",
                                      "validation_seq", "code_commit", "scorecard_sha256")},
             "href": (prefix + event_dir(e["seq"]) + "/scorecard.html"
                      if e["kind"] == "validation" else None)} for e in history]
    status = model.validation_status if card is not None else "not validated"
    base = {"history": runs, "approval": approval_state(history),
            "href": None if href is None else prefix + href, "status": status}
    if isinstance(card, dict) and "metrics" in card:
        return {**card, **base}
    return {"name": model.name, "version": model.version, "metrics": {},
            "created_at": model.created, **base}


# ---------------------------------------------------------------------------------- helpers


def _open(root: Path | None) -> Any:
    """The local project's registry under ``root``, or None when it holds no registry yet."""
    from fstrain.kernel.store_root import resolve_root
    from fstrain.project import Project

    project_root = resolve_root(root)
    if project_root.exists() and not project_root.is_dir():
        from fstrain.kernel.errors import ConfigError

        raise ConfigError(f"store root {project_root} is a file, not a folder. Point --root or "
                          "FSTRAIN_HOME at a folder.")
    if not (project_root / "model_registry").is_dir():
        return None
    return Project(project_root).get_model_registry()


def _resolve(root: Path | None, ref: str) -> Any:
    from model_registry.errors import ModelNotFoundError
    from model_registry.naming import check_model_name

    name, sep, version_text = ref.partition(":")
    check_model_name(name)
    version: int | None = None
    if sep:
        if not version_text.isdigit() or int(version_text) < 1:
            raise InvalidArgumentError(
                f"VERSION in NAME[:VERSION] must be a positive integer. Got {version_text!r} "
                f"instead (e.g. {name}:3)."
            )
        version = int(version_text)
    registry = _open(root)
    if registry is None:
        raise ModelNotFoundError(
            f"No model registry under the store root; model '{name}' not found."
        )
    if version is None:
        models = registry.get_models(name)
        if not models:
            registry.get_model(name, 1)  # raises a ModelNotFoundError with suggestions
        return models[-1]
    return registry.get_model(name, version)


def _read_scorecard(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"error": f"scorecard.json could not be read: {exc}"}


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
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160)
    manifest = payload["manifest"]
    head = Table(title=f"Model '{payload['name']}' version {payload['version']}", show_header=False)
    head.add_column("field")
    head.add_column("value")
    fields = {
        "framework": manifest.get("framework"),
        "status": payload["validation_status"],
        "approval": payload["approval_status"],
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
    from rich.table import Table

    table = Table(title="History (append-only)")
    for column in ("#", "event", "when (UTC)", "user", "result", "details"):
        table.add_column(column)
    for e in payload["history"]:
        if e["kind"] == "validation":
            details = ("failing: " + "; ".join(e.get("failing_gates") or [])
                       if e.get("failing_gates") else "all gates passed")
            details += f"; scorecard sha256 {e.get('scorecard_sha256', '')[:12]}"
            result = e.get("status", "")
        else:
            details = (f"reviewer {e['reviewer']}: {e['note']}"
                       + (f" (override: {e['override_reason']})" if e.get("override_reason")
                          else "") + f"; on run {e.get('validation_seq')}")
            result = "approved" if e["kind"] == "approval" else "rejected"
        table.add_row(str(e["seq"]), e["kind"], e["created"][:19], e.get("user") or "",
                      result, details)
    if payload["history"]:
        console.print(table)
    else:
        console.print("No history: this version was never validated or reviewed.")


def _fail(exc: Exception) -> NoReturn:
    from pipelines.cli_errors import fail

    fail(exc)
