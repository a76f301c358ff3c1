"""Extra log columns (issue 33 item 5): ``enable_logging(extra_log_columns=...)`` takes the SDK's
shapes (Feature objects or name/type dicts), keeps them with the view, and every logged row
carries them, typed as declared; the cluster's scheduling options are refused by name."""

from __future__ import annotations

import pandas as pd
import pytest
from hsfs.feature import Feature as SdkFeature

from feature_store.feature import Feature
from fstrain.kernel.errors import InvalidArgumentError


@pytest.fixture
def view(fs):
    fg = fs.create_feature_group("tx", version=1, primary_key=["tid"], online_enabled=True)
    fg.insert(pd.DataFrame({"tid": [1, 2, 3], "amount": [1.0, 2.0, 3.0], "y": [0, 1, 0]}))
    return fs.create_feature_view("logged", query=fg.select_all(), labels=["y"])


def test_extra_log_columns_in_the_sdks_shapes_are_kept_and_logged(fs, view):
    view.enable_logging(extra_log_columns=[
        {"name": "session", "type": "string"}, SdkFeature("latency_ms", type="bigint"),
        Feature("score", "double"), {"name": "session", "type": "string"}])  # duplicate: ignored
    expected = [{"name": "session", "type": "string"}, {"name": "latency_ms", "type": "bigint"},
                {"name": "score", "type": "double"}]
    again = fs.get_feature_view("logged", 1)
    assert again.extra_log_columns == expected and again.logging_enabled
    rows = pd.DataFrame({"tid": [1, 2], "amount": [1.0, 2.0]})
    again.log(rows, predictions=[0, 1],
              extra_logging_features=pd.DataFrame({"session": ["a", "b"], "latency_ms": [3, 4]}))
    again.log(rows.head(1), predictions=[1])  # no extra values: the columns are still there
    log = again.read_log()
    assert log["session"].tolist()[:2] == ["a", "b"] and pd.isna(log["session"].iloc[2])
    assert log["latency_ms"].tolist()[:2] == [3, 4]
    assert log["score"].isna().all()
    group = fs.get_feature_group("logged_1_log", 1)
    assert [group.get_feature(c).type for c in ("session", "latency_ms", "score")] == \
        ["string", "int64", "double"]


def test_extra_log_columns_are_refused_naming_what_is_wrong(view):
    with pytest.raises(InvalidArgumentError, match="'when' has type 'struct'"):
        view.enable_logging(extra_log_columns=[{"name": "when", "type": "struct"}])
    with pytest.raises(InvalidArgumentError, match="'log_id' clashes"):
        view.enable_logging(extra_log_columns=[{"name": "log_id", "type": "string"}])
    with pytest.raises(InvalidArgumentError, match="Feature objects or"):
        view.enable_logging(extra_log_columns=[42])
    view.enable_logging(extra_log_columns=[{"name": "n", "type": "bigint"}])
    with pytest.raises(InvalidArgumentError, match="extra log column 'n' is bigint"):
        view.log(pd.DataFrame({"tid": [1]}), predictions=[0],
                 extra_logging_features=pd.DataFrame({"n": ["x"]}))


def test_the_clusters_logging_schedule_options_are_refused_by_name(view):
    for option, value in (("materialization_interval", "hour"), ("transport", "job")):
        with pytest.raises(InvalidArgumentError, match=rf"{option}='{value}'.*Drop {option}="):
            view.enable_logging(**{option: value})
    with pytest.raises(InvalidArgumentError, match="transport="):
        view.delete_log(transport="realtime")
    assert view.logging_enabled is False


def test_create_feature_view_takes_extra_log_columns_and_enables_logging(fs, view):
    fv = fs.create_feature_view("logged2", query=view.query, labels=["y"],
                                extra_log_columns=[{"name": "session", "type": "string"}])
    assert fv.logging_enabled and fv.extra_log_columns == [{"name": "session", "type": "string"}]
