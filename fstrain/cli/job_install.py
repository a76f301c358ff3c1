"""What ``fstrain jobs deploy`` installs into the jobs' Hopsworks Python environment.

A Hopsworks job runs in a project Python environment. fstrain goes there as a wheel (or a
requirements file naming it) through the SDK's environment API: the file is uploaded into the
project's ``Resources/jobs`` folder with the dataset API, then ``Environment.install_wheel`` (or
``install_requirements``) runs ``pip`` in the environment (the SDK calls are in the adapter,
:meth:`feature_store.hopsworks.jobs.HopsworksJobs.install`; this module only builds and checks
the file). fstrain's base dependencies never name
``deltalake``/``duckdb`` and take pandas/pyarrow/numpy in ranges ``hopsworks[python]==5.2.1``
already satisfies, so pip keeps the cluster's ``hops-deltalake`` fork, pyarrow and pandas (see
``pyproject.toml``: the embedded store is the ``local`` extra).

The built-in environments (``python-feature-pipeline``, ...) are read-only on Hopsworks, so the
jobs use their own environment, created on the first deploy by cloning ``base_environment``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from fstrain.kernel.build_info import write_source_commit
from fstrain.kernel.errors import ConfigError

#: Source-tree entries a wheel is built from (everything else stays behind).
_SOURCES = ("pyproject.toml", "README.md", "fstrain", "feature_store", "feature_views",
            "pipelines", "model_registry", "validation")


def source_root() -> Path | None:
    """The fstrain source checkout this code runs from, or None for an installed wheel."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() and (root / "pipelines").is_dir() else None


def build_wheel(out_dir: Path) -> Path:
    """Build fstrain's wheel (no dependencies) from the source checkout into ``out_dir``.

    The sources are copied to a scratch folder first, so a stale ``build/`` in the checkout never
    leaks into the wheel. Raises :class:`ConfigError` outside a source checkout.
    """
    root = source_root()
    if root is None:
        raise ConfigError(
            "jobs deploy: this fstrain is an installed package, not a source checkout, so it "
            "cannot build its wheel. Pass --wheel PATH (a built fstrain wheel) or set "
            "`install: none` in the jobs config if the environment already has fstrain."
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    with tempfile.TemporaryDirectory(prefix="fstrain-wheel-") as scratch:
        for name in _SOURCES:
            src = root / name
            if src.is_dir():
                shutil.copytree(src, Path(scratch) / name, ignore=ignore)
            elif src.is_file():
                shutil.copy2(src, Path(scratch) / name)

        write_source_commit(root, Path(scratch) / "fstrain")  # models record it (no git there)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
             "-w", str(out_dir), scratch], check=False, capture_output=True, text=True, timeout=600)
    wheels = sorted(out_dir.glob("fstrain-*.whl"))
    if done.returncode != 0 or not wheels:
        raise ConfigError(f"jobs deploy: building fstrain's wheel failed: "
                          f"{(done.stderr or done.stdout).strip()[-500:]}")
    return wheels[-1]


def check_artifact(path: Path, kind: str) -> Path:
    """``path`` as an existing wheel or requirements file (ConfigError naming it otherwise)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"jobs deploy: {kind} '{path}' does not exist.")
    if kind == "wheel" and not (path.name.startswith("fstrain-") and path.suffix == ".whl"):
        raise ConfigError(f"jobs deploy: --wheel must be an fstrain wheel (fstrain-*.whl). Got "
                          f"'{path.name}' instead.")
    return path


__all__ = ["build_wheel", "check_artifact", "source_root"]
