"""A failed save leaves no version, no folder and no scratch files."""

from __future__ import annotations

import os

import pytest

from fstrain.kernel.errors import InvalidArgumentError, NotFoundError


def _assert_nothing_written(registry, name):
    assert registry.get_models(name) == []
    assert not (registry.root / name).exists()
    assert not list((registry.root / ".tmp").glob("*"))


def test_missing_path_leaves_no_version(registry, tmp_path, model_dir):
    with pytest.raises(InvalidArgumentError, match="model_path must be an existing file or folder"):
        registry.python.create_model("m").save(tmp_path / "does_not_exist")
    _assert_nothing_written(registry, "m")
    assert registry.python.create_model("m").save(model_dir).version == 1


def test_file_vanishing_mid_copy_leaves_no_version(registry, model_dir):
    # sorted last, so the other files are already copied when the copy fails
    os.symlink(model_dir / "gone.bin", model_dir / "zz_vanished.bin")
    with pytest.raises(NotFoundError, match="zz_vanished.bin' does not exist"):
        registry.python.create_model("m").save(model_dir)
    _assert_nothing_written(registry, "m")
    assert not list((registry.root / ".tmp").iterdir())
    (model_dir / "zz_vanished.bin").unlink()
    assert registry.python.create_model("m").save(model_dir).version == 1


def test_reserved_file_names_and_empty_folder_are_refused(registry, model_dir, tmp_path):
    (model_dir / "manifest.json").write_text("{}")
    with pytest.raises(InvalidArgumentError, match="registry writes these"):
        registry.python.create_model("m").save(model_dir)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidArgumentError, match="contains no files"):
        registry.python.create_model("m").save(tmp_path / "empty")
    _assert_nothing_written(registry, "m")


def test_leftover_folder_of_a_crashed_save_is_replaced(registry, model_dir):
    orphan = registry.root / "m" / "1"
    orphan.mkdir(parents=True)
    (orphan / "half_written.bin").write_bytes(b"partial")
    model = registry.python.create_model("m").save(model_dir)
    assert model.version == 1
    assert not (model.model_path / "half_written.bin").exists()
    model.verify()


def test_failed_explicit_version_keeps_existing_version_intact(registry, model_dir, tmp_path):
    first = registry.python.create_model("m", version=1).save(model_dir)
    other = tmp_path / "other"
    other.mkdir()
    (other / "weights.bin").write_bytes(b"different")
    with pytest.raises(Exception, match="already exists"):
        registry.python.create_model("m", version=1).save(other)
    assert (first.model_path / "weights.bin").read_bytes() == b"\x00\x01weights"
    first.verify()
