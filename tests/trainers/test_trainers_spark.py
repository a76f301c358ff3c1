"""Spark MLlib trainers: a real CLI run on a slice of the adult use case, local Spark.

The registered model is MLlib's own saved PipelineModel; its Spark-free predictor must give
Spark's own probabilities on the test split, and model validation must score and explain it.
Tests that start Spark are slow (a JVM start); the refusals run before any Spark starts.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from fstrain.kernel.errors import ConfigError
from fstrain.cli.app import app

pytest.importorskip("pyspark")


def _cli(root: Path, *args: str):
    return CliRunner().invoke(app, [*args, "--root", str(root)])


@pytest.fixture(scope="module")
def adult_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark_store")
    assert _cli(root, "features", "adult", "--sample", "1500").exit_code == 0
    out = _cli(root, "dataset", "adult")
    assert out.exit_code == 0, out.output
    return root


def _spark_probabilities(saved: Path, test_file: Path, features: list[str], scratch: Path):
    """Spark's own probabilities for the test rows, from the saved PipelineModel."""
    from pyspark.ml import PipelineModel
    from pyspark.ml.functions import vector_to_array

    from fstrain.trainers.spark_mllib import _as_double
    from fstrain.trainers.spark_session import spark_session

    with spark_session("local[1]", scratch) as spark:
        raw = spark.read.parquet(str(test_file))
        kinds = {f.name: f.dataType.simpleString() for f in raw.schema.fields}
        cols = [_as_double(c, kinds[c]) if kinds[c] != "string" else raw[c] for c in features]
        model = PipelineModel.load(str(saved))
        scored = model.transform(raw.select(*cols)).select(vector_to_array("probability"))
        return np.asarray([r[0] for r in scored.collect()])


@pytest.mark.slow
def test_spark_gbt_and_lr_from_the_cli(adult_root, tmp_path):
    import feature_store
    from fstrain.trainers import load_predictor

    out = _cli(adult_root, "train", "adult", "-t", "1", "--model", "spark_gbt",
               "--param", "maxIter=8", "--param", "maxDepth=3", "--json")
    assert out.exit_code == 0, out.output
    project = feature_store.login(root=adult_root)
    mr = project.get_model_registry()
    gbt = mr.get_model("adult_income", 1)
    paths = {e["path"] for e in gbt.manifest["files"]}
    assert "predictor.json" in paths and "model/metadata/_SUCCESS" in paths
    assert any(p.startswith("model/stages/") and "GBTClassifier" in p for p in paths)
    trainer = gbt.training_config["trainer"]
    assert trainer["model"] == "spark_gbt" and gbt.training_metrics["validation_roc_auc"] > 0.75
    assert "learning_curves.json" in paths

    fv = project.get_feature_store().get_feature_view("adult_income", 1)
    td = fv.get_training_dataset(1)
    folder = Path(gbt.download(str(tmp_path / "gbt")))
    curves = json.loads((folder / "learning_curves.json").read_text())
    assert curves["unit"] == "round" and len(curves["val_loss"]) == 8
    best = curves["best_step"]
    assert curves["val_loss"][best] == min(curves["val_loss"][: best + 1])
    predictor = load_predictor(folder)
    X_test = fv.get_train_validation_test_split(1)[2]
    mine = predictor.predict_proba(X_test)
    theirs = _spark_probabilities(folder / "model", Path(td.location) / "test.parquet",
                                  list(predictor.schema.names), tmp_path / "spark")
    np.testing.assert_allclose(mine, theirs[:, 1], rtol=0, atol=1e-9)

    out = _cli(adult_root, "validate", "adult_income:1", "--json")
    assert out.exit_code in (0, 3), out.output
    record = json.loads(out.output)
    assert record["key_metric"] == "roc_auc" and record["key_value"] > 0.75
    card = json.loads(Path(record["scorecard_html"]).with_suffix(".json").read_text())
    assert card["explanation"]["by_column"], card.get("explanation_error")

    out = _cli(adult_root, "train", "adult", "-t", "1", "--model", "spark_lr",
               "--param", "maxIter=30", "--spark-master", "local[1]", "--json")
    assert out.exit_code == 0, out.output
    lr = mr.get_model("adult_income", 2)
    assert "local[1]" in lr.training_config["nondeterminism"][0]
    folder = Path(lr.download(str(tmp_path / "lr")))
    predictor = load_predictor(folder)
    theirs = _spark_probabilities(folder / "model", Path(td.location) / "test.parquet",
                                  list(predictor.schema.names), tmp_path / "spark2")
    np.testing.assert_allclose(predictor.predict_proba(X_test), theirs[:, 1], rtol=0, atol=1e-9)


@pytest.mark.slow
def test_spark_options_are_refused_before_spark_starts(adult_root):
    out = _cli(adult_root, "train", "adult", "-t", "1", "--spark-master", "local[1]")
    assert out.exit_code == 2 and "--spark-master" in out.output
    out = _cli(adult_root, "train", "adult", "-t", "1", "--model", "spark_lr", "--cv", "3")
    assert out.exit_code == 2 and "--cv" in out.output
    out = _cli(adult_root, "train", "adult", "-t", "1", "--model", "spark_gbt",
               "--param", "max_depth=3")
    assert out.exit_code == 2 and "maxDepth" in out.output


def test_train_api_refuses_spark_models_on_pandas_frames(binary_data, tmp_path):
    from fstrain.trainers import train

    with pytest.raises(ConfigError, match="Parquet"):
        train({"model": "spark_lr"}, *binary_data, workdir=tmp_path)


@pytest.mark.slow
def test_a_changed_split_file_stops_the_spark_run(adult_root, tmp_path):
    import shutil

    import feature_store

    root = tmp_path / "copy"
    shutil.copytree(adult_root, root)
    fv = feature_store.login(root=root).get_feature_store().get_feature_view("adult_income", 1)
    train_file = Path(fv.get_training_dataset(1).location) / "train.parquet"
    data = bytearray(train_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    train_file.write_bytes(bytes(data))
    runs = root / "runs"
    before = sorted(runs.rglob("*")) if runs.exists() else []
    out = _cli(root, "train", "adult", "-t", "1", "--model", "spark_lr")
    assert out.exit_code == 2 and "no longer matches its recorded sha256" in out.output
    assert (sorted(runs.rglob("*")) if runs.exists() else []) == before  # Spark never started


def _imbalanced_parquet(folder: Path, rows: int, seed: int) -> str:
    """Rows of two overlapping classes, one in ten positive, as a Parquet file."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    y = (rng.random(rows) < 0.1).astype(np.int64)
    frame = pd.DataFrame({"a": rng.normal(size=rows) + 0.8 * y,
                          "b": rng.normal(size=rows) - 0.5 * y, "label": y})
    path = folder / f"split{seed}.parquet"
    frame.to_parquet(path)
    return str(path)


@pytest.mark.slow
def test_spark_class_weights_reach_the_model(tmp_path):
    import pandas as pd

    from fstrain.trainers.config import load_config
    from fstrain.trainers.spark_mllib import SparkSource, train_spark

    source = SparkSource(train=_imbalanced_parquet(tmp_path, 600, 1),
                         validation=_imbalanced_parquet(tmp_path, 300, 2),
                         features=("a", "b"), label="label")
    results = {}
    for imbalance in ("none", "class_weight"):
        config = load_config({"model": "spark_lr", "imbalance": imbalance, "seed": 1,
                              "params": {"maxIter": 30}})
        results[imbalance] = train_spark(config, source, workdir=tmp_path / imbalance,
                                         master="local[1]")
    weighted = results["class_weight"].imbalance
    assert weighted["strategy"] == "class_weight"
    assert weighted["class_weight"]["1"] > 4 * weighted["class_weight"]["0"]  # n / (K * count)
    X_val = pd.read_parquet(source.validation)
    y_val = X_val.pop("label").to_numpy()
    plain = results["none"].model.predict_proba(X_val[["a", "b"]])
    balanced = results["class_weight"].model.predict_proba(X_val[["a", "b"]])
    # unweighted, the rare class is rarely predicted; balanced weights lift its probabilities
    # (mean ~0.5 instead of its ~0.1 share) and its recall at the 0.5 threshold
    assert plain.mean() < 0.2 < 0.35 < balanced.mean()
    recall = {k: float(((p >= 0.5) & (y_val == 1)).sum() / (y_val == 1).sum())
              for k, p in (("none", plain), ("class_weight", balanced))}
    assert recall["class_weight"] > recall["none"] + 0.3, recall
