"""Guarantees of feature views and training datasets hold at every read, not only at creation."""

from __future__ import annotations

import os
import shutil

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fstrain.kernel.errors import IntegrityError, InvalidArgumentError


@pytest.fixture
def people(fs):
    fg = fs.create_feature_group("people", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({
        "id": list(range(20)),
        "age": [20.0 + i for i in range(20)],
        "city": [None if i % 3 == 0 else f"c{i % 4}" for i in range(20)],
        "y": [i % 2 for i in range(20)],
    }))
    return fg


@pytest.fixture
def view(fs, people):
    return fs.create_feature_view("people_fv", version=1, query=people.select_all(),
                                  labels=["y"], prohibited_tags=["pii"])


# -- prohibited tags added after the view exists ---------------------------------------------


@pytest.mark.parametrize("read", ["create_training_data", "train_test_split", "training_data",
                                  "get_training_data", "get_batch_data"])
def test_feature_tagged_pii_after_the_view_never_reaches_data(view, people, read):
    version, _ = view.create_training_data(seed=1)
    people.add_feature_tag("city", "pii", True)
    calls = {
        "create_training_data": lambda: view.create_training_data(seed=1),
        "train_test_split": lambda: view.train_test_split(test_size=0.5, seed=1),
        "training_data": lambda: view.training_data(seed=1),
        "get_training_data": lambda: view.get_training_data(version),
        "get_batch_data": lambda: view.get_batch_data(),
    }
    with pytest.raises(InvalidArgumentError, match=r"people_fv.*'city'.*'pii'"):
        calls[read]()


def test_group_tagged_pii_after_the_view_is_refused(view, people):
    people.add_tag("pii", True)
    with pytest.raises(InvalidArgumentError, match=r"feature group 'people'.*'pii'"):
        view.training_data(seed=1)


# -- deleting a group a view reads ------------------------------------------------------------


def test_deleting_a_group_read_by_a_view_is_refused_naming_the_views(fs, view, people):
    other = fs.create_feature_view("people_fv2", version=1, query=people.select(["id", "age"]))
    with pytest.raises(InvalidArgumentError, match=r"'people_fv' v1, 'people_fv2' v1.*force=True"):
        people.delete()
    assert fs.get_feature_group("people", version=1).id is not None
    assert people._table.exists()
    other.delete()
    view.delete()
    people.delete()
    assert fs.catalog.query("SELECT * FROM feature_groups") == []


def test_group_read_by_a_join_or_a_filter_is_protected(fs, people):
    extra = fs.create_feature_group("extra", version=1, primary_key=["id"])
    extra.insert(pd.DataFrame({"id": [1], "z": [1.0]}))
    fs.create_feature_view("joined_fv", version=1,
                           query=people.select(["id", "age"]).join(extra.select(["id", "z"])))
    with pytest.raises(InvalidArgumentError, match="joined_fv"):
        extra.delete()


def test_force_deletes_anyway(fs, view, people):
    people.delete(force=True)
    assert fs.catalog.query("SELECT * FROM feature_groups") == []


# -- tampered or damaged materialized files ---------------------------------------------------


def _split_file(view, version, name, fmt="parquet"):
    return os.path.join(view.get_training_dataset(version).location, f"{name}.{fmt}")


def test_tampered_split_is_detected_at_read_without_asking(view):
    version, _ = view.create_train_test_split(test_size=0.5, seed=3)
    path = _split_file(view, version, "train")
    table = pq.read_table(path)
    flipped = table.set_column(table.column_names.index("y"), "y",
                               pa.array([1 - v for v in table.column("y").to_pylist()]))
    pq.write_table(flipped, path)
    with pytest.raises(IntegrityError, match=r"training dataset version 1 of feature view 'people_fv'.*'train'"):
        view.get_train_test_split(version)


@pytest.mark.parametrize("garbage", [b"", b"not parquet at all", b"PAR1\x00\x00PAR1"])
def test_garbage_split_file_is_an_integrity_error(view, garbage):
    version, _ = view.create_training_data(seed=3)
    with open(_split_file(view, version, "train"), "wb") as fh:
        fh.write(garbage)
    with pytest.raises(IntegrityError, match=r"people_fv.*cannot be read"):
        view.get_training_data(version)


def test_missing_split_file_is_an_integrity_error(view):
    version, _ = view.create_training_data(seed=3)
    os.remove(_split_file(view, version, "train"))
    with pytest.raises(IntegrityError, match="missing"):
        view.get_training_data(version)


# -- formats and locations --------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_untouched_version_round_trips_null_strings(view, fmt):
    version, _ = view.create_training_data(seed=3, data_format=fmt)
    view.verify_training_dataset(version)
    x, _ = view.get_training_data(version)
    assert x["city"].isna().sum() == 7


def test_csv_keeps_empty_strings_apart_from_nulls(fs):
    fg = fs.create_feature_group("texts", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": [1, 2, 3], "s": ["", None, "a"]}))
    fv = fs.create_feature_view("texts_fv", version=1, query=fg.select_all())
    version, _ = fv.create_training_data(seed=1, data_format="csv")
    x, _ = fv.get_training_data(version, primary_key=True)
    values = dict(zip(x["id"], x["s"], strict=True))
    assert values[1] == "" and values[2] is None and values[3] == "a"


def test_a_moved_store_still_reads_its_versions(tmp_path):
    import feature_store

    root = tmp_path / "store"
    fs = feature_store.login(root=root).get_feature_store()
    fg = fs.create_feature_group("m", version=1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": [1, 2], "v": [1.0, 2.0]}))
    fv = fs.create_feature_view("m_fv", version=1, query=fg.select_all())
    version, _ = fv.create_training_data(seed=1)
    moved = tmp_path / "moved"
    shutil.move(str(root), str(moved))
    from feature_store.local.storage.delta_table import forget_snapshots

    forget_snapshots()
    fs2 = feature_store.login(root=moved).get_feature_store()
    fv2 = fs2.get_feature_view("m_fv", version=1)
    x, _ = fv2.get_training_data(version)
    assert sorted(x["v"]) == [1.0, 2.0]
    assert fv2.get_training_dataset(version).location.startswith(str(moved))


def test_stale_staging_folders_are_cleaned_by_the_next_create(view):
    root = view._td.root
    root.mkdir(parents=True, exist_ok=True)
    dead = root / ".staging-999999999-abc"  # no such process
    dead.mkdir()
    (dead / "train.parquet").write_bytes(b"partial")
    old = root / ".staging-0123abcd"
    old.mkdir()
    os.utime(old, (0, 0))
    view.create_training_data(seed=1)
    assert not dead.exists() and not old.exists()
    assert [p.name for p in root.iterdir() if p.name.startswith(".staging")] == []
