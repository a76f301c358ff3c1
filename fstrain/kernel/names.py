"""Naming rules shared by feature groups, feature views, features and tags.

Hopsworks lower-cases feature names and turns spaces into ``_``; fstrain does the same and refuses
anything else outside ``[a-z0-9_]`` (a name must start with a letter or ``_``, at most 63 chars).
"""

from __future__ import annotations

import re

from fstrain.kernel.errors import InvalidArgumentError, InvalidNameError

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def normalize_feature_name(raw: object, *, owner: str) -> str:
    """Lower-case a column name and replace spaces with ``_``; refuse what is still invalid."""
    if not isinstance(raw, str):
        raise InvalidNameError(
            f"{owner}: column names must be strings. Got {raw!r} ({type(raw).__name__}) instead."
        )
    name = raw.strip().lower().replace(" ", "_")
    if not _NAME.match(name):
        raise InvalidNameError(
            f"{owner}: column name {raw!r} is invalid: names must match [a-z_][a-z0-9_]* "
            "(at most 63 characters; upper case is lowered and spaces become '_'). Rename the column."
        )
    return name


def check_entity_name(name: object, kind: str) -> str:
    """Validate a feature group / feature view name (``[a-z0-9_]``, no normalisation)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidNameError(
            f"{kind} name must match [a-z_][a-z0-9_]* (lower case, at most 63 characters). "
            f"Got {name!r} instead."
        )
    return name


def check_version(version: object, kind: str, name: str) -> int:
    """Validate an explicit version number (a positive int)."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidArgumentError(
            f"{kind} '{name}': version must be a positive integer. Got {version!r} instead."
        )
    return version
