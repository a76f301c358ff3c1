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
    did_you_mean,
    listing,
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
    "UnknownMetricError",
    "UnsafeFormatError",
    "VersionWarning",
    "unknown_metric",
]


class ModelNotFoundError(NotFoundError):
    """A model name or model version does not exist in the registry."""


class ModelNotSavedError(NotFoundError):
    """An operation needs a saved model version, but ``model.save(path)`` was not called yet."""


class UnknownMetricError(NotFoundError):
    """``get_best_model`` was asked for a metric that no version of the model records (a typo,
    or a metric the registry does not keep, such as test metrics)."""


def unknown_metric(name: str, metric: str, key: str, recorded: list[str]) -> UnknownMetricError:
    """The error for ``get_best_model(name, metric)`` when no version records ``key`` (the
    registered key ``metric`` resolves to) nor ``metric`` itself, listing what is recorded."""
    looked = f"'{key}'" if key == metric else f"'{key}' or '{metric}'"
    hint = did_you_mean(key, recorded) or did_you_mean(metric, recorded)
    return UnknownMetricError(
        f"get_best_model: no version of model '{name}' records metric '{metric}' (looked for "
        f"{looked}; recorded metrics: {listing(recorded)}).{hint} A name without a split means "
        "its validation value (roc_auc → validation_roc_auc); test metrics live in the "
        "validation scorecards, not in the registry's metrics."
    )


class VersionWarning(UserWarning):
    """A version was not given and a default was used (``mr.get_model(name)`` → version 1)."""
