"""The one table of every ``hopsworks``/``hsfs``/``hsml`` call the adapter makes.

Every SDK method the adapter calls goes through :func:`sdk_call` with a key of
:data:`SDK_CALLS`, and every SDK attribute it reads goes through :func:`sdk_attr` with a class of
:data:`SDK_ATTRIBUTES`. The table records the exact call shape (how many positional arguments,
which keyword names) so that ``tests/hopsworks/test_hw_conformance.py`` can bind each entry with
``inspect.signature(...).bind(...)`` against the installed SDK, and check (by reading the adapter's
source) that the adapter uses only entries of this table, in the recorded shape. An SDK upgrade
that renames or drops a parameter the adapter uses therefore fails CI, not a scheduled job.

:func:`sdk_call` also refuses, at run time, a call whose shape is not in the table, and translates
SDK exceptions into :mod:`fstrain.kernel.errors` (``NotFoundError`` for 404s, ``BackendError``
otherwise, naming the call and the object).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from fstrain.kernel.errors import (
    AlreadyExistsError,
    BackendError,
    FeatureStoreError,
    NotFoundError,
)


@dataclass(frozen=True)
class SdkCall:
    """One SDK method the adapter calls, with the shape of its arguments.

    ``target`` is the dotted path of the method on the SDK class (or of a module function);
    ``args`` names the positional arguments the adapter passes (exactly that many);
    ``kwargs`` lists every keyword the adapter may pass; ``bound`` is False for module functions
    (``hopsworks.login``, ``hsml.python.signature.create_model``), which take no ``self``.
    """

    target: str
    args: tuple[str, ...] = ()
    kwargs: tuple[str, ...] = ()
    bound: bool = True

    @property
    def owner_path(self) -> str:
        return self.target.rsplit(".", 1)[0]

    @property
    def method(self) -> str:
        return self.target.rsplit(".", 1)[1]


_FS = "hsfs.feature_store.FeatureStore"
_FG = "hsfs.feature_group.FeatureGroup"
_Q = "hsfs.constructor.query.Query"
_FV = "hsfs.feature_view.FeatureView"
_MR = "hsml.model_registry.ModelRegistry"
_M = "hsml.model.Model"
_P = "hopsworks_common.project.Project"
_JOBS = "hopsworks_common.core.job_api.JobApi"
_JOB = "hopsworks_common.job.Job"
_DS = "hopsworks_common.core.dataset_api.DatasetApi"
_ENVS = "hopsworks_common.core.environment_api.EnvironmentApi"
_ENV = "hopsworks_common.environment.Environment"

_CREATE_MODEL_KW = (
    "version", "metrics", "description", "input_example", "model_schema", "feature_view",
    "training_dataset_version",
)
_SPLIT_KW = (
    "validation_size", "test_size", "train_start", "train_end", "validation_start",
    "validation_end", "test_start", "test_end", "description", "extra_filter", "data_format",
    "seed", "statistics_config", "write_options",
)
_READ_SPLIT_KW = (
    "read_options", "primary_key", "event_time", "training_helper_columns", "dataframe_type",
)

#: key -> call shape. Keys read ``<Class>.<method>``; the adapter passes the key, never a name.
SDK_CALLS: dict[str, SdkCall] = {
    # login and project
    "hopsworks.login": SdkCall(
        "hopsworks.login",
        kwargs=("host", "port", "project", "api_key_value", "api_key_file",
                "hostname_verification", "engine"),
        bound=False,
    ),
    "hopsworks.logout": SdkCall("hopsworks.logout", bound=False),
    # private, but the only way to drop the connection a refused login left registered
    "hopsworks.client._set_connection": SdkCall("hopsworks.client._set_connection",
                                                args=("connection",), bound=False),
    "Project.get_feature_store": SdkCall(f"{_P}.get_feature_store"),
    "Project.get_model_registry": SdkCall(f"{_P}.get_model_registry"),
    "Project.get_job_api": SdkCall(f"{_P}.get_job_api"),
    "Project.get_dataset_api": SdkCall(f"{_P}.get_dataset_api"),
    "Project.get_environment_api": SdkCall(f"{_P}.get_environment_api"),
    # feature store
    "FeatureStore.get_or_create_feature_group": SdkCall(
        f"{_FS}.get_or_create_feature_group",
        args=("name",),
        kwargs=("version", "description", "online_enabled", "partition_key", "primary_key",
                "foreign_key", "statistics_config", "expectation_suite", "event_time", "tags"),
    ),
    "FeatureStore.create_feature_group": SdkCall(
        f"{_FS}.create_feature_group",
        args=("name",),
        kwargs=("version", "description", "online_enabled", "time_travel_format",
                "partition_key", "primary_key", "foreign_key", "hudi_precombine_key",
                "statistics_config", "expectation_suite", "event_time", "tags"),
    ),
    "FeatureStore.get_or_create_spine_group": SdkCall(
        f"{_FS}.get_or_create_spine_group",
        args=("name",),
        kwargs=("version", "description", "primary_key", "foreign_key", "event_time",
                "dataframe"),
    ),
    "FeatureStore.get_feature_group": SdkCall(
        f"{_FS}.get_feature_group", args=("name",), kwargs=("version",)
    ),
    "FeatureStore.get_feature_groups": SdkCall(f"{_FS}.get_feature_groups", kwargs=("name",)),
    "FeatureStore.get_or_create_feature_view": SdkCall(
        f"{_FS}.get_or_create_feature_view",
        args=("name",),
        kwargs=("query", "version", "description", "labels", "inference_helper_columns",
                "training_helper_columns", "transformation_functions", "tags"),
    ),
    "FeatureStore.create_feature_view": SdkCall(
        f"{_FS}.create_feature_view",
        args=("name",),
        kwargs=("query", "version", "description", "labels", "inference_helper_columns",
                "training_helper_columns", "transformation_functions", "tags"),
    ),
    "FeatureStore.get_feature_view": SdkCall(
        f"{_FS}.get_feature_view", args=("name",), kwargs=("version",)
    ),
    # feature groups
    "FeatureGroup.insert": SdkCall(
        f"{_FG}.insert", args=("features",),
        kwargs=("overwrite", "operation", "storage", "write_options", "validation_options",
                "wait"),
    ),
    "FeatureGroup.read": SdkCall(
        f"{_FG}.read",
        kwargs=("wallclock_time", "online", "dataframe_type", "read_options", "start_time",
                "end_time"),
    ),
    "FeatureGroup.commit_details": SdkCall(
        f"{_FG}.commit_details", kwargs=("wallclock_time", "limit")
    ),
    "FeatureGroup.as_of": SdkCall(f"{_FG}.as_of", kwargs=("wallclock_time", "exclude_until")),
    "FeatureGroup.select_all": SdkCall(
        f"{_FG}.select_all",
        kwargs=("include_primary_key", "include_foreign_key", "include_partition_key",
                "include_event_time"),
    ),
    "FeatureGroup.select": SdkCall(f"{_FG}.select", args=("features",)),
    "FeatureGroup.select_except": SdkCall(f"{_FG}.select_except", args=("features",)),
    "FeatureGroup.select_features": SdkCall(f"{_FG}.select_features"),
    "FeatureGroup.filter": SdkCall(f"{_FG}.filter", args=("f",)),
    "FeatureGroup.add_tag": SdkCall(f"{_FG}.add_tag", args=("name", "value")),
    "FeatureGroup.get_tag": SdkCall(f"{_FG}.get_tag", args=("name",)),
    "FeatureGroup.get_tags": SdkCall(f"{_FG}.get_tags"),
    "FeatureGroup.delete_tag": SdkCall(f"{_FG}.delete_tag", args=("name",)),
    "FeatureGroup.update_feature_description": SdkCall(
        f"{_FG}.update_feature_description", args=("feature_name", "description")
    ),
    "FeatureGroup.save_expectation_suite": SdkCall(
        f"{_FG}.save_expectation_suite", args=("expectation_suite",),
        kwargs=("run_validation", "validation_ingestion_policy", "overwrite"),
    ),
    "FeatureGroup.get_statistics": SdkCall(
        f"{_FG}.get_statistics", kwargs=("computation_time", "feature_names")
    ),
    "ExpectationSuite.__init__": SdkCall(
        "hsfs.expectation_suite.ExpectationSuite.__init__",
        kwargs=("expectation_suite_name", "expectations", "meta", "run_validation",
                "validation_ingestion_policy"),
    ),
    # queries
    "Query.join": SdkCall(
        f"{_Q}.join", args=("sub_query",),
        kwargs=("on", "left_on", "right_on", "join_type", "prefix"),
    ),
    "Query.read": SdkCall(
        f"{_Q}.read",
        kwargs=("online", "dataframe_type", "read_options", "start_time", "end_time"),
    ),
    "Query.filter": SdkCall(f"{_Q}.filter", args=("f",)),
    "Query.as_of": SdkCall(f"{_Q}.as_of", kwargs=("wallclock_time", "exclude_until")),
    "Query.show": SdkCall(f"{_Q}.show", args=("n",)),
    "Query.to_string": SdkCall(f"{_Q}.to_string"),
    # feature views and training datasets
    "FeatureView.create_train_validation_test_split": SdkCall(
        f"{_FV}.create_train_validation_test_split", kwargs=_SPLIT_KW
    ),
    "FeatureView.create_train_test_split": SdkCall(
        f"{_FV}.create_train_test_split",
        kwargs=tuple(k for k in _SPLIT_KW if not k.startswith("validation_")),
    ),
    "FeatureView.create_training_data": SdkCall(
        f"{_FV}.create_training_data",
        kwargs=("start_time", "end_time", "description", "extra_filter", "data_format", "seed",
                "statistics_config", "write_options"),
    ),
    "FeatureView.get_train_validation_test_split": SdkCall(
        f"{_FV}.get_train_validation_test_split", args=("training_dataset_version",),
        kwargs=_READ_SPLIT_KW,
    ),
    "FeatureView.get_train_test_split": SdkCall(
        f"{_FV}.get_train_test_split", args=("training_dataset_version",), kwargs=_READ_SPLIT_KW
    ),
    "FeatureView.get_training_data": SdkCall(
        f"{_FV}.get_training_data", args=("training_dataset_version",), kwargs=_READ_SPLIT_KW
    ),
    "FeatureView.train_validation_test_split": SdkCall(
        f"{_FV}.train_validation_test_split",
        kwargs=("train_start", "train_end", "validation_start", "validation_end", "test_start",
                "test_end", "training_helper_columns"),
    ),
    "FeatureView.get_training_datasets": SdkCall(f"{_FV}.get_training_datasets"),
    "FeatureView.get_batch_data": SdkCall(
        f"{_FV}.get_batch_data",
        kwargs=("start_time", "end_time", "read_options", "primary_key", "event_time",
                "inference_helper_columns", "dataframe_type", "transformed"),
    ),
    "FeatureView.init_batch_scoring": SdkCall(
        f"{_FV}.init_batch_scoring", kwargs=("training_dataset_version",)
    ),
    "FeatureView.add_training_dataset_tag": SdkCall(
        f"{_FV}.add_training_dataset_tag", args=("training_dataset_version", "name", "value")
    ),
    "FeatureView.get_training_dataset_tags": SdkCall(
        f"{_FV}.get_training_dataset_tags", args=("training_dataset_version",)
    ),
    "FeatureView.get_training_dataset_statistics": SdkCall(
        f"{_FV}.get_training_dataset_statistics", args=("training_dataset_version",),
        kwargs=("before_transformation",),
    ),
    "FeatureView.add_tag": SdkCall(f"{_FV}.add_tag", args=("name", "value")),
    "FeatureView.get_tags": SdkCall(f"{_FV}.get_tags"),
    # model registry
    "ModelRegistry.get_model": SdkCall(f"{_MR}.get_model", args=("name",), kwargs=("version",)),
    "ModelRegistry.get_models": SdkCall(f"{_MR}.get_models", args=("name",)),
    "ModelRegistry.get_best_model": SdkCall(
        f"{_MR}.get_best_model", args=("name", "metric", "direction")
    ),
    "python.create_model": SdkCall(
        "hsml.python.signature.create_model", args=("name",), kwargs=_CREATE_MODEL_KW,
        bound=False,
    ),
    "sklearn.create_model": SdkCall(
        "hsml.sklearn.signature.create_model", args=("name",), kwargs=_CREATE_MODEL_KW,
        bound=False,
    ),
    "torch.create_model": SdkCall(
        "hsml.torch.signature.create_model", args=("name",), kwargs=_CREATE_MODEL_KW,
        bound=False,
    ),
    "Model.save": SdkCall(
        f"{_M}.save", args=("model_path",), kwargs=("await_registration", "keep_original_files")
    ),
    "Model.download": SdkCall(f"{_M}.download", kwargs=("local_path",)),
    "Model.add_tag": SdkCall(f"{_M}.add_tag", args=("name", "value")),
    "Model.get_tag": SdkCall(f"{_M}.get_tag", args=("name",)),
    "Model.get_tags": SdkCall(f"{_M}.get_tags"),
    "Model.delete_tag": SdkCall(f"{_M}.delete_tag", args=("name",)),
    "Model.delete": SdkCall(f"{_M}.delete"),
    "DatasetApi.upload": SdkCall(
        f"{_DS}.upload", args=("local_path", "upload_path"), kwargs=("overwrite",)
    ),
    "DatasetApi.mkdir": SdkCall(f"{_DS}.mkdir", args=("path",)),
    "DatasetApi.exists": SdkCall(f"{_DS}.exists", args=("path",)),
    "DatasetApi.list": SdkCall(f"{_DS}.list", args=("path",)),
    "DatasetApi.download": SdkCall(f"{_DS}.download", args=("path",),
                                   kwargs=("local_path", "overwrite")),
    "DatasetApi.move": SdkCall(
        f"{_DS}.move", args=("source_path", "destination_path"), kwargs=("overwrite",)
    ),
    # jobs and schedules (fstrain/cli/jobs.py)
    "JobApi.get_configuration": SdkCall(f"{_JOBS}.get_configuration", args=("type",)),
    "JobApi.create_job": SdkCall(f"{_JOBS}.create_job", args=("name", "config")),
    "JobApi.get_job": SdkCall(f"{_JOBS}.get_job", args=("name",)),
    "JobApi.get_jobs": SdkCall(f"{_JOBS}.get_jobs"),
    "Job.schedule": SdkCall(
        f"{_JOB}.schedule", kwargs=("cron_expression", "start_time", "end_time", "catchup",
                                    "max_active_runs")
    ),
    "Job.unschedule": SdkCall(f"{_JOB}.unschedule"),
    "Job.run": SdkCall(
        f"{_JOB}.run", kwargs=("args", "await_termination", "start_time", "end_time")
    ),
    # job environments (fstrain/cli/job_install.py)
    "EnvironmentApi.get_environment": SdkCall(f"{_ENVS}.get_environment", args=("name",)),
    "EnvironmentApi.create_environment": SdkCall(
        f"{_ENVS}.create_environment", args=("name",),
        kwargs=("base_environment_name", "await_creation"),
    ),
    "Environment.install_wheel": SdkCall(
        f"{_ENV}.install_wheel", args=("path",), kwargs=("await_installation",)
    ),
    "Environment.install_requirements": SdkCall(
        f"{_ENV}.install_requirements", args=("path",), kwargs=("await_installation",)
    ),
}

#: SDK class -> the attributes (properties) the adapter reads through :func:`sdk_attr`.
SDK_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "hopsworks_common.project.Project": ("name",),
    _FG: ("id", "name", "version", "primary_key", "event_time", "features", "description",
          "partition_key"),
    _Q: ("featuregroups", "features"),
    _FV: ("name", "version", "labels", "training_helper_columns", "inference_helper_columns",
          "features", "query", "description", "transformation_functions"),
    "hsfs.training_dataset.TrainingDatasetBase": (
        "version", "seed", "splits", "data_format", "description", "event_start_time",
        "event_end_time", "training_dataset_type", "location", "extra_filter",
    ),
    "hsfs.training_dataset_split.TrainingDatasetSplit": (
        "name", "percentage", "start_time", "end_time",
    ),
    "hsfs.feature.Feature": ("name", "type", "feature_group_id"),
    "hsfs.statistics.Statistics": ("feature_descriptive_statistics",),
    "hsfs.core.feature_descriptive_statistics.FeatureDescriptiveStatistics": (
        "feature_name", "mean", "stddev", "min", "max", "percentiles", "extended_statistics",
    ),
    "hsfs.transformation_function.TransformationFunction": ("hopsworks_udf",),
    "hsfs.hopsworks_udf.HopsworksUdf": ("function_name", "transformation_features"),
    _MR: ("python", "sklearn", "torch"),
    _M: ("name", "version", "training_metrics", "description", "created", "framework",
         "model_path", "version_path", "model_files_path", "training_dataset_version"),
    _JOB: ("name", "config", "job_schedule"),
    "hopsworks_common.job_schedule.JobSchedule": ("cron_expression", "enabled"),
    "hopsworks_common.execution.Execution": ("id", "state", "final_status"),
}

_SHORT = {path.rsplit(".", 1)[1]: path for path in SDK_ATTRIBUTES}


#: fstrain's transformation names that map one to one onto the SDK's built-in transformation
#: functions (``hsfs.builtin_transformations``): same statistics, same output per row.
SDK_BUILTIN_TRANSFORMATIONS: tuple[str, ...] = (
    "min_max_scaler", "standard_scaler", "robust_scaler", "label_encoder", "one_hot_encoder",
)


def sdk_builtin_transformation(name: str, feature: str, _owner: str = "") -> Any:
    """The SDK's built-in transformation ``name`` bound to ``feature`` (``standard_scaler("x")``
    in Hopsworks' own terms); ``name`` must be declared in :data:`SDK_BUILTIN_TRANSFORMATIONS`."""
    if name not in SDK_BUILTIN_TRANSFORMATIONS:
        raise AdapterDriftError(f"built-in transformation {name!r} is not declared.")
    module = importlib.import_module("hsfs.builtin_transformations")
    try:
        return getattr(module, name)(feature)
    except Exception as exc:
        raise translate_error(exc, f"builtin_transformations.{name}", _owner) from exc


class AdapterDriftError(AssertionError):
    """The adapter made an SDK call or read an attribute that is not in the table (a bug)."""


def sdk_call(obj: Any, key: str, *args: Any, _owner: str = "", **kwargs: Any) -> Any:
    """Call ``SDK_CALLS[key]`` on ``obj`` (an SDK object, or a module for module functions).

    Refuses a shape the table does not declare, and turns SDK errors into fstrain errors that
    name the call and ``_owner`` (e.g. ``"feature group 'trips' v1"``).
    """
    spec = SDK_CALLS.get(key)
    if spec is None:
        raise AdapterDriftError(f"SDK call {key!r} is not declared in SDK_CALLS.")
    if len(args) != len(spec.args):
        raise AdapterDriftError(
            f"SDK call {key!r} declares {len(spec.args)} positional argument(s) {spec.args}. "
            f"Got {len(args)} instead."
        )
    unknown = sorted(set(kwargs) - set(spec.kwargs))
    if unknown:
        raise AdapterDriftError(f"SDK call {key!r} does not declare keyword(s) {unknown}.")
    try:
        if spec.method == "__init__":  # a constructor: ``obj`` is the class
            return obj(*args, **kwargs)
        return getattr(obj, spec.method)(*args, **kwargs)
    except FeatureStoreError:
        raise
    except Exception as exc:
        raise translate_error(exc, key, _owner) from exc


def sdk_attr(obj: Any, cls: str, name: str) -> Any:
    """Read attribute ``name`` of an SDK object of class ``cls`` (short or dotted name)."""
    path = _SHORT.get(cls, cls)
    if name not in SDK_ATTRIBUTES.get(path, ()):
        raise AdapterDriftError(f"SDK attribute {cls}.{name} is not declared in SDK_ATTRIBUTES.")
    return getattr(obj, name)


def sdk_attrs(obj: Any, cls: str) -> dict[str, Any]:
    """Every attribute declared for ``cls`` in :data:`SDK_ATTRIBUTES`, read from ``obj``."""
    path = _SHORT.get(cls, cls)
    if path not in SDK_ATTRIBUTES:
        raise AdapterDriftError(f"SDK class {cls} is not declared in SDK_ATTRIBUTES.")
    return {name: getattr(obj, name, None) for name in SDK_ATTRIBUTES[path]}


# Hopsworks errorCodes meaning "this name and version already exists" (RESTCodes).
ALREADY_EXISTS_CODES = frozenset({270179})  # FEATURE_VIEW_ALREADY_EXISTS


def translate_error(exc: BaseException, key: str, owner: str = "") -> FeatureStoreError:
    """An fstrain error for an SDK exception (an "already exists" errorCode →
    AlreadyExistsError, 404 → NotFoundError, else BackendError).

    A Hopsworks REST error keeps what the server said: the message reads ``HTTP <status>,
    errorCode <code>: <errorMsg> (<usrMsg>)`` and the error carries ``status``,
    ``error_code``, ``server_message`` and ``user_message`` attributes.
    """
    where = f"{owner}: " if owner else ""
    status = _status_code(exc)
    server = _server_error(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if server is not None:
        code, message, user = server
        text = f"errorCode {code}: {message}" + (f" ({user})" if user and user != message else "")
    if server is not None and server[0] in ALREADY_EXISTS_CODES:
        err: FeatureStoreError = AlreadyExistsError(
            f"{where}Hopsworks says it already exists ({key}): {text}")
    elif status == 404:
        err = NotFoundError(
            f"{where}Hopsworks says it does not exist ({key}, HTTP 404): {text}")
    elif _is_connection_error(exc):
        err = BackendError(
            f"{where}lost the connection to Hopsworks during {key}: {text}. Check that the "
            "cluster is up and reachable (HOPSWORKS_HOST), then re-run."
        )
    else:
        err = BackendError(
            f"{where}Hopsworks call {key} failed ({type(exc).__name__}"
            f"{'' if status is None else f', HTTP {status}'}): {text}"
        )
    err.status = status  # type: ignore[attr-defined]
    err.error_code, err.server_message, err.user_message = (  # type: ignore[attr-defined]
        server if server is not None else (None, None, None))
    return err


def _server_error(exc: BaseException) -> tuple[Any, str, str] | None:
    """``(errorCode, errorMsg, usrMsg)`` of a Hopsworks error answer, if ``exc`` carries one."""
    response = getattr(exc, "response", None)
    try:
        body = response.json() if response is not None else None
    except (ValueError, AttributeError):  # no JSON body, or not a requests.Response
        return None
    if not isinstance(body, dict) or "errorCode" not in body:
        return None
    return body["errorCode"], str(body.get("errorMsg") or ""), str(body.get("usrMsg") or "")


def _status_code(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


def _is_connection_error(exc: BaseException) -> bool:
    try:
        import requests
    except ImportError:  # pragma: no cover - requests ships with hopsworks
        return isinstance(exc, ConnectionError)
    return isinstance(exc, requests.ConnectionError | requests.Timeout | ConnectionError)
