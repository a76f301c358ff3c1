"""The options every ``fstrain`` command shares, declared once for all its sub-apps."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

RootOpt = Annotated[Path | None, typer.Option("--root", envvar="FSTRAIN_HOME",
                                              help="Store root (default ./.fstrain).")]
BackendOpt = Annotated[str, typer.Option("--backend", envvar="FSTRAIN_BACKEND",
                                         help="local (embedded store) or hopsworks.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
KeyOpt = Annotated[Path | None, typer.Option(
    "--key", help="Private key that signs (default $FSTRAIN_KEY); needed once the store has a "
    "trust list.")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")]

__all__ = ["BackendOpt", "DebugOpt", "JsonOpt", "KeyOpt", "RootOpt"]
