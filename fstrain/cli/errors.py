"""The one way every ``fstrain`` command reports a user error: one line on stderr, exit code 2.

A user error is a :class:`~fstrain.kernel.errors.FeatureStoreError` or an invalid configuration
(pydantic ``ValidationError``); anything else is a bug and keeps its traceback. ``--debug`` shows
the traceback of user errors too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn, TypeVar

import typer

EXIT_USER_ERROR = 2
T = TypeVar("T")


def fail(exc: BaseException) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with code 2."""
    from pydantic import ValidationError

    from fstrain.kernel.config import validation_message

    message = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(EXIT_USER_ERROR) from None


def guarded(func: Callable[[], T], *, debug: bool = False) -> T:
    """Run a command body; a user error becomes one line and exit code 2 (raised with ``debug``)."""
    from pydantic import ValidationError

    from fstrain.kernel.errors import FeatureStoreError

    try:
        return func()
    except (FeatureStoreError, ValidationError) as exc:
        if debug:
            raise
        fail(exc)


__all__ = ["EXIT_USER_ERROR", "fail", "guarded"]
