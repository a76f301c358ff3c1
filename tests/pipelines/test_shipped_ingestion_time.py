"""A shipped use case loads its history after the fact and declares it known at its event time
(``ingestion_time``): a fresh store reports no late data in ``fstrain td show`` nor in the
doctor's check, an as-known view matches the rows, and a genuinely late backfill is counted.
airquality is the cheapest use case with a point-in-time-joined group (``daily_weather``)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest
from typer.testing import CliRunner

from feature_views.airquality.view import build as build_view
from feature_views.airquality import source as airquality
from fstrain.cli.app import app
from fstrain.tools.doctor_checks import check_late_data
from pipelines.feature import FeaturePipelineConfig
from pipelines.feature import run as run_features


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A fresh airquality store: its groups written by the feature pipeline, its view built."""
    import feature_store

    root = tmp_path_factory.mktemp("ingest") / "store"
    project = feature_store.login(root=root)
    run_features(project, FeaturePipelineConfig(use_case="airquality"))
    fs = project.get_feature_store()
    fv = build_view(fs)
    return SimpleNamespace(root=root, fs=fs, fv=fv)


def _late(extra, group="daily_weather"):
    return {g["group"].split(":")[0]: g for g in extra["late_data"]["groups"]}[group]


def test_the_shipped_group_declares_its_ingestion_time_and_keeps_it_out_of_the_features(store):
    weather = store.fs.get_feature_group("daily_weather", 1)
    assert weather.ingestion_time == airquality.DAILY_WEATHER.ingestion_time == "known_at"
    assert "known_at" not in [f.name for f in store.fv.features]


def test_a_fresh_shipped_store_reports_no_late_data(store):
    version, _ = store.fv.create_training_data()
    shown = CliRunner().invoke(app, ["td", "show", "air_quality_ozone:1", str(version), "--json",
                                     "--root", str(store.root)])
    assert shown.exit_code == 0, shown.output
    payload = json.loads(shown.output)
    weather = _late(payload)
    assert weather["late"] == 0 and weather["matched"] > 100
    finding = check_late_data(store.fv.get_training_dataset(version).extra, 0.01)
    assert finding.severity == "ok", finding.message


def test_an_as_known_view_of_the_shipped_use_case_matches_the_rows(store):
    air = store.fs.get_feature_group("air_quality", 1)
    weather = store.fs.get_feature_group("daily_weather", 1)
    query = air.select_except(["city"]).join(
        weather.select_except(["city", "date", "known_at"]), on=["city"], as_known=True)
    known = store.fs.create_feature_view("air_quality_known", version=1, query=query,
                                          labels=["ozone"])
    X, _ = known.training_data()
    assert len(X) > 100 and X["temp"].notna().all()


def test_a_late_backfill_with_ingestion_time_now_is_counted(store):
    weather = store.fs.get_feature_group("daily_weather", 1)
    rows = weather.read().sort_values("date").tail(10).copy()
    rows["temp"] = rows["temp"] + 1.0
    rows["known_at"] = pd.Timestamp.now(tz="UTC").as_unit("ns")
    weather.insert(rows)
    version, _ = store.fv.create_training_data()
    figures = _late(store.fv.get_training_dataset(version).extra)
    labels = store.fs.get_feature_group("air_quality", 1).read()
    assert figures["late"] == int(labels["date"].isin(rows["date"]).sum()) > 0
    assert check_late_data(store.fv.get_training_dataset(version).extra, 0.01).severity == "warning"


def test_a_store_made_before_the_declaration_keeps_its_schema_on_a_rerun(tmp_path):
    import feature_store

    project = feature_store.login(root=tmp_path / "store")
    old = airquality.load()["daily_weather"].drop(columns=["known_at"])
    fg = project.get_feature_store().create_feature_group(
        "daily_weather", version=1, primary_key=["city"], event_time="date")
    fg.insert(old)
    run_features(project, FeaturePipelineConfig(use_case="airquality"))
    weather = project.get_feature_store().get_feature_group("daily_weather", 1)
    assert "known_at" not in [f.name for f in weather.features] and weather.ingestion_time is None
