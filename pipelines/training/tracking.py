"""Experiment tracking in MLflow (``fstrain train ... --track mlflow``).

After the training pipeline registers a model, :func:`log_training_run` writes one MLflow run
to a tracking store: the hyperparameters and the trainer's main options as params, the learning
curves as per-round/epoch metrics (``train_loss``, ``val_loss``, ``train_<metric>``,
``val_<metric>`` and the extra series, each at its step), the registered metrics, the curves
and the training config as artifacts, and the registry reference as tags (``fstrain.model``,
``fstrain.model_path``, ``fstrain.feature_view``, ``fstrain.training_dataset_version``). The
fstrain registry stays the system of record; MLflow is where runs are compared and browsed.

The store defaults to a local SQLite file, ``sqlite:///<root>/mlflow.db``, with artifacts under
``<root>/mlflow-artifacts``; ``--tracking-uri`` points anywhere MLflow can (a server, a
database). The experiment is named after the registered model. MLflow's client
(``mlflow-skinny``, the ``tracking`` extra) is imported only here, only when asked.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
import time

from fstrain.kernel.errors import BackendError, ConfigError

MAX_PARAM_CHARS = 6000  # MLflow's limit on a param value


def default_tracking_uri(root: Path) -> str:
    """``sqlite:///<root>/mlflow.db`` (absolute path)."""
    return f"sqlite:///{Path(root).resolve() / 'mlflow.db'}"


def _client(tracking_uri: str) -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise ConfigError("--track mlflow needs MLflow's client: install the 'tracking' extra "
                          "(pip install 'fstrain[tracking]', which pins mlflow-skinny).") from exc
    return MlflowClient(tracking_uri=tracking_uri)


def _experiment(client: Any, name: str, artifact_root: Path | None) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        return str(found.experiment_id)
    location = (artifact_root / name).resolve().as_uri() if artifact_root is not None else None
    return str(client.create_experiment(name, artifact_location=location))


def _params(params: Mapping[str, Any]) -> list[Any]:
    from mlflow.entities import Param

    out = []
    for key, value in sorted(params.items()):
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        out.append(Param(str(key)[:250], text[:MAX_PARAM_CHARS]))
    return out


def _curve_metrics(curves: Mapping[str, Any] | None, timestamp: int) -> list[Any]:
    """One MLflow metric point per curve value (null values skipped), at the curve's step."""
    from mlflow.entities import Metric

    if not curves:
        return []
    series = {name: curves.get(name) or [] for name in ("train_loss", "val_loss")}
    series[f"train_{curves['metric']}"] = curves.get("train_metric") or []
    series[f"val_{curves['metric']}"] = curves.get("val_metric") or []
    series.update({f"curve_{k}": v for k, v in (curves.get("extra") or {}).items()})
    points = []
    for name, values in series.items():
        for step, value in zip(curves["steps"], values, strict=False):
            if value is not None and math.isfinite(value):
                points.append(Metric(name, float(value), timestamp, int(step)))
    return points


def log_training_run(*, tracking_uri: str, artifact_root: Path | None, model_ref: str,
                     model_path: str, params: Mapping[str, Any], metrics: Mapping[str, Any],
                     curves: Mapping[str, Any] | None, training_config: Mapping[str, Any],
                     tags: Mapping[str, str]) -> dict[str, str]:
    """Write one run; returns ``{"tracking_uri", "experiment_id", "run_id"}``.

    Raises:
        ConfigError: MLflow's client is not installed.
        BackendError: the store refused the run (named, with the registered model kept).
    """
    from mlflow.entities import Metric, RunTag

    client = _client(tracking_uri)
    name = model_ref.split(":", 1)[0]
    try:
        experiment = _experiment(client, name, artifact_root)
        run = client.create_run(experiment, run_name=model_ref)
        run_id = run.info.run_id
        now = int(time.time() * 1000)
        finals = [Metric(k, float(v), now, 0) for k, v in sorted(metrics.items())
                  if isinstance(v, int | float) and math.isfinite(float(v))]
        points = _curve_metrics(curves, now) + finals
        all_tags = {"fstrain.model": model_ref, "fstrain.model_path": model_path, **tags}
        client.log_batch(run_id, params=_params(params),
                         tags=[RunTag(k, str(v)) for k, v in all_tags.items()])
        for start in range(0, len(points), 1000):  # MLflow's batch limit
            client.log_batch(run_id, metrics=points[start:start + 1000])
        with tempfile.TemporaryDirectory(prefix="fstrain-mlflow-") as tmp:
            for file_name, payload in (("learning_curves.json", curves),
                                       ("training_config.json", training_config)):
                if payload is not None:
                    path = Path(tmp) / file_name
                    path.write_text(json.dumps(payload, indent=1, default=str))
                    client.log_artifact(run_id, str(path))
        client.set_terminated(run_id)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - the store's own errors, named once
        raise BackendError(f"model {model_ref} is registered, but logging it to the MLflow "
                           f"tracking store {tracking_uri} failed ({type(exc).__name__}: "
                           f"{exc}). Check --tracking-uri.") from exc
    return {"tracking_uri": tracking_uri, "experiment_id": experiment, "run_id": run_id}
