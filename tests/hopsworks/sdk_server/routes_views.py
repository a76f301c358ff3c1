"""Feature views and their tags (training datasets: :mod:`routes_training_datasets`)."""

from __future__ import annotations

from typing import Any

from sdk_server.errors import (
    FEATURE_VIEW_ALREADY_EXISTS,
    FEATURE_VIEW_NOT_FOUND,
    HttpError,
    bad_request,
    not_found,
)
from sdk_server.filters import and_filter
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
    if (posted["name"], version) in server.state.feature_views:
        raise bad_request(FEATURE_VIEW_ALREADY_EXISTS,
                          "The provided feature view name and version already exists",
                          f"Feature view: {posted['name']}, version: {version}")
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
    """The view's query with the requested window as an event-time **filter** on its root group
    (``start <= t < end``), as Hopsworks builds it: ``leftFeatureGroupStart/EndTime`` are
    commit times (time travel), which the SDK would not send to the Query Service. (Hopsworks
    also adds key/event-time/helper columns on request; the training-dataset job and the
    Query Service add the root group's keys and event time themselves.)"""
    view = server.state.view(name, version).body
    def asked(param: str) -> bool:
        return str(call.q(param)).lower() == "true"

    dropped = {f["name"] for f in view.get("features") or []
               if (f.get("label") and not asked("with_label"))
               or (f.get("trainingHelperColumn") and not asked("training_helper_columns"))
               or (f.get("inferenceHelperColumn") and not asked("inference_helper_columns"))}
    query = _without(view["query"], dropped, "")
    root = query["leftFeatureGroup"]
    event_time = root.get("eventTime")
    for param, condition in (("start_time", "GREATER_THAN_OR_EQUAL"), ("end_time", "LESS_THAN")):
        if call.q(param) in (None, "None"):
            continue
        if not event_time:
            raise HttpError(400, 270010, f"feature group {root['name']} has no event time for a "
                                         f"{param} window")
        feature = next(f for f in root["features"] if f["name"] == event_time)
        query["filter"] = and_filter(query.get("filter"), {
            "feature": feature, "condition": condition, "value": str(int(call.q(param)))})
    return query


def _without(query: dict[str, Any], dropped: set[str], prefix: str) -> dict[str, Any]:
    """``query`` without the output columns ``dropped`` (labels and helper columns the batch
    query was not asked for); a joined column's output name carries its join prefixes."""
    out = dict(query)
    out["leftFeatures"] = [f for f in query.get("leftFeatures") or []
                           if prefix + f["name"] not in dropped]
    out["joins"] = [dict(j, query=_without(j["query"], dropped, prefix + (j.get("prefix") or "")))
                    for j in query.get("joins") or []]
    return out
