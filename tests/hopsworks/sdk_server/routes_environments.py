"""Python environments: get, create (clone a base), install a wheel or a requirements file.

Server rules: the built-in environments (``python-feature-pipeline`` and the others a 5.2
cluster ships) exist and are read-only (installing into one is refused, HTTP 400, as
Hopsworks refuses to modify a base environment); a new environment must clone an existing one;
a wheel or requirements file is installed only from a path that exists in HopsFS. Commands
finish at once (status ``SUCCESS``); :attr:`State.environments` records what was installed.
"""

from __future__ import annotations

from typing import Any

from sdk_server.errors import ILLEGAL_ARGUMENT, bad_request, not_found
from sdk_server.hopsfs import local_path
from sdk_server.server import FakeHopsworks, route
from sdk_server.transport import Call

ENVS = "/project/{project_id}/python/environments"
#: RESTCodes.PythonErrorCode.ANACONDA_ENVIRONMENT_NOT_FOUND / LIBRARY_NOT_FOUND.
ENVIRONMENT_NOT_FOUND = 300000
LIBRARY_NOT_FOUND = 300003
BUILT_IN = ("python-feature-pipeline", "python-training-pipeline", "pandas-training-pipeline",
            "torch-training-pipeline", "tensorflow-training-pipeline", "jupyter-python")
_DONE = {"count": 1, "items": [{"status": "SUCCESS", "op": "CREATE", "errorMessage": None}]}


def environments(server: FakeHopsworks) -> dict[str, dict[str, Any]]:
    """name -> {"base": ..., "libraries": {name: spec}} (built-ins created on first use)."""
    envs = server.state.environments
    for name in BUILT_IN:
        envs.setdefault(name, {"base": None, "libraries": {}, "built_in": True})
    return envs


def _env(server: FakeHopsworks, name: str) -> dict[str, Any]:
    env = environments(server).get(name)
    if env is None:
        raise not_found(ENVIRONMENT_NOT_FOUND, f"environment {name}")
    return env


def _body(name: str, env: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "pythonVersion": "3.11", "description": env.get("base") or "",
            "commands": _DONE,
            "libraries": {"count": len(env["libraries"]),
                          "items": [{"library": k, **v} for k, v in env["libraries"].items()]}}


@route("GET", ENVS + "/{name}")
def get_environment(server: FakeHopsworks, call: Call, project_id: str, name: str) -> dict:
    return _body(name, _env(server, name))


@route("POST", ENVS + "/{name}")
def create_environment(server: FakeHopsworks, call: Call, project_id: str, name: str) -> dict:
    envs = environments(server)
    if name in envs:
        raise bad_request(ILLEGAL_ARGUMENT, f"environment {name} already exists")
    base = ((call.json() or {}).get("baseImage") or {}).get("name")
    if base not in envs:
        raise not_found(ENVIRONMENT_NOT_FOUND, f"base environment {base}")
    envs[name] = {"base": base, "libraries": dict(envs[base]["libraries"]), "built_in": False}
    return _body(name, envs[name])


@route("POST", ENVS + "/{name}/libraries/{library}")
def install(server: FakeHopsworks, call: Call, project_id: str, name: str,
            library: str) -> dict:
    env = _env(server, name)
    if env["built_in"]:
        raise bad_request(ILLEGAL_ARGUMENT, f"environment {name} is a base environment and "
                          "cannot be modified; clone it first")
    spec = call.json() or {}
    url = str(spec.get("dependencyUrl") or "")
    if spec.get("packageSource") not in ("WHEEL", "REQUIREMENTS_TXT") or not url:
        raise bad_request(ILLEGAL_ARGUMENT, f"unsupported library spec {spec}")
    if not local_path(server.state.hopsfs, url).is_file():
        raise not_found(110011, f"path {url}")
    env["libraries"][library] = spec
    return {"library": library, "channel": spec["channelUrl"],
            "packageSource": spec["packageSource"], "version": "", "commands": _DONE}


@route("GET", ENVS + "/{name}/libraries/{library}")
def library_status(server: FakeHopsworks, call: Call, project_id: str, name: str,
                   library: str) -> dict:
    spec = _env(server, name)["libraries"].get(library)
    if spec is None:
        raise not_found(LIBRARY_NOT_FOUND, f"library {library}")
    return {"library": library, "channel": spec["channelUrl"],
            "packageSource": spec["packageSource"], "version": "", "commands": _DONE}
