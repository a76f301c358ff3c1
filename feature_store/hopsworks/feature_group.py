"""Feature groups and queries of the Hopsworks backend: thin SDK wrappers.

Each wrapper holds one SDK object in ``_sdk`` and forwards the calls the pipelines make through
:func:`~feature_store.hopsworks.sdk_calls.sdk_call`; fstrain extensions are added here:

* ``fg.latest_commit_id()`` is the newest key of ``commit_details()``;
* per-feature tags (``add_feature_tag`` & co.) are one group tag ``fstrain_feature_tags``
  (``{feature: {tag: value}}``), as Hopsworks tags only attach to whole feature groups;
* ``get_tag`` of an absent tag raises :class:`NotFoundError` (the SDK returns None);
* fstrain's expectation-suite dicts become ``hsfs`` suites (:func:`hsfs_expectation_suite`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from feature_store.core.expectations import normalize_policy, suite_to_dict
from feature_store.hopsworks.sdk_calls import sdk_attr, sdk_call
from fstrain.kernel.errors import InvalidArgumentError, NotFoundError, did_you_mean

if TYPE_CHECKING:  # pragma: no cover
    from feature_store.api import FeatureStore

FEATURE_TAGS = "fstrain_feature_tags"


def _unwrap(obj: Any) -> Any:
    """The SDK object behind an fstrain wrapper (or ``obj`` itself)."""
    return getattr(obj, "_sdk", obj)


def sdk_tags(tags: dict[str, Any]) -> list[dict[str, Any]]:
    """Tags as the SDK takes them at creation: ``[{"name": ..., "value": ...}]`` entries
    (``hopsworks_common.tag.Tag``); fstrain's API takes ``{name: value}``."""
    return [{"name": str(name), "value": value} for name, value in tags.items()]


def _names(features: list[Any] | None) -> list[Any]:
    return [getattr(f, "name", f) if not isinstance(f, str) else f for f in features or []]


class HopsworksFeatureGroup:
    """``hsfs.feature_group.FeatureGroup`` with fstrain's extensions."""

    def __init__(self, sdk_fg: Any, store: FeatureStore) -> None:
        self._sdk = sdk_fg
        self._store = store

    def __repr__(self) -> str:
        return f"HopsworksFeatureGroup({self.name!r}, {self.version})"

    # -- identity ----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return sdk_attr(self._sdk, "FeatureGroup", "name")

    @property
    def version(self) -> int:
        return sdk_attr(self._sdk, "FeatureGroup", "version")

    @property
    def id(self) -> int | None:
        """None until the first insert persists the group (as Hopsworks)."""
        return sdk_attr(self._sdk, "FeatureGroup", "id")

    @property
    def primary_key(self) -> list[str]:
        return list(sdk_attr(self._sdk, "FeatureGroup", "primary_key") or [])

    @property
    def event_time(self) -> str | None:
        return sdk_attr(self._sdk, "FeatureGroup", "event_time")

    @property
    def description(self) -> str:
        return sdk_attr(self._sdk, "FeatureGroup", "description") or ""

    @property
    def features(self) -> list[Any]:
        return list(sdk_attr(self._sdk, "FeatureGroup", "features") or [])

    @property
    def owner(self) -> str:
        return f"feature group '{self.name}' v{self.version}"

    def get_feature(self, name: str) -> Any:
        """The SDK ``Feature`` called ``name`` (for filters such as ``fg.amount > 10``)."""
        features = self.features
        for f in features:
            if sdk_attr(f, "Feature", "name") == name:
                return f
        names = [sdk_attr(f, "Feature", "name") for f in features]
        raise NotFoundError(
            f"{self.owner} has no feature '{name}' (features: {names}).{did_you_mean(name, names)}"
        )

    def __getitem__(self, name: str) -> Any:
        return self.get_feature(name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.get_feature(name)
        except NotFoundError:
            raise AttributeError(f"{type(self).__name__} has no attribute or feature '{name}'") from None

    # -- writing and reading -----------------------------------------------------------------

    def insert(self, features: Any, overwrite: bool = False, operation: str = "upsert",
               storage: str | None = None, write_options: dict[str, Any] | None = None,
               validation_options: dict[str, Any] | None = None, wait: bool = True) -> Any:
        """Upsert ``features``; returns ``(job, validation_report)`` as Hopsworks.

        ``wait`` defaults to True (unlike the SDK) so that the next stage sees the commit.
        """
        return sdk_call(self._sdk, "FeatureGroup.insert", features, overwrite=overwrite,
                        operation=operation, storage=storage, write_options=write_options,
                        validation_options=validation_options, wait=wait, _owner=self.owner)

    def read(self, wallclock_time: Any = None, online: bool = False,
             dataframe_type: str = "default", read_options: dict[str, Any] | None = None,
             start_time: Any = None, end_time: Any = None) -> Any:
        """Read the group (Hopsworks applies ``HOPS_START_TIME``/``HOPS_END_TIME`` defaults)."""
        return sdk_call(self._sdk, "FeatureGroup.read", wallclock_time=wallclock_time,
                        online=online, dataframe_type=dataframe_type, read_options=read_options,
                        start_time=start_time, end_time=end_time, _owner=self.owner)

    def commit_details(self, wallclock_time: Any = None,
                       limit: int | None = None) -> dict[int, dict[str, Any]]:
        """``{commit_id: {committedOn, rowsInserted, rowsUpdated, rowsDeleted}}``, newest first
        (commit ids as ints); none before the first insert persists the group."""
        if self.id is None:
            return {}
        raw = sdk_call(self._sdk, "FeatureGroup.commit_details", wallclock_time=wallclock_time,
                       limit=limit, _owner=self.owner) or {}
        items = sorted(((int(k), dict(v)) for k, v in raw.items()), reverse=True)
        return dict(items)

    def latest_commit_id(self) -> int:
        """The newest commit id of the group (fstrain extension, from ``commit_details``)."""
        details = self.commit_details(limit=1)
        if not details:
            raise NotFoundError(f"{self.owner} has no commits yet: insert data first.")
        return max(details)

    def as_of(self, wallclock_time: Any = None, exclude_until: Any = None, *,
              commit_id: int | None = None) -> HopsworksQuery:
        """Time travel (Spark engine only in Hopsworks 5). ``commit_id`` is translated to its
        commit time from ``commit_details``."""
        if commit_id is not None:
            details = self.commit_details()
            if int(commit_id) not in details:
                raise NotFoundError(
                    f"{self.owner} has no commit {commit_id} (commits: {sorted(details)})."
                )
            wallclock_time = details[int(commit_id)].get("committedOn")
        return HopsworksQuery(sdk_call(self._sdk, "FeatureGroup.as_of",
                                       wallclock_time=wallclock_time,
                                       exclude_until=exclude_until, _owner=self.owner))

    def select_all(self, include_primary_key: bool = True, include_foreign_key: bool = True,
                   include_partition_key: bool = True,
                   include_event_time: bool = True) -> HopsworksQuery:
        return HopsworksQuery(sdk_call(
            self._sdk, "FeatureGroup.select_all", include_primary_key=include_primary_key,
            include_foreign_key=include_foreign_key, include_partition_key=include_partition_key,
            include_event_time=include_event_time, _owner=self.owner,
        ))

    def _own_features(self, features: list[Any] | None) -> list[Any]:
        """The group's own SDK ``Feature`` objects for names: the SDK makes a bare
        ``Feature(name)`` from a string, without its feature-group id, so a query could not
        tell which group a selected feature came from (prohibited tags went unchecked)."""
        return [self.get_feature(name) for name in _names(features)]

    def select(self, features: list[Any]) -> HopsworksQuery:
        return HopsworksQuery(sdk_call(self._sdk, "FeatureGroup.select",
                                       self._own_features(features), _owner=self.owner))

    def select_except(self, features: list[Any] | None = None) -> HopsworksQuery:
        return HopsworksQuery(sdk_call(self._sdk, "FeatureGroup.select_except",
                                       self._own_features(features), _owner=self.owner))

    def select_features(self) -> HopsworksQuery:
        return HopsworksQuery(sdk_call(self._sdk, "FeatureGroup.select_features",
                                       _owner=self.owner))

    def filter(self, f: Any) -> HopsworksQuery:
        return HopsworksQuery(sdk_call(self._sdk, "FeatureGroup.filter", f, _owner=self.owner))

    def get_statistics(self, computation_time: Any = None,
                       feature_names: list[str] | None = None) -> Any:
        return sdk_call(self._sdk, "FeatureGroup.get_statistics",
                        computation_time=computation_time, feature_names=feature_names,
                        _owner=self.owner)

    def save_expectation_suite(self, expectation_suite: Any, run_validation: bool = True,
                               validation_ingestion_policy: str = "always",
                               overwrite: bool = False) -> Any:
        suite = hsfs_expectation_suite(expectation_suite, validation_ingestion_policy,
                                       f"{self.name}_v{self.version}_suite", run_validation)
        return sdk_call(self._sdk, "FeatureGroup.save_expectation_suite", suite,
                        run_validation=run_validation,
                        validation_ingestion_policy=validation_ingestion_policy.lower(),
                        overwrite=overwrite, _owner=self.owner)

    def update_feature_description(self, feature_name: str, description: str) -> HopsworksFeatureGroup:
        sdk_call(self._sdk, "FeatureGroup.update_feature_description", feature_name,
                 description, _owner=self.owner)
        return self

    def update_feature_descriptions(self, descriptions: dict[str, str]) -> HopsworksFeatureGroup:
        """fstrain extension: one ``update_feature_description`` call per feature."""
        for feature_name, description in descriptions.items():
            self.update_feature_description(feature_name, description)
        return self

    # -- tags --------------------------------------------------------------------------------

    def add_tag(self, name: str, value: Any) -> None:
        sdk_call(self._sdk, "FeatureGroup.add_tag", name, value, _owner=self.owner)

    def get_tag(self, name: str) -> Any:
        value = sdk_call(self._sdk, "FeatureGroup.get_tag", name, _owner=self.owner)
        if value is None:
            raise NotFoundError(f"{self.owner} has no tag '{name}'.")
        return value

    def get_tags(self) -> dict[str, Any]:
        if self.id is None:
            return {}
        return dict(sdk_call(self._sdk, "FeatureGroup.get_tags", _owner=self.owner) or {})

    def delete_tag(self, name: str) -> None:
        sdk_call(self._sdk, "FeatureGroup.delete_tag", name, _owner=self.owner)

    def add_feature_tag(self, feature: str, name: str, value: Any) -> None:
        """fstrain extension: stored in the group tag ``fstrain_feature_tags``."""
        self.get_feature(feature)
        tags = self.get_all_feature_tags()
        tags.setdefault(feature, {})[name] = value
        self.add_tag(FEATURE_TAGS, tags)

    def get_feature_tags(self, feature: str) -> dict[str, Any]:
        self.get_feature(feature)
        return dict(self.get_all_feature_tags().get(feature, {}))

    def get_all_feature_tags(self) -> dict[str, dict[str, Any]]:
        value = self.get_tags().get(FEATURE_TAGS) or {}
        return {k: dict(v) for k, v in dict(value).items()}

    def delete_feature_tag(self, feature: str, name: str) -> None:
        tags = self.get_all_feature_tags()
        if name not in tags.get(feature, {}):
            raise NotFoundError(f"{self.owner}: feature '{feature}' has no tag '{name}'.")
        del tags[feature][name]
        self.add_tag(FEATURE_TAGS, tags)


def refused_extension(what: str, owner: str) -> str:
    """The message refusing an fstrain extension the Hopsworks cluster cannot honour."""
    return (f"{owner}: {what} is an fstrain extension of the embedded store (as-known "
            "point-in-time joins, docs/concepts/joins.md); the Hopsworks cluster cannot do "
            "it, so it is refused rather than ignored. Drop it, or build the training data on "
            "the local backend.")


class HopsworksQuery:
    """``hsfs.constructor.query.Query``; ``join`` and ``filter`` mutate and return ``self``."""

    def __init__(self, sdk_query: Any) -> None:
        self._sdk = sdk_query

    def __repr__(self) -> str:
        return "HopsworksQuery()"

    def join(self, sub_query: Any, on: list[str] | None = None,
             left_on: list[str] | None = None, right_on: list[str] | None = None,
             join_type: str = "left", prefix: str | None = None, *,
             as_known: bool = False) -> HopsworksQuery:
        """``Query.join`` of the SDK. ``as_known=True`` (an fstrain extension of the embedded
        store) is refused: the cluster's point-in-time join has no as-known mode."""
        if as_known:
            raise InvalidArgumentError(refused_extension("join(as_known=True)", "query"))
        if not isinstance(sub_query, HopsworksQuery):
            raise InvalidArgumentError(
                f"join(): sub_query must be a query (e.g. fg.select_all()). Got "
                f"{type(sub_query).__name__} instead."
            )
        self._sdk = sdk_call(self._sdk, "Query.join", _unwrap(sub_query), on=on, left_on=left_on,
                             right_on=right_on, join_type=join_type, prefix=prefix,
                             _owner="query")
        return self

    def filter(self, f: Any) -> HopsworksQuery:
        self._sdk = sdk_call(self._sdk, "Query.filter", f, _owner="query")
        return self

    def as_of(self, wallclock_time: Any = None, exclude_until: Any = None) -> HopsworksQuery:
        self._sdk = sdk_call(self._sdk, "Query.as_of", wallclock_time=wallclock_time,
                             exclude_until=exclude_until, _owner="query")
        return self

    def read(self, online: bool = False, dataframe_type: str = "default",
             read_options: dict[str, Any] | None = None, start_time: Any = None,
             end_time: Any = None) -> Any:
        return sdk_call(self._sdk, "Query.read", online=online, dataframe_type=dataframe_type,
                        read_options=read_options, start_time=start_time, end_time=end_time,
                        _owner="query")

    def show(self, n: int) -> Any:
        return sdk_call(self._sdk, "Query.show", n, _owner="query")

    def to_string(self) -> str:
        return sdk_call(self._sdk, "Query.to_string", _owner="query")

    @property
    def features(self) -> list[Any]:
        return list(sdk_attr(self._sdk, "Query", "features") or [])

    @property
    def feature_groups(self) -> list[HopsworksFeatureGroup]:
        """Every feature group of the query (root first), wrapped (no store back-reference)."""
        return [HopsworksFeatureGroup(fg, None)  # type: ignore[arg-type]
                for fg in sdk_attr(self._sdk, "Query", "featuregroups") or []]


def hsfs_expectation_suite(suite: Any, policy: str, default_name: str,
                           run_validation: bool = True) -> Any:
    """An ``hsfs`` expectation suite from fstrain's dict form (or a GX suite), with ``policy``."""
    data = suite_to_dict(suite, default_name=default_name)
    policy = normalize_policy(policy).lower()
    from hsfs.expectation_suite import ExpectationSuite

    return sdk_call(
        ExpectationSuite, "ExpectationSuite.__init__",
        expectation_suite_name=data["name"],
        expectations=[{"expectation_type": e["type"], "kwargs": e["kwargs"], "meta": {}}
                      for e in data["expectations"]],
        meta={}, run_validation=run_validation, validation_ingestion_policy=policy,
        _owner=f"expectation suite '{data['name']}'",
    )
