"""Training datasets: immutable versions that re-read bit for bit, split invariants, bad input."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from feature_store.core.content_hash import frame_sha256
from fstrain.kernel.errors import IntegrityError, InvalidArgumentError, NotFoundError

T0 = pd.Timestamp("2024-01-01", tz="UTC")
N = 400


def _populate(fs):
    rng = np.random.default_rng(1)
    tx = fs.get_or_create_feature_group("tx", version=1, primary_key=["tid"], event_time="ts")
    tx.insert(pd.DataFrame({
        "tid": np.arange(N), "card": rng.integers(0, 40, N),
        "ts": T0 + pd.to_timedelta(np.arange(N), unit="h"),
        "amount": rng.gamma(2, 10, N), "label": (rng.random(N) < 0.25).astype(int),
    }))
    agg = fs.get_or_create_feature_group("card_agg", version=1, primary_key=["card"], event_time="ts")
    agg.insert(pd.DataFrame({"card": np.arange(40), "ts": T0, "spend": rng.normal(size=40)}))
    return tx, agg


@pytest.fixture
def fv(fs):
    tx, agg = _populate(fs)
    return fs.create_feature_view("fraud", query=tx.select_all().join(agg.select(["spend"]), on=["card"]),
                                  labels=["label"])


def _hash_all(frames) -> list[str]:
    return [frame_sha256(f.reset_index(drop=True)) for f in frames]


def _backfill(fs, bump=0.0):
    tx = fs.get_feature_group("tx", 1)
    agg = fs.get_feature_group("card_agg", 1)
    # upsert existing rows, add rows inside the old window, and new feature history
    tx.insert(pd.DataFrame({"tid": [0, 1, 10_000], "card": [1, 1, 1],
                            "ts": [T0, T0 + pd.Timedelta(hours=1), T0 + pd.Timedelta(minutes=30)],
                            "amount": [999.0 + bump, 999.0, 5.0], "label": [1, 1, 0]}))
    agg.insert(pd.DataFrame({"card": np.arange(40), "ts": T0 + pd.Timedelta(hours=2), "spend": 42.0 + bump}))
    agg.insert(pd.DataFrame({"card": np.arange(40), "ts": T0, "spend": -1.0 - bump}))  # rewrite history


@pytest.mark.parametrize("data_format", ["parquet", "csv", "jsonl"])
def test_materialized_version_is_bit_identical_after_backfills(fs, fv, data_format):
    version, job = fv.create_train_validation_test_split(validation_size=0.2, test_size=0.2, seed=5,
                                                         data_format=data_format)
    assert job is None
    before = _hash_all(fv.get_train_validation_test_split(version, primary_key=True, event_time=True))
    _backfill(fs)
    after = _hash_all(fv.get_train_validation_test_split(version, primary_key=True, event_time=True))
    assert before == after
    fresh, _ = fv.create_train_validation_test_split(validation_size=0.2, test_size=0.2, seed=5)
    assert _hash_all(fv.get_train_validation_test_split(fresh)) != _hash_all(fv.get_train_validation_test_split(version))
    fv.verify_training_dataset(version)


def test_in_memory_version_re_reads_identically_after_backfills(fs, fv):
    X_tr, X_te, y_tr, y_te = fv.train_test_split(test_size=0.25, seed=9)
    version = fv.get_training_datasets()[-1].version
    assert fv.get_training_dataset(version).type == "IN_MEMORY"
    _backfill(fs)
    again = fv.get_train_test_split(version)
    assert _hash_all(again) == _hash_all((X_tr, X_te, y_tr, y_te))


def test_purge_and_recreate(fs, fv):
    version, _ = fv.create_train_test_split(test_size=0.3, seed=2)
    before = _hash_all(fv.get_train_test_split(version))
    location = fv.get_training_dataset(version).location
    fv.purge_training_data(version)
    assert not Path(location).exists()
    assert fv.get_training_dataset(version).state == "purged"
    with pytest.raises(NotFoundError, match="was purged.*recreate_training_dataset"):
        fv.get_train_test_split(version)
    _backfill(fs)
    fv.recreate_training_dataset(version)
    assert _hash_all(fv.get_train_test_split(version)) == before


def test_recreate_streams_under_its_write_options_and_refuses_what_would_change_it(
        fv, monkeypatch):
    from feature_store.local.query import partitioned_join as pj

    version, _ = fv.create_train_test_split(test_size=0.3, seed=2)
    before = _hash_all(fv.get_train_test_split(version))
    location = Path(fv.get_training_dataset(version).location)
    fv.purge_training_data(version)
    for options, kwargs, match in (
            ({"batch_rows": 0}, {}, "batch_rows"),
            ({"compression": "zstd"}, {}, "compression"),
            (None, {"statistics_config": False}, "statistics_config"),
            (None, {"spine": pd.DataFrame({"tid": [1]})}, "spine"),
            (None, {"coalesce": True}, "coalesce")):
        with pytest.raises(InvalidArgumentError, match=match):
            fv.recreate_training_dataset(version, write_options=options, **kwargs)
        assert not location.exists()  # refused before anything was written
    partitions: list[int] = []
    init = pj.PartitionedQuery.__init__

    def counted(self, con, compiled, count, *args, **kwargs):  # type: ignore[no-untyped-def]
        partitions.append(count)
        init(self, con, compiled, count, *args, **kwargs)

    monkeypatch.setattr(pj.PartitionedQuery, "__init__", counted)
    fv.recreate_training_dataset(version, write_options={"partitions": 3, "batch_rows": 64})
    assert partitions == [3]  # the option reached the streamed create
    assert _hash_all(fv.get_train_test_split(version)) == before


def test_metadata_records_what_reproduces_a_version(fs, fv):
    version, _ = fv.create_train_test_split(test_size=0.25)  # seed drawn and recorded
    td = fv.get_training_dataset(version)
    assert isinstance(td.seed, int)
    assert td.feature_group_commits == {"tx:1": 1, "card_agg:1": 1}
    assert "ASOF LEFT JOIN" in td.query_sql
    assert td.split_spec["strategy"] == "random"
    assert {s: m["rows"] for s, m in td.splits.items()} == {"train": 300, "test": 100}
    assert sum(td.splits["train"]["label_distribution"]["label"].values()) == 300
    assert len(td.splits["test"]["sha256"]) == 64
    assert td.splits["train"]["statistics"]["row_count"] == 300
    lineage = td.to_dict()
    assert lineage["feature_view_name"] == "fraud" and lineage["version"] == version


def test_seed_none_draws_different_seeds_and_leaves_global_rng_alone(fv):
    import random

    random.seed(11)
    np.random.seed(11)
    a = random.random(), np.random.random()
    random.seed(11)
    np.random.seed(11)
    v1, _ = fv.create_train_test_split(test_size=0.5)
    v2, _ = fv.create_train_test_split(test_size=0.5)
    assert (random.random(), np.random.random()) == a
    assert fv.get_training_dataset(v1).seed != fv.get_training_dataset(v2).seed


def test_stratified_split_keeps_class_ratio(fv):
    version, _ = fv.create_train_validation_test_split(validation_size=0.2, test_size=0.2, split="stratified", seed=1)
    td = fv.get_training_dataset(version)
    ratios = [m["label_distribution"]["label"].get("1", 0) / m["rows"] for m in td.splits.values()]
    assert max(ratios) - min(ratios) < 0.01


def test_group_split_keeps_groups_apart(fv):
    version, _ = fv.create_train_test_split(test_size=0.3, split="group", group_column="card", seed=4)
    X_tr, X_te, _, _ = fv.get_train_test_split(version)
    assert set(X_tr["card"]).isdisjoint(set(X_te["card"]))


def test_time_split_with_gap(fv):
    version, _ = fv.create_train_test_split(
        train_start=T0, train_end=T0 + pd.Timedelta(hours=200), test_start=T0 + pd.Timedelta(hours=210),
        test_end=T0 + pd.Timedelta(hours=300), gap="10h",
    )
    X_tr, X_te, _, _ = fv.get_train_test_split(version, event_time=True)
    assert X_tr["ts"].min() == T0 and X_tr["ts"].max() == T0 + pd.Timedelta(hours=199)
    assert X_te["ts"].min() == T0 + pd.Timedelta(hours=210) and X_te["ts"].max() == T0 + pd.Timedelta(hours=299)


def test_kfold_indices_are_deterministic(fv):
    version, _ = fv.create_train_test_split(test_size=0.2, seed=3)
    folds = fv.kfold(version, k=4, stratified=True)
    again = fv.kfold(version, k=4, stratified=True)
    assert all((a[1] == b[1]).all() for a, b in zip(folds, again, strict=True))
    covered = np.sort(np.concatenate([f[1] for f in folds]))
    assert (covered == np.arange(320)).all()


def test_bad_inputs_create_nothing(fv):
    cases = [
        (dict(test_size=1.5), "test_size"),
        (dict(test_size=0.0), "test_size"),
        (dict(train_end=T0 + pd.Timedelta(hours=10), test_start=T0 + pd.Timedelta(hours=5),
              test_end=T0 + pd.Timedelta(hours=20)), "overlap"),
        (dict(test_size=0.3, split="group"), "group_column"),
        (dict(test_size=0.3, split="group", group_column="cardd"), "Did you mean 'card'"),
        (dict(test_size=0.3, split="bogus"), "strategy"),
        (dict(train_start=T0 + pd.Timedelta(days=900), train_end=T0 + pd.Timedelta(days=901),
              test_start=T0 + pd.Timedelta(days=902), test_end=T0 + pd.Timedelta(days=903)), "empty"),
    ]
    for kwargs, message in cases:
        with pytest.raises(InvalidArgumentError, match=message):
            fv.create_train_test_split(seed=1, **kwargs)
    with pytest.raises(InvalidArgumentError, match="must be below 1"):
        fv.create_train_validation_test_split(validation_size=0.6, test_size=0.5, seed=1)
    assert fv.get_training_datasets() == []


def test_stratify_rejects_tiny_class(fs):
    g = fs.get_or_create_feature_group("tiny", version=1, primary_key=["id"])
    g.insert(pd.DataFrame({"id": range(20), "x": range(20), "y": [0] * 19 + [1]}))
    view = fs.create_feature_view("tiny_view", query=g.select_all(), labels=["y"])
    with pytest.raises(InvalidArgumentError, match="class"):
        view.create_train_validation_test_split(validation_size=0.2, test_size=0.2, split="stratified", seed=1)


def test_version_errors(fv):
    version, _ = fv.create_train_validation_test_split(validation_size=0.2, test_size=0.2, seed=1)
    with pytest.raises(NotFoundError, match=r"no training dataset version 9 \(versions: 1\)"):
        fv.get_train_test_split(9)
    with pytest.raises(InvalidArgumentError, match=r"has splits \['train', 'validation', 'test'\].*get_train_validation_test_split"):
        fv.get_train_test_split(version)
    fv.delete_training_dataset(version)
    with pytest.raises(NotFoundError):
        fv.get_training_dataset(version)


READER = textwrap.dedent(
    """
    import sys, feature_store
    from feature_store.core.content_hash import frame_sha256
    fv = feature_store.login(root=sys.argv[1]).get_feature_store().get_feature_view("fraud", 1)
    if sys.argv[2] == "create":
        fv.create_train_test_split(test_size=0.3, seed=77)
    frames = fv.get_train_test_split(int(sys.argv[3]))
    print(",".join(frame_sha256(f) for f in frames))
    """
)


def test_deterministic_across_processes_and_hash_seeds(tmp_path, fs, fv):
    script = tmp_path / "reader.py"
    script.write_text(READER)
    root = str(fs.root.parent)
    outputs = []
    for hash_seed, action, version in (("1", "create", "1"), ("999", "create", "2"), ("42", "read", "1")):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, str(script), root, action, version], env=env,
                             capture_output=True, text=True, check=True)
        outputs.append(out.stdout.strip())
    assert outputs[0] == outputs[1] == outputs[2]


KILLED_CREATE = textwrap.dedent(
    """
    import sys, feature_store
    import feature_store.local.training_data.store as td
    def slow(self, metadata, staging):  # the split files are staged, the version not recorded
        assert any(staging.iterdir())
        print("wrote", flush=True)
        import time; time.sleep(30)
    td.TrainingDataStore._commit = slow
    fv = feature_store.login(root=sys.argv[1]).get_feature_store().get_feature_view("fraud", 1)
    fv.create_train_test_split(test_size=0.3, seed=1)
    """
)


def test_killed_create_leaves_no_version(tmp_path, fs, fv):
    script = tmp_path / "killed.py"
    script.write_text(KILLED_CREATE)
    proc = subprocess.Popen([sys.executable, str(script), str(fs.root.parent)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "wrote"  # mid-materialization
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert fv.get_training_datasets() == []
    version, _ = fv.create_train_test_split(test_size=0.3, seed=1)
    assert version == 1
    time.sleep(0)  # the orphan staging folder does not block later versions


def test_vacuum_keeps_pinned_commits(fs, fv):
    version, _ = fv.create_train_test_split(test_size=0.3, seed=4)
    in_memory = fv.train_test_split(test_size=0.3, seed=4)
    mem_version = fv.get_training_datasets()[-1].version
    before = _hash_all(fv.get_train_test_split(version))
    for i in range(3):
        _backfill(fs, bump=float(i))  # rewrites files of both groups (unchanged data would not)
    tx = fs.get_feature_group("tx", 1)
    removable = tx.vacuum(dry_run=True)
    assert removable, "upserts after the pinned commit left unreferenced files"
    removed = tx.vacuum()
    fs.get_feature_group("card_agg", 1).vacuum()
    assert sorted(removed) == sorted(removable)
    assert _hash_all(fv.get_train_test_split(version)) == before
    assert _hash_all(fv.get_train_test_split(mem_version)) == _hash_all(in_memory)
    on_disk = {p.name for p in Path(tx.location).glob("*.parquet")}
    needed = {Path(f).name for v in (1, tx.latest_commit_id()) for f in tx._table.files(v)}
    assert on_disk == needed  # only the pinned and the latest commits' files remain


def test_verify_catches_a_changed_split_file(fv):
    import pyarrow.parquet as pq

    version, _ = fv.create_train_test_split(test_size=0.25, seed=4)
    fv.verify_training_dataset(version)
    path = Path(fv.get_training_dataset(version).location) / "test.parquet"
    table = pq.read_table(path)
    amounts = table.column("amount").to_pylist()
    amounts[3] += 1.0
    pq.write_table(table.set_column(table.column_names.index("amount"), "amount",
                                    pa.array(amounts)), path)
    with pytest.raises(IntegrityError, match=r"split 'test' no longer matches its recorded sha256"):
        fv.verify_training_dataset(version)


def test_verify_refuses_hashes_recorded_with_another_algorithm(fs, fv):
    import json

    version, _ = fv.create_train_test_split(test_size=0.25, seed=4)
    with fs.catalog.transaction() as conn:
        row = conn.execute("SELECT metadata FROM training_datasets WHERE version=?",
                           (version,)).fetchone()
        metadata = json.loads(row["metadata"])
        metadata.pop("content_hash")
        conn.execute("UPDATE training_datasets SET metadata=? WHERE version=?",
                     (json.dumps(metadata), version))
    with pytest.raises(IntegrityError, match="v1 algorithm.*Create a new version"):
        fv.verify_training_dataset(version)


def test_materialized_reads_check_the_recorded_file_bytes_also_after_recreate(fv):
    import hashlib

    version, _ = fv.create_train_test_split(test_size=0.25, seed=4)
    td = fv.get_training_dataset(version)
    for name, meta in td.splits.items():
        data = (Path(td.location) / f"{name}.parquet").read_bytes()
        assert meta["file_sha256"] == hashlib.sha256(data).hexdigest()
    before = fv.get_train_test_split(version)
    fv.purge_training_data(version)
    fv.recreate_training_dataset(version)
    after = fv.get_train_test_split(version)  # the re-written files carry their own hashes
    assert all(a.equals(b) for a, b in zip(before, after, strict=True))
    path = Path(fv.get_training_dataset(version).location) / "train.parquet"
    path.write_bytes(path.read_bytes() + b"\x00")  # one byte more: never returned silently
    with pytest.raises(IntegrityError):
        fv.get_train_test_split(version)


def _drop_file_hashes(fs, version):
    """Leave the version's record as fstrain wrote it before bf296a3: no split file sha256."""
    import json

    with fs.catalog.transaction() as conn:
        row = conn.execute("SELECT metadata FROM training_datasets WHERE version=?",
                           (version,)).fetchone()
        metadata = json.loads(row["metadata"])
        for meta in metadata["splits"].values():
            meta.pop("file_sha256")
        conn.execute("UPDATE training_datasets SET metadata=? WHERE version=?",
                     (json.dumps(metadata), version))


def _tamper(path: Path) -> None:
    """Change one value of a split file so that it still parses."""
    import pyarrow.parquet as pq

    if path.suffix == ".parquet":
        table = pq.read_table(path)
        amounts = table.column("amount").to_pylist()
        amounts[0] += 1.0
        pq.write_table(table.set_column(table.column_names.index("amount"), "amount",
                                        pa.array(amounts)), path)
        return
    lines = path.read_text().split("\n")
    digit = next(i for i, c in enumerate(lines[1]) if c.isdigit())
    lines[1] = lines[1][:digit] + str((int(lines[1][digit]) + 1) % 10) + lines[1][digit + 1:]
    path.write_text("\n".join(lines))


def _streamed(fv, version):
    return [s.read_all().to_pandas()
            for s in fv.get_train_test_split(version, dataframe_type="arrow_batches")]


@pytest.mark.parametrize("data_format", ["parquet", "csv"])
def test_a_version_from_before_file_hashes_is_read_and_checked_by_its_values(fs, fv, data_format):
    import pyarrow.parquet as pq

    version, _ = fv.create_train_test_split(test_size=0.25, seed=4, data_format=data_format)
    whole, streamed = fv.get_train_test_split(version), _streamed(fv, version)
    _drop_file_hashes(fs, version)
    td = fv.get_training_dataset(version)
    assert all("file_sha256" not in meta for meta in td.splits.values())
    path = Path(td.location) / f"test.{data_format}"
    if data_format == "parquet":  # other bytes, the same values: checked by value, so still read
        pq.write_table(pq.read_table(path), path, compression="none")
    for a, b in zip(whole, fv.get_train_test_split(version), strict=True):
        pd.testing.assert_frame_equal(a, b)
    for a, b in zip(streamed, _streamed(fv, version), strict=True):
        pd.testing.assert_frame_equal(a, b)
    fv.verify_training_dataset(version)
    _tamper(path)
    for read in (fv.get_train_test_split, lambda v: _streamed(fv, v),
                 fv.verify_training_dataset):
        with pytest.raises(IntegrityError, match="split 'test'"):
            read(version)


def test_training_data_is_made_from_values_not_from_the_view(fs, fv):
    """The training-data store is built from the view as values (identity, frozen query,
    column roles), the catalog and the root: no view, and versions of both kinds re-read
    equal through it after a backfill."""
    from feature_store.local.training_data.store import TrainingDataStore
    from feature_store.local.training_data.view_data import ViewData

    materialized, _ = fv.create_train_test_split(test_size=0.3, seed=5)
    fv.train_test_split(test_size=0.3, seed=5)
    in_memory = fv.get_last_accessed_training_dataset()
    before = {v: fv._td.read_splits(v)[1] for v in (materialized, in_memory)}
    _backfill(fs)
    data = ViewData(fv.name, fv.version, fv.id, fv.query.frozen(), tuple(fv.labels))
    store = TrainingDataStore(data, fs.catalog, fs.root)
    assert not any(type(value).__name__ == "FeatureView" for value in vars(store).values())
    for version, splits in before.items():
        td, again = store.read_splits(version)
        assert td.feature_group_commits == {"tx:1": 1, "card_agg:1": 1}
        assert list(again) == list(splits)
        assert all(again[n].equals(splits[n]) for n in splits)
