"""Training an MLP from a streamed version: under a memory cap the in-memory read cannot meet,
and through the training pipeline with the same registered format and lineage as in memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines import training
from tests.pipelines.test_pipelines import _adult_dataset

WORKER = Path(__file__).with_name("memory_cap_worker.py")
ROWS, FEATURES = 400_000, 24
CAP_MIB = 48  # the streamed run grows its data segment by ~30 MiB (csv: ~38), the in-memory read
# by ~120 (csv: ~170)


def _big_version(root: Path, data_format: str = "parquet") -> int:
    """400k rows × 24 float features + a label, materialized in 16k-row row groups (Parquet;
    csv: a 146 MB train file, streamed in pieces of about 1 MiB)."""
    import feature_store

    fs = feature_store.login(root=root).get_feature_store()
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"rid": np.arange(ROWS),
                          **{f"f{i}": rng.normal(size=ROWS) for i in range(FEATURES)}})
    frame["label"] = ((frame["f0"] + 0.5 * frame["f1"] + rng.normal(0, 0.5, ROWS)) > 0
                      ).astype(np.int64)
    fg = fs.get_or_create_feature_group("big", version=1, primary_key=["rid"])
    fg.insert(frame)
    fv = fs.create_feature_view("big", query=fg.select_all(), labels=["label"])
    version, _ = fv.create_train_validation_test_split(
        validation_size=0.1, test_size=0.1, seed=1, write_options={"batch_rows": 16384},
        data_format=data_format)
    return version


def _child(root: Path, version: int, mode: str, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           # Arrow allocates through malloc (counted by RLIMIT_DATA, not a pre-reserved arena);
           # a fixed mmap threshold returns freed buffers instead of growing the heap
           "ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "2",
           "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(WORKER), str(root), str(version), mode,
                           str(CAP_MIB), str(out)], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("data_format", ["parquet", "csv"])
def test_an_mlp_trains_on_a_version_larger_than_its_memory_cap(tmp_path, data_format):
    from fstrain.trainers.predictor import load_predictor

    root = tmp_path / "store"
    version = _big_version(root, data_format)
    # the version's feature values alone (float64) are 1.5× the cap
    assert ROWS * FEATURES * 8 > 1.5 * CAP_MIB * 2**20
    read = _child(root, version, "read", tmp_path / "read")
    assert read.returncode == 3, read.stdout + read.stderr[-3000:]
    assert "in-memory read: MemoryError" in read.stdout
    run = _child(root, version, "train", tmp_path / "train")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    record = json.loads((tmp_path / "train" / "metrics.json").read_text())
    assert record["train_rows"] == int(ROWS * 0.8) and record["growth_mib"] < CAP_MIB
    assert record["metrics"]["auc"] > 0.9  # the label is a noisy function of f0 and f1
    predictor = load_predictor(tmp_path / "train" / "model")
    rng = np.random.default_rng(9)
    X = pd.DataFrame({"rid": np.arange(5), **{f"f{i}": rng.normal(size=5)
                                             for i in range(FEATURES)}})
    X.loc[:, "f0"] = [-3, -1, 0, 1, 3]
    proba = predictor.predict_proba(X)
    assert proba[0] < 0.5 < proba[-1]


def _model_files(model) -> set[str]:
    return {str(p.relative_to(model.model_path)) for p in Path(model.model_path).rglob("*")
            if p.is_file()}


@pytest.mark.slow
def test_streamed_pipeline_registers_the_same_format_and_lineage(project):
    td = _adult_dataset(project)
    registry = project.get_model_registry()
    refs = {}
    for streaming in (False, True):
        refs[streaming] = training.run(project, training.TrainingPipelineConfig(
            use_case="adult", training_dataset_version=td.version,
            model={"model": "mlp", "params": {}, "torch": {
                "epochs": 2, "batch_size": 128, **({"streaming": True} if streaming else {})}}))
    memory, streamed = (registry.get_model(refs[s].name, refs[s].version) for s in (False, True))
    assert streamed.framework == memory.framework == "torch"
    assert _model_files(streamed) == _model_files(memory)
    for key in ("feature_view_name", "feature_view_version", "training_dataset_version"):
        assert getattr(streamed, key) == getattr(memory, key)
    assert streamed.training_config["trainer"]["torch"]["streaming"] is True
    assert set(streamed.training_metrics) == set(memory.training_metrics)
    assert streamed.training_metrics["validation_roc_auc"] > 0.6
    with pytest.raises(Exception, match="torch.streaming trains from the version's files"):
        training.run(project, training.TrainingPipelineConfig(
            use_case="adult", training_dataset_version=td.version, cv=2,
            model={"model": "mlp", "params": {}, "torch": {"streaming": True}}))


@pytest.mark.slow
def test_csv_and_jsonl_versions_train_through_the_cli_to_the_parquet_versions_model(
        project, tmp_path):
    """The same adult rows as Parquet, csv and jsonl versions (each a single row group or
    piece of text, so the same units): `fstrain train` with torch.streaming registers the same
    metrics and weights from each; a tampered csv file is refused before training."""
    from safetensors.torch import load_file
    from typer.testing import CliRunner

    from pipelines import training_dataset
    from fstrain.cli.app import app
    from tests.pipelines.test_pipelines import _features

    _features(project, "adult")
    versions = {fmt: training_dataset.run(project, training_dataset.TrainingDatasetConfig(
        use_case="adult", seed=5, data_format=fmt)).version for fmt in ("parquet", "csv", "jsonl")}
    (tmp_path / "cfg.json").write_text(json.dumps({  # YAML reads JSON
        "model": "mlp", "seed": 3, "params": {"hidden_sizes": [16]},
        "torch": {"epochs": 2, "batch_size": 64, "deterministic": True, "device": "cpu",
                  "streaming": True, "shuffle_buffer": 128}}))

    def train(fmt: str, name: str) -> tuple[int, str]:
        out = CliRunner().invoke(app, ["train", "adult", "-t", str(versions[fmt]), "--config",
                                       str(tmp_path / "cfg.json"), "--model-name", name,
                                       "--root", str(project.root)])
        return out.exit_code, out.output

    for fmt in versions:
        code, output = train(fmt, fmt)
        assert code == 0, output
    registry = project.get_model_registry()
    models = {fmt: registry.get_model(fmt, 1) for fmt in versions}
    weights = {fmt: load_file(str(Path(m.model_path) / "model" / "model.safetensors"))
               for fmt, m in models.items()}
    for fmt in ("csv", "jsonl"):
        assert models[fmt].training_metrics == models["parquet"].training_metrics
        assert weights[fmt].keys() == weights["parquet"].keys()
        assert all(np.array_equal(weights[fmt][k].numpy(), weights["parquet"][k].numpy())
                   for k in weights[fmt])
        assert models[fmt].training_config["trainer"]["torch"]["streaming"] is True
        assert models[fmt].training_dataset_version == versions[fmt]
    fv = project.get_feature_store().get_feature_view("adult_income", 1)
    path = Path(fv.get_training_dataset(versions["csv"]).location) / "train.csv"
    text = path.read_bytes()
    path.write_bytes(text[:-2] + (b"0" if text[-2:-1] != b"0" else b"1") + text[-1:])
    code, output = train("csv", "tampered")
    assert code == 2 and "no longer matches its recorded sha256" in output, output
    assert len(output.strip().splitlines()) == 1  # one line, no traceback
    assert not registry.get_models("tampered")
    assert not (Path(project.root) / "runs" / f"tampered_td{versions['csv']}").exists()
