"""What a failed write of the file system means for a user, and what to do about it.

The storage layers (Delta Lake, Parquet, SQLite, plain files) report the same few conditions in
their own words: ``ENOSPC``/``EFBIG``/``EDQUOT`` as ``File too large (os error 27)``, ``database
or disk is full`` or SQLite's ``disk I/O error``; ``EACCES``/``EROFS`` as ``Permission denied``
or ``attempt to write a readonly database``. :func:`advice` recognises them in an exception (or
the exceptions it was raised from) so every boundary can say the same thing: the disk is full,
or the store is not writable, and how to go on.
"""

from __future__ import annotations

import errno

SPACE = "space"
ACCESS = "access"

_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
_ACCESS_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
_SPACE_TEXT = ("no space left", "file too large", "disk quota", "database or disk is full",
               "os error 28)", "os error 27)", "os error 122)")
_ACCESS_TEXT = ("permission denied", "read-only file system", "readonly database",
                "os error 13)", "os error 30)")

_ADVICE = {
    SPACE: "the disk is full or a file-size limit or quota was hit; free space and retry",
    ACCESS: "the store is not writable (permissions or a read-only file system); point --root "
            "or FSTRAIN_HOME at a writable folder",
}


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def cause_of(exc: BaseException) -> str | None:
    """:data:`SPACE`, :data:`ACCESS` or ``None`` for ``exc`` and the errors it came from."""
    for err in _chain(exc):
        number = getattr(err, "errno", None)
        if number in _SPACE_ERRNOS:
            return SPACE
        if number in _ACCESS_ERRNOS:
            return ACCESS
        text = str(err).lower()
        if any(marker in text for marker in _SPACE_TEXT):
            return SPACE
        if any(marker in text for marker in _ACCESS_TEXT):
            return ACCESS
    return None


def advice(exc: BaseException) -> str | None:
    """What to do about ``exc`` when it is a full disk or an unwritable store, else ``None``."""
    kind = cause_of(exc)
    return None if kind is None else _ADVICE[kind]


__all__ = ["ACCESS", "SPACE", "advice", "cause_of"]
