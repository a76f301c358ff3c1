"""One feature group's offline storage: a Delta Lake table written with delta-rs.

Every write is one Delta commit, so a reader always sees either the previous or the new commit,
and a process killed mid-write leaves only unreferenced parquet files behind. Writers on this
machine are serialised by an exclusive ``flock`` on a lock file beside the table (released by
the OS if the process dies); a commit conflict with any other writer is retried.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, write_deltalake
from deltalake.exceptions import CommitFailedError
from deltalake.schema import Field

from feature_store.local.storage import snapshots
from feature_store.local.storage.snapshots import snapshot
from fstrain.kernel.errors import CommitConflictError, HistoryRemovedError, InvalidArgumentError

WRITE_OPERATIONS = ("WRITE", "MERGE", "DELETE")
#: commit metadata key: the commit clock's time of a commit fstrain wrote (epoch ms)
COMMITTED_MS = "fstrain.committed_ms"
#: new tables record Delta's change data feed (as-known reads take row versions from it)
NEW_TABLE_CONFIGURATION = {"delta.enableChangeDataFeed": "true",
                           "delta.enableExpiredLogCleanup": "false"}
#: every commit fstrain makes keeps the whole log: by default delta-rs removes the commit files
#: older than ``delta.logRetentionDuration`` (30 days) before each checkpoint (every 100
#: commits), and with them every older version: the commits training-dataset versions pin
#: (their re-reads and re-creations), time travel, as-known joins and the late-data figures.
#: Checkpoints are still written; ``fg.vacuum()`` removes data files, never the log.
KEEP_LOG = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


#: the commit clock: the time (epoch ms) a commit is recorded at, which time travel, commit
#: details and as-known joins read; tests replace it to write histories at chosen times
commit_clock: Callable[[], int] = _wall_clock_ms


def _stamp(metadata: dict[str, str] | None = None) -> CommitProperties:
    """Commit properties recording the commit clock's time (and ``metadata``)."""
    return CommitProperties(custom_metadata={**(metadata or {}),
                                             COMMITTED_MS: str(int(commit_clock()))})


def committed_ms(entry: dict[str, Any]) -> int:
    """A Delta history entry's time: the commit clock's, else the Delta timestamp."""
    return int(entry.get(COMMITTED_MS) or entry["timestamp"])
_LOCK_TIMEOUT_S = 300.0
_RETRIES = 5


@dataclass(frozen=True)
class Commit:
    """One data commit of a feature group (the Delta version is the commit id)."""

    commit_id: int
    committed_on: str  # ISO-8601 UTC
    timestamp_ms: int
    operation: str
    rows_inserted: int
    rows_updated: int
    rows_deleted: int


def forget_snapshots() -> None:
    """Drop cached snapshots (a dropped table's path may be reused by a new table)."""
    snapshots.forget()


def _quote(column: str) -> str:
    return f'"{column}"'


def key_predicate(data: pa.Table, keys: Sequence[str]) -> str:
    """The merge predicate matching target rows ``t`` to source rows ``s`` on ``keys``.

    A key column with nulls in ``data`` (a nullable partition key) compares null-safe, so a
    null matches a null and re-inserting such a row replaces it instead of adding a copy.
    """
    parts = []
    for k in keys:
        if data.column(k).null_count:
            parts.append(f"(t.{_quote(k)} IS NOT DISTINCT FROM s.{_quote(k)})")
        else:
            parts.append(f"(t.{_quote(k)} = s.{_quote(k)})")
    return " AND ".join(parts)


def changed_predicate(data: pa.Table, keys: Sequence[str]) -> str | None:
    """The merge-update condition: some non-key column differs (null-safe), else ``None``."""
    values = [c for c in data.column_names if c not in set(keys)]
    if not values:
        return None
    return " OR ".join(f"(t.{_quote(c)} IS DISTINCT FROM s.{_quote(c)})" for c in values)


def _file_uri(table_uri: str, path: str) -> str:
    """A log action's file path (percent-encoded, relative to the table unless absolute) as
    ``DeltaTable.file_uris()`` gives it."""
    if "://" in path or path.startswith("/"):
        return path
    return f"{table_uri}/{unquote(path)}"


class DeltaFeatureTable:
    """Delta Lake storage of one feature group version."""

    def __init__(self, path: Path, owner: str) -> None:
        self.path = path
        self.owner = owner
        self._lock_path = path.parent / f".{path.name}.lock"

    # -- locking -----------------------------------------------------------------------------

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """Exclusive writer lock for this table (cross-process, released on process death)."""
        self._lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_CREAT | os.O_RDWR, 0o644)
        deadline = time.monotonic() + _LOCK_TIMEOUT_S
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise CommitConflictError(
                            f"{self.owner}: another writer held the table lock for more than "
                            f"{_LOCK_TIMEOUT_S:.0f} s; nothing was written. Retry later."
                        ) from None
                    time.sleep(0.02)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    # -- state -------------------------------------------------------------------------------

    def exists(self) -> bool:
        return DeltaTable.is_deltatable(str(self.path))

    def create(self, schema: pa.Schema) -> None:
        """Create the empty table (version 0) if it does not exist yet."""
        if not self.exists():
            DeltaTable.create(str(self.path), schema=schema, mode="ignore",
                              configuration=dict(NEW_TABLE_CONFIGURATION),
                              post_commithook_properties=KEEP_LOG)

    def table(self, version: int | None = None) -> DeltaTable:
        """The table at ``version`` (a committed version never changes, so it is cached)."""
        if version is None:
            return DeltaTable(str(self.path))
        return snapshot(str(self.path), int(version)).table

    def version(self) -> int:
        """The latest committed version.

        Read from the commit files' names in ``_delta_log`` (every commit, checkpointed or not,
        writes ``<version>.json`` atomically), which costs a directory listing instead of
        loading the table's log (milliseconds per call, and queries ask once per group).
        """
        log = self.path / "_delta_log"
        try:
            names = os.listdir(log)
        except FileNotFoundError:
            return self.table().version()  # let delta-rs raise its own error
        versions = [int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit()]
        return max(versions) if versions else self.table().version()

    def files(self, version: int | None = None) -> list[str]:
        return self.table(version).file_uris()

    def files_by_version(self, upto: int) -> list[list[str]]:
        """Each version's files (as :meth:`files` lists them), versions 0 to ``upto``.

        Read from the commit files' ``add`` and ``remove`` actions (the Delta protocol's log),
        each once: loading every version afresh reads the whole log again each time
        (quadratic in commits: 300 commits took 7.5 s that way, 0.1 s read from the log;
        bench/late_data_commits.py). A commit file that is gone (Delta's log cleanup, on a
        table written before fstrain kept its log: :data:`KEEP_LOG`) took its version and every
        older one with it: a :class:`HistoryRemovedError` naming the group."""
        base = str(self.path)
        live: dict[str, None] = {}  # insertion-ordered set
        out = []
        for version in range(upto + 1):
            try:
                text = self.commit_file(version).read_text(encoding="utf-8")
            except FileNotFoundError:
                raise HistoryRemovedError(
                    f"{self.owner}: the commit file of version {version} is gone (Delta's log "
                    "cleanup removes those past its retention where a writer lets it; "
                    "fstrain's commits keep them), so what needs every version's files "
                    "(as-known joins, the late-data figures) cannot be read for this group."
                ) from None
            for line in text.splitlines():
                action = json.loads(line) if line.strip() else {}
                if "add" in action:
                    live[_file_uri(base, action["add"]["path"])] = None
                elif "remove" in action:
                    live.pop(_file_uri(base, action["remove"]["path"]), None)
            out.append(list(live))
        return out

    def commit_file(self, version: int) -> Path:
        """Where the Delta log keeps the commit of ``version``."""
        return self.path / "_delta_log" / f"{int(version):020d}.json"

    def schema(self, version: int | None = None) -> pa.Schema:
        return pa.schema(self.table(version).schema().to_arrow())

    def row_count(self, version: int | None = None) -> int:
        return sum(a["num_records"] for a in self._add_actions(version))

    def _add_actions(self, version: int | None) -> list[dict[str, Any]]:
        actions = self.table(version).get_add_actions(flatten=True)
        table = pa.table(actions)
        return table.select(["num_records"]).to_pylist() if table.num_rows else []

    def history(self) -> list[Commit]:
        """Data commits, newest first (schema-only commits are left out)."""
        commits = []
        for entry in self.table().history():
            op = entry.get("operation")
            if op not in WRITE_OPERATIONS:
                continue
            metrics = entry.get("operationMetrics") or {}
            if op == "WRITE":
                inserted = int(metrics.get("num_added_rows", 0))
                updated, deleted = 0, int(entry.get("fstrain.rows_replaced", 0) or 0)
            elif op == "MERGE":
                inserted = int(metrics.get("num_target_rows_inserted", 0))
                updated = int(metrics.get("num_target_rows_updated", 0))
                deleted = int(metrics.get("num_target_rows_deleted", 0))
            else:
                inserted, updated = 0, 0
                deleted = int(metrics.get("num_deleted_rows", 0))
            ts = committed_ms(entry)
            import pandas as pd

            commits.append(
                Commit(
                    commit_id=int(entry["version"]),
                    committed_on=pd.Timestamp(ts, unit="ms", tz="UTC").isoformat(),
                    timestamp_ms=ts,
                    operation=op,
                    rows_inserted=inserted,
                    rows_updated=updated,
                    rows_deleted=deleted,
                )
            )
        return commits

    def commit_times(self, upto: int) -> dict[int, int]:
        """``{version: epoch ms}`` of every commit up to ``upto`` (see :func:`committed_ms`)."""
        return {int(e["version"]): committed_ms(e) for e in self.table().history()
                if int(e["version"]) <= upto}

    def version_at(self, wallclock_ms: int) -> int:
        """The latest version committed at or before ``wallclock_ms`` (epoch ms)."""
        best = None
        for entry in self.table().history():
            if committed_ms(entry) <= wallclock_ms:
                v = int(entry["version"])
                best = v if best is None else max(best, v)
        if best is None:
            raise InvalidArgumentError(
                f"{self.owner}: no commit exists at or before the requested time; the first "
                "commit is later. Pick a later time."
            )
        return best

    # -- writes ------------------------------------------------------------------------------

    def upsert(
        self, data: pa.Table, keys: Sequence[str], *, overwrite: bool = False
    ) -> int:
        """Upsert ``data`` on ``keys`` (or replace everything with ``overwrite``) in one commit.

        Only rows whose values differ are updated; an upsert that changes nothing (a re-run of
        the same data) writes no commit and returns the current version. Returns the version. Must be called while holding :meth:`write_lock`.
        """
        for attempt in range(_RETRIES):
            try:
                dt = self.table()
                if overwrite:
                    previous = self.row_count()
                    write_deltalake(
                        dt,
                        data,
                        mode="overwrite",
                        commit_properties=_stamp({"fstrain.rows_replaced": str(previous)}),
                        post_commithook_properties=KEEP_LOG,
                    )
                elif not dt.file_uris():
                    write_deltalake(dt, data, mode="append", commit_properties=_stamp(),
                                    post_commithook_properties=KEEP_LOG)
                else:
                    predicate = key_predicate(data, keys)
                    (
                        dt.merge(
                            source=data,
                            predicate=predicate,
                            source_alias="s",
                            target_alias="t",
                            commit_properties=_stamp(),
                            post_commithook_properties=KEEP_LOG,
                        )
                        .when_matched_update_all(predicate=changed_predicate(data, keys))
                        .when_not_matched_insert_all()
                        .execute()
                    )
                return self.version()
            except CommitFailedError as exc:
                if attempt == _RETRIES - 1:
                    raise CommitConflictError(
                        f"{self.owner}: the commit conflicted with a concurrent writer "
                        f"{_RETRIES} times; nothing was written. Retry the insert."
                    ) from exc
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    def delete_matching(self, keys_table: pa.Table, keys: Sequence[str]) -> int:
        """Delete rows whose ``keys`` match a row of ``keys_table``, in one commit."""
        dt = self.table()
        predicate = key_predicate(keys_table, keys)
        dt.merge(
            source=keys_table, predicate=predicate, source_alias="s", target_alias="t",
            commit_properties=_stamp(), post_commithook_properties=KEEP_LOG,
        ).when_matched_delete().execute()
        return self.version()

    def vacuum(self, keep_versions: Sequence[int], *, retention_hours: int, dry_run: bool) -> list[str]:
        """Delete data files no longer referenced by the latest version, the versions in
        ``keep_versions``, or any version younger than ``retention_hours``, and files no commit
        ever referenced (left by writers killed before their commit) older than that."""
        removed = self.table().vacuum(
            retention_hours=retention_hours, dry_run=dry_run, enforce_retention_duration=False,
            keep_versions=sorted(set(keep_versions)),
            full=True,  # also files no commit references (part files of killed writers)
            post_commithook_properties=KEEP_LOG,
        )
        staged = self._staging_debris(retention_hours)
        if not dry_run:
            for path in staged:
                path.unlink(missing_ok=True)
            forget_snapshots()
        return list(removed) + [path.name for path in staged]

    def _staging_debris(self, retention_hours: int) -> list[Path]:
        """Upload staging files (``<part file>#<n>``) of writers killed mid-write, older than
        ``retention_hours``, among the data files and the change data feed's (``_change_data/``).
        delta-rs' local object store writes a file under that name and renames it into place;
        Delta's vacuum does not always see such files. Called under the write lock, so no writer
        of this table is staging one now."""
        cutoff = time.time() - retention_hours * 3600
        staged = [*self.path.glob("*#*"), *(self.path / "_change_data").glob("*#*")]
        return sorted(p for p in staged
                      if p.is_file() and p.name.rpartition("#")[2].isdigit()
                      and p.stat().st_mtime <= cutoff)

    def add_columns(self, fields: Sequence[pa.Field]) -> None:
        """Add nullable columns (schema evolution: add only)."""

        dt = self.table()
        dt.alter.add_columns([Field.from_arrow(f) for f in fields],
                             post_commithook_properties=KEEP_LOG)
