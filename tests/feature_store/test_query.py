"""Queries and point-in-time joins: golden cases, join-key rules, and a merge_asof oracle."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fstrain.kernel.errors import InvalidArgumentError

T0 = pd.Timestamp("2024-01-01", tz="UTC")


def _t(hours):
    return [T0 + pd.Timedelta(hours=h) for h in hours]


@pytest.fixture
def groups(fs):
    labels = fs.get_or_create_feature_group("labels", version=1, primary_key=["id"], event_time="ts")
    labels.insert(pd.DataFrame({
        "id": [1, 2, 3, 4, 5],
        "card": ["a", "a", "b", "c", "a"],
        "ts": _t([10, 20, 10, 10, 5]),
        "y": [0, 1, 0, 1, 0],
    }))
    card = fs.get_or_create_feature_group("card_feats", version=1, primary_key=["card"], event_time="ts")
    card.insert(pd.DataFrame({
        "card": ["a", "a", "a", "b"],
        "ts": _t([0, 10, 15, 11]),
        "spend": [1.0, 2.0, 3.0, 4.0],
    }))
    return labels, card


def _by_id(df):
    return df.sort_values("id").set_index("id")


def test_pit_golden_cases(groups):
    labels, card = groups
    out = _by_id(labels.select_all().join(card.select(["spend"]), on=["card"]).read())
    assert len(out) == 5  # exactly one row per root row
    assert out.loc[1, "spend"] == 2.0  # exact timestamp match is inclusive (a@10)
    assert out.loc[2, "spend"] == 3.0  # several history rows: latest before (a@15)
    assert np.isnan(out.loc[3, "spend"])  # only a later row exists (b@11 > 10)
    assert np.isnan(out.loc[4, "spend"])  # key absent
    assert out.loc[5, "spend"] == 1.0  # a@0 <= 5
    assert "ts" in out.columns and list(out.columns).count("ts") == 1  # right event_time dropped


def test_inner_pit_join_drops_unmatched(groups):
    labels, card = groups
    out = labels.select_all().join(card.select(["spend"]), on=["card"], join_type="inner").read()
    assert sorted(out["id"]) == [1, 2, 5]


def test_lookback_edge_is_inclusive(groups):
    labels, card = groups
    out = _by_id(labels.select_all().join(card.select(["spend"]), on=["card"], lookback="5h").read())
    assert out.loc[1, "spend"] == 2.0  # same time
    assert out.loc[2, "spend"] == 3.0  # 20 - 15 = 5h: exactly at the edge still matches
    assert out.loc[5, "spend"] == 1.0  # a@0 seen at t=5: exactly 5h old, inclusive
    tighter = _by_id(labels.select_all().join(card.select(["spend"]), on=["card"], lookback="4h").read())
    assert np.isnan(tighter.loc[5, "spend"]) and tighter.loc[1, "spend"] == 2.0


def test_lookback_excludes_older_rows(fs):
    left = fs.get_or_create_feature_group("lb_left", version=1, primary_key=["id"], event_time="ts")
    left.insert(pd.DataFrame({"id": [1, 2], "k": [1, 1], "ts": _t([10, 16])}))
    right = fs.get_or_create_feature_group("lb_right", version=1, primary_key=["k"], event_time="ts")
    right.insert(pd.DataFrame({"k": [1], "ts": _t([5]), "v": [7.0]}))
    out = _by_id(left.select_all().join(right.select(["v"]), on=["k"], lookback=pd.Timedelta(hours=5)).read())
    assert out.loc[1, "v"] == 7.0  # 10 - 5 = 5h: at the edge, inclusive
    assert np.isnan(out.loc[2, "v"])  # 11h old
    inner = left.select_all().join(right.select(["v"]), on=["k"], lookback="5h", join_type="inner").read()
    assert inner["id"].tolist() == [1]


def test_group_without_event_time_joins_plainly(fs, groups):
    labels, _ = groups
    cards = fs.get_or_create_feature_group("card_static", version=1, primary_key=["card"])
    cards.insert(pd.DataFrame({"card": ["a", "b"], "tier": ["gold", "basic"]}))
    out = _by_id(labels.select_all().join(cards.select(["tier"]), on=["card"]).read())
    assert out.loc[1, "tier"] == "gold" and out.loc[3, "tier"] == "basic"
    assert pd.isna(out.loc[4, "tier"])


def test_root_without_event_time_takes_latest_right_row(fs, groups):
    _, card = groups
    people = fs.get_or_create_feature_group("cards_root", version=1, primary_key=["card"])
    people.insert(pd.DataFrame({"card": ["a", "b", "z"]}))
    out = people.select_all().join(card.select(["spend"]), on=["card"]).read().set_index("card")
    assert out.loc["a", "spend"] == 3.0 and out.loc["b", "spend"] == 4.0 and np.isnan(out.loc["z", "spend"])


def test_ties_are_broken_deterministically(fs):
    left = fs.get_or_create_feature_group("tie_left", version=1, primary_key=["id"], event_time="ts")
    left.insert(pd.DataFrame({"id": [1], "store": ["s"], "ts": _t([10])}))
    right = fs.get_or_create_feature_group("tie_right", version=1, primary_key=["store", "till"], event_time="ts")
    right.insert(pd.DataFrame({"store": ["s", "s"], "till": [2, 1], "ts": _t([5, 5]), "v": [20.0, 10.0]}))
    q = left.select_all().join(right.select(["v"]), on=["store"])
    results = {q.read()["v"].iloc[0] for _ in range(5)}
    assert results == {10.0}  # smallest remaining primary key (till=1) wins, every time


def test_chained_joins_use_the_root_and_nested_use_their_own(fs):
    tx = fs.get_or_create_feature_group("tx", version=1, primary_key=["t_id"])
    tx.insert(pd.DataFrame({"t_id": [1, 2], "cc_num": [10, 20], "merchant": ["m1", "m2"]}))
    cards = fs.get_or_create_feature_group("cards", version=1, primary_key=["cc_num"])
    cards.insert(pd.DataFrame({"cc_num": [10, 20], "bank_id": [7, 8]}))
    merchants = fs.get_or_create_feature_group("merchants", version=1, primary_key=["merchant"])
    merchants.insert(pd.DataFrame({"merchant": ["m1", "m2"], "category": ["food", "travel"]}))
    banks = fs.get_or_create_feature_group("banks", version=1, primary_key=["bank_id"])
    banks.insert(pd.DataFrame({"bank_id": [7, 8], "rating": ["A", "B"]}))
    q = (tx.select_all()
         .join(cards.select_all().join(banks.select(["rating"]), on=["bank_id"]), on=["cc_num"])
         .join(merchants.select(["category"]), on=["merchant"]))
    out = q.read().sort_values("t_id")
    assert out[["cc_num", "bank_id", "rating", "category"]].values.tolist() == [
        [10, 7, "A", "food"], [20, 8, "B", "travel"]]
    assert q.join is not None and len(q.joins) == 2  # chain joined twice on the root


def test_join_mutates_and_returns_self(groups):
    labels, card = groups
    q = labels.select_all()
    assert q.join(card.select(["spend"]), on=["card"]) is q and len(q.joins) == 1


def test_no_shared_primary_key_is_refused_naming_both_groups_and_keys(fs, groups):
    """Hopsworks' rule: without on=, the keys are the primary-key names both groups share;
    none shared is refused (the cluster answers HTTP 400, errorCode 270096)."""
    labels, card = groups
    other = fs.get_or_create_feature_group("merchant_feats", version=1, primary_key=["merchant_id"])
    other.insert(pd.DataFrame({"merchant_id": [1], "x": [1]}))
    with pytest.raises(InvalidArgumentError, match=r"'merchant_feats' onto 'labels'.*share none.*"
                                                   r"on=\['merchant_id'\]"):
        labels.select_all().join(other.select_all())
    # a foreign key found by name is suggested, never used silently
    with pytest.raises(InvalidArgumentError, match=r"'card_feats' onto 'labels'.*on=\['card'\]"):
        labels.select_all().join(card.select(["spend"]))


def test_shared_primary_key_names_are_the_implicit_keys(fs):
    left = fs.get_or_create_feature_group("pk_left", version=1, primary_key=["store", "day"])
    left.insert(pd.DataFrame({"store": ["s", "t"], "day": [1, 1], "a": [1.0, 2.0]}))
    right = fs.get_or_create_feature_group("pk_right", version=1, primary_key=["day", "store"])
    right.insert(pd.DataFrame({"store": ["s", "t"], "day": [1, 1], "b": [10.0, 20.0]}))
    q = left.select_all().join(right.select(["b"]))
    assert (q.joins[0].left_on, q.joins[0].right_on) == (["day", "store"], ["day", "store"])
    assert q.read().sort_values("store")["b"].tolist() == [10.0, 20.0]


def test_explicit_keys_and_errors(fs, groups):
    labels, card = groups
    renamed = fs.get_or_create_feature_group("card_renamed", version=1, primary_key=["card_id"], event_time="ts")
    renamed.insert(pd.DataFrame({"card_id": ["a"], "ts": _t([0]), "limit_": [100.0]}))
    out = labels.select_all().join(renamed.select(["limit_"]), left_on=["card"], right_on=["card_id"]).read()
    assert out.set_index("id").loc[1, "limit_"] == 100.0
    with pytest.raises(InvalidArgumentError, match="same, non-zero length"):
        labels.select_all().join(renamed.select_all(), left_on=["card"], right_on=[])
    with pytest.raises(InvalidArgumentError, match="Did you mean 'card'"):
        labels.select_all().join(card.select_all(), on=["cardd"])
    with pytest.raises(InvalidArgumentError, match="join_type must be one of"):
        labels.select_all().join(card.select_all(), join_type="cross")
    with pytest.raises(InvalidArgumentError, match="must be 'left' or 'inner'"):
        labels.select_all().join(card.select(["spend"]), on=["card"], join_type="outer").read()


def test_name_clash_gets_prefix_with_warning(fs, groups):
    labels, card = groups
    other = fs.get_or_create_feature_group("card_scores", version=1, primary_key=["card"])
    other.insert(pd.DataFrame({"card": ["a"], "y": [0.7]}))
    with pytest.warns(UserWarning, match="prefixed with 'card_scores_'"):
        q = labels.select_all().join(other.select(["y"]), on=["card"])
        cols = [f.name for f in q.features]
    assert cols == ["id", "card", "ts", "y", "card_scores_y"]
    no_prefix = [f.name for f in labels.select_all().join(card.select(["spend", "ts"]), on=["card"]).features]
    assert no_prefix.count("ts") == 1  # the right event time is dropped without a prefix
    explicit = labels.select_all().join(card.select(["spend", "ts"]), on=["card"], prefix="c_")
    assert {"c_spend", "c_ts"} <= {f.name for f in explicit.features}
    out = explicit.read().set_index("id")
    assert out.loc[2, "c_ts"] == T0 + pd.Timedelta(hours=15)


def test_filters_push_down_and_apply_after_joins(groups):
    labels, card = groups
    q = labels.select_all().join(card.select(["spend"]), on=["card"]).filter(labels.y == 0)
    assert sorted(q.read()["id"]) == [1, 3, 5]
    q2 = labels.select_all().join(card.select(["spend"]), on=["card"]).filter((card.spend > 1.5) & (labels.y == 0))
    assert q2.read()["id"].tolist() == [1]
    sql = q.to_string()
    assert "ASOF LEFT JOIN" in sql and "WHERE" in sql.split("ASOF")[0]  # pushed into the root scan


def test_an_empty_time_in_a_filter_is_refused_by_name(groups):
    labels, _ = groups
    with pytest.raises(InvalidArgumentError, match=r"filter value for 'ts' of feature group "
                                                   r"'labels' v1 must be a time\. Got ''"):
        labels.filter(labels.ts == "").read()
    assert len(labels.filter(labels.ts >= _t([0])[0]).read()) > 0


def test_window_applies_to_root_event_time(groups):
    labels, card = groups
    q = labels.select_all().join(card.select(["spend"]), on=["card"])
    assert sorted(q.read(start_time=_t([10])[0], end_time=_t([20])[0])["id"]) == [1, 3, 4]


def test_arrow_output_and_as_of_across_joins(groups):
    import pyarrow as pa

    labels, card = groups
    before = pd.Timestamp.now(tz="UTC")
    card.insert(pd.DataFrame({"card": ["c"], "ts": _t([1]), "spend": [99.0]}))
    q = labels.select_all().join(card.select(["spend"]), on=["card"])
    assert isinstance(q.read(dataframe_type="arrow"), pa.Table)
    assert _by_id(q.read()).loc[4, "spend"] == 99.0
    old = labels.select_all().join(card.select(["spend"]), on=["card"]).as_of(before)
    assert np.isnan(_by_id(old.read()).loc[4, "spend"])


def test_query_round_trips_through_dict(fs, groups):
    from feature_store.local.objects.query import Query

    labels, card = groups
    q = labels.select_all().join(card.select(["spend"]), on=["card"], lookback="2D").filter(labels.y == 1)
    again = Query.from_dict(fs, q.to_dict())
    pd.testing.assert_frame_equal(_by_id(again.read()), _by_id(q.read()))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_pit_join_matches_merge_asof(tmp_path_factory, monkeypatch, data):
    import feature_store
    from feature_store.local.query import pit, row_gather

    monkeypatch.setattr(row_gather, "MIN_ROWS_PER_FILE", 0)  # joined columns taken by row id
    monkeypatch.setattr(row_gather, "MIN_COLUMNS", 1)

    rng = np.random.default_rng(data.draw(st.integers(0, 10_000)))
    fs = feature_store.login(root=tmp_path_factory.mktemp("asof")).get_feature_store()
    n_left = data.draw(st.integers(1, 40))
    left = pd.DataFrame({
        "id": np.arange(n_left),
        "k1": rng.integers(0, 4, n_left),
        "k2": rng.integers(0, 3, n_left),
        "ts": T0 + pd.to_timedelta(rng.integers(0, 50, n_left), unit="h"),
    })
    fs.get_or_create_feature_group("l", version=1, primary_key=["id"], event_time="ts").insert(left)
    expected = left.copy()
    query = fs.get_feature_group("l", 1).select_all()
    for name, key in (("r1", "k1"), ("r2", "k2")):
        n = data.draw(st.integers(1, 40))
        right = pd.DataFrame({
            key: rng.integers(0, 4, n),
            "ts": T0 + pd.to_timedelta(rng.integers(0, 50, n), unit="h"),
            f"v_{name}": rng.normal(size=n),
        }).drop_duplicates([key, "ts"])
        fg = fs.get_or_create_feature_group(name, version=1, primary_key=[key], event_time="ts")
        cut = data.draw(st.integers(0, len(right)))  # two inserts: rows come from two files
        for part in (right.iloc[:cut], right.iloc[cut:]):
            if len(part):
                fg.insert(part)
        query.join(fg.select([f"v_{name}"]), on=[key])
        oracle = pd.merge_asof(
            expected.sort_values("ts"), right.sort_values("ts"), on="ts", by=key,
            direction="backward", allow_exact_matches=True,
        )
        expected = oracle
    assert len(pit.compile_query(query.spec()).gathers) == 2
    got = query.read().sort_values("id").reset_index(drop=True)
    want = expected.sort_values("id").reset_index(drop=True)[got.columns]
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def _values(value, path="spec"):
    """Every leaf of a frozen spec with where it is; fails on a mutable or live part."""
    import dataclasses

    if dataclasses.is_dataclass(value):
        assert type(value).__dataclass_params__.frozen, f"{path} ({type(value).__name__}) is mutable"
        for f in dataclasses.fields(value):
            yield from _values(getattr(value, f.name), f"{path}.{f.name}")
    elif isinstance(value, tuple | list):
        for i, item in enumerate(value):
            yield from _values(item, f"{path}[{i}]")
    else:
        yield path, value


def test_a_query_spec_is_values_not_the_objects_it_was_made_from(groups):
    """The compiler reads names, columns, commits and join specs, never a live feature group
    (so it cannot depend on the objects it compiles)."""
    labels, card = groups
    query = (labels.select_all().join(card.select(["spend"]), on=["card"], lookback="7D")
             .filter((labels.y == 1) & (card.spend > 1.5)))
    spec = query.spec()
    leaves = dict(_values(spec))
    allowed = (str, int, float, bool, type(None), pd.Timedelta)
    assert all(isinstance(v, allowed) for v in leaves.values()), {
        p: type(v).__name__ for p, v in leaves.items() if not isinstance(v, allowed)}
    assert [g.key for g in spec.groups()] == ["labels:1", "card_feats:1"]
    assert spec.commits() == {"labels:1": 1, "card_feats:1": 1}
    assert query.frozen().commit is None and spec.commit == 1
    assert {f.name: f.feature_group for f in query.features}["spend"] is card  # users get groups
