"""The model registry: model versions (``<name>_<version>``), listing by name (ordered by a
training metric and limited when ``get_best_model`` asks: ``sort_by``, ``limit``), tags.

Server rules: a model version is registered only once its files folder exists in HopsFS
(``/Projects/<p>/Models/<name>/<version>``, uploaded by ``hsml`` first); registering an existing
``name_version`` again is refused (HTTP 409, as Hopsworks refuses a version conflict); tag names
must have a schema (as for feature groups, :func:`rules.check_tag`). Deleting a version removes
its folder. Files are served by the dataset routes.
"""

from __future__ import annotations

import shutil
import time
from typing import Any

from sdk_server.errors import HttpError, not_found
from sdk_server.hopsfs import local_path
from sdk_server.routes_featurestore import get_tag, put_tag
from sdk_server.server import FakeHopsworks, route
from sdk_server.state import USERNAME
from sdk_server.transport import Call

MODELS = "/project/{project_id}/modelregistries/{registry_id}/models"
#: RESTCodes.ModelRegistryErrorCode.MODEL_NOT_FOUND / MODEL_VERSION_ALREADY_EXISTS (a conflict).
MODEL_NOT_FOUND = 360000
MODEL_VERSION_EXISTS = 360005


def _models(server: FakeHopsworks) -> dict[str, dict[str, Any]]:
    return server.state.models


def _model(server: FakeHopsworks, model_id: str) -> dict[str, Any]:
    model = _models(server).get(model_id)
    if model is None:
        raise not_found(MODEL_NOT_FOUND, f"model {model_id}")
    return model


def _answer(model: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in model.items() if k != "tags"}


@route("PUT", MODELS + "/{model_id}")
def register(server: FakeHopsworks, call: Call, project_id: str, registry_id: str,
             model_id: str) -> dict:
    project = server.state.project_by_id(project_id)
    body = call.json() or {}
    name, version = body.get("name"), body.get("version")
    if model_id != f"{name}_{version}":
        raise HttpError(400, 120001, f"model id {model_id} is not name_version of the body")
    if model_id in _models(server):
        raise HttpError(409, MODEL_VERSION_EXISTS, f"model {name} version {version} already "
                        "exists", "A model with this version already exists")
    folder = f"/Projects/{project.name}/Models/{name}/{version}"
    if not local_path(server.state.hopsfs, folder).is_dir():
        raise not_found(110011, f"model folder {folder}")
    model = {**body, "id": model_id, "projectName": project.name, "modelRegistryId": int(registry_id),
             "created": int(time.time() * 1000), "creator": USERNAME,
             "userFullName": USERNAME, "tags": {}}
    _models(server)[model_id] = model
    return _answer(model)


@route("GET", MODELS + "/{model_id}")
def get_model(server: FakeHopsworks, call: Call, project_id: str, registry_id: str,
              model_id: str) -> dict:
    return _answer(_model(server, model_id))


@route("GET", MODELS)
def list_models(server: FakeHopsworks, call: Call, project_id: str, registry_id: str) -> dict:
    names = [f.split(":", 1)[1] for f in call.query.get("filter_by", []) if f.startswith("name_eq:")]
    items = [_answer(m) for m in _models(server).values() if not names or m["name"] in names]
    items.sort(key=lambda m: m["version"])
    for sort in call.query.get("sort_by", []):  # hsml's get_best_model: "<metric>:<desc|asc>"
        metric, _, direction = sort.rpartition(":")
        if direction not in ("asc", "desc"):
            raise HttpError(400, 120001, f"sort_by {sort!r}: the direction must be asc or desc")
        # versions recording the metric, best first (ties: the newest); the others after them
        sign = -1.0 if direction == "desc" else 1.0
        ranked = [m for m in items if metric in (m.get("metrics") or {})]
        ranked.sort(key=lambda m: (sign * m["metrics"][metric], -m["version"]))
        items = ranked + [m for m in items if m not in ranked]
    for limit in call.query.get("limit", []):
        items = items[: int(limit)]
    return {"count": len(items), "items": items}


@route("DELETE", MODELS + "/{model_id}")
def delete_model(server: FakeHopsworks, call: Call, project_id: str, registry_id: str,
                 model_id: str) -> tuple:
    model = _models(server).pop(model_id, None)
    if model is None:
        raise not_found(MODEL_NOT_FOUND, f"model {model_id}")
    folder = f"/Projects/{model['projectName']}/Models/{model['name']}/{model['version']}"
    shutil.rmtree(local_path(server.state.hopsfs, folder), ignore_errors=True)
    return 204, None


@route("PUT", MODELS + "/{model_id}/tags/{name}")
def put_model_tag(server: FakeHopsworks, call: Call, project_id: str, registry_id: str,
                  model_id: str, name: str) -> dict:
    return put_tag(server, _model(server, model_id)["tags"], name, call)


@route("GET", MODELS + "/{model_id}/tags")
def get_model_tags(server: FakeHopsworks, call: Call, project_id: str, registry_id: str,
                   model_id: str) -> dict:
    return get_tag(_model(server, model_id)["tags"], None)


@route("GET", MODELS + "/{model_id}/tags/{name}")
def get_model_tag(server: FakeHopsworks, call: Call, project_id: str, registry_id: str,
                  model_id: str, name: str) -> dict:
    return get_tag(_model(server, model_id)["tags"], name)


@route("DELETE", MODELS + "/{model_id}/tags/{name}")
def delete_model_tag(server: FakeHopsworks, call: Call, project_id: str, registry_id: str,
                     model_id: str, name: str) -> tuple:
    tags = _model(server, model_id)["tags"]
    if name not in tags:
        raise not_found(370002, f"tag {name}")
    del tags[name]
    return 204, None
