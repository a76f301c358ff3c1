"""``torch.streaming`` over csv and jsonl versions: the trainer reads the row-aligned pieces of
their text (verified against the recorded sha256) as it reads a Parquet version's row groups —
every train row once per epoch, a seeded deterministic result, the Parquet version's model when
the units coincide, mid-epoch resume over the same pieces only, a tampered file refused before
training."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from feature_store.local.readers import text_pieces as tp
from fstrain.kernel.errors import ConfigError, IntegrityError
from fstrain.trainers.stream.source import TORCH_STREAMING, version_source
from fstrain.trainers.config import load_config
from fstrain.trainers.stream.prep import fit_streamed
from fstrain.trainers.stream.split import SplitStream
from fstrain.trainers.torch_models import train_torch_streamed

ROWS = 400
FORMATS = ("parquet", "csv", "jsonl")
CONFIG = {"model": "mlp", "seed": 5, "params": {"hidden_sizes": [8], "dropout": 0.1},
          "torch": {"epochs": 2, "batch_size": 64, "lr": 0.01, "deterministic": True,
                    "device": "cpu", "patience": None, "streaming": True,
                    "shuffle_buffer": 64, "checkpoint_every_steps": 3}}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny batches: one intra-op thread is faster (and this machine's cores are shared)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def view(tmp_path_factory):
    """One feature view (floats with NaN, text needing csv quoting, a label) and a
    train/validation/test version of it in each format, split alike."""
    import feature_store

    fs = feature_store.login(root=tmp_path_factory.mktemp("text") / "store").get_feature_store()
    rng = np.random.default_rng(4)
    f0 = rng.normal(size=ROWS)
    f1 = rng.normal(size=ROWS)
    f1[::9] = np.nan
    words = np.array(["plain", "a,b", 'say "hi"', "two\nlines", ""], dtype=object)
    fg = fs.get_or_create_feature_group("rows", version=1, primary_key=["rid"])
    fg.insert(pd.DataFrame({"rid": np.arange(ROWS), "f0": f0, "f1": f1,
                            "code": words[rng.integers(0, len(words), ROWS)],
                            "label": (f0 + rng.normal(0, 0.7, ROWS) > 0).astype(np.int64)}))
    fv = fs.create_feature_view("rows", query=fg.select(["f0", "f1", "code", "label"]),
                                labels=["label"])
    versions = {fmt: fv.create_train_validation_test_split(
        validation_size=0.2, test_size=0.2, seed=3, data_format=fmt)[0] for fmt in FORMATS}
    return fv, versions


def _weights(result) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in result.model.module.state_dict().items()}


def _same_weights(a, b) -> bool:
    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_csv_and_jsonl_versions_train_to_the_parquet_versions_model(view):
    fv, versions = view
    sources = {fmt: version_source(fv, v, reader=TORCH_STREAMING) for fmt, v in versions.items()}
    assert sources["csv"].texts and not sources["parquet"].texts
    # one row group, one piece each: the same units, so the same batches and weights
    assert {len(s.group_rows["train"]) for s in sources.values()} == {1}
    runs = {fmt: train_torch_streamed(CONFIG, s, workdir=None) for fmt, s in sources.items()}
    train_rows = int(ROWS * 0.6)
    for fmt in ("csv", "jsonl"):
        assert runs[fmt].extra["streaming"] == runs["parquet"].extra["streaming"]
        assert runs[fmt].extra["streaming"]["train_rows"] == train_rows
        assert _same_weights(runs[fmt], runs["parquet"]), fmt
        assert runs[fmt].metrics == runs["parquet"].metrics
    assert runs["csv"].metrics["auc"] > 0.7


def _epoch_rows(stream: SplitStream, epoch: int) -> np.ndarray:
    x = np.concatenate([b[0].numpy() for b in stream.epoch_batches(epoch, 0, 1, 32)])
    return x[np.lexsort(x.T[::-1])]


@pytest.mark.parametrize("data_format", ["csv", "jsonl"])
def test_many_pieces_deal_every_row_once_per_epoch_and_train_deterministically(
        view, data_format, monkeypatch, tmp_path):
    fv, versions = view
    monkeypatch.setattr(tp, "PIECE_BYTES", 2000)
    source = version_source(fv, versions[data_format], reader=TORCH_STREAMING)
    parquet = version_source(fv, versions["parquet"], reader=TORCH_STREAMING)
    pieces = source.group_rows["train"]
    assert len(pieces) > 3 and sum(pieces) == parquet.rows("train") == int(ROWS * 0.6)
    prep, _ = fit_streamed(parquet, load_config(CONFIG))  # one preprocessing: rows comparable
    ours = SplitStream(source, "train", prep, shuffle_buffer=64, seed=5)
    theirs = SplitStream(parquet, "train", prep, shuffle_buffer=64, seed=5)
    assert ours.steps(1, 32) == theirs.steps(1, 32)
    assert np.array_equal(_epoch_rows(ours, 0), _epoch_rows(theirs, 0))  # each row once
    assert np.array_equal(_epoch_rows(ours, 1), _epoch_rows(theirs, 0))
    first = [b[1].tolist() for b in ours.epoch_batches(0, 0, 1, 32)]
    assert first != [b[1].tolist() for b in ours.epoch_batches(1, 0, 1, 32)]  # reshuffled
    if data_format == "jsonl":  # csv: the resume test below trains it twice alike
        a = train_torch_streamed(CONFIG, source, workdir=None)
        b = train_torch_streamed(CONFIG, source, workdir=None)
        assert _same_weights(a, b) and a.metrics == b.metrics  # a fixed seed: one result
        assert a.extra["streaming"]["train_rows"] == sum(pieces)
    streamed_fit, _ = fit_streamed(source, load_config(CONFIG))
    x = next(iter(theirs.batches(0, 1, 500)))[0].numpy()
    X, _ = parquet.read("train", (0, 0, parquet.rows("train")))
    # the preprocessing fitted piece by piece is the Parquet (and in-memory) fit's
    assert np.allclose(streamed_fit.arrays(X, _, "train")[0], x, atol=1e-6)


class Interrupted(RuntimeError):
    pass


def test_a_text_run_resumes_mid_epoch_bit_for_bit_and_not_over_other_pieces(
        view, monkeypatch, tmp_path):
    fv, versions = view
    monkeypatch.setattr(tp, "PIECE_BYTES", 2000)
    source = version_source(fv, versions["csv"], reader=TORCH_STREAMING)
    lineage = {"feature_view": fv.name, "training_dataset_version": versions["csv"]}
    full = train_torch_streamed(CONFIG, source, workdir=None)

    def stop(step: int) -> None:
        if step == 7:  # epoch 1 (4 steps an epoch), a step after the checkpoint of step 6
            raise Interrupted(step)

    with pytest.raises(Interrupted):
        train_torch_streamed(CONFIG, source, workdir=tmp_path, lineage=lineage, on_step=stop)
    meta = json.loads((tmp_path / "checkpoints" / "last" / "state.json").read_text())
    layout = meta["lineage"]["train_stream"]
    assert (layout["text_format"], layout["text_pieces"]) == ("csv", len(source.group_rows["train"]))
    monkeypatch.setattr(tp, "PIECE_BYTES", 2500)  # the same file cut otherwise
    other = version_source(fv, versions["csv"], reader=TORCH_STREAMING)
    with pytest.raises(ConfigError, match=r"lineage\.train_stream\.text_pieces: checkpoint has "):
        train_torch_streamed(CONFIG, other, workdir=tmp_path, lineage=lineage, resume=True)
    parquet = version_source(fv, versions["parquet"], reader=TORCH_STREAMING)
    with pytest.raises(ConfigError, match=r"lineage\.train_stream\.row_groups: checkpoint lacks"):
        train_torch_streamed(CONFIG, parquet, workdir=tmp_path, lineage=lineage, resume=True)
    resumed = train_torch_streamed(CONFIG, source, workdir=tmp_path, lineage=lineage, resume=True)
    assert resumed.extra["resumed_from"] == {"epoch": 1, "batch_in_epoch": 2, "global_step": 6}
    assert _same_weights(resumed, full) and resumed.metrics == full.metrics


def test_a_tampered_csv_file_is_refused_before_training(view, tmp_path):
    fv, versions = view
    path = Path(fv.get_training_dataset(versions["csv"]).location) / "train.csv"
    original = path.read_bytes()
    try:
        path.write_bytes(original.replace(b"a,b", b"a;b", 1))  # same size, other bytes
        with pytest.raises(IntegrityError, match="train"):
            version_source(fv, versions["csv"], reader=TORCH_STREAMING)
    finally:
        path.write_bytes(original)
    assert version_source(fv, versions["csv"], reader=TORCH_STREAMING).rows("train") == int(ROWS * 0.6)


def test_a_piece_parsing_to_another_row_count_is_refused(view):
    fv, versions = view
    source = version_source(fv, versions["jsonl"], reader=TORCH_STREAMING)
    wrong = type(source)(source.files, {**source.group_rows, "train": (source.rows("train") + 1,)},
                         source.shaper, texts=source.texts)
    with pytest.raises(IntegrityError, match=r"piece 0 of .*train\.jsonl \(train split\) "
                                             r"parsed to 240 rows where its bytes hold 241"):
        wrong.read("train", (0, 0, 5))
