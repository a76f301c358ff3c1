"""The local registry's storage boundary: OS and SQLite errors become a typed error.

A write of the registry (save, attachment, history, status, tag, delete) or a download that
meets a full disk, a file-size limit, an unwritable folder or an unreadable index raises a
:class:`~fstrain.kernel.errors.BackendError` naming the model version and what to do, with the
library's error chained. Every write cleans up after itself (see :mod:`.model_storage`), so the
registry reads back as it was before the call.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from fstrain.kernel.errors import BackendError, FeatureStoreError, NotFoundError
from fstrain.kernel.oserrors import advice

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def storage_boundary(label: str, action: str) -> Iterator[None]:
    """Translate ``OSError``/``sqlite3.Error`` raised while ``action`` on ``label``."""
    try:
        yield
    except FeatureStoreError:
        raise
    except FileNotFoundError as exc:  # a file of the model folder vanished while copied
        raise NotFoundError(
            f"{label}: {action} failed: '{exc.filename}' does not exist (removed while it was "
            "read?). The registry is left as it was before the call."
        ) from exc
    except (OSError, sqlite3.Error) as exc:
        hint = advice(exc) or "check the disk and the registry folder's permissions, then retry"
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise BackendError(
            f"{label}: {action} failed: {hint}. The registry is left as it was before the call "
            f"({type(exc).__name__}: {text})."
        ) from exc


def typed_storage_errors(action: str) -> Callable[[F], F]:
    """Decorate a storage method whose first argument is a ``ModelDraft`` or a ``ModelRecord``."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def wrapper(self: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
            version = getattr(target, "version", None)
            label = f"Model '{target.name}'" + ("" if version is None else f" version {version}")
            with storage_boundary(label, action):
                return method(self, target, *args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
