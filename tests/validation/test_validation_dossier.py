"""The dossier folder of a real adult version (a copy of the session's store): evidence copied
byte for byte and compared with the hashes its records name, every free text escaped, the
output folder checked, and every Annex IV / SR 11-7 item answered or plainly not."""

from __future__ import annotations

import hashlib
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

import feature_store
from fstrain.kernel.errors import InvalidArgumentError
from validation.dossier import collect_dossier, write_dossier

XSS = "<script>alert('owned')</script><img src=x onerror=alert(1)>"
INTACT = {"ok": True, "problems": [], "head": "f" * 64, "signed": False}


def _model(root: Path, name: str, version: int):
    project = feature_store.login(backend="local", root=root)
    registry = project.get_model_registry()
    return project, registry, registry.get_model(name, version)


def _write(root, adult_store, out, verification=INTACT, **kwargs):
    project, registry, model = _model(root, adult_store.name, adult_store.version)
    dossier = collect_dossier(model, verification, versions=registry.get_models(model.name))
    return write_dossier(dossier, out, store_roots=[project.root], **kwargs)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text += data


def test_the_dossier_copies_evidence_and_escapes_every_note(adult_store, adult_copy, tmp_path):
    from pipelines import model_validation

    project, _, model = _model(adult_copy, adult_store.name, adult_store.version)
    cards = adult_copy / "model_cards"
    cards.mkdir()
    (cards / f"{model.name}.yaml").write_text(json.dumps(
        {"intended_use": XSS, "bias_evaluation": "No bias concerns."}))
    model_validation.run(project, model_validation.ModelValidationConfig(
        model_name=model.name, version=model.version, bootstrap_resamples=30, shap_samples=30))
    model.sign_off("rejection", reviewer=XSS, note=XSS)
    index = _write(adult_copy, adult_store, tmp_path / "dossier")
    page = index.read_text()
    parsed = _Tags()
    parsed.feed(page)
    assert not [t for t, _ in parsed.tags if t in ("script", "img", "iframe", "object")]
    assert not [a for _, attrs in parsed.tags for a in attrs if a.startswith("on")]
    assert XSS in parsed.text  # shown as text, whole
    folder = index.parent
    data = json.loads((folder / "dossier.json").read_text())
    assert [e["kind"] for e in data["history"]][-3:] == ["validation", "validation", "rejection"]
    assert data["history"][-1]["note"] == XSS
    card = data["model_card"]
    assert card["run"] == data["history"][-2]["seq"] and card["completeness"] < 1
    owner = {t["key"]: t["text"] for s in card["sections"] for t in s["owner"]}
    assert owner["intended_use"] == XSS and card["contradictions"]  # "No bias concerns."
    assert "contradicts the generated findings" in page
    intended = next(r for r in data["frameworks"] if r["asks"] == "A clear statement of purpose")
    assert intended["status"] == "answered"
    for run in data["scorecards"]:
        base = f"{run['run']:04d}"
        record = json.loads((folder / "history" / base / "record.json").read_text())
        for rel, sha in record["files"].items():  # byte for byte what the run recorded
            assert hashlib.sha256((folder / "runs" / base / rel).read_bytes()).hexdigest() == sha
    sums = dict(reversed(line.split("  ")) for line in
                (folder / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == {p.relative_to(folder).as_posix() for p in folder.rglob("*")
                         if p.is_file()} - {"SHA256SUMS"}
    for rel, sha in sums.items():
        assert hashlib.sha256((folder / rel).read_bytes()).hexdigest() == sha
    run = data["scorecards"][-1]
    assert run["unchanged"] and run["metrics"]["roc_auc"]["lower"] is not None
    assert data["lineage"]["feature_group_commits"] and data["lineage"]["splits"]["test"]["sha256"]
    links = [a["href"] for t, a in parsed.tags if t == "a" and not a["href"].startswith("#")]
    assert links and all((folder / link).is_file() for link in links)  # no dead, no outside link


def test_a_changed_scorecard_shows_in_the_dossier(adult_store, adult_copy, tmp_path):
    page = (adult_copy / "model_registry" / adult_store.name / str(adult_store.version)
            / "history/0001/scorecard.html")
    page.write_text(page.read_text().replace("FAILED", "PASSED"))
    broken = {"ok": False, "problems": ["history/0001/scorecard.html: changed"], "head": None}
    index = _write(adult_copy, adult_store, tmp_path / "dossier", verification=broken)
    data = json.loads(index.with_name("dossier.json").read_text())
    states = {e["path"]: e["state"] for e in data["history"][1]["evidence"]}  # run 1
    assert states["scorecard.html"] == "CHANGED since its record"
    assert states["scorecard.json"] == "matches its record"
    assert data["scorecards"][0]["unchanged"] is False
    text = index.read_text()
    assert "DOES NOT VERIFY" in text and "history/0001/scorecard.html: changed" in text
    rows = {(r["ref"], r["asks"][:20]): r for r in data["frameworks"]}
    signed = next(r for r in data["frameworks"] if "dated and signed" in r["asks"])
    assert signed["status"] == "not answered" and "does NOT verify" in signed["answer"]
    assert rows


def test_every_auditor_item_is_answered_or_plainly_not(adult_store, adult_copy, tmp_path):
    index = _write(adult_copy, adult_store, tmp_path / "d")
    rows = json.loads(index.with_name("dossier.json").read_text())["frameworks"]
    annex = {r["ref"] for r in rows if r["framework"] == "EU AI Act Annex IV"}
    assert annex >= {"1", "2(a)", "2(b)", "2(c)", "2(d)", "2(e)", "2(f)", "2(g)", "2(h)", "3",
                     "4", "5", "6", "7", "8", "9"}
    assert len([r for r in rows if r["framework"] == "SR 11-7"]) >= 12
    assert {r["status"] for r in rows} <= {"answered", "partly", "not answered"}
    for r in rows:
        assert r["answer"] and (r["where"] or r["status"] == "not answered")
    monitoring = next(r for r in rows if r["ref"] == "9")
    assert monitoring["status"] == "not answered" and "not covered" in monitoring["answer"]
    signed = next(r for r in rows if "dated and signed" in r["asks"])
    assert signed["status"] == "partly" and "unsigned" in signed["answer"]  # no trust list
    page = index.read_text()
    for anchor in {r["where"] for r in rows if r["where"]}:
        assert f'id="{anchor[1:]}"' in page


def test_the_out_folder_is_checked(adult_store, adult_copy, tmp_path):
    with pytest.raises(InvalidArgumentError, match="inside the store"):
        _write(adult_copy, adult_store, adult_copy / "dossier")
    assert not (adult_copy / "dossier").exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(InvalidArgumentError, match="not empty.*--force"):
        _write(adult_copy, adult_store, busy)
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"]
    _write(adult_copy, adult_store, busy, force=True)
    (busy / "runs/0001/stale.png").write_bytes(b"x")  # not listed: left alone
    _write(adult_copy, adult_store, busy, force=True)  # replaces the earlier dossier
    assert (busy / "notes.txt").read_text() == "mine" and (busy / "index.html").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".dossier-")]
