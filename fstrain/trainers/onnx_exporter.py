"""The ``onnx`` model exporter: ``model.export("onnx")`` (and ``fstrain registry export-onnx``).

fstrain's own format: the registry imports it directly (:data:`model_registry.exporters.BUILT_IN`;
no entry point is looked up for it).

The version's predictor (preprocessing + model, see :mod:`fstrain.trainers.onnx_export`) is
converted to one ONNX graph and run in ONNX Runtime on the test split of the training-dataset
version it was trained on, read through the model's own feature view (the registry reaches its
project's feature store). Only when its probabilities equal the native model's within ``atol``
does the exporter hand ``onnx/model.onnx`` and ``onnx/check.json`` (the comparison, the graph's
input contract and its sha256) to ``Model.export``, which attaches them, each hashed in the
manifest. A failed check raises and writes nothing.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

from fstrain.kernel.errors import ConfigError, IntegrityError, InvalidArgumentError
from model_registry.api import Exported

ONNX_PATH = "onnx/model.onnx"
CHECK_PATH = "onnx/check.json"


def export(model: Any, /, *, atol: float = 1e-4) -> Exported:
    """Convert ``model`` (a saved registry version trained by fstrain) to ONNX and check it on
    its test split; the files to attach and the check record (``path`` added).

    Raises:
        ConfigError: the model has no lineage (no test split), was not trained by fstrain, or
            the ``onnx`` extra is missing.
        InvalidArgumentError: ``atol`` is not a finite number >= 0, or the model's kind,
            task or calibration cannot be exported.
        IntegrityError: ONNX Runtime's probabilities differ from the native model's by more
            than ``atol`` on some test row (nothing is attached).
    """
    from feature_store.core.carve import read_three_way
    from fstrain.trainers.onnx_export import check_onnx, to_onnx
    from fstrain.trainers.predictor import load_predictor

    label = f"{model.name}:{model.version}"
    atol = _check_atol(atol, label)
    td = model.training_dataset_version
    if not model.feature_view_name or td is None:
        raise ConfigError(f"model {label} was registered without its lineage: there is no "
                          "test split to check an ONNX export against.")
    with tempfile.TemporaryDirectory(prefix="fstrain-onnx-") as scratch:
        folder = Path(model.download(scratch))
        if not (folder / "predictor.json").is_file():
            raise ConfigError(f"model {label} was not trained by fstrain (no predictor.json); "
                              "ONNX export converts fstrain's tabular predictors.")
        predictor = load_predictor(folder)
        blob = to_onnx(predictor)
        carve = (model.manifest.get("training_config") or {}).get("validation_split")
        fv = model.get_feature_view(init=False)
        (_, _, X_test, _, _, _), _ = read_three_way(fv, td, carve=carve)
        check = check_onnx(predictor, blob, X_test, atol=atol)
    check.update(split="test", training_dataset_version=td, model=label, kind=predictor.kind)
    if not check["passed"]:
        raise IntegrityError(
            f"ONNX export of {label}: ONNX Runtime's probabilities differ from the native "
            f"model's by up to {check['max_abs_diff']:.3g} on {check['rows']} test rows "
            f"(atol {atol:g}); nothing was attached.")
    return Exported(files={ONNX_PATH: blob, CHECK_PATH: check},
                    record={**check, "path": ONNX_PATH})


def _check_atol(atol: Any, label: str) -> float:
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or not (
            math.isfinite(atol) and atol >= 0):
        raise InvalidArgumentError(f"ONNX export of {label}: atol must be a finite number "
                                   f">= 0. Got {atol!r} instead.")
    return float(atol)
