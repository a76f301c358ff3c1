"""--workers N on a running Ray cluster: each rank's shard comes through Ray Data (the feeder
actor reads a fresh run's first epoch before any worker asks, no further ahead than
FEED_AHEAD blocks), covers every train row exactly once per epoch in a seeded order, and the
pipeline joins the cluster by address and registers the same model format and lineage as one
process."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from pipelines import training
from tests.pipelines.test_pipelines import _adult_dataset
from tests.trainers.conftest import make_binary


def _row_ids(pre, feature: str):  # type: ignore[no-untyped-def]
    """``ids(batches)``: the row-id ``feature`` of every row of the batches, unscaled by the
    fitted preprocessor's standard scaler (the shards' rows, told apart)."""
    scaler = pre.named_transformers_["num"].named_steps["scale"]
    j = list(pre.feature_names_in_).index(feature)
    col = list(pre.get_feature_names_out()).index(f"num__{feature}")

    def ids(batches: list) -> list[int]:
        return [int(round(v * scaler.scale_[j] + scaler.mean_[j]))
                for xb, _ in batches for v in xb[:, col].tolist()]

    return ids


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cluster():
    """A local Ray head started like a real cluster (``ray start --head``); stopped after."""
    port = _free_port()
    temp = Path(tempfile.mkdtemp(prefix="frc-", dir="/tmp"))
    ray_cli = Path(sys.executable).with_name("ray")
    proc = subprocess.Popen(
        [str(ray_cli), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
         "--node-ip-address=127.0.0.1", f"--temp-dir={temp}", "--include-dashboard=false",
         "--disable-usage-stats"],
        env={**os.environ, "RAY_AUTH_MODE": "disabled"}, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the local Ray head did not start") from None
                time.sleep(0.5)
        time.sleep(3)  # the raylet registers after the GCS listens
        yield address
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
def test_ray_data_shards_cover_every_train_row_once_per_epoch(cluster, tmp_path):
    import ray

    from fstrain.trainers.stream import source as streaming
    from fstrain.trainers.config import load_config
    from fstrain.trainers.stream.ray_feed import (
        FEED_AHEAD,
        RankFeed,
        RayShardStream,
        start_feeder,
    )
    from fstrain.trainers.torch_models import stream_torch_data

    X, y = make_binary(1001, seed=4)
    X["rid"] = np.arange(len(X), dtype=np.float64)
    old, streaming.ROW_GROUP_ROWS = streaming.ROW_GROUP_ROWS, 90  # uneven row groups
    try:
        source = streaming.StreamSource.from_frames(tmp_path, {"train": (X, y),
                                                               "validation": (X, y)})
    finally:
        streaming.ROW_GROUP_ROWS = old
    data = stream_torch_data(load_config({"model": "mlp", "seed": 7,
                                          "torch": {"shuffle_buffer": 128}}), source)
    rids = _row_ids(data.preprocessor, "rid")
    ray.init(address=cluster, log_to_driver=False)
    try:
        world = 3
        feeder = start_feeder(data.train_set, world, epochs=2)  # epoch 0 is read from now on
        # every rank's first blocks are read before anyone asks, and no more than FEED_AHEAD
        # (each rank has 4-5 pieces here: with the end mark, more than FEED_AHEAD to read)
        deadline = time.monotonic() + 120
        while (queued := ray.get(feeder.queued.remote())) != [FEED_AHEAD] * world:
            assert time.monotonic() < deadline and max(queued) <= FEED_AHEAD, queued
            time.sleep(0.2)

        def shard(rank: int, e: int, start: int = 0, feed=feeder, stream=data.train_set,
                  ) -> list:  # type: ignore[no-untyped-def]
            return list(RayShardStream(RankFeed(feed, rank), stream).epoch_batches(
                e, rank, world if feed is feeder else 2, 32, start=start))

        def epoch(e: int) -> tuple[list[list[int]], list[int]]:
            batches = [shard(rank, e) for rank in range(world)]
            return [rids(b) for b in batches], [len(b) for b in batches]

        first, steps = epoch(0)
        # every row once, none dropped or padded
        assert sorted(r for rows in first for r in rows) == list(range(len(X)))
        assert steps == [data.train_set.steps(world, 32)] * world  # equal DDP step counts
        second, _ = epoch(1)
        assert sorted(r for rows in second for r in rows) == list(range(len(X)))
        assert second != first  # reshuffled per epoch
        assert epoch(0)[0] == first  # seeded: the same epoch gives the same order (re-read)
        # a resumed epoch (mid-epoch checkpoint) starts at its batch with exactly the rows the
        # uninterrupted epoch went on with: each rank's shard once, in the same order
        per_rank = data.train_set.steps(world, 32)
        for rank, start in ((0, 1), (2, per_rank - 1)):
            assert rids(shard(rank, 1)[:start]) + rids(shard(rank, 1, start)) == second[rank]
        # without shuffling the piece the cut falls in is sliced (its rows before it not read)
        from fstrain.trainers.stream.split import SplitStream

        plain = SplitStream(source, "train", data.train_set.prep, seed=7)
        feed = start_feeder(plain, 2, epochs=1, start_epoch=None)
        whole = shard(1, 0, feed=feed, stream=plain)
        assert sorted(rids(whole)) == list(range(len(X) // 2, len(X)))
        assert rids(shard(1, 0, 3, feed=feed, stream=plain)) == rids(whole[3:])
        ray.kill(feed)
        with pytest.raises(ray.exceptions.RayTaskError, match="no epoch 2 of rank 0"):
            list(RayShardStream(RankFeed(feeder, 0), data.train_set).epoch_batches(2, 0, world,
                                                                                  32))
    finally:
        ray.shutdown()


def _files(model) -> set[str]:
    return {str(p.relative_to(model.model_path)) for p in Path(model.model_path).rglob("*")
            if p.is_file()}


@pytest.mark.slow
def test_workers_join_a_running_cluster_and_register_like_one_process(cluster, project):
    td = _adult_dataset(project)
    registry = project.get_model_registry()
    mlp = {"model": "mlp", "params": {}, "torch": {"epochs": 2, "batch_size": 128}}
    refs = [training.run(project, training.TrainingPipelineConfig(
        use_case="adult", training_dataset_version=td.version, model=mlp, **extra))
        for extra in ({}, {"workers": 2, "ray_address": cluster})]
    single, ddp = (registry.get_model(r.name, r.version) for r in refs)
    assert ddp.framework == single.framework == "torch" and _files(ddp) == _files(single)
    for key in ("feature_view_name", "feature_view_version", "training_dataset_version"):
        assert getattr(ddp, key) == getattr(single, key)
    notes = " ".join(ddp.training_config["nondeterminism"])
    assert f"joined Ray cluster at {cluster}" in notes and "DDP over 2 Ray Train workers" in notes
    assert ddp.training_metrics["validation_roc_auc"] > 0.6
    assert ddp.training_config["resumed_from"] is None
    # --resume of the finished run: nothing left to train, and the registry says where it
    # continued from
    resumed = training.run(project, training.TrainingPipelineConfig(
        use_case="adult", training_dataset_version=td.version, model=mlp, workers=2,
        ray_address=cluster, resume=True))
    again = registry.get_model(resumed.name, resumed.version)
    assert again.training_config["resumed_from"]["epoch"] == 2
    assert again.training_config["resumed_from"]["batch_in_epoch"] == 0
    assert again.training_metrics == ddp.training_metrics


RESUME_CONFIG = {"model": "mlp", "seed": 7, "params": {"hidden_sizes": [16], "dropout": 0.2},
                 "torch": {"epochs": 2, "batch_size": 32, "lr": 0.01, "deterministic": True,
                           "device": "cpu", "patience": None, "shuffle_buffer": 64,
                           "checkpoint_every_steps": 4}}


@pytest.mark.slow
def test_a_two_worker_run_stopped_mid_epoch_resumes_to_the_uninterrupted_weights(cluster,
                                                                                  tmp_path):
    import json

    from safetensors.torch import load_file

    from fstrain.trainers import train_distributed
    from tests.trainers.test_streamed_resume import write_source

    source = write_source(tmp_path / "data")  # 603 rows in row groups of 97

    def run(name: str, **extra):  # type: ignore[no-untyped-def]
        return train_distributed(RESUME_CONFIG, source=source, workdir=tmp_path / name,
                                 num_workers=2, use_gpu=False, ray_address=cluster, **extra)

    full = run("full")
    # 301/302 rows a rank: 10 batches of 32 an epoch; checkpoints after steps 4, 8, 12, 16
    assert full.extra["steps_per_epoch"] == 10 and full.history[-1]["global_step"] == 20

    def stop(step: int) -> None:  # runs in both workers: a preempted job
        if step == 17:
            raise RuntimeError(f"stopped after step {step}")

    with pytest.raises(Exception):  # noqa: B017 (Ray Train wraps the workers' error)
        run("cut", on_step=stop)
    meta = json.loads((tmp_path / "cut" / "checkpoints" / "last" / "state.json").read_text())
    assert (meta["loop"]["epoch"], meta["loop"]["batch_in_epoch"]) == (1, 6)
    assert meta["world_size"] == 2 and meta["train_stream"]["world_size"] == 2
    assert [r["batch_in_epoch"] for r in meta["rng_by_rank"]] == [6, 6]
    resumed = run("cut", resume=True)
    assert resumed.extra["resumed_from"] == {"epoch": 1, "batch_in_epoch": 6, "global_step": 16}
    assert resumed.extra["rank_metrics_agree"]
    assert resumed.metrics == full.metrics
    strip = [{k: v for k, v in row.items() if not k.endswith("_seconds")}
             for row in full.history]
    assert [{k: v for k, v in row.items() if not k.endswith("_seconds")}
            for row in resumed.history] == strip
    for name in ("best", "last"):
        a, b = (load_file(str(tmp_path / run_ / "checkpoints" / name / "model.safetensors"))
                for run_ in ("full", "cut"))
        assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a), name


@pytest.mark.slow
def test_ray_data_shards_of_a_csv_version_are_its_pieces_of_text_each_row_once(
        cluster, project, monkeypatch):
    """--workers over a csv version: the feeder's Ray Data tasks read the row-aligned pieces
    of the verified text (as the single process does), every train row once per epoch."""
    import pandas as pd
    import ray

    from feature_store.local.readers import text_pieces
    from fstrain.trainers.stream.source import RAY_TRAIN, version_source
    from fstrain.trainers.config import load_config
    from fstrain.trainers.stream.ray_feed import RankFeed, RayShardStream, start_feeder
    from fstrain.trainers.torch_models import stream_torch_data

    monkeypatch.setattr(text_pieces, "PIECE_BYTES", 600)
    X, y = make_binary(500, seed=4)
    fg = project.get_feature_store().get_or_create_feature_group("rows", version=1,
                                                                  primary_key=["rid"])
    fg.insert(pd.DataFrame({"rid": np.arange(len(X)), "row": np.arange(len(X), dtype=float),
                            **X, "label": y.to_numpy().ravel()}))
    fv = project.get_feature_store().create_feature_view(
        "rows", query=fg.select_all(), labels=["label"])
    version, _ = fv.create_train_validation_test_split(validation_size=0.2, test_size=0.2,
                                                       seed=3, data_format="csv")
    source = version_source(fv, version, reader=RAY_TRAIN, required=False)
    assert source.texts and len(source.group_rows["train"]) > 4
    data = stream_torch_data(load_config({"model": "mlp", "seed": 7,
                                          "torch": {"shuffle_buffer": 64}}), source)
    row_ids = _row_ids(data.preprocessor, "row")
    train_rids = sorted(int(v) for v in fv.get_train_validation_test_split(version)[0]["row"])
    ray.init(address=cluster, log_to_driver=False)
    try:
        world = 2
        feeder = start_feeder(data.train_set, world, epochs=2)
        for epoch in range(2):
            rows = []
            for rank in range(world):
                shard = RayShardStream(RankFeed(feeder, rank), data.train_set)
                batches = list(shard.epoch_batches(epoch, rank, world, 32))
                assert len(batches) == data.train_set.steps(world, 32)
                rows += row_ids(batches)
            assert sorted(rows) == train_rids  # every train row once, none dropped or padded
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_workers_train_a_csv_version_as_its_parquet_twin(cluster, project):
    """`--workers 2` over the adult rows as Parquet and as csv (one row group, one piece of
    text: the same shards): both stream the version's files (a csv version was read into frames
    and written to Parquet before) and the DDP runs register the same metrics."""
    from pipelines import training_dataset
    from tests.pipelines.test_pipelines import _features

    _features(project, "adult")
    versions = {fmt: training_dataset.run(project, training_dataset.TrainingDatasetConfig(
        use_case="adult", seed=5, data_format=fmt)).version for fmt in ("parquet", "csv")}
    mlp = {"model": "mlp", "seed": 3, "params": {"hidden_sizes": [16]},
           "torch": {"epochs": 2, "batch_size": 64, "deterministic": True}}
    registry = project.get_model_registry()
    models = {fmt: registry.get_model(*(lambda r: (r.name, r.version))(training.run(
        project, training.TrainingPipelineConfig(
            use_case="adult", training_dataset_version=v, model=mlp, workers=2,
            ray_address=cluster, model_name=f"adult_{fmt}")))) for fmt, v in versions.items()}
    assert models["csv"].training_dataset_version == versions["csv"]
    assert "DDP over 2 Ray Train workers" in " ".join(models["csv"].training_config[
        "nondeterminism"])
    assert models["csv"].training_metrics == models["parquet"].training_metrics
    for fmt, v in versions.items():  # streamed from the version's files: no frames written
        assert not (Path(project.root) / "runs" / f"adult_{fmt}_td{v}" / "input").exists()
        assert (Path(project.root) / "runs" / f"adult_{fmt}_td{v}").is_dir()
