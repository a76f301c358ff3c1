"""What a feature view's training datasets are made from, as values.

:class:`ViewData` is the view's identity, its query frozen as a
:class:`~feature_store.local.query.query_spec.QuerySpec` (commits unresolved: each create resolves
them anew, each re-read pins them), and the roles of its columns (labels, the labels' fill
values, the model-dependent transformations). A
:class:`~feature_store.local.training_data.store.TrainingDataStore` is built from it, the catalog and
the store root, so training data never calls back into the view that owns it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from feature_store.local.query.query_spec import GroupSpec, QuerySpec


@dataclass(frozen=True)
class ViewData:
    """A feature view as its training datasets see it."""

    name: str
    version: int
    id: int | None
    query: QuerySpec
    labels: tuple[str, ...] = ()
    label_fill_values: Mapping[str, Any] = field(default_factory=dict)
    transformations: tuple[Any, ...] = ()
    #: the view was created with ``as_known=True`` (recorded with every version)
    as_known: bool = False
    #: (name, version) of the view's root when ``query`` is anchored on a spine in its place:
    #: extra filters on it are read on the spine
    replaced_root: tuple[str, int] | None = None

    @property
    def owner(self) -> str:
        """How error messages name the view."""
        return f"feature view '{self.name}' v{self.version}"

    @property
    def root(self) -> GroupSpec:
        """The view's root feature group."""
        return self.query.group
