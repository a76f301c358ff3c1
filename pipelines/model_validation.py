"""Model-validation pipeline: a registered model version → scorecard, model card and status.

``run(project, config)`` follows the model's lineage in the registry to its feature view and
training-dataset version, reads the **test** split with the training helper columns (which never
reach the model), and computes: metrics with bootstrap confidence intervals at a threshold chosen
on the *validation* split, the majority-class baseline and the best previously passed version,
per-slice metrics and disparities on the helper columns, SHAP explanations on a bounded sample,
and the acceptance gates. It writes ``scorecard.json/.md/.html``, ``model_card.md/.html`` and
``images/*.png`` into the model version and sets ``validation_status`` to passed or failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field

from fstrain.kernel.errors import NotFoundError
from pipelines.config_base import PipelineConfig
from pipelines.refs import ModelRef, ValidationRef

if TYPE_CHECKING:  # pragma: no cover - typing only
    from feature_store.api import Project


class ModelValidationConfig(PipelineConfig):
    """Configuration of one model-validation run."""


    model_name: str
    version: int | None = Field(None, ge=1)  # None: the latest version
    gates: list[str] | None = None  # None: the use case's gates
    threshold_strategy: str = "f1"
    min_slice_size: int = Field(30, ge=1)
    shap_samples: int = Field(200, ge=1)
    bootstrap_resamples: int = Field(200, ge=10)
    seed: int = 0
    model_card: str | None = None  # YAML overrides; default <root>/model_cards/<name>.yaml


def _latest(registry: Any, name: str) -> Any:
    models = registry.get_models(name)
    if not models:
        raise NotFoundError(f"model '{name}' has no versions in the registry.")
    return max(models, key=lambda m: m.version)


def _use_case_for(feature_view_name: str | None) -> Any:
    from feature_views import USE_CASES, get_use_case

    for name in USE_CASES:
        use_case = get_use_case(name)
        if use_case.feature_view_name == feature_view_name:
            return use_case
    return None


def _previous_best(registry: Any, model: Any) -> tuple[dict[str, Any] | None, str]:
    """Test metrics of the best *passed* version other than this one (from its scorecard)."""
    import json

    best, best_auc = None, None
    for other in registry.get_models(model.name):
        if other.version == model.version or other.validation_status != "passed":
            continue
        path = Path(other.model_path) / "scorecard.json"
        if not path.exists():
            continue
        metrics = json.loads(path.read_text())["metrics"]
        key = metrics.get("roc_auc", metrics.get("accuracy"))
        if key is None and metrics.get("rmse") is not None:
            key = -metrics["rmse"]  # lower error is better
        if key is not None and (best_auc is None or key > best_auc):
            best, best_auc = (metrics, f"version {other.version}"), key
    return best if best else (None, "previous version")


def run(project: Project, config: ModelValidationConfig) -> ValidationRef:
    """Validate one model version and write its scorecard into the registry."""
    from pipelines.trainers import load_predictor
    from validation.scorecard import Scorecard, library_versions

    registry = project.get_model_registry()
    model = (registry.get_model(config.model_name, config.version) if config.version
             else _latest(registry, config.model_name))
    fs = project.get_feature_store()
    fv = fs.get_feature_view(model.feature_view_name, model.feature_view_version)
    td_version = model.training_dataset_version
    td = fv.get_training_dataset(td_version)
    X_tr, X_va, X_te, y_tr, y_va, y_te = fv.get_train_validation_test_split(
        td_version, training_helper_columns=True
    )
    helpers = list(fv.training_helper_columns)
    helper_frame = X_te[helpers].reset_index(drop=True)
    X_va, X_te = X_va.drop(columns=helpers), X_te.drop(columns=helpers)
    predictor = load_predictor(Path(model.download()))
    use_case = _use_case_for(fv.name)
    gates = config.gates if config.gates is not None else list(use_case.gates if use_case else [])
    label = y_te.columns[0]
    lineage = {
        "feature_view": fv.name, "feature_view_version": fv.version,
        "training_dataset_version": td_version,
        "feature_group_commits": td.feature_group_commits,
        "training_dataset_sha256": {s: m["sha256"] for s, m in td.splits.items()},
        "split": td.split_spec, "seed": td.seed,
    }
    card = Scorecard(
        model.name, model.version, task="classification",
        evaluation={"split": "test", "rows": int(len(X_te)), "training_dataset_version": td_version,
                    "label": label, "helper_columns": helpers},
        lineage=lineage, library_versions=library_versions(),
    )
    regression = predictor.explain_target.classes == ()
    n_classes = 0 if regression else int(y_tr[label].nunique())
    if regression:
        card.task = "regression"
        images = _regression(card, config, predictor, X_te, y_tr[label], y_te[label],
                             helper_frame, gates, registry, model)
    elif n_classes <= 2:
        images = _binary(card, config, predictor, X_va, X_te, y_tr[label], y_va[label], y_te[label],
                         helper_frame, use_case, gates, registry, model)
    else:
        images = _multiclass(card, config, predictor, X_te, y_tr[label], y_te[label], gates)
    status = "passed" if card.status == "passed" else "failed"
    if card.status == "no gates":
        card.notes.append("No acceptance gate was configured: the version is marked failed "
                          "until gates are defined.")
    _write_outputs(project, model, card, images, config)
    model.set_validation_status(status)
    key = "rmse" if regression else ("roc_auc" if n_classes <= 2 else "accuracy")
    value = card.metrics.get(key)
    return ValidationRef(ModelRef(model.name, model.version), status, key,
                         None if value is None else float(value),
                         str(Path(model.model_path) / "scorecard.html"))


def _binary(card: Any, config: ModelValidationConfig, predictor: Any, X_va: Any, X_te: Any,
            y_tr: Any, y_va: Any, y_te: Any, helpers: Any, use_case: Any, gates: list[str],
            registry: Any, model: Any) -> dict[str, bytes]:
    from validation.bias import slice_report
    from validation.gates import evaluate_gates
    from validation.metrics import (
        baseline_metrics,
        choose_threshold,
        classification_cis,
        classification_metrics,
    )
    from validation.plots import standard_plots

    positive = _positive_class(y_tr)
    yt_tr = (y_tr == positive).astype(int).to_numpy()
    yt_va = (y_va == positive).astype(int).to_numpy()
    yt_te = (y_te == positive).astype(int).to_numpy()
    s_va = np.asarray(predictor.predict_proba(X_va), dtype=float)
    s_te = np.asarray(predictor.predict_proba(X_te), dtype=float)
    choice = choose_threshold(yt_va, s_va, config.threshold_strategy)
    card.threshold = {**choice.to_dict(), "chosen_on": "validation"}
    card.metrics = classification_metrics(yt_te, s_te, choice.threshold)
    card.confidence_intervals = classification_cis(
        yt_te, s_te, choice.threshold, n_resamples=config.bootstrap_resamples, seed=config.seed
    )
    base = baseline_metrics(yt_te, prior=float(yt_tr.mean()))
    card.baselines = {"majority_class_prior": base}
    previous, previous_label = _previous_best(registry, model)
    if previous:
        card.baselines[f"best_passed_{previous_label.replace(' ', '_')}"] = previous
    bias = None
    if helpers.shape[1]:
        bias = slice_report(yt_te, s_te, (s_te >= choice.threshold).astype(int), helpers,
                            min_slice_size=config.min_slice_size,
                            bands=use_case.slice_bands if use_case else None)
        card.bias = bias.to_dict()
    explanation = _explain(card, predictor, X_te, config, class_index=None)
    card.gates = evaluate_gates(gates, card.gate_metrics(), baseline=base, previous=previous,
                                previous_label=previous_label).to_dict()
    return standard_plots(y_true=yt_te, y_score=s_te, confusion=card.metrics["confusion_matrix"],
                          threshold=choice.threshold, explanation=explanation, bias=bias)


def _regression(card: Any, config: ModelValidationConfig, predictor: Any, X_te: Any, y_tr: Any,
                y_te: Any, helpers: Any, gates: list[str], registry: Any, model: Any
                ) -> dict[str, bytes]:
    """Regression: MAE, MSE/RMSE, R² with bootstrap CIs, the mean predictor as baseline, and
    per-slice errors on the helper columns."""
    from validation.gates import evaluate_gates
    from validation.metrics import baseline_metrics, bootstrap_ci, regression_metrics
    from validation.plots import shap_importance_png

    y = y_te.to_numpy(dtype=float)
    pred = np.asarray(predictor.predict(X_te), dtype=float)
    card.metrics = regression_metrics(y, pred)
    fns = {
        "mae": lambda t, p: float(np.mean(np.abs(p - t))),
        "rmse": lambda t, p: float(np.sqrt(np.mean((p - t) ** 2))),
    }
    card.confidence_intervals = {
        name: bootstrap_ci(fn, y, pred, n_resamples=config.bootstrap_resamples, seed=config.seed)
        for name, fn in fns.items()
    }
    base = baseline_metrics(y, task="regression", prior=float(y_tr.mean()))
    card.baselines = {"mean_predictor": base}
    previous, previous_label = _previous_best(registry, model)
    if previous:
        card.baselines[f"best_passed_{previous_label.replace(' ', '_')}"] = previous
    if helpers.shape[1]:
        slices = []
        for column in helpers.columns:
            values = helpers[column].astype(str).to_numpy()
            for value in sorted(set(values)):
                mask = values == value
                judged = int(mask.sum()) >= config.min_slice_size
                slices.append({"column": column, "value": value, "size": int(mask.sum()),
                               "mae": float(np.mean(np.abs(pred[mask] - y[mask]))),
                               "mean_target": float(y[mask].mean()), "judged": judged})
        card.notes.append(
            "Regression slices: per helper-column value, size, mean target and MAE (slices with "
            f"fewer than {config.min_slice_size} rows are not judged): "
            + "; ".join(f"{s['column']}={s['value']}: n={s['size']}, MAE={s['mae']:.4g}"
                        + ("" if s["judged"] else " (not judged)") for s in slices)
        )
    explanation = _explain(card, predictor, X_te, config, class_index=None)
    card.gates = evaluate_gates(gates, card.gate_metrics(), baseline=base, previous=previous,
                                previous_label=previous_label, primary_metric="rmse").to_dict()
    return {"shap_importance": shap_importance_png(explanation)} if explanation is not None else {}


def _multiclass(card: Any, config: ModelValidationConfig, predictor: Any, X_te: Any, y_tr: Any,
                y_te: Any, gates: list[str]) -> dict[str, bytes]:
    from sklearn.metrics import accuracy_score, f1_score, log_loss

    from validation.gates import evaluate_gates
    from validation.plots import shap_importance_png

    proba = np.asarray(predictor.predict_proba(X_te), dtype=float)
    proba = proba / proba.sum(axis=1, keepdims=True)  # float32 softmax rows sum to 1 ± 1e-7
    classes = list(predictor.explain_target.classes)
    predicted = np.asarray(classes)[proba.argmax(axis=1)]
    truth = y_te.to_numpy()
    card.metrics = {
        "accuracy": float(accuracy_score(truth, predicted)),
        "macro_f1": float(f1_score(truth, predicted, average="macro")),
        "log_loss": float(log_loss(truth, proba, labels=classes)),
        "per_class_recall": {str(c): float((predicted[truth == c] == c).mean()) for c in classes},
    }
    majority = y_tr.value_counts().idxmax()
    card.baselines = {"majority_class": {"accuracy": float((truth == majority).mean())}}
    card.notes.append("Multi-class model: bias slices need helper columns, which this view has "
                      "none of; SHAP explains the most frequent predicted class.")
    top = int(np.bincount(proba.argmax(axis=1)).argmax())
    explanation = _explain(card, predictor, X_te, config, class_index=top)
    card.gates = evaluate_gates(gates, card.gate_metrics(),
                                baseline=card.baselines["majority_class"],
                                primary_metric="accuracy").to_dict()
    images = {}
    if explanation is not None:
        images["shap_importance"] = shap_importance_png(explanation)
    return images


def _explain(card: Any, predictor: Any, X: Any, config: ModelValidationConfig,
             class_index: int | None) -> Any:
    """SHAP on a bounded sample (images: a handful of rows, as they cost seconds each)."""
    from validation.explain import explain

    target = predictor.explain_target
    samples = min(config.shap_samples, 6) if target.kind == "cnn" else config.shap_samples
    rows = X.sample(n=min(len(X), max(samples * 3, 50)), random_state=config.seed) if len(X) > 0 else X
    try:
        explanation = explain(target.model, target.transform(rows), feature_names=target.feature_names,
                              max_samples=samples, background_size=min(50, len(rows)),
                              seed=config.seed, class_index=class_index)
    except Exception as exc:  # explanations must not hide the metrics; say why they are missing
        card.notes.append(f"SHAP explanation failed: {type(exc).__name__}: {exc}")
        return None
    card.explanation = explanation.to_dict()
    return explanation


def _positive_class(y: Any) -> Any:
    values = sorted(y.dropna().unique().tolist())
    return True if True in values else values[-1]


def _write_outputs(project: Any, model: Any, card: Any, images: dict[str, bytes],
                   config: ModelValidationConfig) -> None:
    from validation.model_card import build_model_card, load_overrides

    for name, png in images.items():
        model.add_attachment(f"images/{name}.png", png)
    model.write_attachment("scorecard.json", card.to_json())
    model.write_attachment("scorecard.md", card.to_markdown())
    model.write_attachment("scorecard.html", card.to_html(images))
    override_path = (Path(config.model_card) if config.model_card
                     else Path(project.root) / "model_cards" / f"{model.name}.yaml")
    manifest = dict(model.manifest)
    manifest.setdefault("features", [c["name"] for c in (manifest.get("input_schema") or {}).get("columns", [])]
                        if isinstance(manifest.get("input_schema"), dict) else [])
    model_card = build_model_card(card, manifest, load_overrides(override_path))
    model.write_attachment("model_card.md", model_card.to_markdown())
    model.write_attachment("model_card.html", model_card.to_html(images))
