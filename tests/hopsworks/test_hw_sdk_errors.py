"""Server rules and error translation through the real SDK: what a cluster refuses, fstrain
reports with the server's own errorCode and message; login never prompts."""

from __future__ import annotations

import builtins

import pandas as pd
import pytest
from sdk_server import serve
from sdk_server.errors import JOIN_NO_COMMON_PRIMARY_KEY, TAG_SCHEMA_NOT_FOUND

import feature_store
from fstrain.kernel.errors import BackendError, ConfigError


def _group(fs, name, key, **kwargs):
    fg = fs.get_or_create_feature_group(name, 1, primary_key=[key], **kwargs)
    fg.insert(pd.DataFrame({key: [1, 2], f"{name}_x": [0.5, 1.5], "other": [3, 4]}))
    return fg


def test_join_without_shared_primary_key_keeps_the_servers_error(hops_cluster):
    """Regression: translated errors dropped the server's errorCode and message."""
    _, project = hops_cluster
    fs = project.get_feature_store()
    left, right = _group(fs, "orders_e", "order_id"), _group(fs, "customers_e", "customer_id")
    query = left.select_all().join(right.select(["customers_e_x"]))  # no on=: server refuses
    with pytest.raises(BackendError) as info:
        fs.get_or_create_feature_view("no_keys", 1, query, labels=["orders_e_x"])
    err = info.value
    assert err.error_code == JOIN_NO_COMMON_PRIMARY_KEY and err.status == 400
    assert f"errorCode {JOIN_NO_COMMON_PRIMARY_KEY}" in str(err)
    assert "orders_e and customers_e have no primary key in common" in str(err)
    assert "Metadata operation error" not in str(err)


def test_unknown_tag_schema_is_refused_by_the_server(hops_cluster):
    cluster, project = hops_cluster
    fs = project.get_feature_store()
    with pytest.raises(BackendError) as info:
        _group(fs, "tagged_e", "id", tags={"team_owner": "risk"})
    assert info.value.error_code == TAG_SCHEMA_NOT_FOUND
    assert "No tag schema named team_owner" in str(info.value)
    assert not cluster.server.state.groups_named("tagged_e")  # nothing was created


def test_split_bounds_must_be_epoch_milliseconds(hops_cluster):
    """The server rule the adapter's Timestamps satisfy: an ISO string is refused (400)."""
    from hopsworks_common import client
    from hopsworks_common.client.exceptions import RestAPIError

    cluster, project = hops_cluster
    fs = project.get_feature_store()
    fg = _group(fs, "bounded_e", "id", event_time=None)
    fs.get_or_create_feature_view("bounded_v", 1, fg.select_all(), labels=["other"])
    path = ["project", cluster.server.state.projects["fstrain_ci"].id, "featurestores", 67,
            "featureview", "bounded_v", "version", 1, "trainingdatasets"]
    body = ('{"name": "bounded_v", "splits": [{"name": "train", "splitType": "TIME_SERIES_SPLIT",'
            ' "startTime": "2024-01-01T00:00:00", "endTime": 1704153600000}]}')
    with pytest.raises(RestAPIError) as info:
        client._get_instance()._send_request("POST", path, headers={"content-type": "application/json"},
                                             data=body)
    assert info.value.error_code == 270210
    assert "epoch milliseconds" in info.value.user_message


def test_a_key_with_several_projects_never_prompts(tmp_path, monkeypatch):
    """Regression: without a project the SDK asked with input() which project to use."""
    def no_prompt(*args):
        raise AssertionError(f"the SDK prompted: {args}")

    monkeypatch.setattr(builtins, "input", no_prompt)
    for var in ("HOPSWORKS_PROJECT", "HOPSWORKS_HOST", "REST_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    with serve(tmp_path, projects=("fraud", "churn")) as cluster:
        kwargs = dict(cluster.login_kwargs, project=None)
        with pytest.raises(ConfigError, match="no project. Pass project="):
            feature_store.login(backend="hopsworks", root=tmp_path / "client", **kwargs)
        assert cluster.server.log == []  # refused before anything was sent
        project = feature_store.login(backend="hopsworks", root=tmp_path / "client",
                                      **dict(kwargs, project="churn"))
        assert project.name == "churn"
