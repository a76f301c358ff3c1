"""fstrain's model registry: a local, Hopsworks-compatible (``hsml``) model registry.

``project.get_model_registry()`` returns a
:class:`~model_registry.local.registry.LocalModelRegistry`. Model files are stored in safe
formats (:mod:`fstrain.trainers.formats`: XGBoost JSON/UBJ, safetensors, skops), each file with a
sha256 in the version's ``manifest.json``, checked on download and load.

Names are exported lazily, so ``import model_registry`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from model_registry.api import ModelRegistry
    from model_registry.local.registry import LocalModelRegistry
    from model_registry.model import Model
    from model_registry.schema import ModelSchema, Schema

__all__ = ["LocalModelRegistry", "Model", "ModelRegistry", "ModelSchema", "Schema"]

_EXPORTS = {
    "LocalModelRegistry": "model_registry.local.registry",
    "Model": "model_registry.model",
    "ModelRegistry": "model_registry.api",
    "ModelSchema": "model_registry.schema",
    "Schema": "model_registry.schema",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'model_registry' has no attribute {name!r}")
