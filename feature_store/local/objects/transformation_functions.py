"""Saved transformation functions of the local store (``fs.create_transformation_function``).

Mirrors ``hsfs.transformation_function.TransformationFunction`` for a user's ``@udf``:
``fs.create_transformation_function(plus_one, version=1).save()`` stores the UDF (the SDK's own
JSON, source code included) in the catalog; ``fs.get_transformation_function("plus_one")``
returns it, and calling it with feature names binds it for ``create_feature_view``. The SDK's
built-ins are listed beside the saved functions and cannot be shadowed by a saved one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fstrain.kernel.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
)
from fstrain.kernel.timeutil import utc_now

if TYPE_CHECKING:  # pragma: no cover
    from feature_store.local.objects.hosts import StoreHost


class LocalTransformationFunction:
    """A user's ``@udf`` with a name and version in the local store.

    Attributes:
        hopsworks_udf: the SDK's ``HopsworksUdf``.
        version: its version (``None`` until saved when created without one).
    """

    def __init__(self, store: StoreHost, udf: Any, version: int | None) -> None:
        if type(udf).__name__ != "HopsworksUdf":
            raise InvalidArgumentError(
                "create_transformation_function takes a function decorated with "
                f"hopsworks' @udf. Got {type(udf).__name__} instead."
            )
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                    or version < 1):
            raise InvalidArgumentError(
                f"Transformation function '{udf.function_name}': version must be a positive "
                f"integer or None. Got {version!r} instead."
            )
        self._store = store
        self.hopsworks_udf = udf
        self.version = version

    @property
    def name(self) -> str:
        """The UDF's function name."""
        return str(self.hopsworks_udf.function_name)

    def __repr__(self) -> str:
        return f"Transformation Function : {self.hopsworks_udf!r} (version {self.version})"

    def __call__(self, *features: str) -> Any:
        """The UDF bound to ``features`` (pass it in ``transformation_functions=``)."""
        return self.hopsworks_udf(*features)

    def save(self) -> None:
        """Store the function; a version is taken when none was given.

        Raises:
            AlreadyExistsError: this name and version exist, or the name is a built-in's.
        """
        builtins = {tf.hopsworks_udf.function_name
                    for tf in self._store.builtin_transformation_functions()}
        if self.name in builtins:
            raise AlreadyExistsError(
                f"Transformation function '{self.name}' is a built-in; give your @udf another name."
            )
        existing = versions(self._store, self.name)
        version = self.version or (max(existing) + 1 if existing else 1)
        if version in existing:
            raise AlreadyExistsError(
                f"Transformation function '{self.name}' version {version} already exists "
                f"(versions: {existing}). Save a new version."
            )
        self._store.catalog.insert_transformation_function(
            self.name, version, self.hopsworks_udf.json(), utc_now().isoformat())
        self.version = version

    def delete(self) -> None:
        """Remove the saved function (views that use it keep their own copy)."""
        if not self._store.catalog.delete_transformation_function(self.name, self.version):
            raise NotFoundError(
                f"Transformation function '{self.name}' version {self.version} is not saved."
            )


def versions(store: StoreHost, name: str) -> list[int]:
    """Saved versions of ``name``, ascending."""
    return store.catalog.transformation_function_versions(name)


def saved(store: StoreHost) -> list[LocalTransformationFunction]:
    """Every saved function, by name and version."""
    return [LocalTransformationFunction(store, store.sdk_objects.load_udf(udf), version)
            for udf, version in store.catalog.transformation_functions()]


def load(store: StoreHost, name: str, version: int) -> LocalTransformationFunction | None:
    """The saved function ``name``/``version``, or ``None``."""
    udf = store.catalog.transformation_function(name, version)
    if udf is None:
        return None
    return LocalTransformationFunction(store, store.sdk_objects.load_udf(udf), version)
