"""A training-dataset version's split files as one :class:`StreamSource`: the files, their units
(Parquet row groups, or row-aligned pieces of a csv or jsonl file) and the feature view's shaper,
and how one piece of them is read.

:func:`version_source` is the one route by which every trainer that reads a version's files
(Spark MLlib, the streamed torch loop, the Ray Data feeders of Ray Train, distributed
XGBoost/LightGBM) gets them: it checks once that the version can be read as files by that
:class:`FileReader`, and the view hands out the files verified against their recorded sha256.

A piece is ``(unit, offset in it, rows)``; reading one applies the view's selection and its
model-dependent transformations with the statistics fitted on the version's train split, exactly
as the in-memory read does. A source is picklable: Ray tasks read pieces of it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, overload

import pandas as pd

from fstrain.kernel.errors import ConfigError, IntegrityError, InvalidArgumentError

#: row-group size of the Parquet files written for frames handed to the Ray path
ROW_GROUP_ROWS = 16_384

Piece = tuple[int, int, int]  # (row group, offset in it, rows)


@dataclass(frozen=True)
class StreamSource:
    """The split files of one training run (picklable: Ray tasks read them too).

    ``shaper`` is the feature view's shaper (selection and model-dependent transformations
    with train-fitted statistics) handed out with a streamed read of a version; without one,
    a file's columns are ``features`` and the ``label`` column.

    A unit of a split (``group_rows[split][i]`` rows) is a row group of its Parquet file, or,
    for a split in ``texts`` (a csv or jsonl version), a row-aligned piece of the file's text
    (the index the view hands out with a streamed read: its bytes checked against the recorded
    sha256, every piece read checking that the file is still the one indexed).
    """

    files: dict[str, str]
    group_rows: dict[str, tuple[int, ...]]
    shaper: Any = None
    features: tuple[str, ...] = ()
    label: str = ""
    texts: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_files(cls, files: Mapping[str, str | Path], *, shaper: Any = None,
                   features: tuple[str, ...] = (), label: str = "") -> StreamSource:
        """A source over ``{split: path}``; row-group sizes come from the files' footers."""
        import pyarrow.parquet as pq

        groups = {}
        for split, path in files.items():
            meta = pq.ParquetFile(path).metadata
            groups[split] = tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
        return cls({s: str(p) for s, p in files.items()}, groups, shaper, tuple(features), label)

    @classmethod
    def from_text_pieces(cls, indexes: Mapping[str, Any], *, shaper: Any) -> StreamSource:
        """A source over ``{split: index}`` of a csv or jsonl version's row-aligned pieces
        (``text_pieces.TextIndex``es, as a streamed ``"torch"`` read hands them out); the rows
        of every piece are counted from its bytes first."""
        return cls({s: str(i.path) for s, i in indexes.items()},
                   {s: tuple(i.piece_rows()) for s, i in indexes.items()}, shaper,
                   texts=dict(indexes))

    @classmethod
    def from_frames(cls, directory: Path, splits: dict[str, tuple[pd.DataFrame, pd.DataFrame]],
                    ) -> StreamSource:
        """Write in-memory ``{split: (X, y)}`` frames once as Parquet under ``directory`` (the
        Ray path then reads files, not a pickled frame per worker)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from fstrain.trainers.data import label_series

        directory.mkdir(parents=True, exist_ok=True)
        files: dict[str, Path] = {}
        features: tuple[str, ...] = ()
        label = ""
        for split, (X, y) in splits.items():
            series = label_series(y, split=split)
            label, features = str(series.name), tuple(str(c) for c in X.columns)
            frame = X.reset_index(drop=True).assign(**{label: series.to_numpy()})
            path = directory / f"{split}.parquet"
            pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path,
                           row_group_size=ROW_GROUP_ROWS)
            files[split] = path
        return cls.from_files(files, features=features, label=label)

    def rows(self, split: str) -> int:
        """Rows of ``split``."""
        return int(sum(self.group_rows[split]))

    def read(self, split: str, piece: Piece) -> tuple[pd.DataFrame, pd.DataFrame]:
        """``(X, y)`` frames of one piece."""
        import pyarrow.parquet as pq

        group, offset, length = piece
        columns = (self.shaper.columns() if self.shaper is not None
                   else [*self.features, self.label])
        if split in self.texts:
            table = self.texts[split].read(group, columns)
            if table.num_rows != self.group_rows[split][group]:
                raise IntegrityError(
                    f"piece {group} of {self.files[split]} ({split} split) parsed to "
                    f"{table.num_rows} rows where its bytes hold {self.group_rows[split][group]}"
                    ": the file does not read as it was written; recreate the version.")
        else:
            table = pq.ParquetFile(self.files[split]).read_row_group(group, columns=columns)
        table = table.slice(offset, length)
        if self.shaper is not None:
            X, y = self.shaper.shape(table)
            if y is None:
                raise InvalidArgumentError("the feature view has no labels; a model needs one.")
            return X, y
        frame = table.to_pandas()
        return frame[list(self.features)], frame[[self.label]]


#: The formats of the versions whose files the trainers read (csv and jsonl in row-aligned pieces)
FILE_FORMATS = ("parquet", "csv", "jsonl")


@dataclass(frozen=True)
class FileReader:
    """A trainer that reads a version's split files through :func:`version_source`, as the
    route's refusals name it: who it is, the way out, and the formats it reads."""

    name: str
    instead: str
    formats: tuple[str, ...] = FILE_FORMATS


#: one process streams the train split (``torch.streaming: true``)
TORCH_STREAMING = FileReader("torch.streaming", "set torch.streaming: false")
#: the Ray Data feeders of Ray Train's torch workers (``--workers N`` with an ``mlp``)
RAY_TRAIN = FileReader("Ray Train workers (--workers)", "drop --workers")
#: data-parallel XGBoost/LightGBM on Ray Train (``--workers N``)
RAY_BOOSTING = FileReader("distributed boosting (--workers)", "drop --workers")
#: Spark MLlib reads the untransformed Parquet files itself
SPARK = FileReader("Spark MLlib", "train a non-Spark model", formats=("parquet",))


@overload
def version_source(fv: Any, version: int, *, reader: FileReader,
                   required: Literal[True] = True) -> StreamSource: ...


@overload
def version_source(fv: Any, version: int, *, reader: FileReader,
                   required: bool) -> StreamSource | None: ...


def version_source(fv: Any, version: int, *, reader: FileReader,
                   required: bool = True) -> StreamSource | None:
    """The one route to a training-dataset version's files for every trainer that reads them:
    its train and validation files as a :class:`StreamSource`, each checked against its recorded
    sha256 as the view hands it out (Parquet: the files and their row groups; csv or jsonl:
    row-aligned pieces of their text), with the view's shaper (feature selection and
    model-dependent transformations with train-fitted statistics).

    A version ``reader`` cannot read (no validation split of its own, not a materialized ``ok``
    version, another format, or a backend that hands out no split files) is refused by a
    :class:`ConfigError` naming the version and the way out, or gives None when not
    ``required`` (the caller reads frames instead).

    Raises:
        ConfigError: the version cannot be read as files (``required``).
        IntegrityError: a file is missing or its bytes changed since the version was created.
    """
    td = fv.get_training_dataset(version)
    problem = _unreadable(fv, td, version, reader)
    if problem is not None:
        if required:
            raise ConfigError(problem)
        return None
    if td.data_format != "parquet":  # the row-aligned pieces the view's torch read hands out
        parts = fv.get_train_validation_test_split(version, dataframe_type="torch")
        return StreamSource.from_text_pieces(
            {"train": parts[0].source, "validation": parts[1].source}, shaper=parts[0].shaper)
    parts = fv.get_train_validation_test_split(version, dataframe_type="arrow_batches")
    return StreamSource.from_files({"train": parts[0].path, "validation": parts[1].path},
                                   shaper=parts[0].shaper)


def _unreadable(fv: Any, td: Any, version: int, reader: FileReader) -> str | None:
    """Why ``reader`` cannot read the files of version ``td``, or None."""
    owner = f"training dataset v{version} of {fv.name} v{fv.version}"
    if "validation" not in tuple(td.splits):
        return (f"{owner} has splits {list(td.splits)}: {reader.name} reads the version's own "
                "validation split (a carved one exists only in memory). Create a train/"
                f"validation/test version (`fstrain dataset <use case>`) or {reader.instead}.")
    if td.type != "MATERIALIZED" or td.state != "ok":
        return (f"{reader.name} reads the files of a materialized version; {owner} is "
                f"{td.type.lower()} {td.data_format} ({td.state}). Create one with `fstrain "
                f"dataset <use case>` (or recreate_training_dataset({version}) if it was "
                f"purged) or {reader.instead}.")
    if td.data_format not in reader.formats:
        return (f"{reader.name} reads {', '.join(reader.formats)} files; {owner} is stored as "
                f"{td.data_format}. Create a version with `fstrain dataset <use case> "
                f"--data-format {reader.formats[0]}` or {reader.instead}.")
    if not fv.streams_split_files(version):  # e.g. Hopsworks: its files stay on the cluster
        return (f"{reader.name} reads a version's split files, and {fv.name} v{fv.version} "
                f"({type(fv).__name__}) hands out no split files of training dataset "
                f"v{version}; {reader.instead}.")
    return None
