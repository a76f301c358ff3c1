"""Tags on catalog entities (feature groups, feature views): one implementation for both."""

from __future__ import annotations

from typing import Any

from fstrain.kernel.errors import NotFoundError
from fstrain.kernel.names import check_entity_name


class TaggedEntity:
    """``add_tag``/``get_tag``/``get_tags``/``delete_tag`` backed by the catalog's tag table.

    Subclasses set ``_TAG_KIND`` (the catalog's entity type) and provide ``_store``, ``owner``
    and ``require_saved()``.
    """

    _TAG_KIND = ""
    _store: Any

    @property
    def owner(self) -> str:  # pragma: no cover - provided by subclasses
        """How error messages name the entity."""
        raise NotImplementedError

    def require_saved(self) -> int:  # pragma: no cover - provided by subclasses
        raise NotImplementedError

    def add_tag(self, name: str, value: Any) -> None:
        """Attach a tag (any JSON value), e.g. ``add_tag("pii", True)``."""
        self._store.catalog.set_tag(
            self._TAG_KIND, self.require_saved(), "", check_entity_name(name, "tag"), value
        )

    def get_tag(self, name: str) -> Any:
        """The value of one tag (raises :class:`NotFoundError` if absent)."""
        tags = self.get_tags()
        if name not in tags:
            raise NotFoundError(f"{self.owner} has no tag '{name}' (tags: {sorted(tags)}).")
        return tags[name]

    def get_tags(self) -> dict[str, Any]:
        """All tags of the entity."""
        return self._store.catalog.get_tags(self._TAG_KIND, self.require_saved())

    def delete_tag(self, name: str) -> None:
        """Remove one tag."""
        if not self._store.catalog.delete_tag(self._TAG_KIND, self.require_saved(), "", name):
            raise NotFoundError(f"{self.owner} has no tag '{name}'.")
