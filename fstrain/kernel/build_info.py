"""Which fstrain code is running: the installed version and the source commit it was built from.

The commit is never taken from the current directory (a job may run anywhere). In order:

1. the ``vcs_info.commit_id`` pip records for an install from a git URL (PEP 610
   ``direct_url.json``);
2. ``fstrain/_source_commit.txt`` next to this package, written when a wheel is built from a
   checkout (see :func:`write_source_commit`);
3. ``git rev-parse HEAD`` in the folder the package is imported from, when that folder is a git
   checkout (an editable install); a checkout with uncommitted changes is marked ``dirty``.
"""

from __future__ import annotations

import json
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

DIST = "fstrain"
COMMIT_FILE = "_source_commit.txt"
_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # .../fstrain


def installed_version() -> str | None:
    """The installed distribution's version, or None when fstrain is not installed."""
    try:
        return metadata.version(DIST)
    except metadata.PackageNotFoundError:
        return None


def _direct_url_commit() -> str | None:
    try:
        text = metadata.distribution(DIST).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        info = json.loads(text)
    except ValueError:
        return None
    commit = (info.get("vcs_info") or {}).get("commit_id")
    return str(commit) if commit else None


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _checkout_commit(package_dir: Path) -> tuple[str | None, bool]:
    sha = _git(["rev-parse", "HEAD"], package_dir)
    if not sha or len(sha) not in (40, 64):
        return None, False
    status = _git(["status", "--porcelain", "--untracked-files=no"], package_dir.parent)
    return sha, bool(status)


@lru_cache(maxsize=1)
def source_info(package_dir: Path | None = None) -> dict[str, Any]:
    """``{fstrain_version, source_commit, source, dirty}``; never raises.

    ``source`` says where the commit came from: ``"vcs install"``, ``"build"``, ``"checkout"``
    or ``None`` when it is unknown.
    """
    package_dir = package_dir or _PACKAGE_DIR
    info: dict[str, Any] = {"fstrain_version": installed_version(), "source_commit": None,
                            "source": None, "dirty": False}
    commit = _direct_url_commit()
    if commit:
        return {**info, "source_commit": commit, "source": "vcs install"}
    stamped = package_dir / COMMIT_FILE
    if stamped.is_file():
        text = stamped.read_text(encoding="utf-8").strip()
        if text:
            return {**info, "source_commit": text, "source": "build"}
    sha, dirty = _checkout_commit(package_dir)
    if sha:
        return {**info, "source_commit": sha, "source": "checkout", "dirty": dirty}
    return info


def write_source_commit(checkout: Path, package_dir: Path | None = None) -> str | None:
    """Stamp the commit of ``checkout`` into the package before building a wheel from it."""
    sha, _ = _checkout_commit(Path(checkout))
    if sha:
        (package_dir or _PACKAGE_DIR).joinpath(COMMIT_FILE).write_text(sha + "\n", encoding="utf-8")
    return sha
