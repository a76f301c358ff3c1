"""Names, versions, metrics, tags and attachment paths are validated; traversal is impossible."""

from __future__ import annotations

import pytest

from fstrain.kernel.errors import InvalidArgumentError, InvalidNameError


@pytest.mark.parametrize(
    "name", ["", "a-b", "a b", "../x", "a/b", "a.b", "ü", "x" * 129, 123, None]
)
def test_bad_model_names_are_refused(registry, name):
    with pytest.raises(InvalidNameError, match=r"\[A-Za-z0-9_\]\+"):
        registry.python.create_model(name)
    with pytest.raises(InvalidNameError):
        registry.get_models(name)


def test_good_model_names(registry, model_dir):
    for name in ("A", "fraud_XGB_2", "_"):
        assert registry.python.create_model(name).save(model_dir).model_path.name == "1"


@pytest.mark.parametrize("version", [0, -1, True, "1", 1.0])
def test_bad_versions_are_refused(registry, version):
    with pytest.raises(InvalidArgumentError, match="version must be a positive integer"):
        registry.python.create_model("m", version=version)
    with pytest.raises(InvalidArgumentError):
        registry.get_model("m", version)


@pytest.mark.parametrize(
    ("metrics", "match"),
    [
        ({"auc": "high"}, "metric 'auc' must be a number. Got 'high'"),
        ({"auc": float("nan")}, "metric 'auc' must be finite"),
        ({"auc": True}, "metric 'auc' must be a number"),
        ([("auc", 1.0)], "metrics must be a dict"),
        ({1: 0.5}, "metric names must be non-empty strings"),
    ],
)
def test_bad_metrics_are_refused(registry, metrics, match):
    with pytest.raises(InvalidArgumentError, match=match):
        registry.python.create_model("m", metrics=metrics)


@pytest.mark.parametrize(
    "path",
    [
        "../evil.txt",
        "../../evil.txt",
        "/tmp/evil.txt",
        "images/../../evil.txt",
        "images//x.png",
        "a\\..\\evil.txt",
        ".hidden",
        "",
        "./x",
        "a/b/c/d/e.txt",
    ],
)
def test_attachment_path_traversal_is_impossible(registry, model_dir, tmp_path, path):
    model = registry.python.create_model("m").save(model_dir)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(InvalidNameError, match="attachment path must be relative"):
        model.write_attachment(path, "x")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    model.verify()


@pytest.mark.parametrize("path", ["manifest.json", "input_example.json", "model_schema.json"])
def test_attachment_cannot_overwrite_registry_files(registry, model_dir, path):
    model = registry.python.create_model("m").save(model_dir)
    with pytest.raises(InvalidArgumentError, match="written by the registry itself"):
        model.write_attachment(path, "{}")
    model.verify()


@pytest.mark.parametrize("tag", ["../x", "a/b", "", ".x", "a b", 5])
def test_bad_tag_names_are_refused(registry, model_dir, tag):
    with pytest.raises(InvalidNameError, match="tag name must match"):
        registry.python.create_model("m", tags={tag: 1})
    model = registry.python.create_model("m").save(model_dir)
    with pytest.raises(InvalidNameError):
        model.add_tag(tag, 1)


def test_tag_values_must_be_json(registry, model_dir):
    model = registry.python.create_model("m").save(model_dir)
    with pytest.raises(InvalidArgumentError, match="JSON-serialisable"):
        model.add_tag("t", object())


def test_bad_validation_status_and_direction(registry, model_dir):
    model = registry.python.create_model("m", metrics={"auc": 0.5}).save(model_dir)
    with pytest.raises(InvalidArgumentError, match="one of pending, passed, failed. Got 'ok'"):
        model.set_validation_status("ok")
    assert registry.get_model("m", 1).validation_status == "pending"
    with pytest.raises(InvalidArgumentError, match="direction must be 'max' or 'min'"):
        registry.get_best_model("m", "auc", direction="up")


def test_bad_feature_view_and_td_version(registry):
    with pytest.raises(InvalidArgumentError, match="feature_view must be a feature view"):
        registry.python.create_model("m", feature_view="fv")
    with pytest.raises(InvalidArgumentError, match="training_dataset_version must be"):
        registry.python.create_model("m", training_dataset_version=0)
