"""``fstrain serve`` in a real browser against a real server (slow suite).

One uvicorn server per module (``fstrain serve`` as a subprocess, on loopback) over a copy of
the session's adult store; Debian's Chromium driven by Playwright for Python with
``executable_path`` (no browser download, never ``playwright install``). A reviewer logs in,
reads the adult scorecard, approves with an override, and the page and ``fstrain registry
show`` agree. The pages are checked at 1400×900 and 1280×800 for horizontal scroll and a
visible status column. ``FSTRAIN_UPDATE_SCREENSHOTS=1`` copies the screenshots to docs/img/.

A missing Chromium fails these tests (it does not skip them): ``apt-get install chromium``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
PASSWORD = "a reviewer's long passphrase"
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fstrain.cli", *args], input=stdin,
                          capture_output=True, text=True, timeout=120)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(adult_store, tmp_path_factory):
    """``(base_url, root, model_name, version)`` of a running ``fstrain serve``."""
    root = tmp_path_factory.mktemp("browser") / "store"
    shutil.copytree(adult_store.root, root)
    for user, role in (("rita", "reviewer"), ("vic", "viewer")):
        added = _cli("users", "add", user, "--role", role, "--root", str(root),
                     stdin=PASSWORD + "\n")
        assert added.returncode == 0, added.stderr
    port = _free_port()
    log = (root.parent / "server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "fstrain.cli", "serve", "--root", str(root),
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/login", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((root.parent / "server.log").read_text()) from None
                time.sleep(0.3)
        yield base, root, adult_store.name, adult_store.version
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"the browser tests need Debian's Chromium at {CHROMIUM} "
                    "(apt-get install -y chromium); .ci/run installs it")
    from playwright.sync_api import sync_playwright

    args = ["--disable-background-networking", "--disable-component-update", "--no-first-run",
            "--disable-sync", "--disable-gpu"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--no-sandbox")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
        yield chromium
        chromium.close()


def _shot(page, tmp_path: Path, name: str) -> None:
    target = tmp_path / f"{name}.png"
    page.screenshot(path=str(target), full_page=False)
    assert target.stat().st_size > 5_000
    if os.environ.get("FSTRAIN_UPDATE_SCREENSHOTS") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copy(target, DOCS_IMG / target.name)


def _login(page, base: str, user: str) -> None:
    page.goto(base + "/models")
    assert page.url.endswith("/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/models")


def _no_horizontal_scroll(page) -> None:
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"page is {width[0]} px wide in a {width[1]} px window"


def test_a_reviewer_reads_the_scorecard_and_approves_with_an_override(server, browser, tmp_path):
    base, root, name, version = server
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    _login(page, base, "rita")
    row = page.locator(f"tr.version-row[data-model={name}][data-version='{version}']")
    status = row.locator("td.status-col")
    assert status.is_visible() and "not reviewed" in status.inner_text()
    _no_horizontal_scroll(page)
    _shot(page, tmp_path, "serve-models")

    row.locator("a").first.click()
    page.wait_for_url(f"{base}/models/{name}/{version}")
    _no_horizontal_scroll(page)
    _shot(page, tmp_path, "serve-version")
    frame = page.locator("iframe[title^='scorecard.html']")
    frame.scroll_into_view_if_needed()
    scorecard = page.frame_locator("iframe[title^='scorecard.html']")
    assert f"{name}" in scorecard.locator("h1").first.inner_text()
    assert scorecard.locator("text=Gates").first.is_visible()
    page.evaluate("window.scrollBy(0, -60)")
    _shot(page, tmp_path, "serve-scorecard")
    run_status = page.locator("#signoff strong").first.inner_text()

    page.fill("textarea[name=note]", "Read the scorecard; fairness gap accepted for the pilot.")
    page.fill("textarea[name=override]", "Pilot on internal data only; re-validate in 30 days.")
    page.click("button[value=approve]")
    page.wait_for_url(f"{base}/models/{name}/{version}#history")
    page_status = page.locator("#status").inner_text()
    expected = "approved (override)" if run_status != "passed" else "approved"
    assert expected in page_status
    first_event = page.locator("ol.timeline li").first
    assert "approval" in first_event.inner_text() and "rita" in first_event.inner_text()
    assert "Approved by rita" in page.locator("#decision").inner_text()
    _shot(page, tmp_path, "serve-signoff")
    page.locator("#history").scroll_into_view_if_needed()
    _shot(page, tmp_path, "serve-history")

    shown = _cli("registry", "show", f"{name}:{version}", "--root", str(root), "--json")
    assert shown.returncode == 0, shown.stderr
    payload = json.loads(shown.stdout)
    assert payload["approval_status"] == expected  # the page and the registry agree
    last = payload["history"][-1]
    assert last["kind"] == "approval"
    assert [e["seq"] for e in payload["history"]] == [
        int(s) for s in reversed(page.locator("ol.timeline li").evaluate_all(
            "els => els.map(e => e.dataset.seq)"))]
    verified = _cli("registry", "verify", f"{name}:{version}", "--root", str(root), "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    state = json.loads(verified.stdout)["versions"][0]["state"]
    assert f"history: {state}" in page.locator("#verification").inner_text()
    assert not [e for e in errors if "Content Security Policy" in e], errors
    context.close()


@pytest.mark.parametrize("size", [(1400, 900), (1280, 800)])
def test_pages_fit_the_window_with_the_status_column_visible(server, browser, tmp_path, size):
    base, _root, name, version = server
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    _login(page, base, "vic")
    status = page.locator("th.status-col")
    box = status.bounding_box()
    assert status.is_visible() and box is not None and box["x"] + box["width"] <= size[0]
    for path in ("/models", f"/models/{name}/{version}", "/feature-groups",
                 "/feature-views", "/feature-groups/adult_employment/1"):
        response = page.goto(base + path)
        assert response is not None and response.ok, path
        _no_horizontal_scroll(page)
    assert page.locator("table.stats tbody tr").count() >= 5  # the stored statistics
    if size == (1400, 900):
        _shot(page, tmp_path, "serve-feature-group")
    page.goto(base + "/feature-views")
    page.locator("a.pill").first.click()  # a training-dataset version
    assert "sha256" in page.content()
    _no_horizontal_scroll(page)
    if size == (1280, 800):
        _shot(page, tmp_path, "serve-training-dataset")
    context.close()


def test_the_login_page_in_the_browser(server, browser, tmp_path):
    base, *_ = server
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    response = page.goto(base + "/login")
    assert response is not None and response.headers["x-frame-options"] == "DENY"
    page.fill("input[name=username]", "rita")
    page.fill("input[name=password]", "not the password")
    page.click("button[type=submit]")
    assert "Wrong user name or password." in page.content()
    _shot(page, tmp_path, "serve-login")
    context.close()
