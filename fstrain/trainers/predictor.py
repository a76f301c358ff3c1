"""Fitted models behind one small interface, saved in safe formats and rebuilt without pickle.

Every predictor takes a pandas DataFrame of raw features (the same columns as at training time;
``image_path`` for the CNN) and returns class probabilities. ``save(directory)`` writes:

- ``predictor.json``: kind, framework, feature names/dtypes, label classes, file list;
- ``preprocessor/``: the fitted ``ColumnTransformer`` via skops (tabular kinds);
- ``model/``: XGBoost JSON, LightGBM text, skops (scikit-learn) or safetensors +
  ``config.json`` (torch).

:func:`load_predictor` rebuilds any kind from those files (the model-validation pipeline uses
it). :attr:`Predictor.explain_target` exposes the underlying booster/estimator/module and the
function that turns a DataFrame into its input matrix, for SHAP.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from fstrain.kernel.errors import InvalidArgumentError, NotFoundError
from fstrain.trainers.data import FeatureSchema, LabelInfo

if TYPE_CHECKING:  # pragma: no cover
    from fstrain.trainers.calibration import Calibration

FORMAT_VERSION = 1
PREDICTOR_FILE = "predictor.json"
#: kind -> (module, function(directory, predictor.json info)) of predictors that live beside
#: their trainer (the optional frameworks, imported only when such a model is loaded).
FRAMEWORK_LOADERS: dict[str, tuple[str, str]] = {
    "catboost": ("fstrain.trainers.catboost_trainer", "load_catboost_predictor"),
    "keras_mlp": ("fstrain.trainers.keras_trainer", "load_keras_predictor"),
    "flax_mlp": ("fstrain.trainers.flax_trainer", "load_flax_predictor"),
}


@dataclass(frozen=True)
class ExplainTarget:
    """What SHAP needs: the raw model and how a DataFrame becomes its input. The explained
    output is the model's own (margin or probability), before any :attr:`_Base.calibration`:
    a prior correction only shifts the margin, so the attributions are the same.

    Attributes:
        kind: ``xgboost``, ``lightgbm``, ``sklearn_logreg``, ``sklearn_rf``, ``mlp`` or ``cnn``.
        model: ``xgboost.Booster``, ``lightgbm.Booster``, a scikit-learn estimator or a ``torch.nn.Module`` (eval mode;
            outputs logits).
        transform: DataFrame → model input (float32 matrix, or ``(N, 1, H, W)`` images).
        feature_names: names of the transformed columns (tabular) or ``["pixels"]``.
        classes: label classes, in probability-column order.
    """

    kind: str
    model: Any
    transform: Callable[[pd.DataFrame], np.ndarray]
    feature_names: list[str]
    classes: tuple[Any, ...]


@runtime_checkable
class Predictor(Protocol):
    """A fitted classifier over raw feature DataFrames."""

    kind: str
    labels: LabelInfo

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Positive-class probability ``(n,)`` (binary) or ``(n, K)`` class probabilities."""
        ...

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Predicted labels (original label values)."""
        ...

    def save(self, directory: Path) -> dict[str, Any]:
        """Write safe-format files + ``predictor.json``; return ``{framework, files, ...}``."""
        ...

    @property
    def explain_target(self) -> ExplainTarget:
        """The underlying model and its input transform (for SHAP)."""
        ...


class _Base:
    kind: str
    labels: LabelInfo
    framework: str
    #: the probability correction fitted at training time (saved in predictor.json and applied
    #: to every prediction; see :mod:`fstrain.trainers.calibration`)
    calibration: Calibration | None = None

    def raw_proba_matrix(self, X: Any) -> np.ndarray:  # pragma: no cover - abstract
        """The model's own class probabilities (before :attr:`calibration`)."""
        raise NotImplementedError

    def predict_proba_matrix(self, X: Any) -> np.ndarray:
        """Class-probability matrix ``(n, K)`` of an already transformed input, corrected by
        :attr:`calibration` (regression values pass unchanged)."""
        raw = self.raw_proba_matrix(X)
        if self.calibration is None or self.labels.task == "regression":
            return raw
        return self.calibration.apply(raw)

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Positive-class probability ``(n,)`` (binary) or ``(n, K)`` class probabilities."""
        if self.labels.task == "regression":
            raise InvalidArgumentError(
                f"{self.kind} model for label {self.labels.name!r} is a regression: it has no "
                "class probabilities. Use predict()."
            )
        mat = self.predict_proba_matrix(self._input(X))
        return mat[:, 1] if self.labels.n_classes == 2 else mat

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Predicted labels (argmax; 0.5 threshold for binary), or values for a regression."""
        mat = self.predict_proba_matrix(self._input(X))
        if self.labels.task == "regression":
            return np.asarray(mat, dtype=np.float64)
        return self.labels.decode(mat.argmax(axis=1))

    def _input(self, X: pd.DataFrame) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _write_manifest(self, directory: Path, body: dict[str, Any], files: list[Path]) -> dict:
        rel = sorted(str(Path(f).resolve().relative_to(directory.resolve())) for f in files)
        info = {
            "format_version": FORMAT_VERSION,
            "kind": self.kind,
            "framework": self.framework,
            "labels": self.labels.to_json(),
            "files": rel,
            **body,
        }
        if self.calibration is not None:
            info["calibration"] = self.calibration.to_json()
        (directory / PREDICTOR_FILE).write_text(json.dumps(info, indent=2, sort_keys=True))
        return {"framework": self.framework, "kind": self.kind, "files": rel + [PREDICTOR_FILE]}


class TabularPredictor(_Base):
    """Preprocessing ``ColumnTransformer`` + XGBoost/LightGBM booster or scikit-learn estimator."""

    def __init__(
        self,
        *,
        kind: str,
        schema: FeatureSchema,
        preprocessor: Any,
        model: Any,
        labels: LabelInfo,
        params: dict[str, Any] | None = None,
    ) -> None:
        self.kind = kind
        self.framework = kind if kind in ("xgboost", "lightgbm") else "sklearn"
        self.schema = schema
        self.preprocessor = preprocessor
        self.model = model
        self.labels = labels
        self.params = params or {}

    def _input(self, X: pd.DataFrame) -> np.ndarray:
        from fstrain.trainers.preprocessing import transform

        return transform(self.preprocessor, self.schema, X)

    def raw_proba_matrix(self, X: np.ndarray) -> np.ndarray:
        """The model's class-probability matrix ``(n, K)`` for a transformed matrix."""
        if self.kind == "xgboost":
            import xgboost as xgb

            out = self.model.predict(xgb.DMatrix(X))
        elif self.kind == "lightgbm":
            out = self.model.predict(X)
        else:
            out = self.model.predict_proba(X)
        out = np.asarray(out, dtype=np.float64)
        if self.labels.task == "regression":
            return out  # predicted values, not probabilities
        return np.column_stack([1.0 - out, out]) if out.ndim == 1 else out

    @property
    def explain_target(self) -> ExplainTarget:
        """Booster/estimator + the preprocessing transform."""
        from fstrain.trainers.preprocessing import feature_names_out

        return ExplainTarget(
            kind=self.kind, model=self.model, transform=self._input,
            feature_names=feature_names_out(self.preprocessor), classes=self.labels.classes,
        )

    def save(self, directory: Path) -> dict[str, Any]:
        """skops preprocessor + XGBoost JSON / LightGBM text booster (or skops estimator) +
        predictor.json."""
        from fstrain.trainers import formats

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        files = list(formats.save_sklearn(self.preprocessor, directory / "preprocessor"))
        if self.kind == "xgboost":
            files += formats.save_xgboost(self.model, directory / "model", fmt="json")
        elif self.kind == "lightgbm":
            files += formats.save_lightgbm(self.model, directory / "model")
        else:
            files += formats.save_sklearn(self.model, directory / "model")
        body = {"features": self.schema.to_json(), "params": _jsonable(self.params)}
        return self._write_manifest(directory, body, files)


class TorchPredictor(_Base):
    """A torch module (``mlp`` over preprocessed features, ``cnn`` over image paths)."""

    framework = "torch"

    def __init__(
        self,
        *,
        kind: str,
        module: Any,
        arch: dict[str, Any],
        labels: LabelInfo,
        schema: FeatureSchema | None = None,
        preprocessor: Any = None,
        image_column: str = "image_path",
        image_loader: Callable[[str], np.ndarray] | None = None,
        batch_size: int = 1024,
    ) -> None:
        self.kind = kind
        self.module = module.eval()
        self.arch = arch
        self.labels = labels
        self.schema = schema
        self.preprocessor = preprocessor
        self.image_column = image_column
        self.image_loader = image_loader
        self.batch_size = batch_size

    def _input(self, X: pd.DataFrame) -> np.ndarray:
        if self.kind == "cnn":
            from fstrain.trainers.images import load_images

            if self.image_column not in X.columns:
                raise InvalidArgumentError(
                    f"The cnn model reads images from column {self.image_column!r}, which X "
                    f"lacks (columns: {list(X.columns)})."
                )
            return load_images(X[self.image_column].astype(str).tolist(), self.image_loader)
        from fstrain.trainers.preprocessing import transform

        if self.schema is None:
            raise InvalidArgumentError(
                f"The {self.kind} model was built without the feature schema it prepares X "
                "with (only a cnn, which reads images, has none).")
        return transform(self.preprocessor, self.schema, X)

    def raw_proba_matrix(self, X: np.ndarray) -> np.ndarray:
        """Softmax of the module's logits, in fp32, batched, on the module's device."""
        import torch

        device = next(self.module.parameters()).device
        outs = []
        with torch.inference_mode():
            for start in range(0, len(X), self.batch_size):
                xb = torch.from_numpy(np.ascontiguousarray(X[start : start + self.batch_size]))
                logits = self.module(xb.to(device)).float()
                outs.append(torch.softmax(logits, dim=1).cpu().numpy())
        if not outs:
            return np.zeros((0, self.labels.n_classes))
        return np.concatenate(outs).astype(np.float64)

    @property
    def explain_target(self) -> ExplainTarget:
        """The module (logits) + DataFrame → input transform."""
        if self.kind == "cnn":
            names = ["pixels"]
        else:
            from fstrain.trainers.preprocessing import feature_names_out

            names = feature_names_out(self.preprocessor)
        return ExplainTarget(
            kind=self.kind, model=self.module, transform=self._input, feature_names=names,
            classes=self.labels.classes,
        )

    def save(self, directory: Path) -> dict[str, Any]:
        """safetensors weights + JSON arch (+ skops preprocessor for ``mlp``) + predictor.json."""
        from fstrain.trainers import formats

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        files: list[Path] = []
        if self.preprocessor is not None:
            files += formats.save_sklearn(self.preprocessor, directory / "preprocessor")
        state = {k: v.detach().cpu() for k, v in self.module.state_dict().items()}
        files += formats.save_torch(state, directory / "model", self.arch)
        body: dict[str, Any] = {"arch": self.arch, "image_column": self.image_column}
        if self.schema is not None:
            body["features"] = self.schema.to_json()
        return self._write_manifest(directory, body, files)


def load_predictor(
    directory: Path,
    *,
    image_loader: Callable[[str], np.ndarray] | None = None,
    device: str = "cpu",
) -> Predictor:
    """Rebuild a predictor saved by ``Predictor.save`` (any kind), without pickle, with the
    probability correction it was saved with.

    Raises:
        NotFoundError: ``predictor.json`` is missing.
    """
    directory = Path(directory)
    manifest_path = directory / PREDICTOR_FILE
    if not manifest_path.is_file():
        raise NotFoundError(
            f"No {PREDICTOR_FILE} in {str(directory)!r}: not a directory written by "
            "Predictor.save()."
        )
    info = json.loads(manifest_path.read_text())
    predictor = _load_model(directory, info, image_loader=image_loader, device=device)
    if info.get("calibration"):
        from fstrain.trainers.calibration import Calibration

        predictor.calibration = Calibration.from_json(info["calibration"])  # type: ignore[attr-defined]
    return predictor


def _load_model(directory: Path, info: dict[str, Any], *,
                image_loader: Callable[[str], np.ndarray] | None, device: str) -> Predictor:
    from fstrain.trainers import formats

    kind = info["kind"]
    if kind in FRAMEWORK_LOADERS:
        import importlib

        module_name, function = FRAMEWORK_LOADERS[kind]
        load: Callable[[Path, dict[str, Any]], Predictor] = getattr(
            importlib.import_module(module_name), function)
        return load(directory, info)
    if kind == "lora":
        from fstrain.trainers.lora_predictor import load_lora_predictor

        return load_lora_predictor(directory, info, device=device)
    tabular = {"xgboost": formats.load_xgboost, "lightgbm": formats.load_lightgbm,
               "sklearn_logreg": formats.load_sklearn, "sklearn_rf": formats.load_sklearn}
    if kind not in (*tabular, "mlp", "cnn", "spark_gbt", "spark_lr"):
        raise InvalidArgumentError(
            f"{PREDICTOR_FILE} in {str(directory)!r} has unknown kind {kind!r}.")
    labels = LabelInfo.from_json(info["labels"])
    schema = FeatureSchema.from_json(info["features"]) if "features" in info else None
    if schema is None and kind != "cnn":  # cnn reads images; the others predict from features
        raise InvalidArgumentError(
            f"{PREDICTOR_FILE} in {str(directory)!r}: a {kind!r} model predicts from features, "
            "but it records no 'features' schema.")
    preprocessor = None
    if (directory / "preprocessor").is_dir():
        preprocessor = formats.load_sklearn(directory / "preprocessor")
    if kind in ("mlp", "cnn"):
        return _load_torch(directory, info, kind, labels, schema, preprocessor, image_loader,
                           device)
    assert schema is not None  # refused above for every kind but cnn
    if kind in ("spark_gbt", "spark_lr"):
        from fstrain.trainers.spark_predictor import load_spark_predictor

        return load_spark_predictor(directory, info, labels, schema)
    return TabularPredictor(
        kind=kind, schema=schema, preprocessor=preprocessor,
        model=tabular[kind](directory / "model"), labels=labels, params=info.get("params"),
    )


def _load_torch(directory: Path, info: dict[str, Any], kind: str, labels: LabelInfo,
                schema: FeatureSchema | None, preprocessor: Any,
                image_loader: Callable[[str], np.ndarray] | None, device: str) -> Predictor:
    from fstrain.trainers import formats
    from fstrain.trainers.nets import build_net

    state, arch = formats.load_torch_state(directory / "model")
    module = build_net(arch)
    module.load_state_dict(state)
    module.to(device)
    return TorchPredictor(
        kind=kind, module=module, arch=arch, labels=labels, schema=schema,
        preprocessor=preprocessor, image_column=info.get("image_column", "image_path"),
        image_loader=image_loader,
    )


def _jsonable(params: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in params.items():
        try:
            json.dumps(value)
            out[key] = value
        except TypeError:
            out[key] = repr(value)
    return out
