"""Ablations: how much does each feature group or feature add to a registered model?

``fstrain ablate <use case> -t V --drop-group G --drop-feature F ...`` takes the trainer
configuration recorded with a registered model trained on training-dataset version ``V`` (the
newest such version of the use case's model, or ``--model-version``), retrains it on the same
train and validation rows with all features (the reference) and once without each item, and
scores every model on the same evaluation rows (the validation split by default, so the test
split stays for the final verdict; ``--split test`` to use it). Each item's metric delta
(without − with) gets a paired percentile bootstrap interval: the same resampled rows score both
models. The table (JSON and CSV) and a plot are attached to the model version in the registry
under ``ablations/td<V>-<hash>/`` (the hash covers the items, split, seed and resamples).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from feature_store.core.carve import read_three_way
from feature_views import get_use_case
from fstrain.kernel.errors import ConfigError, NotFoundError, listing
from fstrain.kernel.versions import resolve_training_dataset_version
from fstrain.trainers import load_config, train
from validation.paired import interval_verdict
from validation.paired import paired_delta as paired
from validation.plots import ablation_png

#: The metric each task is compared on, and whether higher is better.
TASK_METRICS = {"binary": ("roc_auc", True), "multiclass": ("accuracy", True),
                "regression": ("rmse", False)}


@dataclass
class AblationResult:
    """The reference score and one row per ablated item (see :meth:`to_dict`)."""

    model: str
    training_dataset_version: int
    split: str
    metric: str
    higher_is_better: bool
    reference: float
    rows: list[dict[str, Any]]
    seed: int
    resamples: int
    notes: list[str] = field(default_factory=list)
    location: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (attached to the model version)."""
        return {"model": self.model, "training_dataset_version": self.training_dataset_version,
                "split": self.split, "metric": self.metric,
                "higher_is_better": self.higher_is_better, "reference": self.reference,
                "items": self.rows, "bootstrap": {"resamples": self.resamples, "seed": self.seed,
                                                  "method": "paired percentile, 95%"},
                "notes": list(self.notes), "location": self.location}

    def to_csv(self) -> str:
        """The table as CSV text."""
        out = io.StringIO()
        columns = ["item", "kind", "dropped_columns", "value", "delta", "lower", "upper",
                   "verdict"]
        writer = csv.DictWriter(out, fieldnames=columns)
        writer.writeheader()
        for row in self.rows:
            writer.writerow({**{c: row[c] for c in columns},
                             "dropped_columns": " ".join(row["dropped_columns"])})
        return out.getvalue()

    def to_text(self) -> str:
        """A plain table for the terminal."""
        lines = [f"ablation of {self.model} on training dataset v{self.training_dataset_version}"
                 f" ({self.split} split, {self.metric}; reference {self.reference:.4f})",
                 f"{'item':<34} {'value':>8} {'delta':>9}   95% interval          verdict"]
        for r in self.rows:
            lines.append(f"{r['item']:<34} {r['value']:>8.4f} {r['delta']:>+9.4f}   "
                         f"[{r['lower']:+.4f}, {r['upper']:+.4f}]  {r['verdict']}")
        lines += [f"note: {n}" for n in self.notes]
        if self.location:
            lines.append(f"stored: {self.location}")
        return "\n".join(lines)


def _metric_fn(metric: str) -> Any:
    if metric == "roc_auc":
        from sklearn.metrics import roc_auc_score

        def auc(y: np.ndarray, s: np.ndarray) -> float:
            return float(roc_auc_score(y, s)) if len(np.unique(y)) == 2 else float("nan")
        return auc
    if metric == "accuracy":
        return lambda y, s: float(np.mean(y == s))
    return lambda y, s: float(np.sqrt(np.mean((np.asarray(s, float) - y) ** 2)))


def _scores(predictor: Any, X: pd.DataFrame, task: str) -> np.ndarray:
    if task == "binary":
        return np.asarray(predictor.predict_proba(X), dtype=float)
    return np.asarray(predictor.predict(X))


def _y(y: pd.DataFrame, task: str, positive: Any) -> np.ndarray:
    values = y.iloc[:, 0].to_numpy()
    return (values == positive).astype(int) if task == "binary" else values


def paired_delta(metric: str, y: np.ndarray, with_all: np.ndarray, without: np.ndarray, *,
                 resamples: int, seed: int) -> tuple[float, float, float]:
    """``(delta, lower, upper)`` of ``metric(without) − metric(with_all)``, with a 95% paired
    percentile bootstrap interval (the same rows resampled for both;
    :func:`validation.paired.paired_delta`, which ``registry diff`` judges by too)."""
    return paired(_metric_fn(metric), y, with_all, without, resamples=resamples, seed=seed)


#: what :func:`validation.paired.interval_verdict` says of the model without an item
_VERDICTS = {"better": "hurts (better without)", "worse": "helps (worse without)",
             "no clear difference": "no clear effect"}


def _verdict(lower: float, upper: float, higher_is_better: bool) -> str:
    verdict = interval_verdict(lower, upper, higher_is_better)
    return _VERDICTS.get(verdict, verdict)


@dataclass(frozen=True)
class Item:
    """One thing to ablate: a feature group or a feature, and the model columns it removes."""

    kind: str
    name: str
    columns: tuple[str, ...]


def resolve_items(fv: Any, columns: list[str], groups: list[str],
                  features: list[str]) -> list[Item]:
    """The items, each with the model input columns it removes (a transformed feature's
    output columns included); unknown names are refused, naming what exists."""
    if not groups and not features:
        raise ConfigError("ablate needs at least one --drop-group or --drop-feature.")
    names = list(fv.feature_names)
    origin = {f.name: getattr(getattr(f, "feature_group", None), "name", None)
              for f in fv.features if f.name in names}
    items = []
    for group in groups:
        bare = group.split(":")[0]
        members = [n for n in names if origin.get(n) == bare]
        if not members:
            known = sorted({g for g in origin.values() if g})
            raise NotFoundError(f"feature group '{group}' gives no feature to {fv.name} v"
                                f"{fv.version} (its groups: {listing(known)}).")
        items.append(Item("group", bare, _columns_of(members, columns)))
    for feature in features:
        if feature not in names:
            raise NotFoundError(f"feature '{feature}' is not a feature of {fv.name} v"
                                f"{fv.version} (features: {listing(names)}).")
        items.append(Item("feature", feature, _columns_of([feature], columns)))
    for item in items:
        if len(item.columns) == len(columns):
            raise ConfigError(f"dropping {item.kind} '{item.name}' removes every feature; "
                              "nothing would be left to train on.")
    return items


def _columns_of(features: list[str], columns: list[str]) -> tuple[str, ...]:
    out = []
    for feature in features:
        out += [feature] if feature in columns else [c for c in columns
                                                     if c.startswith(f"{feature}_")]
    return tuple(out)


def _reference_model(registry: Any, name: str, version: int, model_version: int | None) -> Any:
    if model_version is not None:
        model = registry.get_model(name, model_version)
        if model.training_dataset_version != version:
            raise ConfigError(f"model {name}:{model_version} was trained on training dataset "
                              f"v{model.training_dataset_version}, not v{version}.")
        return model
    models = [m for m in registry.get_models(name) if m.training_dataset_version == version]
    if not models:
        raise NotFoundError(f"no version of model '{name}' was trained on training dataset "
                            f"v{version}; train one first (fstrain train ... -t {version}).")
    return max(models, key=lambda m: m.version)


def _train_scores(cfg: Any, splits: tuple[Any, ...], drop: tuple[str, ...], X_eval: pd.DataFrame,
                  workdir: Path) -> tuple[np.ndarray, Any]:
    """Train ``cfg`` without the ``drop`` columns; its scores on ``X_eval`` and its labels."""
    X_tr, X_va, y_tr, y_va = splits
    result = train(cfg, X_tr.drop(columns=list(drop)), y_tr, X_va.drop(columns=list(drop)), y_va,
                   workdir=workdir)
    labels = result.model.labels
    return _scores(result.model, X_eval.drop(columns=list(drop)), labels.task), labels


def run(project: Any, use_case: str, version: int | str, *, groups: list[str],
        features: list[str], model_version: int | None = None, split: str = "validation",
        resamples: int = 200, seed: int = 0) -> AblationResult:
    """Retrain the reference model's configuration without each item, score, store, return."""
    uc = get_use_case(use_case)
    fv = project.get_feature_store().get_feature_view(uc.feature_view_name,
                                                      uc.feature_view_version)
    version = resolve_training_dataset_version(fv, version)
    model = _reference_model(project.get_model_registry(), uc.registry_model_name, version,
                             model_version)
    return ablate_model(fv, model, groups=groups, features=features, split=split,
                        resamples=resamples, seed=seed)


def ablate_model(fv: Any, model: Any, *, groups: list[str], features: list[str],
                 split: str = "validation", resamples: int = 200,
                 seed: int = 0) -> AblationResult:
    """:func:`run` for a given feature view and registered model version (trained on it)."""
    if split not in ("validation", "test"):
        raise ConfigError(f"--split must be 'validation' or 'test'. Got {split!r}.")
    if resamples < 10:
        raise ConfigError(f"--resamples must be at least 10. Got {resamples}.")
    version = int(model.training_dataset_version)
    record = model.training_config or {}
    if "trainer" not in record:
        raise ConfigError(f"model {model.name}:{model.version} has no recorded trainer "
                          "configuration to retrain.")
    cfg = load_config(record["trainer"])
    if cfg.model in ("spark_gbt", "spark_lr", "lora"):
        raise ConfigError(f"ablate retrains pandas-frame models; {cfg.model} is not one.")
    (X_tr, X_va, X_te, y_tr, y_va, y_te), _ = read_three_way(
        fv, version, carve=record.get("validation_split"))
    items = resolve_items(fv, list(X_tr.columns), groups, features)
    X_ev, y_ev = (X_va, y_va) if split == "validation" else (X_te, y_te)
    splits = (X_tr, X_va, y_tr, y_va)
    with tempfile.TemporaryDirectory(prefix="fstrain-ablate-") as tmp:
        reference, labels = _train_scores(cfg, splits, (), X_ev, Path(tmp) / "reference")
        metric, higher = TASK_METRICS[labels.task]
        y = _y(y_ev, labels.task, labels.classes[1] if labels.task == "binary" else None)
        rows = []
        for i, item in enumerate(items):
            scores, _ = _train_scores(cfg, splits, item.columns, X_ev, Path(tmp) / f"item{i}")
            delta, lower, upper = paired_delta(metric, y, reference, scores,
                                               resamples=resamples, seed=seed)
            rows.append({"item": f"{item.kind} {item.name}", "kind": item.kind,
                         "dropped_columns": list(item.columns),
                         "value": _metric_fn(metric)(y, scores), "delta": delta,
                         "lower": lower, "upper": upper,
                         "verdict": _verdict(lower, upper, higher)})
    result = AblationResult(model=f"{model.name}:{model.version}",
                            training_dataset_version=int(version), split=split, metric=metric,
                            higher_is_better=higher, reference=_metric_fn(metric)(y, reference),
                            rows=rows, seed=seed, resamples=resamples, notes=_notes(record))
    _store(model, result)
    return result


def _notes(record: dict[str, Any]) -> list[str]:
    notes = ["every model, the reference included, is retrained here with the recorded "
             "configuration and seed; early stopping watches the validation split"]
    if record.get("tuning"):
        notes.append("the registered model was tuned and refit on train + validation; the "
                     "ablation retrains its best configuration on train only")
    if (record.get("label_issues") or {}).get("dropped_from_training"):
        notes.append("the registered model was trained without Cleanlab's suspect rows; the "
                     "ablation trains on all train rows")
    return notes


def _store(model: Any, result: AblationResult) -> None:
    """Attach the table (JSON, CSV) and the plot to the model version."""
    spec = json.dumps({"items": [r["item"] for r in result.rows], "split": result.split,
                       "seed": result.seed, "resamples": result.resamples}, sort_keys=True)
    folder = (f"ablations/td{result.training_dataset_version}-"
              f"{hashlib.sha256(spec.encode()).hexdigest()[:10]}")
    result.location = f"{model.name}:{model.version} attachments {folder}/"
    model.write_attachment(f"{folder}/ablation.json", result.to_dict())
    model.write_attachment(f"{folder}/ablation.csv", result.to_csv())
    model.write_attachment(f"{folder}/ablation.png", ablation_png(
        [r["item"] for r in result.rows], [r["delta"] for r in result.rows],
        [r["lower"] for r in result.rows], [r["upper"] for r in result.rows],
        metric=result.metric, higher_is_better=result.higher_is_better))
