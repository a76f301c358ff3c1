"""Model-validation pipeline: a registered model version → a recorded validation run.

``run(project, config)`` loads the configuration, the model (through the registry's lineage:
feature view and training-dataset version) and the data (validation and **test** splits with
the training helper columns, which never reach the model), calls
:func:`validation.evaluate.evaluate`, and records the run through the registry's public API
(:meth:`Model.record_validation`): the scorecard, model card and figures go into an immutable
``history/<seq>/`` folder of the version with a record of who ran it, when, with which code and
which gates (and where each gate came from). Nothing earlier is overwritten.

The gates come from the model's gate policy (:mod:`validation.policy`: the use case's defaults
or an owner's policy file in the registry). Extra gates may only tighten it; a run that loosens,
removes or replaces a policy gate, or chooses its threshold another way, is recorded as a
policy deviation (each change, before → after) and its status says so.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Literal
import re
import tempfile

from pydantic import Field

from feature_store.core import late_data
from fstrain.kernel.errors import ConfigError, NotFoundError
from fstrain.kernel.config import PipelineConfig
from fstrain.kernel.refs import ModelRef, ValidationRef
from feature_views import USE_CASES, get_use_case
from fstrain.kernel.canonical_json import dumps
from fstrain.trainers.curves import read_curves
from model_registry.history import event_dir, sha256_bytes
from model_registry.predictor_record import record_of
from model_registry.statuses import run_status, verdict_of
from validation.signoff import signer_text

if TYPE_CHECKING:  # pragma: no cover - typing only
    from feature_store.api import Project


class ModelValidationConfig(PipelineConfig):
    """Configuration of one model-validation run."""

    model_name: str
    version: int | None = Field(default=None, ge=1)  # None: the latest version
    gates: list[str] | None = None  # added to (or tightening) the model's gate policy
    gate_source: Literal["config file", "command line"] = "config file"
    replace_gates: bool = False  # True: `gates` replace the policy's (a policy deviation)
    threshold_strategy: str | float | None = None  # None: the policy's (f1 by default)
    min_slice_size: int = Field(default=30, ge=1)
    min_slice_positives: int = Field(default=10, ge=0)
    min_slice_negatives: int = Field(default=10, ge=0)
    shap_samples: int = Field(default=200, ge=1)
    bootstrap_resamples: int = Field(default=200, ge=10)
    seed: int = 0
    model_card: str | None = None  # owner texts; default <root>/model_cards/<name>.yaml


def _latest(registry: Any, name: str) -> Any:
    models = registry.get_models(name)
    if not models:
        registry.get_model(name, 1)  # raises the not-found error naming the models (did you mean)
        raise NotFoundError(f"model '{name}' has no versions in the registry.")
    return max(models, key=lambda m: m.version)


def _use_case_for(feature_view_name: str | None) -> Any:
    for name in USE_CASES:
        use_case = get_use_case(name)
        if use_case.feature_view_name == feature_view_name:
            return use_case
    return None


def _previous_best(registry: Any, model: Any) -> tuple[dict[str, Any], str] | None:
    """Test metrics of the best other version whose latest validation run passed."""
    best, best_key = None, None
    for other in registry.get_models(model.name):
        run = None if other.version == model.version else other.latest_validation()
        if not run or run.get("status") != "passed":  # a policy deviation does not count
            continue
        metrics = run.get("metrics") or {}
        key = metrics.get("roc_auc", metrics.get("accuracy"))
        if key is None and metrics.get("rmse") is not None:
            key = -metrics["rmse"]  # lower error is better
        if key is not None and (best_key is None or key > best_key):
            best, best_key = (metrics, f"version {other.version}"), key
    return best


def _require_lineage(model: Any) -> None:
    if not model.feature_view_name or model.training_dataset_version is None:
        raise ConfigError(
            f"model {model.name}:{model.version} was registered without its lineage, so there "
            "is no test split to validate it on. Register it with create_model(..., "
            "feature_view=fv, training_dataset_version=v)."
        )


def _load_model(model: Any, y_train: Any) -> tuple[Any, dict[str, Any] | None]:
    """Load the version through the registry's load-and-predict record (inferred from its
    files when it has none), with its learning curves if it has them; the download lives in
    a temp folder removed before returning."""
    from fstrain.trainers.external import load_registered_predictor

    with tempfile.TemporaryDirectory(prefix="fstrain-validate-") as scratch:
        folder = Path(model.download(scratch))
        curves = read_curves(folder)
        return (load_registered_predictor(folder, record_of(model.manifest), y_train=y_train),
                curves.to_dict() if curves is not None else None)


def _load_data(fv: Any, td_version: int, carve: dict[str, Any] | None = None, *,
               group_keys: tuple[str, ...] = ()) -> Any:
    """Validation and test rows; a train/test version's validation rows are carved from train
    as the training pipeline carved them (``carve``, recorded with the model). Helper columns
    that are entity keys (``group_keys``, for group splits) are not slice attributes."""
    from feature_store.core.carve import read_three_way
    from validation.evaluate import EvaluationData

    (_, X_va, X_te, y_tr, y_va, y_te), record = read_three_way(fv, td_version, carve=carve,
                                                               helpers=True)
    helpers = list(fv.training_helper_columns)
    slices = [h for h in helpers if h not in group_keys]
    label = y_te.columns[0]
    rows, warning = _validation_rows(record, carve is not None, td_version, len(y_va))
    return EvaluationData(X_va.drop(columns=helpers), X_te.drop(columns=helpers), y_tr[label],
                          y_va[label], y_te[label], X_te[slices].reset_index(drop=True),
                          validation_rows=rows, validation_warning=warning)


def _validation_rows(record: dict[str, Any] | None, recorded: bool, td_version: int,
                     n: int) -> tuple[str, str | None]:
    """Where the threshold's rows come from, and a warning when they may have been fitted on:
    a train/test version's validation rows are carved from its train split; a model that
    carries no carve record (a notebook model) may have been trained on those very rows."""
    if record is None:
        return "rows of the validation split", None
    how = (f"{record['strategy']} {float(record['fraction']):.0%}, seed {record['seed']}")
    rows = f"rows carved from the train split of training dataset v{td_version} ({how})"
    if recorded:
        return rows + ", held out from fitting by the training run", None
    return rows, (
        f"The decision threshold was chosen on {n} {rows}: this version has no validation "
        "split, and the model carries no record of a carve held out from its fit (a model "
        "trained outside `fstrain train`, e.g. in a notebook), so it may have been fitted on "
        "these very rows and the threshold may be optimistic. Validate a model trained on a "
        "train/validation/test version, or one trained by `fstrain train`, which records its "
        "carve.")


def _new_card(model: Any, fv: Any, data: Any) -> Any:
    from validation.scorecard import Scorecard, library_versions

    td_version = model.training_dataset_version
    td = fv.get_training_dataset(td_version)
    lineage = {
        "feature_view": fv.name, "feature_view_version": fv.version,
        "training_dataset_version": td_version,
        "feature_group_commits": td.feature_group_commits,
        "training_dataset_sha256": {s: m["sha256"] for s, m in td.splits.items()},
        "split": td.split_spec, "seed": td.seed,
        "as_known": bool((td.extra or {}).get("as_known")),
        "late_data": {g["group"]: late_data.describe(g, named=False)
                      for g in late_data.groups(td.extra)} or late_data.lines(td.extra)[0],
    }
    evaluation = {"split": "test", "rows": len(data.X_test),
                  "training_dataset_version": td_version, "label": str(data.y_test.name),
                  "helper_columns": list(data.helpers.columns)}
    return Scorecard(model.name, model.version, evaluation=evaluation, lineage=lineage,
                     library_versions=library_versions())


def check_model_card(project: Project, model_name: str, model_card: str | None = None) -> Any:
    """The owner's model-card texts of ``model_name``, checked: ``model_card`` (which must
    exist), else ``<root>/model_cards/<model_name>.yaml`` if there is one. A key typo or a bad
    value is a :class:`ConfigError`; :func:`run` and the CLI's multi-stage commands (``fstrain
    run``, ``demo``) call this before any work."""
    from validation.model_card import load_owner_file

    if model_card:
        return load_owner_file(model_card, missing_ok=False)
    return load_owner_file(Path(project.root) / "model_cards" / f"{model_name}.yaml",
                           shown_as=f"model_cards/{model_name}.yaml")


def run(project: Project, config: ModelValidationConfig, *,
        key: str | os.PathLike[str] | None = None) -> ValidationRef:
    """Validate one model version and record the run in the registry, signed in a store with
    a trust list by the key at ``key`` (else ``$FSTRAIN_KEY``).

    Raises:
        ConfigError: an extra gate is malformed or names an unknown metric, or the threshold
            strategy is not f1, youden or a number (before any work).
        IntegrityError: the model's stored policy file does not verify.
    """
    from validation.evaluate import EvaluationSettings, evaluate, task_of
    from validation.gates import parse_gates
    from validation.policy import (
        check_extra_gates,
        current_policy,
        normalize_strategy,
        plan_gates,
    )

    extra = check_extra_gates(config.gates, replace=config.replace_gates)
    if config.threshold_strategy is not None:
        normalize_strategy(config.threshold_strategy)  # refused before any work
    registry = project.get_model_registry()
    model = (registry.get_model(config.model_name, config.version) if config.version
             else _latest(registry, config.model_name))
    # the owner's model-card file is checked before any validation work (a named one must exist)
    owner = check_model_card(project, model.name, config.model_card)
    # who signs the run (and so vouches for the owner's texts on its model card); a signed
    # store without an enrolled validating key is refused here, before any work, and a
    # version whose record does not verify is not validated (a run would be chained onto it)
    signer = model.signer_for("validation", key=key)
    model.require_verified()
    _require_lineage(model)
    fv = project.get_feature_store().get_feature_view(model.feature_view_name,
                                                      model.feature_view_version)
    use_case = _use_case_for(fv.name)
    where = f"model {model.name}:{model.version} (feature view {fv.name} v{fv.version})"
    _check_gates_computable(extra, fv, use_case, where=where)
    policy = current_policy(registry, model.name, list(use_case.gates if use_case else []),
                            trust=_trust_list(model))
    # the policy in force is held to the same rule: an owner's file gating on a column the
    # view does not slice by is refused here, not recorded as a failed run after the work
    _check_gates_computable(parse_gates(policy.document.gates), fv, use_case,
                            where=f"{where}, gate from its {policy.label}")
    carve = (model.manifest.get("training_config") or {}).get("validation_split")
    keys = tuple(getattr(use_case, "group_keys", ()))
    data = _load_data(fv, model.training_dataset_version, carve, group_keys=keys)
    predictor, curves = _load_model(model, data.y_train)
    plan = plan_gates(policy, config.gates, task=task_of(predictor, data.y_train),
                      source=config.gate_source, replace=config.replace_gates,
                      threshold_strategy=config.threshold_strategy)
    settings = EvaluationSettings(
        threshold_strategy=plan.threshold_strategy, min_slice_size=config.min_slice_size,
        min_slice_positives=config.min_slice_positives,
        min_slice_negatives=config.min_slice_negatives, shap_samples=config.shap_samples,
        bootstrap_resamples=config.bootstrap_resamples, seed=config.seed,
        slice_bands=dict(use_case.slice_bands) if use_case else {},
        intersections=_intersections(use_case, data.helpers.columns),
        naive_forecast=use_case.naive_forecast if use_case else None,
    )
    result = evaluate(predictor, data, _new_card(model, fv, data), list(plan.gates), settings,
                      previous=_previous_best(registry, model))
    result.card.policy = plan.to_record()
    result.card.gate_selection["replaced_defaults"] = plan.replaced
    if curves is not None:
        from validation.learning_curves import learning_curves_png, scorecard_summary

        result.card.learning_curves = scorecard_summary(curves)
        result.images["learning_curves"] = learning_curves_png(curves)
    event = _record(model, result, predictor, owner, signer)

    return _ref(model, result.card, event)


def _check_gates_computable(gates: list[Any], fv: Any, use_case: Any, *, where: str) -> None:
    """The run's extra gates name only metrics and slice columns this validation computes
    (checked before the data and the model are loaded, so nothing is recorded)."""
    from validation.bias import INTERSECTION
    from validation.gates import check_computable

    keys = set(getattr(use_case, "group_keys", ()) or ())
    slices = [h for h in fv.training_helper_columns if h not in keys]
    slices += [INTERSECTION.join(p) for p in _intersections(use_case, slices)]
    task = None if use_case is None else {"classification": "binary"}.get(use_case.task,
                                                                          use_case.task)
    check_computable(gates, task=task, slices=slices, where=where)


def _trust_list(model: Any) -> Any:
    """The store's verified trust list, or None when it keeps none: a stored policy file is
    checked against it (an owner's signature; unsigned only from before it began)."""
    store = model.trust_store
    return None if store is None else store.load()


def _intersections(use_case: Any, columns: Any) -> tuple[tuple[str, str], ...]:
    """The use case's pairs of helper columns to slice by together, those the data has."""
    pairs = tuple(getattr(use_case, "slice_intersections", ()) or ())
    return tuple(p for p in pairs if set(p) <= set(columns))


def _record(model: Any, result: Any, predictor: Any, owner: Any, signer: Any) -> dict[str, Any]:
    """Write the run's files and record through the registry (append-only), signed by
    ``signer`` (None: unsigned), whom the model card names as the signer of the owner's texts."""
    from validation.gates import failing_gates
    from validation.model_card import build_model_card, model_facts

    card = result.card
    if card.status == "no gates":
        card.notes.append("No acceptance gate was configured: the version is marked failed "
                          "until gates are defined.")

    policy = card.policy or {}
    status = run_status("passed" if verdict_of(card.status) == "passed" else "failed",
                        deviation=bool(policy.get("deviation")))
    model_card = build_model_card(
        card, model_facts(model.manifest, predictor), owner,
        signed_by=None if signer is None else signer_text({"signer": signer.block()}))
    history = model.history()  # this run's page lists the sign-offs so far
    seq = max((int(e["seq"]) for e in history), default=0) + 1
    scorecard_json = card.to_json().encode()
    files = {"scorecard.json": scorecard_json,
             "scorecard.md": card.to_markdown(history, seq).encode(),
             "scorecard.html": card.to_html(result.images, history, seq).encode(),
             "model_card.md": model_card.to_markdown().encode(),
             "model_card.html": model_card.to_html(result.images).encode(),
             "model_card.json": _json_bytes(model_card.to_dict()),
             **{f"images/{_file_name(name)}.png": png for name, png in result.images.items()}}

    payload = {
        "scorecard_sha256": sha256_bytes(scorecard_json),
        "gates": (card.gates or {}).get("results", []),
        "replaced_default_gates": card.gate_selection.get("replaced_defaults", False),
        "policy": {k: policy.get(k) for k in ("source", "label", "version", "sha256",
                                              "file_sha256", "signed_by")},
        "policy_deviation": list(policy.get("deviations") or []),
        "failing_gates": failing_gates(card.gates),
        "metrics": {k: v for k, v in card.gate_metrics().items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool) and "[" not in k},
        "evaluation": card.evaluation,
    }
    return model.record_validation(status, payload, files, signer=signer)


def _json_bytes(data: dict[str, Any]) -> bytes:
    """Canonical JSON of a run's structured file (the model card, for the dossier)."""
    return dumps(data).encode("utf-8")


def _file_name(plot: str) -> str:
    """A plot's name as an attachment file name both registries accept: ASCII letters, digits,
    ``_ . -`` (``slices_sex×race`` → ``slices_sex_x_race``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", plot.replace("×", "_x_")).lstrip("._") or "plot"


def latest_ref(project: Project, name: str, version: int) -> ValidationRef | None:
    """The newest validation run of ``name:version`` as a :class:`ValidationRef` (what
    :func:`run` returned for it), or None when it was never validated: a re-run on unchanged
    inputs reports it instead of adding a run (so a sign-off on it stays attached)."""
    model = project.get_model_registry().get_model(name, version)
    event = model.latest_validation()
    if event is None:
        return None
    metrics = event.get("metrics") or {}
    task = ("regression" if "rmse" in metrics else "generation" if "perplexity" in metrics
            else "classification")
    return _ref(model, SimpleNamespace(task=task, metrics=metrics), event)


def _ref(model: Any, card: Any, event: dict[str, Any]) -> ValidationRef:
    key = ("rmse" if card.task == "regression" else "perplexity" if card.task == "generation"
           else "roc_auc" if "roc_auc" in card.metrics else "accuracy")
    value = card.metrics.get(key)
    return ValidationRef(ModelRef(model.name, model.version), event["status"], key,
                         None if value is None else float(value),
                         str(Path(model.model_path) / event_dir(event["seq"]) / "scorecard.html"),
                         failing_gates=tuple(event["failing_gates"]), run=event["seq"],
                         deviations=tuple(event.get("policy_deviation") or ()),
                         versus_baseline=versus_base_model(card.metrics))


def versus_base_model(metrics: dict[str, Any]) -> str | None:
    """A fine-tuned language model's perplexity and exact match beside its base model's
    (without the adapter) on the same test rows; None for other tasks."""
    if metrics.get("base_perplexity") is None:
        return None

    def figure(value: Any) -> str:
        return "n/a" if value is None else f"{float(value):.2f}"

    return (f"perplexity {figure(metrics.get('perplexity'))} with the adapter vs "
            f"{figure(metrics['base_perplexity'])} for the base without it; exact match "
            f"{figure(metrics.get('exact_match'))} vs {figure(metrics.get('base_exact_match'))} "
            f"on {int(metrics.get('exact_match_rows') or 0)} short-answer test rows")
