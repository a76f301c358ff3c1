"""Schema / ModelSchema mirror of hsml, and schema + lineage inference from a feature view."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import InvalidArgumentError
from model_registry.schema import ModelSchema, Schema


def test_schema_from_dataframe_series_and_dicts():
    df = pd.DataFrame({"a": [1, 2], "b": [0.5, 1.5], "c": ["x", "y"]})
    assert Schema(df).to_dict() == {
        "columnar_schema": [
            {"name": "a", "type": "int64"},
            {"name": "b", "type": "float64"},
            {"name": "c", "type": "object"},
        ]
    }
    assert Schema(df["b"]).to_dict() == {"columnar_schema": [{"name": "b", "type": "float64"}]}
    cols = [{"name": "a", "type": "bigint"}]
    assert Schema(cols).to_dict() == {"columnar_schema": cols}
    assert Schema(cols).kind == "columnar"


def test_schema_from_tensors():
    schema = Schema(np.zeros((3, 28, 28), dtype=np.float32))
    assert schema.kind == "tensor"
    assert schema.to_dict() == {"tensor_schema": [{"type": "float32", "shape": [3, 28, 28]}]}
    listed = [{"name": "img", "type": "uint8", "shape": [28, 28]}]
    assert Schema(listed).to_dict() == {"tensor_schema": listed}


@pytest.mark.parametrize("obj", [42, "abc", [{"foo": 1}], [1, 2]])
def test_schema_rejects_other_objects(obj):
    with pytest.raises(InvalidArgumentError, match="Schema object must be"):
        Schema(obj)


def test_model_schema_round_trip():
    ms = ModelSchema(Schema([{"name": "x", "type": "double"}]), Schema(np.zeros(2)))
    again = ModelSchema.from_dict(json.loads(json.dumps(ms.to_dict())))
    assert again == ms
    assert set(ms.to_dict()) == {"input_schema", "output_schema"}
    with pytest.raises(InvalidArgumentError):
        ModelSchema([{"name": "x", "type": "double"}])


def test_schema_and_lineage_inferred_from_feature_view(registry, model_dir, fake_feature_view):
    model = registry.sklearn.create_model(
        "fraud", feature_view=fake_feature_view, training_dataset_version=3
    )
    model.save(model_dir)
    expected = {
        "input_schema": {
            "columnar_schema": [
                {"name": "amount", "type": "double"},
                {"name": "category", "type": "string"},
            ]
        },
        "output_schema": {"columnar_schema": [{"name": "is_fraud", "type": "boolean"}]},
    }
    got = registry.get_model("fraud", 1)
    assert got.model_schema == expected
    assert json.loads((got.model_path / "model_schema.json").read_text()) == expected
    assert (got.feature_view_name, got.feature_view_version) == ("fraud_fv", 2)
    assert got.training_dataset_version == 3
    lineage = got.manifest["lineage"]
    assert lineage["feature_view"] == {"name": "fraud_fv", "version": 2}
    assert lineage["training_dataset"]["version"] == 3
    assert lineage["training_dataset"]["feature_group_commits"] == {"transactions_1": 1700000000123}
    assert "model_schema.json" in {e["path"] for e in got.manifest["files"]}


def test_no_inference_without_training_dataset_version(registry, model_dir, fake_feature_view):
    model = registry.python.create_model("m", feature_view=fake_feature_view).save(model_dir)
    assert model.model_schema is None
    assert model.feature_view_name == "fraud_fv" and model.training_dataset_version is None
    assert "training_dataset" not in model.manifest["lineage"]


def test_explicit_schema_wins_and_lineage_without_td_getter(
    registry, model_dir, fake_feature_view_no_td
):
    explicit = ModelSchema(Schema([{"name": "only", "type": "int"}]))
    model = registry.python.create_model(
        "m",
        model_schema=explicit,
        feature_view=fake_feature_view_no_td,
        training_dataset_version=1,
    ).save(model_dir)
    assert model.model_schema == explicit.to_dict()
    assert model.manifest["lineage"] == {
        "feature_view": {"name": "fraud_fv", "version": 2},
        "training_dataset_version": 1,
    }


def test_input_example_from_dataframe_is_first_row(registry, model_dir):
    df = pd.DataFrame(
        {"a": np.array([1, 2], dtype=np.int32), "t": pd.to_datetime(["2024-01-01", "2024-01-02"])}
    )
    model = registry.python.create_model("m", input_example=df).save(model_dir)
    assert model.input_example == {"a": 1, "t": "2024-01-01T00:00:00"}
    assert json.loads((model.model_path / "input_example.json").read_text()) == model.input_example
