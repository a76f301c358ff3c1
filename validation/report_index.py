"""The local registry's report site, ``<registry>/index.html``, built from what the registry
holds now: one row per model version (status, approval, key metrics, a link to its current
review page under ``review-pages/``), the version's history beneath.

``fstrain registry report`` writes it, and so does every validation run, approval and rejection
(:func:`refresh_report_index`: the model-validation pipeline, ``fstrain registry approve`` /
``reject`` and the web application's sign-off), so the page a reviewer opens is never a stale
snapshot. A version that does not verify is a row ``unverified`` with the reason, never hidden.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from fstrain.kernel.errors import FeatureStoreError
from fstrain.kernel.timeutil import utc_now_iso
from model_registry.history import approval_state, event_dir

INDEX_FILE = "index.html"


def checked_status(model: Any) -> tuple[str, str, Any]:
    """``(validation status, approval, report)`` of a version for a listing: a version that
    does not verify is shown ``unverified`` with the reason in place of its approval (never
    hidden, never a traceback)."""
    report = model.verify_history()
    if report.ok:
        try:
            return model.validation_status, model.approval_status, report
        except FeatureStoreError as exc:  # pragma: no cover - verification read it already
            report.problems.append(str(exc))
            report.state = "broken"
    return "unverified", report.reason(), report


def read_scorecard(path: Path) -> Any:
    """A ``scorecard.json`` as a dict, None when absent, ``{"error": ...}`` when unreadable."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"error": f"scorecard.json could not be read: {exc}"}


def latest_scorecard(model: Any) -> tuple[Any, str | None]:
    """The newest validation run's scorecard dict and its path relative to the version folder
    (a scorecard attached outside the history counts when there is no run); else None."""
    run = model.latest_validation()
    if run is not None:
        if "scorecard.json" not in run.get("files", {}):
            return {}, None  # a run recorded from Python without a scorecard: no page to link
        data = model.read_history_file(run["seq"], "scorecard.json")
        return json.loads(data), f"{event_dir(run['seq'])}/scorecard.html"
    card = read_scorecard(model.model_path / "scorecard.json")
    html = model.model_path / "scorecard.html"
    return card, ("scorecard.html" if html.is_file() else None)


def report_entry(model: Any) -> dict[str, Any]:
    """One version's row of the report site: status, approval, latest scorecard, history; a
    version that does not verify is a row ``unverified`` with the reason (and no links)."""
    status, reason, report = checked_status(model)
    if not report.ok:
        return {"name": model.name, "version": model.version, "metrics": {}, "history": [],
                "created_at": model.created, "status": status, "approval": reason,
                "href": None, "verification": report.state}
    history = model.history()
    card, href = latest_scorecard(model)
    prefix = f"{model.name}/{model.version}/"
    runs = [{**{k: e.get(k) for k in ("seq", "kind", "created", "user", "status", "reviewer",
                                      "note", "override_reason", "failing_gates",
                                      "policy_deviation", "validation_seq", "code_commit",
                                      "scorecard_sha256", "signer", "supersedes",
                                      "supersede_reason", "run_record_sha256", "trained_by")},
             "href": (prefix + event_dir(e["seq"]) + "/scorecard.html"
                      if e["kind"] == "validation" else None)} for e in history]
    status = model.validation_status if card is not None else "not validated"
    base = {"history": runs, "approval": approval_state(history),
            "href": None if href is None else prefix + href, "status": status,
            "verification": report.state}
    if isinstance(card, dict) and "metrics" in card:
        return {**card, **base}
    return {"name": model.name, "version": model.version, "metrics": {},
            "created_at": model.created, **base}


def with_review_page(site: Path, model: Any, entry: dict[str, Any]) -> dict[str, Any]:
    """Write the version's current review page into the report site; link the entry to it."""
    from validation.review_page import render_review_page, review_page_path

    page = render_review_page(model, rendered_at=utc_now_iso("seconds"))
    if page is None:
        return entry
    rel = review_page_path(model.name, model.version)
    (site / rel).parent.mkdir(parents=True, exist_ok=True)
    (site / rel).write_text(page, encoding="utf-8")
    return {**entry, "href": rel}


def write_report_index(registry: Any) -> tuple[Path, list[dict[str, Any]]]:
    """Write ``index.html`` (and every version's review page) into a local registry's folder;
    returns its path and the rows it shows."""
    from validation.report_site import render_index

    site = Path(registry.root)
    entries = [with_review_page(site, model, report_entry(model))
               for model in registry.list_models()]
    index = site / INDEX_FILE
    tmp = site / f".{INDEX_FILE}.{uuid.uuid4().hex}.tmp"
    tmp.write_text(render_index(entries), encoding="utf-8")
    tmp.replace(index)  # a reader never sees half a page
    return index, entries


def refresh_report_index(registry: Any) -> Path | None:
    """Regenerate the report index after a validation run or a sign-off; None for a registry
    without a local folder (Hopsworks shows its registry in its own UI)."""
    if not isinstance(getattr(registry, "root", None), Path):
        return None
    return write_report_index(registry)[0]
