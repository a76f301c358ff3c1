"""Text and table primitives shared by the scorecard, the model card and the report site:
numbers for a reader, HTML escaping, escaped HTML tables and Markdown tables."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from typing import Any


def fmt(value: Any) -> str:
    """Human-readable number for reports (``n/a`` for missing)."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        if value != 0 and abs(value) < 1e-3:
            return f"{value:.3g}"
        return f"{value:.4f}"
    return str(value)


def fmt_delta(value: Any) -> str:
    """Signed number for differences."""
    if value is None:
        return "n/a"
    return f"{float(value):+.4f}"


def esc(value: Any) -> str:
    """HTML-escape any value's text (quotes included)."""
    return html.escape(str(value), quote=True)


def html_table(headers: Iterable[str], rows: Iterable[Iterable[Any]], *,
               row_attrs: Iterable[str] | None = None, numeric: Iterable[int] = ()) -> str:
    """An escaped HTML table; ``row_attrs`` are trusted, pre-escaped ``<tr>`` attributes."""
    num = set(numeric)
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    attrs = list(row_attrs) if row_attrs is not None else None
    body = []
    for i, row in enumerate(rows):
        cells = "".join(
            f'<td class="num">{esc(c)}</td>' if j in num else f"<td>{esc(c)}</td>"
            for j, c in enumerate(row)
        )
        a = f" {attrs[i]}" if attrs else ""
        body.append(f"<tr{a}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def md_cell(value: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def md_table(headers: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    """A Markdown pipe table."""
    hs = [md_cell(h) for h in headers]
    lines = ["| " + " | ".join(hs) + " |", "|" + "|".join("---" for _ in hs) + "|"]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def with_interval(value: Any, interval: Any) -> str:
    """``0.1234 [0.1000, 0.1500]`` (the value alone without an interval)."""
    if value is None:
        return "n/a"
    if not interval:
        return fmt(value)
    return f"{fmt(value)} [{fmt(interval[0])}, {fmt(interval[1])}]"
