"""MNIST: which digit is in a 28×28 image?

Unstructured data: the ``mnist_images`` feature group indexes PNG files by path, with the label
and simple image metadata. The CNN trainer loads the images from ``image_path``.
"""

from __future__ import annotations

from typing import Any

from feature_views import UseCase

NAME = "mnist_digits"
VERSION = 1


def build(fs: Any) -> Any:
    """Get or create the ``mnist_digits`` feature view."""
    images = fs.get_feature_group("mnist_images", 1)
    query = images.select(["image_id", "ingested_at", "image_path", "label"])
    return fs.get_or_create_feature_view(
        NAME, VERSION, query, labels=["label"], description="MNIST digits from PNG paths.",
    )


USE_CASE = UseCase(
    name="mnist",
    description=__doc__.splitlines()[0],
    feature_view_name=NAME,
    feature_view_version=VERSION,
    build_feature_view=build,
    split={"split": "stratified", "validation_size": 0.1, "test_size": 0.2, "seed": 7},
    model={"model": "cnn", "torch": {"epochs": 4, "batch_size": 64, "lr": 0.003}},
    gates=("accuracy >= 0.9",),
    model_name="mnist_cnn",
    task="multiclass",
    demo={"model": {"torch": {"epochs": 3}}},
)
