"""The one ``fstrain`` invocation running: its shared options, its project, its output and its
progress on stderr.

Each command makes its own :class:`Options` (:func:`set_options`), so two invocations in one
process (a job's chained stages, tests) never see each other's. :func:`step` shows a spinner
while a long step runs, :func:`stages` a progress bar over a multi-stage command, and
:func:`progress` one line per finished stage; all three are silent in ``--json`` mode.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

import feature_store
from fstrain.cli.errors import guarded
from fstrain.cli.options import store_location
from fstrain.kernel.errors import ConfigError


@dataclass
class Options:
    """The options every command takes, for the one invocation running: each command makes its
    own (:func:`set_options`)."""

    root: Path | None = None
    backend: str = "local"
    as_json: bool = False
    debug: bool = False
    progress: Any = None  # a rich Progress while a multi-stage command runs
    task: Any = None


_INVOCATION: ContextVar[Options] = ContextVar("fstrain_cli_invocation")


def options() -> Options:
    """This invocation's :class:`Options` (defaults outside a command)."""
    return _INVOCATION.get(None) or Options()


def console() -> Any:
    """A rich console on stderr (so --json output on stdout stays clean)."""
    return Console(stderr=True)


def set_options(root: Path | None, backend: str, as_json: bool, debug: bool) -> None:
    """Start this invocation's :class:`Options`."""
    _INVOCATION.set(Options(root=root, backend=backend, as_json=as_json, debug=debug))


@contextmanager
def step(title: str) -> Any:
    """A spinner on stderr while a long step runs (silent in --json mode); inside a
    multi-stage command the progress bar's description names the step instead."""
    if options().as_json:
        yield
        return
    current = options()
    if current.progress is not None:
        current.progress.update(current.task, description=title)
        yield
        return
    with console().status(f"[bold]{title}[/bold]…"):
        yield


@contextmanager
def stages(total: int) -> Any:
    """A progress bar over the stages of ``run``/``demo`` (stderr; silent in --json mode)."""
    if options().as_json:
        yield
        return

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               MofNCompleteColumn(), TextColumn("stages"), TimeElapsedColumn())
    with Progress(*columns, console=console(), transient=True) as bar:
        current = options()
        current.progress, current.task = bar, bar.add_task("starting", total=total)
        try:
            yield
        finally:
            current.progress = current.task = None


def progress(line: str) -> None:
    """One line per finished stage (stderr, so --json output stays clean)."""
    if options().as_json:
        return
    current = options()
    if current.progress is not None:
        current.progress.console.print(line, highlight=False, soft_wrap=True)
        current.progress.advance(current.task)
    else:
        console().print(line, highlight=False, soft_wrap=True)


def project(*, create: bool = False) -> Any:
    """The invocation's project; only the commands that make a store pass ``create=True``
    (every other one refuses a root that holds no store, creating nothing)."""
    current = options()
    if current.backend != "local":
        return feature_store.login(backend=current.backend)
    location = store_location(current.root)
    try:
        return feature_store.login(backend="local", root=location, create=create)
    except OSError as exc:  # FSTRAIN_HOME/--root is a file, read-only, or not a real folder
        raise ConfigError(
            f"store root {location.describe()} cannot be used ({exc.__class__.__name__}: "
            f"{exc.strerror or exc}). Point --root or FSTRAIN_HOME at a writable folder."
        ) from exc


def guard(func: Callable[[], Any]) -> Any:
    """Run a command body; user errors become one line on stderr and exit code 2."""
    return guarded(func, debug=options().debug)


def emit(payload: dict[str, Any], human: str) -> None:
    """Print a command's result: ``payload`` as JSON with ``--json``, else ``human``."""
    if options().as_json:
        typer.echo(json.dumps(payload, indent=2, default=str))
    else:
        typer.echo(human)


def require_key_file(key: Path | None) -> None:
    """``--key`` (which overrides ``$FSTRAIN_KEY``) must name an existing file; checked before
    any work."""
    if key is not None and not key.expanduser().is_file():
        raise ConfigError(f"--key {key}: no such file. Point --key at your enrolled OpenSSH "
                          "private key (or leave it out to use $FSTRAIN_KEY).")


__all__ = ["Options", "console", "emit", "guard", "options", "progress", "project",
           "require_key_file", "set_options", "stages", "step"]
