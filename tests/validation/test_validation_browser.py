"""Load a rendered scorecard.html and index.html in headless Chromium.

The test installs nothing: without a ``chromium`` binary it is skipped (CI installs one with
``apt-get install -y chromium``).
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from validation.plots import standard_plots
from validation.report_site import render_index
from validation.scorecard import Scorecard


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    pytest.skip("headless browser test needs a 'chromium' binary on PATH "
                "(apt-get install -y chromium); none found")


def _flags(profile: Path) -> list[str]:
    return ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run",
            "--disable-extensions", f"--user-data-dir={profile}"]


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(args, capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-2000:]
    return out


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.imgs: list[str] = []
        self.slice_rows: list[tuple[str, str]] = []
        self.version_rows: list[tuple[str, str]] = []
        self.links: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        elif tag == "tr" and "slice-row" in (a.get("class") or ""):
            self.slice_rows.append((a["data-column"], a["data-slice"]))
        elif tag == "tr" and a.get("class") == "version-row":
            self.version_rows.append((a["data-model"], a["data-version"]))
        elif tag == "a":
            self.links.append(a["href"])
        elif tag == "title":
            self._in_title = True

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def test_scorecard_and_index_load_in_headless_chromium(tmp_path, full_scorecard):
    browser = _chromium()
    fs = full_scorecard
    data = fs["card"].to_dict()
    data["model_name"] = "fraud_model"
    card = Scorecard.from_dict(data)
    images = standard_plots(y_true=fs["y"], y_score=fs["score"],
                            confusion=fs["metrics"]["confusion_matrix"],
                            threshold=fs["threshold"], explanation=fs["explanation"],
                            bias=fs["bias"])
    site = tmp_path / "site"
    page = site / "fraud_model" / "3" / "scorecard.html"
    page.parent.mkdir(parents=True)
    page.write_text(card.to_html(images), encoding="utf-8")
    index = site / "index.html"
    index.write_text(render_index([card.to_dict()]), encoding="utf-8")

    dom = _Dom()
    dom.feed(_run([browser, *_flags(tmp_path / "p1"), "--dump-dom", page.as_uri()]).stdout)
    assert dom.title == "Scorecard: fraud_model v3"
    assert len(dom.imgs) == len(images) > 0
    for src in dom.imgs:
        assert src.startswith("data:image/png;base64,")
        raw = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert raw.startswith(b"\x89PNG\r\n\x1a\n") and len(raw) > 1000
    expected = [(s["column"], s["value"]) for s in card.bias["slices"]]
    assert dom.slice_rows == expected
    assert ("race", "D") in dom.slice_rows and ("age", "(missing)") in dom.slice_rows

    shot = tmp_path / "scorecard.png"
    _run([browser, *_flags(tmp_path / "p2"), f"--screenshot={shot}", "--window-size=1200,1600",
          page.as_uri()])
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000

    idx = _Dom()
    idx.feed(_run([browser, *_flags(tmp_path / "p3"), "--dump-dom", index.as_uri()]).stdout)
    assert idx.version_rows == [("fraud_model", "3")]
    assert idx.links == ["fraud_model/3/scorecard.html"]
    assert (site / unquote(idx.links[0])).resolve() == page.resolve()


def test_the_index_is_rewritten_by_each_sign_off_and_keeps_its_status_column_in_view(adult_copy,
                                                                                     adult_store):
    """The report index is regenerated after every validation (the session store's run wrote
    it), approval and rejection, through the CLI; at 1400 px its status column is in the
    window, and stays in view when the table is scrolled sideways."""
    chromium = _chromium()
    from typer.testing import CliRunner

    from fstrain.cli.app import app

    index = adult_copy / "model_registry" / "index.html"
    assert "NOT REVIEWED" in index.read_text(encoding="utf-8")  # written by the validation run
    ref = f"{adult_store.name}:{adult_store.version}"
    sign = ["--reviewer", "rita", "--root", str(adult_copy)]
    out = CliRunner().invoke(app, ["registry", "reject", ref, "--note", "slices unread", *sign])
    assert out.exit_code == 0, out.output
    assert ">REJECTED<" in index.read_text(encoding="utf-8")
    out = CliRunner().invoke(app, ["registry", "approve", ref, "--note", "slices read",
                                   "--override", "disparity traced to base rates",
                                   "--supersede", "read them", *sign])
    assert out.exit_code == 0, out.output
    assert ">APPROVED (OVERRIDE)<" in index.read_text(encoding="utf-8")

    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])
        for width in (1400, 900):
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(index.as_uri())
            header = page.locator("th.status-col").first
            cell = page.locator("tr.version-row td.status-col").first
            assert header.inner_text().strip() == "Status"
            assert cell.inner_text().strip() == "FAILED"
            if width == 1400:  # the whole table fits: no sideways scrolling at all
                assert page.evaluate("document.documentElement.scrollWidth") <= width
                assert page.locator(".versions").first.evaluate(
                    "e => e.scrollWidth <= e.clientWidth")
            table = page.locator(".versions").first
            table.evaluate("e => { e.scrollLeft = e.scrollWidth; }")
            frame, box = table.bounding_box(), cell.bounding_box()
            assert frame is not None and box is not None
            assert frame["x"] <= box["x"] and box["x"] + box["width"] <= min(
                width, frame["x"] + frame["width"]), (width, frame, box)
            page.close()
        browser.close()
