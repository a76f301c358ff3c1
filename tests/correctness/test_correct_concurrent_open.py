"""Many processes opening the same fresh store at the same moment: none may fail."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

# Imported here, in the parent: the forked children inherit the loaded modules instead of
# each importing the local backend again (24 processes x 8 attempts x 2 tests) where the
# parent had not; the open at the barrier is the same race.
from feature_store.local.catalog import Catalog
from model_registry.local.index import RegistryIndex

_PROCESSES = 24


def _open_catalog(root: str, barrier, results) -> None:
    try:
        barrier.wait()
        catalog = Catalog(Path(root) / "catalog.sqlite")
        catalog.set_tag("fg", 1, "", "t", 1)
        catalog.query("SELECT * FROM tags")
        results.put("ok")
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        results.put(f"{type(exc).__name__}: {exc}")


def _open_index(root: str, barrier, results) -> None:
    try:
        barrier.wait()
        index = RegistryIndex(Path(root) / "index.sqlite")
        index.list()
        results.put("ok")
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        results.put(f"{type(exc).__name__}: {exc}")


def _run_all(target, root: Path) -> list[str]:
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(_PROCESSES)
    results = ctx.Queue()
    procs = [ctx.Process(target=target, args=(str(root), barrier, results)) for _ in range(_PROCESSES)]
    for p in procs:
        p.start()
    out = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    return out


def test_many_processes_open_a_fresh_catalog_at_once(tmp_path):
    for attempt in range(8):
        root = tmp_path / f"store{attempt}"
        root.mkdir()
        assert _run_all(_open_catalog, root) == ["ok"] * _PROCESSES


def test_many_processes_open_a_fresh_registry_index_at_once(tmp_path):
    for attempt in range(8):
        root = tmp_path / f"registry{attempt}"
        root.mkdir()
        assert _run_all(_open_index, root) == ["ok"] * _PROCESSES
