"""Where a project keeps its files on this machine: ``root``, else ``$FSTRAIN_HOME``, else ``./.fstrain``.

:func:`locate_root` says which folder that is and where the choice came from (``--root``,
``FSTRAIN_HOME`` or the default), so that an error can name both. Only the commands that make a
store (``fstrain features``, ``run``, ``demo``, ``keys new``) create the folder; every other
open goes through :func:`require_existing_store`, which refuses a folder that holds no store
and writes nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fstrain.kernel.errors import StoreNotFoundError

DEFAULT_ROOT_ENV = "FSTRAIN_HOME"
DEFAULT_ROOT = ".fstrain"
#: What a store root holds once anything was written to it (any one makes it a store).
STORE_PARTS: tuple[str, ...] = ("feature_store", "model_registry", "trust")
#: The origins of a store root, as errors name them.
FROM_OPTION, FROM_ENV, FROM_DEFAULT = "--root", DEFAULT_ROOT_ENV, "default"


@dataclass(frozen=True)
class StoreLocation:
    """A resolved store root (absolute) and where it came from: ``origin`` is ``--root`` (or
    another caller's name for an explicit root), ``FSTRAIN_HOME`` or ``default``. A path-like
    value, so it may be passed wherever a root is taken."""

    path: Path
    origin: str

    def __fspath__(self) -> str:
        return str(self.path)

    def describe(self) -> str:
        """``/abs/store (from --root)``, ``… (from FSTRAIN_HOME)`` or ``… (the default ./.fstrain:
        neither --root nor FSTRAIN_HOME is set)``."""
        if self.origin == FROM_DEFAULT:
            return (f"{self.path} (the default ./{DEFAULT_ROOT}: neither --root nor "
                    f"{DEFAULT_ROOT_ENV} is set)")
        return f"{self.path} (from {self.origin})"


def resolve_root(root: str | os.PathLike[str] | None) -> Path:
    """Store root: ``root`` if given, else ``$FSTRAIN_HOME``, else ``./.fstrain`` (absolute)."""
    return locate_root(root).path


def locate_root(root: str | os.PathLike[str] | None, *,
                given_as: str = FROM_OPTION) -> StoreLocation:
    """The store root and its origin: ``root`` (named ``given_as`` in errors), else
    ``$FSTRAIN_HOME``, else ``./.fstrain``. A :class:`StoreLocation` is returned as it is."""
    if isinstance(root, StoreLocation):
        return root
    if root is not None:
        chosen, origin = root, given_as
    elif os.environ.get(DEFAULT_ROOT_ENV):
        chosen, origin = os.environ[DEFAULT_ROOT_ENV], FROM_ENV
    else:
        chosen, origin = DEFAULT_ROOT, FROM_DEFAULT
    return StoreLocation(Path(chosen).expanduser().resolve(), origin)


def holds_store(path: Path) -> bool:
    """True when ``path`` is a folder holding a store (a feature store, a model registry or
    a trust list)."""
    return path.is_dir() and any((path / part).is_dir() for part in STORE_PARTS)


def require_existing_store(root: str | os.PathLike[str] | None) -> StoreLocation:
    """The location of ``root`` when it holds a store; else :class:`StoreNotFoundError`
    naming the folder, where the root came from and what to do. Creates nothing."""
    location = locate_root(root)
    path = location.path
    if holds_store(path):
        return location
    if not path.exists():
        what = "does not exist"
    elif not path.is_dir():
        what = "is a file, not a folder"
    else:
        what = f"holds no store (no {', '.join(p + '/' for p in STORE_PARTS)})"
    raise StoreNotFoundError(
        f"store root {location.describe()} {what}. Make a store there with `fstrain features "
        f"<use case>` (or `fstrain run`/`fstrain demo`), or point --root or {DEFAULT_ROOT_ENV} "
        "at an existing store."
    )


__all__ = ["DEFAULT_ROOT", "DEFAULT_ROOT_ENV", "STORE_PARTS", "StoreLocation", "holds_store",
           "locate_root", "require_existing_store", "resolve_root"]
