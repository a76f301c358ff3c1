"""Online serving of a local feature view, as the SDK names it: ``init_serving``,
``get_feature_vector``, ``get_feature_vectors`` and ``transform``.

A vector holds the view's features that are not labels or helper columns (primary keys and
event time included, as the SDK's do), read from the latest committed row per primary key of
each online-enabled feature group (:mod:`feature_store.local.query.serving`), with the view's
model-dependent transformations applied (``transform=True``) using the statistics of the
training-dataset version :meth:`ViewServing.init_serving` was given (default 1, with the SDK's
warning). Kept apart from :mod:`feature_store.local.objects.feature_view`, which inherits it.

A key with no row in any group gives ``None`` from ``get_feature_vector`` (a row of missing
values for ``return_type="pandas"``) and no vector from ``get_feature_vectors``, as the SDK;
a key found in some groups but not others is an error unless ``allow_missing=True``. Options
that choose the cluster's online-store clients (``external``, ``force_rest_client``,
``timeout``...) and the on-demand features a local view cannot have are refused by name when
set.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from feature_store.local.objects.sdk_conventions import refuse_unsupported
from feature_store.local.query.serving import lookup, serving_keys
from fstrain.kernel.errors import InvalidArgumentError, NotFoundError, did_you_mean

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from feature_store.feature import Feature

RETURN_TYPES = ("list", "numpy", "pandas", "polars")
#: the return types of inference helper columns (the SDK's)
HELPER_RETURN_TYPES = ("pandas", "polars", "dict")

#: what each refused option chooses on a cluster, for the message that refuses it
_CLUSTER_ONLY = {
    "external": "the online store's host", "options": "the online store's SQL engine",
    "init_sql_client": "the online store's SQL client",
    "init_rest_client": "the online store's REST client",
    "reset_rest_client": "the online store's REST client",
    "config_rest_client": "the online store's REST client",
    "default_client": "the online store's client", "force_rest_client": "the REST client",
    "force_sql_client": "the SQL client", "timeout": "a deadline for the network read",
    "feature_logger": "a deployment's feature logger (log() writes the view's log locally)",
    "n_processes": "transformation worker processes",
    "request_parameters": "inputs of on-demand transformations, which local views have not",
    "transformation_context": "a context for transformation functions, which local ones "
                              "do not take",
    "logging_data": "logging metadata on the vector (pass the vector to log() instead)",
}


@dataclass(frozen=True)
class _Serving:
    """What init_serving fixed: the training-dataset version and its transformation statistics."""

    training_dataset_version: int
    statistics: dict[str, Any]


def _refuse_cluster_options(owner: str, call: str, **options: Any) -> None:
    """Refuse, by name, each cluster-only option set to anything but its default."""
    for name, value in options.items():
        if value is not None and value is not False and not (name == "n_processes" and value == 1):
            raise InvalidArgumentError(
                f"{owner}: {call}({name}={value!r}) sets {_CLUSTER_ONLY[name]}; the embedded "
                f"store serves vectors in-process from its Delta tables. Drop {name}=."
            )


def _resolve_serving_keys(owner: str, serving_keys: Any, entry: Any, call: str) -> Any:
    """``entry`` is the SDK's deprecated alias of ``serving_keys``: warned, and refused with it."""
    if entry is None:
        return serving_keys
    if serving_keys is not None:
        raise InvalidArgumentError(
            f"{owner}: {call}() received both serving_keys and entry, which name the same "
            "argument. Pass only serving_keys; entry is deprecated."
        )
    warnings.warn(f"`entry` is deprecated in {call}(); use `serving_keys`, it takes the same "
                  "value.", DeprecationWarning, stacklevel=3)
    return entry


class ViewServing:
    """Feature vectors of a feature view (see the module docstring).

    The view provides ``owner``, ``labels``, the helper columns, ``transformation_functions``,
    ``query``, ``_output_features``, ``_td``, ``_transform`` and ``_check_read_guarantees``.
    """

    _serving: _Serving | None = None
    _batch_scoring_version: int | None
    labels: list[str]
    training_helper_columns: list[str]
    inference_helper_columns: list[str]
    transformation_functions: list[Any]

    @property
    def owner(self) -> str:  # pragma: no cover - provided by the view
        raise NotImplementedError

    @property
    def query(self) -> Any:  # pragma: no cover - provided by the view
        raise NotImplementedError

    @property
    def _output_features(self) -> list[Feature]:  # pragma: no cover - provided by the view
        raise NotImplementedError

    @property
    def _td(self) -> Any:  # pragma: no cover - provided by the view
        raise NotImplementedError

    def _transform(self, frame: pd.DataFrame, stats: dict[str, Any]) -> pd.DataFrame:  # pragma: no cover
        raise NotImplementedError

    def _check_read_guarantees(self) -> None:  # pragma: no cover - provided by the view
        raise NotImplementedError

    def require_saved(self) -> int:  # pragma: no cover - provided by the view
        raise NotImplementedError

    # -- init ----------------------------------------------------------------------------------

    def init_serving(
        self, training_dataset_version: int | None = None, external: bool | None = None,
        options: dict[str, Any] | None = None, init_sql_client: bool | None = None,
        init_rest_client: bool = False, reset_rest_client: bool = False,
        config_rest_client: dict[str, Any] | None = None, default_client: str | None = None,
        feature_logger: Any = None, n_processes: int | None = None, **kwargs: Any,
    ) -> None:
        """Serve vectors with ``training_dataset_version``'s transformation statistics (``None``:
        version 1, with the SDK's warning); also what ``get_batch_data`` then uses. Every
        feature group of the view must be online-enabled."""
        refuse_unsupported(kwargs, "init_serving")
        _refuse_cluster_options(
            self.owner, "init_serving", external=external, options=options,
            init_sql_client=init_sql_client, init_rest_client=init_rest_client,
            reset_rest_client=reset_rest_client, config_rest_client=config_rest_client,
            default_client=default_client, feature_logger=feature_logger, n_processes=n_processes)
        self.require_saved()
        self._check_read_guarantees()
        offline = [f"'{fg.name}' v{fg.version}" for fg in self.query.feature_groups()
                   if not getattr(fg, "online_enabled", False)]
        if offline:
            raise InvalidArgumentError(
                f"{self.owner}: feature vectors are served from online-enabled feature groups, "
                f"and {', '.join(offline)} {'is' if len(offline) == 1 else 'are'} not. Create "
                "the group with online_enabled=True, or read get_batch_data()."
            )
        explicit = training_dataset_version is not None
        if training_dataset_version is None:
            warnings.warn("No training dataset version was provided to initialise serving. "
                          "Defaulting to version 1.", UserWarning, stacklevel=2)
        version = 1 if training_dataset_version is None else int(training_dataset_version)
        stats = (self._td.get(version).transformation_statistics
                 if self.transformation_functions else {})
        if explicit:  # as the SDK, init_serving also initialises batch scoring
            self._batch_scoring_version = version
        self._serving = _Serving(version, stats)

    def _serving_state(self) -> _Serving:
        if self._serving is None:
            self.init_serving()  # as the SDK does on a first vector without init_serving
        assert self._serving is not None
        return self._serving

    # -- vectors -------------------------------------------------------------------------------

    @property
    def _vector_columns(self) -> list[str]:
        """Untransformed vector columns: the view's features but labels and helper columns."""
        skip = set(self.labels) | set(self.training_helper_columns) | set(self.inference_helper_columns)
        return [f.name for f in self._output_features if f.name not in skip]

    def get_feature_vector(
        self, serving_keys: dict[str, Any] | None = None,
        passed_features: dict[str, Any] | None = None, external: bool | None = None,
        return_type: str = "list", allow_missing: bool = False,
        force_rest_client: bool = False, force_sql_client: bool = False,
        transform: bool | None = True, on_demand_features: bool | None = True,
        request_parameters: dict[str, Any] | None = None,
        transformation_context: dict[str, Any] | None = None, logging_data: bool = False,
        n_processes: int | None = None, timeout: float | None = None,
        entry: dict[str, Any] | None = None,
    ) -> Any:
        """The vector of one key (``{"pk": value}``) from the latest committed rows; ``None``
        when no group has a row for it. ``on_demand_features`` changes nothing: local views
        have no on-demand features."""
        keys = _resolve_serving_keys(self.owner, serving_keys, entry, "get_feature_vector")
        self._check_call(return_type, external=external, force_rest_client=force_rest_client,
                         force_sql_client=force_sql_client, request_parameters=request_parameters,
                         transformation_context=transformation_context,
                         logging_data=logging_data, n_processes=n_processes, timeout=timeout)
        passed = [passed_features] if passed_features else None
        columns, vectors = self._vectors([keys], passed, allow_missing, bool(transform))
        return _single(vectors[0], columns, return_type)

    def get_feature_vectors(
        self, serving_keys: list[dict[str, Any]] | None = None,
        passed_features: list[dict[str, Any]] | None = None, external: bool | None = None,
        return_type: str = "list", allow_missing: bool = False,
        force_rest_client: bool = False, force_sql_client: bool = False,
        transform: bool | None = True, on_demand_features: bool | None = True,
        request_parameters: list[dict[str, Any]] | None = None,
        transformation_context: dict[str, Any] | None = None, logging_data: bool = False,
        n_processes: int | None = None, timeout: float | None = None,
        entry: list[dict[str, Any]] | None = None,
    ) -> Any:
        """The vectors of several keys, in their order; a key with no row in any group gives no
        vector (as the SDK)."""
        keys = _resolve_serving_keys(self.owner, serving_keys, entry, "get_feature_vectors")
        self._check_call(return_type, external=external, force_rest_client=force_rest_client,
                         force_sql_client=force_sql_client, request_parameters=request_parameters,
                         transformation_context=transformation_context,
                         logging_data=logging_data, n_processes=n_processes, timeout=timeout)
        if not isinstance(keys, list | tuple):
            raise InvalidArgumentError(
                f"{self.owner}: get_feature_vectors() takes a list of serving-key dicts. Got "
                f"{type(keys).__name__} instead."
            )
        if passed_features and len(passed_features) != len(keys):
            raise InvalidArgumentError(
                f"{self.owner}: passed_features must have one dict per serving key "
                f"({len(keys)}). Got {len(passed_features)} instead."
            )
        columns, vectors = self._vectors(list(keys), passed_features or None, allow_missing,
                                         bool(transform))
        return _batch([v for v in vectors if v is not None], columns, return_type)

    # -- inference helper columns -------------------------------------------------------------

    def get_inference_helper(
        self, entry: dict[str, Any], external: bool | None = None,
        return_type: str = "pandas", force_rest_client: bool = False,
        force_sql_client: bool = False,
    ) -> Any:
        """The view's inference helper columns for one serving-key dict, from the latest
        committed rows (as vectors are served): a one-row frame (``"pandas"``, ``"polars"``)
        or a dict (``"dict"``). A key no group has a row for is a ``NotFoundError``, as the
        SDK raises."""
        _refuse_cluster_options(self.owner, "get_inference_helper", external=external,
                                force_rest_client=force_rest_client,
                                force_sql_client=force_sql_client)
        columns, rows = self._helpers([entry], return_type)
        if rows[0] is None:
            raise NotFoundError(
                f"{self.owner}: no row holds serving keys {entry!r}; get_inference_helper() "
                "needs one. Insert it, or use get_inference_helpers(), which leaves such keys "
                "out.")
        return _helper_shape([rows[0]], columns, return_type, single=True)

    def get_inference_helpers(
        self, entry: list[dict[str, Any]], external: bool | None = None,
        return_type: str = "pandas", force_sql_client: bool = False,
        force_rest_client: bool = False,
    ) -> Any:
        """The inference helper columns of several serving-key dicts, in their order; a key no
        group has a row for gives no row (as the SDK): a frame, or a list of dicts
        (``"dict"``)."""
        _refuse_cluster_options(self.owner, "get_inference_helpers", external=external,
                                force_rest_client=force_rest_client,
                                force_sql_client=force_sql_client)
        if not isinstance(entry, list | tuple):
            raise InvalidArgumentError(
                f"{self.owner}: get_inference_helpers() takes a list of serving-key dicts. Got "
                f"{type(entry).__name__} instead.")
        columns, rows = self._helpers(list(entry), return_type)
        return _helper_shape([r for r in rows if r is not None], columns, return_type,
                             single=False)

    def _helpers(self, entries: list[Any], return_type: Any
                 ) -> tuple[list[str], list[list[Any] | None]]:
        """``(columns, rows)``: the inference helper values of each entry (``None``: no group
        has a row for it)."""
        if str(return_type).lower() not in HELPER_RETURN_TYPES:
            raise InvalidArgumentError(
                f"{self.owner}: return_type must be one of {HELPER_RETURN_TYPES}. Got "
                f"{return_type!r} instead.")
        columns = list(self.inference_helper_columns)
        if not columns:
            raise InvalidArgumentError(
                f"{self.owner}: the view has no inference_helper_columns; create it with "
                "inference_helper_columns=[...] to serve them.")
        self._serving_state()  # init_serving's checks (online groups, tags), as for vectors
        spec = self.query.spec()
        checked = [self._checked_entry(spec, e) for e in entries]
        found = lookup(spec, checked, self.owner)
        return columns, [[hit.values.get(c) for c in columns] if hit.values else None
                         for hit in found]

    def _check_call(self, return_type: Any, **options: Any) -> None:
        _refuse_cluster_options(self.owner, "get_feature_vector", **options)
        if str(return_type).lower() not in RETURN_TYPES:
            raise InvalidArgumentError(
                f"{self.owner}: return_type must be one of {RETURN_TYPES}. Got {return_type!r} "
                "instead."
            )

    def _vectors(self, entries: list[Any], passed: list[Any] | None, allow_missing: bool,
                 transform: bool) -> tuple[list[str], list[list[Any] | None]]:
        """``(columns, vectors)``: one vector (or ``None``) per entry."""
        state = self._serving_state()
        spec = self.query.spec()
        columns = self._vector_columns
        entries = [self._checked_entry(spec, e) for e in entries]
        passed = [self._checked_passed(p, columns) for p in passed or [{}] * len(entries)]
        found = lookup(spec, entries, self.owner)
        rows: list[list[Any] | None] = []
        for entry, extra, hit in zip(entries, passed, found, strict=True):
            rows.append(self._assemble(entry, extra, hit, columns, allow_missing))
        if not (transform and self.transformation_functions):
            return columns, rows
        return self._transformed(columns, rows, state.statistics)

    def _checked_entry(self, spec: Any, entry: Any) -> dict[str, Any]:
        """A request's serving keys, checked: names the view serves by, the root key given."""
        if not isinstance(entry, dict) or not entry:
            raise InvalidArgumentError(
                f"{self.owner}: serving keys are a dict such as {{'{self._required(spec)[0]}': "
                f"...}}. Got {entry!r} instead."
            )
        required, valid = serving_keys(spec)
        for key, value in entry.items():
            if key not in valid:
                raise InvalidArgumentError(
                    f"{self.owner}: '{key}' (value {value!r}) is not a serving key; the serving "
                    f"keys are {valid}.{did_you_mean(str(key), valid)}"
                )
        absent = [k for k in required if entry.get(k) is None]
        if absent:
            raise InvalidArgumentError(
                f"{self.owner}: serving keys {entry!r} lack {absent} (required: {required})."
            )
        return dict(entry)

    def _required(self, spec: Any) -> list[str]:
        return serving_keys(spec)[0]

    def _checked_passed(self, passed: Any, columns: list[str]) -> dict[str, Any]:
        if not passed:
            return {}
        if not isinstance(passed, dict):
            raise InvalidArgumentError(
                f"{self.owner}: passed_features must be a dict of feature values. Got "
                f"{type(passed).__name__} instead."
            )
        unknown = [k for k in passed if k not in columns]
        if unknown:
            raise InvalidArgumentError(
                f"{self.owner}: passed_features {unknown} are not features of the vector "
                f"({columns}).{did_you_mean(str(unknown[0]), columns)}"
            )
        return dict(passed)

    def _assemble(self, entry: dict[str, Any], passed: dict[str, Any], hit: Any,
                  columns: list[str], allow_missing: bool) -> list[Any] | None:
        """One untransformed vector, the SDK's way: nothing found is ``None``; the request's keys
        fill their own slots; a feature no row nor ``passed`` gave is an error unless allowed."""
        values = dict(hit.values)
        if not values and not passed and not allow_missing:
            return None
        values.update(passed)
        for key, value in entry.items():
            if key in columns and key not in passed and values.get(key) is None:
                values[key] = value
        missing = sorted(c for c in columns if c in hit.missing and c not in values)
        if missing and not allow_missing:
            raise NotFoundError(
                f"{self.owner}: no row for serving keys {entry!r} holds features {missing}: a "
                "joined feature group has no row for the key. Insert it, pass the features "
                "with passed_features=, or allow_missing=True."
            )
        return [values.get(c) for c in columns]

    def _transformed(self, columns: list[str], rows: list[list[Any] | None],
                     stats: dict[str, Any]) -> tuple[list[str], list[list[Any] | None]]:
        """The vectors with the view's model-dependent transformations applied."""
        import pandas as pd

        present = [r for r in rows if r is not None]
        frame = self._transform(pd.DataFrame(present or [[None] * len(columns)], columns=columns),
                                stats)
        out_columns = [str(c) for c in frame.columns]
        values = iter(_records(frame)) if present else iter(())
        return out_columns, [None if r is None else next(values) for r in rows]

    def _vector_names(self, transformed: bool) -> list[str]:
        """The column names of the vectors served (transformed: inputs dropped, outputs after,
        in the order the transformations run)."""
        columns = self._vector_columns
        if not transformed or not self.transformation_functions or self._serving is None:
            return columns
        stats = self._serving.statistics
        present = [tf for tf in self.transformation_functions if all(c in columns for c in tf.inputs)]
        dropped = {c for tf in present for c in tf.dropped}
        return [c for c in columns if c not in dropped] + [
            name for tf in present for name in tf.output_names(stats[tf.key])]

    def _named_vectors(self, value: Any, *, transformed: bool) -> Any:
        """Vectors logged as lists (``fv.log(untransformed_features=[vector], ...)``, as a
        predictor script does) as a frame with the served vectors' column names, once the view
        serves; a list of another width, or anything else, as given."""
        import pandas as pd

        if self._serving is None or not isinstance(value, list) or not value:
            return value
        if not all(isinstance(v, list | tuple) for v in value):
            return value
        names = self._vector_names(transformed)
        if any(len(v) != len(names) for v in value):
            return value
        return pd.DataFrame([list(v) for v in value], columns=names)

    def transform(self, feature_vector: Any, external: bool | None = None,
                  transformation_context: dict[str, Any] | None = None,
                  return_type: str | None = None, n_processes: int | None = None) -> Any:
        """Apply the view's model-dependent transformations to untransformed vectors (a list in
        vector order, a list of them, or a DataFrame); returned as given unless ``return_type``."""
        import pandas as pd

        _refuse_cluster_options(self.owner, "transform", external=external,
                                transformation_context=transformation_context,
                                n_processes=n_processes)
        if return_type is not None:
            self._check_call(return_type)
        stats = self._serving_state().statistics
        columns = self._vector_columns
        if isinstance(feature_vector, pd.DataFrame):
            frame, kind = feature_vector, "pandas"
        elif isinstance(feature_vector, list) and feature_vector and isinstance(feature_vector[0], list):
            frame, kind = pd.DataFrame(feature_vector, columns=columns), "batch"
        elif isinstance(feature_vector, list):
            frame, kind = pd.DataFrame([feature_vector], columns=columns), "list"
        else:
            raise InvalidArgumentError(
                f"{self.owner}: transform() takes a feature vector (list), a list of them or a "
                f"DataFrame. Got {type(feature_vector).__name__} instead."
            )
        out = self._transform(frame, stats) if self.transformation_functions else frame
        target = (return_type or ("pandas" if kind == "pandas" else "list")).lower()
        if kind == "pandas" and target == "pandas":
            return out
        names, rows = [str(c) for c in out.columns], _records(out)
        return _single(rows[0], names, target) if kind == "list" else _batch(rows, names, target)


def _records(frame: pd.DataFrame) -> list[list[Any]]:
    """Rows of ``frame`` as lists of Python values (missing values as ``None``)."""
    data = frame.astype(object).where(frame.notna(), None)
    return [list(r) for r in data.itertuples(index=False, name=None)]


def _single(vector: list[Any] | None, columns: list[str], return_type: str) -> Any:
    """One vector in the SDK's return shapes (``None`` stays ``None`` but for data frames)."""
    kind = return_type.lower()
    if kind == "list":
        return vector
    if kind == "numpy":
        import numpy as np

        return np.array(vector)
    row = [None] * len(columns) if vector is None else vector
    return _frame([row], columns, kind)


def _batch(vectors: list[list[Any]], columns: list[str], return_type: str) -> Any:
    kind = return_type.lower()
    if kind == "list":
        return vectors
    if kind == "numpy":
        import numpy as np

        return np.array(vectors)
    return _frame(vectors, columns, kind)


def _frame(rows: list[list[Any]], columns: list[str], kind: str) -> Any:
    if kind == "polars":
        import polars as pl  # optional dependency, as for dataframe_type="polars"

        return pl.DataFrame(rows, schema=columns, orient="row")
    import pandas as pd

    return pd.DataFrame(rows, columns=columns)


def _helper_shape(rows: list[list[Any]], columns: list[str], return_type: str, *,
                  single: bool) -> Any:
    """Inference helper rows in the SDK's shapes: a frame, or dicts (one, or a list)."""
    kind = return_type.lower()
    if kind == "dict":
        dicts = [dict(zip(columns, r, strict=True)) for r in rows]
        return dicts[0] if single else dicts
    return _frame(rows, columns, kind)
