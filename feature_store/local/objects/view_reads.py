"""How a local feature view reads: the split specification from its roles, the streaming forms
of a materialized version's splits, the rows of its query over a batch window, and the read and
write options it understands or refuses. Functions of values (the view passes what they need),
so :mod:`feature_store.local.objects.feature_view` keeps the SDK's methods and their checks."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from feature_store.local.query.query_plan import plan
from feature_store.local.readers.split_files import stored_format
from feature_store.local.readers.split_stream import SplitBatches
from feature_store.local.readers.text_split_reader import TextSplitBatches
from feature_store.local.storage.options import check_options
from fstrain.kernel.errors import InvalidArgumentError, did_you_mean

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from feature_store.api import TrainingDataset
    from feature_store.local.query.query_spec import QuerySpec
    from feature_store.local.readers.split_stream import SplitShaper
    from feature_store.local.training_data.store import TrainingDataStore


def split_spec(owner: str, labels: list[str], columns: set[str], three_way: bool | None,
               seed: int, split: str | None, **kwargs: Any) -> Any:
    """The split specification of a create call (``None`` for an unsplit version): a stratified
    split defaults to the first label; group and stratify columns must be view ``columns``."""
    if three_way is None:
        return None
    from feature_store.core.splits import make_split_spec

    label = labels[0] if labels else None
    group = kwargs.pop("group_column", None)
    stratify = kwargs.pop("stratify_column", None)
    if split == "stratified" and stratify is None:
        stratify = label
        if stratify is None:
            raise InvalidArgumentError(
                f"{owner}: split='stratified' needs a label or stratify_column=."
            )
    for role, col in (("group_column", group), ("stratify_column", stratify)):
        if col is not None and col not in columns:
            raise InvalidArgumentError(
                f"{owner}: {role} '{col}' is not a column of the view (columns: "
                f"{sorted(columns)}).{did_you_mean(col, columns)}"
            )
    return make_split_spec(
        split, seed=seed, three_way=three_way, group_column=group, stratify_column=stratify,
        **kwargs,
    )


def stream_splits(store: TrainingDataStore, td: TrainingDataset, shaper: SplitShaper,
                  dataframe_type: str, split_readers: Callable[[], Any], *,
                  labels: bool) -> tuple[Any, ...]:
    """Streaming forms of a materialized version's splits (see ``split_stream``): record
    batches here, torch and Ray datasets from the plain files or pieces through the trainers'
    readers the composition root wired in (``split_readers()``); ``X`` parts, then ``y`` parts
    (``None`` without ``labels``)."""
    text = td.data_format != "parquet"  # csv, jsonl
    make: Any
    if text and dataframe_type in ("ray", "torch"):  # row-aligned pieces, indexed as verified
        sources: dict[str, Any] = store.text_pieces(td.version)
        readers = split_readers()
        if dataframe_type == "torch":
            return tuple(readers.torch_text_dataset(sources[n], shaper) for n in td.splits)
        make = readers.ray_text_dataset
    else:
        sources = store.verified_files(td.version, text=True)
        if dataframe_type == "torch":
            readers = split_readers()
            return tuple(readers.torch_dataset(sources[n], shaper) for n in td.splits)
        make = split_readers().ray_dataset if dataframe_type == "ray" else SplitBatches
        if text:  # arrow_batches: parsed a block at a time
            make = partial(TextSplitBatches, data_format=stored_format(td),
                           schema=store.arrow_schema(td))
    xs = [make(sources[n], shaper, "X") for n in td.splits]
    ys = [make(sources[n], shaper, "y") if labels else None for n in td.splits]
    return tuple(xs + ys)


def read_window(query: QuerySpec, start_time: Any, end_time: Any) -> tuple[pd.DataFrame, dict[str, str]]:
    """The rows of the frozen ``query`` over the window, with the root primary key and event
    time carried even when the query does not select them (as the training-data calls do).
    Returns the frame and a map root column -> output name."""
    # the compiler and the engine load pyarrow and duckdb: only when a window is read
    from feature_store.local.query.pit import compile_query
    from feature_store.local.storage import engine
    from feature_store.local.training_data.store import ROOT_PREFIX

    spec = query.resolved()
    output = {c.name for c in plan(spec).columns}
    selected = set(spec.features)
    root_columns: dict[str, str] = {}
    extra: list[tuple[str, str]] = []
    for col in spec.group.upsert_key:
        if col in selected:
            root_columns[col] = col
        else:
            root_columns[col] = f"{ROOT_PREFIX}{col}" if col in output else col
            extra.append((col, root_columns[col]))
    compiled = compile_query(spec, start_time=start_time, end_time=end_time,
                             order_by_root_key=True, extra_columns=extra)
    con = engine.connect()
    try:
        frame = compiled.fetch(con).to_pandas()
    finally:
        con.close()
    return frame, root_columns


def verify_requested(owner: str, read_options: dict[str, Any] | None) -> bool:
    """Whether ``read_options`` ask to re-hash every value (``{"verify": True}``); any other
    option is refused by name."""
    understood = {"verify": "re-hash every value of the version (reads always check its files)"}
    return bool(check_options(owner, "read_options", read_options, understood).get("verify"))


def refuse_destination(storage_connector: Any, location: str, call: str) -> None:
    """Materialized versions live under the store root; another destination is refused, not
    silently ignored."""
    if storage_connector is not None or location:
        given = "storage_connector" if storage_connector is not None else "location"
        raise InvalidArgumentError(
            f"{call}(): {given}= is not supported by the local backend (training datasets are "
            "written under the store root, and read back by version). Drop the argument."
        )


def relative_windows(**kwargs: Any) -> dict[str, Any]:
    """The relative-window arguments that were given (so older specs stay unchanged)."""
    return {k: v for k, v in kwargs.items() if v not in (None, "")}
