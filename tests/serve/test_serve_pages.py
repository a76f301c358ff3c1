"""The pages and the sign-off rules of ``fstrain serve``, against the ASGI app in-process."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from fstrain.kernel.errors import ConfigError
from fstrain.serve import ServeSettings, create_app
from tests.serve.conftest import PASSWORD, add_model_version, csrf_of, login, record_run
from tests.serve.test_serve_security import _signoff_form


def test_the_models_page_lists_every_version_with_its_status(client_for):
    page = client_for("vic").get("/models").text
    rows = re.findall(r'data-model="(\w+)" data-version="(\d+)"', page)
    assert ("credit", "1") in rows and ("credit", "2") in rows
    assert "passed · not reviewed" in page and "not validated · not reviewed" in page


def test_a_version_page_shows_scorecard_history_lineage_and_diff(client_for):
    page = client_for("vic").get("/models/credit/1").text
    assert 'src="/embed/models/credit/1/runs/1/scorecard.html"' in page
    assert 'src="/embed/models/credit/1/runs/1/model_card.html"' in page
    assert 'data-seq="1"' in page and "by <span class=\"actor\">dana</span>" in page
    assert 'href="/feature-views/loans/1/training-datasets/1"' in page
    assert '<a class="pill" href="/feature-groups/applicants/1">applicants:1 @ commit 1</a>' in page
    assert 'action="/models/credit/1/diff"' in page and '<option value="2">' in page
    diff = client_for("vic").get("/models/credit/1/diff?against=2").text
    assert "Training metrics" in diff and "0.81" in diff and "0.84" in diff


def test_feature_group_view_and_training_dataset_pages(client_for):
    client = client_for("dana")
    group = client.get("/feature-groups/applicants/1").text
    assert "income" in group and "region" in group and "Commits" in group
    view = client.get("/feature-views/loans/1").text
    assert "default" in view and 'href="/feature-views/loans/1/training-datasets/1"' in view
    td = client.get("/feature-views/loans/1/training-datasets/1").text
    assert "train" in td and "test" in td and re.search(r"[0-9a-f]{64}", td)
    assert "credit v1" in td  # models trained on it


def test_an_unknown_version_is_a_404_page_naming_it(client_for):
    response = client_for("vic").get("/models/credit/99")
    assert response.status_code == 404 and "99" in response.text


def test_approve_reject_with_the_rules_of_the_command_line(client_for, store):
    _, project, tmp = store
    model = add_model_version(project, tmp, name="rules")
    record_run(model, status="failed")
    client = client_for("rita")
    url = f"/models/rules/{model.version}/signoff"
    fields = _signoff_form(client, "rules", model.version)
    refused = client.post(url, data={**fields, "decision": "approve", "note": "looks fine"})
    assert refused.status_code == 400 and "--override" in refused.text
    approved = client.post(url, data={**fields, "decision": "approve", "note": "accepted risk",
                                      "override": "business need, see ticket 12"})
    assert approved.status_code == 200 and "approved (override)" in approved.text
    again = client.post(url, data={**_signoff_form(client, "rules", model.version),
                                   "decision": "reject", "note": "changed my mind"})
    assert again.status_code == 400 and "supersede" in again.text
    history = project.get_model_registry().get_model("rules", model.version).history()
    assert [e["kind"] for e in history] == ["creation", "validation", "approval"]
    assert history[-1]["reviewer"] == "rita"
    assert history[-1]["override_reason"] == "business need, see ticket 12"
    superseded = client.post(url, data={**_signoff_form(client, "rules", model.version),
                                        "decision": "reject", "note": "changed my mind",
                                        "supersede": "the ticket was withdrawn"})
    assert superseded.status_code == 200 and "failed · rejected" in superseded.text
    assert "supersedes: the ticket was withdrawn" in superseded.text
    last = project.get_model_registry().get_model("rules", model.version).history()[-1]
    assert last["kind"] == "rejection" and last["supersedes"] == history[-1]["seq"]


def test_a_stale_form_is_refused(client_for, store):
    _, project, tmp = store
    model = add_model_version(project, tmp, name="stale")
    record_run(model)
    client = client_for("rita")
    fields = _signoff_form(client, "stale", model.version)
    record_run(project.get_model_registry().get_model("stale", model.version), user="dana")
    response = client.post(f"/models/stale/{model.version}/signoff",
                           data={**fields, "decision": "approve", "note": "ok"})
    assert response.status_code == 409 and "Reload the page" in response.text
    forged = {**_signoff_form(client, "stale", model.version), "evidence": "0" * 64}
    response = client.post(f"/models/stale/{model.version}/signoff",
                           data={**forged, "decision": "approve", "note": "ok"})
    assert response.status_code == 409
    assert len(project.get_model_registry().get_model("stale", model.version).history()) == 3


def test_live_a_new_run_shows_on_reload(client_for, store):
    _, project, tmp = store
    model = add_model_version(project, tmp, name="live")
    client = client_for("vic")
    assert "Never validated" in client.get(f"/models/live/{model.version}").text
    record_run(model)
    page = client.get(f"/models/live/{model.version}").text
    assert "Latest validation: run 1" in page


def test_a_password_change_ends_every_session_of_the_user(app, store):
    from fstrain.serve.users import UserStore

    root, _, _ = store
    UserStore(root).add("paul", "viewer", PASSWORD)
    first = TestClient(app, base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50020))
    second = TestClient(app, base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50021))
    login(first, "paul")
    login(second, "paul")
    token = csrf_of(first.get("/account").text)
    wrong = first.post("/account/password", data={"csrf": token, "current": "nope",
                                                 "new": "x" * 14, "again": "x" * 14})
    assert wrong.status_code == 400 and "current password is wrong" in wrong.text
    ok = first.post("/account/password", data={"csrf": token, "current": PASSWORD,
                                              "new": "another long passphrase",
                                              "again": "another long passphrase"})
    assert ok.status_code == 200 and "Password changed" in ok.text
    assert second.get("/models", follow_redirects=False).headers["location"] == "/login"
    assert first.get("/models").status_code == 200  # this browser got a new session
    assert login(TestClient(app, client=("127.0.0.1", 50022)), "paul").status_code == 401


def test_a_removed_user_is_signed_out(app, store):
    from fstrain.serve.users import UserStore

    root, _, _ = store
    users = UserStore(root)
    users.add("gone", "viewer", PASSWORD)
    client = TestClient(app, base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50023))
    login(client, "gone")
    assert client.get("/models").status_code == 200
    users.remove("gone")
    assert client.get("/models", follow_redirects=False).headers["location"] == "/login"


def test_the_secret_and_session_files_are_owner_only(store, app):
    root, _, _ = store
    for name in ("secret", "sessions.sqlite"):
        assert (root / "serve" / name).stat().st_mode & 0o077 == 0
    assert (root / "serve").stat().st_mode & 0o077 == 0


def test_a_secret_others_can_read_stops_the_server(tmp_path):
    import fstrain

    root = tmp_path / "store"
    project = fstrain.login(backend="local", root=root)
    create_app(ServeSettings(root=root), project=project)
    (root / "serve" / "secret").chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        create_app(ServeSettings(root=root), project=project)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.7", "::"])
def test_trusted_header_mode_refuses_to_start_off_loopback_without_the_proxy(tmp_path, host):
    with pytest.raises(ConfigError, match="--proxy"):
        ServeSettings(root=tmp_path, host=host, trusted_header="X-Remote-User").check()
    ServeSettings(root=tmp_path, host=host, trusted_header="X-Remote-User",
                  proxy="192.0.2.1").check()
    ServeSettings(root=tmp_path, host="127.0.0.1", trusted_header="X-Remote-User").check()
    with pytest.raises(ConfigError, match="IP address"):
        ServeSettings(root=tmp_path, proxy="proxy.example").check()


def test_trusted_header_mode(store):
    root, project, _ = store
    app = create_app(ServeSettings(root=root, host="0.0.0.0", trusted_header="X-Remote-User",
                                   proxy="10.9.8.7"), project=project)

    def client(peer: str) -> TestClient:
        return TestClient(app, base_url="http://127.0.0.1:8765", client=(peer, 40000))

    proxy = client("10.9.8.7")
    page = proxy.get("/models", headers={"X-Remote-User": "vic"})
    assert page.status_code == 200 and "vic" in page.text
    unknown = proxy.get("/models", headers={"X-Remote-User": "mallory"})
    assert unknown.status_code == 403 and "not enrolled" in unknown.text
    direct = client("10.9.8.6").get("/models", headers={"X-Remote-User": "rita"})
    assert direct.status_code == 403 and "through the proxy" in direct.text
    assert proxy.get("/models").status_code == 401
    # the CSRF token still guards forms; the header user signs as themselves
    rita = client("10.9.8.7")
    rita.headers["X-Remote-User"] = "rita"
    fields = _signoff_form(rita, "credit", 2)
    assert rita.post("/models/credit/2/signoff", data={
        **fields, "csrf": "bad", "decision": "reject", "note": "n"}).status_code == 403
    # a session made for one header user is not reused for another
    rita.headers["X-Remote-User"] = "vic"
    assert "/signoff" not in rita.get("/models/credit/2").text


def test_sessions_end_after_the_idle_timeout_and_are_purged(tmp_path, monkeypatch):
    import time as clock

    from fstrain.serve import state as state_module

    state = state_module.ServerState(tmp_path)
    sid = state.create_session("vic", "127.0.0.1")
    assert state.session(sid) is not None
    now = clock.time()
    monkeypatch.setattr(state_module.time, "time", lambda: now + state_module.IDLE_TIMEOUT_S + 1)
    assert state.session(sid) is None
    old = state.create_session("vic", "127.0.0.1")
    monkeypatch.setattr(state_module.time, "time",
                        lambda: now + 2 * state_module.IDLE_TIMEOUT_S + 2)
    state.create_session("rita", "127.0.0.1")
    assert state.session_count("vic") == 0 and old


def test_a_policy_deviation_is_in_the_status_and_on_the_timeline(client_for, store):
    _, project, tmp = store
    model = add_model_version(project, tmp, name="deviant")
    record_run(model, status="passed (policy deviation)",
               deviation=["roc_auc >= 0.85 -> roc_auc >= 0.5"])
    client = client_for("vic")
    listing = client.get("/models?name=deviant").text
    assert "passed (policy deviation) · not reviewed" in listing
    page = client.get(f"/models/deviant/{model.version}").text
    assert "policy deviation: roc_auc &gt;= 0.85 -&gt; roc_auc &gt;= 0.5" in page
    rita = client_for("rita")
    url = f"/models/deviant/{model.version}/signoff"
    refused = rita.post(url, data={**_signoff_form(rita, "deviant", model.version),
                                   "decision": "approve", "note": "fine"})
    assert refused.status_code == 400 and "--override" in refused.text
    done = rita.post(url, data={**_signoff_form(rita, "deviant", model.version),
                                "decision": "approve", "note": "fine", "override": "pilot only"})
    assert done.status_code == 200 and "approved (override)" in done.text
