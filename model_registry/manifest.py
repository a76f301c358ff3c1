"""The per-version ``manifest.json``: what it holds, how it is written, how files are checked.

The manifest lists every file of a version (model files, ``input_example.json``,
``model_schema.json``, attachments) with its sha256 and size. It is written atomically
(temp file + ``os.replace``); its own sha256 is kept in the registry index so that a changed
manifest is detected too. :func:`verify_directory` raises :class:`IntegrityError` for a changed,
missing or extra file, naming each one.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import uuid
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from fstrain.kernel.canonical_json import dumps
from fstrain.kernel.errors import IntegrityError
from model_registry.naming import MANIFEST_FILE

MANIFEST_VERSION = 1
_CHUNK = 1 << 20

#: library -> distribution names to try (first installed wins); read from package metadata,
#: so recording a version never imports the library (torch stays unimported).
_LIBRARIES: dict[str, tuple[str, ...]] = {
    "numpy": ("numpy",),
    "pandas": ("pandas",),
    "sklearn": ("scikit-learn",),
    "xgboost": ("xgboost", "xgboost-cpu"),
    "lightgbm": ("lightgbm",),
    "torch": ("torch",),
    "skops": ("skops",),
    "safetensors": ("safetensors",),
}

#: file suffixes whose loading runs pickle (never loaded unless ``trust_pickle=True``).
PICKLE_SUFFIXES = frozenset({".pkl", ".pickle", ".joblib", ".pt", ".pth"})


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's content, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def file_entry(path: Path, rel: str, kind: str) -> dict[str, Any]:
    """Manifest entry for one file: ``{"path", "sha256", "size", "kind"}``."""
    return {"path": rel, "sha256": sha256_file(path), "size": path.stat().st_size, "kind": kind}


def library_versions(framework: str) -> dict[str, str]:
    """Python and installed library versions (numpy, pandas, sklearn, xgboost, torch, ...).

    Versions come from package metadata, so nothing is imported; ``torch`` is recorded only for
    the ``torch`` framework.
    """
    out = {"python": platform.python_version()}
    for lib, dists in _LIBRARIES.items():
        if lib == "torch" and framework != "torch":
            continue
        for dist in dists:
            try:
                out[lib] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return out


def git_commit(cwd: Path | None = None) -> str | None:
    """``git rev-parse HEAD`` in ``cwd`` (default: the current directory), or None; never fails."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd or Path.cwd(),
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and len(sha) in (40, 64) else None


def unsafe_files(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    """Paths of files whose format loads through pickle."""
    return [e["path"] for e in entries if Path(e["path"]).suffix.lower() in PICKLE_SUFFIXES]


def write_manifest(
    directory: Path, manifest: Mapping[str, Any], *, scratch: Path | None = None
) -> str:
    """Atomically write ``manifest.json`` into ``directory``; return the sha256 of its bytes.

    The bytes go to a temp file in ``scratch`` (default: ``directory``; must be on the same
    file system) and are renamed into place.
    """
    data = dumps(manifest).encode("utf-8")
    tmp = (scratch or directory) / f".{MANIFEST_FILE}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, directory / MANIFEST_FILE)
    finally:
        tmp.unlink(missing_ok=True)
    return hashlib.sha256(data).hexdigest()


def read_manifest(
    directory: Path, *, expected_sha256: str | None = None, label: str = "model"
) -> dict[str, Any]:
    """Read ``manifest.json``; with ``expected_sha256`` also check it was not changed."""
    path = directory / MANIFEST_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise IntegrityError(
            f"{label}: '{MANIFEST_FILE}' is missing from {directory}. The version folder is "
            "damaged; delete this version and save the model again."
        ) from None
    if expected_sha256 is not None and hashlib.sha256(data).hexdigest() != expected_sha256:
        raise IntegrityError(
            f"{label}: '{MANIFEST_FILE}' was changed after registration (its sha256 does not "
            "match the registry index). Do not edit version folders; save a new version instead."
        )
    return json.loads(data)


def find_version_root(path: Path, *, levels: int = 3) -> Path | None:
    """The nearest folder at or above ``path`` (up to ``levels`` parents) holding a registry
    ``manifest.json`` (one with ``manifest_version`` and ``files``), or None."""
    folder = Path(path)
    for candidate in [folder, *folder.parents][: levels + 1]:
        manifest = candidate / MANIFEST_FILE
        if not manifest.is_file():
            continue
        try:
            data = json.loads(manifest.read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "manifest_version" in data and "files" in data:
            return candidate
    return None


def verify_directory(
    directory: Path, manifest: Mapping[str, Any] | None = None, *, label: str = "model"
) -> None:
    """Check every file of ``directory`` against the manifest's sha256 and size.

    Raises :class:`IntegrityError` naming every changed, missing and extra file. With no
    ``manifest`` given, ``directory/manifest.json`` is read.
    """
    if manifest is None:
        manifest = read_manifest(directory, label=label)
    expected = {e["path"]: e for e in manifest.get("files", [])}
    changed, missing = [], []
    for rel, entry in expected.items():
        path = directory / rel
        if not path.is_file():
            missing.append(rel)
        elif path.stat().st_size != entry["size"] or sha256_file(path) != entry["sha256"]:
            changed.append(rel)
    present = {
        p.relative_to(directory).as_posix()
        for p in directory.rglob("*")
        if p.is_file() or p.is_symlink()
    }
    extra = sorted(present - set(expected) - {MANIFEST_FILE})
    problems = [
        f"{what} file(s) {', '.join(repr(f) for f in files)}"
        for what, files in (("changed", changed), ("missing", missing), ("extra", extra))
        if files
    ]
    if problems:
        raise IntegrityError(
            f"{label}: integrity check failed in {directory}: {'; '.join(problems)} "
            "(sha256 and file list are compared with manifest.json). The files were modified "
            "after registration; download the model again or save a new version."
        )
