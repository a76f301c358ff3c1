"""`fstrain registry dossier` through the real CLI on a copy of the session's signed adult
store: an approved version's dossier shows who signed what and the head `verify` prints, a
note's markup stays text, a tampered version's dossier says it does not verify (exit 1), and
the output folder is checked before anything is written."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.signed_store import Signed, cli

XSS = "<script>alert(document.cookie)</script>"


@pytest.fixture
def store(signed_adult_store: Signed, tmp_path: Path) -> Path:
    target = tmp_path / "store"
    shutil.copytree(signed_adult_store.root, target)
    return target


def _approve(signed: Signed, root: Path):
    override = [] if signed.status == "passed" else ["--override", f"accepted: {XSS}"]
    out = cli(["registry", "approve", signed.ref, "--note", XSS, *override], root,
              key=signed.key("rita"))
    assert out.exit_code == 0, out.output
    return out


def _dossier(signed: Signed, root: Path, out: Path, *extra: str):
    return cli(["registry", "dossier", signed.ref, "--out", str(out), *extra], root,
               FSTRAIN_TRUSTED_OWNER=signed.owner)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text += data


def test_the_dossier_of_an_approved_version_shows_signers_and_the_head(signed_adult_store, store,
                                                                        tmp_path):
    signed = signed_adult_store
    approved = _approve(signed, store)
    result = _dossier(signed, store, tmp_path / "dossier")
    assert result.exit_code == 0, result.output
    index = Path(result.output.splitlines()[0])
    data = json.loads(index.with_name("dossier.json").read_text())
    verified = cli(["registry", "verify", signed.ref, "--json"], store,
                   FSTRAIN_TRUSTED_OWNER=signed.owner)
    head = json.loads(verified.output)["versions"][0]["head"]
    assert data["verification"]["state"] == "verified" and data["verification"]["head"] == head
    assert head[:12] in approved.output and f"head {head}" in result.output
    assert data["verification"]["trusted_owner"] == signed.owner
    kinds = [(e["kind"], (e["signer"] or {}).get("name")) for e in data["history"]]
    assert kinds == [("creation", "dana"), ("validation", "vic"), ("approval", "rita")]
    assert all(e["signed"] and e["verification"] == [] for e in data["history"])
    page = index.read_text()
    parsed = _Text()
    parsed.feed(page)
    assert "script" not in parsed.tags and XSS in parsed.text
    assert data["history"][0]["signer"]["fingerprint"] in parsed.text
    assert sorted(p.name for p in (index.parent / "trust").iterdir()) == ["allowed_signers",
                                                                          "log.jsonl"]
    rows = {r["asks"]: r for r in data["frameworks"]}
    assert rows["Test logs and reports dated and signed by the responsible persons"][
        "status"] == "answered"
    assert rows["Independent validation, effective challenge"]["status"] == "answered"


def test_a_tampered_versions_dossier_shows_the_failure(signed_adult_store, store, tmp_path):
    signed = signed_adult_store
    folder = store / "model_registry" / signed.name / str(signed.version)
    page = folder / "history/0001/scorecard.html"
    page.write_text(page.read_text().replace("FAILED", "PASSED"))
    result = _dossier(signed, store, tmp_path / "dossier")
    assert result.exit_code == 1, result.output  # written, and says it does not verify
    assert "DOES NOT VERIFY" in result.output and "history/0001/scorecard.html" in result.output
    index = Path(result.output.splitlines()[0])
    data = json.loads(index.with_name("dossier.json").read_text())
    assert data["verification"]["ok"] is False
    run = next(e for e in data["history"] if e["seq"] == 1)
    assert any("scorecard.html" in p for p in run["verification"])
    states = {e["path"]: e["state"] for e in run["evidence"]}
    assert states["scorecard.html"] == "CHANGED since its record"
    text = index.read_text()
    assert text.index("DOES NOT VERIFY") < text.index('id="model"')  # first thing on the page
    signed_row = next(r for r in data["frameworks"] if "dated and signed" in r["asks"])
    assert signed_row["status"] == "not answered"


def test_the_out_folder_is_refused_before_anything_is_written(signed_adult_store, store,
                                                               tmp_path):
    signed = signed_adult_store
    inside = _dossier(signed, store, store / "model_registry" / "dossier")
    assert inside.exit_code == 2 and len(inside.output.strip().splitlines()) == 1
    assert "inside the store" in inside.output
    assert not (store / "model_registry" / "dossier").exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("x")
    refused = _dossier(signed, store, busy)
    assert refused.exit_code == 2 and "--force" in refused.output
    assert [p.name for p in busy.iterdir()] == ["mine.txt"]
    assert _dossier(signed, store, busy, "--force").exit_code == 0
    assert (busy / "index.html").is_file() and (busy / "mine.txt").read_text() == "x"
    unversioned = cli(["registry", "dossier", signed.name, "--out", str(tmp_path / "d")], store)
    assert unversioned.exit_code == 2 and "NAME:VERSION" in unversioned.output
