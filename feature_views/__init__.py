"""The shipped use cases, one package each: its feature view and its offline source together.

``feature_views/<use case>/view.py`` defines a :class:`UseCase`: how to build its feature view
from the feature groups written by the feature pipeline, and the defaults the later stages start
from (split, model, acceptance gates, bias slices). Definitions are plain Python, validated when
the view is created (labels, helper columns and prohibited tags are checked by the feature store).

``feature_views/<use case>/source.py`` loads its data offline (everything ships inside installed
packages): ``FEATURE_GROUPS`` (a tuple of :class:`~feature_views.source_spec.FeatureGroupSpec`)
and ``load(...) -> dict[str, DataFrame]`` (feature-group name → frame with exactly that group's
columns). :func:`get_use_case` and :func:`get_source` import a use case's modules lazily.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from fstrain.kernel.errors import NotFoundError, did_you_mean, listing

__all__ = ["USE_CASES", "UseCase", "get_source", "get_use_case"]

USE_CASES: tuple[str, ...] = ("flights", "adult", "mnist", "ccfraud", "instructions", "airquality")


@dataclass(frozen=True)
class UseCase:
    """A shipped use case: its feature view and the defaults of each pipeline stage."""

    name: str
    description: str
    feature_view_name: str
    feature_view_version: int
    build_feature_view: Callable[[Any], Any]  # fs -> FeatureView (get or create)
    split: dict[str, Any]  # keyword arguments of create_train_validation_test_split
    model: dict[str, Any]  # trainer configuration (fstrain.trainers.config.TrainConfig)
    gates: tuple[str, ...]  # acceptance gates of the model-validation pipeline
    slice_bands: dict[str, list[float]] = field(default_factory=dict)  # numeric helpers → bands
    # pairs of helper columns the bias tests also slice by together (e.g. sex×race)
    slice_intersections: tuple[tuple[str, str], ...] = ()
    # entity keys kept as training helper columns so group splits can use them
    # (`fstrain dataset <use case> --split group --group-column KEY`); never features, never slices
    group_keys: tuple[str, ...] = ()
    model_name: str = ""
    task: str = "classification"
    demo: dict[str, Any] = field(default_factory=dict)  # smaller settings for `fstrain demo`
    # a regression on a time series: the feature holding the last observed label before each
    # row, scored as the naive-forecast baseline (and the one `better_than_baseline` beats)
    naive_forecast: str | None = None

    @property
    def registry_model_name(self) -> str:
        return self.model_name or f"{self.name}_model"


def get_use_case(name: str) -> UseCase:
    """The :class:`UseCase` called ``name`` (one of :data:`USE_CASES`)."""
    if name not in USE_CASES:
        raise NotFoundError(
            f"use case '{name}' does not exist (use cases: {listing(USE_CASES)})."
            f"{did_you_mean(str(name), USE_CASES)}"
        )
    return importlib.import_module(f"feature_views.{name}.view").USE_CASE


def get_source(use_case: str) -> ModuleType:
    """The offline source module of ``use_case`` (``feature_views.<use case>.source``)."""
    if use_case not in USE_CASES:
        raise NotFoundError(
            f"Use case {use_case!r} has no offline source; available: {listing(USE_CASES)}."
            f"{did_you_mean(str(use_case), USE_CASES)}"
        )
    return importlib.import_module(f"feature_views.{use_case}.source")
