"""How to load and predict with a registered model: a record kept in the version's manifest.

A model saved by fstrain's trainers carries ``predictor.json`` (its kind, preprocessing, label
classes). A model registered by hand (``mr.sklearn.create_model(...).save(dir)``) has only the
files its framework wrote; the record is then inferred from them:

========================  ===========================================================
files                     loader
========================  ===========================================================
``predictor.json``        ``fstrain`` (the trainers' predictor, with its preprocessing)
``xgboost_meta.json``     ``xgboost`` (``save_xgboost``: a Booster or ``XGBClassifier``)
``lightgbm_meta.json``    ``lightgbm`` (``save_lightgbm``: a Booster)
``model.skops``           ``sklearn`` (``save_sklearn``: an estimator or a Pipeline)
``model.safetensors``     ``torch`` (``save_torch`` with ``config.json`` saying how to
                          rebuild the module: ``{"net": "mlp", ...}`` or
                          ``{"module": "package.module:Class", "kwargs": {...}}``)
a single pickle file      ``pickle`` (loads only when the caller trusts pickle)
========================  ===========================================================

``path`` is the folder (relative to the version root) that holds the model's files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

RECORD_VERSION = 1
LOADERS = ("fstrain", "xgboost", "lightgbm", "sklearn", "torch", "pickle")
_MARKERS = (
    ("predictor.json", "fstrain"),
    ("xgboost_meta.json", "xgboost"),
    ("lightgbm_meta.json", "lightgbm"),
    ("model.skops", "sklearn"),
    ("model.safetensors", "torch"),
)
_PICKLES = (".pkl", ".pickle", ".joblib", ".pt", ".pth")


def predictor_record(paths: Iterable[str], framework: str | None = None) -> dict[str, Any] | None:
    """The load-and-predict record of a version whose files are ``paths`` (relative, POSIX).

    The shallowest marker file wins (``predictor.json`` at the root before the ``model/``
    folder it describes). None when no known format is present.
    """
    found: list[tuple[int, int, str, str]] = []
    files = [PurePosixPath(p) for p in paths]
    for rank, (marker, loader) in enumerate(_MARKERS):
        for f in files:
            if f.name == marker:
                found.append((len(f.parts), rank, loader, str(f.parent)))
    if found:
        _, _, loader, folder = min(found)
        return {"record_version": RECORD_VERSION, "loader": loader, "path": folder,
                "framework": framework, "source": "predictor.json" if loader == "fstrain"
                else "inferred from the saved files"}
    pickles = [f for f in files if f.suffix.lower() in _PICKLES]
    if len(pickles) == 1:
        return {"record_version": RECORD_VERSION, "loader": "pickle", "path": str(pickles[0]),
                "framework": framework, "source": "inferred from the saved files"}
    return None


def record_of(manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """The record stored in ``manifest``, else inferred from its file list (older versions)."""
    stored = manifest.get("predictor")
    if isinstance(stored, Mapping) and stored.get("loader") in LOADERS:
        return dict(stored)
    paths = [e.get("path", "") for e in manifest.get("files") or [] if isinstance(e, Mapping)]
    return predictor_record(paths, manifest.get("framework"))
