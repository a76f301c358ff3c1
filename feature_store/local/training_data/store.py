"""Training datasets of the local backend: immutable, versioned, reproducible bit for bit.

A version pins the commit of every feature group in the feature view's query, the split
specification and its seed, the time window, the extra filter, the query SQL, and the sha256 of
each split's content. Re-reading a version (materialized or in-memory) therefore returns the same
rows and values after any later insert, upsert or backfill: in-memory versions re-run the query
at the pinned commits and check the hash; materialized versions read their files.

Materialized files are written into a temporary folder and renamed into place in the same
catalog transaction that allocates the version, so a failed or killed create leaves no version.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from feature_store.api import TrainingDataset
from feature_store.core import split_streams
from feature_store.core import splits as core_splits
from feature_store.core.content_hash import ALGORITHM as HASH_ALGORITHM
from feature_store.core.content_hash import table_sha256
from feature_store.core.split_spec import empty_split_message
from feature_store.core.splits import SplitSpec
from feature_store.local.query import partitioned_join as pj
from feature_store.local.query import late_data
from feature_store.local.query.pit import compile_query
from feature_store.local.query.query_plan import plan
from feature_store.local.query.query_spec import FilterSpec, filter_from_dict
from feature_store.local.query.spine_root import retarget, spine_group_spec, with_root
from feature_store.local.readers.split_files import (
    file_sha256,
    read_split,
    split_path,
    stored_format,
    stored_location,
)
from feature_store.local.storage import engine
from feature_store.local.storage.spine_table import spine_path
from feature_store.local.storage.storage_errors import storage_boundary
from feature_store.local.training_data import label_distribution as ld
from feature_store.local.training_data import training_data_stream as ts
from feature_store.local.training_data.rows import (
    drained,
    fill_labels,
    filter_as_stored,
    filter_spec,
    key_frames,
    streamable_time,
)
from feature_store.local.training_data.split_writing import (
    file_statistics,
    rewrite_as_text,
    split_statistics,
    statistics_enabled,
    write_split,
)
from feature_store.local.training_data.transformation_stats import fit_on_file, fit_on_table
from feature_store.local.training_data.version_checks import VersionChecks
from feature_store.local.training_data.view_data import ViewData
from fstrain.kernel.errors import (
    InvalidArgumentError,
    NotFoundError,
    listing,
)
from fstrain.kernel.scratch import OWNER_FILE, clean_stale, make_scratch_dir
from fstrain.kernel.timeutil import iso, to_utc, utc_now

if TYPE_CHECKING:  # pragma: no cover
    from feature_store.local.catalog import Catalog
    from feature_store.local.training_data.training_data_stream import (
        Assign,
        SplitFile,
        StreamOptions,
    )

DATA_FORMATS = ("parquet", "csv", "jsonl")
ROOT_PREFIX = "__root_"
_STAGING = ".staging"


def clean_stale_staging(datasets_root: Path, *, older_than_s: float | None = None,
                        dry_run: bool = False) -> list[Path]:
    """Remove the staging folders that killed creates left in any view's folder under
    ``datasets_root`` (``<store>/training_datasets``): those whose process is gone on this host,
    and (with ``older_than_s``, as ``vacuum`` passes) any older than that."""
    try:
        views = [p for p in datasets_root.iterdir() if p.is_dir() and not p.is_symlink()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [stale for view in views
            for stale in clean_stale(view, (_STAGING,), older_than_s=older_than_s,
                                     dry_run=dry_run)]


class TrainingDataStore(VersionChecks):
    """Creates, lists, reads and deletes the training-dataset versions of one feature view.

    Built from the view as values (:class:`~feature_store.local.training_data.view_data.ViewData`: its
    identity, its query and the roles of its columns), the catalog and the store root.
    """

    def __init__(self, view: ViewData, catalog: Catalog, store_root: Path) -> None:
        self.view = view
        self.catalog = catalog
        self.store_root = Path(store_root)
        self.root = self.store_root / "training_datasets" / f"{view.name}_{view.version}"

    # -- metadata ----------------------------------------------------------------------------

    def versions(self) -> list[int]:
        return self.catalog.training_dataset_versions(self.view.id)

    def get(self, version: int) -> TrainingDataset:
        row = self.catalog.training_dataset(self.view.id, version)
        if row is None:
            raise NotFoundError(
                f"feature view '{self.view.name}' v{self.view.version} has no training dataset "
                f"version {version!r} (versions: {listing(self.versions())})."
            )
        td = TrainingDataset.from_dict(row[0])
        td.state = row[1]
        if td.location and not Path(td.location).is_absolute():
            td.location = str(self.store_root / td.location)  # stored relative to the store
        return td

    def all(self) -> list[TrainingDataset]:
        return [self.get(v) for v in self.versions()]

    # -- creation ----------------------------------------------------------------------------

    def _prepare(self, extra_filter: Any, start_time: Any, end_time: Any,
                 pins: dict[str, int] | None, *, probes: bool = False
                 ) -> tuple[Any, dict[str, int], dict[str, str]]:
        """The compiled (pinned, root-key-ordered) query, the pins, and where the root group's
        keys and event time are in its output; ``probes`` as in ``compile_query``."""
        extra = filter_spec(extra_filter)
        if self.view.replaced_root is not None:  # anchored on a spine: it stands for the root
            root = self.view.query.group
            extra = retarget(extra, self.view.replaced_root, (root.name, root.version))
        query = self.view.query.filtered(extra)
        if self.view.as_known:  # the view's joins are stored as-known; this only re-asserts it
            query = query.known_as_of_labels()
        pinned = query.resolved(pins)
        pins = pins or pinned.commits()
        output = {c.name for c in plan(pinned).columns}
        root_selected = set(query.features)
        extra_cols = []
        root_columns: dict[str, str] = {}
        for col in query.group.upsert_key:
            if col in root_selected:
                root_columns[col] = col
                continue
            name = f"{ROOT_PREFIX}{col}" if col in output else col
            extra_cols.append((col, name))
            root_columns[col] = name
        compiled = compile_query(
            pinned, start_time=start_time, end_time=end_time, order_by_root_key=True,
            extra_columns=extra_cols, probes=probes,
        )
        return compiled, pins, root_columns

    def _stored_filter(self, data: dict[str, Any] | None) -> FilterSpec | None:
        """A version's recorded extra filter over the view's query."""
        return None if data is None else filter_from_dict(data, self.view.query)

    def _key_columns(self, spec: SplitSpec, root_columns: dict[str, str],
                     column_names: list[str]) -> tuple[list[str], str | None, str | None]:
        """The columns the split strategy reads, the event-time and the label column."""
        root = self.view.root
        et = root_columns.get(root.event_time) if root.event_time else None
        label = self.view.labels[0] if self.view.labels else None
        # only what the strategy reads (a random split reads none: out of core, the other
        # columns would be held for every row)
        reads = {"random": [], "time": [et], "group": [spec.group_column],
                 "stratified": [spec.stratify_column or label]}.get(
            spec.strategy, [et, label, spec.group_column, spec.stratify_column])
        if spec.is_relative:
            reads = [et, *reads]
        needed = [c for c in dict.fromkeys(reads) if c is not None and c in column_names]
        return needed, et, label

    def _assigner(self, spec: SplitSpec, et: str | None, label: str | None,
                  resolved: list[SplitSpec]) -> Callable[[pa.Table, int], Any]:
        """``assign(keys, rows)``: each row's split as one byte (its index in ``spec.splits``,
        ``NO_SPLIT`` for a dropped row); a relative spec's resolved windows are appended to
        ``resolved``."""

        def assign(keys: pa.Table, rows: int) -> Any:
            # only the columns the strategy reads travel to pandas; rows stay in Arrow
            frame = (keys.to_pandas() if keys.num_columns
                     else pd.DataFrame(index=pd.RangeIndex(rows)))
            current = spec
            if current.is_relative:  # record the dates the relative windows resolve to
                current = core_splits.resolve_time_bounds(frame, current,
                                                          event_time_column=et or "")
            resolved.append(current)
            return core_splits.assign_split_codes(frame, current, event_time_column=et,
                                                  label_column=label)

        return assign

    def _streamed_assigner(self, spec: SplitSpec, et: str | None, label: str | None,
                           needed: list[str], schema: pa.Schema,
                           resolved: list[SplitSpec]) -> Assign:
        """The one split dispatch of out-of-core creation: ``assign(read, rows, alloc)`` (see
        :data:`~feature_store.local.training_data.training_data_stream.Assign`), the same codes, refusals and
        recorded spec as :meth:`_assigner` on the gathered columns, reading the key column's
        batches one at a time (a random split reads none). Gathered still: a time split on an
        event time of another type than timestamps, epoch milliseconds or dates (a feature
        group refuses them), and a spec whose key column is missing (refused as in memory, on
        no rows)."""
        key = {"time": et, "group": spec.group_column,
               "stratified": spec.stratify_column or label}.get(spec.strategy)
        if spec.strategy == "random":
            resolved.append(spec)
            return lambda read, rows, alloc: split_streams.random_split_codes(rows, spec,
                                                                              alloc=alloc)
        if key is None or needed != [key]:
            return self._gathered_assigner(spec, et, label, needed, schema, resolved)
        if spec.strategy == "time":
            if not streamable_time(schema.field(key).type):
                return self._gathered_assigner(spec, et, label, needed, schema, resolved)
            return self._streamed_time_assigner(spec, key, resolved)
        resolved.append(spec)

        def assign(read: Callable[[], Iterator[pa.RecordBatch]], rows: int, alloc: Any) -> Any:
            frames = lambda: key_frames(read)  # noqa: E731
            if spec.strategy == "group":
                return split_streams.group_split_codes_streamed(frames, spec, rows=rows,
                                                                alloc=alloc)
            return split_streams.stratified_split_codes_streamed(frames, spec, key, rows=rows,
                                                                 alloc=alloc)

        return assign

    def _gathered_assigner(self, spec: SplitSpec, et: str | None, label: str | None,
                           needed: list[str], schema: pa.Schema,
                           resolved: list[SplitSpec]) -> Assign:
        """:meth:`_assigner` behind the streamed signature: the key columns gathered whole."""

        gathered = self._assigner(spec, et, label, resolved)
        key_schema = pa.schema([schema.field(c) for c in needed])

        def assign(read: Callable[[], Iterator[pa.RecordBatch]], rows: int, alloc: Any) -> Any:
            keys = pa.Table.from_batches(list(read()) if needed else [], schema=key_schema)
            codes = gathered(keys, rows)
            del keys
            out = alloc(rows, np.int8)
            out[:] = codes
            return out

        return assign

    def _streamed_time_assigner(self, spec: SplitSpec, et: str, resolved: list[SplitSpec]) -> Assign:
        """:meth:`_assigner` of a time split from the event time's batches (``read()``), one
        batch at a time instead of the column whole: the same codes and recorded spec."""

        def assign(read: Callable[[], Iterator[pa.RecordBatch]], rows: int, alloc: Any) -> Any:
            current, codes = core_splits.time_split_codes_streamed(
                lambda: key_frames(read), spec, event_time_column=et,
                rows=rows, alloc=alloc)
            resolved.append(current if spec.is_relative else spec)
            return codes

        return assign

    def _facts(self, compiled: Any, pins: dict[str, int], root_columns: dict[str, str],
               schema: pa.Schema, start_time: Any, end_time: Any,
               resolved: list[SplitSpec]) -> dict[str, Any]:
        facts = {
            "feature_group_commits": pins,
            "query_sql": compiled.display_sql(),
            "root_columns": root_columns,
            "columns": [{"name": f.name, "type": str(f.type)} for f in schema],
            "event_start_time": iso(to_utc(start_time, what="start_time")),
            "event_end_time": iso(to_utc(end_time, what="end_time")),
        }
        if resolved:  # a relative spec, with the dates its windows resolved to
            facts["split_spec"] = resolved[0].to_dict()
        return facts

    def compute(
        self,
        spec: SplitSpec | None,
        *,
        start_time: Any,
        end_time: Any,
        extra_filter: Any,
        pins: dict[str, int] | None = None,
        exposure: bool = False,
    ) -> tuple[dict[str, pa.Table], dict[str, Any]]:
        """Run the (pinned) query and split it in memory. Returns split tables and
        reproducibility facts; ``exposure`` (a new version) adds its ``late_data``
        (:mod:`~feature_store.local.query.late_data`)."""

        compiled, pins, root_columns = self._prepare(extra_filter, start_time, end_time, pins,
                                                     probes=exposure)
        con = engine.connect()
        try:
            table = compiled.fetch(con, hidden=exposure)
            late = (late_data.exposure(compiled, con, probed=table, labels=self.view.labels)
                    if exposure else None)
        finally:
            con.close()
        if compiled.hidden:
            table = table.drop_columns(compiled.hidden)
        table = fill_labels(table, self.view.label_fill_values)
        resolved: list[SplitSpec] = []
        if spec is None:
            splits = {"train": table}
        else:
            needed, et, label = self._key_columns(spec, root_columns, table.column_names)
            codes = self._assigner(spec, et, label, resolved)(table.select(needed),
                                                             table.num_rows)
            splits = {name: table.filter(pa.array(codes == i))
                      for i, name in enumerate(spec.splits)}
        relative = [r for r in resolved if spec is not None and spec.is_relative]
        facts = self._facts(compiled, pins, root_columns, table.schema, start_time, end_time,
                            relative)
        if late is not None:
            facts["late_data"] = late
        return splits, facts

    def stream(
        self,
        spec: SplitSpec | None,
        staging: Path,
        options: StreamOptions,
        *,
        start_time: Any,
        end_time: Any,
        extra_filter: Any,
        pins: dict[str, int] | None = None,
        exposure: bool = False,
    ) -> tuple[dict[str, SplitFile], dict[str, Any], pa.Schema]:
        """Run the (pinned) query out of core and write each split's Parquet file to
        ``staging``; the split files equal :meth:`compute`'s tables row for row. ``exposure``
        as in :meth:`compute`."""
        compiled, pins, root_columns = self._prepare(extra_filter, start_time, end_time, pins,
                                                     probes=exposure)
        con = ts.connect(options.memory_limit, staging / ts.SPILL_DIR)
        counter = None
        resolved: list[SplitSpec] = []
        fill = self.view.label_fill_values
        try:
            with storage_boundary(f"query of feature view '{self.view.name}' v{self.view.version}",
                                  "reading"):
                buckets = options.buckets(compiled)
                if buckets > 1:
                    schema, source, counted = self._partitioned(
                        compiled, buckets, root_columns, staging, options, exposure)
                else:
                    reader = ts.record_batches(
                        con, compiled.bind(con, single_statement=True, probed=exposure),
                        compiled.params, options.batch_rows)
                    counted = {}
                    if exposure and compiled.probes:
                        counter = late_data.StreamCounter(compiled, con)
                        reader = pa.RecordBatchReader.from_batches(
                            pa.schema([f for f in reader.schema
                                       if f.name not in compiled.streamed_hidden]),
                            counter.batches(reader))
                    schema = fill_labels(reader.schema.empty_table(), fill).schema
                    batches = drained(reader, con, fill, schema)
                needed, et, label = (self._key_columns(spec, root_columns, schema.names)
                                     if spec is not None else ([], None, None))
                split_names = ("train",) if spec is None else spec.splits
                assign = (None if spec is None else
                          self._streamed_assigner(spec, et, label, needed, schema, resolved))
                if buckets > 1:
                    files = ts.write_splits_replayed(
                        source, schema, staging, split_names=split_names, key_columns=needed,
                        assign=assign, group_rows=options.batch_rows)
                else:
                    files = ts.write_splits(batches, schema, staging, split_names=split_names,
                                            key_columns=needed, assign=assign,
                                            batch_rows=options.batch_rows)
                if counter is not None:
                    counted = counter.counted()
                late = (self._bounded_exposure(compiled, options, staging, counted,
                                               self.view.labels) if exposure else None)
        finally:
            con.close()
            shutil.rmtree(staging / ts.SPILL_DIR, ignore_errors=True)
            shutil.rmtree(staging / ts.PARTS_DIR, ignore_errors=True)
            shutil.rmtree(staging / ts.SCRATCH_DIR, ignore_errors=True)
        relative = [r for r in resolved if spec is not None and spec.is_relative]
        facts = self._facts(compiled, pins, root_columns, schema, start_time, end_time, relative)
        if late is not None:
            facts["late_data"] = late
        return files, facts, schema

    @staticmethod
    def _bounded_exposure(compiled: Any, options: StreamOptions, staging: Path,
                          counted: dict[str, Any], labels: Sequence[str]) -> dict[str, Any]:
        """The late-data figures of an out-of-core create, ``counted`` (by the partitioned
        join) or from exposure joins on a database of their own under the create's memory
        limit and spill folder: they read as many rows as the query (the query's connection is
        closed once its rows are drained)."""
        con = ts.connect(options.memory_limit, staging / ts.SPILL_DIR)
        try:
            return late_data.exposure(compiled, con, counted=counted, labels=labels)
        finally:
            con.close()

    def _partitioned(self, compiled: Any, buckets: int, root_columns: dict[str, str],
                     staging: Path, options: StreamOptions, exposure: bool
                     ) -> tuple[pa.Schema, Any, dict[str, Any]]:
        """Run the query in ``buckets`` hash partitions (``partitioned_join``); returns the
        result's schema (labels filled), ``source(columns)``, which merges the partitions'
        results into the query's order on every call, and the late-data figures the run
        counted (``exposure``: join alias -> figures)."""

        own = ts.connect(options.memory_limit, staging / ts.SPILL_DIR)
        try:  # a connection of its own: closing it hands DuckDB's buffers back before the writes
            known = late_data.known_columns(compiled, own) if exposure else {}
            run = pj.PartitionedQuery(own, compiled, buckets, staging / ts.PARTS_DIR,
                                      options.batch_rows, known=known)
            raw = run.schema()
            results = run.run()
            counted = run.late_counts()
        finally:
            own.close()
        schema = fill_labels(raw.empty_table(), self.view.label_fill_values).schema
        order = [root_columns[k] for k in self.view.root.upsert_key]

        def prepare(table: pa.Table) -> pa.RecordBatch:
            names = table.column_names
            table = table.cast(pa.schema([raw.field(n) for n in names]))
            fill = {k: v for k, v in self.view.label_fill_values.items() if k in names}
            table = fill_labels(table, fill).combine_chunks()
            target = pa.schema([schema.field(n) for n in names])
            return pa.RecordBatch.from_arrays([c.chunk(0) if c.num_chunks else pa.array([], c.type)
                                               for c in table.columns], schema=target)

        return schema, pj.replay_source(results, order, options.batch_rows, prepare), counted

    def create(self, spec: SplitSpec | None, **options: Any) -> tuple[int, Any]:
        """Create a new immutable version (see :meth:`_create`); a full disk, an unwritable store
        or a library error while doing so is a typed error naming the feature view, and nothing
        of the version is left behind."""
        self._check_spec(spec)
        clean_stale_staging(self.root.parent)  # what killed creates of any view left
        try:
            with storage_boundary(f"feature view '{self.view.name}' v{self.view.version}",
                                  "creating a training dataset version"):
                return self._create(spec, **options)
        except InvalidArgumentError as exc:  # a refused split: named after the view
            self._remove_empty_folders()  # a refused create leaves not even a folder
            owner = f"feature view '{self.view.name}' v{self.view.version}"
            if type(exc) is not InvalidArgumentError or str(exc).startswith(owner):
                raise
            raise InvalidArgumentError(f"{owner}: {exc} No training dataset was "
                                       "created.") from exc
        except BaseException:
            self._remove_empty_folders()
            raise

    def _check_spec(self, spec: SplitSpec | None) -> None:
        """Refuse, before any work, a time split of a view without an event time."""
        if spec is not None and spec.strategy == "time" and not self.view.root.event_time:
            raise InvalidArgumentError(
                f"feature view '{self.view.name}' v{self.view.version} has no event time (its "
                f"root feature group '{self.view.root.name}' has none), so it cannot take a time "
                f"split ({spec.setting_of('test')}). Use a random, stratified or group split, "
                "or give the root feature group an event_time.")

    def _remove_empty_folders(self) -> None:
        """Remove this view's folder and ``training_datasets/`` when a failed create left them
        empty (another create's files keep them)."""
        for folder in (self.root, self.root.parent):
            try:
                folder.rmdir()
            except OSError:  # not empty, or not there
                return

    def _create(
        self,
        spec: SplitSpec | None,
        *,
        seed: int,
        start_time: Any,
        end_time: Any,
        extra_filter: Any,
        materialize: bool,
        data_format: str,
        description: str,
        statistics_config: Any,
        convert: Callable[[TrainingDataset, dict[str, pa.Table]], Any] | None = None,
        stream: StreamOptions | None = None,
        spine: dict[str, Any] | None = None,
    ) -> tuple[int, Any]:
        """Create a new immutable version (``spine``: the record of the spine its query is
        anchored on, kept with the version).

        A materialized version is created out of core when ``stream`` is given (the query's
        result is consumed in batches; see :mod:`training_data_stream`, and
        :mod:`text_split_writer` for csv and jsonl); otherwise the
        splits are built in memory and ``convert`` (called with the version's metadata and
        splits while the split hashes are computed) may turn them into the caller's result.
        Returns the version and what ``convert`` returned.
        """
        if data_format not in DATA_FORMATS:
            raise InvalidArgumentError(
                f"data_format must be one of {DATA_FORMATS}. Got {data_format!r} instead."
            )
        metadata = self._metadata(spec, seed=seed, materialize=materialize,
                                  data_format=data_format, description=description,
                                  extra_filter=extra_filter)
        if spine is not None:
            metadata.setdefault("extra", {})["spine"] = spine
        stats = statistics_enabled(statistics_config)
        window = {"start_time": start_time, "end_time": end_time, "extra_filter": extra_filter}
        converted = None
        staging: Path | None
        if materialize and stream is not None:
            staging = self._create_streamed(spec, metadata, stream, stats, window)
        else:
            staging, converted = self._create_in_memory(spec, metadata, materialize, stats,
                                                        window, convert)
        return self._commit(metadata, staging), converted

    def _metadata(self, spec: SplitSpec | None, *, seed: int, materialize: bool,
                  data_format: str, description: str, extra_filter: Any) -> dict[str, Any]:

        return {
            "version": 0,  # allocated in the catalog transaction (_commit)
            "feature_view_name": self.view.name,
            "feature_view_version": self.view.version,
            "type": "MATERIALIZED" if materialize else "IN_MEMORY",
            "data_format": data_format if materialize else None,
            "state": "ok",
            "description": description or "",
            "seed": seed,
            "split_spec": None if spec is None else spec.to_dict(),
            "splits": {},
            "extra_filter": filter_as_stored(filter_spec(extra_filter)),
            "transformation_statistics": {},
            "created_at": utc_now().isoformat(),
            "content_hash": HASH_ALGORITHM,
            "extra": {"as_known": self.view.as_known},
        }

    def _check_not_empty(self, spec: SplitSpec | None, rows: dict[str, int],
                         facts: dict[str, Any]) -> None:
        for name, count in rows.items():
            if count == 0:
                window = (f" in the window [{facts['event_start_time']}, "
                          f"{facts['event_end_time']})"
                          if facts["event_start_time"] or facts["event_end_time"] else "")
                why = (empty_split_message(spec, name, sum(rows.values())) if spec is not None
                       else f"Split '{name}' is empty: the query returned no rows{window}.")
                raise InvalidArgumentError(
                    f"feature view '{self.view.name}' v{self.view.version}: {why} No training "
                    "dataset was created.")

    def _create_in_memory(self, spec: SplitSpec | None, metadata: dict[str, Any],
                          materialize: bool, stats: bool, window: dict[str, Any],
                          convert: Callable[[TrainingDataset, dict[str, pa.Table]], Any] | None,
                          ) -> tuple[Path | None, Any]:
        """Build the splits in memory, fill ``metadata``, stage the files of a materialized
        version; returns the staging folder and what ``convert`` returned."""
        splits, facts = self.compute(spec, **window, exposure=True)
        self._check_not_empty(spec, {n: p.num_rows for n, p in splits.items()}, facts)
        metadata["transformation_statistics"] = fit_on_table(self.view.transformations, splits["train"])
        metadata["extra"]["late_data"] = facts.pop("late_data", None)
        metadata.update(facts)
        metadata["splits"] = {name: {} for name in splits}
        data_format = metadata["data_format"]
        # hashing (numpy, releases the GIL) runs beside the caller's conversion to pandas, the
        # label distributions, statistics and file writes
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fstrain-hash") as pool:
            hashes = pool.submit(lambda: {n: table_sha256(p) for n, p in splits.items()})
            converted = None if convert is None else convert(TrainingDataset.from_dict(metadata), splits)
            for name, part in splits.items():
                metadata["splits"][name] = {
                    "rows": int(part.num_rows),
                    "sha256": None,
                    "label_distribution": ld.table_label_distribution(part, list(self.view.labels)),
                    "statistics": split_statistics(part) if stats else None,
                }
            staging = self._stage(splits, data_format) if materialize else None
            try:
                if staging is not None:  # reads check these bytes instead of re-hashing values
                    for name in splits:
                        metadata["splits"][name]["file_sha256"] = file_sha256(
                            staging / f"{name}.{data_format}")
                for name, digest in hashes.result().items():
                    metadata["splits"][name]["sha256"] = digest
            except BaseException:
                if staging is not None:
                    shutil.rmtree(staging, ignore_errors=True)
                raise
        return staging, converted

    def _create_streamed(self, spec: SplitSpec | None, metadata: dict[str, Any],
                         options: StreamOptions, stats: bool, window: dict[str, Any]) -> Path:
        """Stream the splits into a staging folder and fill ``metadata`` from the files."""
        staging = self._new_staging()
        try:
            files, facts, schema = self.stream(spec, staging, options, **window, exposure=True)
            self._check_not_empty(spec, {n: f.rows for n, f in files.items()}, facts)
            metadata["transformation_statistics"] = fit_on_file(self.view.transformations,
                                                                   files["train"].path)
            metadata["extra"]["late_data"] = facts.pop("late_data", None)
            metadata.update(facts)
            for name, split_file in files.items():
                metadata["splits"][name] = {
                    "rows": split_file.rows,
                    "sha256": split_file.sha256,
                    "label_distribution": ld.file_label_distribution(split_file.path,
                                                                     list(self.view.labels)),
                    "statistics": (file_statistics(split_file, schema, options, staging)
                                   if stats else None),
                    "file_sha256": ((split_file.file_sha256 or ts.file_sha256(split_file.path))
                                    if metadata["data_format"] == "parquet" else None),
                }
            if metadata["data_format"] != "parquet":  # csv, jsonl: rewritten batch by batch
                for name, digest in rewrite_as_text(files, metadata["data_format"]).items():
                    metadata["splits"][name]["file_sha256"] = digest
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return staging

    def _commit(self, metadata: dict[str, Any], staging: Path | None) -> int:
        """Allocate the version and record it; a staged folder is renamed into place in the
        same catalog transaction (a failure removes it)."""
        def place(version: int) -> dict[str, Any]:  # runs under the catalog's write lock
            metadata["version"] = version
            if staging is not None:
                final = self.root / str(version)
                if final.exists():  # orphan of a create killed after its rename
                    shutil.rmtree(final)
                (staging / OWNER_FILE).unlink(missing_ok=True)  # the version holds data only
                staging.rename(final)
                metadata["location"] = str(final.relative_to(self.store_root))
            return metadata

        try:
            version = self.catalog.insert_training_dataset(self.view.id, place)
        except BaseException:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
                if "location" in metadata:
                    shutil.rmtree(self.store_root / metadata["location"], ignore_errors=True)
            raise
        return version

    def _new_staging(self) -> Path:
        """A fresh staging folder that records its writer (host, pid, start time)."""
        return make_scratch_dir(self.root, _STAGING)

    def _stage(self, splits: dict[str, pa.Table], data_format: str) -> Path:
        """Write the splits into a fresh staging folder (renamed into place on commit)."""
        staging = self._new_staging()
        try:
            for name, part in splits.items():
                write_split(part, staging / f"{name}.{data_format}", data_format)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return staging

    # -- reading -----------------------------------------------------------------------------

    def for_version(self, td: TrainingDataset) -> TrainingDataStore:
        """The store that re-runs ``td``'s query: this one, or for a version built from a spine
        this one anchored on the spine rows the version recorded (content-addressed)."""
        record = (td.extra or {}).get("spine")
        if not record:
            return self
        group = spine_group_spec(record, spine_path(self.store_root, record["sha256"]))
        root = self.view.query.group
        view = dataclasses.replace(self.view, query=with_root(self.view.query, group),
                                   replaced_root=(root.name, root.version))
        return TrainingDataStore(view, self.catalog, self.store_root)

    def read_splits(self, version: int, *, verify: bool = False) -> tuple[TrainingDataset, dict[str, pa.Table]]:
        """The untransformed split tables of a version, identical to those at creation."""
        td = self.get(version)
        if td.type == "MATERIALIZED":
            if td.state == "purged":
                raise NotFoundError(
                    f"training dataset version {version} of feature view '{self.view.name}' "
                    f"v{self.view.version} was purged. Call fv.recreate_training_dataset({version})."
                )
            splits = {
                name: read_split(split_path(td, name), stored_format(td),
                                  td.columns, self._owner(version), split=name,
                                  file_sha256=meta.get("file_sha256"))
                for name, meta in td.splits.items()
            }
            # a file changed on disk must never reach training silently: its bytes were checked
            # against the recorded file hash; versions without one re-hash their values
            verify = verify or any(not m.get("file_sha256") for m in td.splits.values())
        else:
            spec = None if td.split_spec is None else SplitSpec.from_dict(td.split_spec)
            extra = self._stored_filter(td.extra_filter)
            splits, _ = self.for_version(td).compute(
                spec, start_time=td.event_start_time, end_time=td.event_end_time,
                extra_filter=extra, pins=td.feature_group_commits,
            )
            verify = True
        if verify:
            self.verify(td, splits)
        return td, splits

    # -- maintenance -------------------------------------------------------------------------

    def purge(self, version: int) -> None:
        td = self.get(version)
        if td.location:
            shutil.rmtree(td.location, ignore_errors=True)
        self.catalog.set_training_dataset_state(self.view.id, version, "purged")

    def recreate(self, version: int, stream: StreamOptions | None = None) -> None:
        """Re-materialize a purged version from its pinned commits; the hashes must match.

        A materialized version is re-created out of core (``stream``, default options)."""
        td = self.get(version)
        store = self.for_version(td)
        spec = None if td.split_spec is None else SplitSpec.from_dict(td.split_spec)
        window: dict[str, Any] = {
            "start_time": td.event_start_time, "end_time": td.event_end_time,
            "extra_filter": self._stored_filter(td.extra_filter),
            "pins": td.feature_group_commits}
        if td.type == "MATERIALIZED":
            staging = self._new_staging()
            try:
                files, _, _ = store.stream(spec, staging, stream or ts.StreamOptions(), **window)
                self.check_digests(td, {n: f.sha256 for n, f in files.items()})
                file_hashes = (rewrite_as_text(files, str(td.data_format))
                               if td.data_format != "parquet" else
                               {n: f.file_sha256 or ts.file_sha256(f.path)
                                for n, f in files.items()})
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        else:
            splits, _ = store.compute(spec, **window)
            self.verify(td, splits)
            if td.type != "MATERIALIZED":
                return
            staging = self._stage(splits, stored_format(td))
            file_hashes = {n: file_sha256(staging / f"{n}.{td.data_format}") for n in splits}
        self._replace_files(td, staging, file_hashes)

    def _replace_files(self, td: TrainingDataset, staging: Path,
                       file_hashes: dict[str, str]) -> None:
        """Move re-created (verified) files into place and record their file hashes."""
        final = stored_location(td)
        if final.exists():
            shutil.rmtree(final)
        (staging / OWNER_FILE).unlink(missing_ok=True)
        staging.rename(final)

        def record_file_hashes(metadata: dict[str, Any]) -> None:
            for name, digest in file_hashes.items():  # the values were verified above
                metadata["splits"][name]["file_sha256"] = digest

        self.catalog.update_training_dataset(self.view.id, td.version, record_file_hashes, state="ok")

    def delete(self, version: int) -> None:
        td = self.get(version)
        self.catalog.delete_training_dataset(self.view.id, version)
        if td.location:
            shutil.rmtree(td.location, ignore_errors=True)


