"""Registry file safety: symlinks out of the model folder, leftovers of killed saves."""

from __future__ import annotations

import os

import pytest

from fstrain.kernel.errors import InvalidArgumentError


@pytest.fixture
def registry(project):
    return project.get_model_registry()


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _save(registry, path, name="m"):
    model = registry.python.create_model(name, metrics={"acc": 0.5})
    return model.save(str(path))


@pytest.mark.parametrize("target", ["/etc/hostname", "../secret.txt"])
def test_symlink_out_of_the_model_folder_is_refused(tmp_path, registry, target):
    (tmp_path / "secret.txt").write_text("secret")
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"w")
    os.symlink(target, folder / "link.txt")
    before = _files(registry.root) if registry.root.exists() else []
    with pytest.raises(InvalidArgumentError, match=r"link\.txt.*outside the model folder"):
        _save(registry, folder)
    after = [f for f in (_files(registry.root) if registry.root.exists() else []) if not f.startswith(".tmp")]
    assert after == [f for f in before if not f.startswith(".tmp")]


def test_symlink_inside_the_model_folder_is_copied(tmp_path, registry):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"w")
    os.symlink("weights.bin", folder / "alias.bin")
    saved = _save(registry, folder)
    assert saved.version == 1


def test_leftovers_of_killed_saves_are_removed_by_the_next_save(tmp_path, registry):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"w")
    _save(registry, folder)
    tmp = registry.root / ".tmp"
    tmp.mkdir(exist_ok=True)
    dead = tmp / "stage-999999999-abc"
    dead.mkdir()
    (dead / "weights.bin").write_bytes(b"partial")
    (tmp / "attachment-999999999-def").write_bytes(b"partial")
    legacy = tmp / "trash-0123abcd"
    legacy.mkdir()
    os.utime(legacy, (0, 0))
    _save(registry, folder)
    assert not dead.exists() and not legacy.exists()
    assert not (tmp / "attachment-999999999-def").exists()


@pytest.mark.parametrize("content", [b"garbage" * 300, b"SQLite format 3\x00" + b"\xff" * 300])
def test_damaged_registry_index_is_a_backend_error_naming_it(tmp_path, content):
    import feature_store
    from fstrain.kernel.errors import BackendError

    root = tmp_path / "store"
    registry = feature_store.login(root=root).get_model_registry()
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "w.bin").write_bytes(b"w")
    _save(registry, folder)
    index = registry.root / "index.sqlite"
    for suffix in ("-wal", "-shm"):
        (index.parent / (index.name + suffix)).unlink(missing_ok=True)
    index.write_bytes(content)
    with pytest.raises(BackendError, match=r"index .*index\.sqlite is damaged"):
        feature_store.login(root=root).get_model_registry().list_models()
