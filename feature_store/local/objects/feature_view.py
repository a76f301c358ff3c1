"""Feature views of the local backend (mirrors ``hsfs.feature_view.FeatureView``).

A feature view is a saved query plus the roles of its columns: ``labels`` (returned as a
separate ``y``), ``training_helper_columns`` (returned only when asked, never features — e.g.
``sex`` for bias tests), ``inference_helper_columns`` (never in training data) and
model-dependent transformations whose statistics are fitted on the train split only.
``prohibited_tags`` refuses features that come from a group or feature carrying such a tag.

fstrain extension: ``label_fill_values`` fills missing labels after the join (the seed's
"LEFT JOIN the label group, then fillna(0)" for label groups that only hold positive events),
before splitting, so stratification and hashes see the filled values.
"""

from __future__ import annotations

from functools import cached_property
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from feature_store.core.seeds import draw_seed
from feature_store.feature import Feature
from feature_store.local.objects.log_columns import merge_log_columns
from feature_store.local.objects.query import Query
from feature_store.local.objects.sdk_conventions import convert_result, refuse_unsupported
from feature_store.local.objects.tags import TaggedEntity
from feature_store.local.objects.view_checks import check_prohibited
from feature_store.local.objects.view_logging import ViewLogging
from feature_store.local.objects.view_serving import ViewServing
from feature_store.local.objects.view_spine import anchored, resolve_spine
from feature_store.local.objects.view_reads import (
    read_window,
    refuse_destination,
    relative_windows,
    split_spec,
    stream_splits,
    verify_requested,
)
from feature_store.local.readers.split_stream import STREAMING_TYPES, SplitShaper
from feature_store.local.storage.options import check_options
from feature_store.local.training_data.training_data_stream import StreamOptions
from feature_store.local.training_data.view_data import ViewData
from fstrain.kernel.errors import ConfigError, InvalidArgumentError, NotFoundError
from fstrain.kernel.window import scheduler_bounds

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import pyarrow as pa

    from feature_store.api import TrainingDataset
    from feature_store.core.transformations import TransformationFunction
    from feature_store.local.objects.hosts import StoreHost
    from feature_store.local.query.query_spec import QuerySpec
    from feature_store.local.training_data.store import TrainingDataStore

_SPLIT_NAMES_2 = ("train", "test")
_SPLIT_NAMES_3 = ("train", "validation", "test")


class FeatureView(ViewServing, ViewLogging, TaggedEntity):
    """A versioned, validated view over a query, with training-dataset versions."""

    _TAG_KIND = "fv"

    def __init__(
        self,
        store: StoreHost,
        name: str,
        version: int,
        query: Query,
        *,
        description: str = "",
        labels: list[str] | None = None,
        training_helper_columns: list[str] | None = None,
        inference_helper_columns: list[str] | None = None,
        transformation_functions: list[TransformationFunction] | None = None,
        prohibited_tags: list[str] | None = None,
        label_fill_values: dict[str, Any] | None = None,
        logging_enabled: bool = False,
        logging_paused: bool = False,
        extra_log_columns: list[dict[str, str]] | None = None,
        fv_id: int | None = None,
        as_known: bool = False,
    ) -> None:
        self._store = store
        self.name = name
        self.version = version
        #: every point-in-time join of the view's query is as-known (an fstrain extension)
        self.as_known = bool(as_known)
        if self.as_known:
            query = query.known_as_of_labels()
        self._query_dict = query.to_dict()
        self._query = query
        self.description = description
        self.labels = list(labels or [])
        self.training_helper_columns = list(training_helper_columns or [])
        self.inference_helper_columns = list(inference_helper_columns or [])
        from feature_store.core.transformations import from_sdk, is_sdk_transformation

        self.transformation_functions = [from_sdk(t) if is_sdk_transformation(t) else t
                                         for t in transformation_functions or []]
        self.prohibited_tags = list(prohibited_tags or [])
        self.label_fill_values = dict(label_fill_values or {})
        self.id = fv_id
        self._logging = {"enabled": bool(logging_enabled), "paused": bool(logging_paused)}
        self._extra_log_columns = merge_log_columns(self.owner, [], extra_log_columns)
        self._batch_scoring_version: int | None = None
        self._last_accessed_td: int | None = None

    def __repr__(self) -> str:
        return f"FeatureView({self.name!r}, {self.version}, labels={self.labels})"

    @property
    def owner(self) -> str:
        return f"feature view '{self.name}' v{self.version}"

    @property
    def feature_store(self) -> StoreHost:
        """The feature store holding this view."""
        return self._store

    # -- structure ---------------------------------------------------------------------------

    @property
    def query(self) -> Query:
        """A fresh copy of the view's query (mutating it does not change the view)."""
        return Query.from_dict(self._store, self._query_dict)

    @cached_property
    def _output_features(self) -> list[Feature]:
        return self._query.features

    @property
    def features(self) -> list[Feature]:
        """Every column of the view's query, with its type."""
        return list(self._output_features)

    @property
    def schema(self) -> list[dict[str, str]]:
        """``[{"name", "type"}]`` of every query column (used by the model registry)."""
        return [{"name": f.name, "type": f.type} for f in self._output_features]

    @property
    def root_key_columns(self) -> list[str]:
        """Root primary key and event time: returned only with ``primary_key=``/``event_time=``."""
        root = self._query.left_feature_group
        selected = set(self._query_dict["left_features"])
        keys = list(root.primary_key) + ([root.event_time] if root.event_time else [])
        return [k for k in keys if k in selected]

    @property
    def feature_names(self) -> list[str]:
        """Model features: query columns that are not labels, helper columns or root keys."""
        excluded = (set(self.labels) | set(self.training_helper_columns)
                    | set(self.inference_helper_columns) | set(self.root_key_columns))
        return [f.name for f in self._output_features if f.name not in excluded]

    @property
    def root_feature_group(self) -> Any:
        return self._query.left_feature_group

    # -- transformations ---------------------------------------------------------------------

    def _transform(self, frame: pd.DataFrame, stats: dict[str, Any]) -> pd.DataFrame:
        if not self.transformation_functions:
            return frame
        from feature_store.core.transformations import apply_transformations

        present = [tf for tf in self.transformation_functions
                   if all(c in frame.columns for c in tf.inputs)]
        return apply_transformations(present, frame, stats) if present else frame

    def _label_names(self, stats: dict[str, Any]) -> list[str]:
        """Label columns after transformation (transformed labels are renamed, as Hopsworks)."""
        names: list[str] = []
        for label in self.labels:
            tf = next((t for t in self.transformation_functions if label in t.dropped), None)
            names += [label] if tf is None else tf.output_names(stats[tf.key])
        return names

    # -- shaping results ---------------------------------------------------------------------

    def _key_columns(self, root_columns: dict[str, str], primary_key: bool, event_time: bool) -> list[str]:
        root = self.root_feature_group
        cols = []
        if primary_key:
            cols += [root_columns[c] for c in root.primary_key]
        if event_time and root.event_time:
            cols.append(root_columns[root.event_time])
        return cols

    def _shape(
        self,
        table: pa.Table,
        td: TrainingDataset,
        *,
        primary_key: bool,
        event_time: bool,
        training_helper_columns: bool,
    ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """Select and transform the columns a caller asked for; split off the labels."""
        return self._shaper(td, primary_key=primary_key, event_time=event_time,
                            training_helper_columns=training_helper_columns).shape(table)

    def _shaper(self, td: TrainingDataset, *, primary_key: bool, event_time: bool,
                training_helper_columns: bool) -> SplitShaper:
        """What :meth:`_shape` does, as a picklable value (streamed reads shape with it)."""
        keep = self._key_columns(td.root_columns, primary_key, event_time)
        keep += [c for c in self.feature_names if c not in keep]
        if training_helper_columns:
            keep += [c for c in self.training_helper_columns if c not in keep]
        if not self.transformation_functions:
            return SplitShaper(tuple(keep), tuple(self.labels))
        stats = td.transformation_statistics
        return SplitShaper(tuple(keep), tuple(self.labels), tuple(self.transformation_functions),
                           stats, tuple(self._label_names(stats)) if self.labels else ())

    # -- training data -----------------------------------------------------------------------

    @property
    def _td(self) -> TrainingDataStore:
        """The store of this view's training datasets, built from the view as values (its
        query read afresh, as every training read does)."""
        return self._td_over(self.query.frozen())

    def _td_over(self, query: QuerySpec) -> TrainingDataStore:
        """The store of this view's training datasets, reading ``query`` (the view's query, or
        it anchored on a spine in its root's place)."""
        from feature_store.local.training_data.store import TrainingDataStore  # loads pandas

        root = self.root_feature_group
        replaced = (None if (query.group.name, query.group.version) == (root.name, root.version)
                    else (root.name, root.version))
        data = ViewData(self.name, self.version, self.id, query,
                        tuple(self.labels), dict(self.label_fill_values),
                        tuple(self.transformation_functions), self.as_known, replaced)
        return TrainingDataStore(data, self._store.catalog, self._store.root)

    def _spine_query(self, spine: Any, optional: frozenset[str] = frozenset(),
                     ) -> tuple[QuerySpec, dict[str, Any] | None]:
        """The view's frozen query, anchored on ``spine`` when one is given (see
        :mod:`~feature_store.local.objects.view_spine`; ``optional``: root columns the spine
        may lack), and the spine's record."""
        group = resolve_spine(self.owner, self._store, self.root_feature_group, spine)
        if group is None:
            return self.query.frozen(), None
        return anchored(self.query.frozen(), group, optional)

    def _make_spec(self, three_way: bool | None, seed: int, split: str | None, **kwargs: Any) -> Any:
        return split_spec(self.owner, self.labels, {f.name for f in self._output_features},
                          three_way, seed, split, **kwargs)

    def _create(
        self,
        three_way: bool | None,
        *,
        materialize: bool,
        seed: int | None,
        split: str | None,
        start_time: Any = None,
        end_time: Any = None,
        extra_filter: Any = None,
        data_format: str = "parquet",
        description: str = "",
        statistics_config: Any = None,
        convert: Any = None,
        write_options: dict[str, Any] | None = None,
        spine: Any = None,
        **split_kwargs: Any,
    ) -> tuple[int, Any]:
        self.require_saved()
        self._check_read_guarantees()
        query, spine_record = self._spine_query(spine)
        seed = draw_seed() if seed is None else int(seed)
        spec = self._make_spec(three_way, seed, split, **split_kwargs)
        stream = self._stream_options(write_options, materialize)
        created = self._td_over(query).create(
            spec, seed=seed, start_time=start_time or None, end_time=end_time or None,
            extra_filter=extra_filter, materialize=materialize, data_format=data_format,
            description=description, statistics_config=statistics_config, convert=convert,
            stream=stream, spine=spine_record,
        )
        self._last_accessed_td = created[0]
        return created

    def create_training_data(
        self, start_time: Any = "", end_time: Any = "", storage_connector: Any = None,
        location: str = "", description: str = "", extra_filter: Any = None,
        data_format: str = "parquet", coalesce: bool = False, seed: int | None = None,
        statistics_config: Any = None, write_options: dict[str, Any] | None = None,
        spine: Any = None, **unsupported: Any,
    ) -> tuple[int, None]:
        """Materialize an unsplit training dataset; returns ``(version, None)``.

        ``spine`` (a spine group or a dataframe) anchors the version on those rows; they are
        stored with the version, content-hashed, so it re-reads bit for bit."""
        refuse_unsupported(unsupported, "create_training_data")
        refuse_destination(storage_connector, location, "create_training_data")
        version, _ = self._create(
            None, materialize=True, seed=seed, split=None, start_time=start_time,
            end_time=end_time, extra_filter=extra_filter, data_format=data_format,
            description=description, statistics_config=statistics_config,
            write_options=write_options, spine=spine,
        )
        return version, None

    def create_train_test_split(
        self, test_size: float | None = None, train_start: Any = "", train_end: Any = "",
        test_start: Any = "", test_end: Any = "", storage_connector: Any = None,
        location: str = "", description: str = "", extra_filter: Any = None,
        data_format: str = "parquet", coalesce: bool = False, seed: int | None = None,
        statistics_config: Any = None, write_options: dict[str, Any] | None = None,
        spine: Any = None, split: str | None = None, gap: Any = None,
        group_column: str | None = None, stratify_column: str | None = None,
        test_window: Any = None, train_window: Any = None, anchor: Any = None,
        **unsupported: Any,
    ) -> tuple[int, None]:
        """Materialize a train/test split; returns ``(version, None)``.

        ``split`` is ``"random"`` (default), ``"stratified"`` (on the label), ``"group"``
        (``group_column``) or ``"time"`` (time bounds, or sizes cut in time order; ``gap``
        drops rows after ``train_end``). ``test_window`` (e.g. ``"30D"``) instead of bounds
        makes the windows relative to ``anchor`` (default: the data's last event time).
        """
        refuse_unsupported(unsupported, "create_train_test_split")
        refuse_destination(storage_connector, location, "create_train_test_split")
        version, _ = self._create(
            False, materialize=True, seed=seed, split=split, extra_filter=extra_filter,
            data_format=data_format, description=description, statistics_config=statistics_config,
            write_options=write_options, spine=spine, test_size=test_size,
            train_start=train_start or None, train_end=train_end or None,
            test_start=test_start or None, test_end=test_end or None, gap=gap,
            group_column=group_column, stratify_column=stratify_column,
            **relative_windows(test_window=test_window, train_window=train_window, anchor=anchor),
        )
        return version, None

    def create_train_validation_test_split(
        self, validation_size: float | None = None, test_size: float | None = None,
        train_start: Any = "", train_end: Any = "", validation_start: Any = "",
        validation_end: Any = "", test_start: Any = "", test_end: Any = "",
        storage_connector: Any = None, location: str = "", description: str = "",
        extra_filter: Any = None, data_format: str = "parquet", coalesce: bool = False,
        seed: int | None = None, statistics_config: Any = None,
        write_options: dict[str, Any] | None = None, spine: Any = None,
        split: str | None = None, gap: Any = None, group_column: str | None = None,
        stratify_column: str | None = None, test_window: Any = None,
        validation_window: Any = None, train_window: Any = None, anchor: Any = None,
        **unsupported: Any,
    ) -> tuple[int, None]:
        """Materialize a train/validation/test split; returns ``(version, None)``.

        ``test_window``/``validation_window`` (e.g. ``"30D"``, with ``gap`` between splits)
        instead of bounds make a time split relative to ``anchor`` (default: the data's last
        event time); the version records the dates they resolved to.
        """
        refuse_unsupported(unsupported, "create_train_validation_test_split")
        refuse_destination(storage_connector, location, "create_train_validation_test_split")
        version, _ = self._create(
            True, materialize=True, seed=seed, split=split, extra_filter=extra_filter,
            data_format=data_format, description=description, statistics_config=statistics_config,
            write_options=write_options, spine=spine, validation_size=validation_size,
            test_size=test_size,
            train_start=train_start or None, train_end=train_end or None,
            validation_start=validation_start or None, validation_end=validation_end or None,
            test_start=test_start or None, test_end=test_end or None, gap=gap,
            group_column=group_column, stratify_column=stratify_column,
            **relative_windows(test_window=test_window, validation_window=validation_window,
                        train_window=train_window, anchor=anchor),
        )
        return version, None

    def _in_memory(self, three_way: bool | None, flags: dict[str, Any], **kwargs: Any) -> tuple[Any, ...]:
        _, result = self._create(
            three_way, materialize=False,
            convert=lambda td, splits: self._result(td, splits, **flags), **kwargs,
        )
        return result

    def training_data(
        self, start_time: Any = None, end_time: Any = None, description: str = "",
        extra_filter: Any = None, statistics_config: Any = None,
        read_options: dict[str, Any] | None = None, spine: Any = None,
        primary_key: bool = False, event_time: bool = False,
        training_helper_columns: bool = False, dataframe_type: str = "default",
        seed: int | None = None, **unsupported: Any,
    ) -> tuple[Any, Any]:
        """In-memory training data ``(X, y)``; registers a new (in-memory) version."""
        refuse_unsupported(unsupported, "training_data")
        check_options(self.owner, "read_options", read_options, {})
        flags = dict(primary_key=primary_key, event_time=event_time,
                     training_helper_columns=training_helper_columns, dataframe_type=dataframe_type)
        return self._in_memory(None, flags, seed=seed, split=None, start_time=start_time,
                               end_time=end_time, extra_filter=extra_filter,
                               description=description, statistics_config=statistics_config,
                               spine=spine)

    def train_test_split(
        self, test_size: float | None = None, train_start: Any = "", train_end: Any = "",
        test_start: Any = "", test_end: Any = "", description: str = "",
        extra_filter: Any = None, statistics_config: Any = None,
        read_options: dict[str, Any] | None = None, spine: Any = None,
        primary_key: bool = False, event_time: bool = False,
        training_helper_columns: bool = False, dataframe_type: str = "default",
        seed: int | None = None, split: str | None = None,
        gap: Any = None, group_column: str | None = None, stratify_column: str | None = None,
        **unsupported: Any,
    ) -> tuple[Any, Any, Any, Any]:
        """In-memory ``(X_train, X_test, y_train, y_test)``; registers a new version."""
        refuse_unsupported(unsupported, "train_test_split")
        check_options(self.owner, "read_options", read_options, {})
        flags = dict(primary_key=primary_key, event_time=event_time,
                     training_helper_columns=training_helper_columns, dataframe_type=dataframe_type)
        return self._in_memory(
            False, flags, seed=seed, split=split, extra_filter=extra_filter, spine=spine,
            description=description, statistics_config=statistics_config, test_size=test_size,
            train_start=train_start or None, train_end=train_end or None,
            test_start=test_start or None, test_end=test_end or None, gap=gap,
            group_column=group_column, stratify_column=stratify_column,
        )

    def train_validation_test_split(
        self, validation_size: float | None = None, test_size: float | None = None,
        train_start: Any = "", train_end: Any = "", validation_start: Any = "",
        validation_end: Any = "", test_start: Any = "", test_end: Any = "",
        description: str = "", extra_filter: Any = None, statistics_config: Any = None,
        read_options: dict[str, Any] | None = None, spine: Any = None,
        primary_key: bool = False, event_time: bool = False,
        training_helper_columns: bool = False, dataframe_type: str = "default",
        seed: int | None = None, split: str | None = None,
        gap: Any = None, group_column: str | None = None, stratify_column: str | None = None,
        **unsupported: Any,
    ) -> tuple[Any, ...]:
        """In-memory ``(X_train, X_val, X_test, y_train, y_val, y_test)``; registers a version."""
        refuse_unsupported(unsupported, "train_validation_test_split")
        check_options(self.owner, "read_options", read_options, {})
        flags = dict(primary_key=primary_key, event_time=event_time,
                     training_helper_columns=training_helper_columns, dataframe_type=dataframe_type)
        return self._in_memory(
            True, flags, seed=seed, split=split, extra_filter=extra_filter, spine=spine,
            description=description, statistics_config=statistics_config,
            validation_size=validation_size, test_size=test_size,
            train_start=train_start or None, train_end=train_end or None,
            validation_start=validation_start or None, validation_end=validation_end or None,
            test_start=test_start or None, test_end=test_end or None, gap=gap,
            group_column=group_column, stratify_column=stratify_column,
        )

    def _result(
        self, td: TrainingDataset, splits: dict[str, pa.Table], *, primary_key: bool,
        event_time: bool, training_helper_columns: bool, dataframe_type: str,
    ) -> tuple[Any, ...]:
        def conv(frame: Any) -> Any:
            if frame is None or dataframe_type in ("default", "pandas"):
                return frame
            import pyarrow as pa

            return convert_result(pa.Table.from_pandas(frame, preserve_index=False), dataframe_type)

        xs, ys = [], []
        for name in td.splits:
            x, y = self._shape(splits[name], td, primary_key=primary_key, event_time=event_time,
                               training_helper_columns=training_helper_columns)
            xs.append(conv(x))
            ys.append(conv(y))
        return tuple(xs + ys)

    def _get(self, version: int, expected: tuple[str, ...], call: str, **flags: Any) -> tuple[Any, ...]:
        self.require_saved()
        self._check_read_guarantees()
        store = self._td
        td = store.get(version)
        if tuple(td.splits) != expected:
            kinds = {("train",): "get_training_data", _SPLIT_NAMES_2: "get_train_test_split",
                     _SPLIT_NAMES_3: "get_train_validation_test_split"}
            raise InvalidArgumentError(
                f"{self.owner}: training dataset version {version} has splits {list(td.splits)}, "
                f"so {call}() cannot read it. Use {kinds.get(tuple(td.splits), 'another getter')}()."
            )
        if flags["dataframe_type"] in STREAMING_TYPES:
            flags.pop("verify", None)  # streamed files are always checked against their sha256
            result = self._stream(store, td, **flags)
        else:
            td, splits = store.read_splits(version, verify=flags.pop("verify", False))
            result = self._result(td, splits, **flags)
        self._last_accessed_td = int(version)
        return result

    def _stream(self, store: TrainingDataStore, td: TrainingDataset, *, dataframe_type: str,
                **flags: Any) -> tuple[Any, ...]:
        """Streaming forms of a materialized version's splits (see :func:`stream_splits`)."""
        return stream_splits(store, td, self._shaper(td, **flags), dataframe_type,
                             self._split_readers, labels=bool(self.labels))

    def _split_readers(self) -> Any:
        """The torch and Ray readers of split files (``fstrain.trainers.readers``), as the
        composition root wired them into the store."""
        load = self._store.split_readers
        if load is None:
            raise ConfigError(
                f"{self.owner}: torch and Ray datasets are made by the trainers' readers; open "
                "the store with fstrain.login() so they are wired in, or read "
                "dataframe_type='arrow_batches'."
            )
        return load()

    def get_last_accessed_training_dataset(self) -> int | None:
        """The training-dataset version this view object last created or read (as the SDK;
        ``create_model(feature_view=fv)`` records it as the model's training dataset)."""
        return self._last_accessed_td

    def get_training_data(
        self, training_dataset_version: int, read_options: dict[str, Any] | None = None,
        primary_key: bool = False, event_time: bool = False,
        training_helper_columns: bool = False, dataframe_type: str = "default",
    ) -> tuple[Any, Any]:
        """``(X, y)`` of an unsplit version — the same rows, bit for bit, forever."""
        return self._get(training_dataset_version, ("train",), "get_training_data",
                         primary_key=primary_key, event_time=event_time,
                         training_helper_columns=training_helper_columns,
                         dataframe_type=dataframe_type, verify=verify_requested(self.owner, read_options))

    def get_train_test_split(
        self, training_dataset_version: int, read_options: dict[str, Any] | None = None,
        primary_key: bool = False, event_time: bool = False,
        training_helper_columns: bool = False, dataframe_type: str = "default",
    ) -> tuple[Any, Any, Any, Any]:
        """``(X_train, X_test, y_train, y_test)`` of a 2-way version."""
        return self._get(training_dataset_version, _SPLIT_NAMES_2, "get_train_test_split",
                         primary_key=primary_key, event_time=event_time,
                         training_helper_columns=training_helper_columns,
                         dataframe_type=dataframe_type, verify=verify_requested(self.owner, read_options))

    def get_train_validation_test_split(
        self, training_dataset_version: int, read_options: dict[str, Any] | None = None,
        primary_key: bool = False, event_time: bool = False,
        training_helper_columns: bool = False, dataframe_type: str = "default",
    ) -> tuple[Any, ...]:
        """``(X_train, X_val, X_test, y_train, y_val, y_test)`` of a 3-way version."""
        return self._get(training_dataset_version, _SPLIT_NAMES_3, "get_train_validation_test_split",
                         primary_key=primary_key, event_time=event_time,
                         training_helper_columns=training_helper_columns,
                         dataframe_type=dataframe_type, verify=verify_requested(self.owner, read_options))

    def get_training_datasets(self) -> list[TrainingDataset]:
        """Metadata of every training-dataset version of the view."""
        self.require_saved()
        return self._td.all()

    def get_training_dataset(self, version: int) -> TrainingDataset:
        """Metadata of one version (commits, SQL, split spec, seed, hashes, statistics)."""
        self.require_saved()
        return self._td.get(version)

    def streams_split_files(self, training_dataset_version: int) -> bool:
        """Whether streamed reads (``arrow_batches``, ``ray``, ``torch``) hand out the version's
        split files: true for a materialized version (Parquet, csv or jsonl) not purged."""
        td = self.get_training_dataset(training_dataset_version)
        return td.type == "MATERIALIZED" and td.state != "purged"

    def get_training_dataset_statistics(self, training_dataset_version: int) -> dict[str, Any]:
        """Per-split statistics and the train-fitted transformation statistics."""
        td = self.get_training_dataset(training_dataset_version)
        return {
            "splits": {n: s["statistics"] for n, s in td.splits.items()},
            "before_transformation": td.transformation_statistics,
        }

    def verify_training_dataset(self, training_dataset_version: int) -> None:
        """Re-read a version and check every split against its recorded sha256."""
        self._td.verify_version(training_dataset_version)

    def kfold(
        self, training_dataset_version: int, k: int = 5, *, split: str = "train",
        stratified: bool = False,
    ) -> list[tuple[Any, Any]]:
        """Deterministic (stratified) k-fold row indices over one split of a version."""
        from feature_store.core.splits import kfold_indices

        td, splits = self._td.read_splits(training_dataset_version)
        if split not in splits:
            raise InvalidArgumentError(
                f"{self.owner}: version {training_dataset_version} has no split '{split}' "
                f"(splits: {list(splits)})."
            )
        table = splits[split]
        strat = table.column(self.labels[0]).to_numpy() if stratified and self.labels else None
        return kfold_indices(table.num_rows, k, td.seed, stratify=strat)

    def purge_training_data(self, training_dataset_version: int) -> None:
        """Delete a version's files but keep its metadata (recreate it later)."""
        self.require_saved()
        self._td.purge(training_dataset_version)

    def recreate_training_dataset(
        self, training_dataset_version: int, statistics_config: Any = None,
        write_options: dict[str, Any] | None = None, spine: Any = None,
        transformation_context: dict[str, Any] | None = None, **unsupported: Any,
    ) -> None:
        """Re-materialize a purged version from its pinned commits (hash-checked), streamed
        under ``write_options`` (``batch_rows``, ``memory_limit``, ``partitions``).

        The version is rebuilt from what it recorded (its commits, its stored spine, its
        statistics), so the Hopsworks options that would make a different dataset are refused:
        ``statistics_config`` (Hopsworks recomputes the statistics; here they are part of the
        hash-checked record), ``spine`` and ``transformation_context``."""
        refuse_unsupported(unsupported, "recreate_training_dataset")
        self.require_saved()
        changed = {name: value for name, value in (
            ("statistics_config", statistics_config), ("spine", spine),
            ("transformation_context", transformation_context)) if value is not None}
        if changed:
            raise InvalidArgumentError(
                f"{self.owner}: recreate_training_dataset({training_dataset_version}) rebuilds "
                f"the version from what it recorded; {sorted(changed)} would make a different "
                "dataset. Create a new version with them instead.")
        td = self._td.get(int(training_dataset_version))  # NotFoundError listing the versions
        stream = self._stream_options(write_options, td.type == "MATERIALIZED")
        self._td.recreate(int(training_dataset_version), stream)

    def _stream_options(self, write_options: dict[str, Any] | None,
                        materialize: bool) -> StreamOptions | None:
        """How a version is streamed under ``write_options``; an in-memory version streams
        nothing, so only ``wait_for_job`` applies to it (None)."""
        stream = StreamOptions.from_write_options(write_options, self.owner)
        if materialize:
            return stream
        check_options(self.owner, "write_options of an in-memory version", write_options,
                      {"wait_for_job": "the version exists when the call returns"})
        return None

    def delete_training_dataset(self, training_dataset_version: int) -> None:
        """Delete a version's metadata and files."""
        self.require_saved()
        self._td.delete(training_dataset_version)

    def delete_all_training_datasets(self) -> None:
        """Delete every version of the view."""
        store = self._td
        for version in store.versions():
            store.delete(version)

    # -- inference ---------------------------------------------------------------------------

    def init_batch_scoring(self, training_dataset_version: int | None = None) -> None:
        """Use ``training_dataset_version``'s transformation statistics for batch inference
        (``get_batch_data``), as Hopsworks does; ``None`` means the latest version."""
        if training_dataset_version is not None:
            self._td.get(int(training_dataset_version))  # NotFoundError listing the versions
            training_dataset_version = int(training_dataset_version)
        self._batch_scoring_version = training_dataset_version

    def get_batch_data(
        self, start_time: Any = None, end_time: Any = None,
        read_options: dict[str, Any] | None = None, spine: Any = None,
        primary_key: bool = False, event_time: bool = False,
        inference_helper_columns: bool = False, dataframe_type: str = "default",
        transformed: bool = True, training_dataset_version: int | None = None,
    ) -> Any:
        """Features for batch inference over ``[start_time, end_time)`` (no labels).

        ``spine`` (a spine group or a dataframe with the root's primary key and event time)
        fetches the features of those rows instead, each as of its event time.

        Transformations use the statistics of ``training_dataset_version`` (default: the one
        given to :meth:`init_batch_scoring`, else the latest version of the view).
        """
        self.require_saved()
        check_options(self.owner, "read_options", read_options, {})
        self._check_read_guarantees()
        query, _ = self._spine_query(  # scoring rows need no labels
            spine, frozenset(self.labels) | frozenset(self.training_helper_columns))
        start_time, end_time = scheduler_bounds(start_time, end_time)
        frame, root_columns = read_window(query, start_time, end_time)
        stats: dict[str, Any] = {}
        if transformed and self.transformation_functions:
            stats = self._batch_statistics(training_dataset_version)
        keep = self._key_columns(root_columns, primary_key, event_time)
        keep += [c for c in self.feature_names if c not in keep]
        if inference_helper_columns:
            keep += [c for c in self.inference_helper_columns if c not in keep]
        frame = frame[keep]
        if transformed and self.transformation_functions:
            frame = self._transform(frame, stats)
        if dataframe_type in ("default", "pandas"):
            return frame
        import pyarrow as pa

        return convert_result(pa.Table.from_pandas(frame, preserve_index=False), dataframe_type)

    def _batch_statistics(self, training_dataset_version: int | None) -> dict[str, Any]:
        """Transformation statistics for batch data: the given version, else the one of
        :meth:`init_batch_scoring`, else the latest version of the view."""
        store = self._td
        versions = store.versions()
        version = (training_dataset_version or self._batch_scoring_version
                   or (versions[-1] if versions else None))
        if version is None:
            raise NotFoundError(
                f"{self.owner} has transformation functions but no training dataset whose "
                "statistics they could use. Create a training dataset first."
            )
        return store.get(version).transformation_statistics

    @property
    def _batch_scoring_server(self) -> Any:
        """What notebooks read through the SDK's private ``fv._batch_scoring_server``:
        ``model_dependent_transformation_functions``, the SDK's ``TransformationFunction``
        objects with the statistics batch scoring uses (:meth:`init_batch_scoring`'s version,
        else the latest)."""
        sdk = self._store.sdk_objects
        if sdk is None:
            raise InvalidArgumentError(
                f"{self.owner}: the SDK's transformation objects need the Hopsworks SDK; open "
                "the store with fstrain.login()."
            )
        stats = self._batch_statistics(None) if self.transformation_functions else {}
        functions = sdk.model_dependent_transformation_functions(
            list(self.transformation_functions), stats)
        return SimpleNamespace(model_dependent_transformation_functions=functions)

    # -- lifecycle ------------------------------------------------------------------

    def _check_read_guarantees(self) -> None:
        """Tags can be added after the view exists: prohibited tags are checked at every read,
        not only at creation, so a feature tagged e.g. ``pii`` later never reaches the data."""
        if self.prohibited_tags:
            check_prohibited(self)

    def require_saved(self) -> int:
        """The view's catalog id (raises :class:`NotFoundError` for an unsaved view)."""
        if self.id is None:
            raise NotFoundError(f"{self.owner} has not been saved.")
        return self.id

    def delete(self) -> None:
        """Delete the view, its training datasets and tags."""
        fv_id = self.require_saved()
        self.delete_all_training_datasets()
        self._logger.delete()  # its feature-log groups and buffer go with it
        self._store.catalog.delete_feature_view(fv_id)
        self.id = None

    def to_dict(self) -> dict[str, Any]:
        """The persisted specification of the view."""
        return {
            "query": self._query_dict,
            "labels": self.labels,
            "training_helper_columns": self.training_helper_columns,
            "inference_helper_columns": self.inference_helper_columns,
            "transformation_functions": [tf.to_dict() for tf in self.transformation_functions],
            "prohibited_tags": self.prohibited_tags,
            "label_fill_values": self.label_fill_values,
            "logging_enabled": self.logging_enabled,
            "logging_paused": self.logging_paused,
            **({"as_known": True} if self.as_known else {}),
            "extra_log_columns": self.extra_log_columns,
        }
