"""``spine=`` of a feature view's reads: the spine a caller passes, resolved and checked.

``fv.get_batch_data(spine=...)`` and the training-data calls take a spine group or a dataframe,
as the Hopsworks SDK does:

- a **spine group** takes the place of the view's root (its columns must include what the view
  reads from the root: the selected features, the join keys, the root's primary key and event
  time);
- a **dataframe**, for a view created over a spine group, becomes that group's rows (checked
  against its recorded columns); for a view whose root is a feature group, it is a spine with the
  root's primary key and event time (Hopsworks silently ignores a dataframe there; fstrain uses
  it: the rows are the ones features are fetched for);
- **none**, for a view created over a spine group, is refused: its rows are never stored, so
  there is nothing to read (as the SDK refuses it).

The result is the query with the spine as its root (:func:`~feature_store.local.query.spine_root.with_root`,
checked before anything runs) and what a training-dataset version records of the spine.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from feature_store.local.objects.spine_group import SpineGroup
from feature_store.local.query.query_spec import Column, GroupSpec, QuerySpec
from feature_store.local.query.spine_root import spine_record, with_root
from fstrain.kernel.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from feature_store.local.objects.hosts import QueryGroup, StoreHost


def resolve_spine(owner: str, store: StoreHost, root: QueryGroup, spine: Any) -> SpineGroup | None:
    """The spine group a read is anchored on (None: the view's own root rows)."""
    root_is_spine = isinstance(root, SpineGroup)
    if spine is None:
        if root_is_spine:
            raise InvalidArgumentError(
                f"{owner} was created over {root.owner}, whose rows are not stored: pass "
                f"spine= (a dataframe with columns {[f.name for f in root.features]}, or the "
                "spine group with its dataframe set)."
            )
        return None
    if isinstance(spine, SpineGroup):
        if spine.dataframe is None:
            raise InvalidArgumentError(
                f"{owner}: {spine.owner} passed as spine= has no dataframe. Set "
                "spine_group.dataframe = df first, or pass the dataframe itself."
            )
        return spine
    if hasattr(spine, "select_all") or hasattr(spine, "read"):
        raise InvalidArgumentError(
            f"{owner}: spine= takes a spine group (fs.get_or_create_spine_group(...)) or a "
            f"dataframe. Got {type(spine).__name__} instead."
        )
    if root_is_spine and _has_columns(spine, [f.name for f in root.features]):
        group = store.spine_group_of(root.name, root.version)
        group.dataframe = spine  # conformed to the recorded columns
        return group
    if root_is_spine:  # a subset of its columns (batch data needs no labels): checked by use
        return SpineGroup.from_rows(store, root.name, root.version,
                                    primary_key=list(root.primary_key),
                                    event_time=root.event_time, dataframe=spine)
    return SpineGroup.from_rows(store, f"{root.name}_spine", root.version,
                                primary_key=list(root.primary_key), event_time=root.event_time,
                                dataframe=spine)


def _has_columns(data: Any, names: list[str]) -> bool:
    """Whether a dataframe (or Arrow table) has every column of ``names`` (case as stored)."""
    columns = getattr(data, "columns", None)
    if columns is None:
        columns = getattr(data, "column_names", [])
    present = {str(c).lower() for c in columns}
    return all(n in present for n in names)


def anchored(query: QuerySpec, spine: SpineGroup, optional: frozenset[str] = frozenset(),
             ) -> tuple[QuerySpec, dict[str, Any]]:
    """``query`` rooted at ``spine`` (checked first: see :func:`with_root`; only then are the
    spine's rows stored, content-addressed), and the spine's record for a training-dataset
    version. Root columns in ``optional`` (a batch read's labels and training helpers) are
    dropped from the query when the spine has none of that name."""
    group = GroupSpec(spine.name, spine.version, tuple(spine.primary_key), spine.event_time, (),
                      tuple(Column.of(f) for f in spine.features), "")
    names = {c.name for c in group.columns}
    query = dataclasses.replace(query, features=tuple(
        f for f in query.features if f in names or f not in optional))
    checked = with_root(query, group)
    group = dataclasses.replace(group, table_path=str(spine.table_path))
    return (dataclasses.replace(checked, group=group),
            spine_record(group, spine.content_hash, spine.row_count))
