"""Model-registry errors: subclasses of the one hierarchy in :mod:`fstrain.kernel.errors`.

Everything the registry raises on purpose derives from
:class:`fstrain.kernel.errors.FeatureStoreError`; the names below only narrow the common classes
so that callers can catch the registry-specific cases.
"""

from __future__ import annotations

from fstrain.kernel.errors import (
    AlreadyExistsError,
    FeatureStoreError,
    IntegrityError,
    InvalidArgumentError,
    InvalidNameError,
    ModelAlreadyExistsError,
    NotFoundError,
    UnsafeFormatError,
)

__all__ = [
    "AlreadyExistsError",
    "FeatureStoreError",
    "IntegrityError",
    "InvalidArgumentError",
    "InvalidNameError",
    "ModelAlreadyExistsError",
    "ModelNotFoundError",
    "ModelNotSavedError",
    "NotFoundError",
    "UnsafeFormatError",
    "VersionWarning",
]


class ModelNotFoundError(NotFoundError):
    """A model name or model version does not exist in the registry."""


class ModelNotSavedError(NotFoundError):
    """An operation needs a saved model version, but ``model.save(path)`` was not called yet."""


class VersionWarning(UserWarning):
    """A version was not given and a default was used (``mr.get_model(name)`` → version 1)."""
