"""What the manual states about the code is checked against the code (issue 32): the use cases
it says are regressions, and every model-card key the owner's file accepts."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_the_known_limits_name_every_shipped_regression():
    from feature_views import USE_CASES, get_use_case

    regressions = [n for n in USE_CASES if get_use_case(n).task == "regression"]
    assert regressions == ["airquality"]
    text = " ".join((DOCS / "known-limits.md").read_text().split())
    assert "No shipped use case is a regression" not in text
    claim = re.search(r"shipped use cases? (?:is|are) (?:a )?regressions?: ([^.(]*)", text)
    assert claim is not None, "known-limits.md says which shipped use cases are regressions"
    assert sorted(re.findall(r"`(\w+)`", claim.group(1))) == regressions


def test_every_model_card_key_is_documented_for_the_owner():
    from validation.model_card_owner import OPTIONAL, REQUIRED

    page = (DOCS / "guides" / "data-scientist.md").read_text()
    rows = dict(re.findall(r"^\| `([\w.]+)` \| [^|]+ \| (yes|no) \|$", page, re.M))
    assert rows == {**dict.fromkeys(REQUIRED, "yes"), **dict.fromkeys(OPTIONAL, "no")}
