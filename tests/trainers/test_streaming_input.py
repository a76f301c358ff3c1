"""The streamed input of the torch MLP loop: shards cover each row once, seeded order, equal step
counts, a streamed preprocessing fit equal to the in-memory one, refused options."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers import train
from fstrain.trainers.config import load_config
from fstrain.trainers.data import FeatureSchema
from fstrain.trainers.preprocessing import fit_transform, transform
from fstrain.trainers.stream.prep import fit_streamed
from fstrain.trainers.stream.pieces import exact_batches, rank_pieces
from fstrain.trainers.stream.source import StreamSource
from fstrain.trainers.stream.split import SplitStream
from tests.trainers.conftest import make_binary


def _frames(n, seed=0):
    X, y = make_binary(n, seed=seed)
    X["rid"] = np.arange(n, dtype=np.float64)  # scaled monotonically: identifies a row
    X["code"] = np.random.default_rng(seed).choice([f"c{i}" for i in range(9)], n,
                                                   p=np.arange(1, 10) / 45)
    X["small"] = pd.array(np.random.default_rng(seed).integers(0, 4, n), dtype="Int64")
    return X, y


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    from fstrain.trainers.stream import source as streaming

    old, streaming.ROW_GROUP_ROWS = streaming.ROW_GROUP_ROWS, 97  # many uneven row groups
    try:
        X, y = _frames(1003)
        return StreamSource.from_frames(tmp_path_factory.mktemp("stream"), {
            "train": (X, y), "validation": (X.iloc[:200], y.iloc[:200])}), X, y
    finally:
        streaming.ROW_GROUP_ROWS = old


@pytest.mark.parametrize("groups", [(10, 10, 10, 3), (1,), (7, 0, 5), (1000,)])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_rank_pieces_cover_each_row_once_in_near_equal_shares(groups, world):
    n = sum(groups)
    starts = np.concatenate([[0], np.cumsum(groups)])
    for seed in (None, 3):
        seen, sizes = [], []
        for rank in range(world):
            pieces = rank_pieces(groups, rank, world, seed)
            rows = [starts[g] + o + i for g, o, k in pieces for i in range(k)]
            assert all(0 < k and o + k <= groups[g] for g, o, k in pieces)
            seen += rows
            sizes.append(len(rows))
        assert sorted(seen) == list(range(n))
        assert max(sizes) - min(sizes) <= 1


def _rids(prep, x):
    """Row ids back from the scaled ``rid`` column."""
    col = [i for i, name in enumerate(prep.preprocessor.get_feature_names_out())
           if name == "num__rid"][0]
    scaler = prep.preprocessor.named_transformers_["num"].named_steps["scale"]
    j = list(prep.preprocessor.feature_names_in_).index("rid")
    return np.rint(x[:, col] * scaler.scale_[j] + scaler.mean_[j]).astype(int).tolist()


def test_epochs_cover_every_row_once_per_rank_set_in_a_seeded_order(source):
    src, X, _ = source
    prep, _ = fit_streamed(src, load_config({"model": "mlp"}))
    stream = SplitStream(src, "train", prep, shuffle_buffer=150, seed=11)
    for world in (1, 3):
        steps = stream.steps(world, 64)
        epochs = {}
        for epoch in (0, 1):
            rows = []
            for rank in range(world):
                batches = list(stream.epoch_batches(epoch, rank, world, 64))
                assert len(batches) == steps  # every rank steps as often (DDP)
                rows += [r for xb, _ in batches for r in _rids(prep, xb.numpy())]
            assert sorted(rows) == list(range(len(X)))
            epochs[epoch] = rows
        assert epochs[0] != epochs[1]  # a new order every epoch
        again = [r for rank in range(world) for xb, _ in stream.epoch_batches(0, rank, world, 64)
                 for r in _rids(prep, xb.numpy())]
        assert again == epochs[0]  # the same seed and epoch: the same order


def test_streamed_preprocessing_fit_equals_the_in_memory_fit(source):
    src, X, y = source
    cfg = load_config({"model": "mlp", "max_categories": 4})
    prep, counts = fit_streamed(src, cfg)
    pre, expected = fit_transform(FeatureSchema.infer(X), X, max_categories=4)
    assert list(prep.preprocessor.get_feature_names_out()) == list(pre.get_feature_names_out())
    assert np.allclose(transform(prep.preprocessor, prep.schema, X), expected, atol=1e-5)
    assert counts.tolist() == np.bincount(y["label"]).tolist()
    assert prep.labels.classes == (0, 1)


def test_a_rank_one_row_short_splits_its_last_batch():
    full = [(torch.zeros(4, 1), torch.zeros(4)) for _ in range(3)]
    out = list(exact_batches(iter(full), 4, what="rank 1"))
    assert [len(b[1]) for b in out] == [4, 4, 2, 2]
    assert [len(b[1]) for b in exact_batches(iter(full), 3, what="r")] == [4, 4, 4]
    with pytest.raises(InvalidArgumentError, match="too few rows"):
        list(exact_batches(iter(full[:1]), 3, what="rank 0"))


def test_streaming_options_are_refused_where_they_would_be_ignored(binary_data, tmp_path):
    with pytest.raises(ValueError, match="applies to model 'mlp'"):
        load_config({"model": "cnn", "torch": {"streaming": True}})
    with pytest.raises(ValueError, match="resamples train rows in memory"):
        load_config({"model": "mlp", "imbalance": "oversample", "torch": {"streaming": True}})
    with pytest.raises(ConfigError, match="in-memory frames"):
        train({"model": "mlp", "torch": {"shuffle_buffer": 64}}, *binary_data, workdir=tmp_path)
    # defaults leave the fingerprint (and so older checkpoints) as it was
    assert "streaming" not in load_config({"model": "mlp"}).fingerprint_dict()["torch"]
