"""Response templates from the SDK repository's backend fixtures (vendored, Apache-2.0)."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@cache
def _load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}_fixtures.json").read_text())


def template(name: str, key: str = "get") -> Any:
    """A deep copy of ``<name>_fixtures.json[key]["response"]``."""
    return copy.deepcopy(_load(name)[key]["response"])


def envelope(name: str, items: list[Any], key: str = "get") -> dict[str, Any]:
    """A ``{count, items}`` list answer shaped like the fixture's list answer."""
    body = template(name, key)
    if not isinstance(body, dict) or "items" not in body:
        raise KeyError(f"fixture {name}[{key}] is not a count/items envelope")
    body["items"] = items
    body["count"] = len(items)
    return body
