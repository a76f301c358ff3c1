"""The web application's security list (issue 31 item 4), against the ASGI app in-process:
unauthenticated and wrong-role requests refused, forged or missing CSRF tokens refused, session
fixation, XSS payloads escaped, path traversal in every URL parameter, four eyes, lockout."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from tests.serve.conftest import PASSWORD, XSS, add_model_version, csrf_of, login, record_run

PAGES = ["/", "/models", "/models/credit/1", "/models/credit/1/diff?against=2",
         "/embed/models/credit/1/runs/1/scorecard.html", "/feature-groups",
         "/feature-groups/applicants/1", "/feature-views", "/feature-views/loans/1",
         "/feature-views/loans/1/training-datasets/1", "/account", "/no-such-page"]


def _signoff_form(client, name: str, version: int) -> dict[str, str]:
    html = client.get(f"/models/{name}/{version}").text
    form = html.split('action="/models/%s/%d/signoff"' % (name, version), 1)[1]
    fields = dict(__import__("re").findall(r'name="(csrf|run|evidence|head)" value="([^"]*)"',
                                           form))
    return fields


def _events(store, name: str, version: int) -> int:
    _, project, _ = store
    return len(project.get_model_registry().get_model(name, version).history())


@pytest.mark.parametrize("path", PAGES)
def test_nothing_but_the_login_page_without_a_session(client_for, path):
    client = client_for(None)
    response = client.get(path, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/login"
    assert client.get("/login").status_code == 200


def test_a_form_post_without_a_session_is_refused_and_writes_nothing(client_for, store):
    before = _events(store, "credit", 2)
    response = client_for(None).post("/models/credit/2/signoff", data={
        "decision": "approve", "note": "ok", "run": "0", "evidence": "", "head": "0"})
    assert response.status_code == 401
    assert _events(store, "credit", 2) == before


@pytest.mark.parametrize("user", ["vic", "dana", "olga"])
def test_only_a_reviewer_signs_off(client_for, store, user):
    client = client_for(user)
    page = client.get("/models/credit/1").text
    assert "/signoff" not in page  # no form for them
    token = csrf_of(page)
    before = _events(store, "credit", 1)
    response = client.post("/models/credit/1/signoff", data={
        "csrf": token, "decision": "approve", "note": "fine", "run": "1",
        "evidence": "x", "head": "1"})
    assert response.status_code == 403
    assert "may not do this" in response.text
    assert _events(store, "credit", 1) == before


@pytest.mark.parametrize("token", [None, "", "forged-token-value"])
def test_a_missing_or_forged_csrf_token_is_refused(client_for, store, token):
    client = client_for("rita")
    fields = _signoff_form(client, "credit", 1)
    data = {**fields, "decision": "reject", "note": "no"}
    if token is None:
        data.pop("csrf")
    else:
        data["csrf"] = token
    before = _events(store, "credit", 1)
    response = client.post("/models/credit/1/signoff", data=data)
    assert response.status_code == 403 and "CSRF" in response.text
    assert _events(store, "credit", 1) == before
    # another session's genuine token is no good either
    other = csrf_of(client_for("rhea").get("/models/credit/1").text)
    response = client.post("/models/credit/1/signoff", data={**data, "csrf": other})
    assert response.status_code == 403


def test_a_form_posted_from_another_site_is_refused(client_for):
    client = client_for("rita")
    fields = _signoff_form(client, "credit", 1)
    response = client.post("/models/credit/1/signoff", headers={"origin": "https://evil.example"},
                           data={**fields, "decision": "reject", "note": "no"})
    assert response.status_code == 403 and "another site" in response.text


def test_logout_needs_the_token_and_revokes_the_session(client_for):
    client = client_for("vic")
    assert client.post("/logout", data={"csrf": "nope"}).status_code == 403
    cookie = client.cookies.get("fstrain_session")
    token = csrf_of(client.get("/models").text)
    assert client.post("/logout", data={"csrf": token}, follow_redirects=False).status_code == 303
    replay = client_for(None)
    replay.cookies.set("fstrain_session", cookie, domain="127.0.0.1")
    assert replay.get("/models", follow_redirects=False).headers["location"] == "/login"


def test_the_login_form_needs_its_own_token(client_for):
    client = client_for(None)
    client.get("/login")
    for token in (None, "forged"):
        data = {"username": "rita", "password": PASSWORD}
        if token:
            data["csrf"] = token
        response = client.post("/login", data=data, follow_redirects=False)
        assert response.status_code == 403
        assert "fstrain_session" not in response.headers.get("set-cookie", "")


def test_session_fixation_a_session_id_from_before_login_is_never_kept(client_for, app):
    attacker = client_for("vic")
    planted = attacker.cookies.get("fstrain_session")
    victim = TestClient(app, base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50001))
    victim.cookies.set("fstrain_session", planted, domain="127.0.0.1")
    assert login(victim, "rita").status_code == 303
    issued = victim.cookies.get("fstrain_session")
    assert issued != planted
    # the planted id no longer opens anything, and it never became rita's
    assert attacker.get("/models", follow_redirects=False).headers["location"] == "/login"
    # a forged (unsigned) cookie is ignored
    forged = client_for(None)
    forged.cookies.set("fstrain_session", issued.split(".")[0] + ".bad", domain="127.0.0.1")
    assert forged.get("/models", follow_redirects=False).status_code == 303


def test_cookie_flags_and_security_headers(client_for, app):
    client = TestClient(app, base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50002))
    cookie = login(client, "vic").headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    page = client.get("/models")
    csp = page.headers["content-security-policy"]
    assert "script-src" not in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert "<script" not in page.text
    embed = client.get("/embed/models/credit/1/runs/1/model_card.html")
    assert "sandbox" in embed.headers["content-security-policy"]
    assert "script" not in embed.headers["content-security-policy"]
    assert embed.headers["x-frame-options"] == "SAMEORIGIN"
    login_page = client_for(None).get("/login")
    assert login_page.headers["x-frame-options"] == "DENY"


def test_xss_in_notes_override_reasons_and_descriptions_is_escaped(client_for, store):
    _, project, tmp = store
    model = add_model_version(project, tmp, name="xss_model")
    record_run(model, status="failed", card_text=XSS)
    client = client_for("rita")
    fields = _signoff_form(client, "xss_model", model.version)
    response = client.post(f"/models/xss_model/{model.version}/signoff", data={
        **fields, "decision": "approve", "note": f"note {XSS}", "override": f"why {XSS}"})
    assert response.status_code == 200, response.text
    page = client.get(f"/models/xss_model/{model.version}").text
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "note &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page
    assert "override: why &lt;script&gt;" in page
    group = client.get("/feature-groups").text + client.get("/feature-groups/applicants/1").text
    assert "<script>alert" not in group and "applicants &lt;script&gt;" in group
    # model-card text is recorded by validation; it is served only sandboxed, in an iframe
    assert f'<iframe sandbox="" title="model_card.html of run 1"' in page
    embed = client.get(f"/embed/models/xss_model/{model.version}/runs/1/model_card.html")
    assert "sandbox" in embed.headers["content-security-policy"]


@pytest.mark.parametrize("path", [
    "/models/..%2F..%2Fetc/1", "/models/credit/..%2F1", "/models/credit/1%2F..%2F2",
    "/models/credit/0", "/models/credit/-1", "/models/credit/1/diff?against=..%2F2",
    "/models/credit/1/diff?against=/etc/passwd",
    "/embed/models/credit/1/runs/1/..%2F..%2Fmanifest.json",
    "/embed/models/credit/1/runs/1/scorecard.json", "/embed/models/credit/1/runs/1/record.json",
    "/embed/models/credit/1/runs/..%2F..%2F1/scorecard.html",
    "/embed/models/..%2Fcredit/1/runs/1/scorecard.html",
    "/embed/models/credit/1/runs/1/%2E%2E%2Fmodel.json",
    "/feature-groups/..%2F..%2F/1", "/feature-groups/applicants/..%2F1",
    "/feature-views/..%2Floans/1", "/feature-views/loans/1/training-datasets/..%2F..%2F1",
    "/feature-views/loans/1/training-datasets/1%2F..",
    "/static/..%2F..%2Fapp.py", "/static/../users.py", "/models?name=..%2F..%2Fetc",
    "/models?name=credit%2F..",
])
def test_path_traversal_in_every_url_parameter_is_refused(client_for, path):
    response = client_for("rita").get(path)
    assert response.status_code in (400, 404), (path, response.status_code)
    assert "def " not in response.text and "{}" != response.text.strip()
    assert "password_hash" not in response.text and '"files"' not in response.text


def test_a_reviewer_cannot_approve_a_version_they_validated(client_for, store):
    _, project, tmp = store
    model = add_model_version(project, tmp, name="own_model")
    record_run(model, user="rhea")
    client = client_for("rhea")
    fields = _signoff_form(client, "own_model", model.version)
    before = _events(store, "own_model", model.version)
    response = client.post(f"/models/own_model/{model.version}/signoff",
                           data={**fields, "decision": "approve", "note": "mine"})
    assert response.status_code == 403 and "four eyes" in response.text
    assert _events(store, "own_model", model.version) == before


def test_a_reviewer_cannot_approve_a_version_they_trained(client_for, store):
    _, project, tmp = store
    model = add_model_version(project, tmp, name="trained_model", trainer="rhea")
    assert model.history()[0]["kind"] == "creation" and model.history()[0]["user"] == "rhea"
    record_run(model, user="dana")
    client = client_for("rhea")
    fields = _signoff_form(client, "trained_model", model.version)
    response = client.post(f"/models/trained_model/{model.version}/signoff",
                           data={**fields, "decision": "approve", "note": "mine"})
    assert response.status_code == 403 and "four eyes" in response.text
    assert _events(store, "trained_model", model.version) == 2
    other = client_for("rita")  # another reviewer may
    response = other.post(f"/models/trained_model/{model.version}/signoff", data={
        **_signoff_form(other, "trained_model", model.version), "decision": "approve",
        "note": "checked"})
    assert response.status_code == 200


def test_five_failures_lock_the_user_at_that_address_for_fifteen_minutes(app, store):
    def client(port: int, host: str = "127.0.0.1") -> TestClient:
        return TestClient(app, base_url="http://127.0.0.1:8765", client=(host, port))

    attacker = client(50010, "127.0.0.9")
    for _ in range(5):
        assert login(attacker, "dana", "wrong password!!").status_code == 401
    locked = login(attacker, "dana")  # the right password, still refused
    assert locked.status_code == 429 and "Too many failed attempts" in locked.text
    assert "fstrain_session" not in locked.headers.get("set-cookie", "")
    assert login(client(50011, "127.0.0.9"), "vic").status_code == 303  # other users unaffected
    assert login(client(50012, "127.0.0.10"), "dana").status_code == 303  # other addresses too
    root, _, _ = store
    from fstrain.serve.state import LOCKOUT_S, ServerState

    wait = ServerState(root).locked_for("dana", "127.0.0.9")
    assert LOCKOUT_S - 60 < wait <= LOCKOUT_S


def test_an_unknown_user_gets_the_same_answer_as_a_wrong_password(client_for):
    a = login(client_for(None), "nobody", "whatever password")
    b = login(client_for(None), "vic", "whatever password")
    assert a.status_code == b.status_code == 401
    assert "Wrong user name or password." in a.text and "Wrong user name or password." in b.text


def test_a_second_look_at_the_login_page_keeps_the_form_valid(client_for):
    """A browser asks for /favicon.ico or opens a second tab: the form shown first still works
    (found in Chromium: its favicon request used to rotate the token)."""
    client = client_for(None)
    token = csrf_of(client.get("/login").text)
    assert client.get("/favicon.ico", follow_redirects=False).status_code == 204
    client.get("/login")
    response = client.post("/login", data={"csrf": token, "username": "vic",
                                           "password": PASSWORD}, follow_redirects=False)
    assert response.status_code == 303
