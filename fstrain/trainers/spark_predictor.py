"""Score a saved Spark MLlib ``PipelineModel`` without Spark, from MLlib's own persisted files.

MLlib writes each stage as JSON metadata plus Parquet data (imputer surrogates, string-indexer
labels, one-hot category sizes, GBT tree nodes and weights, logistic-regression coefficients).
:class:`SparkPredictor` reads those files (:func:`fstrain.trainers.formats.load_spark_ml`) and
applies the same arithmetic in numpy, so model validation (metrics, slices, SHAP) needs neither
a JVM nor a Spark session; a test checks the probabilities against Spark's own ``transform``.

Supported stages: ``ImputerModel``, ``StringIndexerModel`` (``handleInvalid="keep"``),
``OneHotEncoderModel``, ``VectorAssembler``, ``GBTClassificationModel`` (logistic loss) and
``LogisticRegressionModel`` (binomial or multinomial) — the stages the Spark trainers build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import InvalidArgumentError, SchemaMismatchError
from fstrain.trainers.data import FeatureSchema, LabelInfo
from fstrain.trainers.predictor_base import ExplainTarget, PredictorBase
from fstrain.trainers import formats

SPARK_MODELS = ("spark_gbt", "spark_lr")


def _params(stage: dict[str, Any]) -> dict[str, Any]:
    meta = stage["metadata"]
    return {**(meta.get("defaultParamMap") or {}), **(meta.get("paramMap") or {})}


def _vector(v: dict[str, Any]) -> np.ndarray:
    """An MLlib vector (dense ``type=1`` or sparse ``type=0``) as a dense array."""
    if v["type"] == 1:
        return np.asarray(v["values"], dtype=np.float64)
    out = np.zeros(int(v["size"]))
    out[np.asarray(v["indices"], dtype=np.int64)] = v["values"]
    return out


def _matrix(m: dict[str, Any]) -> np.ndarray:
    """An MLlib matrix (dense or sparse, column- or row-major) as a dense ``(rows, cols)``."""
    rows, cols, values = int(m["numRows"]), int(m["numCols"]), np.asarray(m["values"], float)
    if m["type"] == 1:  # dense: column-major unless transposed
        return values.reshape(rows, cols) if m["isTransposed"] else values.reshape(cols, rows).T
    out = np.zeros((rows, cols))
    ptrs, idx = m["colPtrs"], m["rowIndices"]
    major = rows if m["isTransposed"] else cols  # CSR when transposed, else CSC
    for j in range(major):
        for p in range(ptrs[j], ptrs[j + 1]):
            if m["isTransposed"]:
                out[j, idx[p]] = values[p]
            else:
                out[idx[p], j] = values[p]
    return out


class _Tree:
    """One regression tree of MLlib's GBT, as arrays indexed by node id."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        n = max(int(d["id"]) for d in nodes) + 1
        self.left = np.full(n, -1)
        self.right = np.full(n, -1)
        self.feature = np.zeros(n, dtype=np.int64)
        self.threshold = np.zeros(n)
        self.value = np.zeros(n)
        self.categorical = np.zeros(n, dtype=bool)
        width = max([int(d["split"]["numCategories"]) for d in nodes] + [1])
        self.left_categories = np.zeros((n, width), dtype=bool)
        for d in nodes:
            i = int(d["id"])
            self.left[i], self.right[i] = d["leftChild"], d["rightChild"]
            self.value[i] = d["prediction"]
            split = d["split"]
            self.feature[i] = split["featureIndex"]
            if split["numCategories"] >= 0:  # categorical: the listed categories go left
                self.categorical[i] = True
                self.left_categories[i, np.asarray(split["leftCategoriesOrThreshold"], int)] = True
            elif split["leftCategoriesOrThreshold"]:
                self.threshold[i] = split["leftCategoriesOrThreshold"][0]

    def predict(self, X: np.ndarray) -> np.ndarray:
        node = np.zeros(len(X), dtype=np.int64)
        rows = np.arange(len(X))
        while True:
            inner = self.left[node] >= 0
            if not inner.any():
                return self.value[node]
            x = X[rows, self.feature[node]]
            width = self.left_categories.shape[1]
            cat = np.clip(np.nan_to_num(x), 0, width - 1).astype(np.int64)
            go_left = np.where(self.categorical[node], self.left_categories[node, cat],
                               x <= self.threshold[node])
            node = np.where(inner, np.where(go_left, self.left[node], self.right[node]), node)


class SparkPipeline:
    """The numpy twin of a saved MLlib ``PipelineModel`` (the stages above)."""

    def __init__(self, stages: list[dict[str, Any]]) -> None:
        self.stages = stages
        self.kinds = [s["metadata"]["class"].rsplit(".", 1)[-1] for s in stages]
        estimator = stages[-1]
        if self.kinds[-1] == "GBTClassificationModel":
            self.trees = [_Tree([r["nodeData"] for r in estimator["data"] if r["treeID"] == t])
                          for t in sorted({r["treeID"] for r in estimator["data"]})]
            weights = {r["_1"]: r["_3"] for r in estimator["treesMetadata"]}
            self.tree_weights = np.array([weights[t] for t in range(len(self.trees))])
        elif self.kinds[-1] == "LogisticRegressionModel":
            data = estimator["data"][0]
            self.coefficients = _matrix(data["coefficientMatrix"])
            self.intercepts = _vector(data["interceptVector"])
            self.multinomial = bool(data["isMultinomial"])
        else:
            raise InvalidArgumentError(f"SparkPipeline: unsupported estimator {self.kinds[-1]}.")

    def assemble(self, columns: dict[str, np.ndarray]) -> tuple[np.ndarray, list[str]]:
        """Run the feature stages; return the assembled matrix and its feature names."""
        names: dict[str, list[str]] = {c: [c] for c in columns}
        for kind, stage in zip(self.kinds[:-1], self.stages[:-1], strict=True):
            p = _params(stage)
            if kind == "ImputerModel":
                surrogate = stage["data"][0]
                for src, dst in zip(p["inputCols"], p["outputCols"], strict=True):
                    v = columns[src]
                    columns[dst] = np.where(np.isnan(v), surrogate[src], v)
                    names[dst] = [src]
            elif kind == "StringIndexerModel":
                for src, dst, labels in zip(p["inputCols"], p["outputCols"],
                                            stage["data"][0]["labelsArray"], strict=True):
                    index = pd.Index(labels)
                    codes = index.get_indexer(pd.Series(columns[src], dtype=object))
                    columns[dst] = np.where(codes < 0, len(labels), codes).astype(np.float64)
                    names[dst] = [src]
                    names[f"{dst}#labels"] = list(labels)
            elif kind == "OneHotEncoderModel":
                sizes = stage["data"][0]["categorySizes"]
                for (src, dst), size in zip(zip(p["inputCols"], p["outputCols"], strict=True),
                                            sizes, strict=True):
                    width = size - 1 if p.get("dropLast", True) else size
                    codes = columns[src].astype(np.int64)
                    out = np.zeros((len(codes), width))
                    hit = codes < width
                    out[np.flatnonzero(hit), codes[hit]] = 1.0
                    columns[dst] = out
                    base, labels = names[src][0], names.get(f"{src}#labels", [])
                    names[dst] = [f"{base}_{labels[i] if i < len(labels) else i}"
                                  for i in range(width)]
            elif kind == "VectorAssembler":
                parts = [columns[c] if columns[c].ndim == 2 else columns[c][:, None]
                         for c in p["inputCols"]]
                return np.hstack(parts), [n for c in p["inputCols"] for n in names[c]]
            else:
                raise InvalidArgumentError(f"SparkPipeline: unsupported stage {kind}.")
        raise InvalidArgumentError("SparkPipeline: the pipeline has no VectorAssembler.")

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """``(n, K)`` class probabilities of assembled feature rows."""
        if self.kinds[-1] == "GBTClassificationModel":
            margin = sum(w * t.predict(X) for w, t in zip(self.tree_weights, self.trees,
                                                         strict=True))
            p1 = 1.0 / (1.0 + np.exp(-2.0 * np.asarray(margin, dtype=np.float64)))
            return np.column_stack([1.0 - p1, p1])
        scores = X @ self.coefficients.T + self.intercepts
        if not self.multinomial:
            p1 = 1.0 / (1.0 + np.exp(-scores[:, 0]))
            return np.column_stack([1.0 - p1, p1])
        scores = scores - scores.max(axis=1, keepdims=True)
        e = np.exp(scores)
        return e / e.sum(axis=1, keepdims=True)


def spark_columns(schema: FeatureSchema, X: pd.DataFrame) -> dict[str, np.ndarray]:
    """Raw feature columns as the Spark trainer cast them: numbers/booleans/timestamps →
    float (epoch seconds), strings → ``str`` or None."""
    missing = [c for c in schema.names if c not in X.columns]
    if missing:
        raise SchemaMismatchError(
            f"X is missing feature column(s) {missing} the model was trained on "
            f"(expected {list(schema.names)})."
        )
    out: dict[str, np.ndarray] = {}
    for col in schema.numeric:
        s = X[col]
        if pd.api.types.is_datetime64_any_dtype(s.dtype):
            seconds = s.dt.tz_localize(None) if getattr(s.dt, "tz", None) else s
            values = seconds.to_numpy(dtype="datetime64[us]").astype(np.int64) / 1e6
            out[col] = np.where(s.isna().to_numpy(), np.nan, values)
        elif pd.api.types.is_bool_dtype(s.dtype):
            out[col] = s.astype(float).to_numpy()
        else:
            out[col] = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64,
                                                                  na_value=np.nan)
    for col in schema.categorical:
        s = X[col]
        values = s.astype(str).to_numpy(dtype=object)
        values[s.isna().to_numpy()] = None
        out[col] = values
    return out


class _AssembledModel:
    """``predict_proba`` over assembled matrices: what SHAP explains."""

    def __init__(self, pipeline: SparkPipeline) -> None:
        self.pipeline = pipeline

    def predict_proba(self, X: Any) -> np.ndarray:
        return self.pipeline.predict_proba(np.asarray(X, dtype=np.float64))


class SparkPredictor(PredictorBase):
    """A Spark MLlib pipeline (``spark_gbt``/``spark_lr``) scored from its saved files."""

    framework = "spark"

    def __init__(self, *, kind: str, stages: list[dict[str, Any]], saved: Path,
                 schema: FeatureSchema, labels: LabelInfo, params: dict[str, Any]) -> None:
        self.kind = kind
        self.pipeline = SparkPipeline(stages)
        self.saved = Path(saved)
        self.schema = schema
        self.labels = labels
        self.params = params

    @classmethod
    def from_mllib(cls, kind: str, saved: Path, *, schema: FeatureSchema, labels: LabelInfo,
                   params: dict[str, Any]) -> SparkPredictor:
        """Read a ``PipelineModel`` folder written by MLlib's writer."""
        return cls(kind=kind, stages=formats.load_spark_ml(saved), saved=saved, schema=schema,
                   labels=labels, params=params)

    def _input(self, X: pd.DataFrame) -> np.ndarray:
        return self.pipeline.assemble(spark_columns(self.schema, X))[0]

    def predict_proba_matrix(self, X: np.ndarray) -> np.ndarray:
        """Class-probability matrix ``(n, K)`` of assembled feature rows."""
        return self.pipeline.predict_proba(np.asarray(X, dtype=np.float64))

    @property
    def explain_target(self) -> ExplainTarget:
        """The assembled-matrix model and DataFrame → matrix transform (SHAP, model-agnostic)."""
        empty = {**{c: np.zeros(0) for c in self.schema.numeric},
                 **{c: np.empty(0, dtype=object) for c in self.schema.categorical}}
        names = self.pipeline.assemble(empty)[1]
        return ExplainTarget(kind=self.kind, model=_AssembledModel(self.pipeline),
                             transform=self._input, feature_names=names,
                             classes=self.labels.classes)

    def save(self, directory: Path) -> dict[str, Any]:
        """MLlib's saved folder under ``model/`` + predictor.json."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        files = formats.save_spark_ml(self.saved, directory / "model")
        body = {"features": self.schema.to_json(), "params": dict(self.params),
                "spark_model": "model"}
        return self._write_manifest(directory, body, files)


def load_spark_predictor(directory: Path, info: dict[str, Any], labels: LabelInfo,
                         schema: FeatureSchema) -> SparkPredictor:
    """Rebuild a saved :class:`SparkPredictor` (``predictor.json`` already read)."""
    return SparkPredictor.from_mllib(info["kind"], Path(directory) / info.get("spark_model", "model"),
                                     schema=schema, labels=labels, params=info.get("params") or {})
