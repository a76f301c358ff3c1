"""fstrain: feature-store-backed training pipelines.

>>> import fstrain
>>> project = fstrain.login(root="/tmp/fs")      # embedded Delta Lake + DuckDB store
>>> fs = project.get_feature_store()
>>> mr = project.get_model_registry()

:func:`login` is the composition root (:mod:`fstrain.project`): the only place that picks a
backend. :mod:`fstrain.kernel` holds what every layer shares (errors, time, canonical JSON, names,
the scheduler window). Heavy libraries load lazily, so ``import fstrain`` stays fast.
"""

from __future__ import annotations

from fstrain.kernel.errors import FeatureStoreError
from fstrain.project import Project, login

__all__ = ["FeatureStoreError", "Project", "login"]
