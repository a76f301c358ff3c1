"""The options every ``fstrain`` command shares, declared once for all its sub-apps."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fstrain.kernel.store_root import StoreLocation, locate_root, require_existing_store

# FSTRAIN_HOME is read by the kernel (not typer's envvar), so an error can say which of
# --root, FSTRAIN_HOME or the default chose the root
RootOpt = Annotated[Path | None, typer.Option(
    "--root", help="Store root (default $FSTRAIN_HOME, else ./.fstrain).")]
BackendOpt = Annotated[str, typer.Option("--backend", envvar="FSTRAIN_BACKEND",
                                         help="local (embedded store) or hopsworks.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
KeyOpt = Annotated[Path | None, typer.Option(
    "--key", help="Private key that signs (default $FSTRAIN_KEY); needed once the store has a "
    "trust list.")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")]
WINDOW_START_HELP = ("Window start, ISO-8601 (default $HOPS_START_TIME). Without --end the "
                     "window is open: every row from START on. Refused for a use case "
                     "without event time (adult).")
WINDOW_END_HELP = "Window end, exclusive (default $HOPS_END_TIME). Without --start: every row before END."
ForceOpt = Annotated[bool, typer.Option(
    "--force", help="Create anew even when nothing changed (by default a re-run on unchanged "
    "inputs reuses the newest version and says so).")]

__all__ = ["WINDOW_END_HELP", "WINDOW_START_HELP", "BackendOpt", "DebugOpt", "ForceOpt", "JsonOpt",
           "KeyOpt", "RootOpt", "existing_store", "store_location"]


def store_location(root: Path | None) -> StoreLocation:
    """Where the running command's store is and where that came from: ``--root``,
    ``FSTRAIN_HOME`` or the default ``./.fstrain``."""
    return locate_root(root)


def existing_store(root: Path | None) -> StoreLocation:
    """:func:`store_location`, refused (one line, nothing created) when it holds no store:
    every command but ``features``, ``run``, ``demo`` and ``keys new`` opens with this."""
    return require_existing_store(store_location(root))
