"""Feature views and their tags (training datasets: :mod:`routes_training_datasets`)."""

from __future__ import annotations

from typing import Any

from sdk_server.errors import FEATURE_VIEW_NOT_FOUND, not_found
from sdk_server.routes_featurestore import get_tag, put_tag, tags_in
from sdk_server.server import FakeHopsworks, route
from sdk_server.state import FEATURE_STORE_ID, FeatureView
from sdk_server.transport import Call
from sdk_server.views import resolve, serving_keys, view_features

FV = "/project/{project_id}/featurestores/{fs}/featureview"
ONE = FV + "/{name}/version/{version}"


@route("GET", ONE)
def get_view(server: FakeHopsworks, call: Call, project_id: str, fs: str, name: str,
             version: str) -> dict[str, Any]:
    return server.state.view(name, version).body


@route("GET", FV + "/{name}")
def get_views(server: FakeHopsworks, call: Call, project_id: str, fs: str,
              name: str) -> dict[str, Any]:
    views = [v.body for (n, _), v in sorted(server.state.feature_views.items()) if n == name]
    if not views:
        raise not_found(FEATURE_VIEW_NOT_FOUND, f"feature view {name}")
    return {"count": len(views), "items": views}


@route("POST", FV)
def create_view(server: FakeHopsworks, call: Call, project_id: str, fs: str) -> dict[str, Any]:
    posted = call.json()
    tags = tags_in(server, posted.pop("tags", None))
    resolved = resolve(server.state, posted["query"])
    body = dict(posted)
    labels = [f["name"] for f in posted.get("features", []) if f.get("label")]
    training = [f["name"] for f in posted.get("features", []) if f.get("trainingHelperColumn")]
    inference = [f["name"] for f in posted.get("features", [])
                 if f.get("inferenceHelperColumn")]
    version = int(posted.get("version") or 1 + max(
        [v for (n, v) in server.state.feature_views if n == posted["name"]], default=0))
    body |= {"id": server.state.next_id(), "version": version, "featurestoreId": FEATURE_STORE_ID,
             "features": view_features(resolved, labels, training, inference),
             "servingKeys": serving_keys(resolved)}
    body["query"] = _expanded(server, posted["query"])
    server.state.feature_views[(body["name"], version)] = FeatureView(body, tags=tags)
    return body


def _expanded(server: FakeHopsworks, query: dict[str, Any]) -> dict[str, Any]:
    """The query with its groups' full bodies (the server expands ``query``)."""
    out = dict(query)
    out["leftFeatureGroup"] = server.state.group(query["leftFeatureGroup"]["id"]).body
    out["joins"] = [dict(j, query=_expanded(server, j["query"])) for j in query.get("joins") or []]
    return out


@route("PUT", ONE + "/tags/{tag}")
def put_view_tag(server, call, project_id, fs, name, version, tag):
    return put_tag(server, server.state.view(name, version).tags, tag, call)


@route("GET", ONE + "/tags")
def get_view_tags(server, call, project_id, fs, name, version):
    return get_tag(server.state.view(name, version).tags, None)


@route("GET", ONE + "/tags/{tag}")
def get_view_tag(server, call, project_id, fs, name, version, tag):
    return get_tag(server.state.view(name, version).tags, tag)


@route("GET", ONE + "/query/batch")
def batch_query(server: FakeHopsworks, call: Call, project_id: str, fs: str, name: str,
                version: str) -> dict[str, Any]:
    """The view's query with the requested time window on its root group. (Hopsworks also
    adds key/event-time/helper columns on request; the training-dataset job adds the root
    group's keys and event time itself, see :mod:`sdk_server.td_job`.)"""
    query = dict(server.state.view(name, version).body["query"])
    for param, key in (("start_time", "leftFeatureGroupStartTime"),
                       ("end_time", "leftFeatureGroupEndTime")):
        if call.q(param) not in (None, "None"):
            query[key] = int(call.q(param))
    return query
