"""``fstrain serve --backend hopsworks``: the models page and a version page through the real
SDK against the fixture server (tests/hopsworks/sdk_server)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hopsworks"))

from sdk_server import serve  # noqa: E402

from tests.serve.conftest import PASSWORD, login  # noqa: E402


@pytest.fixture(scope="module")
def hopsworks_app(tmp_path_factory):
    import feature_store
    from fstrain.serve import ServeSettings, create_app
    from fstrain.serve.users import UserStore

    tmp = tmp_path_factory.mktemp("serve_hops")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("REST_ENDPOINT", "HOPSWORKS_HOST", "HOPSWORKS_PROJECT", "HOPSWORKS_API_KEY"):
            mp.delenv(var, raising=False)
        with serve(tmp / "cluster") as fake:
            project = feature_store.login(backend="hopsworks", root=tmp / "client",
                                          **fake.login_kwargs)
            src = tmp / "model"
            src.mkdir()
            (src / "model.json").write_text('{"trees": 3}')
            model = project.get_model_registry().python.create_model(
                "fraud_xgb", metrics={"roc_auc": 0.91}, description="on the cluster")
            model.save(str(src))
            UserStore(tmp / "server").add("vic", "viewer", PASSWORD)
            yield create_app(ServeSettings(root=tmp / "server", backend="hopsworks"),
                             project=project)


def test_models_and_a_version_page_on_hopsworks(hopsworks_app):
    client = TestClient(hopsworks_app, base_url="http://127.0.0.1:8765",
                        client=("127.0.0.1", 50100))
    assert login(client, "vic").status_code == 303
    listing = client.get("/models").text
    assert "cannot list every model: name one above" in listing
    named = client.get("/models?name=fraud_xgb").text
    assert 'data-model="fraud_xgb" data-version="1"' in named
    assert "not validated · not reviewed" in named
    page = client.get("/models/fraud_xgb/1")
    assert page.status_code == 200, page.text[-2000:]
    assert "on the cluster" in page.text and "roc_auc" in page.text
    assert client.get("/models/fraud_xgb/2").status_code == 404
