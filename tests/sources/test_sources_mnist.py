"""MNIST source: PNG files under image_dir, pixels, idempotency, broken links."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from fstrain.kernel.errors import InvalidArgumentError
from feature_views.mnist import source as mnist


def test_full_load_writes_all_images(tmp_path: Path, assert_follows_rules) -> None:
    frames = mnist.load(tmp_path / "images")
    assert_follows_rules(frames, mnist.FEATURE_GROUPS)
    frame = frames["mnist_images"]
    assert len(frame) == 5_000
    assert frame["label"].value_counts().tolist() == [500] * 10
    assert mnist.check_paths(frame) == []
    assert len(list((tmp_path / "images").glob("*.png"))) == 5_000


def test_pngs_decode_to_source_pixels(tmp_path: Path) -> None:
    frame = mnist.load(tmp_path, sample=200, seed=7)["mnist_images"]
    images, labels = mnist.source_images()
    assert len(frame) == 200
    for row in frame.itertuples():
        path = Path(row.image_path)
        assert path.is_absolute() and path.parent == tmp_path.resolve()
        with Image.open(path) as image:
            assert image.mode == "L" and image.size == (28, 28)
            pixels = np.asarray(image)
        np.testing.assert_array_equal(pixels, images[row.image_id])
        assert row.label == labels[row.image_id]
        assert row.mean_intensity == pytest.approx(pixels.mean())
        assert (row.width, row.height) == (28, 28)


def test_reload_is_idempotent_and_repairs_files(tmp_path: Path) -> None:
    first = mnist.load(tmp_path, sample=50)["mnist_images"]
    paths = [Path(p) for p in first["image_path"]]
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in paths}
    paths[0].write_bytes(b"corrupt")
    second = mnist.load(tmp_path, sample=50)["mnist_images"]
    pd.testing.assert_frame_equal(first, second)
    for p in paths:
        assert p.read_bytes() == before[p][0]
    assert all(p.stat().st_mtime_ns == before[p][1] for p in paths[1:])  # untouched files not rewritten


def test_check_paths_finds_moved_files(tmp_path: Path) -> None:
    frame = mnist.load(tmp_path, sample=10)["mnist_images"]
    moved = Path(frame["image_path"].iloc[3])
    moved.rename(moved.with_suffix(".moved"))
    assert mnist.check_paths(frame) == [str(moved)]
    with pytest.raises(InvalidArgumentError, match="image_path"):
        mnist.check_paths(frame.drop(columns="image_path"))


def test_window_on_ingested_at(tmp_path: Path) -> None:
    start = mnist.INGESTED_BASE + timedelta(minutes=10)
    end = mnist.INGESTED_BASE + timedelta(minutes=20)
    frame = mnist.load(tmp_path, start=start.to_pydatetime(), end=end.to_pydatetime())["mnist_images"]
    assert frame["image_id"].tolist() == list(range(10, 20))
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{i:05d}.png" for i in range(10, 20)]


def test_image_dir_must_be_a_folder(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(InvalidArgumentError, match="image_dir"):
        mnist.load(file)
