"""The facts of a model card that fstrain generates: read from the validation run's scorecard
and the model version's manifest (and, through :func:`model_facts`, the loaded model). These
are the findings owner text is shown beside and never replaces."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from validation.fairness import DISPARITY_FIGURES
from validation.render import fmt, fmt_delta


def _first(mapping: Mapping[str, Any], *keys: str) -> Any:
    for k in keys:
        if mapping.get(k) not in (None, "", [], {}):
            return mapping[k]
    return None


def _kv(mapping: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in mapping.items())


def generate(card: Mapping[str, Any], manifest: Mapping[str, Any]) -> dict[str, list[str]]:
    """Section key → the facts fstrain generates for it from the scorecard and the manifest."""
    lineage = card.get("lineage", {})
    helpers = [d["column"] for d in (card.get("bias") or {}).get("disparities", [])]
    features = _first(manifest, "features", "feature_names")
    intended = _first(manifest, "intended_use", "description")
    responsible: list[str] = []
    if helpers:
        responsible.append("Protected attributes evaluated for bias: " + ", ".join(helpers))
        responsible += _helper_feature_check(helpers, features)
    return {
        "intended_use": [f"Description from the model manifest: {intended}"] if intended else [],
        "model_details": _model_details(card, manifest),
        "feature_view_and_training_data": _training_data(card, manifest, helpers, features),
        "data_provenance": _provenance(lineage),
        "performance": _performance(card),
        "bias_evaluation": bias_facts(card),
        "limitations": _limitations(card),
        "deployment": _deployment(card, manifest),
        "monitoring": [],
        "explainability": _explainability(card.get("explanation"),
                                          card.get("explanation_error")),
        "responsible_ai": responsible,
        "owner_and_contact": [],
        "references": [],
    }


def _model_details(card: Mapping[str, Any], manifest: Mapping[str, Any]) -> list[str]:
    facts = [f"Name/version: {card['model_name']} / {card['model_version']}",
             f"Task: {card['task']}"]
    framework = _first(manifest, "framework", "flavor")
    arch = _first(manifest, "architecture", "model_type", "model_class")
    if framework:
        facts.append(f"Framework: {framework}")
    if arch:
        facts.append(f"Architecture: {arch}")
    files = manifest.get("files")
    if isinstance(files, Mapping) and files:
        facts.append("Model files (sha256 checked on load): " + ", ".join(files))
    return facts


def _training_data(card: Mapping[str, Any], manifest: Mapping[str, Any], helpers: list[str],
                   features: Any) -> list[str]:
    """Feature view, training data, signature, inputs, outputs, helper columns and label."""
    lineage = card.get("lineage", {})
    facts = []
    for label, keys in (("Feature view", ("feature_view",)),
                        ("Training dataset version", ("training_dataset_version",
                                                      "training_dataset"))):
        v = _first(lineage, *keys) or _first(manifest, *keys)
        if v is not None:
            facts.append(f"{label}: {_kv(v) if isinstance(v, Mapping) else v}")
    commits = _first(lineage, "feature_group_commits", "feature_groups")
    if isinstance(commits, Mapping):
        facts += [f"Feature group {k}: {_kv(v) if isinstance(v, Mapping) else v}"
                  for k, v in commits.items()]
    signature = _first(manifest, "signature", "input_schema", "inputs") or _signature_text(
        manifest.get("model_schema"))
    if signature is not None:
        facts.append(f"Model signature: {signature}")
    if features:
        facts.append(f"Input features ({len(features)}): {', '.join(map(str, features))}")
    outputs = _first(manifest, "outputs")
    if outputs:
        facts.append(f"Outputs: {', '.join(map(str, outputs))}")
    if helpers:
        facts.append("Bias slices use the training helper columns " + ", ".join(helpers)
                     + " (helper columns are returned only for evaluation, not as features)")
        facts += _helper_feature_check(helpers, features)
    labels = _first(lineage, "labels", "label") or _first(manifest, "labels", "label")
    if labels:
        facts.append(f"Label: {labels}")
    return facts


_SHOWN_METRICS = ("roc_auc", "pr_auc", "f1", "precision", "recall", "accuracy", "log_loss",
                  "brier", "mae", "rmse", "r2")


def _performance(card: Mapping[str, Any]) -> list[str]:
    """Metrics with intervals, the threshold, calibration, baseline differences and the
    gates."""
    metrics = card.get("metrics", {})
    evaluation = card.get("evaluation", {})
    facts = []
    if evaluation:
        facts.append("Evaluated on: " + _kv(evaluation))
    shown = [m for m in _SHOWN_METRICS if m in metrics]
    cis = card.get("confidence_intervals", {})
    for m in shown:
        ci = cis.get(m)
        ci_txt = (f" (95% CI {fmt(ci['lower'])}–{fmt(ci['upper'])})"
                  if ci and ci.get("lower") is not None else "")
        facts.append(f"{m} ({evaluation.get('split', 'evaluation')} split): "
                     f"{fmt(metrics[m])}{ci_txt}")
    t = card.get("threshold")
    if t:
        facts.append(f"Decision threshold {fmt(t['threshold'])}: {t.get('detail', '')}")
        if t.get("warning"):
            facts.append(f"WARNING: {t['warning']}")
    cal = card.get("calibration")
    if cal:
        worse = set(cal.get("worse_than_constant") or ())
        facts.append(
            f"Calibration ({cal.get('split', 'test')} split): Brier {fmt(cal['brier'])} vs "
            f"{fmt(cal['brier_constant'])} for the constant predictor "
            f"({'WORSE' if 'brier' in worse else 'better'}), log-loss {fmt(cal['log_loss'])} vs "
            f"{fmt(cal['log_loss_constant'])} ({'WORSE' if 'log_loss' in worse else 'better'}), "
            f"expected calibration error {fmt(cal['ece'])}")
    for bname, diffs in card.get("baseline_differences", {}).items():
        parts = [f"{m} {fmt_delta(d['delta'])}" for m, d in diffs.items()
                 if m in shown and d["delta"] is not None]
        if parts:
            facts.append(f"Versus baseline '{bname}' (model − baseline): " + ", ".join(parts))
    gates = (card.get("gates") or {}).get("results", [])
    if gates:
        facts.append("Acceptance gates: " + "; ".join(f"{r['name']} → {r['status']}"
                                                      for r in gates))
    return facts


def _figure_text(d: Mapping[str, Any], fig: str) -> str:
    judged, every = d.get(fig), (d.get("all_groups") or {}).get(fig)
    ci = (d.get("intervals") or {}).get(fig)
    ci_txt = f" (95% CI {fmt(ci[0])}–{fmt(ci[1])})" if ci else ""
    text = f"{fig.replace('_', ' ')} {fmt(judged)}{ci_txt} over judged slices"
    return text + (f", {fmt(every)} over all groups" if d.get("all_groups") else "")


def bias_facts(card: Mapping[str, Any]) -> list[str]:
    """Per helper column: the disparity figures over judged slices and all groups, and the
    verdicts of the gates that judge them (the one source of limits)."""
    from validation.verdicts import disparity_verdicts, failed_fairness_gates, verdict_word

    bias = card.get("bias")
    if not bias:
        return []
    facts = []
    for d in bias.get("disparities", []):
        figures = "; ".join(_figure_text(d, f) for f in DISPARITY_FIGURES if f in d)
        facts.append(f"{d['column']}: {figures}. Judged slices: "
                     f"{', '.join(d['judged_slices']) or '(none)'}")
        verdicts = disparity_verdicts(d, card.get("gates"))
        if verdicts:
            facts.append(f"{d['column']}: gate verdicts: " + "; ".join(
                f"{v['gate']} (over {v['basis']}) → {verdict_word(v['passed'])}"
                for v in verdicts))
    failed = failed_fairness_gates(card.get("gates"))
    facts.append("Failed fairness gates: " + "; ".join(str(r["name"]) for r in failed)
                 if failed else "No fairness gate failed" if any(
                     disparity_verdicts(d, card.get("gates")) for d in bias["disparities"])
                 else "No acceptance gate judges a disparity figure on this run")
    return facts


def _limitations(card: Mapping[str, Any]) -> list[str]:
    """Slices not judged (each with its real reason), undefined metrics and failed gates."""
    bias = card.get("bias")
    facts = []
    if bias:
        skipped = [f"{s['column']}={s['value']} ({s['size']} rows; "
                   f"{s.get('judging') or 'not judged'})"
                   for s in bias.get("slices", []) if not s["judged"]]
        if skipped:
            facts.append("Slices not judged (too few rows, positives or negatives for the "
                         f"minimums {bias['min_slice_size']} rows, "
                         f"{bias.get('min_positives', 0)} positives, "
                         f"{bias.get('min_negatives', 0)} negatives): " + ", ".join(skipped))
    for m, reason in (card.get("metrics", {}).get("undefined") or {}).items():
        facts.append(f"{m} undefined on the evaluation data: {reason}")
    warning = (card.get("threshold") or {}).get("warning")
    if warning:
        facts.append(warning)
    gates = (card.get("gates") or {}).get("results", [])
    failed = [r["name"] for r in gates if r["status"] == "failed"]
    if failed:
        facts.append("Failed acceptance gates: " + ", ".join(failed))
    return facts


def _deployment(card: Mapping[str, Any], manifest: Mapping[str, Any]) -> list[str]:
    versions = card.get("library_versions", {})
    requirements = _first(manifest, "requirements")
    facts = []
    if versions:
        facts.append("Library versions at validation: " + _kv(versions))
    if requirements:
        facts.append(f"Pinned requirements: {', '.join(map(str, requirements))}")
    return facts


def _explainability(ex: Mapping[str, Any] | None, error: str | None) -> list[str]:
    if not ex:
        return [f"Explanation FAILED: {error}"] if error else []
    top = ex.get("global_importance", [])[:10]
    return [(f"Technique: {ex['method']} on {ex['n_rows']} evaluation rows "
             f"(explained output: {ex['output']})"),
            "Most important features (mean |SHAP|): "
            + ", ".join(f"{g_['feature']} {fmt(g_['mean_abs_shap'])}" for g_ in top)]


def _helper_feature_check(helpers: list[str], features: Any) -> list[str]:
    """What can be verified about helper columns leaking into the model inputs."""
    if not features:
        return ["Whether these columns are absent from the model inputs could not be checked: "
                "neither the manifest nor the model lists its input columns"]
    leaked = [h for h in helpers if h in {str(f) for f in features}]
    if leaked:
        return ["WARNING: " + ", ".join(leaked) + " also appear(s) among the model's input "
                "features"]
    return ["None of these columns is among the model's input features (checked against the "
            "registered input schema and the loaded model's input columns)"]


def _provenance(lineage: Mapping[str, Any]) -> list[str]:
    """What the lineage proves about the data: feature-group commits, split files' sha256,
    the split and its seed (the owner adds sources, consent and coverage)."""
    facts = []
    for name, commit in (lineage.get("feature_group_commits") or {}).items():
        facts.append(f"Feature group {name} read at commit {commit}")
    for split, sha in (lineage.get("training_dataset_sha256") or {}).items():
        facts.append(f"Training-dataset split '{split}' sha256 {sha}")
    if lineage.get("split"):
        facts.append(f"Split: {_kv(lineage['split']) if isinstance(lineage['split'], Mapping) else lineage['split']}"
                     f" (seed {lineage.get('seed')})")
    return facts


def _signature_text(model_schema: Any) -> str | None:
    if not isinstance(model_schema, Mapping):
        return None
    parts = []
    for part in ("input_schema", "output_schema"):
        cols = (model_schema.get(part) or {}).get("columnar_schema") or []
        if cols:
            parts.append(part.replace("_schema", "s") + " " + ", ".join(
                f"{c.get('name')}:{c.get('type')}" for c in cols))
    return "; ".join(parts) or None


def _schema_names(manifest: Mapping[str, Any], part: str) -> list[str]:
    schema = (manifest.get("model_schema") or {}).get(part) or {}
    return [str(c["name"]) for c in schema.get("columnar_schema") or [] if "name" in c]


def model_facts(manifest: Mapping[str, Any], model: Any = None) -> dict[str, Any]:
    """The manifest plus what the registered model itself says, in the keys the card reads:
    ``features`` (input columns from the registered input schema, joined with the loaded
    model's own input columns), ``outputs``, ``architecture`` and ``labels``.

    ``model`` is a loaded predictor (``kind``, ``labels``, ``schema``, ``explain_target``), or
    None to use the manifest alone.
    """
    facts = dict(manifest)
    inputs = _schema_names(manifest, "input_schema")
    own = list(getattr(getattr(model, "schema", None), "names", ()) or ())
    facts["features"] = list(dict.fromkeys([*inputs, *map(str, own)]))
    facts["input_sources"] = [s for s, cols in (("registered input schema", inputs),
                                                ("loaded model", own)) if cols]
    outputs = _schema_names(manifest, "output_schema")
    if outputs:
        facts["outputs"] = outputs
    if model is not None:
        facts["architecture"] = architecture(model, manifest)
        labels = getattr(model, "labels", None)
        if labels is not None:
            facts["labels"] = (f"{labels.name} (classes: {', '.join(map(str, labels.classes))})"
                               if labels.classes else f"{labels.name} (regression)")
    return facts


def architecture(model: Any, manifest: Mapping[str, Any]) -> str:
    """A one-line description of a loaded predictor: kind, estimator, size, hyperparameters."""
    target = model.explain_target
    inner = target.model
    parts = [f"{model.kind} ({type(inner).__module__.split('.')[0]}.{type(inner).__name__})"]
    if hasattr(inner, "num_boosted_rounds"):
        parts.append(f"{inner.num_boosted_rounds()} boosted trees")
    elif hasattr(inner, "num_trees"):
        parts.append(f"{inner.num_trees()} trees")
    elif hasattr(inner, "estimators_"):
        parts.append(f"{len(inner.estimators_)} trees")
    elif hasattr(inner, "coef_"):
        parts.append(f"{inner.coef_.shape[-1]} coefficients")
    if hasattr(inner, "named_modules"):
        layers = [f"{type(m).__name__}" for n, m in inner.named_modules()
                  if n and not list(m.children())]
        params = sum(int(p.numel()) for p in inner.parameters())
        parts.append(f"layers {' → '.join(layers)}; {params:,} parameters")
    parts.append(f"{len(target.feature_names)} model inputs after preprocessing")
    hyper = manifest.get("hyperparameters") or getattr(model, "params", None)
    if hyper:
        parts.append("hyperparameters " + _kv(hyper))
    return "; ".join(parts)
