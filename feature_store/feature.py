"""Features and filter expressions (``fg.amount > 100``, ``&``, ``|``, ``isin``…).

A :class:`Feature` describes one column of a feature group. Comparing it with a value builds a
:class:`Filter`; filters combine with ``&`` and ``|`` into a :class:`Logic` tree. Filters are
rendered to SQL with bound parameters by the local engine, so values are never pasted into SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Feature:
    """One column of a feature group (mirrors ``hsfs.feature.Feature``)."""

    name: str
    type: str = "string"
    description: str = ""
    primary: bool = False
    partition: bool = False
    event_time: bool = False
    feature_group: Any = field(default=None, repr=False, compare=False)

    # -- filter construction (as in hsfs: fg.col > 3) ----------------------------------------
    def _filter(self, op: str, value: Any) -> Filter:
        return Filter(self, op, value)

    def __lt__(self, other: Any) -> Filter:
        return self._filter("<", other)

    def __le__(self, other: Any) -> Filter:
        return self._filter("<=", other)

    def __gt__(self, other: Any) -> Filter:
        return self._filter(">", other)

    def __ge__(self, other: Any) -> Filter:
        return self._filter(">=", other)

    def __eq__(self, other: Any) -> Filter:  # type: ignore[override]
        return self._filter("=", other)

    def __ne__(self, other: Any) -> Filter:  # type: ignore[override]
        return self._filter("!=", other)

    __hash__ = object.__hash__

    def isin(self, values: Iterable[Any]) -> Filter:
        """``feature IN (values)``."""
        return self._filter("IN", list(values))

    def like(self, pattern: str) -> Filter:
        """SQL ``LIKE`` pattern match."""
        return self._filter("LIKE", pattern)

    def contains(self, substring: str) -> Filter:
        """Substring match (``LIKE '%substring%'``)."""
        return self._filter("CONTAINS", substring)

    def is_null(self) -> Filter:
        """``feature IS NULL``."""
        return self._filter("IS NULL", None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "description": self.description,
            "primary": self.primary,
            "partition": self.partition,
            "event_time": self.event_time,
        }


@dataclass(eq=False)
class Filter:
    """``feature <op> value``."""

    feature: Feature
    op: str
    value: Any

    def __and__(self, other: Filter | Logic) -> Logic:
        return Logic("AND", self, other)

    def __or__(self, other: Filter | Logic) -> Logic:
        return Logic("OR", self, other)

    def features(self) -> list[Feature]:
        return [self.feature]


@dataclass(eq=False)
class Logic:
    """A boolean combination of filters."""

    op: str
    left: Filter | Logic
    right: Filter | Logic

    def __and__(self, other: Filter | Logic) -> Logic:
        return Logic("AND", self, other)

    def __or__(self, other: Filter | Logic) -> Logic:
        return Logic("OR", self, other)

    def features(self) -> list[Feature]:
        return self.left.features() + self.right.features()


FilterLike = Filter | Logic
