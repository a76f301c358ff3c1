"""Many processes opening the same fresh store at the same moment: none may fail."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

# Imported here, in the parent: the forked children inherit the loaded modules instead of
# each importing the local backend again; the open at the barrier is the same race.
from feature_store.local.catalog import Catalog
from model_registry.local.index import RegistryIndex

_PROCESSES = 24


_ATTEMPTS = 8


def _open_catalog(root: Path) -> None:
    catalog = Catalog(root / "catalog.sqlite")
    catalog.set_tag("fg", 1, "", "t", 1)
    catalog.query("SELECT * FROM tags")


def _open_index(root: Path) -> None:
    RegistryIndex(root / "index.sqlite").list()


def _race(target, roots: list[str], barrier, results) -> None:
    """One of the racing processes: for each fresh root in turn, wait until every process is
    at the barrier, then open it (the same moment for all) and report."""
    for root in roots:
        barrier.wait()
        try:
            target(Path(root))
            results.put((root, "ok"))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            results.put((root, f"{type(exc).__name__}: {exc}"))


def _run_all(target, base: Path) -> dict[str, list[str]]:
    """Each of _ATTEMPTS fresh roots opened by _PROCESSES processes at once. The processes
    are forked once and race on every root in turn (a reusable barrier per root): the same
    races as a fresh set of processes per root, without forking the test process 192 times."""
    roots = [str(base / f"store{i}") for i in range(_ATTEMPTS)]
    for root in roots:
        Path(root).mkdir()
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(_PROCESSES)
    results = ctx.Queue()
    procs = [ctx.Process(target=_race, args=(target, roots, barrier, results))
             for _ in range(_PROCESSES)]
    for p in procs:
        p.start()
    out: dict[str, list[str]] = {root: [] for root in roots}
    for _ in range(_PROCESSES * _ATTEMPTS):
        root, outcome = results.get(timeout=120)
        out[root].append(outcome)
    for p in procs:
        p.join(timeout=60)
    return out


def test_many_processes_open_a_fresh_catalog_at_once(tmp_path):
    outcomes = _run_all(_open_catalog, tmp_path)
    assert outcomes == {root: ["ok"] * _PROCESSES for root in outcomes}
    assert len(outcomes) == _ATTEMPTS


def test_many_processes_open_a_fresh_registry_index_at_once(tmp_path):
    outcomes = _run_all(_open_index, tmp_path)
    assert outcomes == {root: ["ok"] * _PROCESSES for root in outcomes}
    assert len(outcomes) == _ATTEMPTS
