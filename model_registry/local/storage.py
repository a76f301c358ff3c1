"""Files of a local registry: ``<root>/<name>/<version>/`` plus a scratch area ``<root>/.tmp``.

Everything is written into ``.tmp`` first and moved into place with a rename (same file
system), so a version folder only ever appears complete. Removing a folder renames it into
``.tmp`` first, then deletes it, so a half-deleted folder is never visible under its name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

from fstrain.kernel.errors import InvalidArgumentError
from fstrain.kernel.scratch import clean_stale, scratch_name
from model_registry.naming import RESERVED_FILES

TMP_DIR = ".tmp"
_TEMP_PREFIXES = ("stage", "trash", "attachment")


class VersionStore:
    """File-system side of a local model registry rooted at ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tmp = root / TMP_DIR

    def version_dir(self, name: str, version: int) -> Path:
        """``<root>/<name>/<version>`` (name and version are validated by the caller)."""
        return self.root / name / str(version)

    def new_temp_path(self, prefix: str) -> Path:
        """A fresh, not yet existing path under ``<root>/.tmp`` (named after this process, so a
        later writer can tell it from the leftovers of killed saves, which it removes)."""
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.clean_stale()
        return self.tmp / scratch_name(prefix)

    def clean_stale(self) -> list[Path]:
        """Remove what killed saves, attachments and deletes left under ``.tmp``."""
        return clean_stale(self.tmp, _TEMP_PREFIXES)

    def new_staging_dir(self) -> Path:
        """An empty directory under ``<root>/.tmp`` to assemble a version in."""
        path = self.new_temp_path("stage")
        path.mkdir()
        return path

    def discard(self, path: Path) -> None:
        """Remove a file or folder: rename it into ``.tmp`` first, then delete it."""
        if not path.exists() and not path.is_symlink():
            return
        trash = self.new_temp_path("trash")
        os.rename(path, trash)
        if trash.is_dir() and not trash.is_symlink():
            shutil.rmtree(trash, ignore_errors=True)
        else:
            trash.unlink(missing_ok=True)

    def remove_empty_model_dir(self, name: str) -> None:
        """Remove ``<root>/<name>`` if its last version is gone."""
        with contextlib.suppress(OSError):
            (self.root / name).rmdir()


def list_source_files(source: Path, *, owner: str) -> list[tuple[Path, str]]:
    """``(file, relative POSIX path)`` for every file to copy from ``source`` (a file or a folder).

    Symlinks to files are followed when copying; symlinked folders, sockets and FIFOs are
    refused, as are top-level names the registry writes itself.
    """
    if source.is_file():
        files = [(source, source.name)]
    else:
        files = []
        for dirpath, dirnames, filenames in os.walk(source):
            base = Path(dirpath)
            for d in sorted(dirnames):
                if (base / d).is_symlink():
                    raise InvalidArgumentError(
                        f"{owner}: '{base / d}' is a symlinked folder; copy its files into the "
                        "model folder instead."
                    )
            dirnames.sort()
            for f in sorted(filenames):
                path = base / f
                mode = path.lstat().st_mode
                if stat.S_ISLNK(mode):
                    _check_link_inside(path, source, owner)
                if not stat.S_ISLNK(mode) and not stat.S_ISREG(mode):
                    raise InvalidArgumentError(
                        f"{owner}: '{path}' is not a regular file; remove it from the model folder."
                    )
                files.append((path, path.relative_to(source).as_posix()))
    if not files:
        raise InvalidArgumentError(
            f"{owner}: model path '{source}' contains no files. Write the model files first."
        )
    reserved = sorted(rel for _, rel in files if rel in RESERVED_FILES)
    if reserved:
        raise InvalidArgumentError(
            f"{owner}: the model files may not include {reserved}: the registry writes these "
            "itself. Remove or rename them (a downloaded model folder cannot be saved as is)."
        )
    return files


def _check_link_inside(link: Path, source: Path, owner: str) -> None:
    """A symlinked file must resolve inside the model folder: a link to anything outside
    (``/etc/passwd``, a secret elsewhere) would copy that file into the registry."""
    target = link.resolve()
    root = source.resolve()
    if not target.is_relative_to(root):
        raise InvalidArgumentError(
            f"{owner}: '{link}' is a symlink to '{target}', outside the model folder '{root}'. "
            "Copy the file into the model folder instead."
        )


def copy_files(files: list[tuple[Path, str]], dest: Path) -> None:
    """Copy ``files`` (from :func:`list_source_files`) into ``dest`` by content."""
    for src, rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
