"""Data-parallel XGBoost and LightGBM on Ray Train (fstrain.trainers.ray_boosting).

The slow test starts one local Ray cluster for the module (always shut down), trains the adult
use case on a 1,500-row slice once in one process and once on 2 Ray workers per booster, and
compares what the registry holds. The refusals and the exactly-once check run without Ray.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from fstrain.kernel.errors import ConfigError, FeatureStoreError, IntegrityError
from pipelines import feature, model_validation, training, training_dataset
from fstrain.cli.app import app
from fstrain.trainers.config import load_config
from fstrain.trainers.ray_boosting import check_shards, fingerprint
from fstrain.trainers.tabular import Prepared

#: how far the 2-worker model's validation metrics may be from the single-process model's.
#: Distributed histograms use other split candidates (XGBoost merges per-worker quantile
#: sketches, LightGBM finds each feature's bins on one worker's rows), which can move early
#: stopping by tens of rounds, so the two are different fits of the same data; the bound is
#: about 1.5 standard errors of the metric on these 225 validation rows (AUC ≈ 0.02, log loss
#: ≈ 0.03). Measured: XGBoost equal to the last digit here (every feature has fewer distinct
#: values than bins, so the merged sketch is exact), LightGBM 0.013 AUC / 0.031 log loss apart.
METRIC_TOLERANCE = {"validation_roc_auc": 0.03, "validation_log_loss": 0.05}


@pytest.fixture(scope="module")
def adult(tmp_path_factory):
    import feature_store

    root = tmp_path_factory.mktemp("ray_boosting")
    project = feature_store.login(root=root / "store")
    feature.run(project, feature.FeaturePipelineConfig(use_case="adult", sample=1500))
    td = training_dataset.run(project, training_dataset.TrainingDatasetConfig(
        use_case="adult", seed=5))
    return project, td.version


def _config(version, model, **extra):
    return training.TrainingPipelineConfig(
        use_case="adult", training_dataset_version=version, model_name=f"adult_{model}_"
        f"w{extra.get('workers', 1)}", model={"model": model, "params": {"n_estimators": 60}},
        **extra)


@pytest.mark.parametrize("model, extra, message", [
    ({"model": "xgboost"}, {"tune": True}, "--tune runs single-process trials"),
    ({"model": "lightgbm", "imbalance": "oversample"}, {}, "resamples the whole train split"),
    ({"model": "xgboost", "device": "cuda"}, {}, "runs CPU workers"),
    ({"model": "xgboost", "params": {"tree_method": "exact"}}, {}, "no distributed form"),
    ({"model": "lightgbm"}, {"drop_label_issues": True, "find_label_issues": True, "cv": 2},
     "--drop-label-issues trains on a subset"),
])
def test_options_the_ray_path_cannot_honour_are_refused(project, model, extra, message):
    """Refused before anything is read (the store holds no data at all here)."""
    with pytest.raises(ConfigError, match=message):
        training.run(project, training.TrainingPipelineConfig(
            use_case="adult", training_dataset_version=1, workers=2, model=model, **extra))
    assert project.get_model_registry().get_models("adult_income") == []


@pytest.mark.slow
def test_a_version_without_its_own_validation_split_is_refused(adult):
    project, _ = adult
    fv = project.get_feature_store().get_feature_view("adult_income", 1)
    version, _ = fv.create_train_test_split(test_size=0.2, seed=3)
    with pytest.raises(ConfigError, match="own validation split"):
        training.run(project, _config(version, "xgboost", workers=2))


def test_the_cli_refuses_tune_with_workers_for_boosting(tmp_path):
    out = CliRunner().invoke(app, ["train", "adult", "-t", "1", "--model", "lightgbm",
                                   "--workers", "2", "--tune", "--root", str(tmp_path)])
    assert out.exit_code == 2 and "--tune runs single-process trials" in out.output


def test_the_shard_check_finds_a_dropped_a_duplicated_and_a_changed_row():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 4)).astype(np.float32)
    y, w = rng.integers(0, 2, 50), np.ones(50, dtype=np.float32)
    expected = fingerprint(x, y, w)

    def shards(*parts):
        return [{"rows": len(p), "fingerprint": str(fingerprint(x[p], y[p], w[p]))}
                for p in parts]

    whole = np.arange(50)
    assert check_shards(shards(whole[::2], whole[1::2]), 50, expected)["each_row_once"]
    with pytest.raises(IntegrityError, match="dropped, duplicated or changed"):
        check_shards(shards(whole[:25], whole[26:]), 50, expected)  # row 25 dropped
    with pytest.raises(IntegrityError):
        check_shards(shards(whole[:26], whole[25:49]), 50, expected)  # 25 twice, 49 dropped
    changed = x.copy()
    changed[3, 1] += 1
    bad = [{"rows": 50, "fingerprint": str(fingerprint(changed, y, w))}]
    with pytest.raises(IntegrityError):
        check_shards(bad, 50, expected)


def test_ray_boosting_errors_share_the_root():
    assert issubclass(ConfigError, FeatureStoreError) and issubclass(IntegrityError,
                                                                     FeatureStoreError)
    with pytest.raises(ConfigError, match="trains xgboost, lightgbm"):
        from fstrain.trainers.ray_boosting import refuse_unsupported

        refuse_unsupported(load_config({"model": "mlp"}))


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """One local Ray for the module's distributed runs; always shut down."""
    import os

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    temp = tmp_path_factory.mktemp("ray")
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=str(temp), log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def _files(model) -> dict[str, str]:
    return {e["path"]: e for e in model.manifest["files"]}


@pytest.mark.slow
@pytest.mark.parametrize("kind, model_file", [("xgboost", "model/model.json"),
                                              ("lightgbm", "model/model.txt")])
def test_two_workers_register_the_single_process_model_format(adult, ray_cluster, kind,
                                                              model_file):
    project, version = adult
    mr = project.get_model_registry()
    one = training.run(project, _config(version, kind))
    out = CliRunner().invoke(app, [  # the real CLI; it reuses the module's Ray
        "train", "adult", "-t", str(version), "--model", kind, "--param", "n_estimators=60",
        "--workers", "2", "--model-name", f"adult_{kind}_w2", "--json",
        "--root", str(project.root)])
    assert out.exit_code == 0, out.output
    two = one.__class__(**{k: v for k, v in json.loads(out.stdout).items()
                           if k in ("name", "version")})
    single, dist = mr.get_model(one.name, one.version), mr.get_model(two.name, two.version)

    # the same files, manifest and training-config keys, hyperparameter names and lineage
    assert set(_files(single)) == set(_files(dist)) and model_file in _files(dist)
    assert set(single.manifest) == set(dist.manifest)
    assert set(single.training_config) == set(dist.training_config)
    assert set(single.manifest["hyperparameters"]) == set(dist.manifest["hyperparameters"])
    for key in ("feature_view_name", "feature_view_version", "training_dataset_version"):
        assert getattr(single, key) == getattr(dist, key)
    assert dist.training_config["trainer"] == single.training_config["trainer"]
    assert dist.manifest["hyperparameters"]["seed"] == single.training_config["trainer"]["seed"]
    record = dist.training_config["distributed"]
    assert single.training_config["distributed"] is None
    # every train row seen exactly once: the shards' rows and fingerprints add up
    # (contiguous halves of the train file, the same every run)
    fv = project.get_feature_store().get_feature_view("adult_income", 1)
    X_tr, X_va = fv.get_train_validation_test_split(version)[:2]
    n = len(X_tr)
    assert record["world_size"] == 2 and record["rows"] == n
    assert [s["rows"] for s in record["shards"]] == [n // 2, n - n // 2]
    # every worker early-stops on the whole validation split
    assert [s["validation_rows"] for s in record["shards"]] == [len(X_va)] * 2
    assert record["each_row_once"] is True
    # early stopping on validation: the best round is the best validation loss/metric so far
    folder = Path(dist.model_path)
    curves = json.loads((folder / "learning_curves.json").read_text())
    assert curves["unit"] == "round" and len(curves["val_loss"]) > curves["best_step"]
    if kind == "xgboost":  # the driver's streamed fit and scoring change nothing
        assert dist.training_metrics == single.training_metrics
    for metric, tolerance in METRIC_TOLERANCE.items():
        assert abs(dist.training_metrics[metric] - single.training_metrics[metric]) \
            <= tolerance, (metric, dist.training_metrics, single.training_metrics)
    # model validation loads and scores it unchanged
    result = model_validation.run(project, model_validation.ModelValidationConfig(
        model_name=two.name, version=two.version, gates=["roc_auc >= 0.6"],
        replace_gates=True, bootstrap_resamples=20, shap_samples=30))
    assert result.status == "passed (policy deviation)"


@pytest.mark.slow
def test_two_workers_boost_on_a_jsonl_versions_pieces_as_one_process_does(adult, ray_cluster):
    """A jsonl version of the same rows: the workers' shards are pieces of its verified text,
    each train row once, and XGBoost registers the single-process metrics."""
    project, _ = adult
    version = training_dataset.run(project, training_dataset.TrainingDatasetConfig(
        use_case="adult", seed=5, data_format="jsonl")).version
    mr = project.get_model_registry()
    one = training.run(project, _config(version, "xgboost"))
    out = CliRunner().invoke(app, [
        "train", "adult", "-t", str(version), "--model", "xgboost", "--param", "n_estimators=60",
        "--workers", "2", "--model-name", "adult_jsonl_w2", "--json", "--root", str(project.root)])
    assert out.exit_code == 0, out.output
    single, dist = mr.get_model(one.name, one.version), mr.get_model("adult_jsonl_w2", 1)
    assert dist.training_dataset_version == version
    record = dist.training_config["distributed"]
    assert record["world_size"] == 2 and record["each_row_once"] is True
    fv = project.get_feature_store().get_feature_view("adult_income", 1)
    assert record["rows"] == len(fv.get_train_validation_test_split(version)[0])
    assert dist.training_metrics == single.training_metrics


def _tx_version(fs, n=300, data_format="parquet"):
    """A version with a view transformation (standard_scaler), a categorical and a binary
    label, written in 40-row row groups (Parquet)."""
    import pandas as pd

    from feature_store.transformations import standard_scaler

    rng, t0 = np.random.default_rng(5), pd.Timestamp("2024-01-01", tz="UTC")
    tx = fs.get_or_create_feature_group("tx", version=1, primary_key=["tid"], event_time="ts")
    tx.insert(pd.DataFrame({"tid": np.arange(n), "ts": t0 + pd.to_timedelta(np.arange(n), "h"),
                            "amount": rng.gamma(2, 10, n), "kind": rng.choice(["a", "b", "c"], n),
                            "label": (rng.random(n) < 0.3).astype(np.int64)}))
    fv = fs.create_feature_view("tx_view", query=tx.select(["amount", "kind", "label"]),
                                labels=["label"],
                                transformation_functions=[standard_scaler("amount")])
    version, _ = fv.create_train_validation_test_split(
        validation_size=0.2, test_size=0.2, seed=3, write_options={"batch_rows": 40},
        data_format=data_format)
    return fv, version


@pytest.mark.parametrize("data_format", ["parquet", "csv", "jsonl"])
def test_the_ranks_pieces_are_the_in_memory_train_matrix_with_view_transformations(
        fs, data_format, monkeypatch):
    """Without Ray: what the rank datasets read and preprocess (the view's standard_scaler
    applied with train statistics, then the train-fitted preprocessor) is the single-process
    train matrix, row for row, each row in exactly one of three shards; a csv or jsonl
    version's shards are pieces of its text."""
    from feature_store.local.readers import text_pieces
    from fstrain.trainers.ray_boosting import StreamedFit, shard_weights
    from fstrain.trainers.stream.source import RAY_BOOSTING, version_source
    from fstrain.trainers.stream.ray_feed import _read_pieces
    from fstrain.trainers.stream.pieces import rank_pieces
    from fstrain.trainers.stream.split import SplitStream

    monkeypatch.setattr(text_pieces, "PIECE_BYTES", 1000)
    fv, version = _tx_version(fs, data_format=data_format)
    X_tr, X_va, _X_te, y_tr, y_va, _y_te = fv.get_train_validation_test_split(version)
    cfg = load_config({"model": "xgboost", "imbalance": "class_weight"})
    data = Prepared(cfg, X_tr, y_tr, X_va, y_va, framework="xgboost")
    source = version_source(fv, version, reader=RAY_BOOSTING)
    assert len(source.group_rows["train"]) > 1  # several row groups or pieces of text
    assert bool(source.texts) == (data_format != "parquet")
    streamed = StreamedFit(cfg, source, framework="xgboost")
    stream = SplitStream(source, "train", streamed.prep)
    shards = []
    for rank in range(3):
        pieces = rank_pieces(source.group_rows["train"], rank, 3)
        shard = _read_pieces({k: np.array([p[i] for p in pieces]) for i, k in
                              enumerate(("group", "offset", "rows"))}, stream)
        shards.append({**shard, "w": shard_weights(streamed.plan, shard["y"])})
    x = np.concatenate([s["x"] for s in shards])
    np.testing.assert_array_equal(x, data.X_train)
    np.testing.assert_array_equal(np.concatenate([s["y"] for s in shards]), data.y_train)
    np.testing.assert_array_equal(np.concatenate([s["w"] for s in shards]), data.sample_weight)
    assert check_shards([{"rows": len(s["y"]), "fingerprint": str(fingerprint(
        s["x"], s["y"], s["w"]))} for s in shards], streamed.rows_train,
        streamed.fingerprint())["each_row_once"]


@pytest.mark.parametrize("options", [
    {"model": "xgboost", "imbalance": "class_weight", "calibration": "platt"},
    {"model": "lightgbm", "imbalance": "scale_pos_weight", "max_categories": 2},
    {"model": "xgboost", "task": "regression"},
])
def test_the_drivers_streamed_fit_equals_the_in_memory_one(fs, tmp_path, options):
    """What the driver fits and scores by streamed passes (StreamedFit) is what Prepared fits
    on the splits in memory: the same saved preprocessor (boosters pass numeric columns
    through, so nothing is estimated from them), imbalance record, train fingerprint, and
    validation predictions, calibration and metrics of the same booster, to the last digit."""
    import xgboost as xgb

    from fstrain.trainers.ray_boosting import StreamedFit
    from fstrain.trainers.stream.source import RAY_BOOSTING, version_source
    from fstrain.trainers.tabular import Prepared, finish_booster

    fv, version = _tx_version(fs)
    X_tr, X_va, _X_te, y_tr, y_va, _y_te = fv.get_train_validation_test_split(version)
    cfg = load_config(options)
    memory = Prepared(cfg, X_tr, y_tr, X_va, y_va, framework=cfg.model)
    streamed = StreamedFit(cfg, version_source(fv, version, reader=RAY_BOOSTING), framework=cfg.model)
    assert streamed.plan.record == memory.plan.record
    assert streamed.rows_train == memory.rows_train and streamed.weighted == (
        memory.sample_weight is not None)
    weights = memory.sample_weight  # the workers weigh unweighted rows with ones
    assert streamed.fingerprint() == fingerprint(memory.X_train, memory.y_train, np.ones(
        memory.rows_train, np.float32) if weights is None else weights)
    booster = xgb.train({"objective": "binary:logistic", "seed": 0}, xgb.DMatrix(
        memory.X_train, label=memory.y_train), num_boost_round=5)
    results = {}
    for name, data in (("memory", memory), ("streamed", streamed)):
        out = finish_booster("xgboost", booster, data, cfg, params={}, history=[], notes=[],
                             metric=("auc", "max"), best_iteration=4, device="cpu",
                             timings=(0.0, 0.0, 0.0))
        out.model.save(tmp_path / name)
        results[name] = out
    assert results["streamed"].metrics == results["memory"].metrics  # to the last digit
    assert results["streamed"].imbalance == results["memory"].imbalance  # calibration included
    files = {name: {str(p.relative_to(tmp_path / name)): _content(p)
                    for p in (tmp_path / name).rglob("*") if p.is_file()} for name in results}
    assert files["streamed"] == files["memory"] and len(files["memory"]) >= 3


def test_a_scaled_streamed_fit_equals_the_in_memory_one_to_rounding(fs):
    """numeric_preprocessing=impute_scale: the streamed moments give the scaler's mean and
    variance to float rounding (not bit for bit), so the matrices agree to rounding."""
    from fstrain.trainers.preprocessing import transform
    from fstrain.trainers.ray_boosting import StreamedFit
    from fstrain.trainers.stream.source import RAY_BOOSTING, version_source

    fv, version = _tx_version(fs)
    X_tr, X_va, _X_te, y_tr, y_va, _y_te = fv.get_train_validation_test_split(version)
    cfg = load_config({"model": "xgboost", "numeric_preprocessing": "impute_scale"})
    memory = Prepared(cfg, X_tr, y_tr, X_va, y_va, framework="xgboost")
    streamed = StreamedFit(cfg, version_source(fv, version, reader=RAY_BOOSTING), framework="xgboost")
    assert streamed.plan.record == memory.plan.record
    x = transform(streamed.preprocessor, streamed.schema, X_tr)
    np.testing.assert_allclose(x, memory.X_train, rtol=1e-5, atol=1e-6)
    assert abs(float(x[:, 0].std()) - 1.0) < 1e-3  # scaled, not passed through


def _content(path: Path) -> object:
    """A saved file's bytes; for a skops archive its members, less the names skops derives
    from Python ``id()``s when it saves (``__id__`` fields, array file names: different in
    every process and every fit): the schema without them and the arrays' bytes."""
    import zipfile

    if path.suffix != ".skops":
        return path.read_bytes()

    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in ("__id__", "file")}
        return [strip(v) for v in node] if isinstance(node, list) else node

    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        return (strip(json.loads(archive.read("schema.json"))),
                sorted(archive.read(n) for n in names if n != "schema.json"))


CAP_WORKER = Path(__file__).with_name("boosting_cap_worker.py")
CAP_MIB = 48  # the driver's distributed run grows its data segment by ~10 MiB, the read by ~120


@pytest.mark.slow
def test_the_driver_trains_a_version_larger_than_its_memory_cap(tmp_path):
    """The Ray driver (a child process whose data segment is capped by RLIMIT_DATA after Ray
    has started) trains XGBoost on 2 workers from a version it cannot read in memory under the
    same cap: it fits the preprocessing, scores validation and checks the shards streamed."""
    import os
    import subprocess
    import sys
    import tempfile

    from fstrain.trainers.predictor import load_predictor
    from tests.trainers.test_streamed_training import FEATURES, ROWS, _big_version

    root = tmp_path / "store"
    version = _big_version(root)
    assert ROWS * FEATURES * 8 > 1.5 * CAP_MIB * 2**20  # the feature values alone

    def child(mode):
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
               "ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "2",
               "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
        with tempfile.TemporaryDirectory(prefix="rb", dir="/tmp") as ray_temp:  # socket paths
            return subprocess.run([sys.executable, str(CAP_WORKER), str(root), str(version),
                                   mode, str(CAP_MIB), str(tmp_path / mode), ray_temp],
                                  env=env, capture_output=True, text=True, timeout=400)

    read = child("read")
    assert read.returncode == 3 and "in-memory read: MemoryError" in read.stdout, (
        read.stdout + read.stderr[-3000:])
    run = child("train")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    record = json.loads((tmp_path / "train" / "result.json").read_text())
    assert record["growth_mib"] < CAP_MIB and record["train_rows"] == int(ROWS * 0.8)
    assert record["distributed"]["each_row_once"] is True
    assert record["distributed"]["rows"] == int(ROWS * 0.8)
    assert record["metrics"]["auc"] > 0.9  # the label is a noisy function of f0 and f1
    proba = load_predictor(tmp_path / "train" / "model").predict_proba(
        pd.DataFrame({"rid": [0, 1], **{f"f{i}": [0.0, 0.0] for i in range(FEATURES)}}).assign(
            f0=[-3.0, 3.0]))
    assert proba[0] < 0.5 < proba[1]
