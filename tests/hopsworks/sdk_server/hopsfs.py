"""The cluster's file system (HopsFS), kept in a local folder, and the one SDK seam it needs.

Hopsworks stores feature-group tables and training-dataset files in HopsFS. The SDK reaches it
two ways:

* **over HTTP** (the dataset API: stat, list, download, upload): answered by
  :mod:`routes_datasets` from ``<root>/hopsfs`` — no seam needed;
* **Delta writes** (``fg.insert``): ``hsfs.core.delta_engine.DeltaEngine`` computes an
  ``hdfs://<namenode>:<port>/<path>`` URL (the namenode from the ``loadbalancer_external_domain_namenode``
  variable) and hands it to ``deltalake`` — on a cluster the ``hops-deltalake`` fork, which
  speaks HDFS. Here upstream ``deltalake`` is installed, which cannot. :func:`patch_delta_location`
  wraps ``DeltaEngine._get_delta_rs_location`` so the URL the SDK computed is mapped to the
  same path under ``<root>/hopsfs``; everything else (merge/append choice, commit metadata read
  from the Delta log, the commit POSTed to the server) is the SDK's own code.

What this does **not** show: that HopsFS/namenode is reachable from a client, TLS to HopsFS,
and behaviour differences of the ``hops-deltalake`` fork against upstream ``deltalake``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

NAMENODE = "namenode.fake.hopsworks"
NAMENODE_PORT = 8020


def hopsfs_url(path: str) -> str:
    """The ``hopsfs://`` URL the server reports for a path (as Hopsworks does)."""
    return f"hopsfs://{NAMENODE}:{NAMENODE_PORT}/{path.lstrip('/')}"


def local_path(root: Path, location: str) -> Path:
    """The local folder for a ``hopsfs://``/``hdfs://`` URL or an absolute HopsFS path."""
    parsed = urlparse(location)
    path = parsed.path if parsed.scheme else location
    return Path(root) / path.lstrip("/")


@contextmanager
def patch_delta_location(root: Path) -> Iterator[None]:
    """Map the HDFS URL the SDK's Delta engine computes to ``root`` (see module docstring)."""
    from hsfs.core import delta_engine

    original = delta_engine.DeltaEngine._get_delta_rs_location

    def local_location(self: object) -> str:
        url = original(self)
        parsed = urlparse(url)
        if parsed.scheme not in ("hdfs", "hopsfs") or parsed.hostname != NAMENODE:
            raise AssertionError(f"Delta write outside the fake cluster's HopsFS: {url}")
        target = local_path(root, url)
        target.parent.mkdir(parents=True, exist_ok=True)
        return str(target)

    delta_engine.DeltaEngine._get_delta_rs_location = local_location
    try:
        yield
    finally:
        delta_engine.DeltaEngine._get_delta_rs_location = original
