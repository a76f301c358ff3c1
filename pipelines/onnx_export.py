"""``fstrain registry export-onnx``: a registered version → ``onnx/model.onnx`` beside it.

The version's predictor (preprocessing + model, see :mod:`pipelines.trainers.onnx_export`) is
converted to one ONNX graph and run in ONNX Runtime on the test split of the training-dataset
version it was trained on; only when its probabilities equal the native model's within
``atol`` are ``onnx/model.onnx`` and ``onnx/check.json`` (the comparison, the graph's input
contract and its sha256) attached to the version, each hashed in the manifest. A failed check
writes nothing.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from fstrain.kernel.errors import ConfigError, IntegrityError

ONNX_PATH = "onnx/model.onnx"
CHECK_PATH = "onnx/check.json"


def export_onnx(project: Any, model: Any, *, atol: float = 1e-4) -> dict[str, Any]:
    """Export, check on the test split and attach; returns the check record."""
    from pipelines.carve import read_three_way
    from pipelines.trainers.onnx_export import check_onnx, to_onnx
    from pipelines.trainers.predictor import load_predictor

    label = f"{model.name}:{model.version}"
    if not model.feature_view_name or model.training_dataset_version is None:
        raise ConfigError(f"model {label} was registered without its lineage: there is no "
                          "test split to check an ONNX export against.")
    fv = project.get_feature_store().get_feature_view(model.feature_view_name,
                                                      model.feature_view_version)
    carve = (model.manifest.get("training_config") or {}).get("validation_split")
    td = model.training_dataset_version
    (_, _, X_test, _, _, _), _ = read_three_way(fv, td, carve=carve)
    with tempfile.TemporaryDirectory(prefix="fstrain-onnx-") as scratch:
        folder = Path(model.download(scratch))
        if not (folder / "predictor.json").is_file():
            raise ConfigError(f"model {label} was not trained by fstrain (no predictor.json); "
                              "ONNX export converts fstrain's tabular predictors.")
        predictor = load_predictor(folder)
        blob = to_onnx(predictor)
        check = check_onnx(predictor, blob, X_test, atol=atol)
    check.update(split="test", training_dataset_version=td, model=label, kind=predictor.kind)
    if not check["passed"]:
        raise IntegrityError(
            f"ONNX export of {label}: ONNX Runtime's probabilities differ from the native "
            f"model's by up to {check['max_abs_diff']:.3g} on {check['rows']} test rows "
            f"(atol {atol:g}); nothing was attached.")
    model.add_attachment(ONNX_PATH, blob)
    model.write_attachment(CHECK_PATH, check)
    return {**check, "path": ONNX_PATH}
