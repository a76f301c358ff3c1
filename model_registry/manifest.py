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
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from fstrain.kernel.build_info import source_info
from fstrain.kernel.canonical_json import dumps, to_jsonable
from fstrain.kernel.errors import IntegrityError
from fstrain.kernel.timeutil import utc_now_iso
from model_registry.naming import MANIFEST_FILE
from model_registry.predictor_record import predictor_record

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
    """The source commit of the running fstrain code, or None; never fails.

    Taken from how fstrain was installed (see :mod:`fstrain.kernel.build_info`), never from the
    current directory; ``cwd`` asks a specific checkout instead.
    """
    if cwd is not None:
        return source_info.__wrapped__(Path(cwd) / "fstrain").get("source_commit")
    return source_info().get("source_commit")


def code_version() -> dict[str, Any]:
    """``{fstrain_version, source_commit, source, dirty}`` of the running code."""
    return dict(source_info())


def unsafe_files(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    """Paths of files whose format loads through pickle."""
    return [e["path"] for e in entries if Path(e["path"]).suffix.lower() in PICKLE_SUFFIXES]


def model_lineage(fv: Any, td_version: int | None, *, label: str) -> dict[str, Any]:
    """Feature view, training-dataset version and (if the view can give it) the training
    dataset's ``to_dict()``: how a model's lineage reaches the feature-group commits."""
    lineage: dict[str, Any] = {
        "feature_view": None if fv is None else {"name": fv.name, "version": fv.version},
        "training_dataset_version": td_version,
    }
    getter = getattr(fv, "get_training_dataset", None)
    if fv is not None and td_version is not None and callable(getter):
        to_dict = getattr(getter(td_version), "to_dict", None)
        if callable(to_dict):
            lineage["training_dataset"] = to_jsonable(
                to_dict(), what=f"{label}: training dataset lineage"
            )
    return lineage


@dataclass(frozen=True)
class ManifestFields:
    """What a backend knows about a model version when it registers it."""

    name: str
    framework: str
    description: str | None
    metrics: Mapping[str, float]
    lineage: Mapping[str, Any]
    files: list[dict[str, Any]]
    hyperparameters: Mapping[str, Any] | None = None
    training_config: Mapping[str, Any] | None = None
    model_schema: Mapping[str, Any] | None = None
    input_example: Any = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def build_manifest(fields: ManifestFields) -> dict[str, Any]:
    """The ``manifest.json`` content of a new version, the same on every backend.

    Records the time, the library versions of the framework, the code's git commit, the
    lineage (feature view, training-dataset version and its metadata), every file with its
    sha256 and size, and which of them would need pickle to load.
    """
    view = fields.lineage.get("feature_view") or {}
    files = sorted(fields.files, key=lambda e: e["path"])
    return {
        "manifest_version": MANIFEST_VERSION,
        "name": fields.name,
        "framework": fields.framework,
        "description": fields.description,
        "created": utc_now_iso(),
        "metrics": dict(fields.metrics),
        "validation_status": "pending",
        "libraries": library_versions(fields.framework),
        "git_commit": git_commit(),
        "code_version": code_version(),
        "feature_view_name": view.get("name"),
        "feature_view_version": view.get("version"),
        "training_dataset_version": fields.lineage.get("training_dataset_version"),
        "lineage": dict(fields.lineage),
        "model_schema": fields.model_schema,
        "input_example": fields.input_example,
        "hyperparameters": fields.hyperparameters,
        "training_config": fields.training_config,
        "files": files,
        "unsafe_files": unsafe_files(files),
        "predictor": predictor_record([e["path"] for e in files], fields.framework),
        **fields.extra,
    }


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
    directory: Path, manifest: Mapping[str, Any] | None = None, *, label: str = "model",
    ignore_extra: Iterable[str] = (),
) -> None:
    """Check every file of ``directory`` against the manifest's sha256 and size.

    Raises :class:`IntegrityError` naming every changed, missing and extra file. With no
    ``manifest`` given, ``directory/manifest.json`` is read. ``ignore_extra`` names files a
    backend adds itself (e.g. ``hsml``'s own metadata), which are not reported as extra.
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
    extra = sorted(present - set(expected) - {MANIFEST_FILE} - set(ignore_extra))
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
