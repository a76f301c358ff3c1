"""The storage boundary: DuckDB, delta-rs, SQLite and OS errors become fstrain errors.

Every read and write of the local backend runs inside :func:`storage_boundary`, so what a user
meets is a :class:`~fstrain.kernel.errors.FeatureStoreError` subclass naming the object (feature
group, query, catalog) and what failed, with the library's error chained:

- values or types a statement cannot use (a filter comparing a string column with a number,
  a value out of range) → :class:`InvalidArgumentError`;
- data files or logs that cannot be read (garbage Parquet, a torn Delta log) →
  :class:`IntegrityError`;
- a column type Delta Lake cannot store → :class:`SchemaMismatchError`;
- anything else from the libraries or the OS → :class:`BackendError`; a full disk (or a
  file-size limit) and an unwritable store say so and what to do
  (:func:`fstrain.kernel.oserrors.advice`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fstrain.kernel.errors import (
    BackendError,
    FeatureStoreError,
    IntegrityError,
    InvalidArgumentError,
    SchemaMismatchError,
)
from fstrain.kernel.oserrors import advice

_USER_DUCKDB = ("BinderException", "ConversionException", "OutOfRangeException",
                "TypeMismatchException", "ParserException")
_DAMAGED_DUCKDB = ("IOException", "InvalidInputException", "SerializationException")
_DAMAGED_DELTA = ("Json error", "Parquet error", "Failed to fetch metadata", "Invalid JSON",
                  "EOF while parsing", "Truncated record", "Corrupted", "No such file")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def translate(exc: BaseException, owner: str, action: str) -> FeatureStoreError | None:
    """The fstrain error for a library or OS error raised while ``action`` on ``owner``, or
    ``None`` when ``exc`` is not a storage error (it then propagates unchanged)."""
    if isinstance(exc, FeatureStoreError):
        return None
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    text = _first_line(exc)
    where = f"{owner}: {action} failed"
    hint = advice(exc)
    if hint is not None:  # a full disk or an unwritable store, whichever library noticed it
        return BackendError(f"{where}: {hint} ({name}: {text}).")
    if module.startswith(("duckdb", "_duckdb")):
        if name in _USER_DUCKDB:
            return InvalidArgumentError(
                f"{where}: {text}. Check that filter values and join keys have the columns' types."
            )
        if name in _DAMAGED_DUCKDB:
            return IntegrityError(f"{where}: a data file cannot be read ({text}). It was changed "
                                  "or damaged outside fstrain.")
        return BackendError(f"{where} in DuckDB: {text}")
    if module.startswith(("deltalake", "_internal")) or (name == "Exception" and "Delta" in text
                                                          or "Schema error" in text
                                                          or "External error" in text):
        if "Invalid data type for Delta Lake" in text or "Schema error" in text:
            return SchemaMismatchError(f"{where}: Delta Lake cannot store this data ({text}).")
        if any(marker in str(exc) for marker in _DAMAGED_DELTA):
            return IntegrityError(f"{where}: its Delta log or data files are damaged ({text}). "
                                  "Restore the table folder from a backup.")
        return BackendError(f"{where} in Delta Lake: {text}")
    if isinstance(exc, OverflowError):
        return InvalidArgumentError(f"{where}: a value is out of range ({text}). Integers must "
                                    "fit in 64 bits.")
    if isinstance(exc, OSError):
        return BackendError(f"{where}: {exc.strerror or text} ({name}"
                            f"{', ' + str(exc.filename) if exc.filename else ''}).")
    return None


@contextmanager
def storage_boundary(owner: str, action: str) -> Iterator[None]:
    """Translate storage errors raised inside the block (see :func:`translate`)."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - translated or re-raised unchanged
        translated = translate(exc, owner, action)
        if translated is None:
            raise
        raise translated from exc


def unreadable_split(owner: str, path: object, data_format: str, exc: BaseException) -> IntegrityError:
    """The error for a training-dataset split file that no longer parses as its format."""
    return IntegrityError(
        f"{owner}: file {path} cannot be read as {data_format} ({type(exc).__name__}: "
        f"{str(exc)[:200]}). It was changed or damaged; recreate the version."
    )


def changed_split(owner: str, path: object, split: str) -> IntegrityError:
    """The error for a training-dataset split file whose bytes are not the recorded ones."""
    return IntegrityError(
        f"{owner}: split '{split}' no longer matches its recorded sha256 (the bytes of "
        f"{path} changed after creation). Recreate the version; do not edit its files."
    )
