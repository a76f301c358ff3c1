"""The pinned split files of a training-dataset version, checked before an engine reads them.

Engines that read files themselves (Spark) get the paths of a materialized version's split
files only after each file's bytes matched the sha256 recorded when the version was created —
the check the store's own reads make; a version without recorded file hashes has its split
contents re-hashed through ``fv.verify_training_dataset`` instead. A changed, missing or
damaged file raises :class:`IntegrityError` and nothing is trained.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fstrain.kernel.errors import ConfigError, IntegrityError
from model_registry.manifest import sha256_file

def verified_split_files(fv: Any, version: int, *, data_format: str = "parquet",
                         splits: tuple[str, ...] = ("train", "validation")) -> dict[str, Path]:
    """``{split: path}`` of a materialized version's files, each checked against its hash.

    Raises:
        ConfigError: the version is in memory, purged, in another format or lacks a split.
        IntegrityError: a file is missing or its bytes changed since creation.
    """
    td = fv.get_training_dataset(version)
    owner = f"training dataset v{version} of {fv.name} v{fv.version}"
    if td.type != "MATERIALIZED" or not td.location or td.state != "ok":
        raise ConfigError(
            f"{owner} is {td.type.lower()} ({td.state}): an engine that reads files needs a "
            "materialized version. Create one with `fstrain dataset <use case>` (or "
            f"recreate_training_dataset({version}) if it was purged)."
        )
    if td.data_format != data_format:
        raise ConfigError(
            f"{owner} is stored as {td.data_format}; this trainer reads {data_format} files. "
            f"Create a version with `fstrain dataset <use case> --data-format {data_format}`."
        )
    missing = [s for s in splits if s not in td.splits]
    if missing:
        raise ConfigError(
            f"{owner} has splits {list(td.splits)}, not {missing}: create a train/validation/"
            "test version (`fstrain dataset <use case>`, create_train_validation_test_split)."
        )
    paths = {s: Path(td.location) / f"{s}.{td.data_format}" for s in splits}
    if any(not td.splits[s].get("file_sha256") for s in splits):
        fv.verify_training_dataset(version)  # older versions: re-hash the split contents
        return paths
    for split, path in paths.items():
        if not path.is_file():
            raise IntegrityError(f"{owner}: file {path} is missing. Recreate the version.")
        if sha256_file(path) != td.splits[split]["file_sha256"]:
            raise IntegrityError(
                f"{owner}: split '{split}' no longer matches its recorded sha256 (the bytes of "
                f"{path} changed after creation). Recreate the version; do not edit its files."
            )
    return paths
