"""Model exporters: ``model.export(format, **options)`` converts a registered version to another
format and attaches the result to that version.

The registry holds no converter itself. An exporter is a plugin, found by format name among the
``fstrain.model_exporters`` entry points of the installed distributions (the standard Python
plugin mechanism, as pytest plugins or MLflow flavors): fstrain's own ``onnx`` exporter is
declared in its ``pyproject.toml`` and lives with the trainers that know how a model was built.
Another package adds a format by declaring, in its own metadata::

    [project.entry-points."fstrain.model_exporters"]
    tflite = "my_package.export:to_tflite"

An exporter is a callable ``exporter(model, **options) -> Exported``: it reads the saved
version through the public :class:`~model_registry.model.Model` API (``download``,
``manifest``, ``get_feature_view`` for the data it checks against) and returns the files to
attach and the record to return. It writes nothing itself; a failed export raises (a
:class:`~fstrain.kernel.errors.FeatureStoreError`) and the version is left as it was.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from importlib import metadata
from typing import Any

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from model_registry.api import Exported, ModelExporter

__all__ = ["ENTRY_POINT_GROUP", "Exported", "ModelExporter", "get_exporter", "known_formats",
           "run_exporter"]

ENTRY_POINT_GROUP = "fstrain.model_exporters"


def _entry_points(name: str | None = None) -> list[metadata.EntryPoint]:
    points = metadata.entry_points(group=ENTRY_POINT_GROUP)
    return [p for p in points if name is None or p.name == name]


def known_formats() -> list[str]:
    """The format names the installed distributions declare, sorted."""
    return sorted({p.name for p in _entry_points()})


def get_exporter(format: str, *, owner: str = "model.export") -> ModelExporter:
    """The exporter declared for ``format``; a :class:`ConfigError` naming the known formats
    when none is, or naming the extra to install when its module cannot be imported."""
    if not isinstance(format, str) or not format:
        raise InvalidArgumentError(f"{owner}: format must be a format name such as 'onnx'. "
                                   f"Got {format!r} instead.")
    points = _entry_points(format)
    if not points:
        known = ", ".join(known_formats()) or "none"
        raise ConfigError(
            f"{owner}: no exporter for format {format!r}. Known formats: {known} (entry points "
            f"of group '{ENTRY_POINT_GROUP}'; fstrain declares its own in pyproject.toml, so an "
            "empty list means its install metadata is stale: pip install -e . again).")
    if len({p.value for p in points}) > 1:
        raise ConfigError(f"{owner}: format {format!r} is declared by more than one exporter "
                          f"({', '.join(sorted(p.value for p in points))}); uninstall one.")
    point = points[0]
    try:
        exporter = point.load()
    except ImportError as exc:
        raise ConfigError(f"{owner}: the {format!r} exporter ({point.value}) cannot be imported "
                          f"({exc}). {_install_hint(point, format)}") from exc
    if not callable(exporter):
        raise ConfigError(f"{owner}: the {format!r} exporter ({point.value}) is not callable.")
    return exporter


def _install_hint(point: metadata.EntryPoint, format: str) -> str:
    dist = point.dist
    if dist is None:
        return "Install the package that provides it."
    extras = dist.metadata.get_all("Provides-Extra") or []
    if format in extras:
        return f"Install its extra: pip install '{dist.name}[{format}]'."
    return f"Reinstall {dist.name} with its dependencies."


def run_exporter(format: str, model: Any, options: Mapping[str, Any], *,
                 owner: str = "model.export") -> Exported:
    """Look ``format`` up, check ``options`` against the exporter's parameters (an unknown
    option is an :class:`InvalidArgumentError` naming the accepted ones, never ignored), run it
    and check that it returned an :class:`Exported`."""
    exporter = get_exporter(format, owner=owner)
    signature = inspect.signature(exporter)
    try:
        signature.bind(model, **options)
    except TypeError as exc:
        accepted = list(signature.parameters)[1:]
        raise InvalidArgumentError(
            f"{owner}: {exc} for format {format!r}. It accepts: "
            f"{', '.join(accepted) or 'no options'}.") from exc
    result = exporter(model, **options)
    if not isinstance(result, Exported):
        raise ConfigError(f"{owner}: the {format!r} exporter returned "
                          f"{type(result).__name__}, not an Exported.")
    return result
