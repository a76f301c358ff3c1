"""What the pages show, read from the store on every request and shaped into plain values.

Nothing here writes: feature-group statistics are the stored ones (computing them is a write),
and a version whose files do not verify is shown as such with the reason, never hidden.
"""

from __future__ import annotations

import json
from typing import Any

from feature_store.core import late_data
from fstrain.kernel.errors import FeatureStoreError, InvalidArgumentError
from fstrain.serve import signoff_rules
from model_registry.history import approval_state, latest
from model_registry.naming import check_model_name

#: history files a page may embed (everything else in a run folder is data, not a page)
EMBEDDABLE = ("scorecard.html", "model_card.html")
_KEY_METRICS = ("roc_auc", "pr_auc", "f1", "accuracy", "log_loss", "rmse", "r2", "perplexity")


def _when(value: Any) -> str:
    """``2026-12-01 20:55:51`` from an ISO time (UTC, to the second)."""
    return str(value or "")[:19].replace("T", " ")


def parse_version(text: str, *, what: str = "version") -> int:
    """A positive version number from a URL part (anything else is a 404-worthy error)."""
    if not text.isdigit() or len(text) > 9 or int(text) < 1:
        raise InvalidArgumentError(f"{what} must be a positive integer. Got {text!r} instead.")
    return int(text)


def _metric_text(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for key, value in metrics.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append((key, f"{value:.4g}"))
    return out[:4]


def model_rows(registry: Any, name: str | None = None) -> tuple[list[dict[str, Any]], bool]:
    """Every version of every model (of ``name`` only, when given) with its status line (a
    version that does not verify gets status ``unverified`` and the reason), and whether the
    registry can list every model (the Hopsworks registry, as hsml, cannot: it needs a name)."""
    listing = getattr(registry, "list_models", None)
    if name:
        models = registry.get_models(check_model_name(name))
    else:
        models = listing() if callable(listing) else []
    rows = []
    for model in models:
        row: dict[str, Any] = {"name": model.name, "version": model.version,
                               "framework": model.framework,
                               "created": _when(model.created),
                               "td_version": model.training_dataset_version,
                               "feature_view": model.feature_view_name,
                               "metrics": _metric_text(model.training_metrics)}
        row["status"] = signoff_rules.status_of(model)
        rows.append(row)
    return rows, callable(listing)


def lineage(manifest: dict[str, Any]) -> dict[str, Any]:
    """Feature view, training-dataset version, feature-group commits, split, seed and hashes."""
    full = manifest.get("lineage") or {}
    td = full.get("training_dataset") or {}
    spec = td.get("split_spec") or {}
    return {
        "feature_view": manifest.get("feature_view_name"),
        "feature_view_version": manifest.get("feature_view_version"),
        "td_version": manifest.get("training_dataset_version"),
        "feature_group_commits": [_group_commit(k, c) for k, c in
                                  sorted((td.get("feature_group_commits") or {}).items())],
        "split": spec.get("strategy"),
        "seed": td.get("seed"),
        "splits": [(s, (m or {}).get("rows"), (m or {}).get("sha256"))
                   for s, m in (td.get("splits") or {}).items()],
        "content_hash": td.get("content_hash"),
    }


def _group_commit(key: str, commit: Any) -> dict[str, Any]:
    """``applicants:1`` pinned at a commit, with the group's page when the key names one."""
    name, _, version = str(key).rpartition(":")
    link = f"/feature-groups/{name}/{version}" if name and version.isdigit() else None
    return {"label": key, "commit": commit, "href": link}


def _event_row(event: dict[str, Any], check: dict[str, Any],
               hashes: dict[int, str]) -> dict[str, Any]:
    files = [f for f in EMBEDDABLE if f in (event.get("files") or {})]
    return {"seq": event.get("seq"), "kind": event.get("kind"),
            "created": _when(event.get("created")), "status": event.get("status"),
            "actor": signoff_rules.actor_text(event), "note": event.get("note"),
            "override": event.get("override_reason"), "supersede": event.get("supersede_reason"),
            "failing": event.get("failing_gates") or [],
            "deviation": signoff_rules.deviation_text(event),
            "run": event.get("validation_seq"), "evidence": signoff_rules.evidence_of(event, hashes),
            "signer": _signer_text(event), "files": files, "check": check}


def _signer_text(event: dict[str, Any]) -> str | None:
    """``key web (service) acting for rita as reviewer``, or None for an unsigned record."""
    block = event.get("signer") or {}
    if not event.get("signature") or not block:
        return None
    text = f"key {block.get('name')} ({block.get('key_role')})"
    if block.get("acting_for"):
        text += f" acting for {block['acting_for']} as {block.get('role')}"
    return text


def version_page(model: Any, others: list[int]) -> dict[str, Any]:
    """Everything the version page shows."""
    manifest = model.manifest
    checked = signoff_rules.check(model)
    history = checked.history
    run = next((e for e in reversed(history) if e.get("kind") == "validation"), None)
    return {
        "name": model.name, "version": model.version, "framework": model.framework,
        "description": manifest.get("description"),
        "created": _when(manifest.get("created")),
        "status": signoff_rules.status_from(checked),
        "problem": checked.problem,
        "metrics": _metric_text(manifest.get("metrics") or {}) + _run_metrics(run),
        "hyperparameters": sorted((manifest.get("hyperparameters") or {}).items())[:24],
        "lineage": lineage(manifest),
        "history": [_event_row(e, checked.checks.get(int(e["seq"]), {}), checked.hashes)
                    for e in reversed(history)],
        "latest_run": None if run is None else {
            "seq": run["seq"], "status": run.get("status"),
            "evidence": signoff_rules.evidence_of(run, checked.hashes),
            "files": [f for f in EMBEDDABLE if f in (run.get("files") or {})]},
        "decision": _decision(history),
        "head": checked.head,
        "others": [v for v in others if v != model.version],
        "code_commit": manifest.get("git_commit"),
    }


def _decision(history: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The sign-off in force (the newest, when no run came after it), or None."""
    signoff = latest(history, ("approval", "rejection"))
    if signoff is None or approval_state(history) == "not reviewed":
        return None
    return {"kind": signoff["kind"], "actor": signoff_rules.actor_text(dict(signoff)),
            "created": _when(signoff.get("created")), "note": signoff.get("note"),
            "override": signoff.get("override_reason"), "seq": signoff.get("seq"),
            "run": signoff.get("validation_seq")}


def _run_metrics(run: dict[str, Any] | None) -> list[tuple[str, str]]:
    if run is None:
        return []
    metrics = run.get("metrics") or {}
    return [(f"test {k}", f"{metrics[k]:.4g}") for k in _KEY_METRICS
            if isinstance(metrics.get(k), (int, float))]


def history_file(model: Any, seq: int, name: str) -> bytes:
    """An embeddable file of history event ``seq``, checked against its recorded hash."""
    if name not in EMBEDDABLE:
        raise InvalidArgumentError(
            f"model {model.name}:{model.version}: only {', '.join(EMBEDDABLE)} of a run are "
            f"shown. Got {name!r} instead."
        )
    return bytes(model.read_history_file(seq, name))


def _changes(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    a, b = a or {}, b or {}
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _kind(manifest: dict[str, Any]) -> dict[str, Any]:
    trainer = ((manifest.get("training_config") or {}).get("trainer") or {}).get("model")
    return {"framework": manifest.get("framework"), "model": trainer}


def _flat_lineage(manifest: dict[str, Any]) -> dict[str, Any]:
    lin = lineage(manifest)
    out = {"feature_view": f"{lin['feature_view']}:{lin['feature_view_version']}",
           "training_dataset_version": lin["td_version"], "split": lin["split"],
           "seed": lin["seed"]}
    out.update({f"commit {g['label']}": g["commit"] for g in lin["feature_group_commits"]})
    out.update({f"{s} sha256": h for s, _rows, h in lin["splits"]})
    return out


def diff_page(a: Any, b: Any) -> dict[str, Any]:
    """Model type, hyperparameters, training metrics, lineage and (when both were validated)
    the scorecards of two versions of the same model."""
    if a.name != b.name:
        raise InvalidArgumentError(f"a diff compares versions of one model. Got {a.name!r} and "
                                   f"{b.name!r} instead.")
    ma, mb = a.manifest, b.manifest
    sections = [("Model type", _changes(_kind(ma), _kind(mb))),
                ("Hyperparameters", _changes(ma.get("hyperparameters"), mb.get("hyperparameters"))),
                ("Training metrics", _changes(ma.get("metrics"), mb.get("metrics"))),
                ("Lineage", _changes(_flat_lineage(ma), _flat_lineage(mb))),
                ("Code", _changes({"commit": ma.get("git_commit")}, {"commit": mb.get("git_commit")}))]
    cards = [_scorecard(m) for m in (a, b)]
    scorecards = None
    if cards[0] is not None and cards[1] is not None:
        from validation.report_site import diff_scorecards

        scorecards = diff_scorecards(cards[0], cards[1])
    same_split = _flat_lineage(ma).get("test sha256") == _flat_lineage(mb).get("test sha256")
    return {"name": a.name, "a": a.version, "b": b.version, "sections": sections,
            "scorecards": scorecards, "same_test_split": same_split,
            "unvalidated": [m.version for m, c in zip((a, b), cards) if c is None]}


def _scorecard(model: Any) -> dict[str, Any] | None:
    run = model.latest_validation()
    if run is None or "scorecard.json" not in (run.get("files") or {}):
        return None
    card = json.loads(model.read_history_file(run["seq"], "scorecard.json"))
    return card if isinstance(card, dict) and "metrics" in card else None


# -- feature store ---------------------------------------------------------------------------


def feature_group_rows(fs: Any) -> list[dict[str, Any]]:
    """Every feature group version: keys, event time, features, latest commit."""
    rows = []
    for fg in fs.get_feature_groups():
        rows.append({"name": fg.name, "version": fg.version,
                     "primary_key": list(fg.primary_key), "event_time": fg.event_time,
                     "features": len(fg.features), "commit": _latest_commit(fg),
                     "description": fg.description})
    return rows


def _latest_commit(fg: Any) -> int | None:
    try:
        return int(fg.latest_commit_id())
    except (FeatureStoreError, TypeError, ValueError):
        return None


def feature_group_page(fg: Any) -> dict[str, Any]:
    """Schema, tags, the latest commits and the newest stored statistics of a feature group."""
    stored = getattr(fg, "get_all_statistics", None)
    stats = stored()[-1] if callable(stored) and stored() else None
    commits = fg.commit_details(limit=20) if _latest_commit(fg) is not None else {}
    return {
        "name": fg.name, "version": fg.version, "description": fg.description,
        "primary_key": list(fg.primary_key), "event_time": fg.event_time,
        "features": [{"name": f.name, "type": f.type, "description": f.description,
                      "key": f.name in fg.primary_key} for f in fg.features],
        "tags": sorted((fg.get_tags() or {}).items()),
        "commits": [(c, d) for c, d in commits.items()],
        "statistics": stats,
    }


def feature_view_rows(fs: Any) -> list[dict[str, Any]]:
    """Every feature view version with its labels and training-dataset versions."""
    return [{"name": fv.name, "version": fv.version, "labels": list(fv.labels),
             "features": len(fv.features),
             "training_datasets": [td.version for td in fv.get_training_datasets()]}
            for fv in fs.get_feature_views()]


def feature_view_page(fv: Any) -> dict[str, Any]:
    """A feature view: its features, labels, helper columns, query and training datasets."""
    return {"name": fv.name, "version": fv.version, "description": fv.description,
            "labels": list(fv.labels), "helpers": list(fv.training_helper_columns),
            "features": [(f.name, f.type) for f in fv.features],
            "query": fv.query.to_string(),
            "training_datasets": [_td_row(td) for td in fv.get_training_datasets()]}


def _td_row(td: Any) -> dict[str, Any]:
    spec = td.split_spec or {}
    return {"version": td.version, "created": _when(td.created_at), "state": td.state,
            "split": spec.get("strategy"), "seed": td.seed,
            "rows": [(s, m.get("rows")) for s, m in td.splits.items()]}


def training_dataset_page(fv: Any, version: int, models: list[Any]) -> dict[str, Any]:
    """A training-dataset version: splits with sizes and hashes, pinned commits, the event
    window, late-data exposure where recorded, and the models trained on it."""
    td = fv.get_training_dataset(version)
    spec = {k: v for k, v in (td.split_spec or {}).items() if v not in (None, False)}
    extra = td.extra or {}
    late = late_data.lines(extra) if "late_data" in extra else None
    return {"view": fv.name, "view_version": fv.version, **_td_row(td),
            "splits": [(s, m.get("rows"), m.get("sha256")) for s, m in td.splits.items()],
            "spec": sorted(spec.items()), "commits": sorted(td.feature_group_commits.items()),
            "window": (td.event_start_time, td.event_end_time),
            "content_hash": td.content_hash, "format": td.data_format, "type": td.type,
            "late_data": late,
            "models": [(m.name, m.version) for m in models
                       if m.feature_view_name == fv.name and m.feature_view_version == fv.version
                       and m.training_dataset_version == version]}
