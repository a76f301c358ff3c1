"""Validation of everything user-supplied that ends up in a path or in the index.

Model names follow Hopsworks (``[A-Za-z0-9_]+``), so a model name can never contain a path
separator or ``..``. Attachment paths and tag names have their own, equally strict, rules: path
traversal out of a version folder is impossible by construction.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from pathlib import PurePath, PurePosixPath

from fstrain.kernel.errors import InvalidArgumentError, InvalidNameError
from model_registry.statuses import MODEL_STATUSES

MODEL_NAME_PATTERN = r"[A-Za-z0-9_]+"
_MODEL_NAME = re.compile(MODEL_NAME_PATTERN)
_MAX_NAME = 128
_TAG_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_PATH_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_MAX_DEPTH = 4

#: Files the registry writes itself at the top of every version folder.
MANIFEST_FILE = "manifest.json"
INPUT_EXAMPLE_FILE = "input_example.json"
MODEL_SCHEMA_FILE = "model_schema.json"
RESERVED_FILES = frozenset({MANIFEST_FILE, INPUT_EXAMPLE_FILE, MODEL_SCHEMA_FILE})

VALIDATION_STATUSES = ("pending", "passed", "failed")  # what set_validation_status accepts


def check_model_name(name: object) -> str:
    """Return ``name`` if it matches ``[A-Za-z0-9_]+`` (at most 128 characters), else raise."""
    if not isinstance(name, str) or not _MODEL_NAME.fullmatch(name) or len(name) > _MAX_NAME:
        raise InvalidNameError(
            f"Model name must match {MODEL_NAME_PATTERN} (letters, digits and '_', at most "
            f"{_MAX_NAME} characters, as in Hopsworks). Got {name!r} instead. Rename the model, "
            "e.g. 'fraud_xgboost'."
        )
    return name


def check_version(version: object, *, name: str) -> int:
    """Return ``version`` if it is a positive ``int`` (``bool`` excluded), else raise."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidArgumentError(
            f"Model '{name}': version must be a positive integer or None (next free version). "
            f"Got {version!r} instead."
        )
    return version


def check_tag_name(tag: object, *, owner: str) -> str:
    """Return ``tag`` if it matches ``[A-Za-z0-9_][A-Za-z0-9_.-]*`` (≤128 characters)."""
    if not isinstance(tag, str) or not _TAG_NAME.fullmatch(tag):
        raise InvalidNameError(
            f"{owner}: tag name must match [A-Za-z0-9_][A-Za-z0-9_.-]* (at most 128 characters, "
            f"no '/'). Got {tag!r} instead."
        )
    return tag


def check_attachment_path(path: object, *, owner: str) -> str:
    """Return a normalised POSIX relative path for an attachment, refusing any traversal.

    Every component must match ``[A-Za-z0-9_][A-Za-z0-9_.-]*`` (so ``..``, hidden files,
    absolute paths and backslashes are impossible), at most 4 levels deep, and the path may not
    name a file the registry writes itself (``manifest.json``, ``input_example.json``,
    ``model_schema.json``).
    """
    text = str(path) if isinstance(path, PurePath) else path
    parts = text.split("/") if isinstance(text, str) else None
    if (
        parts is None
        or not 1 <= len(parts) <= _MAX_DEPTH
        or not all(_PATH_PART.fullmatch(p) for p in parts)
    ):
        raise InvalidNameError(
            f"{owner}: attachment path must be relative, at most {_MAX_DEPTH} levels deep, with "
            "'/'-separated parts matching [A-Za-z0-9_][A-Za-z0-9_.-]* (no '..', no leading '/' "
            f"or '.'). Got {path!r} instead. Use e.g. 'scorecard.json' or 'images/roc.png'."
        )
    rel = str(PurePosixPath(*parts))
    if rel in RESERVED_FILES:
        raise InvalidArgumentError(
            f"{owner}: '{rel}' is written by the registry itself and cannot be an attachment. "
            "Choose another file name."
        )
    return rel


def check_metrics(metrics: object, *, name: str) -> dict[str, float]:
    """Validate ``metrics`` as ``dict[str, finite number]`` and return it with float values."""
    if metrics is None:
        return {}
    if not isinstance(metrics, Mapping):
        raise InvalidArgumentError(
            f"Model '{name}': metrics must be a dict of metric name to number. "
            f"Got {type(metrics).__name__} instead."
        )
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if not isinstance(key, str) or not key:
            raise InvalidArgumentError(
                f"Model '{name}': metric names must be non-empty strings. Got {key!r} instead."
            )
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InvalidArgumentError(
                f"Model '{name}': metric '{key}' must be a number. Got {value!r} "
                f"({type(value).__name__}) instead."
            )
        number = float(value)
        if not math.isfinite(number):
            raise InvalidArgumentError(
                f"Model '{name}': metric '{key}' must be finite. Got {value!r} instead. "
                "Leave an undefined metric out of the dict."
            )
        out[key] = number
    return out


def check_validation_status(status: object, *, owner: str, recorded: bool = False) -> str:
    """Return ``status`` if it is one of :data:`VALIDATION_STATUSES`; with ``recorded`` (a
    validation run's status, set through the history) also one marked ``(policy deviation)``."""
    allowed = MODEL_STATUSES if recorded else VALIDATION_STATUSES
    if status not in allowed:
        raise InvalidArgumentError(
            f"{owner}: validation status must be one of {', '.join(allowed)}. "
            f"Got {status!r} instead."
        )
    return str(status)
