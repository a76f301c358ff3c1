"""Where a project keeps its files on this machine: ``root``, else ``$FSTRAIN_HOME``, else ``./.fstrain``."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_ROOT_ENV = "FSTRAIN_HOME"
DEFAULT_ROOT = ".fstrain"


def resolve_root(root: str | os.PathLike[str] | None) -> Path:
    """Store root: ``root`` if given, else ``$FSTRAIN_HOME``, else ``./.fstrain`` (absolute)."""
    chosen = root if root is not None else os.environ.get(DEFAULT_ROOT_ENV) or DEFAULT_ROOT
    return Path(chosen).expanduser().resolve()
