"""The server-side training-dataset job: run a view's query and write its splits as parquet.

On a cluster, ``create_train_validation_test_split`` from the Python engine starts a Spark job
that runs the view's query (point-in-time correct) and writes each split under the training
dataset's location. This job does the same with pandas over the Delta tables the SDK wrote:

* a join whose both sides have an event time is point-in-time (the right group's latest row
  at or before the left row's event time, per join key: ``pandas.merge_asof``); others are
  plain joins of the requested type on the keys the server rule decided;
* split bounds are epoch milliseconds, compared with the root group's event time as
  ``start <= t < end``; percentage splits shuffle with the recorded seed.

The view's model-dependent transformations are fitted on the train split and applied to every
split, and the statistics are computed and stored, as :mod:`sdk_server.td_statistics` says.

What this does **not** show: Spark's exact PIT semantics (ties, null event times), the
cluster's file layout beyond ``<location>/<split>/``, job queueing and failures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from deltalake import DeltaTable

from sdk_server.filters import mask
from sdk_server.hopsfs import local_path
from sdk_server.td_statistics import fit_and_transform, split_statistics
from sdk_server.views import ResolvedQuery


def _table(hopsfs: Path, group: dict[str, Any]) -> pd.DataFrame:
    return DeltaTable(str(local_path(hopsfs, group["location"]))).to_pandas()


def _event_time(group: dict[str, Any]) -> str | None:
    return group.get("eventTime") or None


def _frame(hopsfs: Path, query: ResolvedQuery, path: str) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """The query's rows with every group column as ``<path>.<col>``, and the output columns."""
    df = _table(hopsfs, query.group).add_prefix(f"{path}.")
    out = [(name, f"{path}.{name}") for name in query.features]
    left_time = _event_time(query.group)
    for i, join in enumerate(query.joins):
        right_path = f"{path}.{i}"
        right, right_out = _frame(hopsfs, join.query, right_path)
        left_keys = [f"{path}.{k}" for k in join.left_on]
        right_keys = [f"{right_path}.{k}" for k in join.right_on]
        right_time = _event_time(join.query.group)
        how = "inner" if join.join_type == "INNER" else "left"
        if left_time and right_time:
            lt, rt = f"{path}.{left_time}", f"{right_path}.{right_time}"
            df = pd.merge_asof(df.sort_values(lt, kind="stable"), right.sort_values(rt, kind="stable"),
                               left_on=lt, right_on=rt, left_by=left_keys, right_by=right_keys,
                               direction="backward")
            if how == "inner":
                df = df[df[right_keys[0]].notna()]
        else:
            df = df.merge(right, how=how, left_on=left_keys, right_on=right_keys)
        out += [(join.prefix + name, column) for name, column in right_out]
    return df, out


def qualified_name(group: dict[str, Any], feature: str) -> str:
    """``<project>_<group>_<version>_<feature>``: how the job writes a root key the query does
    not select (``hopsworks_common.util._generate_fully_qualified_feature_name``), so it never
    collides with a selected feature of the same name and the SDK's reader drops it."""
    project = str(group.get("featurestoreName") or "").removesuffix("_featurestore")
    return f"{project}_{group['name']}_{group['version']}_{feature}"


def run_query(hopsfs: Path, query: ResolvedQuery) -> tuple[pd.DataFrame, pd.Series | None]:
    """The view's rows (output column names) and the root event time in epoch ms (or None)."""
    df, out = _frame(hopsfs, query, "0")
    frame = pd.DataFrame({name: df[column].to_numpy() for name, column in out})
    if any((j.query.filter or None) for j in query.joins):
        raise ValueError("filters on a joined query are not evaluated by the fake server")
    root = query.group
    for key in [f["name"] for f in root["features"] if f.get("primary")] + [_event_time(root)]:
        if key and key not in query.features:  # written under the fully qualified name the
            frame[qualified_name(root, key)] = df[f"0.{key}"].to_numpy()  # SDK drops on read
    time = _event_time(root)
    millis = None
    if time:
        stamps = pd.Series(pd.to_datetime(df[f"0.{time}"].to_numpy(), utc=True))
        millis = stamps.dt.as_unit("ms").astype("int64")
    if query.filter:  # on the output columns (root features by their own names)
        keep = mask(frame, query.filter).to_numpy()
        frame, millis = frame[keep], None if millis is None else millis[keep]
        millis = None if millis is None else millis.reset_index(drop=True)
    return frame.reset_index(drop=True), millis


def split_rows(frame: pd.DataFrame, millis: pd.Series | None, td: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Each split's rows by the training dataset's split definitions."""
    splits = td.get("splits") or []
    if not splits:
        return {td["name"]: frame}
    if all(s.get("splitType") == "TIME_SERIES_SPLIT" for s in splits):
        if millis is None:
            raise ValueError("time-series split on a query whose root group has no event time")
        out = {}
        for split in splits:  # a missing bound is open (e.g. train without a start)
            keep = pd.Series(True, index=millis.index)
            if split.get("startTime") is not None:
                keep &= millis >= split["startTime"]
            if split.get("endTime") is not None:
                keep &= millis < split["endTime"]
            out[split["name"]] = frame[keep.to_numpy()]
        return out
    order = np.random.default_rng(td.get("seed")).permutation(len(frame))
    out, start = {}, 0
    for i, split in enumerate(splits):
        n = len(frame) - start if i == len(splits) - 1 else round(float(split["percentage"]) * len(frame))
        out[split["name"]] = frame.iloc[np.sort(order[start:start + n])]
        start += n
    return out


def materialize(hopsfs: Path, query: ResolvedQuery, td: dict[str, Any],
                view: dict[str, Any] | None = None) -> tuple[dict[str, int], dict[str, Any]]:
    """Write every split as ``<location>/<split>/part-00000.parquet``, transformed with the
    view's model-dependent transformations fitted on train; rows per split and the statistics
    the job stores (:mod:`sdk_server.td_statistics`)."""
    frame, millis = run_query(hopsfs, query)
    splits = split_rows(frame, millis, td)
    fit_on = "train" if "train" in splits else next(iter(splits))
    splits, for_transformation = fit_and_transform(view or {}, splits, fit_on)
    statistics = {"splits": split_statistics(splits), "transformation": for_transformation}
    rows = {}
    for name, part in splits.items():
        folder = local_path(hopsfs, td["location"]) / name
        folder.mkdir(parents=True, exist_ok=True)
        part.reset_index(drop=True).to_parquet(folder / "part-00000.parquet", index=False)
        rows[name] = len(part)
    return rows, statistics
