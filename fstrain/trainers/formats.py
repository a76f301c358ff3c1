"""Every flavour's model files, saved and loaded side by side: XGBoost JSON/UBJ, LightGBM text,
CatBoost's binary model, Keras's ``.keras`` zip, safetensors (Flax, torch), skops (scikit-learn),
Spark MLlib's own folders — and a guarded pickle loader.

The trainers' predictors write their models with the ``save_*`` functions and rebuild them with
the ``load_*`` ones (:mod:`fstrain.trainers.predictor`), and models trained elsewhere are saved
with them before they are registered (:mod:`fstrain.trainers.external`). Every ``load_*``
function first checks the model version the directory belongs to (the directory itself or a
parent up to three levels up holding a registry ``manifest.json``, i.e. a downloaded version), so
a changed, missing or extra file raises :class:`IntegrityError` before anything is deserialised.
Heavy libraries are imported inside the functions.

``model_registry.formats`` re-exports these names for one release (CHANGELOG.md).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
import os
import shutil

from fstrain.kernel.canonical_json import dumps, to_jsonable
from fstrain.kernel.errors import InvalidArgumentError, UnsafeFormatError
from model_registry.manifest import PICKLE_SUFFIXES, find_version_root, verify_directory

__all__ = [
    "XGBOOST_META", "XGBOOST_FORMATS", "XGBOOST_SKLEARN_CLASSES", "LIGHTGBM_MODEL",
    "LIGHTGBM_META", "CATBOOST_MODEL", "CATBOOST_META", "KERAS_MODEL", "KERAS_META",
    "FLAX_PARAMS", "FLAX_CONFIG", "TORCH_WEIGHTS", "TORCH_CONFIG", "SKOPS_FILE", "SKLEARN_META",
    "DEFAULT_TRUSTED_MODULES", "save_xgboost", "load_xgboost", "save_lightgbm", "load_lightgbm",
    "save_catboost", "load_catboost", "import_keras", "save_keras", "load_keras", "save_flax",
    "load_flax", "save_torch", "load_torch_state", "save_sklearn", "load_sklearn",
    "save_spark_ml", "load_spark_ml", "load_pickle", "load_model",
]

XGBOOST_META = "xgboost_meta.json"
XGBOOST_FORMATS = ("json", "ubj")
XGBOOST_SKLEARN_CLASSES = (
    "XGBClassifier",
    "XGBRegressor",
    "XGBRanker",
    "XGBRFClassifier",
    "XGBRFRegressor",
)
LIGHTGBM_MODEL = "model.txt"
LIGHTGBM_META = "lightgbm_meta.json"
CATBOOST_MODEL = "model.cbm"
CATBOOST_META = "catboost_meta.json"
KERAS_MODEL = "model.keras"
KERAS_META = "keras_meta.json"
FLAX_PARAMS = "flax_params.safetensors"
FLAX_CONFIG = "flax_config.json"
TORCH_WEIGHTS = "model.safetensors"
TORCH_CONFIG = "config.json"
SKOPS_FILE = "model.skops"
SKLEARN_META = "sklearn_meta.json"
#: top-level modules whose types skops may load without being listed in ``trusted``.
DEFAULT_TRUSTED_MODULES = ("sklearn", "numpy", "xgboost")


# --------------------------------------------------------------------------------- XGBoost


def save_xgboost(model: Any, directory: Path, fmt: str = "json") -> list[Path]:
    """Save an XGBoost ``Booster`` or sklearn wrapper (``XGBClassifier``, ``XGBRegressor``, ...).

    Writes ``model.json`` (or ``model.ubj``) through XGBoost's own ``save_model`` plus
    ``xgboost_meta.json`` (class and JSON-serialisable constructor params) so that
    :func:`load_xgboost` rebuilds the same kind of object. Returns the written paths.
    """
    import xgboost as xgb

    if fmt not in XGBOOST_FORMATS:
        raise InvalidArgumentError(
            f"save_xgboost: fmt must be one of {', '.join(XGBOOST_FORMATS)}. Got {fmt!r} instead."
        )
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model_file = directory / f"model.{fmt}"
    params: dict[str, Any] = {}
    dropped: list[str] = []
    if isinstance(model, xgb.Booster):
        kind = "Booster"
    elif isinstance(model, xgb.XGBModel) and type(model).__name__ in XGBOOST_SKLEARN_CLASSES:
        kind = type(model).__name__
        params, dropped = _json_params(model.get_params())
    else:
        raise InvalidArgumentError(
            "save_xgboost: model must be an xgboost.Booster or one of "
            f"{', '.join(XGBOOST_SKLEARN_CLASSES)}. Got {type(model).__name__} instead."
        )
    if dropped:
        warnings.warn(
            f"save_xgboost: parameters {dropped} are not JSON-serialisable and were not stored; "
            "set them again after load_xgboost if prediction needs them.",
            UserWarning,
            stacklevel=2,
        )
    model.save_model(str(model_file))
    meta = {
        "library": "xgboost",
        "class": kind,
        "format": fmt,
        "model_file": model_file.name,
        "params": params,
        "dropped_params": dropped,
        "xgboost_version": xgb.__version__,
    }
    meta_file = directory / XGBOOST_META
    meta_file.write_text(dumps(meta), encoding="utf-8")
    return [model_file, meta_file]


def load_xgboost(directory: Path) -> Any:
    """Load what :func:`save_xgboost` wrote: a ``Booster`` or the same sklearn wrapper class."""
    import xgboost as xgb

    directory = Path(directory)
    _verify_if_manifest(directory)
    meta = _read_json(directory / XGBOOST_META, "load_xgboost")
    kind, fmt = meta.get("class"), meta.get("format")
    if fmt not in XGBOOST_FORMATS or kind not in ("Booster", *XGBOOST_SKLEARN_CLASSES):
        raise InvalidArgumentError(
            f"load_xgboost: {directory / XGBOOST_META} names class {kind!r} and format {fmt!r}; "
            f"expected Booster or one of {', '.join(XGBOOST_SKLEARN_CLASSES)} and json or ubj."
        )
    model_file = directory / f"model.{fmt}"
    if kind == "Booster":
        model = xgb.Booster()
    else:
        model = getattr(xgb, kind)(**dict(meta.get("params") or {}))
    model.load_model(str(model_file))
    return model


# -------------------------------------------------------------------------------- LightGBM


def save_lightgbm(booster: Any, directory: Path) -> list[Path]:
    """Save a ``lightgbm.Booster`` as LightGBM's own text model (``model.txt``, every tree)
    plus ``lightgbm_meta.json``. Returns the written paths."""
    import lightgbm as lgb

    if not isinstance(booster, lgb.Booster):
        raise InvalidArgumentError(
            f"save_lightgbm: model must be a lightgbm.Booster. Got {type(booster).__name__} "
            "instead (for LGBMClassifier/LGBMRegressor pass model.booster_)."
        )
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model_file = directory / LIGHTGBM_MODEL
    booster.save_model(str(model_file), num_iteration=-1)
    meta = {"library": "lightgbm", "class": "Booster", "model_file": model_file.name,
            "lightgbm_version": lgb.__version__}
    meta_file = directory / LIGHTGBM_META
    meta_file.write_text(dumps(meta), encoding="utf-8")
    return [model_file, meta_file]


def load_lightgbm(directory: Path) -> Any:
    """Load what :func:`save_lightgbm` wrote (a text model: no code is deserialised)."""
    import lightgbm as lgb

    directory = Path(directory)
    _verify_if_manifest(directory)
    meta = _read_json(directory / LIGHTGBM_META, "load_lightgbm")
    if meta.get("class") != "Booster" or meta.get("model_file") != LIGHTGBM_MODEL:
        raise InvalidArgumentError(
            f"load_lightgbm: {directory / LIGHTGBM_META} names class {meta.get('class')!r} and "
            f"file {meta.get('model_file')!r}; expected Booster and {LIGHTGBM_MODEL}."
        )
    return lgb.Booster(model_file=str(directory / LIGHTGBM_MODEL))


# -------------------------------------------------------------------------------- CatBoost


def save_catboost(model: Any, directory: Path) -> list[Path]:
    """Save a fitted ``CatBoostClassifier``/``CatBoostRegressor`` in CatBoost's own binary
    format (``model.cbm``, which holds the trees and the categorical-feature hashes) plus
    ``catboost_meta.json``. Returns the written paths."""
    import catboost

    if not isinstance(model, catboost.CatBoost) or not model.is_fitted():
        raise InvalidArgumentError(
            f"save_catboost: model must be a fitted CatBoost model. Got {type(model).__name__}."
        )
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model_file = directory / CATBOOST_MODEL
    model.save_model(str(model_file), format="cbm")
    meta = {"library": "catboost", "class": type(model).__name__, "format": "cbm",
            "model_file": model_file.name, "catboost_version": catboost.__version__}
    meta_file = directory / CATBOOST_META
    meta_file.write_text(dumps(meta), encoding="utf-8")
    return [model_file, meta_file]


def load_catboost(directory: Path) -> Any:
    """Load what :func:`save_catboost` wrote (a data-only binary model: no code runs)."""
    import catboost

    directory = Path(directory)
    _verify_if_manifest(directory)
    meta = _read_json(directory / CATBOOST_META, "load_catboost")
    kind = meta.get("class")
    if kind not in ("CatBoostClassifier", "CatBoostRegressor", "CatBoost") or meta.get(
            "model_file") != CATBOOST_MODEL:
        raise InvalidArgumentError(
            f"load_catboost: {directory / CATBOOST_META} names class {kind!r} and file "
            f"{meta.get('model_file')!r}; expected a CatBoost class and {CATBOOST_MODEL}."
        )
    model = getattr(catboost, kind)()
    model.load_model(str(directory / CATBOOST_MODEL), format="cbm")
    return model


# ----------------------------------------------------------------------------------- Keras


def import_keras() -> Any:
    """``keras`` on the torch backend unless ``KERAS_BACKEND`` names another (set before the
    first import: Keras reads it once)."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    try:
        import keras
    except ImportError as exc:  # pragma: no cover - the extra is installed in CI
        raise InvalidArgumentError(
            "Keras models need keras: pip install 'fstrain[keras]'."
        ) from exc
    return keras


def save_keras(model: Any, directory: Path) -> list[Path]:
    """Save a Keras 3 model as ``model.keras`` (Keras's zip of JSON config + weights) plus
    ``keras_meta.json``. Returns the written paths."""
    keras = import_keras()
    if not isinstance(model, keras.Model):
        raise InvalidArgumentError(f"save_keras: expected a keras.Model; got "
                                   f"{type(model).__name__}.")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model_file = directory / KERAS_MODEL
    model.save(str(model_file))
    meta = {"library": "keras", "class": type(model).__name__, "model_file": KERAS_MODEL,
            "keras_version": keras.__version__, "backend": keras.backend.backend()}
    meta_file = directory / KERAS_META
    meta_file.write_text(dumps(meta), encoding="utf-8")
    return [model_file, meta_file]


def load_keras(directory: Path, custom_objects: dict[str, Any] | None = None) -> Any:
    """Load ``model.keras`` in Keras's safe mode (no lambda or arbitrary code is
    deserialised); classes outside Keras must be passed in ``custom_objects``."""
    keras = import_keras()
    directory = Path(directory)
    _verify_if_manifest(directory)
    meta = _read_json(directory / KERAS_META, "load_keras")
    if meta.get("model_file") != KERAS_MODEL:
        raise InvalidArgumentError(f"load_keras: {directory / KERAS_META} names file "
                                   f"{meta.get('model_file')!r}; expected {KERAS_MODEL}.")
    return keras.saving.load_model(str(directory / KERAS_MODEL), custom_objects=custom_objects,
                                   compile=False, safe_mode=True)


# ------------------------------------------------------------------------------------ Flax


def save_flax(params: Mapping[str, Any], directory: Path, config: dict) -> list[Path]:
    """Save a Flax parameter tree as ``flax_params.safetensors`` (one tensor per leaf, keys
    ``Dense_0/kernel``) plus ``flax_config.json`` (what rebuilds the module). Returns the
    written paths."""
    import numpy as np
    from flax.traverse_util import flatten_dict
    from safetensors.numpy import save_file

    if not isinstance(params, Mapping):
        raise InvalidArgumentError(f"save_flax: params must be a mapping (a Flax parameter "
                                   f"tree); got {type(params).__name__}.")
    config_json = to_jsonable(dict(config), what="save_flax: config")
    flat = {"/".join(map(str, k)): np.ascontiguousarray(np.asarray(v))
            for k, v in flatten_dict(dict(params)).items()}
    return _write_safetensors(directory, (FLAX_PARAMS, FLAX_CONFIG), config_json,
                              lambda path: save_file(flat, path, metadata={"format": "flax"}))


def load_flax(directory: Path) -> tuple[dict, dict]:
    """Return ``(params, config)`` as written by :func:`save_flax` (numpy leaves)."""
    from flax.traverse_util import unflatten_dict
    from safetensors.numpy import load_file

    weights, config = _read_safetensors(directory, (FLAX_PARAMS, FLAX_CONFIG), "load_flax",
                                        "Save the parameters with save_flax first.")
    flat = load_file(str(weights))
    return unflatten_dict({tuple(k.split("/")): v for k, v in flat.items()}), config


def _json_params(params: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in params.items():
        if isinstance(value, float) and not math.isfinite(value):
            continue  # e.g. missing=nan, the default
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            dropped.append(key)
            continue
        kept[key] = value
    return kept, dropped


# ----------------------------------------------------------------------------------- torch


def save_torch(module_or_state_dict: Any, directory: Path, config: dict) -> list[Path]:
    """Save a ``torch.nn.Module``'s state dict (or a state dict) as ``model.safetensors``
    plus ``config.json`` (whatever is needed to rebuild the module). Returns the written paths.
    """
    import torch
    from safetensors.torch import save_file

    state: Mapping[Any, Any]
    if isinstance(module_or_state_dict, torch.nn.Module):
        state = module_or_state_dict.state_dict()
    elif isinstance(module_or_state_dict, Mapping):
        state = module_or_state_dict
    else:
        raise InvalidArgumentError(
            "save_torch: expected a torch.nn.Module or a state dict. "
            f"Got {type(module_or_state_dict).__name__} instead."
        )
    if not isinstance(config, Mapping):
        raise InvalidArgumentError(
            f"save_torch: config must be a dict. Got {type(config).__name__} instead."
        )
    config_json = to_jsonable(dict(config), what="save_torch: config")
    tensors = {}
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            raise InvalidArgumentError(
                f"save_torch: state dict entry '{key}' must be a tensor. Got "
                f"{type(value).__name__} instead; move non-tensor state into config."
            )
        # clone: safetensors refuses tensors that share storage (tied weights)
        tensors[str(key)] = value.detach().to("cpu").clone().contiguous()
    return _write_safetensors(directory, (TORCH_WEIGHTS, TORCH_CONFIG), config_json,
                              lambda path: save_file(tensors, path, metadata={"format": "pt"}))


def load_torch_state(directory: Path) -> tuple[dict, dict]:
    """Return ``(state_dict, config)`` as written by :func:`save_torch` (tensors on CPU)."""
    from safetensors.torch import load_file

    weights, config = _read_safetensors(directory, (TORCH_WEIGHTS, TORCH_CONFIG),
                                        "load_torch_state",
                                        "Save the model with save_torch first.")
    return dict(load_file(str(weights), device="cpu")), config


def _write_safetensors(directory: Path, names: tuple[str, str], config_json: Any,
                       write_weights: Callable[[str], None]) -> list[Path]:
    """Write a safetensors weights file (``write_weights(path)``) and its JSON config into
    ``directory`` (created); the two paths. Flax and torch models are saved this way."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    weights, config_file = directory / names[0], directory / names[1]
    write_weights(str(weights))
    config_file.write_text(dumps(config_json), encoding="utf-8")
    return [weights, config_file]


def _read_safetensors(directory: Path, names: tuple[str, str], what: str,
                      hint: str) -> tuple[Path, dict]:
    """The weights path and the config of a pair written by :func:`_write_safetensors`, after
    the folder's manifest (if any) verified; a missing weights file raises naming ``hint``."""
    directory = Path(directory)
    _verify_if_manifest(directory)
    config = _read_json(directory / names[1], what)
    weights = directory / names[0]
    if not weights.is_file():
        raise InvalidArgumentError(f"{what}: {weights} does not exist. {hint}")
    return weights, config


# ---------------------------------------------------------------------------------- sklearn


def save_sklearn(estimator: Any, directory: Path) -> list[Path]:
    """Save a scikit-learn estimator (or pipeline) with skops as ``model.skops`` plus
    ``sklearn_meta.json`` (class and sklearn version). Returns the written paths."""
    import sklearn
    import skops.io as sio

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SKOPS_FILE
    sio.dump(estimator, path)
    meta = {
        "library": "sklearn",
        "class": f"{type(estimator).__module__}.{type(estimator).__qualname__}",
        "sklearn_version": sklearn.__version__,
        "model_file": SKOPS_FILE,
    }
    meta_file = directory / SKLEARN_META
    meta_file.write_text(dumps(meta), encoding="utf-8")
    return [path, meta_file]


def load_sklearn(directory: Path, trusted: list[str] | None = None) -> Any:
    """Load ``model.skops``; types outside sklearn/numpy/xgboost must be listed in ``trusted``.

    skops reports the types it would have to construct; any of them that is neither from a
    default-trusted module (:data:`DEFAULT_TRUSTED_MODULES`) nor in ``trusted`` makes this raise
    :class:`UnsafeFormatError` naming them, and nothing is loaded.
    """
    import skops.io as sio

    directory = Path(directory)
    _verify_if_manifest(directory)
    path = directory / SKOPS_FILE
    if not path.is_file():
        raise InvalidArgumentError(
            f"load_sklearn: {path} does not exist. Save the model with save_sklearn first."
        )
    allowed = set(trusted or [])
    untrusted = sio.get_untrusted_types(file=path)
    blocked = [
        t for t in untrusted if t not in allowed and t.split(".")[0] not in DEFAULT_TRUSTED_MODULES
    ]
    if blocked:
        raise UnsafeFormatError(
            f"load_sklearn: refusing to load '{path}': it needs types that are not trusted: "
            f"{blocked}. Loading them could run their code. If you know where they come from, "
            f"call load_sklearn(directory, trusted={blocked!r})."
        )
    return sio.load(path, trusted=list(untrusted))


# ------------------------------------------------------------------------------ Spark MLlib


def save_spark_ml(saved: Path, directory: Path) -> list[Path]:
    """Copy a ``PipelineModel`` folder written by MLlib's own writer (``model.write().save``:
    JSON metadata + Parquet data per stage, no code) into ``directory``. Returns the files."""
    saved, directory = Path(saved), Path(directory)
    if not (saved / "metadata").is_dir() or not (saved / "stages").is_dir():
        raise InvalidArgumentError(
            f"save_spark_ml: {saved} is not a PipelineModel saved by MLlib's writer (it needs "
            "metadata/ and stages/)."
        )
    shutil.copytree(saved, directory, dirs_exist_ok=True)
    return sorted(p for p in directory.rglob("*") if p.is_file())


def load_spark_ml(directory: Path) -> list[dict[str, Any]]:
    """Read a saved ``PipelineModel`` without Spark: one dict per stage, in pipeline order, with
    its MLlib ``metadata`` (class, params) and the rows of each Parquet folder (``data``,
    ``treesMetadata``). Nothing is executed: the files are JSON and Parquet."""
    import pyarrow.parquet as pq

    directory = Path(directory)
    _verify_if_manifest(directory)
    meta = _spark_metadata(directory)
    uids = (meta.get("paramMap") or {}).get("stageUids") or []
    folders = {p.name.split("_", 1)[1]: p for p in (directory / "stages").iterdir() if p.is_dir()}
    stages = []
    for uid in uids:
        if uid not in folders:
            raise InvalidArgumentError(f"load_spark_ml: {directory} lacks the stage {uid!r}.")
        folder = folders[uid]
        tables = {}
        for sub in sorted(p for p in folder.iterdir() if p.is_dir() and p.name != "metadata"):
            parts = sorted(sub.glob("*.parquet"))
            tables[sub.name] = [row for part in parts for row in pq.read_table(part).to_pylist()]
        stages.append({"metadata": _spark_metadata(folder), **tables})
    return stages


def _spark_metadata(folder: Path) -> dict[str, Any]:
    parts = sorted((folder / "metadata").glob("part-*"))
    if not parts:
        raise InvalidArgumentError(f"load_spark_ml: {folder / 'metadata'} holds no metadata file.")
    return json.loads(parts[0].read_text(encoding="utf-8").splitlines()[0])


# ----------------------------------------------------------------------------------- pickle


def load_pickle(path: Path, *, trust_pickle: bool = False) -> Any:
    """Load a pickle/joblib file — only with ``trust_pickle=True`` (and then with a warning).

    Unpickling runs arbitrary code from the file, so by default this raises
    :class:`UnsafeFormatError` and reads nothing.
    """
    path = Path(path)
    if not trust_pickle:
        raise UnsafeFormatError(
            f"Refusing to load '{path}': pickle/joblib files can run arbitrary code when loaded. "
            "Store the model in a safe format instead (save_xgboost, save_sklearn, save_torch), "
            "or, if you produced this file yourself, call load_pickle(path, trust_pickle=True)."
        )
    _verify_if_manifest(path.parent)
    warnings.warn(
        f"Loading pickle file '{path}' with trust_pickle=True: this runs code from the file. "
        "Prefer a safe format (XGBoost JSON, skops, safetensors).",
        UserWarning,
        stacklevel=2,
    )
    import joblib

    return joblib.load(path)


def load_model(
    directory: Path, *, trusted: list[str] | None = None, trust_pickle: bool = False
) -> Any:
    """Load whatever safe format ``directory`` holds (XGBoost, LightGBM, skops or safetensors).

    A torch model comes back as ``(state_dict, config)``. A directory holding only a single
    pickle/joblib file is loaded through :func:`load_pickle` (so ``trust_pickle`` applies).
    """
    directory = Path(directory)
    if (directory / XGBOOST_META).is_file():
        return load_xgboost(directory)
    if (directory / LIGHTGBM_META).is_file():
        return load_lightgbm(directory)
    if (directory / SKOPS_FILE).is_file():
        return load_sklearn(directory, trusted=trusted)
    if (directory / TORCH_WEIGHTS).is_file():
        return load_torch_state(directory)
    pickles = [p for p in directory.iterdir() if p.suffix.lower() in PICKLE_SUFFIXES]
    if len(pickles) == 1:
        return load_pickle(pickles[0], trust_pickle=trust_pickle)
    raise InvalidArgumentError(
        f"load_model: {directory} holds no recognised model ({XGBOOST_META}, {LIGHTGBM_META}, "
        f"{SKOPS_FILE}, "
        f"{TORCH_WEIGHTS} or a single pickle file). Load it with the matching load_* function."
    )


# ---------------------------------------------------------------------------------- helpers


def _verify_if_manifest(directory: Path) -> None:
    """Verify the downloaded model version ``directory`` belongs to (itself or a parent up to
    three levels up, e.g. ``<version>/model``), if it belongs to one."""
    root = find_version_root(directory)
    if root is not None:
        verify_directory(root, label=f"'{root}'")


def _read_json(path: Path, owner: str) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidArgumentError(
            f"{owner}: {path} does not exist. Was the model saved with the matching save_* "
            "function?"
        ) from None
