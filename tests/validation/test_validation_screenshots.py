"""The adult scorecard's header and sign-off block in headless Chromium (slow suite), for the
docs: a copy of the session's adult store is signed off (with an override: the run failed),
``fstrain registry report`` writes the version's review page, and Playwright drives Debian's
Chromium (``executable_path``, no browser download) to screenshot the two blocks.
``FSTRAIN_UPDATE_SCREENSHOTS=1`` copies them to docs/img/.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


def test_review_page_header_and_sign_off_block(adult_store, adult_copy, tmp_path):
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"this test needs Debian's Chromium at {CHROMIUM} (apt-get install -y "
                    "chromium); .ci/run installs it")
    import feature_store
    from fstrain.cli.registry import registry_app
    from playwright.sync_api import sync_playwright

    project = feature_store.login(backend="local", root=adult_copy)
    model = project.get_model_registry().get_model(adult_store.name, adult_store.version)
    model.sign_off("approval", reviewer="rita", note="slices read; denials get human review",
                   override="sex disparity traced to base rates; monitored monthly")
    report = CliRunner().invoke(registry_app, ["report", "--root", str(adult_copy)])
    assert report.exit_code == 0, report.output
    page_file = Path(report.output.strip()).parent / "review-pages" / adult_store.name / (
        f"{adult_store.version}.html")
    assert page_file.is_file()
    args = ["--disable-background-networking", "--disable-component-update", "--no-first-run",
            "--disable-sync", "--disable-gpu"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--no-sandbox")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(page_file.as_uri())
        assert page.title() == f"Scorecard: {adult_store.name} v{adult_store.version}"
        rows = page.locator("#signoff tr.signoff-row")
        assert rows.count() == 1
        cells = [c.strip() for c in rows.first.locator("td").all_inner_texts()]
        assert cells[:5] == ["approved", "run 1", "unsigned (recorded name: rita)", "unsigned",
                             "unsigned"]
        assert cells[7].startswith("sex disparity traced")
        shots = {"scorecard-header.png": page.locator("header"),
                 "scorecard-signoff.png": page.locator("#signoff")}
        for name, element in shots.items():
            element.screenshot(path=str(tmp_path / name))
            assert (tmp_path / name).stat().st_size > 5_000
        browser.close()
    if os.environ.get("FSTRAIN_UPDATE_SCREENSHOTS") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        for name in shots:
            shutil.copy(tmp_path / name, DOCS_IMG / name)
