"""Browsing from the CLI (fg/fv/td list|show), guarded deletes, a compact `registry show` and a
`registry diff` that compares model type, hyperparameters, metrics and lineage."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fstrain.cli.app import app


def _cli(root, *args):
    return CliRunner().invoke(app, [*args, "--root", str(root)])


def _json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("browse") / "store"
    assert _cli(root, "features", "ccfraud", "--n-transactions", "20000").exit_code == 0
    assert _cli(root, "dataset", "ccfraud").exit_code == 0
    assert _cli(root, "dataset", "ccfraud", "--seed", "5").exit_code == 0
    assert _cli(root, "train", "ccfraud", "-t", "1", "--param", "n_estimators=20").exit_code == 0
    assert _cli(root, "train", "ccfraud", "-t", "1", "--model", "lightgbm", "--param",
                "n_estimators=20").exit_code == 0
    return root


def test_feature_groups_and_views_are_listed_and_shown(store):
    groups = _json(_cli(store, "fg", "list", "--json"))
    assert {g["name"] for g in groups} >= {"transactions", "cc_fraud", "card_details"}
    tx = _json(_cli(store, "fg", "show", "transactions:1", "--json"))
    assert tx["primary_key"] == ["t_id"] and tx["event_time"] == "event_time"
    assert "amount" in {f["name"] for f in tx["features"]} and tx["commits"]
    human = _cli(store, "fg", "show", "transactions")
    assert "primary key: t_id" in human.output
    views = _json(_cli(store, "fv", "list", "--json"))
    assert views == [{"name": "ccfraud_detection", "version": 1, "labels": ["is_fraud"],
                      "features": views[0]["features"], "training_datasets": [1, 2]}]
    fv = _json(_cli(store, "fv", "show", "ccfraud_detection", "--json"))
    assert "cardholder_gender" in fv["training_helper_columns"] and "SELECT" in fv["query"]
    missing = _cli(store, "fg", "show", "transaction")
    assert missing.exit_code == 2 and "transactions" in missing.output  # did you mean


def test_training_dataset_lineage_and_guarded_delete(store):
    rows = _json(_cli(store, "td", "list", "ccfraud_detection", "--json"))
    assert [r["version"] for r in rows] == [1, 2] and rows[1]["seed"] == 5
    td = _json(_cli(store, "td", "show", "ccfraud_detection", "1", "--json"))
    assert td["split"] == "time" and set(td["sha256"]) == {"train", "validation", "test"}
    assert td["feature_group_commits"]["transactions:1"] >= 0
    assert sorted(td["models"]) == ["ccfraud_xgb:1", "ccfraud_xgb:2"]
    assert _json(_cli(store, "td", "show", "ccfraud_detection", "latest", "--json"))["version"] == 2
    refused = _cli(store, "td", "delete", "ccfraud_detection", "1")
    assert refused.exit_code == 2 and "ccfraud_xgb:1" in refused.output and "--force" in refused.output
    assert _cli(store, "td", "show", "ccfraud_detection", "1").exit_code == 0  # still there
    deleted = _cli(store, "td", "delete", "ccfraud_detection", "2")  # no model on it
    assert deleted.exit_code == 0, deleted.output
    assert [r["version"] for r in _json(_cli(store, "td", "list", "ccfraud_detection", "--json"))] == [1]


def test_registry_show_is_compact_unless_full(store):
    compact = _cli(store, "registry", "show", "ccfraud_xgb:1")
    full = _cli(store, "registry", "show", "ccfraud_xgb:1", "--full")
    assert compact.exit_code == 0 and full.exit_code == 0
    assert len(compact.output.splitlines()) < 20 < len(full.output.splitlines())
    assert "validation_roc_auc" in compact.output and "training dataset v1" in compact.output
    payload = _json(_cli(store, "registry", "show", "ccfraud_xgb:1", "--json"))
    assert payload["model"] == "xgboost" and payload["lineage"]["split"] == "time"
    assert "files" not in payload


def test_registry_diff_compares_type_hyperparameters_metrics_lineage(store):
    result = _cli(store, "registry", "diff", "ccfraud_xgb:1", "ccfraud_xgb:2")
    assert result.exit_code == 0, result.output
    assert "Model type:" in result.output and "xgboost → lightgbm" in result.output
    assert "Lineage: identical" in result.output  # same training dataset, honestly identical
    diff = _json(_cli(store, "registry", "diff", "ccfraud_xgb:1", "ccfraud_xgb:2", "--json"))
    assert diff["model"]["hyperparameters"] and "validation_roc_auc" in diff["model"]["metrics"]
    assert diff["scorecards"] is None  # neither validated yet


def test_model_delete_is_guarded(store, tmp_path):
    assert _cli(store, "train", "ccfraud", "-t", "1", "--param", "n_estimators=10").exit_code == 0
    ref = "ccfraud_xgb:3"
    needs_version = _cli(store, "registry", "delete", "ccfraud_xgb")
    assert needs_version.exit_code == 2 and "NAME:VERSION" in needs_version.output
    validated = _cli(store, "validate", ref, "--gate", "roc_auc >= 0.0", "--replace-gates")
    assert validated.exit_code == 4, validated.output  # passed under a policy deviation
    refused = _cli(store, "registry", "delete", ref)
    assert refused.exit_code == 2 and "--force" in refused.output
    assert _cli(store, "registry", "delete", ref, "--force").exit_code == 0
    assert _cli(store, "registry", "show", ref).exit_code == 2
