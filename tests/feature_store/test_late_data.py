"""Late-data exposure recorded with every training-dataset version (issue 33 item 2): per joined
group, the matched rows committed after their label's time and the largest delay; shown by
``fstrain td show``, the scorecard's lineage and ``fstrain doctor``, which flags a version above
the threshold as possible leakage."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from feature_store.core import late_data as late
from fstrain.cli.app import app
from fstrain.tools.doctor_checks import check_late_data
from tests.feature_store.pit_oracle import commit_clock, hours

N = 240


def _cli(root, *args):
    return CliRunner().invoke(app, [*args, "--root", str(root)])


def _backfilled_fraud(fs, monkeypatch):
    """ccfraud's shape: labelled transactions joined to a card group that was loaded on time
    (rows of 0h, at 1h), backfilled at 100h (rows of 50h) and corrected at 150h for cards 0-4;
    a merchant group appended to once, on time. Returns the labels and, per label, when its
    plain match on the card group became known."""
    rng = np.random.default_rng(5)
    with commit_clock(monkeypatch) as clock:
        tx = pd.DataFrame({"t_id": np.arange(N), "cc_num": rng.integers(0, 10, N),
                           "merchant": rng.integers(0, 3, N),
                           "ts": [hours(h) for h in rng.uniform(10, 200, N)],
                           "amount": rng.normal(size=N), "is_fraud": rng.integers(0, 2, N)})
        labels = fs.create_feature_group("transactions", version=1, primary_key=["t_id"],
                                         event_time="ts")
        labels.insert(tx)
        cards = fs.create_feature_group("cards", version=1, primary_key=["cc_num"],
                                        event_time="ts")
        merchants = fs.create_feature_group("merchants", version=1, primary_key=["merchant"],
                                            event_time="ts")
        clock[0] = hours(1)
        cards.insert(pd.DataFrame({"cc_num": range(10), "ts": [hours(0)] * 10,
                                   "spend": rng.normal(size=10)}))
        merchants.insert(pd.DataFrame({"merchant": range(3), "ts": [hours(0)] * 3,
                                       "risk": [0.1, 0.2, 0.3]}))
        clock[0] = hours(100)
        cards.insert(pd.DataFrame({"cc_num": range(10), "ts": [hours(50)] * 10,
                                   "spend": rng.normal(size=10)}))
        clock[0] = hours(150)
        cards.insert(pd.DataFrame({"cc_num": range(5), "ts": [hours(50)] * 5,
                                   "spend": rng.normal(size=5)}))
    matched_50h = tx["ts"] >= hours(50)
    known = np.where(~matched_50h, hours(1).value, np.where(tx["cc_num"] < 5, hours(150).value,
                                                            hours(100).value))
    return labels, cards, merchants, tx.assign(known=pd.to_datetime(known, utc=True))


def _view(fs, labels, cards, merchants, name, **kw):
    query = (labels.select(["t_id", "cc_num", "merchant", "amount", "is_fraud"])
             .join(cards.select(["spend"]), on=["cc_num"])
             .join(merchants.select(["risk"]), on=["merchant"]))
    return fs.create_feature_view(name, version=1, query=query, labels=["is_fraud"], **kw)


def _expected(tx):
    is_late = tx["known"] > tx["ts"]
    delay = (tx["known"] - tx["ts"])[is_late].max().total_seconds()
    return int(is_late.sum()), delay


def _registered(project, fv, version):
    """A model version registered on the training-dataset version (its lineage is what the
    doctor and the scorecard read; the files are a stand-in, no trainer runs)."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "notes.txt").write_text("trained elsewhere")
        model = project.get_model_registry().python.create_model(
            f"{fv.name}_model", feature_view=fv, training_dataset_version=version)
        model.save(tmp)
    return model


@pytest.fixture(scope="module")
def fraud(tmp_path_factory):
    """One store for the module: the backfilled groups, a plain view and an as-known view, each
    with a train/validation/test version, and a model trained on the plain one."""
    import feature_store

    root = tmp_path_factory.mktemp("late") / "store"
    project = feature_store.login(root=root)
    fs = project.get_feature_store()
    with pytest.MonkeyPatch.context() as monkeypatch:
        labels, cards, merchants, tx = _backfilled_fraud(fs, monkeypatch)
    plain = _view(fs, labels, cards, merchants, "fraud")
    known = _view(fs, labels, cards, merchants, "fraud_known", as_known=True)
    splits = {"validation_size": 0.25, "test_size": 0.25, "seed": 1}
    v, _ = plain.create_train_validation_test_split(**splits)
    k, _ = known.create_train_validation_test_split(**splits)
    model = _registered(project, plain, v)
    return SimpleNamespace(root=root, project=project, fs=fs, groups=(labels, cards, merchants),
                           tx=tx, plain=plain, known=known, v=v, k=k, model=model)


def test_a_backfill_is_recorded_as_late_data_and_the_as_known_version_keeps_it_out(fraud):
    n_late, delay = _expected(fraud.tx)
    assert n_late > 10  # the backfill and the correction reach many labels
    plain, known, v, k = fraud.plain, fraud.known, fraud.v, fraud.k
    figures = {g["group"]: g for g in late.groups(plain.get_training_dataset(v).extra)}
    assert figures["cards:1"] == {"group": "cards:1", "as_known": False, "rows": N,
                                  "matched": N, "late": n_late, "max_delay_s": delay}
    assert figures["merchants:1"]["late"] == 0 and figures["merchants:1"]["matched"] == N
    kept = {g["group"]: g for g in late.groups(known.get_training_dataset(k).extra)}
    assert kept["cards:1"]["late"] == 0 and kept["cards:1"]["kept_out"] == n_late
    assert kept["cards:1"]["kept_out_max_delay_s"] == delay
    assert [g["group"] for g in late.over_threshold(plain.get_training_dataset(v).extra)] == ["cards:1"]
    assert late.over_threshold(known.get_training_dataset(k).extra) == []
    # the difference: the as-known version joins what was known at each label's time
    x_plain = pd.concat(plain.get_train_validation_test_split(v)[:3])
    x_known = pd.concat(known.get_train_validation_test_split(k)[:3])
    assert (x_plain["amount"].to_numpy() == x_known["amount"].to_numpy()).all()  # same rows
    differs = (x_plain["spend"].to_numpy() != x_known["spend"].to_numpy())
    assert 0 < differs.sum() <= n_late


def test_the_history_path_and_the_file_path_give_the_same_figures(fraud, monkeypatch):
    from feature_store.local.query import late_data as query_late

    v, _ = fraud.plain.create_training_data()
    monkeypatch.setattr(query_late, "_added_at", lambda *a: None)  # every group from history
    w, _ = fraud.plain.create_training_data()
    figures = late.groups(fraud.plain.get_training_dataset(v).extra)
    assert figures == late.groups(fraud.plain.get_training_dataset(w).extra)
    assert figures == late.groups(fraud.plain.get_training_dataset(fraud.v).extra)


def test_the_partitioned_path_records_the_same_figures(fraud):
    labels, cards, _ = fraud.groups
    query = labels.select(["t_id", "cc_num", "amount", "is_fraud"]).join(
        cards.select(["spend"]), on=["cc_num"])
    fv = fraud.fs.create_feature_view("fraud_p", version=1, query=query, labels=["is_fraud"])
    v, _ = fv.create_training_data()
    p, _ = fv.create_training_data(write_options={"partitions": 3})
    assert late.groups(fv.get_training_dataset(p).extra) == late.groups(fv.get_training_dataset(v).extra)
    assert late.groups(fv.get_training_dataset(p).extra)[0]["late"] == _expected(fraud.tx)[0]


def test_td_show_prints_the_late_data_figures(fraud):
    n_late, delay = _expected(fraud.tx)
    shown = _cli(fraud.root, "td", "show", "fraud:1", str(fraud.v))
    assert shown.exit_code == 0, shown.output
    assert (f"'cards:1': {n_late} of {N} joined rows ({100 * n_late / N:.2f}%) committed after "
            f"their label time, up to {delay / 86400:.1f} d late") in shown.output
    assert f"'merchants:1': none of {N} joined rows committed" in shown.output
    payload = json.loads(_cli(fraud.root, "td", "show", "fraud:1", str(fraud.v), "--json").output)
    assert payload["late_data"]["groups"][0]["late"] == n_late and payload["as_known"] is False
    known = _cli(fraud.root, "td", "show", "fraud_known:1", str(fraud.k)).output
    assert "late data (joined as known):" in known
    assert f"a plain join would have let in {n_late} row(s)" in known


def test_doctor_flags_a_version_with_late_data_naming_the_group(fraud):
    report = json.loads(_cli(fraud.root, "doctor", "fraud_model", "--json", "--no-rerun").output)
    found = {f["check"]: f for f in report["findings"]}["late_data"]
    assert found["severity"] == "warning" and "'cards:1'" in found["title"]
    assert "'merchants:1'" not in found["title"] and "leakage" in found["title"]
    extra = fraud.plain.get_training_dataset(fraud.v).extra
    assert check_late_data(extra, 0.9).severity == "ok"  # the threshold is the user's
    assert check_late_data(fraud.known.get_training_dataset(fraud.k).extra, 0.0).severity == "ok"
    bad = _cli(fraud.root, "doctor", "fraud_model", "--late-data-threshold", "2")
    assert bad.exit_code == 2 and "--late-data-threshold" in bad.output


def test_the_scorecard_lineage_carries_the_late_data(fraud):
    from pipelines.model_validation import _new_card

    split = fraud.plain.get_train_validation_test_split(fraud.v)
    data = SimpleNamespace(X_test=split[2], y_test=split[5]["is_fraud"], helpers=pd.DataFrame())
    card = _new_card(fraud.model, fraud.plain, data)
    assert card.lineage["as_known"] is False
    n_late = _expected(fraud.tx)[0]
    assert card.lineage["late_data"]["cards:1"].startswith(f"{n_late} of {N} joined rows")


def test_a_join_that_brings_only_labels_is_recorded_but_not_flagged(fs, monkeypatch):
    """A label confirmed after its row's time (a chargeback) is the label's delay: recorded
    with the version, never flagged as leakage; a late feature group beside it still is."""
    with commit_clock(monkeypatch) as clock:
        clock[0] = hours(0)
        tx = fs.create_feature_group("tx", version=1, primary_key=["t_id"], event_time="ts")
        tx.insert(pd.DataFrame({"t_id": range(6), "ts": [hours(h) for h in range(10, 16)],
                                "amount": np.arange(6.0)}))
        clock[0] = hours(100)  # every label confirmed days later, as is every card figure
        confirmed = fs.create_feature_group("confirmed", version=1, primary_key=["t_id"],
                                            event_time="ts")
        confirmed.insert(pd.DataFrame({"t_id": range(6), "ts": [hours(h) for h in range(6)],
                                       "is_fraud": [0, 1, 0, 1, 0, 1]}))
        cards = fs.create_feature_group("risk", version=1, primary_key=["t_id"], event_time="ts")
        cards.insert(pd.DataFrame({"t_id": range(6), "ts": [hours(0)] * 6, "risk": [0.5] * 6}))
    query = tx.select_all().join(confirmed.select(["is_fraud"]), on=["t_id"])
    labelled = fs.create_feature_view("labelled", version=1, query=query, labels=["is_fraud"])
    version, _ = labelled.create_training_data(seed=1)
    extra = labelled.get_training_dataset(version).extra
    (record,) = late.groups(extra)
    assert record["late"] == 6 and record["labels_only"] is True
    assert "brings only labels" in late.describe(record)
    assert check_late_data(extra, 0.0).severity == "ok"
    both = fs.create_feature_view("both", version=1, labels=["is_fraud"], query=query.join(
        cards.select(["risk"]), on=["t_id"]))
    extra = both.get_training_dataset(both.create_training_data(seed=1)[0]).extra
    finding = check_late_data(extra, 0.0)
    assert finding.severity == "warning" and "'risk:1'" in finding.title
    assert "'confirmed:1'" not in finding.title


def test_a_group_whose_old_commits_were_cleaned_up_is_recorded_as_not_counted(fs):
    """A table written before fstrain kept the Delta log (delta-rs' defaults: commit files past
    the retention removed at each checkpoint) still builds versions: its late-data figures
    are recorded as not counted, saying why, instead of the create failing; an as-known join,
    which needs the lost versions, is refused naming the group."""
    from deltalake import DeltaTable, write_deltalake

    from fstrain.kernel.errors import HistoryRemovedError

    labels = fs.create_feature_group("lbl", version=1, primary_key=["id"], event_time="ts")
    labels.insert(pd.DataFrame({"id": [1, 2], "k": [0, 1], "ts": [hours(200)] * 2}))
    old = fs.create_feature_group("old", version=1, primary_key=["k"], event_time="ts")
    old.insert(pd.DataFrame({"k": [0], "ts": [hours(0)], "x": [0.0]}))
    path = str(old._table.path)
    DeltaTable(path).alter.set_table_properties({
        "delta.logRetentionDuration": "interval 0 seconds", "delta.checkpointInterval": "2",
        "delta.enableExpiredLogCleanup": "true"})
    for i in range(1, 5):  # another writer's commits, with delta-rs' default log cleanup
        write_deltalake(path, pd.DataFrame({"k": [i % 2], "ts": [hours(i)], "x": [float(i)]}),
                        mode="append")
    assert not (old._table.path / "_delta_log" / f"{0:020d}.json").exists()
    query = labels.select_all().join(old.select(["x"]), on=["k"])
    fv = fs.create_feature_view("cleaned", query=query, labels=[])
    version, _ = fv.create_training_data(seed=1)
    (record,) = late.groups(fv.get_training_dataset(version).extra)
    assert record["group"] == "old:1" and "commit file of version 0 is gone" in record["not_counted"]
    assert late.describe(record).startswith("'old:1': not counted: feature group 'old' v1")
    assert late.over_threshold(fv.get_training_dataset(version).extra, 0.0) == []
    finding = check_late_data(fv.get_training_dataset(version).extra, 0.01)
    assert finding.severity == "warning"  # not "ok": nothing was checked for it
    assert finding.title.startswith("Late data not counted for 'old:1': feature group 'old' v1")
    assert "commit file of version 0 is gone" in finding.title
    assert sorted(fv.get_training_data(version)[0]["x"]) == [3.0, 4.0]
    with pytest.raises(HistoryRemovedError, match="feature group 'old' v1"):
        labels.select_all().join(old.select(["x"]), on=["k"], as_known=True).read()


def _probed_store(fs, monkeypatch):
    """Labels with microsecond times on both sides of 1970, a group appended in two commits
    whose join keys leave a tie-break column, and a group declaring an ``ingestion_time``."""
    rng = np.random.default_rng(11)
    n = 300
    base = pd.Timestamp("1969-12-31 23:00", tz="UTC")
    us = pd.to_timedelta(rng.integers(0, 3 * 3_600_000_000, n), unit="us")
    with commit_clock(monkeypatch, base) as clock:
        labels = fs.create_feature_group("probe_labels", version=1, primary_key=["id"],
                                         event_time="ts")
        labels.insert(pd.DataFrame({"id": np.arange(n), "k": rng.integers(0, 6, n),
                                    "ts": base + us, "y": rng.integers(0, 2, n)}))
        ties = fs.create_feature_group("probe_ties", version=1, primary_key=["k", "slot"],
                                       event_time="ts")
        ingested = fs.create_feature_group("probe_ingested", version=1, primary_key=["k"],
                                           event_time="ts", ingestion_time="seen")
        for hour in (1, 2):
            clock[0] = base + pd.Timedelta(hours=hour, microseconds=777)
            m = 40
            ties.insert(pd.DataFrame({"k": rng.integers(0, 6, m), "slot": np.arange(m) + 100 * hour,
                                      "ts": base + pd.to_timedelta(rng.integers(0, 10_800, m) // 60 * 60, unit="s"),
                                      "a": rng.normal(size=m)}))
        ts = base + pd.to_timedelta(rng.integers(0, 10_800_000_000, 60), unit="us")
        ingested.insert(pd.DataFrame({"k": rng.integers(0, 6, 60), "ts": ts,
                                      "seen": ts + pd.to_timedelta(rng.integers(0, 3_600_000_000, 60), unit="us"),
                                      "b": rng.normal(size=60)}).drop_duplicates(["k", "ts"]))
    return labels, ties, ingested


def test_the_figures_counted_from_the_query_equal_the_exposure_joins(tmp_path, monkeypatch):
    """Every version counts its exposure from the query's own matched row ids where it can;
    a differential check against the per-group exposure join it replaced, over ties, an
    ingestion time, a lookback and label times before 1970 (truncated milliseconds)."""
    import feature_store
    from feature_store.local.query import late_data as query_late
    from feature_store.local.query.pit import compile_query
    from feature_store.local.storage import engine

    fs = feature_store.login(root=tmp_path / "store").get_feature_store()
    labels, ties, ingested = _probed_store(fs, monkeypatch)
    for lookback in (None, pd.Timedelta(minutes=50)):
        query = (labels.select(["id", "k", "y"])
                 .join(ties.select(["a"]), on=["k"], lookback=lookback)
                 .join(ingested.select(["b"]), on=["k"], lookback=lookback))
        compiled = compile_query(query.spec(), order_by_root_key=True, probes=True)
        assert set(compiled.probes) == {"t1", "t2"}
        con = engine.connect()
        try:
            table = compiled.fetch(con, hidden=True)
            joined = query_late.exposure(compiled, con)
            with monkeypatch.context() as m:
                m.setattr(query_late, "exposure_sql", None)  # the probed path joins nothing
                probed = query_late.exposure(compiled, con, probed=table)
        finally:
            con.close()
        assert probed == joined, json.dumps([probed, joined])
        assert all(g["late"] > 0 and g["matched"] < g["rows"] for g in probed["groups"])
        assert table.column_names[-3:] == compiled.hidden
    fv = fs.create_feature_view("probed", version=1, query=query, labels=["y"])
    version, _ = fv.create_training_data()
    assert late.groups(fv.get_training_dataset(version).extra) == probed["groups"]
    with monkeypatch.context() as m:  # partitioned: the kernel counts while it joins
        m.setattr(query_late, "exposure_sql", None)
        parted, _ = fv.create_training_data(write_options={"partitions": 3})
        streamed, _ = fv.create_training_data(write_options={"partitions": 1, "batch_rows": 64})
    assert late.groups(fv.get_training_dataset(parted).extra) == probed["groups"]
    assert late.groups(fv.get_training_dataset(streamed).extra) == probed["groups"]
    assert fv.get_training_data(streamed)[0].equals(fv.get_training_data(version)[0])
    assert not any(c.startswith("__fstrain") for c in fv.get_training_data(version)[0].columns)
