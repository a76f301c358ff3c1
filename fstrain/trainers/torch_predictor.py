"""The torch predictor: an ``mlp`` over preprocessed features or a ``cnn`` over image paths, saved
as safetensors weights + its JSON architecture (+ the skops preprocessor of an ``mlp``) and
rebuilt from those files (:func:`load_torch_predictor`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import InvalidArgumentError
from fstrain.trainers import formats
from fstrain.trainers.data import FeatureSchema, LabelInfo
from fstrain.trainers.predictor_base import ExplainTarget, PredictorBase
from fstrain.trainers.images import load_images
from fstrain.trainers.preprocessing import feature_names_out, transform


class TorchPredictor(PredictorBase):
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
            if self.image_column not in X.columns:
                raise InvalidArgumentError(
                    f"The cnn model reads images from column {self.image_column!r}, which X "
                    f"lacks (columns: {list(X.columns)})."
                )
            return load_images(X[self.image_column].astype(str).tolist(), self.image_loader)

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
            names = feature_names_out(self.preprocessor)
        return ExplainTarget(
            kind=self.kind, model=self.module, transform=self._input, feature_names=names,
            classes=self.labels.classes,
        )

    def save(self, directory: Path) -> dict[str, Any]:
        """safetensors weights + JSON arch (+ skops preprocessor for ``mlp``) + predictor.json."""
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


def load_torch_predictor(directory: Path, info: dict[str, Any], kind: str, labels: LabelInfo,
                         schema: FeatureSchema | None, preprocessor: Any,
                         image_loader: Callable[[str], np.ndarray] | None,
                         device: str) -> TorchPredictor:
    """Rebuild a :class:`TorchPredictor` from the files its ``save`` wrote, on ``device``."""
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
