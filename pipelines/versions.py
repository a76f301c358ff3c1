"""Version arguments shared by the stages: a number or ``latest`` (the newest version)."""

from __future__ import annotations

from typing import Any

from fstrain.kernel.errors import ConfigError, NotFoundError

LATEST = "latest"


def parse_version(value: Any, what: str = "version") -> int | str:
    """``value`` as a positive int, or ``"latest"``; anything else is a :class:`ConfigError`."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == LATEST:
            return LATEST
        if text.isdigit() and int(text) >= 1:
            return int(text)
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise ConfigError(f"{what} must be a positive integer or 'latest'. Got {value!r} instead.")


def resolve_training_dataset_version(fv: Any, version: Any) -> int:
    """The training-dataset version of ``fv`` meant by ``version`` (a number or ``latest``)."""
    parsed = parse_version(version, "training dataset version")
    if parsed != LATEST:
        return int(parsed)
    versions = [td.version for td in fv.get_training_datasets()]
    if not versions:
        raise NotFoundError(
            f"feature view '{fv.name}' v{fv.version} has no training dataset, so 'latest' names "
            f"none. Create one first: fstrain dataset <use case>."
        )
    return max(versions)
