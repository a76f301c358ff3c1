"""Feature-view operations of the local feature store: create, get, validate, delete.

Kept apart from :mod:`feature_store.local.objects.feature_store` so each module has one job; the
``FeatureStore`` class inherits these methods.
"""

from __future__ import annotations

from typing import Any, cast

from feature_store.local.catalog import Catalog, loads
from feature_store.local.objects.feature_view import FeatureView
from feature_store.local.objects.hosts import StoreHost
from feature_store.local.objects.query import Query
from feature_store.local.objects.sdk_conventions import refuse_unsupported, warn_default_version
from feature_store.local.objects.transformation_functions import (
    LocalTransformationFunction,
    load,
    saved,
    versions,
)
from feature_store.local.objects.view_checks import validate_feature_view
from fstrain.kernel.errors import (
    AlreadyExistsError,
    ConfigError,
    InvalidArgumentError,
    NotFoundError,
    did_you_mean,
    listing,
    missing_version,
)
from fstrain.kernel.names import check_entity_name, check_version
from fstrain.kernel.timeutil import utc_now


class FeatureViewOperations:
    """Feature-view operations of :class:`FeatureStore` (kept apart for readability)."""

    sdk_objects: Any = None  # fstrain.sdk_objects when opened by login()

    catalog: Catalog

    @property
    def _host(self) -> StoreHost:
        """This object as the feature store it is a part of (the class this one is mixed into)."""
        return cast("StoreHost", self)

    def create_feature_view(
        self,
        name: str,
        query: Any,
        version: int | None = None,
        description: str = "",
        labels: list[str] | None = None,
        inference_helper_columns: list[str] | None = None,
        training_helper_columns: list[str] | None = None,
        transformation_functions: list[Any] | None = None,
        prohibited_tags: list[str] | None = None,
        label_fill_values: dict[str, Any] | None = None,
        logging_enabled: bool = False,
        tags: dict[str, Any] | None = None,
        as_known: bool = False,
        extra_log_columns: list[Any] | None = None,
        **unsupported: Any,
    ) -> Any:
        """Create and save a feature view version (``version=None`` takes the next one).

        Validated at creation: labels and helper columns must be query columns, a column cannot
        be both a label and a helper, transformation inputs must exist, and no selected feature
        may come from a group or feature tagged with one of ``prohibited_tags``.
        ``as_known=True`` (an fstrain extension) makes every point-in-time join of the query's
        root as-known (docs/concepts/joins.md), recorded with the view and with each of its
        training-dataset versions.
        """
        refuse_unsupported(unsupported, "create_feature_view")
        check_entity_name(name, "feature view")
        if not isinstance(query, Query):
            raise InvalidArgumentError(
                f"feature view '{name}': query must be a Query (e.g. fg.select_all()). "
                f"Got {type(query).__name__} instead."
            )
        if query.is_incremental():
            raise InvalidArgumentError(
                f"feature view '{name}': its query reads incrementally (as_of(..., "
                "exclude_until=...)), which a feature view cannot store: its training data "
                "would be re-read whole. Create the view from a query without exclude_until."
            )
        _check_view_as_known(name, as_known, query)
        existing = self._fv_versions(name)
        if version is None:
            version = (max(existing) + 1) if existing else 1
        check_version(version, "feature view", name)
        if version in existing:
            raise AlreadyExistsError(
                f"feature view '{name}' v{version} already exists (versions: {listing(existing)})."
            )
        fv = FeatureView(
            self._host, name, version, query, description=description, labels=_as_list(labels),
            training_helper_columns=_as_list(training_helper_columns),
            inference_helper_columns=_as_list(inference_helper_columns),
            transformation_functions=list(transformation_functions or []),
            prohibited_tags=_as_list(prohibited_tags), label_fill_values=label_fill_values,
            logging_enabled=bool(logging_enabled or extra_log_columns),  # as the SDK
            as_known=as_known, extra_log_columns=extra_log_columns,
        )
        validate_feature_view(fv)
        fv.id = self.catalog.insert_feature_view(
            name, version, description or "", fv.to_dict(), utc_now().isoformat(), tags or {})
        return fv

    def get_or_create_feature_view(
        self,
        name: str,
        version: int,
        query: Any,
        description: str = "",
        labels: list[str] | None = None,
        inference_helper_columns: list[str] | None = None,
        training_helper_columns: list[str] | None = None,
        transformation_functions: list[Any] | None = None,
        tags: dict[str, Any] | None = None,
        label_fill_values: dict[str, Any] | None = None,
        prohibited_tags: list[str] | None = None,
        **kwargs: Any,
    ) -> Any:
        """The existing view ``name``/``version``, or a new one built from the arguments."""
        if self._fv_row(name, version) is not None:
            return self.get_feature_view(name, version)
        return self.create_feature_view(
            name, query, version=version, description=description, labels=labels,
            inference_helper_columns=inference_helper_columns,
            training_helper_columns=training_helper_columns,
            transformation_functions=transformation_functions, tags=tags,
            label_fill_values=label_fill_values, prohibited_tags=prohibited_tags, **kwargs)

    def get_feature_view(self, name: str, version: int | None = None) -> Any:
        """An existing feature view (``version=None`` warns and uses 1)."""
        if version is None:
            warn_default_version("feature view", name)
            version = 1
        row = self._fv_row(name, version)
        if row is None:
            raise missing_version("feature view", name, version, self._fv_versions(name),
                                  self.catalog.feature_view_names())
        return self._fv_from_row(row)

    def get_feature_views(self, name: str | None = None) -> list[Any]:
        """All versions of a feature view (of every feature view when ``name`` is None)."""
        return [self._fv_from_row(r) for r in self.catalog.feature_view_rows(name)]

    def builtin_transformation_functions(self) -> list[Any]:
        """The SDK's built-in transformation functions (needs the store opened by
        ``fstrain.login()``)."""
        if self.sdk_objects is None:
            raise ConfigError(
                "Transformation functions are the Hopsworks SDK's objects; open the store with "
                "fstrain.login() so the SDK is wired in."
            )
        return self.sdk_objects.builtin_transformation_functions()

    def create_transformation_function(self, transformation_function: Any,
                                       version: int | None = None) -> Any:
        """A named, versioned ``@udf`` (persisted by its ``save()``), as the SDK's method."""
        return LocalTransformationFunction(self._host, transformation_function, version)

    def get_transformation_functions(self) -> list[Any]:
        """The SDK's built-in transformation functions (its ``TransformationFunction``
        objects, version 1) and every saved ``@udf`` (:meth:`create_transformation_function`)."""
        return self.builtin_transformation_functions() + saved(self._host)

    def get_transformation_function(self, name: str, version: int | None = None) -> Any:
        """The transformation function ``name``: a saved ``@udf`` (``version=None`` means 1,
        as the SDK) or a built-in such as ``"standard_scaler"``; call it with feature names to
        bind it (``fs.get_transformation_function("standard_scaler")("amount")``).

        Raises:
            NotFoundError: no such function or version (the message lists what exists).
        """
        builtins = {tf.hopsworks_udf.function_name: tf
                    for tf in self.builtin_transformation_functions()}
        found = load(self._host, name, version or 1)
        if found is not None:
            return found
        if name in builtins and version in (None, 1):
            return builtins[name]
        mine = versions(self._host, name)
        where = (f"saved versions: {mine}" if mine
                 else f"built-ins, version 1: {', '.join(sorted(builtins))}")
        raise NotFoundError(
            f"Transformation function {name!r} version {version or 1} does not exist "
            f"({where}).{did_you_mean(str(name), list(builtins))}"
        )

    def _fv_versions(self, name: str) -> list[int]:
        return self.catalog.feature_view_versions(name)

    def _fv_row(self, name: str, version: int) -> Any:
        return self.catalog.feature_view_row(name, version)

    def _fv_from_row(self, row: Any) -> Any:
        from feature_store.core.transformations import transformation_from_dict
        spec = loads(row["spec"])
        return FeatureView(
            self._host, row["name"], row["version"], Query.from_dict(self._host, spec["query"]),
            description=row["description"], labels=spec["labels"],
            training_helper_columns=spec["training_helper_columns"],
            inference_helper_columns=spec["inference_helper_columns"],
            transformation_functions=[transformation_from_dict(t, self.sdk_objects)
                                      for t in spec["transformation_functions"]],
            prohibited_tags=spec.get("prohibited_tags", []),
            label_fill_values=spec.get("label_fill_values", {}),
            logging_enabled=spec.get("logging_enabled", False),
            logging_paused=spec.get("logging_paused", False), fv_id=row["id"],
            as_known=spec.get("as_known", False),
            extra_log_columns=spec.get("extra_log_columns"),
        )

    def feature_views_reading(self, name: str, version: int) -> list[str]:
        """``'name' vN`` of every feature view whose query reads feature group ``name``
        v``version`` (used to refuse deleting a group that views still read)."""
        hits = []
        for row in self.catalog.feature_view_rows():
            if (name, version) in _groups_of(loads(row["spec"])["query"]):
                hits.append(f"'{row['name']}' v{row['version']}")
        return hits


def _groups_of(query: dict[str, Any]) -> set[tuple[str, int]]:
    """Every (name, version) a stored query reads: its root, joined sub-queries and filters."""
    ref = query["left_feature_group"]
    out = {(ref["name"], int(ref["version"]))}
    for join in query.get("joins", []):
        out |= _groups_of(join["query"])
    stack = [query.get("filter")]
    while stack:
        f = stack.pop()
        if not f:
            continue
        if "logic" in f:
            stack += [f["left"], f["right"]]
        elif f.get("feature_group"):
            out.add((f["feature_group"]["name"], int(f["feature_group"]["version"])))
    return out


def _check_view_as_known(name: str, value: Any, query: Query) -> None:
    """A view's ``as_known`` is a bool, and needs a root with an event time (the label time
    every as-known join compares with)."""
    if not isinstance(value, bool):
        raise InvalidArgumentError(
            f"feature view '{name}': as_known must be True or False. Got {value!r} instead."
        )
    root = query.left_feature_group
    if value and not root.event_time:
        raise InvalidArgumentError(
            f"feature view '{name}': as_known=True needs an event_time on the root group "
            f"'{root.name}' (a joined row is matched only if it was known at the label's "
            "event time), and it has none. Drop as_known or use a root with an event_time."
        )


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)
