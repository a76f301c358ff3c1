"""The one exception hierarchy of fstrain.

Every error raised on purpose by the feature store, the model registry and the pipelines derives
from :class:`FeatureStoreError`. Messages name the object (feature group, feature view, training
dataset, model), the column and the offending value, and say what to do about it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "AlreadyExistsError",
    "BackendError",
    "CommitConflictError",
    "ConfigError",
    "DataValidationError",
    "FeatureStoreError",
    "IntegrityError",
    "InvalidArgumentError",
    "InvalidNameError",
    "ModelAlreadyExistsError",
    "NotFoundError",
    "UnknownFeatureError",
    "SchemaMismatchError",
    "StoreNotFoundError",
    "UnauthorizedError",
    "UnsafeFormatError",
    "VerificationError",
    "closest",
    "did_you_mean",
    "listing",
    "missing_version",
]


class FeatureStoreError(Exception):
    """Root of every error fstrain raises on purpose."""


class NotFoundError(FeatureStoreError, LookupError):
    """An object (feature group, feature view, training dataset, model, version) does not exist."""


class StoreNotFoundError(NotFoundError):
    """A store root that holds no store (missing, empty or a file) was opened to read or to
    add to; only the commands that make a store create one."""


class UnknownFeatureError(NotFoundError, AttributeError):
    """``fg.some_name`` names no feature of the group. Also an ``AttributeError``, so
    ``hasattr``/``getattr(..., default)`` keep working."""


class AlreadyExistsError(FeatureStoreError):
    """An object or version that must be new already exists."""


class InvalidNameError(FeatureStoreError, ValueError):
    """A name does not follow the naming rules."""


class InvalidArgumentError(FeatureStoreError, ValueError):
    """An argument has a value outside what the call accepts."""


class SchemaMismatchError(FeatureStoreError, ValueError):
    """Data does not match the schema of the object it is written to."""


class DataValidationError(FeatureStoreError):
    """Data failed a Great Expectations suite whose ingestion policy is STRICT.

    ``report`` holds the failed :class:`~feature_store.core.expectations.ValidationReport`.
    """

    def __init__(self, message: str, report: object | None = None) -> None:
        super().__init__(message)
        self.report = report


class CommitConflictError(FeatureStoreError):
    """A concurrent writer committed first and retries were exhausted; nothing was written."""


class IntegrityError(FeatureStoreError):
    """Stored content does not match its recorded hash (tampered, missing or extra file)."""


class HistoryRemovedError(IntegrityError):
    """A table's older versions are gone: Delta's log cleanup removed their commit files (a
    table written before fstrain kept its log)."""


class VerificationError(IntegrityError):
    """A signed record, its chain, a file it covers or the trust list does not verify.

    ``problems`` holds one line per broken item (naming the file and what is wrong).
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [])


class UnauthorizedError(FeatureStoreError, PermissionError):
    """An action is refused for who asks: an unsigned or unenrolled action in a store with a
    trust list, a revoked key, a role that may not act, or the four-eyes rule."""


class UnsafeFormatError(FeatureStoreError):
    """Loading would execute untrusted code (pickle) and was not explicitly allowed."""


class ConfigError(FeatureStoreError, ValueError):
    """A pipeline or backend configuration is invalid."""


class BackendError(FeatureStoreError):
    """A backend (Hopsworks, Delta Lake, DuckDB) failed; the original error is chained."""


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """Return a `` Did you mean 'x'?`` suffix for the closest candidate, or an empty string."""
    close = closest(name, candidates)
    return f" Did you mean '{close[0]}'?" if close else ""


def _token_order(text: str) -> str:
    """``text``'s ``_``-separated words, sorted: ``validation_auc_roc`` and
    ``validation_roc_auc`` read the same."""
    return "_".join(sorted(text.lower().split("_")))


def closest(name: str, candidates: Iterable[str], *, n: int = 1,
            cutoff: float = 0.6) -> list[str]:
    """The ``n`` candidates closest to ``name`` (at least ``cutoff`` similar), closest first.

    Similarity is :mod:`difflib`'s ratio of the spellings, or of their words in sorted order
    when that is higher, so words in another order (``auc_roc`` for ``roc_auc``) rank first;
    ties keep the plain spelling's ratio, then the candidates' order."""
    scored = []
    for index, candidate in enumerate(dict.fromkeys(str(c) for c in candidates)):
        plain = difflib.SequenceMatcher(None, candidate, name).ratio()
        words = difflib.SequenceMatcher(None, _token_order(candidate), _token_order(name)).ratio()
        score = max(plain, words)
        if score >= cutoff:
            scored.append((-score, -plain, index, candidate))
    return [candidate for *_, candidate in sorted(scored)[:n]]


def missing_version(kind: str, name: str, version: object, versions: list[int],
                    names: list[str]) -> NotFoundError:
    """The error for an unknown ``kind`` name/version, listing what exists."""
    if versions:
        return NotFoundError(
            f"{kind} '{name}' has no version {version} (versions: {listing(versions)})."
        )
    return NotFoundError(
        f"{kind} '{name}' does not exist ({kind}s: {listing(names)}).{did_you_mean(name, names)}"
    )


def listing(items: Iterable[object]) -> str:
    """Render existing names/versions for an error message (``none`` when empty)."""
    values = [str(i) for i in items]
    return ", ".join(values) if values else "none"


class ModelAlreadyExistsError(AlreadyExistsError):
    """A model version given explicitly already exists in the registry."""
