"""The feature-logging methods of a local feature view, as the SDK names them (``log``,
``read_log``, ``pause_logging``...): the view's logging state and the calls into its
:class:`~feature_store.local.objects.feature_logging.FeatureLogger` (the buffer and the log
feature groups). Kept apart from :mod:`feature_store.local.objects.feature_view` so each module
has one job; :class:`~feature_store.local.objects.feature_view.FeatureView` inherits them.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from feature_store.local.objects.log_columns import merge_log_columns
from feature_store.local.objects.sdk_conventions import refuse_unsupported
from fstrain.kernel.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


class ViewLogging:
    """Feature logging of a feature view.

    The view provides ``_store``, ``owner``, ``require_saved()``, ``to_dict()``, its logging
    flags ``_logging`` and the versions it last scored with or accessed.
    """

    _store: Any
    _logging: dict[str, bool]
    #: ``[{"name", "type"}]`` of the extra log columns (:meth:`enable_logging`)
    _extra_log_columns: list[dict[str, str]]
    _batch_scoring_version: int | None
    _last_accessed_td: int | None

    @property
    def owner(self) -> str:  # pragma: no cover - provided by the view
        """How error messages name the view."""
        raise NotImplementedError

    def require_saved(self) -> int:  # pragma: no cover - provided by the view
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - provided by the view
        raise NotImplementedError

    @property
    def logging_enabled(self) -> bool:
        """Whether feature logging is enabled (``create_feature_view(logging_enabled=True)``,
        :meth:`enable_logging`, or the first :meth:`log`)."""
        return self._logging["enabled"]

    @property
    def extra_log_columns(self) -> list[dict[str, str]]:
        """The extra columns every logged row carries (``[{"name", "type"}]``)."""
        return [dict(c) for c in self._extra_log_columns]

    @property
    def logging_paused(self) -> bool:
        """Whether materialization of logged rows is paused (:meth:`pause_logging`)."""
        return self._logging["paused"]

    @cached_property
    def _logger(self) -> Any:
        # the logger's frames are pandas: loaded when a view first logs or reads its log
        from feature_store.local.objects.feature_logging import FeatureLogger

        return FeatureLogger(self)

    def _save_logging(self, **flags: bool) -> None:
        self._logging.update(flags)
        self._store.catalog.set_feature_view_spec(self.require_saved(), self.to_dict())

    def enable_logging(self, extra_log_columns: Any = None,
                       materialization_interval: str | None = None,
                       transport: str | None = None) -> None:
        """Enable feature logging (the log groups are created on the first materialization).

        ``extra_log_columns`` — the SDK's shapes: ``Feature`` objects or ``{"name", "type"}``
        dicts — adds columns every logged row carries (``None`` where a ``log()`` call gives no
        value; given values are cast to the declared type); duplicates are ignored, as the SDK.
        ``materialization_interval`` and ``transport`` schedule a cluster's log jobs and are
        refused: local logs are materialized at once (or when :meth:`materialize_log` runs).
        """
        for option, value in (("materialization_interval", materialization_interval),
                              ("transport", transport)):
            if value is not None:
                raise InvalidArgumentError(
                    f"{self.owner}: enable_logging({option}={value!r}) schedules a cluster's "
                    "logging jobs; the embedded store writes logs in-process at each log() "
                    f"(or materialize_log() after pause_logging()). Drop {option}=."
                )
        columns = merge_log_columns(self.owner, self._extra_log_columns, extra_log_columns)
        self._extra_log_columns = columns
        self._save_logging(enabled=True)

    def log(
        self, logging_data: Any = None, untransformed_features: Any = None,
        predictions: Any = None, transformed_features: Any = None,
        inference_helper_columns: Any = None, request_parameters: Any = None,
        event_time: Any = None, serving_keys: Any = None, extra_logging_features: Any = None,
        request_id: Any = None, write_options: dict[str, Any] | None = None,
        training_dataset_version: int | None = None, model: Any = None,
        model_name: str | None = None, model_version: int | None = None,
    ) -> None:
        """Log features and predictions (see :mod:`feature_store.local.objects.feature_logging`).

        Enables logging on first use (as Hopsworks, which warns). The training-dataset version
        recorded is ``training_dataset_version``, else the model's, else the one of
        :meth:`init_batch_scoring`, else the last accessed one.
        """
        if write_options:
            raise InvalidArgumentError(f"{self.owner}: log() takes no write_options locally.")
        untransformed_features = self._named_vectors(untransformed_features, transformed=False)
        transformed_features = self._named_vectors(transformed_features, transformed=True)
        if not self.logging_enabled:
            self._save_logging(enabled=True)
        serving = getattr(self, "_serving", None)  # as the SDK: the init_serving version next
        td_version = (training_dataset_version
                      or (serving.training_dataset_version if serving is not None else None)
                      or getattr(model, "training_dataset_version", None)
                      or self._batch_scoring_version or self._last_accessed_td)
        extra = [("inference_helper_columns", inference_helper_columns),
                 ("request_parameters", request_parameters), ("event_time", event_time),
                 ("serving_keys", serving_keys), ("extra_logging_features", extra_logging_features)]
        self._logger.log(logging_data, untransformed_features, predictions, transformed_features,
                         extra=extra, request_id=request_id, td_version=td_version, model=model,
                         model_name=model_name, model_version=model_version)

    def _named_vectors(self, value: Any, *, transformed: bool) -> Any:
        """Feature vectors given as lists, as frames named like the view's vectors (the view
        does this once it serves; see ``ViewServing``); anything else as given."""
        return value

    def pause_logging(self) -> None:
        """Keep logged rows buffered until :meth:`materialize_log` or :meth:`resume_logging`."""
        self._save_logging(paused=True)

    def resume_logging(self) -> None:
        """Materialize buffered rows and again materialize every later :meth:`log` at once."""
        self._save_logging(paused=False)
        self._logger.materialize()

    def materialize_log(self, wait: bool = False, transformed: bool | None = None) -> int:
        """Move buffered log rows into the log groups now; returns the number of rows moved
        (``wait`` has no effect locally: materialization is synchronous)."""
        return self._logger.materialize(transformed)

    def read_log(
        self, start_time: Any = None, end_time: Any = None, filter: Any = None,
        transformed: bool | None = False, training_dataset_version: int | None = None,
        model: Any = None, model_name: str | None = None, model_version: int | None = None,
        online: bool = False,
    ) -> pd.DataFrame:
        """Materialized log rows (untransformed, or ``transformed=True``), oldest first,
        optionally within ``[start_time, end_time)`` of ``log_time`` and for one training
        dataset version or model."""
        if online:
            raise InvalidArgumentError(
                f"{self.owner}: read_log(online=True) needs an online store; use online=False."
            )
        if model is not None:
            model_name, model_version = model.name, model.version
        return self._logger.read(transformed=bool(transformed), start_time=start_time,
                                 end_time=end_time, filter=filter,
                                 td_version=training_dataset_version, model_name=model_name,
                                 model_version=model_version)

    def get_log_timeline(self, wallclock_time: Any = None, limit: int | None = None,
                         transformed: bool | None = False) -> dict[int, dict[str, Any]]:
        """Commits of the log group (``commit_details`` of ``{view}_{version}_log``)."""
        fg = self._logger.group(bool(transformed))
        return {} if fg is None else fg.commit_details(wallclock_time=wallclock_time, limit=limit)

    def delete_log(self, transformed: bool | None = None, transport: str | None = None) -> None:
        """Delete the logs (both groups and the buffer) and disable logging."""
        if transformed is not None:
            raise InvalidArgumentError(
                f"{self.owner}: delete_log deletes both logs locally; call it without transformed=."
            )
        if transport is not None:
            raise InvalidArgumentError(
                f"{self.owner}: delete_log(transport={transport!r}) switches a cluster's logging "
                "transport; local logs have one. Drop transport=."
            )
        self._logger.delete()
        self._save_logging(enabled=False, paused=False)
