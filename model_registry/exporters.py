"""Model exporters: ``model.export(format, **options)`` converts a registered version to another
format and attaches the result to that version.

fstrain's own format, ``onnx``, is the trainers' exporter (:mod:`fstrain.trainers.onnx_exporter`,
which knows how a model was built), imported here directly: the registry imports the trainers.
Any other exporter is passed itself, ``model.export(to_tflite, **options)``.

An exporter is a callable ``exporter(model, **options) -> Exported``: it reads the saved
version through the public :class:`~model_registry.model.Model` API (``download``,
``manifest``, ``get_feature_view`` for the data it checks against) and returns the files to
attach and the record to return. It writes nothing itself; a failed export raises (a
:class:`~fstrain.kernel.errors.FeatureStoreError`) and the version is left as it was.

**Deprecated, kept for one release** (CHANGELOG.md): a third-party format found by name among the
``fstrain.model_exporters`` entry points of the installed distributions, declared in that
package's metadata::

    [project.entry-points."fstrain.model_exporters"]
    tflite = "my_package.export:to_tflite"

still works, with a ``DeprecationWarning`` that says to pass the exporter itself instead.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers import onnx_exporter
from model_registry.api import Exported, ModelExporter

__all__ = ["BUILT_IN", "ENTRY_POINT_GROUP", "Exported", "ModelExporter", "get_exporter",
           "known_formats", "run_exporter"]

ENTRY_POINT_GROUP = "fstrain.model_exporters"

#: fstrain's own formats and their exporters (no entry point is looked up for them)
BUILT_IN: dict[str, Callable[..., Exported]] = {"onnx": onnx_exporter.export}


def _entry_points(name: str | None = None) -> list[metadata.EntryPoint]:
    points = metadata.entry_points(group=ENTRY_POINT_GROUP)
    return [p for p in points if name is None or p.name == name]


def known_formats() -> list[str]:
    """fstrain's own formats and those the installed distributions declare, sorted."""
    return sorted(set(BUILT_IN) | {p.name for p in _entry_points()})


def _target(exporter: Callable[..., Exported]) -> str:
    """How an entry point names ``exporter`` (``module:qualname``)."""
    return f"{getattr(exporter, '__module__', '')}:{getattr(exporter, '__qualname__', '')}"


def get_exporter(format: str, *, owner: str = "model.export", stacklevel: int = 2) -> ModelExporter:
    """The exporter of ``format``: fstrain's own (:data:`BUILT_IN`), or, deprecated, the one an
    installed distribution declares in :data:`ENTRY_POINT_GROUP` (with a ``DeprecationWarning``
    at ``stacklevel``). A :class:`ConfigError` names the known formats when none is, or the extra
    to install when its module cannot be imported."""
    if not isinstance(format, str) or not format:
        raise InvalidArgumentError(f"{owner}: format must be a format name such as 'onnx' or an "
                                   f"exporter. Got {format!r} instead.")
    if format in BUILT_IN:
        return _built_in(format, owner)
    points = _entry_points(format)
    if not points:
        raise ConfigError(
            f"{owner}: no exporter for format {format!r}. Known formats: "
            f"{', '.join(known_formats())} (fstrain's own, and entry points of group "
            f"'{ENTRY_POINT_GROUP}'); or pass an exporter itself: model.export(my_exporter).")
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
    warnings.warn(
        f"{owner}: the {format!r} exporter was found through the '{ENTRY_POINT_GROUP}' entry "
        f"points, which go in the next release; pass the exporter itself instead: "
        f"model.export({point.value.rpartition(':')[2]}, ...) after importing it from "
        f"{point.value.partition(':')[0]}.", DeprecationWarning, stacklevel=stacklevel)
    return exporter


def _built_in(format: str, owner: str) -> ModelExporter:
    """fstrain's own exporter of ``format``; an installed distribution declaring the same name
    for another exporter is refused (an entry point naming fstrain's own, left by an older
    install of fstrain, is the same exporter)."""
    exporter = BUILT_IN[format]
    others = sorted(p.value for p in _entry_points(format) if p.value != _target(exporter))
    if others:
        raise ConfigError(f"{owner}: format {format!r} is fstrain's own ({_target(exporter)}), "
                          f"and an installed package declares it again ({', '.join(others)}); "
                          "uninstall that package or rename its format.")
    return exporter


def _install_hint(point: metadata.EntryPoint, format: str) -> str:
    dist = point.dist
    if dist is None:
        return "Install the package that provides it."
    extras = dist.metadata.get_all("Provides-Extra") or []
    if format in extras:
        return f"Install its extra: pip install '{dist.name}[{format}]'."
    return f"Reinstall {dist.name} with its dependencies."


def run_exporter(format: str | ModelExporter, model: Any, options: Mapping[str, Any], *,
                 owner: str = "model.export") -> Exported:
    """Look ``format`` up (or take the exporter passed), check ``options`` against the
    exporter's parameters (an unknown option is an :class:`InvalidArgumentError` naming the
    accepted ones, never ignored), run it and check that it returned an :class:`Exported`."""
    if callable(format):
        exporter, label = format, getattr(format, "__qualname__", repr(format))
    else:
        exporter, label = get_exporter(format, owner=owner, stacklevel=4), format
    signature = inspect.signature(exporter)
    try:
        signature.bind(model, **options)
    except TypeError as exc:
        accepted = list(signature.parameters)[1:]
        raise InvalidArgumentError(
            f"{owner}: {exc} for format {label!r}. It accepts: "
            f"{', '.join(accepted) or 'no options'}.") from exc
    result = exporter(model, **options)
    if not isinstance(result, Exported):
        raise ConfigError(f"{owner}: the {label!r} exporter returned "
                          f"{type(result).__name__}, not an Exported.")
    return result
