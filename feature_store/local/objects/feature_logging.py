"""Feature logging of local feature views (mirrors ``FeatureView.log``/``read_log`` of Hopsworks).

A view's logs live in two feature groups of the same store (Delta tables, as every group),
created on the first materialization: ``{view}_{version}_log`` for untransformed features and
``{view}_{version}_transformed_log`` for transformed ones. Each logged row carries the columns
given to :meth:`FeatureLogger.log`, one ``predicted_{label}`` column per label, and
``log_id`` (primary key), ``log_time`` (event time, UTC), ``td_version``, ``model_name``,
``model_version`` and ``request_id``.

As on a cluster, ``log()`` first *buffers* rows (here: Parquet files under
``<store>/logs/{view}_{version}/``) and materialization moves them into the log groups in one
commit per group. While logging runs, the local "schedule" materializes at once, so a
``read_log()`` right after ``log()`` sees the rows; after ``pause_logging()`` rows stay buffered
until ``materialize_log()`` or ``resume_logging()``.

Positional arguments follow the SDK 5 signature (``logging_data, untransformed_features,
predictions, ...``); the SDK 4 order the tutorials use, ``log(features, predictions)``, is
recognised when the second argument is one-dimensional (a prediction per row).
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from feature_store.local.objects.log_columns import LOG_COLUMN_TYPES, META_COLUMNS
from fstrain.kernel.errors import InvalidArgumentError
from fstrain.kernel.timeutil import utc_now

if TYPE_CHECKING:  # pragma: no cover
    from feature_store.local.objects.hosts import StoreHost

_KINDS = {False: "log", True: "transformed_log"}


def _frame(value: Any, what: str, owner: str) -> pd.DataFrame | None:
    """``value`` (DataFrame, list of dicts/lists, 2-D array) as a DataFrame with a 0..n-1 index."""
    if value is None:
        return None
    if isinstance(value, pd.DataFrame):
        return value.reset_index(drop=True)
    if isinstance(value, pd.Series):
        return value.to_frame().reset_index(drop=True)
    if isinstance(value, np.ndarray | list):
        return pd.DataFrame(value)
    raise InvalidArgumentError(
        f"{owner}: {what} must be a pandas DataFrame, a list or a numpy array. "
        f"Got {type(value).__name__} instead."
    )


def _one_dimensional(value: Any) -> bool:
    if isinstance(value, pd.Series):
        return True
    if isinstance(value, np.ndarray):
        return value.ndim == 1
    return isinstance(value, list) and bool(value) and not isinstance(value[0], list | dict)


class FeatureLogger:
    """Logs of one feature view: buffer, materialize, read, pause/resume, delete."""

    def __init__(self, fv: Any) -> None:
        """The logs of ``fv``, a feature view (its name, version, owner, labels, logging state
        and store are read)."""
        self.fv = fv
        self._store: StoreHost = fv.feature_store
        self.buffer = Path(self._store.root) / "logs" / f"{fv.name}_{fv.version}"

    # -- names and groups --------------------------------------------------------------------

    def group_name(self, transformed: bool) -> str:
        """Name of the log feature group (``{view}_{version}_log`` / ``..._transformed_log``)."""
        return f"{self.fv.name}_{self.fv.version}_{_KINDS[bool(transformed)]}"

    def group(self, transformed: bool) -> Any:
        """The log feature group, or ``None`` before its first materialization."""
        name = self.group_name(transformed)
        if self._store.catalog.feature_group_row(name, 1) is None:
            return None
        return self._store.get_feature_group(name, 1)

    # -- logging -----------------------------------------------------------------------------

    def log(
        self, logging_data: Any = None, untransformed_features: Any = None,
        predictions: Any = None, transformed_features: Any = None, *,
        extra: list[tuple[str, Any]], request_id: Any = None,
        td_version: int | None = None, model: Any = None, model_name: str | None = None,
        model_version: int | None = None,
    ) -> None:
        """Buffer one batch of log rows (see the module docstring for the argument rules)."""
        owner = self.fv.owner
        if predictions is None and logging_data is not None and _one_dimensional(untransformed_features):
            predictions, untransformed_features = untransformed_features, None  # SDK 4 order
        untransformed = _frame(untransformed_features, "untransformed_features", owner)
        data = _frame(logging_data, "logging_data", owner)
        if untransformed is None:
            untransformed = data
        elif data is not None:
            untransformed = pd.concat([data, untransformed], axis=1)
        transformed = _frame(transformed_features, "transformed_features", owner)
        if untransformed is None and transformed is None:
            raise InvalidArgumentError(
                f"{owner}: log() needs features: pass logging_data, untransformed_features or "
                "transformed_features."
            )
        for what, value in extra:
            part = _frame(value, what, owner)
            if part is not None:
                base = untransformed if untransformed is not None else pd.DataFrame(index=part.index)
                untransformed = pd.concat([base, part], axis=1)
        untransformed, transformed = (self._with_extra_columns(f) for f in (untransformed, transformed))
        rows = untransformed if untransformed is not None else transformed
        assert rows is not None  # refused above when both are missing
        n = len(rows)
        preds = self._predictions(predictions, n)
        if model is not None:
            model_name = getattr(model, "name", model_name)
            model_version = getattr(model, "version", model_version)
            if td_version is None:
                td_version = getattr(model, "training_dataset_version", None)
        batch = f"{utc_now().value:020d}-{uuid.uuid4().hex[:8]}"
        meta = pd.DataFrame({
            "log_id": [f"{batch}-{i:09d}" for i in range(n)],  # sorts in logging order
            "log_time": pd.Series([utc_now()] * n, dtype="datetime64[us, UTC]"),
            "td_version": pd.Series([td_version] * n, dtype="Int64"),
            "model_name": pd.Series([model_name] * n, dtype="string"),
            "model_version": pd.Series([model_version] * n, dtype="Int64"),
            "request_id": pd.Series(self._request_ids(request_id, n), dtype="string"),
        })
        for transformed_kind, frame in ((False, untransformed), (True, transformed)):
            if frame is None:
                continue
            if len(frame) != n:
                raise InvalidArgumentError(
                    f"{owner}: every logged frame must have the same number of rows. Got {n} "
                    f"and {len(frame)} instead."
                )
            clash = sorted(set(frame.columns) & (set(META_COLUMNS) | set(preds.columns)))
            if clash:
                raise InvalidArgumentError(
                    f"{owner}: logged features must not be named {clash} (reserved log columns)."
                )
            self._buffer(transformed_kind, pd.concat([frame, preds, meta], axis=1))
        if not self.fv.logging_paused:
            self.materialize()

    def _with_extra_columns(self, frame: pd.DataFrame | None) -> pd.DataFrame | None:
        """``frame`` with every extra log column of the view (``enable_logging``), typed as
        declared: a value given is cast (refused naming the column if it cannot be), a column
        not given is missing values."""
        if frame is None or not self.fv.extra_log_columns:
            return frame
        frame = frame.copy()
        for column in self.fv.extra_log_columns:
            name, dtype = column["name"], LOG_COLUMN_TYPES[column["type"]]
            values = frame[name] if name in frame.columns else pd.Series([None] * len(frame))
            try:
                if dtype.startswith("datetime"):
                    frame[name] = pd.to_datetime(values, utc=True).astype(dtype)
                else:
                    frame[name] = values.astype(dtype)
            except (TypeError, ValueError) as exc:
                raise InvalidArgumentError(
                    f"{self.fv.owner}: extra log column '{name}' is {column['type']}; its logged "
                    f"values {values.head(3).tolist()} are not ({exc})."
                ) from exc
        return frame

    def _predictions(self, predictions: Any, n: int) -> pd.DataFrame:
        labels = self.fv.labels or ["label"]
        if predictions is None:
            return pd.DataFrame(index=range(n))
        if isinstance(predictions, pd.DataFrame):
            frame = predictions.reset_index(drop=True)
            frame.columns = [c if str(c).startswith("predicted_") else f"predicted_{c}"
                             for c in frame.columns]
        else:
            values = np.asarray(predictions)
            values = values.reshape(-1, 1) if values.ndim == 1 else values
            if values.ndim != 2 or values.shape[1] != len(labels):
                raise InvalidArgumentError(
                    f"{self.fv.owner}: predictions must have one column per label {labels}. "
                    f"Got shape {values.shape} instead."
                )
            frame = pd.DataFrame(values, columns=[f"predicted_{label}" for label in labels])
        if len(frame) != n:
            raise InvalidArgumentError(
                f"{self.fv.owner}: predictions must have one row per logged row ({n}). Got "
                f"{len(frame)} instead."
            )
        return frame

    @staticmethod
    def _request_ids(request_id: Any, n: int) -> list[Any]:
        if request_id is None or isinstance(request_id, str):
            return [request_id] * n
        ids = list(request_id)
        if len(ids) != n:
            raise InvalidArgumentError(
                f"request_id must be one string or one per logged row ({n}). Got {len(ids)} instead."
            )
        return ids

    def _buffer(self, transformed: bool, frame: pd.DataFrame) -> None:
        folder = self.buffer / _KINDS[transformed]
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{utc_now().value:020d}-{uuid.uuid4().hex}.parquet"
        tmp = folder / f".{name}.tmp"
        frame.to_parquet(tmp, index=False)
        tmp.rename(folder / name)  # atomic: a half-written batch is never materialized

    # -- materialization ---------------------------------------------------------------------

    def pending(self, transformed: bool) -> list[Path]:
        """Buffered batch files not yet materialized, oldest first."""
        folder = self.buffer / _KINDS[transformed]
        return sorted(folder.glob("*.parquet")) if folder.exists() else []

    def materialize(self, transformed: bool | None = None) -> int:
        """Move buffered rows into the log groups (one commit per group). Returns the rows."""
        total = 0
        for kind in ((False, True) if transformed is None else (bool(transformed),)):
            files = self.pending(kind)
            if not files:
                continue
            frame = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
            fg = self._store.get_or_create_feature_group(
                self.group_name(kind), version=1, primary_key=["log_id"], event_time="log_time",
                description=f"Feature log of {self.fv.owner}"
                            f"{' (transformed)' if kind else ''}.",
                statistics_config=False,
            )
            fg.insert(frame)
            for f in files:
                f.unlink()
            total += len(frame)
        return total

    def read(self, *, transformed: bool, start_time: Any, end_time: Any, filter: Any,
             td_version: int | None, model_name: str | None,
             model_version: int | None) -> pd.DataFrame:
        """Materialized log rows in ``[start_time, end_time)`` of ``log_time``, in log order."""
        fg = self.group(transformed)
        if fg is None:
            return pd.DataFrame(columns=META_COLUMNS)
        query = fg.select_all()
        if filter is not None:
            query = query.filter(filter)
        frame = query.read(start_time=start_time, end_time=end_time)
        for col, value in (("td_version", td_version), ("model_name", model_name),
                           ("model_version", model_version)):
            if value is not None:
                frame = frame[frame[col] == value]
        return frame.sort_values("log_id", kind="mergesort").reset_index(drop=True)

    def delete(self) -> None:
        """Drop both log groups and the buffer."""
        for kind in (False, True):
            fg = self.group(kind)
            if fg is not None:
                fg.delete()
        shutil.rmtree(self.buffer, ignore_errors=True)
