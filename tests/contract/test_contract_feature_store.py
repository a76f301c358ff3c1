"""Contract: the feature-store behaviour the four pipelines rely on, on every backend."""

from __future__ import annotations

import pandas as pd
import pytest

from fstrain.kernel.errors import InvalidArgumentError, NotFoundError

T0 = pd.Timestamp("2024-01-01", tz="UTC")


def _ts(hours: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(hours=hours)


def _orders(n: int = 40) -> pd.DataFrame:
    return pd.DataFrame({
        "order_id": list(range(n)),
        "customer_id": [i % 4 for i in range(n)],
        "ts": [_ts(10 * i) for i in range(n)],
        "amount": [float(i) for i in range(n)],
        "segment": ["a" if i % 2 else "b" for i in range(n)],
        "label": [i % 3 == 0 for i in range(n)],
    })


def _profiles() -> pd.DataFrame:
    # customer 0 changes score at t=0 and t=50h (inclusive match at exactly 50h);
    # customer 3 has its first profile only at t=1000h (earlier orders get nulls)
    return pd.DataFrame({
        "customer_id": [0, 0, 1, 2, 3],
        "ts": [_ts(0), _ts(50), _ts(0), _ts(0), _ts(1000)],
        "score": [1.0, 2.0, 10.0, 20.0, 30.0],
    })


def _orders_fg(backend, n: int = 40):
    fg = backend.fs.get_or_create_feature_group(
        backend.n("orders"), version=1, primary_key=["order_id"], event_time="ts",
        description="contract orders",
    )
    fg.insert(_orders(n))
    return fg


def _profiles_fg(backend):
    fg = backend.fs.get_or_create_feature_group(
        backend.n("profiles"), version=1, primary_key=["customer_id"], event_time="ts",
        description="contract profiles",
    )
    fg.insert(_profiles())
    return fg


def _view(backend, orders, name: str = "orders_view", **kwargs):
    query = orders.select(["order_id", "ts", "amount", "segment", "label"])
    return backend.fs.get_or_create_feature_view(
        backend.n(name), 1, query, labels=["label"], training_helper_columns=["segment"],
        **kwargs,
    )


def _sorted(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    return frame.sort_values(by).reset_index(drop=True)


# -- feature groups ----------------------------------------------------------------------------


def test_insert_upserts_on_primary_key_and_event_time(backend):
    fg = _orders_fg(backend, n=5)
    change = _orders(5).iloc[[1]].assign(amount=100.0)  # same key + event time: replaces
    history = _orders(5).iloc[[2]].assign(ts=_ts(500), amount=7.0)  # new event time: appends
    fg.insert(pd.concat([change, history], ignore_index=True))
    out = fg.read()
    assert len(out) == 6
    assert out.loc[(out.order_id == 1), "amount"].tolist() == [100.0]
    assert sorted(out.loc[out.order_id == 2, "amount"].tolist()) == [2.0, 7.0]


def test_commit_counts_one_per_insert(backend):
    fg = _orders_fg(backend, n=5)
    before = fg.commit_details()
    fg.insert(_orders(5).assign(amount=-1.0))
    after = fg.commit_details()
    assert len(after) == len(before) + 1
    newest = fg.latest_commit_id()
    assert newest == max(after) and newest not in before
    assert {"committedOn", "rowsInserted", "rowsUpdated"} <= set(after[newest])
    assert after[newest]["rowsUpdated"] == 5


def test_as_of_reads_an_old_commit(backend):
    fg = _orders_fg(backend, n=5)
    first = fg.latest_commit_id()
    fg.insert(_orders(5).assign(amount=-1.0))
    old = fg.as_of(commit_id=first).read()
    assert sorted(old["amount"].tolist()) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert set(fg.read()["amount"]) == {-1.0}


def test_read_window_is_half_open(backend):
    fg = _orders_fg(backend, n=10)
    out = fg.read(start_time=_ts(20), end_time=_ts(50))
    assert sorted(out["order_id"].tolist()) == [2, 3, 4]


def test_tags_round_trip(backend):
    fg = _orders_fg(backend, n=3)
    fg.add_tag("pii", True)
    assert fg.get_tags().get("pii") is True
    assert fg.get_tag("pii") is True


def test_missing_feature_group_raises_not_found(backend):
    with pytest.raises(NotFoundError):
        backend.fs.get_feature_group(backend.n("no_such_group"), 1)


# -- queries -----------------------------------------------------------------------------------


def test_point_in_time_join_one_row_per_root_row(backend):
    orders, profiles = _orders_fg(backend, n=12), _profiles_fg(backend)
    query = orders.select(["order_id", "customer_id", "ts"]).join(
        profiles.select(["score"]), on=["customer_id"]
    )
    out = _sorted(query.read(), "order_id")
    assert len(out) == 12 and out["order_id"].is_unique
    by_order = dict(zip(out["order_id"], out["score"], strict=True))
    assert by_order[0] == 1.0  # customer 0 at t=0: the t=0 profile (inclusive)
    assert by_order[4] == 1.0  # customer 0 at t=40h: still the t=0 profile
    assert by_order[8] == 2.0  # customer 0 at t=80h: the t=50h profile
    assert by_order[1] == 10.0 and by_order[2] == 20.0
    assert pd.isna(by_order[3])  # customer 3's only profile is later: null on a left join


def test_join_prefix_is_prepended(backend):
    orders, profiles = _orders_fg(backend, n=4), _profiles_fg(backend)
    query = orders.select(["order_id", "customer_id", "ts"]).join(
        profiles.select(["score"]), on=["customer_id"], prefix="cust_"
    )
    out = query.read()
    assert "cust_score" in out.columns and "score" not in out.columns


# -- feature views and training datasets -------------------------------------------------------


def test_helper_columns_only_when_asked_and_labels_separate(backend):
    fv = _view(backend, _orders_fg(backend))
    version, _ = fv.create_train_validation_test_split(validation_size=0.2, test_size=0.2, seed=7)
    X_tr, X_va, X_te, y_tr, y_va, y_te = fv.get_train_validation_test_split(version)
    for X in (X_tr, X_va, X_te):
        assert "segment" not in X.columns and "label" not in X.columns
    assert isinstance(y_tr, pd.DataFrame) and list(y_tr.columns) == ["label"]
    assert len(X_tr) + len(X_va) + len(X_te) == 40
    with_helpers = fv.get_train_validation_test_split(version, training_helper_columns=True)
    assert all("segment" in X.columns for X in with_helpers[:3])


def test_materialized_version_rereads_identically_after_backfill(backend):
    orders = _orders_fg(backend)
    fv = _view(backend, orders)
    version, _ = fv.create_train_validation_test_split(validation_size=0.2, test_size=0.2, seed=3)
    first = fv.get_train_validation_test_split(version, primary_key=True)
    orders.insert(_orders().assign(amount=-5.0))  # backfill every row
    orders.insert(_orders(50).iloc[40:])  # and add new rows
    again = fv.get_train_validation_test_split(version, primary_key=True)
    for a, b in zip(first, again, strict=True):
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


def test_in_memory_version_rereads_identically_after_backfill(backend):
    orders = _orders_fg(backend)
    fv = _view(backend, orders)
    frames = fv.train_validation_test_split(validation_size=0.2, test_size=0.2)
    version = max(td.version for td in fv.get_training_datasets())
    orders.insert(_orders().assign(amount=-5.0))
    again = fv.get_train_validation_test_split(version)
    for a, b in zip(frames, again, strict=True):
        pd.testing.assert_frame_equal(
            _sorted(a, a.columns[0]), _sorted(b, b.columns[0]), check_dtype=False
        )


def test_each_create_makes_a_new_version_with_metadata(backend):
    orders, profiles = _orders_fg(backend), _profiles_fg(backend)
    query = orders.select(["order_id", "customer_id", "ts", "amount", "label"]).join(
        profiles.select(["score"]), on=["customer_id"]
    )
    fv = backend.fs.get_or_create_feature_view(backend.n("meta_view"), 1, query, labels=["label"])
    v1, _ = fv.create_train_validation_test_split(validation_size=0.2, test_size=0.2, seed=11)
    v2, _ = fv.create_train_validation_test_split(validation_size=0.2, test_size=0.2, seed=12)
    assert v2 == v1 + 1
    td = fv.get_training_dataset(v1)
    assert td.seed == 11
    assert list(td.splits) == ["train", "validation", "test"]
    assert td.feature_group_commits == {
        f"{orders.name}:1": orders.latest_commit_id(),
        f"{profiles.name}:1": profiles.latest_commit_id(),
    }
    again = backend.fs.get_feature_view(backend.n("meta_view"), 1)
    assert again.get_training_dataset(v2).seed == 12


def test_label_fill_values_fill_missing_labels(backend):
    orders = _orders_fg(backend, n=20)
    frauds = backend.fs.get_or_create_feature_group(
        backend.n("frauds"), version=1, primary_key=["order_id"], description="positives only"
    )
    frauds.insert(pd.DataFrame({"order_id": [0, 5], "is_fraud": [1, 1]}))
    query = orders.select(["order_id", "ts", "amount"]).join(frauds.select(["is_fraud"]))
    fv = backend.fs.get_or_create_feature_view(
        backend.n("fill_view"), 1, query, labels=["is_fraud"], label_fill_values={"is_fraud": 0}
    )
    version, _ = fv.create_train_validation_test_split(validation_size=0.2, test_size=0.2, seed=1)
    *_, y_tr, y_va, y_te = fv.get_train_validation_test_split(version)
    y = pd.concat([y_tr, y_va, y_te])
    assert y["is_fraud"].notna().all()
    assert sorted(y["is_fraud"].astype(int).tolist()) == [0] * 18 + [1, 1]


def test_prohibited_tags_refuse_features_but_not_helpers(backend):
    orders = _orders_fg(backend, n=6)
    people = backend.fs.get_or_create_feature_group(
        backend.n("people"), version=1, primary_key=["customer_id"], description="pii"
    )
    people.insert(pd.DataFrame({"customer_id": [0, 1, 2, 3], "gender": list("fmfm")}))
    people.add_tag("pii", True)

    def query():
        return orders.select(["order_id", "customer_id", "ts", "label"]).join(
            people.select(["gender"]), on=["customer_id"]
        )

    with pytest.raises(InvalidArgumentError, match="pii"):
        backend.fs.get_or_create_feature_view(
            backend.n("bad_view"), 1, query(), labels=["label"], prohibited_tags=["pii"]
        )
    fv = backend.fs.get_or_create_feature_view(
        backend.n("ok_view"), 1, query(), labels=["label"], training_helper_columns=["gender"],
        prohibited_tags=["pii"],
    )
    assert fv.prohibited_tags == ["pii"]
