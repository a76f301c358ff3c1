"""Hopsworks option dictionaries on the local backend: every key is honoured or refused by name,
and a refused call writes nothing (no commit, no training-dataset version)."""

from __future__ import annotations

import pandas as pd
import pytest

from fstrain.kernel.errors import InvalidArgumentError


@pytest.fixture
def store(project):
    fs = project.get_feature_store()
    fg = fs.create_feature_group("g", version=1, primary_key=["id"], event_time="ts")
    fg.insert(pd.DataFrame({"id": [1, 2, 3, 4], "y": [0, 1, 0, 1], "v": [1.0, 2.0, 3.0, 4.0],
                            "ts": pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-03",
                                                  "2024-01-04"], utc=True)}))
    fv = fs.create_feature_view("g_fv", version=1, query=fg.select_all(), labels=["y"])
    return fg, fv


ROW = pd.DataFrame({"id": [9], "y": [1], "v": [9.0], "ts": pd.Timestamp("2024-02-01", tz="UTC")})

CASES = {
    "insert spark options": (lambda fg, fv: fg.insert(ROW, write_options={"spark": {}}),
                             ["write_options", "'spark'", "wait_for_job"]),
    "insert without offline materialization": (
        lambda fg, fv: fg.insert(ROW, write_options={"start_offline_materialization": False}),
        ["start_offline_materialization", "False"]),
    "insert not a dict": (lambda fg, fv: fg.insert(ROW, write_options=["x"]),
                          ["write_options must be a dict"]),
    "remove_rows kafka": (lambda fg, fv: fg.remove_rows(ROW, write_options={"kafka": 1}),
                          ["'kafka'"]),
    "fg.read use_hive": (lambda fg, fv: fg.read(read_options={"use_hive": True}),
                         ["read_options", "'use_hive'"]),
    "query.read flight": (lambda fg, fv: fg.select_all().read(
        read_options={"arrow_flight_config": {}}), ["'arrow_flight_config'"]),
    "to_string online": (lambda fg, fv: fg.select_all().to_string(online=True),
                         ["to_string(online=True)"]),
    "to_string arrow_flight": (lambda fg, fv: fg.select_all().to_string(arrow_flight=True),
                               ["to_string(arrow_flight=True)"]),
    "training_data read_options": (lambda fg, fv: fv.training_data(
        read_options={"use_hive": True}), ["'use_hive'"]),
    "train_test_split read_options": (lambda fg, fv: fv.train_test_split(
        0.5, read_options={"spark": 1}), ["'spark'"]),
    "create split spark write_options": (lambda fg, fv: fv.create_train_test_split(
        test_size=0.5, seed=1, write_options={"spark": {"x": 1}}), ["'spark'", "batch_rows"]),
    "get split unknown read_options": (lambda fg, fv: fv.get_train_test_split(
        1, read_options={"use_hive": True}), ["'use_hive'", "verify"]),
    "batch data read_options": (lambda fg, fv: fv.get_batch_data(
        read_options={"use_hive": True}), ["'use_hive'"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_option_the_local_backend_cannot_honour_is_refused_by_name(store, case):
    fg, fv = store
    if case.startswith("get split"):
        fv.create_train_test_split(test_size=0.5, seed=1)
    call, needles = CASES[case]
    commits, versions = fg.commit_details(), [td.version for td in fv.get_training_datasets()]
    with pytest.raises(InvalidArgumentError) as caught:
        call(fg, fv)
    for needle in needles:
        assert needle in str(caught.value)
    assert "feature" in str(caught.value) or "query" in str(caught.value)  # names the object
    assert fg.commit_details() == commits
    assert [td.version for td in fv.get_training_datasets()] == versions


def test_options_the_local_backend_honours_are_accepted(store):
    fg, fv = store
    fg.insert(ROW, write_options={"wait_for_job": True, "start_offline_materialization": True},
              wait=True)
    assert 9 in set(fg.read(read_options={})["id"])
    version, _ = fv.create_train_test_split(test_size=0.5, seed=1,
                                            write_options={"wait_for_job": True, "batch_rows": 2})
    assert len(fv.get_train_test_split(version, read_options={"verify": True})[0]) > 0
