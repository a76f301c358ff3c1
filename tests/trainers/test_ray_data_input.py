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

from fstrain.kernel.errors import ConfigError
from pipelines import training
from tests.pipelines.test_pipelines import _adult_dataset
from tests.trainers.conftest import make_binary


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

    import pipelines.trainers.streaming as streaming
    from pipelines.trainers.config import load_config
    from pipelines.trainers.ray_input import (
        FEED_AHEAD,
        RankFeed,
        RayShardStream,
        start_feeder,
    )
    from pipelines.trainers.torch_models import stream_torch_data

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
    pre = data.preprocessor
    scaler = pre.named_transformers_["num"].named_steps["scale"]
    j = list(pre.feature_names_in_).index("rid")
    col = list(pre.get_feature_names_out()).index("num__rid")
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

        def epoch(e: int) -> tuple[list[int], list[int]]:
            rows, steps = [], []
            for rank in range(world):
                shard = RayShardStream(RankFeed(feeder, rank), data.train_set)
                batches = list(shard.epoch_batches(e, rank, world, 32))
                steps.append(len(batches))
                rows += [int(round(v * scaler.scale_[j] + scaler.mean_[j]))
                         for xb, _ in batches for v in xb[:, col].tolist()]
            return rows, steps

        first, steps = epoch(0)
        assert sorted(first) == list(range(len(X)))  # every row once, none dropped or padded
        assert steps == [data.train_set.steps(world, 32)] * world  # equal DDP step counts
        second, _ = epoch(1)
        assert sorted(second) == sorted(first) and second != first  # reshuffled per epoch
        assert epoch(0)[0] == first  # seeded: the same epoch gives the same order (re-read)
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
    # continued from; mid-epoch checkpoints are refused before Ray starts (Ray Data shards
    # cannot start an epoch part way)
    resumed = training.run(project, training.TrainingPipelineConfig(
        use_case="adult", training_dataset_version=td.version, model=mlp, workers=2,
        ray_address=cluster, resume=True))
    again = registry.get_model(resumed.name, resumed.version)
    assert again.training_config["resumed_from"]["epoch"] == 2
    assert again.training_config["resumed_from"]["batch_in_epoch"] == 0
    assert again.training_metrics == ddp.training_metrics
    every = {**mlp, "torch": {**mlp["torch"], "checkpoint_every_steps": 5}}
    with pytest.raises(ConfigError, match="checkpoint_every_steps=5 writes mid-epoch"):
        training.run(project, training.TrainingPipelineConfig(
            use_case="adult", training_dataset_version=td.version, model=every, workers=2,
            ray_address=cluster))
