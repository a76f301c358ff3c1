"""A version's current review page: its latest validation run's scorecard with the sign-off
block as the history stands now.

A run's own ``history/<n>/scorecard.html`` is immutable and was written before anyone signed
it off, so it can only say "no sign-off yet". ``fstrain registry report`` writes this page
beside ``index.html`` instead (``review-pages/<model>/<version>.html``, outside every version
folder, whose files the manifest lists): the run's hash-checked ``scorecard.json`` and images,
rendered with every approval and rejection recorded since, and a note naming the run and the
scorecard's sha256 so a reader can check it against the run's immutable files.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from validation.render import esc
from validation.scorecard import scorecard_html

#: The report site's folder of review pages (a hyphen: never a model name).
REVIEW_DIR = "review-pages"


#: what every scorecard fstrain's model validation writes holds (validation.scorecard)
SCORECARD_KEYS = frozenset({"model_name", "model_version", "task", "status"})


def review_page_path(name: str, version: int | str) -> str:
    """``review-pages/<name>/<version>.html``, relative to the report site's index."""
    return f"{REVIEW_DIR}/{name}/{version}.html"


def render_review_page(model: Any, *, rendered_at: str) -> str | None:
    """The current review page of ``model`` (a registry model version), or None when it was
    never validated or its latest run's ``scorecard.json`` is not one fstrain's validation
    wrote (a run recorded through the API with a scorecard of its own: the report links that
    run's own page). Every file is read through ``model.read_history_file`` (hash-checked)."""
    run = model.latest_validation()
    if run is None or "scorecard.json" not in (run.get("files") or {}):
        return None
    seq = int(run["seq"])
    raw = model.read_history_file(seq, "scorecard.json")
    card = json.loads(raw)
    if not isinstance(card, dict) or not SCORECARD_KEYS <= card.keys():
        return None
    images = {name[len("images/"):-len(".png")]: model.read_history_file(seq, name)
              for name in sorted(run.get("files") or {})
              if name.startswith("images/") and name.endswith(".png")}
    page = scorecard_html(card, images, model.history(), seq)
    note = (f'<p class="todo" id="review-page">Review page rendered by <code>fstrain registry '
            f"report</code> at {esc(rendered_at)} UTC from run {seq}'s scorecard.json (sha256 "
            f"{esc(hashlib.sha256(raw).hexdigest())}, checked against the run's record), with "
            f"the sign-offs recorded until then. The run's own page, written before any "
            f"sign-off, is history/{seq:04d}/scorecard.html of the version.</p>")
    return page.replace("<body>\n", "<body>\n" + note + "\n", 1)
