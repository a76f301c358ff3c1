"""Sign-off in the browser in a store with a trust list: the record is signed by the server's
service key acting for the signed-in person, `fstrain registry verify` checks it as it checks a
CLI sign-off, four eyes compares persons, and the service key acts only for whom the trust list
says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from tests.serve.conftest import PASSWORD, login, record_run
from tests.serve.test_serve_security import _signoff_form


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """``(root, project, keys, app)``: owner olga, data scientists dana and rhea-ds (person
    rhea), the service key web attesting rita and rhea as reviewers; users rita, rhea, rex
    (a reviewer the service key does not attest for); model credit v1 trained and validated
    by dana, v2 trained by dana and validated by rhea."""
    import fstrain
    from fstrain.serve import ServeSettings, create_app
    from fstrain.serve.users import UserStore
    from model_registry.audit import TrustStore, generate_key, load_private_key

    tmp = tmp_path_factory.mktemp("signed")
    root = tmp / "store"
    trust_store = TrustStore(root / "trust")
    keys: dict[str, Path] = {}
    owner = None
    for name, role, person, attests in (
            ("olga", "owner", None, ()), ("dana", "data-scientist", None, ()),
            ("rhea-ds", "data-scientist", "rhea", ()),
            ("web", "service", None, ("rita:reviewer", "rhea:reviewer"))):
        keys[name] = tmp / "keys" / name
        line = generate_key(keys[name], comment=name)
        signer = owner or load_private_key(keys[name])
        trust_store.enrol(signer, name=name, role=role, public_key=line, person=person,
                          attests_for=attests)
        owner = owner or load_private_key(keys[name])
    trust = trust_store.load()
    owner_signer = trust.signer(owner)
    users = UserStore(root)
    for user in ("rita", "rhea", "rex"):
        users.add(user, "reviewer", PASSWORD, signer=owner_signer)
    project = fstrain.login(backend="local", root=root)
    registry = project.get_model_registry()
    dana = trust.signer(load_private_key(keys["dana"]))
    rhea = trust.signer(load_private_key(keys["rhea-ds"]))
    for validator in (dana, rhea):
        src = tmp / f"src{len(list(tmp.iterdir()))}"
        src.mkdir()
        (src / "model.json").write_text("{}")
        model = registry.python.create_model("credit", metrics={"roc_auc": 0.8})
        model.save(str(src), signer=dana)
        record_run(registry.get_model("credit", model.version), signer=validator)
    app = create_app(ServeSettings(root=root, key=keys["web"]), project=project)
    return root, project, keys, app


def _client(app, user: str, port: int) -> TestClient:
    client = TestClient(app, base_url="http://127.0.0.1:8765", client=("127.0.0.1", port))
    assert login(client, user).status_code == 303
    return client


def test_a_browser_sign_off_is_signed_by_the_service_key_acting_for_the_person(signed):
    root, project, _keys, app = signed
    client = _client(app, "rita", 50200)
    page = client.get("/models/credit/1").text
    assert "verified: signed by dana" in page and "verified · " not in page
    fields = _signoff_form(client, "credit", 1)
    done = client.post("/models/credit/1/signoff",
                       data={**fields, "decision": "approve", "note": "read it"})
    assert done.status_code == 200, done.text
    assert "key web (service) acting for rita as reviewer" in done.text
    model = project.get_model_registry().get_model("credit", 1)
    event = model.history()[-1]
    assert event["kind"] == "approval" and event["signer"]["acting_for"] == "rita"
    assert event["signer"]["name"] == "web" and event["signature"]
    assert event["run_record_sha256"] == fields["evidence"]
    assert model.verify_history().state == "verified"
    verify = CliRunner().invoke(__import__("fstrain.cli.app", fromlist=["app"]).app,
                                ["registry", "verify", "credit:1", "--root", str(root), "--json"])
    assert verify.exit_code == 0, verify.output
    assert json.loads(verify.output)["versions"][0]["state"] == "verified"
    listing = client.get("/models").text
    assert "passed · approved" in listing and ">verified<" in listing


def test_four_eyes_compares_persons_across_keys_and_the_web_login(signed):
    _root, project, _keys, app = signed
    client = _client(app, "rhea", 50201)  # rhea validated v2 with her data-scientist key
    fields = _signoff_form(client, "credit", 2)
    refused = client.post("/models/credit/2/signoff",
                          data={**fields, "decision": "approve", "note": "mine"})
    assert refused.status_code == 403 and "four eyes" in refused.text
    assert [e["kind"] for e in project.get_model_registry().get_model("credit", 2).history()
            ] == ["creation", "validation"]


def test_the_service_key_acts_only_for_persons_the_trust_list_names(signed):
    _root, project, _keys, app = signed
    client = _client(app, "rex", 50202)
    fields = _signoff_form(client, "credit", 2)
    refused = client.post("/models/credit/2/signoff",
                          data={**fields, "decision": "reject", "note": "no"})
    assert refused.status_code == 403 and "not enrolled to attest for person &#39;rex&#39;" in refused.text
    assert len(project.get_model_registry().get_model("credit", 2).history()) == 2


def test_a_tampered_version_shows_unverified_and_cannot_be_signed(signed):
    _root, project, _keys, app = signed
    client = _client(app, "rita", 50203)
    fields = _signoff_form(client, "credit", 2)
    model = project.get_model_registry().get_model("credit", 2)
    card = model.model_path / "history" / "0001" / "scorecard.html"
    card.chmod(0o644)
    card.write_text("<h1>PASSED</h1>")
    listing = client.get("/models").text
    assert "unverified" in listing and "history/0001/scorecard.html" in listing
    page = client.get("/models/credit/2").text
    assert "This version does not verify" in page and "/signoff" not in page
    assert client.get("/embed/models/credit/2/runs/1/scorecard.html").status_code == 400
    refused = client.post("/models/credit/2/signoff",
                          data={**fields, "decision": "reject", "note": "no"})
    assert refused.status_code in (400, 503) and "does not verify" in refused.text
