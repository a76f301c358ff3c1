"""The scheduled-run window contract shared by every stage (Hopsworks 5 jobs).

A run covers ``[start, end)``. Explicit arguments win; otherwise ``HOPS_START_TIME`` and
``HOPS_END_TIME`` from the environment (set by Hopsworks for each scheduled run) are used;
otherwise the run covers everything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fstrain.kernel.errors import InvalidArgumentError
from fstrain.kernel.timeutil import to_utc


@dataclass(frozen=True)
class Window:
    """A half-open time window; ``None`` bounds are open."""

    start: Any = None  # pandas.Timestamp (UTC) or None
    end: Any = None

    def __post_init__(self) -> None:
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise InvalidArgumentError(
                f"window start must be before its end ([start, end)). Got {self.start} and "
                f"{self.end} instead."
            )

    def describe(self) -> str:
        """``[start, end)``, with what an open bound means when only one bound is set."""
        start = self.start.isoformat() if self.start is not None else "-inf"
        end = self.end.isoformat() if self.end is not None else "+inf"
        text = f"[{start}, {end})"
        if self.start is not None and self.end is None:
            text += f" (open end: every row from {start} on)"
        elif self.start is None and self.end is not None:
            text += f" (open start: every row before {end})"
        return text


def scheduler_bounds(start: Any = None, end: Any = None, *,
                     environ: Mapping[str, str] | None = None) -> tuple[Any, Any]:
    """``(start, end)`` as given, or ``HOPS_START_TIME``/``HOPS_END_TIME`` when both are omitted.

    The values are returned as they are (strings from the environment are not parsed), so a
    caller can parse them with its own rule and error message.
    """
    env = os.environ if environ is None else environ
    if start in (None, "") and end in (None, ""):
        return env.get("HOPS_START_TIME") or None, env.get("HOPS_END_TIME") or None
    return start, end


def from_environment(start: Any = None, end: Any = None) -> bool:
    """Whether :func:`scheduler_bounds` takes the window from the environment (both omitted)."""
    return start in (None, "") and end in (None, "")


def resolve_window(start: Any = None, end: Any = None, *,
                   environ: Mapping[str, str] | None = None,
                   names: tuple[str, str] = ("start", "end")) -> Window:
    """The run window: arguments, else ``HOPS_START_TIME``/``HOPS_END_TIME``, else unbounded.

    A bound that cannot be read is refused naming where it came from: ``names`` for the
    arguments (e.g. ``("--start", "--end")``), the environment variable otherwise.
    """
    if from_environment(start, end):
        names = ("HOPS_START_TIME", "HOPS_END_TIME")
    start, end = scheduler_bounds(start, end, environ=environ)
    return Window(to_utc(start, what=names[0]), to_utc(end, what=names[1]))
