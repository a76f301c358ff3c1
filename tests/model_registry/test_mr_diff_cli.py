"""`fstrain registry diff` as a reviewer relies on it, on a copy of the session's adult store:
two unrelated models are refused, differing test splits are warned about and compared on the
rows both hold, and a change inside its paired bootstrap interval is not called better."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from fstrain.cli.app import app


def _cli(root, *args):
    return CliRunner().invoke(app, [*args, "--root", str(root)])


def _ok(result):
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def store(adult_store, tmp_path_factory):
    """The session's store plus: training dataset v2 (another seed) with model v2 on it,
    v3 on v1 with a slightly different learning rate, v4 on v1 a deliberately weak model, and
    an unrelated model registered from v1's files."""
    import feature_store

    root = tmp_path_factory.mktemp("diff") / "store"
    shutil.copytree(adult_store.root, root)
    _ok(_cli(root, "dataset", "adult", "--seed", "7"))
    name = adult_store.name
    for td, params in (("2", ["n_estimators=60"]),
                       ("1", ["n_estimators=60", "learning_rate=0.102"]),
                       ("1", ["n_estimators=2", "max_depth=1"])):
        _ok(_cli(root, "train", "adult", "-t", td, *[x for p in params for x in ("--param", p)]))
    project = feature_store.login(backend="local", root=root)
    registry = project.get_model_registry()
    files = tmp_path_factory.mktemp("v1") / "files"
    registry.get_model(name, 1).download(files)
    shutil.rmtree(files / "history")
    for own in ("manifest.json", "input_example.json", "model_schema.json"):
        (files / own).unlink()  # the registry writes these itself
    fv = project.get_feature_store().get_feature_view("adult_income", 1)
    registry.python.create_model("other_model", feature_view=fv,
                                 training_dataset_version=1).save(files)
    return root, name


def test_two_unrelated_models_are_refused_unless_forced(store):
    root, name = store
    refused = _cli(root, "registry", "diff", f"{name}:1", "other_model:1")
    assert refused.exit_code == 2
    assert len(refused.output.strip().splitlines()) == 1  # one line, no traceback
    assert "two different models" in refused.output and "--force" in refused.output
    forced = _ok(_cli(root, "registry", "diff", f"{name}:1", "other_model:1", "--force",
                      "--resamples", "50"))
    assert forced.output.startswith("WARNING: ") and "two different models" in forced.output


def test_differing_test_splits_are_warned_and_compared_on_shared_rows(store):
    import feature_store

    root, name = store
    text = _ok(_cli(root, "registry", "diff", f"{name}:1", f"{name}:2", "--resamples", "100"))
    first = text.output.splitlines()[0]
    assert first.startswith("WARNING: the test splits differ")
    assert "training dataset v1" in first and "training dataset v2" in first
    assert "  seed: 42 → 7\n" in text.output  # a seed is a name: no "(-35)"
    diff = json.loads(_ok(_cli(root, "registry", "diff", f"{name}:1", f"{name}:2",
                               "--resamples", "100", "--json")).output)["comparison"]
    assert diff["same_test_split"] is False
    assert diff["test_split_a"]["sha256"] != diff["test_split_b"]["sha256"]
    fv = feature_store.login(backend="local", root=root).get_feature_store().get_feature_view(
        "adult_income", 1)
    ids = [set(fv.get_train_validation_test_split(v, primary_key=True)[2]["person_id"])
           for v in (1, 2)]
    assert 0 < diff["rows"]["shared"] == len(ids[0] & ids[1]) < diff["rows"]["a"] == 600
    assert {m["metric"] for m in diff["metrics"]} == {"roc_auc", "pr_auc", "log_loss", "brier"}


def test_a_tiny_change_inside_its_interval_is_not_called_better(store):
    root, name = store
    result = _ok(_cli(root, "registry", "diff", f"{name}:1", f"{name}:3", "--resamples", "300",
                      "--json"))
    diff = json.loads(result.output)["comparison"]
    assert diff["same_test_split"] is True and diff["warnings"] == []
    assert diff["rows"]["shared"] == 600
    auc = next(m for m in diff["metrics"] if m["metric"] == "roc_auc")
    assert auc["delta"] != 0 and abs(auc["delta"]) < 0.01  # a point estimate would say which
    assert auc["lower"] < 0 < auc["upper"] and auc["verdict"] == "no clear difference"
    text = _ok(_cli(root, "registry", "diff", f"{name}:1", f"{name}:3", "--resamples", "300"))
    table = text.output.split("verdict for B", 1)[1]
    roc_line = next(line for line in table.splitlines() if line.strip().startswith("roc_auc"))
    assert roc_line.endswith("no clear difference") and "better" not in roc_line


def test_a_clearly_weaker_model_is_called_worse(store):
    root, name = store
    diff = json.loads(_ok(_cli(root, "registry", "diff", f"{name}:1", f"{name}:4",
                               "--resamples", "200", "--json")).output)["comparison"]
    auc = next(m for m in diff["metrics"] if m["metric"] == "roc_auc")
    assert auc["upper"] < 0 and auc["verdict"] == "worse"
