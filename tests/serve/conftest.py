"""A small real store for the web application's tests: one feature group, a feature view with a
training dataset, a model with two versions, a validation run with files, and enrolled users.

Built once per module (a few seconds); tests that write (sign-offs) make their own version.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from fstrain.serve import users as _users

PASSWORD = "correct horse battery staple"
PRODUCT_HASHER = _users._hasher  # before the cheap one below replaces it
XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def add_model_version(project, tmp: Path, *, name: str = "credit", metrics=None,
                      trainer: str | None = None) -> object:
    """Register a tiny version of ``name`` on the store's feature view / TD v1 (its creation
    record names ``trainer`` as the user, in this unsigned store)."""
    import os

    if trainer is not None:
        old, os.environ["FSTRAIN_USER"] = os.environ.get("FSTRAIN_USER"), trainer
        try:
            return add_model_version(project, tmp, name=name, metrics=metrics)
        finally:
            if old is None:
                os.environ.pop("FSTRAIN_USER", None)
            else:
                os.environ["FSTRAIN_USER"] = old
    fs = project.get_feature_store()
    fv = fs.get_feature_view("loans", 1)
    src = tmp / f"src_{name}_{len(list(tmp.iterdir()))}"
    src.mkdir()
    (src / "model.json").write_text("{}")
    model = project.get_model_registry().python.create_model(
        name, metrics=metrics or {"roc_auc": 0.81}, description="a small test model",
        feature_view=fv, training_dataset_version=1)
    model.save(str(src))
    return project.get_model_registry().get_model(name, model.version)


def record_run(model, *, status: str = "passed", user: str = "dana", card_text: str = "",
               replaced: bool = False, signer=None, deviation=None) -> dict:
    """A validation run with a scorecard and a model card (``card_text`` inside both)."""
    import os

    scorecard = {"model_name": model.name, "model_version": model.version, "status": status,
                 "metrics": {"roc_auc": 0.8}, "gates": {"results": []}}
    files = {
        "scorecard.json": json.dumps(scorecard).encode(),
        "scorecard.html": f"<html><body><h1>Scorecard</h1><p>{card_text}</p></body></html>".encode(),
        "model_card.html": f"<html><body><h1>Model card</h1><p>{card_text}</p></body></html>".encode(),
    }
    from model_registry.history import sha256_bytes

    old = os.environ.get("FSTRAIN_USER")
    os.environ["FSTRAIN_USER"] = user
    try:
        return model.record_validation(status, {
            "scorecard_sha256": sha256_bytes(files["scorecard.json"]),
            "failing_gates": [] if status.startswith("passed") else ["roc_auc >= 0.9 (0.8)"],
            **({} if deviation is None else {"policy_deviation": deviation}),
            "replaced_default_gates": replaced, "metrics": {"roc_auc": 0.8}}, files,
            **({} if signer is None else {"signer": signer}))
    finally:
        if old is None:
            os.environ.pop("FSTRAIN_USER", None)
        else:
            os.environ["FSTRAIN_USER"] = old


@pytest.fixture(scope="session", autouse=True)
def _cheap_argon2():
    """argon2id with small parameters in these tests (the defaults take ~0.1-0.6 s a hash on
    a busy 2-core machine, and the tests log in a hundred times); the product's own
    parameters are argon2-cffi's defaults, checked in test_serve_users."""
    from argon2 import PasswordHasher

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("fstrain.serve.users._hasher",
                   lambda: PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1))
        yield


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """``(root, project)`` of a small store with users rita (reviewer), dana (data-scientist,
    who validated credit v1), vic (viewer) and olga (owner)."""
    import fstrain
    from fstrain.serve.users import UserStore

    root = tmp_path_factory.mktemp("serve") / "store"
    project = fstrain.login(backend="local", root=root)
    fs = project.get_feature_store()
    fg = fs.create_feature_group("applicants", version=1, primary_key=["id"],
                                 event_time="ts", description=f"applicants {XSS}")
    n = 40
    fg.insert(pd.DataFrame({"id": range(n), "income": [float(i * 3 % 17) for i in range(n)],
                            "region": [["n", "s", "e"][i % 3] for i in range(n)],
                            "ts": pd.date_range("2024-01-01", periods=n, freq="D", tz="UTC"),
                            "default": [i % 2 for i in range(n)]}))
    fv = fs.create_feature_view("loans", version=1, query=fg.select_all(), labels=["default"])
    fv.create_train_test_split(test_size=0.25, seed=3)
    tmp = tmp_path_factory.mktemp("models")
    v1 = add_model_version(project, tmp)
    record_run(v1, card_text=XSS)
    add_model_version(project, tmp, metrics={"roc_auc": 0.84})
    users = UserStore(root)
    for user, role in (("rita", "reviewer"), ("dana", "data-scientist"), ("vic", "viewer"),
                       ("olga", "owner"), ("rhea", "reviewer")):
        users.add(user, role, PASSWORD)
    return root, project, tmp


@pytest.fixture
def app(store):
    from fstrain.serve import ServeSettings, create_app

    root, project, _ = store
    return create_app(ServeSettings(root=root), project=project)


def csrf_of(html: str) -> str:
    """The CSRF token of the first form on a page."""
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, html[:2000]
    return match.group(1)


def login(client, user: str, password: str = PASSWORD, *, follow: bool = False):
    """Post the login form as a browser would (its token from the page)."""
    token = csrf_of(client.get("/login").text)
    return client.post("/login", data={"csrf": token, "username": user, "password": password},
                       follow_redirects=follow)


@pytest.fixture
def client_for(app):
    """``client_for("rita")``: a signed-in test client."""
    from starlette.testclient import TestClient

    def make(user: str | None):
        client = TestClient(app, base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50000))
        if user is not None:
            response = login(client, user)
            assert response.status_code == 303, response.text
        return client

    return make
