"""The torch and Ray readers of a materialized training-dataset version's split files.

The feature store hands out plain things — a verified Parquet file, the row-aligned pieces of a
csv or jsonl file, and the view's shaper (selection and train-fitted transformations) — and
knows nothing of the frameworks that consume them. These adapters turn them into a
``torch.utils.data.IterableDataset`` (:mod:`~fstrain.trainers.readers.torch_split`) or a
``ray.data.Dataset`` (:mod:`~fstrain.trainers.readers.ray_split`). The composition root wires
this module into the embedded store, so ``fv.get_train_test_split(v, dataframe_type="torch")``
(or ``"ray"``) returns them; torch and Ray are imported only when one is built.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from fstrain.kernel.errors import FeatureStoreError

__all__ = ["ray_dataset", "ray_text_dataset", "torch_dataset", "torch_text_dataset"]


def import_optional(module: str, extra: str, package: str) -> Any:
    """Import an optional framework, or raise a :class:`FeatureStoreError` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise FeatureStoreError(
            f"this needs {package}, which is not installed. Install the '{extra}' extra "
            f"(pip install 'fstrain[{extra}]')."
        ) from exc


def torch_dataset(path: Path, shaper: Any, **options: Any) -> Any:
    """A :class:`~fstrain.trainers.readers.torch_split.ParquetSplitDataset` of one Parquet split
    file (imports torch)."""
    import_optional("torch", "frameworks", "torch")
    from fstrain.trainers.readers.torch_split import ParquetSplitDataset

    return ParquetSplitDataset(path, shaper, **options)


def torch_text_dataset(index: Any, shaper: Any, **options: Any) -> Any:
    """A :class:`~fstrain.trainers.readers.torch_split.TextSplitDataset` of one csv or jsonl
    split (``index``: its row-aligned pieces; imports torch)."""
    import_optional("torch", "frameworks", "torch")
    from fstrain.trainers.readers.torch_split import TextSplitDataset

    return TextSplitDataset(index, shaper, **options)


def ray_dataset(path: Path, shaper: Any, part: str) -> Any:
    """A Ray Dataset of one Parquet split's ``X`` or ``y`` (lazy: Ray reads and shapes in its
    workers; imports Ray)."""
    import_optional("ray.data", "scale", "ray")
    from fstrain.trainers.readers.ray_split import parquet_dataset

    return parquet_dataset(path, shaper, part)


def ray_text_dataset(index: Any, shaper: Any, part: str) -> Any:
    """A Ray Dataset of one csv or jsonl split's ``X`` or ``y``, read a piece per block in Ray's
    workers and shaped there (``index``: its row-aligned pieces; imports Ray)."""
    import_optional("ray.data", "scale", "ray")
    from fstrain.trainers.readers.ray_split import text_dataset

    return text_dataset(index, shaper, part)
