"""The ``"distributed"`` record a data-parallel run registers: one schema for torch DDP and
Ray boosting, each rank's rows per epoch, the exactly-once check, no timings."""

import pytest

from fstrain.trainers.config import load_config
from fstrain.trainers.distributed import ddp_record
from fstrain.trainers.distributed_record import distributed_record, pieces_each_row_once
from fstrain.trainers.stream.source import StreamSource
from fstrain.trainers.torch_models import stream_torch_data


def test_a_streamed_split_records_each_ranks_dealt_rows_once(binary_data, tmp_path):
    X_tr, y_tr, X_va, y_va = binary_data
    source = StreamSource.from_frames(tmp_path, {"train": (X_tr, y_tr),
                                                 "validation": (X_va, y_va)})
    train = stream_torch_data(load_config({"model": "mlp"}), source).train_set
    record = ddp_record(train, 4, use_gpu=False, resumed_from=None)
    n = len(X_tr)
    assert record["world_size"] == 4 and record["backend"] == "gloo" and record["rows"] == n
    assert [s["rank"] for s in record["shards"]] == [0, 1, 2, 3]
    assert [s["rows"] for s in record["shards"]] == [
        (r + 1) * n // 4 - r * n // 4 for r in range(4)]
    assert record["each_row_once"] is True and record["resumed_mid_epoch"] is False
    # deterministic: the same run records the same thing (no timings), another world size not
    assert ddp_record(train, 4, use_gpu=False, resumed_from=None) == record
    other = ddp_record(train, 3, use_gpu=True, resumed_from={"epoch": 1, "batch_in_epoch": 5})
    assert other["backend"] == "nccl" and other["resumed_mid_epoch"] is True
    assert other["pieces_sha256"] != record["pieces_sha256"]
    assert ddp_record(train, 4, use_gpu=False, resumed_from={"epoch": 2, "batch_in_epoch": 0}
                      )["resumed_mid_epoch"] is False


def test_an_in_memory_split_records_the_padded_sampler_share():
    record = ddp_record(list(range(10)), 4, use_gpu=False, resumed_from=None)
    assert [s["rows"] for s in record["shards"]] == [3, 3, 3, 3] and record["rows"] == 10
    assert record["each_row_once"] is False  # DistributedSampler repeats 2 rows to pad
    assert ddp_record(list(range(8)), 4, use_gpu=False, resumed_from=None)["each_row_once"]


def test_pieces_check_finds_gaps_and_overlaps():
    assert pieces_each_row_once([[(0, 0, 5)], [(0, 5, 5), (1, 0, 3)]], [10, 3])
    assert not pieces_each_row_once([[(0, 0, 5)], [(0, 6, 4)]], [10])  # row 5 missing
    assert not pieces_each_row_once([[(0, 0, 6)], [(0, 5, 5)]], [10])  # row 5 twice
    assert not pieces_each_row_once([[(0, 0, 10)], [(1, 0, 1)]], [10])  # no group 1


def test_the_record_refuses_timings_and_misnumbered_ranks():
    shards = [{"rank": 0, "rows": 2}, {"rank": 1, "rows": 2}]
    with pytest.raises(ValueError, match="fit_seconds"):
        distributed_record(world_size=2, backend="gloo", rows=4, each_row_once=True,
                           shards=[{**shards[0], "fit_seconds": 1.0}, shards[1]])
    with pytest.raises(ValueError, match="read_seconds"):
        distributed_record(world_size=2, backend="gloo", rows=4, each_row_once=True,
                           shards=shards, read_seconds=0.5)
    with pytest.raises(ValueError, match="one shard per rank"):
        distributed_record(world_size=3, backend="gloo", rows=4, each_row_once=True,
                           shards=shards)
