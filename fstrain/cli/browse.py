"""``fstrain fg|fv|td``: browse feature groups, feature views and training datasets.

``list`` and ``show`` only read; ``td delete`` removes a training-dataset version, refusing one
that a registered model was trained on unless ``--force``. Every command takes ``--root``,
``--backend``, ``--json`` and ``--debug`` like the pipeline commands; ``NAME[:VERSION]`` means
version 1 when no version is given, and a training-dataset version may be ``latest``.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from feature_store.core import late_data
from fstrain.cli.errors import guarded
from fstrain.cli.options import BackendOpt, DebugOpt, JsonOpt, RootOpt, store_location
from fstrain.kernel.errors import InvalidArgumentError
from fstrain.kernel.versions import resolve_training_dataset_version
from fstrain.project import login

fg_app = typer.Typer(help="Feature groups: list, show.", no_args_is_help=True)
fv_app = typer.Typer(help="Feature views: list, show.", no_args_is_help=True)
td_app = typer.Typer(help="Training datasets of a feature view: list, show, delete.",
                     no_args_is_help=True)

RefArg = Annotated[str, typer.Argument(metavar="NAME[:VERSION]")]


def _project(root: Path | None, backend: str) -> Any:
    """The store to browse: an existing one only (browsing never creates a store)."""
    if backend != "local":
        return login(backend=backend)
    return login(backend=backend, root=store_location(root), create=False)


def _ref(ref: str) -> tuple[str, int]:
    name, sep, text = ref.partition(":")
    if not sep:
        return name, 1
    if not text.isdigit() or int(text) < 1:
        raise InvalidArgumentError(f"VERSION in NAME[:VERSION] must be a positive integer. Got "
                                   f"{text!r} instead (e.g. {name}:1).")
    return name, int(text)


def _run(debug: bool, as_json: bool, body: Any) -> None:
    """Run ``body() -> (payload, human)``; errors become one line and exit 2."""
    payload, human = guarded(body, debug=debug)
    typer.echo(json.dumps(payload, indent=2, default=str) if as_json else human)


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> str:
    table = Table(title=title)
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*["-" if v is None else str(v) for v in r])
    out = StringIO()
    Console(file=out, width=140).print(table)
    return out.getvalue().rstrip() + ("" if rows else "\n(none)")


# -- feature groups ------------------------------------------------------------------------------


def _fg_summary(fg: Any) -> dict[str, Any]:
    commit = fg.latest_commit_id() if fg.id is not None else None
    return {"name": fg.name, "version": fg.version, "primary_key": list(fg.primary_key),
            "event_time": fg.event_time, "features": len(fg.features), "commit": commit,
            "description": fg.description}


@fg_app.command("list")
def fg_list(root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False,
            debug: DebugOpt = False) -> None:
    """Every feature group version: keys, event time, feature count, latest commit."""
    def body() -> tuple[Any, str]:
        rows = [_fg_summary(fg) for fg in _project(root, backend).get_feature_store()
                .get_feature_groups()]
        return rows, _table("Feature groups", ["name", "version", "primary key", "event time",
                                               "features", "commit"],
                            [[r["name"], r["version"], ", ".join(r["primary_key"]),
                              r["event_time"], r["features"], r["commit"]] for r in rows])
    _run(debug, as_json, body)


@fg_app.command("show")
def fg_show(ref: RefArg, commits: Annotated[int, typer.Option(help="Latest commits to list.")] = 5,
            root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False,
            debug: DebugOpt = False) -> None:
    """One feature group: features with types, keys, tags and its latest commits."""
    def body() -> tuple[Any, str]:
        name, version = _ref(ref)
        fg = _project(root, backend).get_feature_store().get_feature_group(name, version)
        payload = {**_fg_summary(fg),
                   "features": [{"name": f.name, "type": f.type, "description": f.description}
                                for f in fg.features],
                   "tags": fg.get_tags(),
                   "commits": {str(k): v for k, v in fg.commit_details(limit=commits).items()}}
        lines = [f"feature group {name} v{version}: {fg.description or ''}".rstrip(),
                 f"primary key: {', '.join(fg.primary_key)}   event time: {fg.event_time or '-'}",
                 f"tags: {payload['tags'] or '-'}", "features:"]
        lines += [f"  {f['name']}: {f['type']}" for f in payload["features"]]
        lines.append("commits (newest first):")
        lines += [f"  {c}: {d.get('committedOn')} +{d.get('rowsInserted', 0)} "
                  f"~{d.get('rowsUpdated', 0)} -{d.get('rowsDeleted', 0)}"
                  for c, d in payload["commits"].items()]
        return payload, "\n".join(lines)
    _run(debug, as_json, body)


# -- feature views -------------------------------------------------------------------------------


def _all_views(fs: Any) -> list[Any]:
    return list(fs.get_feature_views())


@fv_app.command("list")
def fv_list(root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False,
            debug: DebugOpt = False) -> None:
    """Every feature view version: labels, features and training-dataset versions."""
    def body() -> tuple[Any, str]:
        rows = [{"name": fv.name, "version": fv.version, "labels": list(fv.labels),
                 "features": len(fv.features),
                 "training_datasets": [td.version for td in fv.get_training_datasets()]}
                for fv in _all_views(_project(root, backend).get_feature_store())]
        return rows, _table("Feature views", ["name", "version", "labels", "features",
                                              "training datasets"],
                            [[r["name"], r["version"], ", ".join(r["labels"]), r["features"],
                              ", ".join(map(str, r["training_datasets"])) or "-"] for r in rows])
    _run(debug, as_json, body)


@fv_app.command("show")
def fv_show(ref: RefArg, root: RootOpt = None, backend: BackendOpt = "local",
            as_json: JsonOpt = False, debug: DebugOpt = False) -> None:
    """One feature view: its query, features, labels, helper columns, training datasets."""
    def body() -> tuple[Any, str]:
        name, version = _ref(ref)
        fv = _project(root, backend).get_feature_store().get_feature_view(name, version)
        payload = {"name": fv.name, "version": fv.version, "description": fv.description,
                   "labels": list(fv.labels),
                   "training_helper_columns": list(fv.training_helper_columns),
                   "features": [{"name": f.name, "type": f.type} for f in fv.features],
                   "query": fv.query.to_string(),
                   "training_datasets": [td.version for td in fv.get_training_datasets()]}
        lines = [f"feature view {name} v{version}: {fv.description or ''}".rstrip(),
                 f"labels: {', '.join(payload['labels']) or '-'}   helper columns: "
                 f"{', '.join(payload['training_helper_columns']) or '-'}",
                 f"training datasets: {', '.join(map(str, payload['training_datasets'])) or '-'}",
                 "features:"]
        lines += [f"  {f['name']}: {f['type']}" for f in payload["features"]]
        lines += ["query:", "  " + payload["query"].replace("\n", "\n  ")]
        return payload, "\n".join(lines)
    _run(debug, as_json, body)


# -- training datasets ---------------------------------------------------------------------------


def _dependents(project: Any, fv: Any, version: int) -> list[str]:
    """``name:version`` of every registered model trained on this training-dataset version."""
    out = []
    for m in project.get_model_registry().list_models():
        if (m.feature_view_name == fv.name and m.feature_view_version == fv.version
                and m.training_dataset_version == version):
            out.append(f"{m.name}:{m.version}")
    return out


def _td_summary(td: Any) -> dict[str, Any]:
    spec = td.split_spec or {}
    return {"version": td.version, "created": td.created_at, "state": td.state,
            "split": spec.get("strategy"), "seed": td.seed,
            "rows": {s: m.get("rows") for s, m in td.splits.items()}}


@td_app.command("list")
def td_list(view: RefArg, root: RootOpt = None, backend: BackendOpt = "local",
            as_json: JsonOpt = False, debug: DebugOpt = False) -> None:
    """The training-dataset versions of a feature view: split, seed, rows per split."""
    def body() -> tuple[Any, str]:
        name, version = _ref(view)
        fv = _project(root, backend).get_feature_store().get_feature_view(name, version)
        rows = [_td_summary(td) for td in fv.get_training_datasets()]
        return rows, _table(f"Training datasets of {name} v{version}",
                            ["version", "created", "split", "seed", "rows", "state"],
                            [[r["version"], (r["created"] or "")[:19], r["split"], r["seed"],
                              ", ".join(f"{k}={v}" for k, v in r["rows"].items()), r["state"]]
                             for r in rows])
    _run(debug, as_json, body)


def _view_version(view: str, version: str, root: Path | None,
                  backend: str) -> tuple[Any, Any, int]:
    """The project, the feature view ``NAME[:VERSION]`` and its training-dataset version
    (a number or ``latest``)."""
    name, fv_version = _ref(view)
    project = _project(root, backend)
    fv = project.get_feature_store().get_feature_view(name, fv_version)
    return project, fv, resolve_training_dataset_version(fv, version)


@td_app.command("show")
def td_show(view: RefArg,
            version: Annotated[str, typer.Argument(help="Training-dataset version or 'latest'.")],
            root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False,
            debug: DebugOpt = False) -> None:
    """A version's lineage: feature-group commits, split, seed, hashes, late data and the
    models on it."""

    def body() -> tuple[Any, str]:
        project, fv, v = _view_version(view, version, root, backend)
        name, fv_version = fv.name, fv.version
        td = fv.get_training_dataset(v)
        payload = {**_td_summary(td), "feature_view": name, "feature_view_version": fv_version,
                   "feature_group_commits": dict(td.feature_group_commits),
                   "split_spec": td.split_spec,
                   "sha256": {s: m.get("sha256") for s, m in td.splits.items()},
                   "content_hash": td.content_hash,
                   "event_window": [td.event_start_time, td.event_end_time],
                   "as_known": bool((td.extra or {}).get("as_known")),
                   "late_data": (td.extra or {}).get("late_data"),
                   "models": _dependents(project, fv, v)}
        spec = {k: val for k, val in (td.split_spec or {}).items()
                if val not in (None, False) and k not in ("strategy", "seed")}
        lines = [f"training dataset {name} v{fv_version} / v{v} ({td.state}, {td.created_at})",
                 f"split: {payload['split']}  seed: {td.seed}  {spec}",
                 f"event window: [{td.event_start_time or '-inf'}, {td.event_end_time or '+inf'})",
                 "feature-group commits: " + ", ".join(
                     f"{g}@{c}" for g, c in payload["feature_group_commits"].items()),
                 "splits:"]
        lines += [f"  {s}: {payload['rows'][s]} rows  sha256 {h}" for s, h in payload["sha256"].items()]
        lines.append("late data" + (" (joined as known):" if payload["as_known"] else ":"))
        lines += [f"  {line}" for line in late_data.lines(td.extra)]
        lines.append(f"models trained on it: {', '.join(payload['models']) or '-'}")
        return payload, "\n".join(lines)
    _run(debug, as_json, body)


@td_app.command("delete")
def td_delete(view: RefArg,
              version: Annotated[str, typer.Argument(help="Training-dataset version or 'latest'.")],
              force: Annotated[bool, typer.Option("--force", help="Delete even if registered models were trained on it.")] = False,
              root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False,
              debug: DebugOpt = False) -> None:
    """Delete a version's metadata and files; refused while a registered model depends on it."""
    def body() -> tuple[Any, str]:
        project, fv, v = _view_version(view, version, root, backend)
        name, fv_version = fv.name, fv.version
        fv.get_training_dataset(v)  # a missing version is an error before any check
        models = _dependents(project, fv, v)
        if models and not force:
            raise InvalidArgumentError(
                f"training dataset {name} v{fv_version} / v{v} is the lineage of registered "
                f"model(s) {', '.join(models)}: deleting it would leave them unreproducible and "
                "unvalidatable. Delete those model versions first, or pass --force."
            )
        fv.delete_training_dataset(v)
        payload = {"feature_view": name, "feature_view_version": fv_version, "version": v,
                   "deleted": True, "orphaned_models": models}
        human = f"deleted training dataset {name} v{fv_version} / v{v}"
        if models:
            human += f" (models now without their data: {', '.join(models)})"
        return payload, human
    _run(debug, as_json, body)
