"""Reading a training-dataset version's late-data exposure (backend-neutral).

The local backend records, with every version, per point-in-time-joined group how many of the
rows its join matched were committed after their label's time (``td.extra["late_data"]``, built
by :mod:`feature_store.local.query.late_data`). This module words those figures for ``fstrain td
show``, the scorecard's lineage and the web pages, and says which groups are above the share
``fstrain doctor`` flags as possible leakage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the share of a group's joined rows committed after their label time above which
#: ``fstrain doctor`` flags a version as possible leakage
DEFAULT_THRESHOLD = 0.01


def groups(extra: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The per-group records of a version's ``extra`` (empty when none were recorded)."""
    late = (extra or {}).get("late_data") or {}
    return [dict(g) for g in late.get("groups") or []]


def share(record: Mapping[str, Any]) -> float:
    """Late rows as a share of the group's joined (matched) rows."""
    matched = int(record.get("matched") or 0)
    return int(record.get("late") or 0) / matched if matched else 0.0


def _delay(seconds: Any) -> str:
    if seconds is None:
        return "-"
    s = float(seconds)
    for unit, size in (("d", 86_400.0), ("h", 3_600.0), ("min", 60.0)):
        if s >= size:
            return f"{s / size:.1f} {unit}"
    return f"{s:.0f} s"


def describe(record: Mapping[str, Any], *, named: bool = True) -> str:
    """One line: ``'cards:1': 3 of 120 joined rows (2.50%) committed after their label time,
    up to 4.0 h late`` (without the group's name unless ``named``); an as-known join says what
    it kept out."""
    name = f"'{record['group']}'" if named else ""
    if record.get("not_counted"):
        return f"{name + ': ' if named else ''}not counted: {record['not_counted']}"
    matched = int(record.get("matched") or 0)
    if record.get("as_known"):
        kept = int(record.get("kept_out") or 0)
        tail = (f"; a plain join would have let in {kept} row(s) committed after their label "
                f"time, up to {_delay(record.get('kept_out_max_delay_s'))} late" if kept else "")
        head = f"{name} (as known): " if named else "as known: "
        return f"{head}no joined row committed after its label time{tail}"
    late = int(record.get("late") or 0)
    head = f"{name}: " if named else ""
    if not late:
        return f"{head}none of {matched} joined rows committed after their label time"
    tail = ("; it brings only labels: a label's delay, not leakage"
            if record.get("labels_only") else "")
    return (f"{head}{late} of {matched} joined rows ({100 * share(record):.2f}%) committed "
            f"after their label time, up to {_delay(record.get('max_delay_s'))} late{tail}")


def lines(extra: Mapping[str, Any] | None) -> list[str]:
    """:func:`describe` of every group, or one line saying nothing was recorded."""
    found = groups(extra)
    if not found and "late_data" not in (extra or {}):
        return ["not recorded for this version"]
    return [describe(g) for g in found] or ["no point-in-time join"]


def over_threshold(extra: Mapping[str, Any] | None,
                   threshold: float = DEFAULT_THRESHOLD) -> list[dict[str, Any]]:
    """The groups whose late rows are more than ``threshold`` of their joined rows, but those
    that bring only labels (``labels_only``): a label confirmed after its row's time (a
    chargeback, a diagnosis) is what labels are, and no feature saw it."""
    return [g for g in groups(extra) if share(g) > threshold and not g.get("labels_only")]
