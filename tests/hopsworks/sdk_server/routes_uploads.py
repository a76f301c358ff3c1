"""Dataset API writes: chunked (flow) uploads, mkdir, move, delete, into the fake HopsFS.

A path the SDK sends is absolute (``/Projects/<project>/...``) or relative to the project
(``Resources/jobs``, as Hopsworks resolves it). Uploads arrive as ``flow`` chunks (multipart
with ``flowChunkNumber``/``flowTotalChunks``/``flowFilename`` and the bytes as ``file``); the
file appears once its last chunk is in. Reads (stat, listing, download) are answered here until
:mod:`routes_datasets` has them (the first module registered wins).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import urlparse

from sdk_server.errors import ILLEGAL_ARGUMENT, INODE_NOT_FOUND, bad_request, not_found
from sdk_server.fixtures import envelope, template
from sdk_server.hopsfs import local_path
from sdk_server.server import FakeHopsworks, route
from sdk_server.transport import Call

DATASET = "/project/{project_id}/dataset"


def project_path(server: FakeHopsworks, project_id: str, path: str) -> Path:
    """The local file of a dataset-API path (relative ones are inside the project)."""
    parsed = urlparse(path)
    path = parsed.path if parsed.scheme else path
    if not path.lstrip("/").startswith("Projects/"):
        project = server.state.project_by_id(project_id)
        path = f"/Projects/{project.name}/{path.lstrip('/')}"
    return local_path(server.state.hopsfs, path)


@route("GET", DATASET + "/download/with_auth/{path:path}")
def download(server: FakeHopsworks, call: Call, project_id: str, path: str) -> bytes:
    target = project_path(server, project_id, path)
    if not target.is_file():
        raise not_found(INODE_NOT_FOUND, f"file {path}")
    return target.read_bytes()


def _inode(server: FakeHopsworks, target: Path) -> dict:
    item = template("inode")["items"][0]
    item["attributes"] = item["attributes"] | {
        "path": "/" + target.relative_to(server.state.hopsfs).as_posix(), "name": target.name,
        "dir": target.is_dir(), "size": 0 if target.is_dir() else target.stat().st_size}
    return item


@route("GET", DATASET + "/{path:path}")
def stat_or_list(server: FakeHopsworks, call: Call, project_id: str, path: str) -> dict:
    """``DatasetApi.exists``/``get`` (stat) and listings (``action=listing``)."""
    target = project_path(server, project_id, path)
    if not target.exists():
        raise not_found(INODE_NOT_FOUND, f"path {path}")
    if call.q("action") == "listing":
        children = sorted(target.iterdir()) if target.is_dir() else [target]
        offset, limit = int(call.q("offset", 0)), int(call.q("limit", 1000))
        return envelope("inode", [_inode(server, c) for c in children[offset:offset + limit]]) | {
            "count": len(children)}
    return _inode(server, target)


@route("POST", DATASET + "/upload/{path:path}")
def upload_chunk(server: FakeHopsworks, call: Call, project_id: str, path: str) -> dict:
    folder = project_path(server, project_id, path)
    if not folder.is_dir():
        raise not_found(INODE_NOT_FOUND, f"upload folder {path}")
    name = call.form.get("flowFilename")
    number, total = int(call.form.get("flowChunkNumber", 0)), int(call.form.get("flowTotalChunks", 0))
    if not name or "file" not in call.files or not 1 <= number <= total:
        raise bad_request(ILLEGAL_ARGUMENT, f"not a flow chunk upload: {sorted(call.form)}")
    chunks = server.state.root / "uploads" / f"{folder.as_posix().replace('/', '_')}_{name}"
    chunks.mkdir(parents=True, exist_ok=True)
    (chunks / f"{number:08d}").write_bytes(call.files["file"])
    parts = sorted(chunks.iterdir())
    if len(parts) == total:
        (folder / name).write_bytes(b"".join(p.read_bytes() for p in parts))
        shutil.rmtree(chunks)
    return {"successMessage": "chunk uploaded"}


@route("POST", DATASET + "/{path:path}")
def create_or_move(server: FakeHopsworks, call: Call, project_id: str, path: str) -> dict:
    target = project_path(server, project_id, path)
    action = call.q("action")
    if action == "create":
        if target.exists():
            raise bad_request(ILLEGAL_ARGUMENT, f"{path} already exists")
        target.mkdir(parents=True)
        return {"attributes": {"path": path, "name": target.name, "dir": True}}
    if action == "move":
        if not target.exists():
            raise not_found(INODE_NOT_FOUND, f"path {path}")
        destination = project_path(server, project_id, call.q("destination_path", ""))
        if destination.exists():
            raise bad_request(ILLEGAL_ARGUMENT, f"{destination} exists")
        target.replace(destination)
        return {"successMessage": "moved"}
    raise bad_request(ILLEGAL_ARGUMENT, f"unsupported dataset action {action!r}")


@route("DELETE", DATASET + "/{path:path}")
def delete(server: FakeHopsworks, call: Call, project_id: str, path: str) -> tuple:
    target = project_path(server, project_id, path)
    if not target.exists():
        raise not_found(INODE_NOT_FOUND, f"path {path}")
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink()
    return 204, None
