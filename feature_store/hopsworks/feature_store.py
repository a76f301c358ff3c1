"""The feature store of the Hopsworks backend: a thin wrapper over the SDK's ``FeatureStore``.

It forwards the calls the pipelines make through
:func:`~feature_store.hopsworks.sdk_calls.sdk_call` and wraps what they return
(:mod:`.feature_group`: groups and queries; :mod:`.feature_view`: views). fstrain extensions:
``get_or_create_feature_group(..., expectation_suite=<fstrain dict>,
validation_ingestion_policy=...)`` builds an ``hsfs`` expectation suite with that policy, and a
view's fstrain extensions (prohibited tags, helper columns) are checked and stored as its tag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from feature_store.hopsworks.feature_group import (
    FEATURE_TAGS,
    HopsworksFeatureGroup,
    HopsworksQuery,
    _unwrap,
    hsfs_expectation_suite,
    refused_extension,
    sdk_tags,
)
from feature_store.hopsworks.feature_view import (
    EXTENSIONS_TAG,
    HopsworksFeatureView,
    check_extensions,
)
from feature_store.hopsworks.sdk_calls import (
    SDK_BUILTIN_TRANSFORMATIONS,
    sdk_attr,
    sdk_builtin_transformation,
    sdk_call,
)
from fstrain.kernel.errors import InvalidArgumentError, NotFoundError, did_you_mean

if TYPE_CHECKING:  # pragma: no cover
    from feature_store.api import Project

__all__ = ["FEATURE_TAGS", "HopsworksFeatureGroup", "HopsworksFeatureStore", "HopsworksQuery",
           "sdk_transformations"]


def sdk_transformations(owner: str, functions: list[Any]) -> list[Any]:
    """fstrain's transformations as the SDK's built-in ones (``standard_scaler("amount")`` →
    ``hsfs.builtin_transformations.standard_scaler("amount")``); the SDK refuses anything not
    made with its ``@udf`` decorator. SDK transformation functions pass through unchanged."""
    from feature_store.core.transformations import TransformationFunction

    out = []
    for tf in functions:
        if isinstance(tf, TransformationFunction):
            if tf.name not in SDK_BUILTIN_TRANSFORMATIONS or tf.params:
                raise InvalidArgumentError(
                    f"{owner}: transformation {tf.name}({tf.feature!r}"
                    f"{', ' + str(tf.params) if tf.params else ''}) has no Hopsworks built-in "
                    f"equivalent (built-ins: {list(SDK_BUILTIN_TRANSFORMATIONS)}, no options)."
                )
            out.append(sdk_builtin_transformation(tf.name, tf.feature, _owner=owner))
        elif type(tf).__module__.startswith("hsfs."):
            out.append(tf)
        else:
            raise InvalidArgumentError(
                f"{owner}: transformation_functions takes fstrain transformations (e.g. "
                f"standard_scaler('amount')) or Hopsworks @udf functions. Got "
                f"{type(tf).__name__} instead."
            )
    return out


def _group_kwargs(name: str, version: int | None, description: str, online_enabled: bool,
                  partition_key: list[str] | None, primary_key: list[str] | None,
                  foreign_key: list[str] | None, statistics_config: Any, expectation_suite: Any,
                  event_time: str | None, tags: dict[str, Any] | None,
                  validation_ingestion_policy: str, ingestion_time: str | None
                  ) -> dict[str, Any]:
    """The SDK keywords of a feature group's definition (fstrain's ``ingestion_time``
    refused by name: the cluster's joins cannot read it)."""
    if ingestion_time is not None:
        raise InvalidArgumentError(refused_extension(
            f"ingestion_time={ingestion_time!r}", f"feature group '{name}'"))
    kwargs: dict[str, Any] = {
        "version": version, "description": description or "",
        "online_enabled": online_enabled, "primary_key": list(primary_key or []),
        "event_time": event_time,
    }
    if partition_key:
        kwargs["partition_key"] = list(partition_key)
    if foreign_key:
        kwargs["foreign_key"] = list(foreign_key)
    if statistics_config is not None:
        kwargs["statistics_config"] = statistics_config
    if tags:
        kwargs["tags"] = sdk_tags(tags)
    if expectation_suite is not None:
        kwargs["expectation_suite"] = hsfs_expectation_suite(
            expectation_suite, validation_ingestion_policy,
            f"{name}_v{version}_suite" if version is not None else f"{name}_suite")
    return kwargs


class HopsworksFeatureStore:
    """``hsfs.feature_store.FeatureStore`` with fstrain's extensions."""

    backend = "hopsworks"

    def __init__(self, sdk_fs: Any, project: Project | None = None) -> None:
        self._sdk = sdk_fs
        self.project = project

    def __repr__(self) -> str:
        return "HopsworksFeatureStore()"

    # -- feature groups ----------------------------------------------------------------------

    def get_or_create_feature_group(
        self,
        name: str,
        version: int | None = None,
        description: str = "",
        online_enabled: bool = False,
        partition_key: list[str] | None = None,
        primary_key: list[str] | None = None,
        foreign_key: list[str] | None = None,
        statistics_config: Any = None,
        expectation_suite: Any = None,
        event_time: str | None = None,
        tags: dict[str, Any] | None = None,
        validation_ingestion_policy: str = "always",
        ingestion_time: str | None = None,
    ) -> HopsworksFeatureGroup:
        """The feature group if it exists (arguments then ignored, as Hopsworks), else a new,
        lazily created one (persisted by its first ``insert``). fstrain's ``ingestion_time``
        is refused by name: the cluster's joins cannot read it."""
        version = 1 if version is None else version
        kwargs = _group_kwargs(name, version, description, online_enabled, partition_key,
                               primary_key, foreign_key, statistics_config, expectation_suite,
                               event_time, tags, validation_ingestion_policy, ingestion_time)
        fg = sdk_call(self._sdk, "FeatureStore.get_or_create_feature_group", name,
                      _owner=f"feature group '{name}' v{version}", **kwargs)
        return HopsworksFeatureGroup(fg, self)

    def create_feature_group(
        self,
        name: str,
        version: int | None = None,
        description: str = "",
        online_enabled: bool = False,
        time_travel_format: str | None = None,
        partition_key: list[str] | None = None,
        primary_key: list[str] | None = None,
        foreign_key: list[str] | None = None,
        embedding_index: Any = None,
        hudi_precombine_key: str | None = None,
        features: list[Any] | None = None,
        statistics_config: Any = None,
        event_time: str | None = None,
        stream: bool = False,
        expectation_suite: Any = None,
        tags: dict[str, Any] | None = None,
        validation_ingestion_policy: str = "always",
        ingestion_time: str | None = None,
        **unsupported: Any,
    ) -> HopsworksFeatureGroup:
        """A new feature group version (created by its first ``insert``), as the SDK's
        ``create_feature_group`` (``version=None``: the cluster takes the next free one; an
        existing version is the cluster's error). ``time_travel_format`` and
        ``hudi_precombine_key`` reach the cluster; ``features``, ``embedding_index`` and
        ``stream``, which this adapter does not translate, and fstrain's ``ingestion_time``
        are refused by name, as are other options."""
        owner = f"feature group '{name}'"
        refused = sorted([*unsupported, *(k for k, v in (
            ("features", features), ("embedding_index", embedding_index),
            ("stream", stream or None)) if v is not None)])
        if refused:
            raise InvalidArgumentError(
                f"{owner}: create_feature_group() options {refused} are not passed to the "
                "cluster by fstrain's Hopsworks adapter. Drop them, or create the group with "
                "the hopsworks SDK directly.")
        kwargs = _group_kwargs(name, version, description, online_enabled, partition_key,
                               primary_key, foreign_key, statistics_config, expectation_suite,
                               event_time, tags, validation_ingestion_policy, ingestion_time)
        if time_travel_format is not None:
            kwargs["time_travel_format"] = time_travel_format
        if hudi_precombine_key is not None:
            kwargs["hudi_precombine_key"] = hudi_precombine_key
        fg = sdk_call(self._sdk, "FeatureStore.create_feature_group", name,
                      _owner=f"{owner} v{version}" if version else owner, **kwargs)
        return HopsworksFeatureGroup(fg, self)

    def get_or_create_spine_group(
        self, name: str, version: int | None = None, description: str | None = "",
        primary_key: list[str] | None = None, foreign_key: list[str] | None = None,
        event_time: str | None = None, features: list[Any] | None = None,
        dataframe: Any = None,
    ) -> HopsworksFeatureGroup:
        """The SDK's spine group (metadata only; its rows stay on the object). Training data and
        batch reads from a spine are refused on this backend: the SDK's Python engine cannot use
        spines (they need its Spark engine)."""
        if features is not None:
            raise InvalidArgumentError(
                f"get_or_create_spine_group('{name}'): features= is not passed on by the "
                "Hopsworks backend; the spine's schema is taken from dataframe=."
            )
        sg = sdk_call(self._sdk, "FeatureStore.get_or_create_spine_group", name,
                      version=version, description=description or "",
                      primary_key=list(primary_key or []), foreign_key=list(foreign_key or []),
                      event_time=event_time, dataframe=dataframe,
                      _owner=f"spine group '{name}'")
        return HopsworksFeatureGroup(sg, self)

    def get_feature_group(self, name: str, version: int | None = None) -> HopsworksFeatureGroup:
        """An existing feature group version (``None`` → version 1, as Hopsworks)."""
        fg = sdk_call(self._sdk, "FeatureStore.get_feature_group", name, version=version,
                      _owner=f"feature group '{name}'")
        if fg is None:
            raise NotFoundError(
                f"feature group '{name}' v{version or 1} does not exist in Hopsworks. Run the "
                "feature pipeline first, or check the name and version."
            )
        return HopsworksFeatureGroup(fg, self)

    def get_feature_groups(self, name: str | None = None) -> list[HopsworksFeatureGroup]:
        """All versions of ``name`` (every feature group when None)."""
        groups = sdk_call(self._sdk, "FeatureStore.get_feature_groups", name=name,
                          _owner=f"feature group '{name}'") or []
        return [HopsworksFeatureGroup(fg, self) for fg in groups]

    # -- feature views -----------------------------------------------------------------------

    def get_or_create_feature_view(
        self, name: str, version: int, query: Any, description: str = "",
        labels: list[str] | None = None, inference_helper_columns: list[str] | None = None,
        training_helper_columns: list[str] | None = None,
        transformation_functions: list[Any] | None = None, tags: dict[str, Any] | None = None,
        label_fill_values: dict[str, Any] | None = None, prohibited_tags: list[str] | None = None,
        as_known: bool = False,
    ) -> HopsworksFeatureView:
        """Get or create a feature view; fstrain's ``label_fill_values`` and ``prohibited_tags``
        are checked here and stored as the view's tag ``fstrain_feature_view``; its
        ``as_known=True`` is refused by name (the cluster has no as-known join)."""
        owner = f"feature view '{name}' v{version}"
        if as_known:
            raise InvalidArgumentError(refused_extension("as_known=True", owner))
        kwargs = _view_request(owner, query, version, description, labels,
                               inference_helper_columns, training_helper_columns,
                               transformation_functions, tags, label_fill_values,
                               prohibited_tags)
        fv = sdk_call(self._sdk, "FeatureStore.get_or_create_feature_view", name,
                      _owner=owner, **kwargs)
        return HopsworksFeatureView(fv, self)

    def create_feature_view(
        self, name: str, query: Any, version: int | None = None, description: str = "",
        labels: list[str] | None = None, inference_helper_columns: list[str] | None = None,
        training_helper_columns: list[str] | None = None,
        transformation_functions: list[Any] | None = None, *, tags: dict[str, Any] | None = None,
        label_fill_values: dict[str, Any] | None = None, prohibited_tags: list[str] | None = None,
        as_known: bool = False,
    ) -> HopsworksFeatureView:
        """Create a feature view version (``version=None``: Hopsworks takes the next one).

        An existing name and version is an :class:`AlreadyExistsError` (Hopsworks errorCode
        270179), as on the embedded store. fstrain's ``as_known=True`` is refused by name.
        """
        owner = f"feature view '{name}'" + ("" if version is None else f" v{version}")
        if as_known:
            raise InvalidArgumentError(refused_extension("as_known=True", owner))
        kwargs = _view_request(owner, query, version, description, labels,
                               inference_helper_columns, training_helper_columns,
                               transformation_functions, tags, label_fill_values,
                               prohibited_tags)
        fv = sdk_call(self._sdk, "FeatureStore.create_feature_view", name, _owner=owner,
                      **kwargs)
        return HopsworksFeatureView(fv, self)

    def get_feature_view(self, name: str, version: int | None = None) -> HopsworksFeatureView:
        """An existing feature view (``None`` → version 1, as Hopsworks)."""
        fv = sdk_call(self._sdk, "FeatureStore.get_feature_view", name, version=version,
                      _owner=f"feature view '{name}'")
        if fv is None:
            raise NotFoundError(
                f"feature view '{name}' v{version or 1} does not exist in Hopsworks. Run the "
                "training-dataset pipeline first, or check the name and version."
            )
        return HopsworksFeatureView(fv, self)


def _view_request(owner: str, query: Any, version: int | None, description: str,
                  labels: list[str] | str | None, inference_helper_columns: list[str] | None,
                  training_helper_columns: list[str] | None,
                  transformation_functions: list[Any] | None, tags: dict[str, Any] | None,
                  label_fill_values: dict[str, Any] | None,
                  prohibited_tags: list[str] | None) -> dict[str, Any]:
    """The SDK keyword arguments of a feature-view create, fstrain's extensions checked and
    stored as the view's tag ``fstrain_feature_view``."""
    labels = [labels] if isinstance(labels, str) else list(labels or [])
    helpers = list(training_helper_columns or []) + list(inference_helper_columns or [])
    extensions = {"label_fill_values": dict(label_fill_values or {}),
                  "prohibited_tags": list(prohibited_tags or [])}
    check_extensions(owner, query, labels, helpers, extensions)
    kwargs: dict[str, Any] = {
        "query": _unwrap(query), "version": version, "description": description or "",
        "labels": labels,
        "inference_helper_columns": list(inference_helper_columns or []),
        "training_helper_columns": list(training_helper_columns or []),
    }
    if transformation_functions:
        kwargs["transformation_functions"] = sdk_transformations(owner, transformation_functions)
    all_tags = dict(tags or {})
    if any(extensions.values()):
        all_tags[EXTENSIONS_TAG] = extensions
    if all_tags:
        kwargs["tags"] = sdk_tags(all_tags)
    return kwargs
