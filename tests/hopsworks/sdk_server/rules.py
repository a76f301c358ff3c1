"""Server rules the SDK relies on, checked the way the Hopsworks backend checks them.

* **Tags** (:func:`check_tag`): a tag name must have a schema on the cluster (an admin creates
  it); the value must validate against that schema. Values arrive as JSON text.
* **Joins** (:func:`join_keys`): a join without ``on``/``left_on``/``right_on`` uses the
  primary-key names both groups share; none shared is HTTP 400, errorCode 270096.
* **Split bounds** (:func:`split_bound_ms`): training-dataset split and event-time bounds are
  epoch milliseconds (the SDK converts what the user passes); anything else is refused.
"""

from __future__ import annotations

import json
from typing import Any

from sdk_server.errors import (
    ILLEGAL_ARGUMENT,
    ILLEGAL_SPLIT,
    JOIN_NO_COMMON_PRIMARY_KEY,
    TAG_SCHEMA_NOT_FOUND,
    TAG_VALUE_INVALID,
    HttpError,
    bad_request,
)

_JSON_TYPES = {"object": dict, "string": str, "boolean": bool, "array": list,
               "number": (int, float), "integer": int}


def check_tag(schemas: dict[str, dict[str, Any]], name: str, raw_value: Any) -> Any:
    """The tag value, decoded, if ``name`` has a schema and the value validates against it."""
    schema = schemas.get(name)
    if schema is None:
        raise HttpError(400, TAG_SCHEMA_NOT_FOUND, f"Tag schema '{name}' was not found",
                        f"No tag schema named {name}. An administrator must create it first.")
    value = raw_value
    if isinstance(raw_value, str):
        try:
            value = json.loads(raw_value)
        except json.JSONDecodeError:
            value = raw_value
    if schema.get("type") == "string" and not isinstance(value, str):
        value = raw_value if isinstance(raw_value, str) else value
    expected = _JSON_TYPES.get(str(schema.get("type")), object)
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise bad_request(TAG_VALUE_INVALID, f"Tag value does not match schema '{name}'",
                          f"tag {name}: {json.dumps(value)} is not of type {schema['type']}")
    return value


def _primary_keys(fg: dict[str, Any]) -> list[str]:
    return [f["name"] for f in fg.get("features", []) if f.get("primary")]


def join_keys(left_fgs: list[dict[str, Any]], right_fg: dict[str, Any],
              join: dict[str, Any]) -> tuple[list[str], list[str]]:
    """``(left_on, right_on)`` of one join, by the server's rule (see module docstring).

    ``left_fgs`` are the groups of the left query (root first); without explicit keys the
    right group's primary-key names are looked up among the root group's primary keys.
    """
    on, left_on, right_on = (list(join.get(k) or []) for k in ("on", "leftOn", "rightOn"))
    if on:
        return [f["name"] if isinstance(f, dict) else f for f in on], \
            [f["name"] if isinstance(f, dict) else f for f in on]
    if left_on or right_on:
        left = [f["name"] if isinstance(f, dict) else f for f in left_on]
        right = [f["name"] if isinstance(f, dict) else f for f in right_on]
        if len(left) != len(right) or not left:
            raise bad_request(ILLEGAL_ARGUMENT, "leftOn and rightOn must have the same length")
        return left, right
    left_fg = left_fgs[0]
    shared = [k for k in _primary_keys(left_fg) if k in set(_primary_keys(right_fg))]
    if not shared:
        raise bad_request(
            JOIN_NO_COMMON_PRIMARY_KEY,
            "Could not find any common primary key between the feature groups to join",
            f"Feature groups {left_fg['name']} and {right_fg['name']} have no primary key in "
            "common; provide the join keys explicitly (on, or left_on and right_on).",
        )
    return shared, shared


def split_bound_ms(name: str, value: Any) -> int | None:
    """An epoch-millisecond bound, or None if absent; refuses anything else."""
    if value in (None, ""):
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(ILLEGAL_SPLIT, f"Illegal value for {name}: {value!r}",
                          f"{name} must be a timestamp in epoch milliseconds")
    return value
