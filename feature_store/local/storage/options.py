"""Option dictionaries of the Hopsworks API (``write_options``, ``read_options``) on the local
backend: a key is either honoured or refused by name, never silently dropped.

Hopsworks passes these dictionaries to its engines (Spark, Hive, Arrow Flight, Kafka), so most
of their keys have no meaning for an embedded store whose every write is one synchronous Delta
commit and whose every read runs in DuckDB over the Delta files. A key the local backend
fulfils by construction (``wait_for_job``: every write has finished when the call returns) is
accepted; any other key raises :class:`InvalidArgumentError` naming it and what is understood.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fstrain.kernel.errors import InvalidArgumentError, listing

#: write_options keys every local write honours by construction
SYNCHRONOUS = {"wait_for_job": "every local write has finished when the call returns"}


def check_options(owner: str, option: str, values: Mapping[str, Any] | None,
                  understood: Mapping[str, str]) -> dict[str, Any]:
    """``values`` as a dict, or an error naming each key outside ``understood``."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise InvalidArgumentError(f"{owner}: {option} must be a dict. Got {values!r} instead.")
    unknown = sorted(str(k) for k in values if k not in understood)
    if unknown:
        raise InvalidArgumentError(
            f"{owner}: {option} key(s) {unknown} have no meaning on the local backend (writes "
            "are synchronous Delta commits, reads run in DuckDB) and would be ignored. Keys it "
            f"understands: {listing(sorted(understood))}. Remove the others."
        )
    return dict(values)


def check_write_options(owner: str, values: Mapping[str, Any] | None) -> dict[str, Any]:
    """``write_options`` of an insert or a delete: ``wait_for_job`` (honoured by construction)
    and ``start_offline_materialization=True`` (local data goes straight to the offline table;
    ``False``, keeping it out of the offline store, cannot be honoured and is refused)."""
    understood = {**SYNCHRONOUS,
                  "start_offline_materialization": "data goes straight to the offline table"}
    options = check_options(owner, "write_options", values, understood)
    if options.get("start_offline_materialization", True) is not True:
        raise InvalidArgumentError(
            f"{owner}: write_options['start_offline_materialization'] = "
            f"{options['start_offline_materialization']!r} cannot be honoured: a local insert "
            "writes the offline table directly. Remove the option."
        )
    return options


__all__ = ["SYNCHRONOUS", "check_options", "check_write_options"]
