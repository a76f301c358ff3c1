"""Signed, chained history on Hopsworks, through the real SDK against the fake cluster: the
records are files of the model version (its Files folder in HopsFS), signed with keys the
project's trust list enrols, and they verify the same way as on the local backend, from any
client: an edit made on the cluster is found even by a client whose local copy is intact, a
forged record with its hashes updated is found by its signature, a removed record by the chain,
and the dossier of a version shows all of it."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sdk_server import serve

import feature_store
from model_registry.audit import keys
from model_registry.audit.trust import ENV_TRUSTED_OWNER
from model_registry.hopsworks.trust import HopsworksTrustStore

PROJECT = "fstrain_ci"
ROLES = (("olga", "owner"), ("dana", "data-scientist"), ("vic", "validator"),
         ("rita", "reviewer"))


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A fake cluster whose project has a trust list and a model version trained by dana,
    validated by vic and approved by rita, and two clients of it."""
    base = tmp_path_factory.mktemp("hw_audit")
    with pytest.MonkeyPatch.context() as env:
        for var in ("REST_ENDPOINT", "HOPSWORKS_HOST", "HOPSWORKS_PROJECT", "HOPSWORKS_API_KEY",
                    keys.ENV_KEY, ENV_TRUSTED_OWNER):
            env.delenv(var, raising=False)
        with serve(base / "cluster") as fake:
            one = feature_store.login(backend="hopsworks", root=base / "one", **fake.login_kwargs)
            two = feature_store.login(backend="hopsworks", root=base / "two", **fake.login_kwargs)
            paths = {}
            for name, _role in ROLES:
                paths[name] = base / "keys" / name
                keys.generate_key(paths[name], comment=name)
            owner = keys.load_private_key(paths["olga"])
            trust = HopsworksTrustStore(one)
            for name, role in ROLES:
                trust.enrol(owner, name=name, role=role, public_key=keys.public_key_line(
                    keys.load_private_key(paths[name])))
            env.setenv(ENV_TRUSTED_OWNER, keys.fingerprint(owner))
            src = base / "model"
            src.mkdir()
            (src / "model.json").write_text('{"trees": 3}')
            env.setenv(keys.ENV_KEY, str(paths["dana"]))
            model = one.get_model_registry().python.create_model(
                "fraud_xgb", metrics={"roc_auc": 0.91}).save(str(src))
            env.setenv(keys.ENV_KEY, str(paths["vic"]))
            card = json.dumps({"roc_auc": 0.91, "status": "passed"}).encode()
            model.record_validation("passed", {"scorecard_sha256": hashlib.sha256(card).hexdigest(),
                                               "failing_gates": []},
                                    {"scorecard.json": card,
                                     "scorecard.html": b"<p>PASSED</p>"})
            env.setenv(keys.ENV_KEY, str(paths["rita"]))
            model.sign_off("approval", note="<b>reviewed</b>")
            env.delenv(keys.ENV_KEY)
            yield {"fake": fake, "one": one, "two": two, "version": model.version, "base": base}
            assert not fake.server.unrouted, fake.server.unrouted


@pytest.fixture
def cluster_files(signed: dict[str, Any]) -> Iterator[Path]:
    """The version's Files folder on the cluster, put back as it was after the test (its
    manifest tag too)."""
    fake = signed["fake"]
    files = (fake.server.state.hopsfs / "Projects" / PROJECT / "Models" / "fraud_xgb"
             / str(signed["version"]) / "Files")
    keep = signed["base"] / "pristine"
    shutil.copytree(files, keep)
    key = f"fraud_xgb_{signed['version']}"
    tags = json.loads(json.dumps(fake.server.state.models[key]["tags"]))
    yield files
    shutil.rmtree(files)
    shutil.copytree(keep, files)
    shutil.rmtree(keep)
    fake.server.state.models[key]["tags"] = tags


def _model(client: Any, version: int) -> Any:
    return client.get_model_registry().get_model("fraud_xgb", version)


def _rehash(signed: dict[str, Any], files: Path) -> None:
    """Make the manifest list the files' current hashes and its tag name the new manifest, as
    someone with write access to the project could."""
    manifest = json.loads((files / "manifest.json").read_text())
    manifest["files"] = [
        {**e, "sha256": hashlib.sha256((files / e["path"]).read_bytes()).hexdigest(),
         "size": (files / e["path"]).stat().st_size}
        for e in manifest["files"] if (files / e["path"]).is_file()]
    data = json.dumps(manifest, indent=2, sort_keys=True).encode() + b"\n"
    (files / "manifest.json").write_bytes(data)
    tags = signed["fake"].server.state.models[f"fraud_xgb_{signed['version']}"]["tags"]
    tags["fstrain_manifest_sha256"] = hashlib.sha256(data).hexdigest()


def test_every_client_verifies_the_signed_history(signed):
    for client in (signed["one"], signed["two"]):
        report = _model(client, signed["version"]).verify_history()
        assert report.state == "verified" and report.problems == [], report.problems
        assert report.records == 3 and report.signed == 3
    kinds = [e["kind"] for e in _model(signed["two"], signed["version"]).history()]
    assert kinds == ["creation", "validation", "approval"]


def test_an_edit_on_the_cluster_is_found_though_the_local_copy_is_intact(signed, cluster_files):
    model = _model(signed["one"], signed["version"])
    assert model.verify_history().ok  # the client's mirror is current
    (cluster_files / "history/0001/scorecard.html").write_bytes(b"<p>PASSED, honestly</p>")
    report = _model(signed["one"], signed["version"]).verify_history()
    assert not report.ok
    assert any(p.startswith("history/0001/scorecard.html") for p in report.problems), \
        report.problems


def test_a_forged_record_with_its_hashes_updated_fails_its_signature(signed, cluster_files):
    record = cluster_files / "history/0002/record.json"
    data = json.loads(record.read_text())
    data["note"] = "approved without reservations"
    record.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    _rehash(signed, cluster_files)
    report = _model(signed["two"], signed["version"]).verify_history()
    assert any("history/0002/record.json" in p and "signature" in p for p in report.problems), \
        report.problems


def test_a_removed_record_breaks_the_chain(signed, cluster_files):
    shutil.rmtree(cluster_files / "history/0001")
    _rehash(signed, cluster_files)
    report = _model(signed["two"], signed["version"]).verify_history()
    assert any("history/0002/record.json" in p for p in report.problems), report.problems


def test_the_dossier_of_a_hopsworks_version(signed, cluster_files, tmp_path):
    from validation.dossier import collect_dossier, write_dossier

    (cluster_files / "history/0001/scorecard.html").write_bytes(b"<p>edited</p>")
    model = _model(signed["two"], signed["version"])
    view = model.stored_view()
    report = verify_for_dossier(view)
    dossier = collect_dossier(view, report, versions=[model])
    index = write_dossier(dossier, tmp_path / "dossier", store_roots=[signed["two"].root])
    data = json.loads(index.with_name("dossier.json").read_text())
    assert data["model"]["backend"] == "hopsworks"
    assert [e["kind"] for e in data["history"]] == ["creation", "validation", "approval"]
    assert [(e["signer"] or {}).get("name") for e in data["history"]] == ["dana", "vic", "rita"]
    run = data["history"][1]
    assert {e["path"]: e["state"] for e in run["evidence"]}["scorecard.html"] == \
        "CHANGED since its record"
    assert "DOES NOT VERIFY" in index.read_text() and "&lt;b&gt;reviewed" in index.read_text()


def verify_for_dossier(view: Any) -> dict[str, Any]:
    from model_registry.audit.verify import verify_version

    report = verify_version(view)
    return {**report.to_dict(), "signed": report.state == "verified"}
