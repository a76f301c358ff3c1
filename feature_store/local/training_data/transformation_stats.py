"""The statistics a view's model-dependent transformations need, fitted on a train split.

In memory from the split's table, or from the written split file a batch at a time (``==``
statistics, in memory bounded by a batch plus the distinct values of encoded features; see
:mod:`feature_store.core.transformation_fit`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feature_store.local.training_data.training_data_stream import open_parquet

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

#: rows per batch when fitting transformations on a written train split
FIT_BATCH_ROWS = 1 << 16


def _inputs(transformations: Sequence[Any]) -> list[str]:
    return list(dict.fromkeys(c for tf in transformations for c in tf.inputs))


def fit_on_table(transformations: Sequence[Any], train: pa.Table) -> dict[str, Any]:
    """The statistics ``transformations`` need, fitted on ``train``."""
    if not transformations:
        return {}
    from feature_store.core.transformations import fit_transformations

    return fit_transformations(list(transformations),
                               train.select(_inputs(transformations)).to_pandas())


def fit_on_file(transformations: Sequence[Any], path: Path) -> dict[str, Any]:
    """:func:`fit_on_table` of the train split written at ``path`` (Parquet), read
    :data:`FIT_BATCH_ROWS` rows at a time."""
    if not transformations:
        return {}
    import pyarrow as pa

    from feature_store.core.transformation_fit import fit_transformations_streamed

    inputs = _inputs(transformations)
    schema = open_parquet(path).schema_arrow

    def batches() -> Iterator[pa.RecordBatch]:
        yield from open_parquet(path).iter_batches(batch_size=FIT_BATCH_ROWS, columns=inputs)

    return fit_transformations_streamed(
        list(transformations), pa.schema([schema.field(c) for c in inputs]), batches)
