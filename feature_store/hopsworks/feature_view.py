"""Feature views and training datasets of the Hopsworks backend.

What the SDK does is forwarded; fstrain's additions are kept where the SDK allows:

* ``label_fill_values`` are applied client-side to every ``y`` read (Hopsworks has no such
  option). Unlike the local backend they are applied *after* the split, so a split never sees
  the filled value (Hopsworks has no stratified split that could use it anyway).
* ``prohibited_tags`` are checked client-side at creation against the feature groups' tags and
  the ``fstrain_feature_tags`` group tag.
* Both are stored as the feature-view tag ``fstrain_feature_view`` and restored on
  ``get_feature_view``.
* Every training-dataset version gets the tag ``fstrain_training_dataset``:
  ``feature_group_commits`` (the newest commit of every feature group in the query, read from
  ``commit_details`` just before creation), the split spec, the seed (always drawn and recorded
  when not given) and ``sha256`` of each split, recorded at the first read and verified on later
  reads with ``read_options={"verify": True}``. The commits are lineage only: Hopsworks cannot
  read a query at a pinned commit from Python.
* Splits: ``random`` (sizes + seed) and ``time`` (bounds; ``gap`` is emulated by moving the next
  split's start) map to the SDK; ``stratified`` falls back to a seeded random split with a
  warning (recorded in the split spec); ``group`` is refused.
"""

from __future__ import annotations

import warnings
from dataclasses import fields
from functools import cached_property
from typing import TYPE_CHECKING, Any

from feature_store.api import TrainingDataset
from feature_store.core.seeds import draw_seed
from feature_store.core.view_rules import (
    carried_tags,
    check_label_fill_values,
    check_not_prohibited,
)
from feature_store.hopsworks.feature_group import FEATURE_TAGS, HopsworksQuery, _unwrap
from feature_store.hopsworks.sdk_calls import (
    SDK_BUILTIN_TRANSFORMATIONS,
    sdk_attr,
    sdk_attrs,
    sdk_call,
)
from fstrain.kernel.errors import (
    IntegrityError,
    InvalidArgumentError,
    NotFoundError,
    listing,
)
from fstrain.kernel.timeutil import utc_now

if TYPE_CHECKING:  # pragma: no cover
    from feature_store.api import FeatureStore

EXTENSIONS_TAG = "fstrain_feature_view"
TRAINING_DATASET_TAG = "fstrain_training_dataset"
_SPLITS_3 = ("train", "validation", "test")
_SPLITS_2 = ("train", "test")
_INTEGER_TYPES = ("bigint", "int", "smallint", "tinyint")


def check_extensions(owner: str, query: Any, labels: list[str], helpers: list[str],
                     extensions: dict[str, Any]) -> None:
    """Refuse fill values for non-labels and features from groups/features with a prohibited tag."""
    check_label_fill_values(owner, extensions["label_fill_values"], labels)
    prohibited = set(extensions["prohibited_tags"])
    if not prohibited or not isinstance(query, HopsworksQuery):
        return
    groups = {fg.id: fg for fg in query.feature_groups}
    tags = {fg_id: (carried_tags(fg.get_tags(), ignore=[FEATURE_TAGS]), fg.get_all_feature_tags())
            for fg_id, fg in groups.items()}
    for feature in query.features:
        name = sdk_attr(feature, "Feature", "name")
        if name in helpers or any(h.endswith(f"_{name}") for h in helpers):
            continue
        fg_id = sdk_attr(feature, "Feature", "feature_group_id")
        if fg_id not in groups:
            continue
        group_tags, feature_tags = tags[fg_id]
        check_not_prohibited(owner, name, groups[fg_id].name, name, group_tags,
                             carried_tags(feature_tags.get(name, {}), ignore=[FEATURE_TAGS]),
                             prohibited)


def split_arguments(owner: str, *, three_way: bool, split: str | None, seed: int,
                    sizes: dict[str, Any], bounds: dict[str, Any], gap: Any,
                    group_column: str | None, stratify_column: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """SDK keyword arguments and the recorded split spec for one create call."""
    import pandas as pd

    strategy = split or ("time" if any(bounds.values()) else "random")
    spec: dict[str, Any] = {"strategy": strategy, "seed": seed}
    if strategy == "group" or group_column is not None:
        raise InvalidArgumentError(
            f"{owner}: split='group' is not available on the Hopsworks backend (the SDK has no "
            "group split). Use split='random' or 'time', or the local backend."
        )
    if strategy == "stratified" or stratify_column is not None:
        warnings.warn(
            f"{owner}: Hopsworks has no stratified split; using a seeded random split with the "
            "same sizes (recorded in the training dataset's split spec).",
            UserWarning, stacklevel=4,
        )
        spec = {"strategy": "random", "requested": "stratified", "seed": seed}
        strategy = "random"
    kwargs: dict[str, Any] = {"seed": seed}
    if strategy == "random":
        if any(bounds.values()):
            raise InvalidArgumentError(f"{owner}: time bounds need split='time'.")
        kwargs.update({k: v for k, v in sizes.items() if v is not None})
        spec.update(kwargs)
        return kwargs, spec
    if strategy != "time":
        raise InvalidArgumentError(
            f"{owner}: split must be 'random', 'stratified', 'group' or 'time'. Got {split!r} "
            "instead."
        )
    if not bounds.get("train_end") and not bounds.get("test_start"):
        raise InvalidArgumentError(
            f"{owner}: a time split on Hopsworks needs bounds (train_start/train_end, "
            "[validation_start/validation_end,] test_start/test_end). Got sizes only."
        )
    bounds = {k: utc_bound(owner, k, v) for k, v in bounds.items() if v}
    if gap:
        delta = pd.Timedelta(gap)
        follows = [("train_end", "validation_start" if three_way else "test_start")]
        if three_way:
            follows.append(("validation_end", "test_start"))
        for end_key, start_key in follows:
            if end_key in bounds:
                earliest = bounds[end_key] + delta
                bounds[start_key] = max(bounds.get(start_key, bounds[end_key]), earliest)
        spec["gap"] = delta.isoformat()
    kwargs.update(bounds)
    spec.update({k: v.isoformat() for k, v in bounds.items()})
    return kwargs, spec


def relative_windows(owner: str, three_way: bool, split: str | None, seed: int | None,
                     gap: Any, windows: dict[str, Any], anchor: Any, bounds: dict[str, Any],
                     sizes: tuple[Any, Any]) -> tuple[str, dict[str, Any]]:
    """``("time", bounds)`` of relative windows counted back from ``anchor``, validated and
    computed by the backend-neutral split code (same bounds as the local store).

    The local store's default anchor is the data's last event time; the Hopsworks Python
    client cannot read it without the Query Service, so here ``anchor`` is required: a
    timestamp, e.g. ``$HOPS_END_TIME`` in a scheduled job (``--anchor end-time``).
    """
    from feature_store.core.splits import make_split_spec, relative_bounds

    if anchor is None:
        raise InvalidArgumentError(
            f"{owner}: relative windows ({', '.join(k for k, v in windows.items() if v)}) on "
            "Hopsworks need anchor= (a date, or 'end-time' for $HOPS_END_TIME): the data's last "
            "event time, the local default, cannot be read from the Python client."
        )
    spec = make_split_spec(
        split or "time", seed=0 if seed is None else int(seed), three_way=three_way,
        validation_size=sizes[0], test_size=sizes[1], gap=gap,
        anchor=utc_bound(owner, "anchor", anchor),
        **{k: v for k, v in bounds.items() if v}, **windows,
    )
    return "time", {k: v for k, v in relative_bounds(spec, None).items() if k in bounds}


def utc_bound(owner: str, name: str, value: Any) -> Any:
    """A split or window bound as a UTC ``pandas.Timestamp`` (naive means UTC, as locally).

    The SDK converts a Timestamp to epoch milliseconds itself; it refuses ISO strings with a
    ``T`` ("Unable to identify format of the provided date value") and reads small integers
    as seconds, so neither is sent.
    """
    import pandas as pd

    try:
        stamp = pd.Timestamp(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"{owner}: {name} must be a date/time (e.g. '2024-01-01'). Got {value!r} instead."
        ) from None
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


#: The formats the Hopsworks SDK's Python engine reads a training dataset back from (5.2.1):
#: a version in another format (json, avro, orc, fstrain's jsonl) would materialize and then
#: fail at every read with "format is not supported to read as pandas dataframe".
SDK_READABLE_FORMATS = ("parquet", "csv", "tsv")


def check_readable_format(owner: str, data_format: str) -> None:
    """Refuse, before the job runs, a training-dataset format the SDK cannot read back."""
    if str(data_format).lower() not in SDK_READABLE_FORMATS:
        raise InvalidArgumentError(
            f"{owner}: data_format={data_format!r} cannot be read back by the Hopsworks Python "
            f"client (it reads {', '.join(SDK_READABLE_FORMATS)}). Create the version with "
            "data_format='parquet' (CLI: --data-format parquet)."
        )


#: The ``dataframe_type`` values the Hopsworks SDK's Python engine returns (5.2.1).
SDK_DATAFRAME_TYPES = ("default", "pandas", "polars", "numpy", "python")


def check_dataframe_type(owner: str, dataframe_type: str) -> None:
    """Refuse a ``dataframe_type`` the SDK cannot return, before any request: the embedded
    store's streaming forms (``arrow_batches``, ``ray``, ``torch``) read a version's pinned
    local files, which a Hopsworks version does not have on this machine."""
    if dataframe_type not in SDK_DATAFRAME_TYPES:
        raise InvalidArgumentError(
            f"{owner}: dataframe_type={dataframe_type!r} is not available on Hopsworks (it "
            f"returns {', '.join(SDK_DATAFRAME_TYPES)}); streamed reads (arrow_batches, ray, "
            "torch) work on the embedded store only."
        )


class HopsworksFeatureView:
    """``hsfs.feature_view.FeatureView`` with fstrain's extensions."""

    def __init__(self, sdk_fv: Any, store: FeatureStore) -> None:
        self._sdk = sdk_fv
        self._store = store

    def __repr__(self) -> str:
        return f"HopsworksFeatureView({self.name!r}, {self.version}, labels={self.labels})"

    # -- structure ---------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return sdk_attr(self._sdk, "FeatureView", "name")

    @property
    def version(self) -> int:
        return sdk_attr(self._sdk, "FeatureView", "version")

    @property
    def owner(self) -> str:
        return f"feature view '{self.name}' v{self.version}"

    @property
    def sdk_object(self) -> Any:
        """The wrapped ``hsfs`` feature view (what ``hsml``'s ``create_model`` takes)."""
        return self._sdk

    @property
    def description(self) -> str:
        return sdk_attr(self._sdk, "FeatureView", "description") or ""

    @property
    def labels(self) -> list[str]:
        return list(sdk_attr(self._sdk, "FeatureView", "labels") or [])

    @property
    def training_helper_columns(self) -> list[str]:
        return list(sdk_attr(self._sdk, "FeatureView", "training_helper_columns") or [])

    @property
    def inference_helper_columns(self) -> list[str]:
        return list(sdk_attr(self._sdk, "FeatureView", "inference_helper_columns") or [])

    @property
    def features(self) -> list[Any]:
        return list(sdk_attr(self._sdk, "FeatureView", "features") or [])

    @property
    def schema(self) -> list[dict[str, str]]:
        """``[{"name", "type"}]`` of every column (used by the model registry)."""
        return [{"name": sdk_attr(f, "Feature", "name"), "type": str(sdk_attr(f, "Feature", "type"))}
                for f in self.features]

    @cached_property
    def _root_keys(self) -> tuple[list[str], list[str]]:
        """``(primary key, [event time])`` of the root group, where the view selects them."""
        features = self.query.features
        if not features:
            return [], []
        root_id = sdk_attr(features[0], "Feature", "feature_group_id")
        root = next((fg for fg in self.query.feature_groups if fg.id == root_id), None)
        if root is None:
            return [], []
        selected = {sdk_attr(f, "Feature", "name") for f in features
                    if sdk_attr(f, "Feature", "feature_group_id") == root_id}
        return ([k for k in root.primary_key if k in selected],
                [root.event_time] if root.event_time is not None and root.event_time in selected
                else [])

    @property
    def root_key_columns(self) -> list[str]:
        """The root group's primary key and event time where the view selects them.

        The SDK keeps selected keys in ``X`` (it drops only keys the query does not select);
        fstrain returns them only with ``primary_key=``/``event_time=``, as the local store
        does, so a model never trains on a row id or a timestamp on one backend only.
        """
        keys, time = self._root_keys
        return keys + time

    @property
    def feature_names(self) -> list[str]:
        """Model features: columns that are not labels, helper columns or root keys."""
        excluded = (set(self.labels) | set(self.training_helper_columns)
                    | set(self.inference_helper_columns) | set(self.root_key_columns))
        return [c["name"] for c in self.schema if c["name"] not in excluded]

    def _drop_root_keys(self, frame: Any, primary_key: bool, event_time: bool) -> Any:
        """``frame`` without the selected root keys the caller did not ask for."""
        keys, time = self._root_keys
        drop = ([] if primary_key else keys) + ([] if event_time else time)
        drop = [k for k in drop if k in getattr(frame, "columns", [])]
        return frame.drop(columns=drop) if drop else frame

    @property
    def query(self) -> HopsworksQuery:
        return HopsworksQuery(sdk_attr(self._sdk, "FeatureView", "query"))

    @cached_property
    def _extensions(self) -> dict[str, Any]:
        tags = sdk_call(self._sdk, "FeatureView.get_tags", _owner=self.owner) or {}
        ext = dict(tags.get(EXTENSIONS_TAG) or {})
        return {"label_fill_values": dict(ext.get("label_fill_values") or {}),
                "prohibited_tags": list(ext.get("prohibited_tags") or [])}

    @property
    def label_fill_values(self) -> dict[str, Any]:
        return self._extensions["label_fill_values"]

    @property
    def prohibited_tags(self) -> list[str]:
        return self._extensions["prohibited_tags"]

    def add_tag(self, name: str, value: Any) -> None:
        sdk_call(self._sdk, "FeatureView.add_tag", name, value, _owner=self.owner)

    def get_tags(self) -> dict[str, Any]:
        return dict(sdk_call(self._sdk, "FeatureView.get_tags", _owner=self.owner) or {})

    # -- creating training datasets ----------------------------------------------------------

    def _commits(self) -> dict[str, int | None]:
        """``{"name:version": newest commit}`` of every feature group in the view's query (None:
        a group without commits)."""
        commits: dict[str, int | None] = {}
        for fg in self.query.feature_groups:
            details = fg.commit_details(limit=1)
            commits[f"{fg.name}:{fg.version}"] = max(details) if details else None
        return commits

    def _create(self, key: str, splits: tuple[str, ...], *, seed: int | None, split: str | None,
                sizes: dict[str, Any], bounds: dict[str, Any], gap: Any,
                group_column: str | None, stratify_column: str | None,
                common: dict[str, Any]) -> tuple[int, Any]:
        check_readable_format(self.owner, common["data_format"])
        seed = draw_seed() if seed is None else int(seed)
        if len(splits) == 1:
            kwargs = {"seed": seed, **{k: utc_bound(self.owner, k, v)
                                       for k, v in bounds.items() if v}}
            spec = None
        else:
            kwargs, spec = split_arguments(
                self.owner, three_way=len(splits) == 3, split=split, seed=seed, sizes=sizes,
                bounds=bounds, gap=gap, group_column=group_column,
                stratify_column=stratify_column,
            )
        commits = self._commits()
        options = {"wait_for_job": True, **(common.pop("write_options", None) or {})}
        version, job = sdk_call(self._sdk, key, write_options=options, _owner=self.owner,
                                **kwargs, **common)
        record = {"feature_group_commits": commits, "split_spec": spec, "seed": seed,
                  "splits": list(splits), "sha256": {}, "created_at": utc_now().isoformat()}
        sdk_call(self._sdk, "FeatureView.add_training_dataset_tag", version,
                 TRAINING_DATASET_TAG, record, _owner=self.owner)
        return version, job

    def create_train_validation_test_split(
        self, validation_size: float | None = None, test_size: float | None = None,
        train_start: Any = "", train_end: Any = "", validation_start: Any = "",
        validation_end: Any = "", test_start: Any = "", test_end: Any = "",
        description: str = "", extra_filter: Any = None, data_format: str = "parquet",
        seed: int | None = None, statistics_config: Any = None,
        write_options: dict[str, Any] | None = None, split: str | None = None, gap: Any = None,
        group_column: str | None = None, stratify_column: str | None = None,
        test_window: Any = None, validation_window: Any = None, train_window: Any = None,
        anchor: Any = None, spine: Any = None,
    ) -> tuple[int, Any]:
        """Materialize a train/validation/test version; returns ``(version, job)``.

        ``test_window``/``validation_window``/``train_window`` count back from ``anchor`` (a
        timestamp, required here: see :func:`relative_windows`)."""
        self._refuse_spine(spine, "create_train_validation_test_split")
        bounds = {"train_start": train_start, "train_end": train_end,
                  "validation_start": validation_start, "validation_end": validation_end,
                  "test_start": test_start, "test_end": test_end}
        windows = {"test_window": test_window, "validation_window": validation_window,
                   "train_window": train_window}
        if any(v is not None for v in windows.values()):
            split, bounds = relative_windows(self.owner, True, split, seed, gap, windows, anchor,
                                             bounds, (validation_size, test_size))
        return self._create(
            "FeatureView.create_train_validation_test_split", _SPLITS_3, seed=seed, split=split,
            sizes={"validation_size": validation_size, "test_size": test_size},
            bounds=bounds,
            gap=gap, group_column=group_column, stratify_column=stratify_column,
            common={"description": description, "extra_filter": extra_filter,
                    "data_format": data_format, "statistics_config": statistics_config,
                    "write_options": write_options},
        )

    def create_train_test_split(
        self, test_size: float | None = None, train_start: Any = "", train_end: Any = "",
        test_start: Any = "", test_end: Any = "", description: str = "",
        extra_filter: Any = None, data_format: str = "parquet", seed: int | None = None,
        statistics_config: Any = None, write_options: dict[str, Any] | None = None,
        split: str | None = None, gap: Any = None, group_column: str | None = None,
        stratify_column: str | None = None, test_window: Any = None, train_window: Any = None,
        anchor: Any = None, spine: Any = None,
    ) -> tuple[int, Any]:
        """Materialize a train/test version; returns ``(version, job)`` (relative windows as
        in :meth:`create_train_validation_test_split`)."""
        self._refuse_spine(spine, "create_train_test_split")
        bounds = {"train_start": train_start, "train_end": train_end,
                  "test_start": test_start, "test_end": test_end}
        windows = {"test_window": test_window, "validation_window": None,
                   "train_window": train_window}
        if any(v is not None for v in windows.values()):
            split, bounds = relative_windows(self.owner, False, split, seed, gap, windows, anchor,
                                             bounds, (None, test_size))
        return self._create(
            "FeatureView.create_train_test_split", _SPLITS_2, seed=seed, split=split,
            sizes={"test_size": test_size},
            bounds=bounds,
            gap=gap, group_column=group_column, stratify_column=stratify_column,
            common={"description": description, "extra_filter": extra_filter,
                    "data_format": data_format, "statistics_config": statistics_config,
                    "write_options": write_options},
        )

    def create_training_data(
        self, start_time: Any = "", end_time: Any = "", description: str = "",
        extra_filter: Any = None, data_format: str = "parquet", seed: int | None = None,
        statistics_config: Any = None, write_options: dict[str, Any] | None = None,
        spine: Any = None,
    ) -> tuple[int, Any]:
        """Materialize an unsplit version; returns ``(version, job)``."""
        self._refuse_spine(spine, "create_training_data")
        return self._create(
            "FeatureView.create_training_data", ("train",), seed=seed, split=None, sizes={},
            bounds={"start_time": start_time, "end_time": end_time}, gap=None,
            group_column=None, stratify_column=None,
            common={"description": description, "extra_filter": extra_filter,
                    "data_format": data_format, "statistics_config": statistics_config,
                    "write_options": write_options},
        )

    # -- reading training datasets -----------------------------------------------------------

    def _fill(self, y: Any) -> Any:
        fills = {k: v for k, v in self.label_fill_values.items()
                 if y is not None and k in getattr(y, "columns", [])}
        if not fills:
            return y
        y = y.copy()
        types = {c["name"]: c["type"].lower() for c in self.schema}
        for col, value in fills.items():
            filled = y[col].fillna(value).infer_objects()
            if types.get(col) in _INTEGER_TYPES and filled.dtype.kind == "f" \
                    and (filled % 1 == 0).all():
                filled = filled.astype("int64")  # the LEFT join's nulls made it float
            y[col] = filled
        return y

    def _read(self, key: str, names: tuple[str, ...], version: int,
              read_options: dict[str, Any] | None, flags: dict[str, Any]) -> tuple[Any, ...]:
        options = dict(read_options or {})
        verify = bool(options.pop("verify", False))
        owner = f"{self.owner}, training dataset v{version}"
        check_dataframe_type(owner, flags["dataframe_type"])
        if verify and flags["dataframe_type"] not in ("default", "pandas"):
            raise InvalidArgumentError(
                f"{owner}: read_options={{'verify': True}} checks the split's recorded hash of "
                f"its pandas frames; dataframe_type={flags['dataframe_type']!r} cannot be "
                "verified. Read with dataframe_type='pandas' to verify."
            )
        frames = sdk_call(self._sdk, key, version, read_options=options or None,
                          _owner=f"{self.owner}, training dataset v{version}", **flags)
        n = len(names)
        xs = [self._drop_root_keys(x, bool(flags.get("primary_key")), bool(flags.get("event_time")))
              for x in frames[:n]]
        ys = [self._fill(y) for y in frames[n:]]
        self._check_hashes(version, names, xs, ys, flags, verify)
        return tuple(xs + ys)

    def _check_hashes(self, version: int, names: tuple[str, ...], xs: list[Any], ys: list[Any],
                      flags: dict[str, Any], verify: bool) -> None:
        """Record each split's sha256 at the first read; compare on ``verify`` reads."""
        import pandas as pd

        from feature_store.core.content_hash import frame_sha256

        if not all(isinstance(x, pd.DataFrame) for x in xs):
            return
        variant = ",".join(f"{k}={int(bool(flags.get(k)))}" for k in
                           ("primary_key", "event_time", "training_helper_columns"))
        hashes = {
            f"{name}|{variant}": frame_sha256(
                x if y is None else pd.concat([x.reset_index(drop=True),
                                               y.reset_index(drop=True)], axis=1))
            for name, x, y in zip(names, xs, ys or [None] * len(xs), strict=True)
        }
        tags = self._td_tags(version)
        record = dict(tags.get(TRAINING_DATASET_TAG) or {})
        known = dict(record.get("sha256") or {})
        changed = sorted(k.split("|")[0] for k, v in hashes.items() if k in known and known[k] != v)
        if changed and verify:
            raise IntegrityError(
                f"{self.owner}, training dataset v{version}: split(s) {changed} no longer match "
                "the sha256 recorded at their first read (Hopsworks re-ran the query of an "
                "in-memory version, or the files changed). Create a new version."
            )
        new = {k: v for k, v in hashes.items() if k not in known}
        if new and record:
            record["sha256"] = {**known, **new}
            sdk_call(self._sdk, "FeatureView.add_training_dataset_tag", version,
                     TRAINING_DATASET_TAG, record, _owner=self.owner)

    def _transformation_statistics(self, version: int) -> dict[str, Any]:
        """The statistics the view's transformations use for ``version``, as the SDK fetches
        them (``before_transformation=True``), keyed and shaped as on the local store
        (``{"standard_scaler_amount": {"mean", "std"}}``); SDK UDFs other than the built-ins
        are left out."""
        functions = sdk_attr(self._sdk, "FeatureView", "transformation_functions") or []
        if not functions:
            return {}
        owner = f"{self.owner}, training dataset v{version}"
        stats = sdk_call(self._sdk, "FeatureView.get_training_dataset_statistics", version,
                         before_transformation=True, _owner=owner)
        described = {sdk_attr(s, "FeatureDescriptiveStatistics", "feature_name"): s
                     for s in (sdk_attr(stats, "Statistics", "feature_descriptive_statistics")
                               if stats is not None else None) or []}
        out: dict[str, Any] = {}
        for tf in functions:
            udf = sdk_attr(tf, "TransformationFunction", "hopsworks_udf")
            name = sdk_attr(udf, "HopsworksUdf", "function_name")
            features = list(sdk_attr(udf, "HopsworksUdf", "transformation_features") or [])
            if name not in SDK_BUILTIN_TRANSFORMATIONS or len(features) != 1 \
                    or features[0] not in described:
                continue
            fitted = _fstrain_statistics(name, features[0], described[features[0]])
            if fitted is not None:
                out[f"{name}_{features[0]}"] = fitted
        return out

    def _td_tags(self, version: int) -> dict[str, Any]:
        return dict(sdk_call(self._sdk, "FeatureView.get_training_dataset_tags", version,
                             _owner=f"{self.owner}, training dataset v{version}") or {})

    def get_train_validation_test_split(
        self, training_dataset_version: int, read_options: dict[str, Any] | None = None,
        primary_key: bool = False, event_time: bool = False,
        training_helper_columns: bool = False, dataframe_type: str = "default",
    ) -> tuple[Any, ...]:
        """``(X_train, X_val, X_test, y_train, y_val, y_test)``; labels filled client-side."""
        return self._read("FeatureView.get_train_validation_test_split", _SPLITS_3,
                          training_dataset_version, read_options,
                          {"primary_key": primary_key, "event_time": event_time,
                           "training_helper_columns": training_helper_columns,
                           "dataframe_type": dataframe_type})

    def get_train_test_split(
        self, training_dataset_version: int, read_options: dict[str, Any] | None = None,
        primary_key: bool = False, event_time: bool = False,
        training_helper_columns: bool = False, dataframe_type: str = "default",
    ) -> tuple[Any, ...]:
        """``(X_train, X_test, y_train, y_test)``; labels filled client-side."""
        return self._read("FeatureView.get_train_test_split", _SPLITS_2,
                          training_dataset_version, read_options,
                          {"primary_key": primary_key, "event_time": event_time,
                           "training_helper_columns": training_helper_columns,
                           "dataframe_type": dataframe_type})

    def get_training_data(
        self, training_dataset_version: int, read_options: dict[str, Any] | None = None,
        primary_key: bool = False, event_time: bool = False,
        training_helper_columns: bool = False, dataframe_type: str = "default",
    ) -> tuple[Any, ...]:
        """``(X, y)`` of an unsplit version; labels filled client-side."""
        return self._read("FeatureView.get_training_data", ("train",),
                          training_dataset_version, read_options,
                          {"primary_key": primary_key, "event_time": event_time,
                           "training_helper_columns": training_helper_columns,
                           "dataframe_type": dataframe_type})

    def train_validation_test_split(
        self, validation_size: float | None = None, test_size: float | None = None,
        train_start: Any = "", train_end: Any = "", validation_start: Any = "",
        validation_end: Any = "", test_start: Any = "", test_end: Any = "",
        training_helper_columns: bool = False, seed: int | None = None, spine: Any = None,
    ) -> tuple[Any, ...]:
        """In-memory split by time bounds. Hopsworks registers an in-memory version and
        re-runs its query on every later read (no bit identity after backfills).

        Random (size-based) in-memory splits are refused: the SDK's in-memory split takes no
        ``seed`` (5.2.1) and shuffles differently on every call, so neither a given nor a
        recorded seed could be honoured. Use :meth:`create_train_validation_test_split` (a
        materialized version, seed passed and recorded) instead.
        """
        self._refuse_spine(spine, "train_validation_test_split")
        if validation_size is not None or test_size is not None or seed is not None:
            raise InvalidArgumentError(
                f"{self.owner}: a random in-memory split cannot be reproduced on Hopsworks (the "
                "SDK's in-memory split takes no seed and reshuffles on every call). Use "
                "create_train_validation_test_split(validation_size=..., test_size=..., seed=...) "
                "for a materialized version, or pass time bounds here."
            )
        bounds = {"train_start": train_start, "train_end": train_end,
                  "validation_start": validation_start, "validation_end": validation_end,
                  "test_start": test_start, "test_end": test_end}
        if not any(bounds.values()):
            raise InvalidArgumentError(
                f"{self.owner}: an in-memory split on Hopsworks needs time bounds "
                "(train_start/train_end, validation_start/validation_end, test_start/test_end)."
            )
        frames = sdk_call(self._sdk, "FeatureView.train_validation_test_split",
                          training_helper_columns=training_helper_columns, _owner=self.owner,
                          **{k: utc_bound(self.owner, k, v) for k, v in bounds.items() if v})
        return tuple([self._drop_root_keys(x, False, False) for x in frames[:3]]
                     + [self._fill(y) for y in frames[3:]])

    def _refuse_spine(self, spine: Any, call: str) -> None:
        """``spine=`` is refused by name: the SDK's Python engine cannot read from a spine group
        or spine dataframe (the SDK documents them as Spark-engine only)."""
        if spine is not None:
            raise InvalidArgumentError(
                f"{self.owner}: {call}(spine=...) is not available on the Hopsworks backend: the "
                "SDK's Python engine cannot use spine groups or spine dataframes (they need its "
                "Spark engine). Build the data on the embedded store (backend 'local'), or run "
                "the call in a Spark job on the cluster."
            )

    def init_batch_scoring(self, training_dataset_version: int | None = None) -> None:
        """Use ``training_dataset_version``'s transformation statistics for batch inference."""
        sdk_call(self._sdk, "FeatureView.init_batch_scoring",
                 training_dataset_version=training_dataset_version, _owner=self.owner)

    def get_batch_data(self, start_time: Any = None, end_time: Any = None,
                       read_options: dict[str, Any] | None = None, primary_key: bool = False,
                       event_time: bool = False, inference_helper_columns: bool = False,
                       dataframe_type: str = "default", transformed: bool = True,
                       spine: Any = None) -> Any:
        """Features for batch inference over ``[start_time, end_time)`` (no labels)."""
        self._refuse_spine(spine, "get_batch_data")
        check_dataframe_type(self.owner, dataframe_type)
        frame = sdk_call(self._sdk, "FeatureView.get_batch_data", start_time=start_time,
                         end_time=end_time, read_options=read_options, primary_key=primary_key,
                         event_time=event_time,
                         inference_helper_columns=inference_helper_columns,
                         dataframe_type=dataframe_type, transformed=transformed,
                         _owner=self.owner)
        return self._drop_root_keys(frame, primary_key, event_time)

    # -- training-dataset metadata -----------------------------------------------------------

    def _sdk_training_datasets(self) -> dict[int, Any]:
        tds = sdk_call(self._sdk, "FeatureView.get_training_datasets", _owner=self.owner) or []
        return {int(sdk_attr(td, "TrainingDatasetBase", "version")): td for td in tds}

    def _sdk_training_dataset(self, version: int) -> Any:
        """The SDK's training dataset ``version`` of this view, or :class:`NotFoundError`."""
        tds = self._sdk_training_datasets()
        if version not in tds:
            raise NotFoundError(
                f"{self.owner} has no training dataset version {version!r} (versions: "
                f"{listing(sorted(tds))})."
            )
        return tds[version]

    def get_training_datasets(self) -> list[TrainingDataset]:
        """Metadata of every training-dataset version of the view."""
        return [self.get_training_dataset(v) for v in sorted(self._sdk_training_datasets())]

    def streams_split_files(self, training_dataset_version: int) -> bool:
        """False: a Hopsworks version's split files stay on the cluster and the SDK reads them
        into frames only (streamed dataframe types are refused, :func:`check_dataframe_type`).
        An unknown version raises :class:`NotFoundError`, as on the embedded store."""
        self._sdk_training_dataset(training_dataset_version)
        return False

    def get_training_dataset(self, version: int) -> TrainingDataset:
        """Metadata with the fields of the local ``TrainingDataset`` (see module docstring for
        which come from the SDK and which from the ``fstrain_training_dataset`` tag)."""
        meta = sdk_attrs(self._sdk_training_dataset(version), "TrainingDatasetBase")
        attr = meta.get

        record = dict(self._td_tags(version).get(TRAINING_DATASET_TAG) or {})
        hashes = dict(record.get("sha256") or {})
        sdk_splits = list(attr("splits") or [])
        names = [sdk_attr(s, "TrainingDatasetSplit", "name") for s in sdk_splits] or ["train"]
        order = {"train": 0, "validation": 1, "test": 2}
        names.sort(key=lambda n: order.get(n, 3))
        splits: dict[str, dict[str, Any]] = {}
        for name in names:
            split = next((s for s in sdk_splits
                          if sdk_attr(s, "TrainingDatasetSplit", "name") == name), None)
            default = f"{name}|primary_key=0,event_time=0,training_helper_columns=0"
            splits[name] = {
                "rows": None,
                "sha256": hashes.get(default) or next(
                    (v for k, v in sorted(hashes.items()) if k.startswith(f"{name}|")), None),
                "sha256_by_read": {k.split("|", 1)[1]: v for k, v in hashes.items()
                                   if k.startswith(f"{name}|")},
                "percentage": None if split is None else sdk_attr(split, "TrainingDatasetSplit", "percentage"),
                "start_time": None if split is None else _iso(sdk_attr(split, "TrainingDatasetSplit", "start_time")),
                "end_time": None if split is None else _iso(sdk_attr(split, "TrainingDatasetSplit", "end_time")),
            }
        kind = str(attr("training_dataset_type") or "")
        seed = attr("seed")
        values: dict[str, Any] = dict(
            version=version,
            feature_view_name=self.name,
            feature_view_version=self.version,
            type="IN_MEMORY" if kind.upper().startswith("IN_MEMORY") else "MATERIALIZED",
            data_format=attr("data_format"),
            # fstrain tags a version once its creation returned; one without the tag never
            # completed (its materialization job failed), and `latest` in jobs skips it.
            state="ok" if record else "incomplete",
            description=attr("description") or "",
            seed=int(seed) if seed is not None else record.get("seed"),
            split_spec=record.get("split_spec") or {},
            splits=splits,
            event_start_time=_iso(attr("event_start_time")),
            event_end_time=_iso(attr("event_end_time")),
            extra_filter=None if attr("extra_filter") is None else {"hopsworks": str(attr("extra_filter"))},
            feature_group_commits=dict(record.get("feature_group_commits") or {}),
            query_sql="",
            columns=self.schema,
            root_columns={},
            transformation_statistics=self._transformation_statistics(version),
            created_at=record.get("created_at") or "",
            location=attr("location"),
            extra={"backend": "hopsworks", "hopsworks_type": kind,
                   "fstrain_tag": bool(record)},
        )
        # fields the local dataclass may gain later are None here (same shape on both backends)
        given: dict[str, Any] = {f.name: values.get(f.name) for f in fields(TrainingDataset)
                                 if f.init}
        return TrainingDataset(**given)


def _fstrain_statistics(name: str, feature: str, stats: Any) -> dict[str, Any] | None:
    """fstrain's statistics of built-in ``name`` from the SDK's descriptive statistics."""
    if name == "standard_scaler":
        return {"mean": sdk_attr(stats, "FeatureDescriptiveStatistics", "mean"),
                "std": sdk_attr(stats, "FeatureDescriptiveStatistics", "stddev")}
    if name == "min_max_scaler":
        return {"min": sdk_attr(stats, "FeatureDescriptiveStatistics", "min"),
                "max": sdk_attr(stats, "FeatureDescriptiveStatistics", "max")}
    if name == "robust_scaler":
        percentiles = list(sdk_attr(stats, "FeatureDescriptiveStatistics", "percentiles") or [])
        if len(percentiles) < 75:
            return None
        return {"p25": percentiles[24], "p50": percentiles[49], "p75": percentiles[74]}
    extended = sdk_attr(stats, "FeatureDescriptiveStatistics", "extended_statistics") or {}
    values = sorted(extended.get("unique_values") or [])
    if name == "label_encoder":
        return {"values": values}
    if name == "one_hot_encoder":
        return {"values": values, "columns": {f"{name}_{feature}_{i}": v
                                              for i, v in enumerate(values)}}
    return None


def _iso(value: Any) -> str | None:
    if value in (None, ""):
        return None
    if isinstance(value, int | float):
        import pandas as pd

        return pd.Timestamp(int(value), unit="ms", tz="UTC").isoformat()
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


__all__ = ["EXTENSIONS_TAG", "TRAINING_DATASET_TAG", "HopsworksFeatureView", "_unwrap"]
