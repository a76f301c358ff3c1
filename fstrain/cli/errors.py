"""The one way every ``fstrain`` command reports a user error: one line on stderr, exit code 2;
and the exit codes a scheduler reads from ``validate``, ``run`` and ``demo``.

A user error is a :class:`~fstrain.kernel.errors.FeatureStoreError` or an invalid configuration
(pydantic ``ValidationError``); anything else is a bug and keeps its traceback. ``--debug`` shows
the traceback of user errors too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn, TypeVar

import typer
from pydantic import ValidationError

from fstrain.kernel.config import validation_message
from fstrain.kernel.errors import FeatureStoreError

EXIT_USER_ERROR = 2
EXIT_VALIDATION_FAILED = 3  # fstrain validate (and run, demo, doctor): the model failed
EXIT_POLICY_DEVIATION = 4  # it passed only under a policy deviation
T = TypeVar("T")


def fail(exc: BaseException) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with code 2."""
    message = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(EXIT_USER_ERROR) from None


def guarded(func: Callable[[], T], *, debug: bool = False) -> T:
    """Run a command body; a user error becomes one line and exit code 2 (raised with ``debug``)."""
    try:
        return func()
    except (FeatureStoreError, ValidationError) as exc:
        if debug:
            raise
        fail(exc)


def exit_code(status: str) -> int:
    """``fstrain validate``'s exit code for a run's status (0 for an empty window)."""
    if status in ("passed", "empty window"):
        return 0
    if status.startswith("passed") and status.endswith("(policy deviation)"):
        return EXIT_POLICY_DEVIATION
    return EXIT_VALIDATION_FAILED


__all__ = ["EXIT_POLICY_DEVIATION", "EXIT_USER_ERROR", "EXIT_VALIDATION_FAILED", "exit_code", "fail",
           "guarded"]
