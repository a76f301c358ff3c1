"""Feature store, feature groups, commits, tags, expectation suites, statistics."""

from __future__ import annotations

import json
from typing import Any

from sdk_server.errors import FEATURE_GROUP_NOT_FOUND, TAG_NOT_FOUND, not_found
from sdk_server.fixtures import envelope, template
from sdk_server.hopsfs import hopsfs_url
from sdk_server.rules import check_tag
from sdk_server.server import FakeHopsworks, route
from sdk_server.state import FEATURE_STORE_ID, FeatureGroup
from sdk_server.transport import Call

FS = "/project/{project_id}/featurestores/{fs}"
FG = FS + "/featuregroups/{fg_id}"


@route("GET", "/project/{project_id}/featurestores/{name}")
def feature_store(server: FakeHopsworks, call: Call, project_id: str, name: str) -> dict[str, Any]:
    project = server.state.project_by_id(project_id)
    if name != project.feature_store:
        raise not_found(270005, f"feature store {name}")
    return template("feature_store") | {
        "featurestoreId": FEATURE_STORE_ID, "featurestoreName": project.feature_store,
        "projectName": project.name, "projectId": project.id,
        "offlineFeaturestoreName": project.feature_store, "onlineEnabled": False,
        "onlineFeaturestoreName": project.name,
    }


def _fg_body(server: FakeHopsworks, group: FeatureGroup) -> dict[str, Any]:
    body = json.loads(json.dumps(group.body))
    body["expectationSuite"] = group.suite
    return body


def tags_in(server: FakeHopsworks, posted: Any) -> dict[str, Any]:
    """Tags sent inline with a create request (``{"count", "items": [{name, value}]}``)."""
    if not posted:
        return {}
    items = posted.get("items", []) if isinstance(posted, dict) else posted
    return {t["name"]: check_tag(server.state.tag_schemas, t["name"], t["value"]) for t in items}


@route("GET", FS + "/featuregroups/{name}")
def get_feature_groups(server: FakeHopsworks, call: Call, project_id: str, fs: str,
                       name: str) -> list[dict[str, Any]]:
    groups = server.state.groups_named(name)
    version = call.q("version")
    if version is not None:
        groups = [g for g in groups if str(g.body["version"]) == str(version)]
    if not groups:
        raise not_found(FEATURE_GROUP_NOT_FOUND, f"feature group {name}")
    return [_fg_body(server, g) for g in groups]


@route("POST", FS + "/featuregroups")
def create_feature_group(server: FakeHopsworks, call: Call, project_id: str,
                         fs: str) -> dict[str, Any]:
    posted = call.json()
    project = server.state.project_by_id(project_id)
    tags = tags_in(server, posted.pop("tags", None))
    fg_id = server.state.next_id()
    template_fg = template("feature_group")
    body = {k: template_fg[k] for k in ("type", "created", "creator", "statisticsConfig")}
    body |= posted
    body |= {
        "type": "cachedFeaturegroupDTO", "id": fg_id, "featurestoreId": FEATURE_STORE_ID,
        "featurestoreName": project.feature_store, "onlineEnabled": bool(posted.get("onlineEnabled")),
        "timeTravelFormat": posted.get("timeTravelFormat") or "DELTA",
        "location": hopsfs_url(f"apps/hive/warehouse/{project.feature_store}.db/"
                               f"{posted['name']}_{posted['version']}"),
    }
    for feature in body.get("features", []):
        feature["featureGroupId"] = fg_id
    suite = body.pop("expectationSuite", None)
    group = FeatureGroup(body, tags=tags)
    server.state.feature_groups[fg_id] = group
    if suite:
        group.suite = _suite(server, group, suite)
    return _fg_body(server, group)


@route("GET", FS + "/featuregroups/{fg_id}")
def get_feature_group_by_id(server: FakeHopsworks, call: Call, project_id: str, fs: str,
                            fg_id: str) -> dict[str, Any]:
    return _fg_body(server, server.state.group(fg_id))


@route("PUT", FG)
def update_feature_group(server: FakeHopsworks, call: Call, project_id: str, fs: str,
                         fg_id: str) -> dict[str, Any]:
    group = server.state.group(fg_id)
    posted = call.json()
    if call.q("updateMetadata") is not None or call.q("updateStatisticsConfig") is not None:
        group.body["description"] = posted.get("description", group.body.get("description"))
        by_name = {f["name"]: f for f in posted.get("features", [])}
        for feature in group.body.get("features", []):
            if feature["name"] in by_name:
                feature["description"] = by_name[feature["name"]].get("description")
        if "statisticsConfig" in posted:
            group.body["statisticsConfig"] = posted["statisticsConfig"]
    elif call.q("enableOnline") is not None or call.q("disableOnline") is not None:
        group.body["onlineEnabled"] = call.q("enableOnline") is not None
    else:
        raise not_found(120001, f"update mode {sorted(call.query)}")
    return _fg_body(server, group)


# -- commits ------------------------------------------------------------------------------

@route("POST", FG + "/commits")
def add_commit(server: FakeHopsworks, call: Call, project_id: str, fs: str,
               fg_id: str) -> dict[str, Any]:
    group = server.state.group(fg_id)
    posted = call.json()
    commit = template("feature_group_commit", "get_list")["items"][0]
    commit.update({k: v for k, v in posted.items() if v is not None})
    commit["commitID"] = commit.get("commitID") or commit.get("commitTime") or len(group.commits) + 1
    commit.pop("commitid", None)
    group.commits.append(commit)
    return commit


@route("GET", FG + "/commits")
def list_commits(server: FakeHopsworks, call: Call, project_id: str, fs: str,
                 fg_id: str) -> dict[str, Any]:
    group = server.state.group(fg_id)
    commits = sorted(group.commits, key=lambda c: c.get("commitTime") or 0, reverse=True)
    filter_by = call.q("filter_by")
    if filter_by and filter_by.startswith("commited_on_ltoeq:"):
        limit_ms = int(filter_by.split(":", 1)[1])
        commits = [c for c in commits if (c.get("commitTime") or 0) <= limit_ms]
    limit = call.q("limit")
    if limit not in (None, "None"):
        commits = commits[: int(limit)]
    return envelope("feature_group_commit", commits, "get_list")


# -- tags -----------------------------------------------------------------------------------

def _tag_owner(server: FakeHopsworks, fg_id: str) -> dict[str, Any]:
    return server.state.group(fg_id).tags


def tag_item(name: str, value: Any) -> dict[str, Any]:
    item = template("tag")["items"][0]
    item.update({"name": name, "value": json.dumps(value) if not isinstance(value, str) else value,
                 "schema": None, "href": None})
    return item


def tag_list(tags: dict[str, Any]) -> dict[str, Any]:
    return envelope("tag", [tag_item(k, v) for k, v in tags.items()])


def put_tag(server: FakeHopsworks, tags: dict[str, Any], name: str, call: Call) -> dict[str, Any]:
    tags[name] = check_tag(server.state.tag_schemas, name, call.raw.decode())
    return tag_list({name: tags[name]})


def get_tag(tags: dict[str, Any], name: str | None) -> dict[str, Any]:
    if name is None:
        return tag_list(tags)
    if name not in tags:
        raise not_found(TAG_NOT_FOUND, f"tag {name}")
    return tag_list({name: tags[name]})


@route("PUT", FG + "/tags/{name}")
def fg_put_tag(server, call, project_id, fs, fg_id, name):
    return put_tag(server, _tag_owner(server, fg_id), name, call)


@route("GET", FG + "/tags")
def fg_get_tags(server, call, project_id, fs, fg_id):
    return get_tag(_tag_owner(server, fg_id), None)


@route("GET", FG + "/tags/{name}")
def fg_get_tag(server, call, project_id, fs, fg_id, name):
    return get_tag(_tag_owner(server, fg_id), name)


@route("DELETE", FG + "/tags/{name}")
def fg_delete_tag(server, call, project_id, fs, fg_id, name):
    tags = _tag_owner(server, fg_id)
    if name not in tags:
        raise not_found(TAG_NOT_FOUND, f"tag {name}")
    del tags[name]


# -- expectation suites, validation reports, statistics -------------------------------------

def _suite(server: FakeHopsworks, group: FeatureGroup, posted: dict[str, Any]) -> dict[str, Any]:
    suite = template("expectation_suite") | posted
    suite |= {"id": suite.get("id") if posted.get("id") else server.state.next_id(),
              "featureStoreId": FEATURE_STORE_ID, "featureGroupId": group.id}
    for drop in ("feature_store_id", "feature_group_id", "href", "expand", "items", "type"):
        suite.pop(drop, None)
    for expectation in suite.get("expectations", []):
        expectation.setdefault("id", server.state.next_id())
    return suite


@route("PUT", FG + "/expectationsuite")
@route("POST", FG + "/expectationsuite")
def save_suite(server, call, project_id, fs, fg_id):
    group = server.state.group(fg_id)
    group.suite = _suite(server, group, call.json())
    return group.suite


@route("PUT", FG + "/expectationsuite/{suite_id}")
def update_suite(server, call, project_id, fs, fg_id, suite_id):
    return save_suite(server, call, project_id, fs, fg_id)


@route("GET", FG + "/expectationsuite")
def get_suite(server, call, project_id, fs, fg_id):
    suite = server.state.group(fg_id).suite
    return suite if suite is not None else template("expectation_suite", "get_list_empty")


@route("PUT", FG + "/validationreport")
@route("POST", FG + "/validationreport")
def save_report(server, call, project_id, fs, fg_id):
    report = call.json()
    report["id"] = server.state.next_id()
    return report


@route("PUT", FG + "/statistics")
@route("POST", FG + "/statistics")
def save_statistics(server, call, project_id, fs, fg_id):
    stats = call.json()
    stats["id"] = server.state.next_id()
    return stats
