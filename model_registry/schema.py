"""``Schema`` and ``ModelSchema``: a minimal mirror of ``hsml.schema`` / ``hsml.model_schema``.

A :class:`Schema` is either *columnar* (a list of ``{"name", "type"}``, from a DataFrame, a
Series or a list of such dicts) or *tensor* (a list of ``{"type", "shape"}``, from an ndarray or
a list of dicts that carry ``shape``). :func:`infer_model_schema` derives the input schema
(features) and the output schema (labels) from a feature view, as Hopsworks does when a model is
created with ``feature_view`` and ``training_dataset_version`` but no ``model_schema``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from fstrain.kernel.canonical_json import to_jsonable
from fstrain.kernel.errors import InvalidArgumentError


class Schema:
    """Columnar or tensor schema of a model's input or output (``hsml.schema.Schema``).

    Args:
        object: a pandas DataFrame or Series, a numpy ndarray, a list of ``{"name", "type"}``
            dicts (columnar) or a list of dicts with ``shape`` (tensor), or another ``Schema``.
    """

    def __init__(self, object: Any) -> None:  # noqa: A002 - hsml's parameter name
        self.columnar_schema: list[dict[str, Any]] | None = None
        self.tensor_schema: list[dict[str, Any]] | None = None
        if isinstance(object, Schema):
            self.columnar_schema = _copy(object.columnar_schema)
            self.tensor_schema = _copy(object.tensor_schema)
            return
        pd = sys.modules.get("pandas")
        np = sys.modules.get("numpy")
        if pd is not None and isinstance(object, pd.DataFrame):
            self.columnar_schema = [
                {"name": str(c), "type": str(t)} for c, t in object.dtypes.items()
            ]
        elif pd is not None and isinstance(object, pd.Series):
            self.columnar_schema = [{"name": str(object.name), "type": str(object.dtype)}]
        elif np is not None and isinstance(object, np.ndarray):
            self.tensor_schema = [{"type": str(object.dtype), "shape": list(object.shape)}]
        elif isinstance(object, Sequence) and not isinstance(object, (str, bytes)):
            self._from_dicts(list(object))
        else:
            raise InvalidArgumentError(_bad_object(object))

    def _from_dicts(self, items: list[Any]) -> None:
        if not all(isinstance(i, Mapping) for i in items):
            raise InvalidArgumentError(_bad_object(items))
        if items and all("shape" in i for i in items):
            self.tensor_schema = [
                {k: to_jsonable(v, what="Tensor schema") for k, v in i.items()} for i in items
            ]
        elif all("name" in i and "type" in i for i in items):
            self.columnar_schema = [
                {k: to_jsonable(v, what="Column schema") for k, v in i.items()} for i in items
            ]
        else:
            raise InvalidArgumentError(_bad_object(items))

    @property
    def kind(self) -> str:
        """``"columnar"`` or ``"tensor"``."""
        return "tensor" if self.tensor_schema is not None else "columnar"

    def to_dict(self) -> dict[str, Any]:
        """``{"columnar_schema": [...]}`` or ``{"tensor_schema": [...]}``, as hsml."""
        if self.tensor_schema is not None:
            return {"tensor_schema": _copy(self.tensor_schema)}
        return {"columnar_schema": _copy(self.columnar_schema or [])}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schema:
        """Rebuild a schema from :meth:`to_dict` output."""
        if "tensor_schema" in data:
            return cls(list(data["tensor_schema"]))
        if "columnar_schema" in data:
            return cls(list(data["columnar_schema"]))
        raise InvalidArgumentError(
            "A schema dict must have a 'columnar_schema' or 'tensor_schema' key. "
            f"Got keys {sorted(data)} instead."
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"Schema({self.to_dict()!r})"


class ModelSchema:
    """Input and output :class:`Schema` of a model (``hsml.model_schema.ModelSchema``)."""

    def __init__(
        self, input_schema: Schema | None = None, output_schema: Schema | None = None
    ) -> None:
        for label, value in (("input_schema", input_schema), ("output_schema", output_schema)):
            if value is not None and not isinstance(value, Schema):
                raise InvalidArgumentError(
                    f"ModelSchema {label} must be a Schema or None. "
                    f"Got {type(value).__name__} instead. Wrap it: Schema(obj)."
                )
        self.input_schema = input_schema
        self.output_schema = output_schema

    def to_dict(self) -> dict[str, Any]:
        """``{"input_schema": {...}, "output_schema": {...}}`` (absent parts omitted)."""
        out: dict[str, Any] = {}
        if self.input_schema is not None:
            out["input_schema"] = self.input_schema.to_dict()
        if self.output_schema is not None:
            out["output_schema"] = self.output_schema.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelSchema:
        """Rebuild a model schema from :meth:`to_dict` output."""
        if not isinstance(data, Mapping) or not set(data) <= {"input_schema", "output_schema"}:
            raise InvalidArgumentError(
                "model_schema must be a ModelSchema or a dict with 'input_schema' and/or "
                f"'output_schema'. Got {data!r:.120} instead."
            )
        inp, out = data.get("input_schema"), data.get("output_schema")
        return cls(
            Schema.from_dict(inp) if inp is not None else None,
            Schema.from_dict(out) if out is not None else None,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelSchema) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"ModelSchema({self.to_dict()!r})"


def coerce_model_schema(value: object) -> ModelSchema | None:
    """Accept ``None``, a :class:`ModelSchema` or its dict form."""
    if value is None or isinstance(value, ModelSchema):
        return value
    if isinstance(value, Mapping):
        return ModelSchema.from_dict(value)
    raise InvalidArgumentError(
        "model_schema must be a ModelSchema, its to_dict() form or None. "
        f"Got {type(value).__name__} instead."
    )


def infer_model_schema(feature_view: Any) -> ModelSchema:
    """Input schema = feature-view columns that are neither labels nor helper columns;
    output schema = the labels (in label order).

    ``feature_view`` is duck-typed: ``labels``, ``training_helper_columns``,
    ``inference_helper_columns`` (lists of names) and ``schema`` (a list of ``{"name", "type"}``
    dicts, or of objects with ``name`` and ``type`` attributes). When it also has
    ``feature_names`` (the model features, e.g. without the root primary key and event time),
    the input schema is exactly those columns.
    """
    columns = [_column(c) for c in (getattr(feature_view, "schema", None) or [])]
    labels = list(getattr(feature_view, "labels", None) or [])
    helpers = set(getattr(feature_view, "training_helper_columns", None) or []) | set(
        getattr(feature_view, "inference_helper_columns", None) or []
    )
    by_name = {c["name"]: c for c in columns}
    inputs = [c for c in columns if c["name"] not in helpers and c["name"] not in labels]
    feature_names = getattr(feature_view, "feature_names", None)
    if feature_names is not None:
        chosen = set(feature_names)
        inputs = [c for c in inputs if c["name"] in chosen]
    outputs = [by_name.get(label, {"name": label, "type": None}) for label in labels]
    return ModelSchema(Schema(inputs), Schema(outputs) if outputs else None)


def _column(col: Any) -> dict[str, Any]:
    if isinstance(col, Mapping):
        name, ctype = col.get("name"), col.get("type")
    else:
        name, ctype = getattr(col, "name", None), getattr(col, "type", None)
    if not isinstance(name, str):
        raise InvalidArgumentError(
            "feature_view.schema must be a list of {'name': str, 'type': str}. "
            f"Got an entry {col!r:.80} instead."
        )
    return {"name": name, "type": None if ctype is None else str(ctype)}


def _copy(items: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    return None if items is None else [dict(i) for i in items]


def _bad_object(obj: object) -> str:
    return (
        "Schema object must be a pandas DataFrame or Series, a numpy ndarray, or a list of dicts "
        "with 'name' and 'type' (columnar) or with 'shape' (tensor). "
        f"Got {type(obj).__name__} ({obj!r:.80}) instead."
    )


def encode_input_example(example: Any, *, name: str) -> Any:
    """JSON form of an input example: a DataFrame gives its first row as a ``{column: value}``
    dict, a Series a dict, an ndarray a (nested) list; other values must already be JSON-like."""
    if example is None:
        return None
    pd = sys.modules.get("pandas")
    what = f"Model '{name}': input_example"
    if pd is not None and isinstance(example, pd.DataFrame):
        if example.empty:
            raise InvalidArgumentError(f"{what} must have at least one row. Got an empty frame.")
        return to_jsonable(example.iloc[0].to_dict(), what=what)
    if pd is not None and isinstance(example, pd.Series):
        return to_jsonable(example.to_dict(), what=what)
    return to_jsonable(example, what=what)
