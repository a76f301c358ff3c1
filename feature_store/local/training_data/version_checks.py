"""The checks of a training-dataset version against what it recorded: a materialized
version's split files against their file sha256 (for streamed reads, or as text pieces), and
every split's content against its recorded hash. Kept apart from
:mod:`feature_store.local.training_data.store` so each module has one job; the store inherits
them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feature_store.api import TrainingDataset
from feature_store.core.content_hash import ALGORITHM as HASH_ALGORITHM
from feature_store.core.content_hash import table_sha256
from feature_store.local.readers.split_files import (
    VERIFIED,
    arrow_schema,
    settled,
    split_path,
    stored_format,
    verified_text_hash,
    verify_file,
)
from feature_store.local.readers.text_pieces import index_file
from feature_store.local.storage.storage_errors import changed_split
from feature_store.local.training_data import training_data_stream as ts
from fstrain.kernel.errors import IntegrityError, InvalidArgumentError, NotFoundError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from feature_store.local.training_data.view_data import ViewData


class VersionChecks:
    """Checks of a view's training-dataset versions; the store provides ``view``, ``get()``
    and ``read_splits()``."""

    view: ViewData

    def get(self, version: int) -> TrainingDataset:  # pragma: no cover - provided by the store
        raise NotImplementedError

    def read_splits(self, version: int, *,  # pragma: no cover - provided by the store
                    verify: bool = False) -> tuple[TrainingDataset, dict[str, pa.Table]]:
        raise NotImplementedError

    def verify_version(self, version: int) -> None:
        """Check a version against its recorded hashes. A materialized version is checked file
        by file and batch by batch (bounded memory); an in-memory one is re-computed."""
        td = self.get(version)
        if td.type != "MATERIALIZED" or td.state == "purged":
            self.read_splits(version, verify=True)
            return
        digests = {}
        for name, meta in td.splits.items():
            path = split_path(td, name)
            if td.data_format == "parquet":
                digests[name] = ts.verified_content_hash(path, self._owner(version), name,
                                                         meta.get("file_sha256"))
            else:
                digests[name] = verified_text_hash(path, td, self._owner(version), name)
        self.check_digests(td, digests)

    def verified_files(self, version: int, *, text: bool = False) -> dict[str, Path]:
        """The split files of a materialized Parquet version (or, with ``text``, a csv or jsonl
        one), each checked against its recorded file sha256 (once per file identity in this
        process), for streamed reads."""
        td = self._streamable(version, text=text)
        files = {}
        for name, path, recorded in self._recorded_files(td):
            if recorded is not None:
                verify_file(path, recorded, self._owner(version), name)
            files[name] = path
        return files

    def text_pieces(self, version: int) -> dict[str, Any]:
        """The split files of a materialized csv or jsonl version, each indexed into row-aligned
        pieces (:mod:`text_pieces`) by one pass that also checks its bytes against the recorded
        file sha256, for streamed ``"ray"`` and ``"torch"`` reads."""
        td = self._streamable(version, text=True)
        if td.data_format == "parquet":
            raise InvalidArgumentError(f"{self._owner(version)} is stored as Parquet, not text.")
        schema, owner = arrow_schema(td.columns), self._owner(version)
        indexes = {}
        for name, path, recorded in self._recorded_files(td):
            index, digest = index_file(path, stored_format(td), schema, owner=owner, split=name)
            if recorded is not None and digest != recorded:
                raise changed_split(owner, path, name)
            if recorded is not None:  # later whole reads of the file need not hash it again
                VERIFIED.add((index.identity, recorded), settled=settled(index.identity))
            indexes[name] = index
        return indexes

    def _recorded_files(self, td: TrainingDataset) -> Iterator[tuple[str, Path, str | None]]:
        """``(split, path, recorded file sha256)`` of a materialized version's files; a file
        of a version from before file hashes (none recorded) has its values checked here."""
        for name, meta in td.splits.items():
            path = split_path(td, name)
            recorded = meta.get("file_sha256")
            if recorded is None:
                self._check_values(td, name, path)
            yield name, path, recorded

    def _streamable(self, version: int, *, text: bool) -> TrainingDataset:
        """The version, if it is materialized (as Parquet, unless ``text``) and not purged."""
        td = self.get(version)
        if td.type != "MATERIALIZED" or (td.data_format != "parquet" and not text):
            raise InvalidArgumentError(
                f"{self._owner(version)} is {td.type.lower()}"
                f"{'' if td.type != 'MATERIALIZED' else ' as ' + str(td.data_format)}; streamed "
                f"reads need a materialized version{'' if text else ' stored as Parquet'} "
                "(create_train_test_split(...) writes one). Read it with a dataframe_type such "
                "as 'pandas'."
            )
        if td.state == "purged":
            raise NotFoundError(f"{self._owner(version)} was purged. Call "
                                f"fv.recreate_training_dataset({version}).")
        return td

    def _check_values(self, td: TrainingDataset, name: str, path: Path) -> None:
        """Check a split file of a version recorded without file hashes by its values."""
        owner = self._owner(td.version)
        self.check_digests(td, {name: ts.verified_content_hash(path, owner, name, None)
                                if td.data_format == "parquet"
                                else verified_text_hash(path, td, owner, name)})

    def arrow_schema(self, td: TrainingDataset) -> pa.Schema:
        """The Arrow schema of a version's recorded columns (what its text files parse into)."""
        return arrow_schema(td.columns)

    def _owner(self, version: int) -> str:
        return (f"training dataset version {version} of feature view '{self.view.name}' "
                f"v{self.view.version}")

    def verify(self, td: TrainingDataset, splits: dict[str, pa.Table]) -> None:
        """Raise :class:`IntegrityError` if any split differs from its recorded hash."""
        self.check_digests(td, {name: table_sha256(part) for name, part in splits.items()})

    def check_digests(self, td: TrainingDataset, digests: dict[str, str]) -> None:
        """Raise :class:`IntegrityError` if a split's content hash is not the recorded one."""
        if td.content_hash != HASH_ALGORITHM:
            raise IntegrityError(
                f"training dataset version {td.version} of feature view '{self.view.name}' "
                f"v{self.view.version} recorded its split hashes with {td.content_hash or 'the v1 algorithm'!r}, "
                f"which this fstrain (content hash {HASH_ALGORITHM!r}) cannot check. Create a new "
                "version from the same feature-group commits to get verifiable hashes."
            )
        for name, digest in digests.items():
            if digest != td.splits[name]["sha256"]:
                raise IntegrityError(
                    f"training dataset version {td.version} of feature view '{self.view.name}' "
                    f"v{self.view.version}: split '{name}' no longer matches its recorded sha256 "
                    f"({digest[:12]}… != {td.splits[name]['sha256'][:12]}…). Its files or the "
                    "pinned feature-group commits were changed or removed."
                )
