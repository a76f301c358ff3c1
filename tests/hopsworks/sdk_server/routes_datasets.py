"""The dataset (file) API over the fake cluster's HopsFS folder: stat, listing, download.

Paths arrive as HopsFS paths, ``hopsfs://`` URLs (the SDK passes training-dataset locations
as they are) or paths relative to the project (as Hopsworks resolves them): see
:func:`sdk_server.routes_uploads.project_path`. Writes are :mod:`routes_uploads`'.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sdk_server.errors import INODE_NOT_FOUND, not_found
from sdk_server.fixtures import envelope, template
from sdk_server.server import FakeHopsworks, route
from sdk_server.transport import Call


def _file(server: FakeHopsworks, project_id: str, path: str) -> Path:
    # imported here: this module's routes must register before routes_uploads' catch-all GET
    from sdk_server.routes_uploads import project_path

    target = project_path(server, project_id, path)
    if not target.exists():
        raise not_found(INODE_NOT_FOUND, f"path {path}")
    return target


def _inode(server: FakeHopsworks, target: Path) -> dict[str, Any]:
    item = template("inode")["items"][0]
    rel = "/" + str(target.relative_to(server.state.hopsfs))
    item["attributes"] = item["attributes"] | {"path": rel, "name": target.name,
                                               "dir": target.is_dir(),
                                               "size": 0 if target.is_dir() else target.stat().st_size}
    return item


@route("GET", "/project/{project_id}/dataset/download/with_auth/{path:path}")
def download(server: FakeHopsworks, call: Call, project_id: str, path: str) -> bytes:
    target = _file(server, project_id, path)
    if target.is_dir():
        raise not_found(INODE_NOT_FOUND, f"file {path} (a directory)")
    return target.read_bytes()


@route("GET", "/project/{project_id}/dataset/{path:path}")
def stat_or_list(server: FakeHopsworks, call: Call, project_id: str, path: str) -> dict[str, Any]:
    target = _file(server, project_id, path)
    if call.q("action") == "listing":
        children = sorted(target.iterdir()) if target.is_dir() else [target]
        offset, limit = int(call.q("offset", 0)), int(call.q("limit", 1000))
        body = envelope("inode", [_inode(server, c) for c in children[offset:offset + limit]])
        body["count"] = len(children)
        return body
    return _inode(server, target)
