"""ONNX export of a tabular predictor: preprocessing and model in one graph, checked with
ONNX Runtime.

The graph takes one input per raw feature column (``[N, 1]``: numeric columns as float32,
categorical columns as strings, a **missing category as the empty string** ``""``; a missing
number as NaN) and outputs ``model_probabilities`` ``[N, K]`` (and ``model_label``). It is the
train-fitted ``ColumnTransformer`` converted by skl2onnx, joined (``onnx.compose``) to the
model converted by:

==================  ====================================================================
kind                converter
==================  ====================================================================
sklearn_logreg/rf   skl2onnx (``zipmap`` off: a probability tensor)
xgboost             onnxmltools ``convert_xgboost``
lightgbm            onnxmltools ``convert_lightgbm`` (``zipmap`` off)
mlp (torch)         ``torch.onnx.export`` (TorchScript exporter) with a softmax head
==================  ====================================================================

:func:`check_onnx` runs the graph in ONNX Runtime and compares its probabilities with the
native predictor's on the rows given (the test split, in the registry command).
"""

from __future__ import annotations

import copy
import hashlib
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError, InvalidArgumentError

SUPPORTED = ("xgboost", "lightgbm", "sklearn_logreg", "sklearn_rf", "mlp")
OPSET = 15  # the newest main opset onnxmltools' tree converters target
ONNX_ML_OPSET = 3
PROBABILITIES = "model_probabilities"


def _require() -> None:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        import skl2onnx  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the extra is installed in CI
        raise ConfigError("ONNX export needs onnx, onnxruntime, skl2onnx and onnxmltools: "
                          "pip install 'fstrain[onnx]'.") from exc


def _preprocessor_onnx(predictor: Any) -> Any:
    """The ColumnTransformer as ONNX; categorical imputers read ``""`` as missing."""
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType

    pre = copy.deepcopy(predictor.preprocessor)
    for _name, trans, _cols in pre.transformers_:
        impute = getattr(trans, "named_steps", {}).get("impute")
        if impute is not None and impute.strategy == "constant":
            impute.missing_values = ""  # ONNX strings have no NaN
    schema = predictor.schema
    types = ([(c, FloatTensorType([None, 1])) for c in schema.numeric]
             + [(c, StringTensorType([None, 1])) for c in schema.categorical])
    try:
        return convert_sklearn(pre, initial_types=types,
                               target_opset={"": OPSET, "ai.onnx.ml": ONNX_ML_OPSET})
    except (NotImplementedError, RuntimeError, ValueError) as exc:
        raise InvalidArgumentError(f"ONNX export: the {predictor.kind} model's preprocessing "
                                   f"cannot be converted: {exc}") from exc


def _model_onnx(predictor: Any, n_features: int) -> Any:
    """The estimator alone, input ``features`` ``[N, n_features]`` float32."""
    kind = predictor.kind
    if kind == "mlp":
        return _torch_onnx(predictor.module, n_features)
    model = predictor.model
    if kind in ("xgboost", "lightgbm"):
        import onnxmltools
        from onnxmltools.convert.common.data_types import FloatTensorType as MLFloat

        types = [("features", MLFloat([None, n_features]))]
        if kind == "xgboost":
            return onnxmltools.convert_xgboost(model, initial_types=types, target_opset=OPSET)
        return onnxmltools.convert_lightgbm(model, initial_types=types, target_opset=OPSET,
                                            zipmap=False)
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType

    return convert_sklearn(model, initial_types=[("features", FloatTensorType([None,
                                                                                n_features]))],
                           options={id(model): {"zipmap": False}},
                           target_opset={"": OPSET, "ai.onnx.ml": ONNX_ML_OPSET})


def _torch_onnx(module: Any, n_features: int) -> Any:
    import onnx
    import torch

    class Probabilities(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = module

        def forward(self, x: Any) -> Any:
            return torch.softmax(self.inner(x).float(), dim=1)

    head = Probabilities().eval().cpu()
    # torch.onnx.export documents a path as its target (a file object is not in its signature)
    with tempfile.TemporaryDirectory(prefix="fstrain-onnx-") as tmp:
        path = Path(tmp) / "model.onnx"
        torch.onnx.export(head, (torch.zeros(2, n_features),), path, dynamo=False,
                          input_names=["features"], output_names=["probabilities"],
                          dynamic_axes={"features": {0: "n"}, "probabilities": {0: "n"}},
                          opset_version=OPSET)
        return onnx.load_from_string(path.read_bytes())


def _unify_opsets(*models: Any) -> None:
    """Declare the same opset versions and IR version in every model (merge needs it)."""
    from onnx import helper

    versions: dict[str, int] = {}
    for m in models:
        for o in m.opset_import:
            versions[o.domain] = max(versions.get(o.domain, 0), o.version)
    ir = max(m.ir_version for m in models)
    for m in models:
        del m.opset_import[:]
        m.opset_import.extend(helper.make_opsetid(d, v) for d, v in sorted(versions.items()))
        m.ir_version = ir


def to_onnx(predictor: Any) -> bytes:
    """The predictor (preprocessing + model) as one serialised ONNX model."""
    _require()
    from onnx import checker, compose

    if predictor.kind not in SUPPORTED or predictor.labels.task == "regression":
        raise InvalidArgumentError(
            f"ONNX export supports classifiers of kinds {', '.join(SUPPORTED)}; this model is "
            f"a {predictor.labels.task} {predictor.kind!r}.")
    pre = _preprocessor_onnx(predictor)
    n_features = len(predictor.explain_target.feature_names)
    model = _model_onnx(predictor, n_features)
    _unify_opsets(pre, model)
    merged = compose.merge_models(pre, model, io_map=[(pre.graph.output[0].name, "features")],
                                  prefix1="pre_", prefix2="model_")
    merged.doc_string = f"fstrain {predictor.kind} classifier; classes {list(predictor.labels.classes)}"
    _append_calibration(merged, predictor.calibration)
    checker.check_model(merged)
    return bytes(merged.SerializeToString())


def _append_calibration(model: Any, calibration: Any) -> None:
    """Append the saved predictor's probability correction to the graph, so the exported
    model answers what the registered one does. The prior (odds) correction is exact in ONNX
    (divide each class by its training weight, renormalise); a Platt or isotonic correction
    fitted on the validation split is refused rather than exported without it."""
    if calibration is None or (calibration.class_weights is None and calibration.platt is None
                               and calibration.isotonic is None):
        return
    if calibration.platt is not None or calibration.isotonic is not None:
        raise InvalidArgumentError(
            f"ONNX export carries the prior (class-weight) probability correction only; this "
            f"model's {calibration.method!r} calibration is not in the graph. Retrain with "
            "calibration: prior (or none) to export it.")
    from onnx import TensorProto, helper

    graph = model.graph
    raw = "uncalibrated_probabilities"
    for node in graph.node:
        node.output[:] = [raw if o == PROBABILITIES else o for o in node.output]
        node.input[:] = [raw if i == PROBABILITIES else i for i in node.input]
    weights = [float(w) for w in calibration.class_weights]
    graph.initializer.extend([
        helper.make_tensor("prior_weights", TensorProto.FLOAT, [1, len(weights)], weights),
        helper.make_tensor("prior_axes", TensorProto.INT64, [1], [1]),
    ])
    graph.node.extend([
        helper.make_node("Div", [raw, "prior_weights"], ["prior_scaled"]),
        helper.make_node("ReduceSum", ["prior_scaled", "prior_axes"], ["prior_total"],
                         keepdims=1),
        helper.make_node("Div", ["prior_scaled", "prior_total"], [PROBABILITIES]),
    ])


def onnx_inputs(schema: Any, X: pd.DataFrame) -> dict[str, np.ndarray]:
    """The graph's feeds for raw feature rows (missing categories → ``""``)."""
    frame = schema.prepare(X)
    feeds = {f"pre_{c}": frame[c].to_numpy(np.float32).reshape(-1, 1) for c in schema.numeric}
    for c in schema.categorical:
        values = frame[c].to_numpy(object)
        values = np.where(pd.isna(values), "", values).astype(str)
        feeds[f"pre_{c}"] = values.reshape(-1, 1)
    return feeds


def check_onnx(predictor: Any, blob: bytes, X: pd.DataFrame, *, atol: float = 1e-4
               ) -> dict[str, Any]:
    """Run ``blob`` in ONNX Runtime on ``X`` and compare with the native probabilities."""
    import onnxruntime as ort

    session = ort.InferenceSession(blob, providers=["CPUExecutionProvider"])
    onnx_proba = np.asarray(session.run([PROBABILITIES], onnx_inputs(predictor.schema, X))[0],
                            dtype=np.float64)
    native = np.asarray(predictor.predict_proba(X), dtype=np.float64)
    if native.ndim == 1:
        native = np.column_stack([1.0 - native, native])
    diff = float(np.abs(onnx_proba - native).max()) if len(X) else 0.0
    agree = float((onnx_proba.argmax(axis=1) == native.argmax(axis=1)).mean()) if len(X) else 1.0
    return {"rows": int(len(X)), "max_abs_diff": diff, "atol": atol, "passed": diff <= atol,
            "argmax_agreement": agree, "onnxruntime_version": ort.__version__,
            "opset": OPSET, "sha256": hashlib.sha256(blob).hexdigest(),
            "inputs": {"numeric (float32, NaN = missing)": list(predictor.schema.numeric),
                       "categorical (string, '' = missing)": list(predictor.schema.categorical)},
            "output": f"{PROBABILITIES} [N, {predictor.labels.n_classes}] in class order "
                      f"{list(predictor.labels.classes)}"}
