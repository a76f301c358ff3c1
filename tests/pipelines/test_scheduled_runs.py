"""Scheduled runs: relative split windows, no-op re-runs, empty windows, `latest` versions,
`fstrain run --start/--end` — driven through the real CLI on small ccfraud data."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from feature_store.core.splits import SplitSpec, assign_splits, make_split_spec
from fstrain.kernel.errors import InvalidArgumentError

N = ["--n-transactions", "20000"]
GROUPS = ("transactions", "cc_fraud", "card_details", "account_details", "bank_details",
          "merchant_details")


def _cli(root, *args):
    result = CliRunner().invoke(__import__("fstrain.cli.app", fromlist=["app"]).app,
                                [*args, "--root", str(root)])
    return result


def _commits(project):
    fs = project.get_feature_store()
    return {g: fs.get_feature_group(g, 1).latest_commit_id() for g in GROUPS}


def _spec(project, version):
    fv = project.get_feature_store().get_feature_view("ccfraud_detection", 1)
    return fv.get_training_dataset(version).to_dict()["split_spec"]


def test_relative_windows_follow_the_data_as_later_windows_are_loaded(project):
    root = project.root
    first = _cli(root, "features", "ccfraud", *N, "--start", "2024-01-01", "--end", "2024-04-01")
    assert first.exit_code == 0, first.output
    ds = _cli(root, "dataset", "ccfraud", "--json")
    assert ds.exit_code == 0, ds.output
    v1 = json.loads(ds.output)["version"]
    spec1 = _spec(project, v1)
    # anchored at the data's last event time (< 2024-04-01): test is its last 30 days
    assert pd.Timestamp(spec1["test_start"]) < pd.Timestamp("2024-03-02", tz="UTC")
    assert spec1["test_window"] == "P30DT0H0M0S" and spec1["test_end"] is None

    later = _cli(root, "features", "ccfraud", *N, "--start", "2024-04-01", "--end", "2024-07-01")
    assert later.exit_code == 0, later.output
    ds2 = _cli(root, "dataset", "ccfraud", "--json")
    assert ds2.exit_code == 0, ds2.output
    spec2 = _spec(project, json.loads(ds2.output)["version"])
    assert pd.Timestamp(spec2["test_start"]) > pd.Timestamp("2024-05-30", tz="UTC")
    # validation ends where test starts; the 1-day gap is dropped at the start of test
    assert spec2["validation_end"] == spec2["test_start"]

    # the anchor can be the scheduler's window end instead of the data's end
    anchored = _cli(root, "dataset", "ccfraud", "--anchor", "2024-05-01", "--json")
    assert anchored.exit_code == 0, anchored.output
    spec3 = _spec(project, json.loads(anchored.output)["version"])
    assert spec3["test_end"] == "2024-05-01T00:00:00+00:00"
    assert spec3["test_start"] == "2024-03-31T00:00:00+00:00"  # 30 days + 1 day gap before
    fv = project.get_feature_store().get_feature_view("ccfraud_detection", 1)
    _, _, X_te, *_ = fv.get_train_validation_test_split(json.loads(anchored.output)["version"],
                                                        event_time=True)
    assert X_te["event_time"].max() < pd.Timestamp("2024-05-01", tz="UTC")
    assert X_te["event_time"].min() >= pd.Timestamp("2024-04-01", tz="UTC")


def test_anchor_end_time_needs_hops_end_time(project, monkeypatch):
    _cli(project.root, "features", "ccfraud", *N, "--start", "2024-03-01", "--end", "2024-07-01")
    missing = _cli(project.root, "dataset", "ccfraud", "--anchor", "end-time")
    assert missing.exit_code == 2 and "HOPS_END_TIME" in missing.output
    monkeypatch.setenv("HOPS_END_TIME", "2024-06-15T00:00:00Z")
    ok = _cli(project.root, "dataset", "ccfraud", "--anchor", "end-time", "--json")
    assert ok.exit_code == 0, ok.output
    assert _spec(project, json.loads(ok.output)["version"])["test_end"].startswith("2024-06-15")


def test_rerun_of_unchanged_data_writes_nothing_and_says_so(project):
    args = ("features", "ccfraud", *N, "--start", "2024-02-01", "--end", "2024-03-01")
    assert _cli(project.root, *args).exit_code == 0
    before = _commits(project)
    again = _cli(project.root, *args)
    assert again.exit_code == 0, again.output
    assert "nothing was written" in again.output and "unchanged" in again.output
    assert _commits(project) == before
    as_json = json.loads(_cli(project.root, *args, "--json").output)
    assert as_json["wrote_nothing"] is True
    assert all(g["unchanged"] for g in as_json["feature_groups"])
    # a later window adds a commit to the windowed groups only
    more = json.loads(_cli(project.root, "features", "ccfraud", *N, "--start", "2024-03-01",
                           "--end", "2024-03-15", "--json").output)
    changed = {g["name"] for g in more["feature_groups"] if not g["unchanged"]}
    assert "transactions" in changed and "card_details" not in changed


def test_empty_window_writes_nothing_and_says_so(project):
    assert _cli(project.root, "features", "ccfraud", *N, "--start", "2024-02-01",
                "--end", "2024-03-01").exit_code == 0
    before = _commits(project)
    empty = _cli(project.root, "features", "ccfraud", *N, "--start", "2025-01-01",
                 "--end", "2025-02-01")
    assert empty.exit_code == 0, empty.output
    assert "holds no rows" in empty.output and "nothing was written" in empty.output
    assert _commits(project) == before
    run = _cli(project.root, "run", "ccfraud", "--start", "2025-01-01", "--end", "2025-02-01",
               "--json")
    assert run.exit_code == 0, run.output
    assert json.loads(run.output)["status"] == "empty window"
    assert _commits(project) == before


def test_train_accepts_latest_and_rejects_nonsense(project):
    root = project.root
    assert _cli(root, "features", "ccfraud", *N).exit_code == 0
    assert _cli(root, "dataset", "ccfraud").exit_code == 0
    assert _cli(root, "dataset", "ccfraud", "--seed", "3").exit_code == 0
    trained = _cli(root, "train", "ccfraud", "-t", "latest", "--param", "n_estimators=20", "--json")
    assert trained.exit_code == 0, trained.output
    ref = json.loads(trained.output)
    model = project.get_model_registry().get_model(ref["name"], ref["version"])
    assert model.training_dataset_version == 2
    bad = _cli(root, "train", "ccfraud", "-t", "newest")
    assert bad.exit_code == 2 and "'latest'" in bad.output


def test_relative_spec_rules():
    with pytest.raises(InvalidArgumentError, match="validation_window"):
        make_split_spec(seed=1, three_way=True, test_window="30D")
    with pytest.raises(InvalidArgumentError, match="one or the other"):
        make_split_spec(seed=1, test_window="30D", test_size=0.2)
    with pytest.raises(InvalidArgumentError, match="test_window"):
        make_split_spec(seed=1, test_size=0.2, anchor="2024-01-01")
    with pytest.raises(InvalidArgumentError, match="positive"):
        make_split_spec(seed=1, test_window="0D")
    spec = make_split_spec(seed=1, test_window="7D", train_window="14D")
    times = pd.DataFrame({"t": pd.date_range("2024-01-01", periods=60, freq="D", tz="UTC")})
    out = assign_splits(times, spec, event_time_column="t")
    assert (out == "test").sum() == 8  # the last 7 days back from the last event, inclusive
    assert (out == "train").sum() == 14 and (out == None).sum() == 60 - 22  # noqa: E711
    assert SplitSpec.from_dict(spec.to_dict()) == spec


def test_group_split_on_the_card_key_of_the_shipped_view(project):
    root = project.root
    assert _cli(root, "features", "ccfraud", *N).exit_code == 0
    ds = _cli(root, "dataset", "ccfraud", "--split", "group", "--group-column", "cc_num",
              "--seed", "4", "--json")
    assert ds.exit_code == 0, ds.output
    version = json.loads(ds.output)["version"]
    fv = project.get_feature_store().get_feature_view("ccfraud_detection", 1)
    X_tr, X_va, X_te, *_ = fv.get_train_validation_test_split(version, training_helper_columns=True)
    cards = [set(X["cc_num"]) for X in (X_tr, X_va, X_te)]
    assert not (cards[0] & cards[1] or cards[0] & cards[2] or cards[1] & cards[2])
    assert all(cards)
    plain = fv.get_train_validation_test_split(version)[0]
    assert "cc_num" not in plain.columns  # a helper column, never a feature


class _DatedOnlyView:
    """A view whose create call takes dates only (as the Hopsworks adapter's)."""

    name = "v"

    def create_train_validation_test_split(self, validation_size=None, test_size=None,
                                           train_start="", train_end="", validation_start="",
                                           validation_end="", test_start="", test_end="",
                                           seed=None, split=None, gap=None):
        return locals()


def test_relative_windows_become_dates_for_a_dated_only_backend():
    from fstrain.kernel.errors import ConfigError
    from pipelines.training_dataset import _dated_if_needed

    view = _DatedOnlyView()
    args = _dated_if_needed(view, {"split": "time", "test_window": "30D",
                                   "validation_window": "30D", "gap": "1D",
                                   "anchor": "2024-07-01"})
    assert "test_window" not in args and args["test_end"] == "2024-07-01T00:00:00+00:00"
    assert args["test_start"] == "2024-05-31T00:00:00+00:00"
    assert args["validation_start"] == "2024-04-30T00:00:00+00:00"
    view.create_train_validation_test_split(**args)  # every key is a parameter it takes
    with pytest.raises(ConfigError, match="--anchor"):
        _dated_if_needed(view, {"split": "time", "test_window": "30D", "validation_window": "30D"})


def test_validate_accepts_latest(project):
    project.get_feature_store()  # a store (read commands refuse a folder that holds none)
    result = _cli(project.root, "validate", "nomodel:latest")
    assert result.exit_code == 2 and "'nomodel' does not exist" in result.output  # not a parse error
