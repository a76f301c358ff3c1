"""Resuming a streamed (``torch.streaming``) run from a mid-epoch checkpoint: the rest of the
epoch is the uninterrupted run's batches (rows already trained on are neither read nor seen
again), the final weights and history are bitwise the same, and a resume that cannot be exact
is refused by name."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers.config import load_config
from fstrain.trainers.loop_resume import DistContext
from fstrain.trainers.stream.prep import fit_streamed
from fstrain.trainers.stream.pieces import batch_sizes, regroup, resume_rows, seek_pieces
from fstrain.trainers.stream.source import StreamSource
from fstrain.trainers.stream.split import SplitStream
from fstrain.trainers.torch_models import train_torch_streamed
from tests.trainers.conftest import make_binary

WORKER = Path(__file__).with_name("stream_resume_worker.py")
ROWS = 603
CONFIG = {"model": "mlp", "seed": 7, "params": {"hidden_sizes": [16], "dropout": 0.2},
          "torch": {"epochs": 2, "batch_size": 64, "grad_accum_steps": 2, "lr": 0.01,
                    "deterministic": True,
                    "device": "cpu", "patience": None, "streaming": True,
                    "shuffle_buffer": 150, "checkpoint_every_steps": 4}}


def write_source(directory: Path, rows: int = ROWS, group_rows: int = 97) -> StreamSource:
    """Train/validation Parquet files in many uneven row groups, ``rid`` identifying a row."""
    from fstrain.trainers.stream import source as streaming

    X, y = make_binary(rows, seed=3)
    X["rid"] = np.arange(rows, dtype=np.float64)
    old, streaming.ROW_GROUP_ROWS = streaming.ROW_GROUP_ROWS, group_rows
    try:
        return StreamSource.from_frames(directory, {"train": (X, y), "validation": (X[:100],
                                                                                   y[:100])})
    finally:
        streaming.ROW_GROUP_ROWS = old


class CountingStream(SplitStream):
    """A split stream that counts the rows it reads (to show skipped rows are not read)."""

    rows_read = 0

    def piece_arrays(self, piece):  # type: ignore[no-untyped-def]
        self.rows_read += piece[2]
        return super().piece_arrays(piece)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return write_source(tmp_path_factory.mktemp("stream"))


def _same(a, b) -> bool:
    return len(a) == len(b) and all(torch.equal(x1, x2) and torch.equal(y1, y2)
                                    for (x1, y1), (x2, y2) in zip(a, b, strict=True))


@pytest.mark.parametrize(("world", "rank", "batch", "buffer"),
                         [(1, 0, 64, 150), (1, 0, 50, 0), (2, 0, 43, 200), (2, 1, 64, 150)])
def test_an_epoch_started_at_any_batch_is_the_rest_of_the_full_epoch(source, world, rank,
                                                                     batch, buffer):
    prep, _ = fit_streamed(source, load_config({"model": "mlp"}))
    stream = CountingStream(source, "train", prep, shuffle_buffer=buffer, seed=11)
    full = list(stream.epoch_batches(1, rank, world, batch))
    steps = stream.steps(world, batch)
    assert len(full) == steps
    sizes = [len(y) for _, y in full]
    assert sizes == batch_sizes(sum(sizes), batch, steps)
    if (world, rank, batch) == (2, 0, 43):  # 301 rows: one short, its last batch halved
        assert sizes == [43] * 6 + [21, 22]
    for start in range(steps):
        stream.rows_read = 0
        assert _same(list(stream.epoch_batches(1, rank, world, batch, start=start)),
                     full[start:]), start
        # rows before the resume point are read only within its shuffle window / row group
        assert stream.rows_read <= sum(sizes[start:]) + max(buffer, 97) + 96, start
    with pytest.raises(Exception, match=f"batch {steps} of an epoch of {steps} batches"):
        list(stream.epoch_batches(1, rank, world, batch, start=steps))


def _final(result) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in result.model.module.state_dict().items()}


def _history(result) -> list[dict]:
    return [{k: v for k, v in row.items() if not k.endswith("_seconds")}
            for row in result.history]


class Interrupted(RuntimeError):
    pass


def test_a_run_stopped_mid_epoch_resumes_to_the_same_weights_bit_for_bit(source, tmp_path):
    lineage = {"feature_view": "synthetic", "training_dataset_version": 1}
    full = train_torch_streamed(CONFIG, source, workdir=None)  # no checkpoints: same result
    steps = full.extra["global_step"]
    assert steps == 2 * 5  # 603 rows in 10 batches of 64, 2 per step, two epochs

    def stop(step: int) -> None:
        if step == 9:  # epoch 1, a step after the checkpoint of step 8 (its batch 6)
            raise Interrupted(step)

    with pytest.raises(Interrupted):
        train_torch_streamed(CONFIG, source, workdir=tmp_path / "run", lineage=lineage,
                             on_step=stop)
    meta = json.loads((tmp_path / "run" / "checkpoints" / "last" / "state.json").read_text())
    assert (meta["loop"]["epoch"], meta["loop"]["batch_in_epoch"]) == (1, 6)
    assert meta["lineage"]["train_stream"]["rows"] == ROWS
    # a resume that cannot be exact is refused by name (and leaves the checkpoint alone)
    changed = {**CONFIG, "seed": 8, "torch": CONFIG["torch"] | {"batch_size": 32}}
    with pytest.raises(ConfigError) as refused:
        train_torch_streamed(changed, source, workdir=tmp_path / "run", lineage=lineage,
                             resume=True)
    assert "config.seed: checkpoint has 7, now 8" in str(refused.value)
    assert "config.torch.batch_size: checkpoint has 64, now 32" in str(refused.value)
    other = write_source(tmp_path / "other", rows=500)  # another version's files
    with pytest.raises(ConfigError) as refused:
        train_torch_streamed(CONFIG, other, workdir=tmp_path / "run", resume=True,
                             lineage={**lineage, "training_dataset_version": 2})
    assert "lineage.train_stream.rows: checkpoint has 603, now 500" in str(refused.value)
    assert "lineage.training_dataset_version: checkpoint has 1, now 2" in str(refused.value)
    # another world size would deal the epoch's rows to other ranks: refused, not restarted
    with pytest.raises(ConfigError, match=r"after batch 6 of epoch 1 \(global step 8\) with "
                                          r"world size 1 \(--workers 1\); now world size 2"):
        _fit(source, tmp_path / "run", DistContext(rank=0, world_size=2))

    # a checkpoint over other rows, or whose ranks read other pieces: refused, not restarted
    for key, value, message in (
            ("rows", 999, r"over another train split \(rows: checkpoint has 999, now 603\)"),
            ("pieces_sha256", "0" * 16, (r"the checkpoint's ranks read pieces 0{16}, these "
                                         r"ranks would read pieces [0-9a-f]{16}"))):
        tampered = tmp_path / f"tampered-{key}"
        shutil.copytree(tmp_path / "run", tampered)
        state = tampered / "checkpoints" / "last" / "state.json"
        changed_meta = json.loads(state.read_text())
        changed_meta["train_stream"][key] = value
        state.write_text(json.dumps(changed_meta))
        with pytest.raises(ConfigError, match=message):
            _fit(source, tampered, DistContext())

    resumed = train_torch_streamed(CONFIG, source, workdir=tmp_path / "run", lineage=lineage,
                                   resume=True)
    assert resumed.extra["resumed_from"] == {"epoch": 1, "batch_in_epoch": 6, "global_step": 8}
    assert resumed.extra["global_step"] == steps
    a, b = _final(full), _final(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert _history(resumed) == _history(full)
    assert resumed.metrics == full.metrics


def _fit(source, workdir: Path, dist, train_set=None):  # type: ignore[no-untyped-def]
    """The loop over ``source`` resumed from ``workdir``'s checkpoints as rank ``dist.rank``."""
    from fstrain.trainers.loop import LoopSpec, fit
    from fstrain.trainers.nets import build_net
    from fstrain.trainers.torch_models import stream_torch_data

    config = load_config(CONFIG)
    data = stream_torch_data(config, source)
    return fit(LoopSpec(model=build_net(data.arch), train_set=train_set or data.train_set,
                        val_set=data.val_set, n_classes=2, options=config.torch, seed=config.seed,
                        metric="roc_auc", mode="max", checkpoint_dir=workdir / "checkpoints",
                        config=config.fingerprint_dict(), resume=True, dist=dist,
                        lineage={"feature_view": "synthetic", "training_dataset_version": 1,
                                 "train_stream": data.train_set.layout()}))


class EpochStream(SplitStream):
    """A streamed split that can only start an epoch at its first batch."""

    resumes_mid_epoch = False


def test_mid_epoch_checkpoints_are_taken_by_the_ray_data_shards_of_workers(source, tmp_path):
    from pipelines import training
    from fstrain.trainers.engine import check_engine_options
    from fstrain.trainers.stream.ray_feed import RayShardStream
    from fstrain.trainers.torch_models import stream_torch_data

    assert RayShardStream.resumes_mid_epoch
    # a streamed input that cannot start an epoch part way is refused mid-epoch checkpoints
    t = stream_torch_data(load_config(CONFIG), source).train_set
    epoch_only = EpochStream(t.source, t.split, t.prep, shuffle_buffer=150, seed=7)
    with pytest.raises(ConfigError, match=r"torch\.checkpoint_every_steps=4 writes mid-epoch "
                                          r"checkpoints, but the streamed input EpochStream"):
        _fit(source, tmp_path, DistContext(), epoch_only)
    cfg = load_config({**CONFIG, "torch": {**CONFIG["torch"], "streaming": False}})
    run = training.TrainingPipelineConfig(use_case="adult", training_dataset_version=1,
                                          workers=2, model=CONFIG)
    check_engine_options(cfg, run)  # --workers 2 with checkpoint_every_steps: accepted


def test_seeking_skips_whole_pieces_by_count_and_slices_the_cut_one():
    pieces = [(3, 0, 10), (0, 5, 7), (2, 0, 4)]
    assert seek_pieces(pieces, 0) == pieces
    assert seek_pieces(pieces, 9) == [(3, 9, 1), (0, 5, 7), (2, 0, 4)]
    assert seek_pieces(pieces, 10) == [(0, 5, 7), (2, 0, 4)]
    assert seek_pieces(pieces, 13) == [(0, 8, 4), (2, 0, 4)]
    assert seek_pieces(pieces, 20) == [(2, 3, 1)]
    assert seek_pieces(pieces, 21) == []
    # no shuffling: every used row is skipped unread
    assert resume_rows(pieces, 13, 0, None) == (13, 0)
    # shuffle windows of >= 12 rows: [10 + 7] then [4]; the cut in the first window reads it
    # again and drops its used rows; a cut in the second skips the first, drawing its order
    rng, fresh = np.random.default_rng(5), np.random.default_rng(5)
    assert resume_rows(pieces, 13, 12, rng) == (0, 13)
    assert rng.bit_generator.state == fresh.bit_generator.state
    assert resume_rows(pieces, 19, 12, rng) == (17, 2)
    fresh.permutation(17)
    assert rng.bit_generator.state == fresh.bit_generator.state


def test_blocks_are_recut_into_whole_pieces_whatever_the_reader_made_of_them():
    x = np.arange(21, dtype=np.float32)[:, None]
    blocks = [(x[:4], x[:4, 0]), (x[4:15], x[4:15, 0]), (x[15:], x[15:, 0])]
    out = list(regroup(iter(blocks), [10, 7, 4]))
    assert [len(y) for _, y in out] == [10, 7, 4]
    assert np.array_equal(np.concatenate([y for _, y in out]), x[:, 0])
    with pytest.raises(InvalidArgumentError, match="1 row\\(s\\) left over"):
        list(regroup(iter(blocks), [10, 10]))
    with pytest.raises(InvalidArgumentError, match="short of a 2-row piece"):
        list(regroup(iter(blocks), [10, 10, 2]))


class PieceFeed:
    """A rank's pieces read in this process in the :class:`RankFeed` protocol, cut into blocks
    of other sizes than the pieces (as Ray Data may make them), counting the rows read."""

    def __init__(self, stream: SplitStream, rank: int, world: int) -> None:
        self.stream, self.pieces, self.rows_read = stream, stream.pieces(rank, world), 0

    def blocks(self, epoch: int, seek: int = 0):  # type: ignore[no-untyped-def]
        for piece in seek_pieces(self.pieces, seek):
            self.rows_read += piece[2]
            x, y = self.stream.piece_arrays(piece)
            cut = len(y) // 3
            yield x[:cut], y[:cut]
            yield x[cut:], y[cut:]


@pytest.mark.parametrize(("world", "rank", "batch", "buffer"),
                         [(2, 0, 43, 200), (2, 1, 64, 0), (3, 2, 50, 150)])
def test_a_ray_shard_started_at_any_batch_reads_only_the_rest_of_its_epoch(source, world, rank,
                                                                           batch, buffer):
    from fstrain.trainers.stream.ray_feed import RayShardStream

    prep, _ = fit_streamed(source, load_config({"model": "mlp"}))
    stream = SplitStream(source, "train", prep, shuffle_buffer=buffer, seed=11)
    feed = PieceFeed(stream, rank, world)
    shard = RayShardStream(feed, stream, epochs=2)  # type: ignore[arg-type]
    full = list(shard.epoch_batches(1, rank, world, batch))
    steps = stream.steps(world, batch)
    sizes = [len(y) for _, y in full]
    assert len(full) == steps and sizes == batch_sizes(sum(sizes), batch, steps)
    rows = sum(p[2] for p in feed.pieces)
    assert sum(sizes) == rows and feed.rows_read == rows  # the shard once, nothing dropped
    if (world, rank, batch) == (2, 0, 43):  # 301 rows: one short, its last batch halved
        assert sizes == [43] * 6 + [21, 22]
    for start in range(1, steps):
        feed.rows_read = 0
        assert _same(list(shard.epoch_batches(1, rank, world, batch, start=start)),
                     full[start:]), start
        left = sum(sizes[start:])
        if buffer:  # only the shuffle window the cut falls in is read again
            assert left <= feed.rows_read <= left + buffer + 97, start
        else:  # nothing before the cut is read
            assert feed.rows_read == left, start
    with pytest.raises(InvalidArgumentError, match=f"batch {steps} of an epoch of {steps}"):
        shard.epoch_batches(1, rank, world, batch, start=steps)


PIPELINE_CONFIG = {"model": "mlp", "seed": 3, "params": {"hidden_sizes": [16], "dropout": 0.1},
                   "torch": {"epochs": 2, "batch_size": 32, "deterministic": True,
                             "device": "cpu", "patience": None, "streaming": True,
                             "shuffle_buffer": 64, "checkpoint_every_steps": 3}}


def _worker(root: Path, version: int, name: str, *kill_at: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, str(WORKER), str(root), str(version), name,
                           json.dumps(PIPELINE_CONFIG), *map(str, kill_at)],
                          env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slow
def test_a_killed_streamed_pipeline_run_resumes_through_the_cli_and_registers_the_same_model(
        project, tmp_path):
    from safetensors.torch import load_file
    from typer.testing import CliRunner

    from fstrain.cli.app import app
    from tests.pipelines.test_pipelines import _adult_dataset

    td = _adult_dataset(project)
    root = Path(project.root)
    full = _worker(root, td.version, "full")
    assert full.returncode == 0, full.stderr[-3000:]
    runs = root / "runs"
    steps = json.loads((runs / f"full_td{td.version}" / "checkpoints" / "last" / "state.json")
                       .read_text())["loop"]["global_step"]
    per_epoch = steps // 2
    checkpointed = (per_epoch // 3 + 1) * 3  # epoch 1's first mid-epoch checkpoint (every 3)
    kill_at = checkpointed + 1  # killed one step later, before the next checkpoint
    cut = _worker(root, td.version, "cut", kill_at)
    assert cut.returncode == -signal.SIGKILL, cut.stderr[-3000:]
    meta = json.loads((runs / f"cut_td{td.version}" / "checkpoints" / "last" / "state.json")
                      .read_text())
    loop = meta["loop"]
    assert loop["global_step"] == checkpointed and loop["epoch"] == 1
    assert 0 < loop["batch_in_epoch"] < per_epoch
    (tmp_path / "cfg.json").write_text(json.dumps(PIPELINE_CONFIG))  # YAML reads JSON
    out = CliRunner().invoke(app, ["train", "adult", "-t", str(td.version), "--config",
                                   str(tmp_path / "cfg.json"), "--model-name", "cut",
                                   "--resume", "--root", str(root)])
    assert out.exit_code == 0, out.output
    registry = project.get_model_registry()
    a, b = registry.get_model("full", 1), registry.get_model("cut", 1)
    assert a.training_config["resumed_from"] is None
    assert b.training_config["resumed_from"] == {
        "epoch": 1, "batch_in_epoch": loop["batch_in_epoch"], "global_step": checkpointed}
    assert b.training_metrics == a.training_metrics
    wa, wb = (load_file(str(Path(m.model_path) / "model" / "model.safetensors")) for m in (a, b))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    # --resume on another version of the training dataset: refused by name, nothing trained
    from pipelines import training_dataset

    td2 = training_dataset.run(project, training_dataset.TrainingDatasetConfig(use_case="adult",
                                                                               seed=6))
    out = CliRunner().invoke(app, ["train", "adult", "-t", str(td2.version), "--config",
                                   str(tmp_path / "cfg.json"), "--model-name", "cut",
                                   "--resume", "--root", str(root)])
    assert out.exit_code == 2, out.output
    assert (f"model 'cut' has no checkpoints for training dataset v{td2.version}; its "
            f"checkpoints are for training dataset v{td.version}") in " ".join(out.output.split())
    assert not (runs / f"cut_td{td2.version}").exists()
    assert [m.version for m in registry.get_models("cut")] == [1]


def test_resume_on_another_training_dataset_version_is_refused_by_name(tmp_path):
    from pipelines.training import _check_resume_version

    runs = tmp_path / "runs"
    _check_resume_version(runs / "m_td2", "m", 2)  # no run yet: a fresh start
    (runs / "m_x_td5").mkdir(parents=True)  # another model's checkpoints do not count
    _check_resume_version(runs / "m_td2", "m", 2)
    (runs / "m_td1").mkdir()
    with pytest.raises(ConfigError, match=r"model 'm' has no checkpoints for training dataset "
                                          r"v2; its checkpoints are for training dataset v1 "):
        _check_resume_version(runs / "m_td2", "m", 2)
    _check_resume_version(runs / "m_td1", "m", 1)  # its own version resumes
