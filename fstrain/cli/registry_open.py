"""Opening the local registry of a store root and resolving ``NAME[:VERSION]`` for the CLI.

Every command that reads what a version shows resolves it through :func:`resolve_ref`, which
verifies the version (files, chain, signatures; see :mod:`model_registry.audit.verify`) and
refuses one that does not verify with a typed error, one line on the command line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fstrain.cli.options import existing_store
from fstrain.kernel.errors import InvalidArgumentError
from fstrain.project import Project
from model_registry.errors import ModelNotFoundError
from model_registry.naming import check_model_name


def open_registry(root: Path | None) -> Any:
    """The local project's registry under ``root``, or None when the store holds no registry
    yet (no model was registered). A root that holds no store at all is a
    :class:`~fstrain.kernel.errors.StoreNotFoundError` naming it and where it came from;
    nothing is created."""
    location = existing_store(root)
    if not (location.path / "model_registry").is_dir():
        return None
    return Project(location, create=False).get_model_registry()


def parse_ref(ref: str) -> tuple[str, int | None]:
    """``NAME[:VERSION]`` → ``(name, version or None)`` (both checked)."""
    name, sep, version_text = ref.partition(":")
    check_model_name(name)
    if not sep:
        return name, None
    if not version_text.isdigit() or int(version_text) < 1:
        raise InvalidArgumentError(
            f"VERSION in NAME[:VERSION] must be a positive integer. Got {version_text!r} "
            f"instead (e.g. {name}:3)."
        )
    return name, int(version_text)


def resolve_ref(root: Path | None, ref: str, *, verify: bool = True) -> Any:
    """The model version ``ref`` names (the latest without ``:VERSION``), verified unless
    ``verify=False``.

    Raises:
        ModelNotFoundError: no registry, model or version.
        VerificationError: the version does not verify (one line per problem, joined).
    """
    name, version = parse_ref(ref)
    registry = open_registry(root)
    if registry is None:
        raise ModelNotFoundError(
            f"No model registry under the store root; model '{name}' not found."
        )
    if version is None:
        models = registry.get_models(name)
        if not models:
            registry.get_model(name, 1)  # raises a ModelNotFoundError with suggestions
        model = models[-1]
    else:
        model = registry.get_model(name, version)
    if verify:
        model.require_verified()
    return model
