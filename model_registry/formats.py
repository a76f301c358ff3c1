"""The safe model file formats' former home: they live beside the trainers now, in
:mod:`fstrain.trainers.formats` (each flavour's save and load together). For one release this
module still hands out every name it had, each with a ``DeprecationWarning`` that says where it
went (CHANGELOG.md); import ``fstrain.trainers.formats`` instead.
"""

from __future__ import annotations

import warnings
from typing import Any

from fstrain.trainers import formats as _formats

__all__ = list(_formats.__all__)


def __getattr__(name: str) -> Any:
    if name in _formats.__all__:
        warnings.warn(f"model_registry.formats.{name} moved to fstrain.trainers.formats.{name} "
                      "(each flavour's save and load beside its trainer); this re-export goes "
                      "in the next release.", DeprecationWarning, stacklevel=2)
        return getattr(_formats, name)
    raise AttributeError(f"module 'model_registry.formats' has no attribute {name!r}")
