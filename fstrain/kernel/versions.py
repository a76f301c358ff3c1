"""Version arguments shared by the stages: a number or ``latest`` (the newest version)."""

from __future__ import annotations

from typing import Any

from fstrain.kernel.errors import ConfigError, NotFoundError

LATEST = "latest"
#: Training-dataset states ``latest`` skips: on Hopsworks a version whose materialization job
#: failed exists in the metadata but never got fstrain's record (state ``incomplete``).
UNFINISHED = ("incomplete", "failed")


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
    """The training-dataset version of ``fv`` meant by ``version`` (a number, or ``latest``: the
    newest version whose creation completed)."""
    parsed = parse_version(version, "training dataset version")
    if parsed != LATEST:
        return int(parsed)
    tds = fv.get_training_datasets()
    versions = [td.version for td in tds if getattr(td, "state", "ok") not in UNFINISHED]
    if not versions:
        unfinished = sorted(td.version for td in tds)
        raise NotFoundError(
            f"feature view '{fv.name}' v{fv.version} has no completed training dataset"
            f"{f' (versions {unfinished} never completed)' if unfinished else ''}, so 'latest' "
            "names none. Create one first: fstrain dataset <use case>."
        )
    return max(versions)
