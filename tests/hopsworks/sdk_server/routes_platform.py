"""Login, project, credentials and cluster variables."""

from __future__ import annotations

from typing import Any

from sdk_server.errors import PROJECT_NOT_FOUND, not_found
from sdk_server.fixtures import template
from sdk_server.server import FakeHopsworks, route
from sdk_server.state import USERNAME
from sdk_server.transport import Call

#: cluster variables the SDK reads (``GET /variables/<name>``); absent ones answer 404.
VARIABLES = {
    "enable_flyingduck": "false",  # no Query Service unless serve(query_service=True)
    "loadbalancer_external_domain_namenode": "namenode.fake.hopsworks",
    "loadbalancer_external_domain_datanode": "datanode.fake.hopsworks",
    "service_discovery_domain": "",
}


def _project_info(server: FakeHopsworks, name: str) -> dict[str, Any]:
    project = server.state.projects.get(name)
    if project is None:
        raise not_found(PROJECT_NOT_FOUND, f"project {name}")
    return {"projectId": project.id, "projectName": project.name, "created": "2026-01-01T00:00:00Z",
            "description": "", "owner": USERNAME, "projectNamespace": project.name.replace("_", "-")}


@route("GET", "/project")
def project_teams(server: FakeHopsworks, call: Call) -> list[dict[str, Any]]:
    user = template("user") | {"username": USERNAME, "uid": 10000}
    return [{"project": {"id": p.id, "name": p.name, "owner": {"uid": 10000}}, "user": user}
            for p in server.state.projects.values()]


@route("GET", "/project/getProjectInfo/{name}")
def project_info(server: FakeHopsworks, call: Call, name: str) -> dict[str, Any]:
    return _project_info(server, name)


@route("GET", "/project/{project_id}")
def project(server: FakeHopsworks, call: Call, project_id: str) -> dict[str, Any]:
    return _project_info(server, server.state.project_by_id(project_id).name)


@route("GET", "/project/{project_id}/credentials")
def credentials(server: FakeHopsworks, call: Call, project_id: str) -> dict[str, Any]:
    """The project's key material: real PEMs when the Query Service runs (the SDK's flight
    client speaks TLS with them), else placeholders the SDK only writes to files."""
    server.state.project_by_id(project_id)
    if server.certificates:
        pems = server.certificates
        return {"kStore": "ZmFrZS1rZXlzdG9yZQ==", "tStore": "ZmFrZS10cnVzdHN0b3Jl",
                "password": "fake-password", "caChain": pems["ca"].decode(),
                "clientCert": pems["client_cert"].decode(),
                "clientKey": pems["client_key"].decode()}
    return {"kStore": "ZmFrZS1rZXlzdG9yZQ==", "tStore": "ZmFrZS10cnVzdHN0b3Jl",
            "password": "fake-password", "caChain": "FAKE CA CHAIN",
            "clientCert": "FAKE CLIENT CERT", "clientKey": "FAKE CLIENT KEY"}


@route("GET", "/variables/versions")
def versions(server: FakeHopsworks, call: Call) -> list[dict[str, str]]:
    return [{"software": "hopsworks", "version": "5.2.1"}]


@route("GET", "/variables/{name}")
def variable(server: FakeHopsworks, call: Call, name: str) -> dict[str, Any]:
    variables = VARIABLES | server.variables
    if name not in variables:
        raise not_found(120001, f"variable {name}")
    return {"successMessage": variables[name]}
