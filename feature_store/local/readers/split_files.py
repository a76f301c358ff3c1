"""The split files of a materialized training-dataset version, read and verified.

Where a version's split files are (:func:`split_path`), how one is read as Arrow with its bytes
checked against the recorded sha256 (:func:`read_split`), checked without being parsed
(:func:`verify_file`), or hashed by content a block at a time (:func:`verified_text_hash`). A
file whose identity (:func:`file_identity`) already passed in this process is not hashed again
(:data:`VERIFIED`), unless it changed within :data:`RACY_NS` of being verified.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feature_store.api import TrainingDataset
from feature_store.local.readers.text_split_reader import content_hash, parse_text
from feature_store.local.storage.storage_errors import changed_split, unreadable_split
from fstrain.kernel.errors import IntegrityError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa


def verified_text_hash(path: Path, td: TrainingDataset, owner: str, split: str) -> str:
    """The content hash of a csv or jsonl split file, parsed a block at a time, after its bytes
    are checked against the recorded file sha256 (when recorded)."""
    if not path.exists():
        raise IntegrityError(f"{owner}: file {path} is missing.")
    recorded = td.splits[split].get("file_sha256")
    if recorded is not None:
        verify_file(path, recorded, owner, split)
    return content_hash(path, str(td.data_format), arrow_schema(td.columns), owner)


def arrow_schema(columns: list[dict[str, str]]) -> pa.Schema:
    import pyarrow as pa

    def parse(t: str) -> pa.DataType:
        if t.startswith("timestamp"):
            unit = t[t.index("[") + 1 : t.index(",") if "," in t else t.index("]")]
            tz = "UTC" if "tz=" in t else None
            return pa.timestamp(unit, tz=tz)
        simple = {
            "int64": pa.int64(), "double": pa.float64(), "string": pa.string(), "bool": pa.bool_(),
            "date32[day]": pa.date32(), "float": pa.float32(), "int32": pa.int32(),
            "large_string": pa.large_string(),
        }
        return simple.get(t, pa.string())

    return pa.schema([pa.field(c["name"], parse(c["type"])) for c in columns])


def read_split(path: Path, data_format: str, columns: list[dict[str, str]], owner: str, *,
                split: str = "", file_sha256: str | None = None) -> pa.Table:
    """One split file as Arrow, its bytes read once (Parquet: memory-mapped) and checked against
    ``file_sha256`` when recorded; a missing, unreadable or changed file is an
    :class:`IntegrityError`.

    A file whose identity (see :func:`file_identity`) was already verified against the same
    recorded hash in this process is not hashed again."""
    import pyarrow as pa

    try:
        identity = file_identity(os.stat(path))
        # Parquet is parsed (and hashed) straight from a memory map: no copy of the bytes
        data: Any = (pa.memory_map(str(path)).read_buffer()
                     if data_format == "parquet" and identity[2] else path.read_bytes())
    except FileNotFoundError:
        raise IntegrityError(f"{owner}: file {path} is missing.") from None
    known = file_sha256 is None or VERIFIED.seen((identity, file_sha256))
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fstrain-file-hash") as pool:
        # sha256 releases the GIL: hash the bytes while Arrow parses them
        digest = None if known else pool.submit(sha256_hex, data)
        try:
            table = parse_split(data, data_format, arrow_schema(columns))
        except MemoryError:  # Arrow's too: out of memory says nothing about the file
            raise
        except (pa.ArrowException, OSError, ValueError, KeyError) as exc:
            raise unreadable_split(owner, path, data_format, exc) from exc
    try:
        changed = file_identity(os.stat(path)) != identity  # replaced or written while read
    except FileNotFoundError:
        changed = True
    if changed or (digest is not None and digest.result() != file_sha256):
        raise changed_split(owner, path, split)
    if digest is not None:
        VERIFIED.add((identity, file_sha256), settled=settled(identity))
    return table


def verify_file(path: Path, file_sha256: str, owner: str, split: str) -> None:
    """Check a split file's bytes against ``file_sha256``, unless this file identity already
    passed (read in chunks: the file may be larger than memory)."""
    try:
        with open(path, "rb") as fh:
            identity = file_identity(os.fstat(fh.fileno()))
            if VERIFIED.seen((identity, file_sha256)):
                return
            digest = hashlib.sha256()
            while block := fh.read(8 << 20):
                digest.update(block)
            changed = file_identity(os.fstat(fh.fileno())) != identity
    except FileNotFoundError:
        raise IntegrityError(f"{owner}: file {path} is missing.") from None
    if changed or digest.hexdigest() != file_sha256:
        raise changed_split(owner, path, split)
    VERIFIED.add((identity, file_sha256), settled=settled(identity))


def file_identity(st: os.stat_result) -> tuple[int, ...]:
    """What changes whenever a file's bytes can have changed: device, inode, size, mtime and
    ctime (nanoseconds). ctime is set by the kernel on every write and cannot be set back by
    user tools, so a rewrite that restores the mtime still changes the identity."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


#: A file changed within this many nanoseconds of being verified is not remembered: file
#: timestamps come from a coarse clock, so a second write in the same tick could keep them
#: (git's "racy clean" rule).
RACY_NS = 2_000_000_000


def settled(identity: tuple[int, ...]) -> bool:
    return time.time_ns() - max(identity[3], identity[4]) > RACY_NS


class VerifiedFiles:
    """Identities of split files whose bytes matched their recorded sha256 in this process
    (bounded, least recently used first out; thread-safe)."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self.entries: OrderedDict[Any, None] = OrderedDict()
        self.lock = threading.Lock()

    def seen(self, key: Any) -> bool:
        with self.lock:
            if key in self.entries:
                self.entries.move_to_end(key)
                return True
            return False

    def add(self, key: Any, *, settled: bool) -> None:
        if not settled:
            return
        with self.lock:
            self.entries[key] = None
            self.entries.move_to_end(key)
            while len(self.entries) > self.capacity:
                self.entries.popitem(last=False)


VERIFIED = VerifiedFiles()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    return sha256_hex(path.read_bytes())


def parse_split(data: bytes, data_format: str, schema: pa.Schema) -> pa.Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if data_format == "parquet":
        return pq.read_table(pa.BufferReader(data))
    return parse_text(data, data_format, schema)


def stored_format(td: TrainingDataset) -> str:
    """The file format of a materialized version (``parquet``, ``csv``, ``jsonl``)."""
    if td.data_format is None:
        raise IntegrityError(f"training dataset version {td.version} records no data_format.")
    return td.data_format


def stored_location(td: TrainingDataset) -> Path:
    """The folder of a materialized version's split files."""
    if not td.location:
        raise IntegrityError(f"training dataset version {td.version} records no location.")
    return Path(td.location)


def split_path(td: TrainingDataset, name: str) -> Path:
    """Where a materialized version's split ``name`` is stored."""
    return stored_location(td) / f"{name}.{stored_format(td)}"
