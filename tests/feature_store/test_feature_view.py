"""Feature views: validation at creation, roles of columns, transformations, batch data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
)

T0 = pd.Timestamp("2024-01-01", tz="UTC")


@pytest.fixture
def groups(fs):
    rng = np.random.default_rng(0)
    n = 300
    people = fs.get_or_create_feature_group("people", version=1, primary_key=["pid"], tags={"pii": True})
    people.insert(pd.DataFrame({"pid": np.arange(50), "sex": rng.choice(["f", "m"], 50),
                                "zip": rng.choice(["111", "222"], 50)}))
    tx = fs.get_or_create_feature_group("tx", version=1, primary_key=["tid"], event_time="ts",
                                        tags={"pii": False})
    tx.insert(pd.DataFrame({
        "tid": np.arange(n), "pid": rng.integers(0, 50, n),
        "ts": T0 + pd.to_timedelta(np.arange(n), unit="h"),
        "amount": rng.gamma(2, 10, n), "channel": rng.choice(["web", "pos"], n),
        "fraud": (rng.random(n) < 0.3).astype(int), "note": "n",
    }))
    tx.add_feature_tag("note", "pii", True)
    return tx, people


def _view(fs, tx, people, **kwargs):
    query = tx.select_all().join(people.select(["sex"]), on=["pid"])
    args = dict(labels=["fraud"], training_helper_columns=["sex"])
    args.update(kwargs)
    return fs.create_feature_view("fraud_view", query=query, **args)


def test_training_data_splits_roles(fs, groups):
    tx, people = groups
    fv = _view(fs, tx, people, inference_helper_columns=["note"])
    X, y = fv.training_data(seed=1)
    assert list(X.columns) == ["pid", "amount", "channel"]  # no keys, labels or helpers
    assert list(y.columns) == ["fraud"] and len(X) == len(y) == 300
    X2, _ = fv.training_data(seed=1, training_helper_columns=True, primary_key=True, event_time=True)
    assert list(X2.columns) == ["tid", "ts", "pid", "amount", "channel", "sex"]
    assert fv.feature_names == ["pid", "amount", "channel"]
    assert [td.version for td in fv.get_training_datasets()] == [1, 2]  # each call is a version


def test_view_without_labels_returns_none_for_y(fs, groups):
    tx, _ = groups
    fv = fs.create_feature_view("nolabels", query=tx.select(["tid", "ts", "amount"]))
    X, y = fv.training_data()
    assert y is None and list(X.columns) == ["amount"]


def test_view_is_persisted_and_versioned(fs, groups):
    tx, people = groups
    _view(fs, tx, people)
    again = fs.get_feature_view("fraud_view", 1)
    assert again.labels == ["fraud"] and again.training_helper_columns == ["sex"]
    assert fs.create_feature_view("fraud_view", query=tx.select_all(), labels=["fraud"]).version == 2
    with pytest.raises(AlreadyExistsError):
        fs.create_feature_view("fraud_view", query=tx.select_all(), version=1)
    same = fs.get_or_create_feature_view("fraud_view", 1, tx.select_all(), labels=["amount"])
    assert same.labels == ["fraud"]
    with pytest.raises(NotFoundError, match=r"no version 9 \(versions: 1, 2\)"):
        fs.get_feature_view("fraud_view", 9)


def test_validation_errors_name_the_column(fs, groups):
    tx, people = groups
    with pytest.raises(InvalidArgumentError, match="label 'fruad' is not a column.*Did you mean 'fraud'"):
        _view(fs, tx, people, labels=["fruad"])
    with pytest.raises(InvalidArgumentError, match="'sex' cannot be both a label and a training helper"):
        _view(fs, tx, people, labels=["sex"])
    with pytest.raises(InvalidArgumentError, match="training_helper_columns 'age' is not a column"):
        _view(fs, tx, people, training_helper_columns=["age"])
    with pytest.raises(InvalidArgumentError, match="label_fill_values names 'amount'"):
        _view(fs, tx, people, label_fill_values={"amount": 0})


def test_prohibited_tags(fs, groups):
    tx, people = groups
    # sex comes from a pii-tagged group but is a helper: allowed
    _view(fs, tx, people, prohibited_tags=["pii"], training_helper_columns=["sex", "note"])
    # a feature from a pii-tagged group
    with pytest.raises(InvalidArgumentError, match="feature 'zip' comes from feature group 'people' tagged 'pii'"):
        fs.create_feature_view("bad1", query=tx.select(["tid", "ts", "fraud"]).join(people.select(["zip"]), on=["pid"]),
                               labels=["fraud"], prohibited_tags=["pii"])
    # a feature tagged pii itself
    with pytest.raises(InvalidArgumentError, match="feature 'note' comes from feature 'tx.note' tagged 'pii'"):
        fs.create_feature_view("bad2", query=tx.select_all(), labels=["fraud"], prohibited_tags=["pii"])


def test_transformations_fit_on_train_only(fs, groups):
    from feature_store.core.transformations import label_encoder, standard_scaler

    tx, people = groups
    fv = _view(fs, tx, people, transformation_functions=[standard_scaler("amount"), label_encoder("channel")])
    X_tr, X_te, y_tr, y_te = fv.train_test_split(test_size=0.3, seed=3)
    assert "standard_scaler_amount_" in X_tr.columns and "amount" not in X_tr.columns
    assert abs(X_tr["standard_scaler_amount_"].mean()) < 1e-9  # train stats → mean 0 on train
    assert abs(X_te["standard_scaler_amount_"].mean()) > 1e-6  # but not on test
    stats = fv.get_training_dataset(1).transformation_statistics
    raw = fs.get_feature_group("tx", 1).read()
    train_ids = set(fv.get_train_test_split(1, primary_key=True)[0]["tid"])
    assert stats["standard_scaler_amount"]["mean"] == pytest.approx(raw[raw.tid.isin(train_ids)]["amount"].mean())
    assert set(X_tr["label_encoder_channel_"]) == {0, 1}


def test_batch_data_uses_training_statistics(fs, groups):
    from feature_store.core.transformations import standard_scaler

    tx, people = groups
    fv = _view(fs, tx, people, transformation_functions=[standard_scaler("amount")],
               inference_helper_columns=["note"])
    with pytest.raises(NotFoundError, match="no training dataset"):
        fv.get_batch_data()
    fv.train_test_split(test_size=0.2, seed=0)
    batch = fv.get_batch_data(start_time=T0, end_time=T0 + pd.Timedelta(hours=10), primary_key=True,
                              inference_helper_columns=True)
    assert list(batch.columns) == ["tid", "pid", "channel", "note", "standard_scaler_amount_"]
    assert sorted(batch["tid"]) == list(range(10))
    assert "fraud" not in batch.columns and "sex" not in batch.columns


def test_feature_view_delete(fs, groups):
    tx, people = groups
    fv = _view(fs, tx, people)
    fv.create_training_data(seed=1)
    fv.delete()
    with pytest.raises(NotFoundError):
        fs.get_feature_view("fraud_view", 1)
