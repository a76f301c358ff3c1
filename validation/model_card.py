"""Model cards: a one-page overview of a model version for governance and compliance.

The sections follow the model-card template of the training-pipelines chapter (intended use,
model details, feature view and training data, performance, bias, limitations, deployment,
monitoring, explainability, responsible AI, references). A pipeline can fill some of it
(typically 20–60 %): :func:`build_model_card` fills what the scorecard and the model-version
manifest know, and marks everything else **"To be completed by the model owner"**.

The owner completes the card in a per-model YAML file, ``model_card.yaml``, mapping a section
key (see :data:`SECTIONS`) to text. **Merge rule** (per section, independently):

* no entry                  → the generated facts, plus the "To be completed" prompt where the
  section needs information a pipeline cannot know;
* ``key: "text"``           → the owner's text *replaces* the whole section (generated facts
  included); ``key: {replace: "text"}`` is the same;
* ``key: {append: "text"}`` → the generated facts are kept and the owner's text follows them,
  taking the place of the "To be completed" prompt.

Unknown section keys, empty texts and other shapes are rejected with a :class:`ConfigError`
naming the key, so a typo never silently drops a section.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from fstrain.kernel.errors import ConfigError, did_you_mean
from validation.scorecard import (
    Scorecard,
    badge,
    esc,
    figures_html,
    fmt,
    fmt_delta,
    html_page,
    html_table,
)

TODO = "To be completed by the model owner"

#: Section key → (title, what the owner must provide when it cannot be generated).
SECTIONS: dict[str, tuple[str, str]] = {
    "intended_use": (
        "Intended use",
        "the model's main purpose, intended applications and stakeholders, and out-of-scope "
        "uses (situations where the model must not be used).",
    ),
    "model_details": (
        "Model details",
        "the model architecture (e.g. random forest, CNN, transformer).",
    ),
    "feature_view_and_training_data": (
        "Feature view and training data",
        "the feature view, the training data (size, feature groups) and the model signature.",
    ),
    "data_provenance": (
        "Data provenance",
        "where the source data comes from (owner, collection period, consent or licence) and "
        "known gaps in its coverage.",
    ),
    "performance": (
        "Performance evaluation",
        "evaluation metrics, the test dataset (size, split strategy), key results and the "
        "comparison with a baseline.",
    ),
    "bias_evaluation": (
        "Bias evaluation",
        "the evaluation datasets and bias tests performed.",
    ),
    "limitations": (
        "Potential risks and limitations",
        "the potential harms and limitations of the model.",
    ),
    "deployment": (
        "Deployment and maintenance",
        "the intended deployment environment (batch, online API, streaming, edge) and the "
        "retraining plan (planned updates and frequency).",
    ),
    "monitoring": (
        "Monitoring",
        "the monitoring strategy after deployment (feature and prediction drift, performance "
        "with delayed labels, alerting).",
    ),
    "explainability": (
        "Explainability and interpretability",
        "the key features driving decisions and the interpretability techniques used.",
    ),
    "responsible_ai": (
        "Responsible AI",
        "the regulatory frameworks followed (e.g. GDPR, EU AI Act), the feedback mechanism for "
        "users to report issues, and the cost of training and serving (energy use).",
    ),
    "references": (
        "References and contact",
        "links to code, papers and documentation, and whom to contact with questions.",
    ),
}


@dataclass(frozen=True)
class CardSection:
    """One section of a model card.

    ``source`` is ``"generated"``, ``"owner"`` (replaced), ``"generated+owner"`` (appended) or
    ``"todo"`` (nothing known yet).
    """

    key: str
    title: str
    facts: tuple[str, ...]
    owner_text: str | None
    todo: str | None
    source: str

    @property
    def complete(self) -> bool:
        """True when nothing is left for the owner to fill in."""
        return self.todo is None


@dataclass(frozen=True)
class ModelCard:
    """A model card: header fields and its sections in template order."""

    model_name: str
    model_version: str
    date: str
    status: str
    sections: tuple[CardSection, ...]

    def section(self, key: str) -> CardSection:
        """The section with ``key``."""
        for s in self.sections:
            if s.key == key:
                return s
        raise KeyError(f"No model-card section {key!r}.{did_you_mean(key, SECTIONS)}")

    @property
    def completeness(self) -> float:
        """Share of sections with nothing left to complete (0..1)."""
        return sum(s.complete for s in self.sections) / len(self.sections)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict."""
        return {
            "model_name": self.model_name, "model_version": self.model_version,
            "date": self.date, "status": self.status, "completeness": self.completeness,
            "sections": [
                {"key": s.key, "title": s.title, "facts": list(s.facts),
                 "owner_text": s.owner_text, "todo": s.todo, "source": s.source}
                for s in self.sections
            ],
        }

    def to_markdown(self) -> str:
        """The card as Markdown."""
        out = [f"# Model card: {self.model_name} v{self.model_version}", "",
               f"- **Model name/version:** {self.model_name} / {self.model_version}",
               f"- **Date:** {self.date}",
               f"- **Validation status:** {self.status}",
               f"- **Completeness:** {self.completeness:.0%} of sections complete", ""]
        for s in self.sections:
            out += [f"## {s.title}", ""]
            out += [f"- {f}" for f in s.facts]
            if s.facts:
                out.append("")
            if s.owner_text:
                out += [s.owner_text.rstrip(), ""]
            if s.todo:
                out += [f"> **{TODO}:** {s.todo}", ""]
        return "\n".join(out).rstrip() + "\n"

    def to_html(self, images: Mapping[str, bytes] | None = None) -> str:
        """The card as one self-contained HTML page (figures inlined under Performance)."""
        title = f"Model card: {self.model_name} v{self.model_version}"
        out = [f"<header><h1>{esc(title)}</h1><p>{badge(self.status)}</p>",
               html_table(["Item", "Value"], [
                   ["Model name", self.model_name], ["Version", self.model_version],
                   ["Date", self.date], ["Validation status", self.status],
                   ["Completeness", f"{self.completeness:.0%} of sections complete"],
               ]), "</header>"]
        for s in self.sections:
            out.append(f'<section id="{esc(s.key)}" data-source="{esc(s.source)}">'
                       f"<h2>{esc(s.title)}</h2>")
            if s.facts:
                out.append("<ul>" + "".join(f"<li>{esc(f)}</li>" for f in s.facts) + "</ul>")
            if s.owner_text:
                out.append("".join(f"<p>{esc(p)}</p>" for p in s.owner_text.split("\n\n")
                                   if p.strip()))
            if s.todo:
                out.append(f'<p class="todo"><strong>{esc(TODO)}:</strong> {esc(s.todo)}</p>')
            if s.key == "performance" and images:
                out.append(figures_html(images))
            out.append("</section>")
        return html_page(title, "\n".join(out))


# --------------------------------------------------------------------------------------------
# overrides
# --------------------------------------------------------------------------------------------

def validate_overrides(overrides: Mapping[str, Any], *, source: str = "model_card.yaml"
                       ) -> dict[str, tuple[str, str]]:
    """Check an overrides mapping; return section → ``(mode, text)`` with mode replace/append."""
    if not isinstance(overrides, Mapping):
        raise ConfigError(
            f"{source} must map section keys to text. Got a {type(overrides).__name__} instead. "
            f"Known sections: {', '.join(SECTIONS)}."
        )
    out: dict[str, tuple[str, str]] = {}
    for key, value in overrides.items():
        if key not in SECTIONS:
            raise ConfigError(
                f"{source}: unknown model-card section {key!r}.{did_you_mean(str(key), SECTIONS)}"
                f" Known sections: {', '.join(SECTIONS)}."
            )
        if isinstance(value, str):
            mode, text = "replace", value
        elif isinstance(value, Mapping) and len(value) == 1 and next(iter(value)) in (
            "replace", "append"
        ):
            mode, text = next(iter(value.items()))
        else:
            raise ConfigError(
                f"{source}: section {key!r} must be text, {{replace: text}} or {{append: text}}."
                f" Got {value!r:.80} instead."
            )
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{source}: section {key!r} has empty text; remove the entry or "
                              "write the section.")
        out[key] = (mode, text.strip())
    return out


def load_overrides(path: str | Path, *, missing_ok: bool = True) -> dict[str, tuple[str, str]]:
    """Read and validate a ``model_card.yaml``; a missing file gives no overrides when
    ``missing_ok``."""
    import yaml

    p = Path(path)
    if not p.exists():
        if missing_ok:
            return {}
        raise ConfigError(f"Model-card overrides file {str(p)!r} does not exist.")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML ({exc}).") from exc
    return validate_overrides(data or {}, source=str(p))


# --------------------------------------------------------------------------------------------
# generation
# --------------------------------------------------------------------------------------------

def _first(mapping: Mapping[str, Any], *keys: str) -> Any:
    for k in keys:
        if mapping.get(k) not in (None, "", [], {}):
            return mapping[k]
    return None


def _kv(mapping: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in mapping.items())


Section = tuple[list[str], bool]


def _generate(card: Mapping[str, Any], manifest: Mapping[str, Any]) -> dict[str, Section]:
    """Section → (facts, needs owner input)."""
    lineage = card.get("lineage", {})
    helpers = [d["column"] for d in (card.get("bias") or {}).get("disparities", [])]
    features = _first(manifest, "features", "feature_names")
    intended = _first(manifest, "intended_use", "description")
    bias = card.get("bias")
    g: dict[str, Section] = {
        "intended_use": ([f"Description from the model manifest: {intended}"] if intended
                         else [], True),
        "model_details": _model_details(card, manifest),
        "feature_view_and_training_data": _training_data(card, manifest, helpers, features),
        "data_provenance": (_provenance(lineage), True),
        "performance": _performance(card),
        "bias_evaluation": (_bias_facts(bias), not bias),
        "limitations": (_limitations(card), True),
        "deployment": (_deployment(card, manifest), True),
        "monitoring": ([], True),
    }
    ex = card.get("explanation")
    g["explainability"] = (_explainability(ex), not ex)
    facts: list[str] = []
    if helpers:
        facts.append("Protected attributes evaluated for bias: " + ", ".join(helpers))
        facts += _helper_feature_check(helpers, features)
    g["responsible_ai"] = (facts, True)
    g["references"] = ([], True)
    return g


def _model_details(card: Mapping[str, Any], manifest: Mapping[str, Any]) -> Section:
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
    return facts, arch is None


def _training_data(card: Mapping[str, Any], manifest: Mapping[str, Any], helpers: list[str],
                   features: Any) -> Section:
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
    return facts, not facts or signature is None


_SHOWN_METRICS = ("roc_auc", "pr_auc", "f1", "precision", "recall", "accuracy", "log_loss",
                  "brier", "mae", "rmse", "r2")


def _performance(card: Mapping[str, Any]) -> Section:
    """Metrics with intervals, the threshold, baseline differences and the gates."""
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
    for bname, diffs in card.get("baseline_differences", {}).items():
        parts = [f"{m} {fmt_delta(d['delta'])}" for m, d in diffs.items()
                 if m in shown and d["delta"] is not None]
        if parts:
            facts.append(f"Versus baseline '{bname}' (model − baseline): " + ", ".join(parts))
    gates = (card.get("gates") or {}).get("results", [])
    if gates:
        facts.append("Acceptance gates: " + "; ".join(f"{r['name']} → {r['status']}"
                                                      for r in gates))
    return facts, not shown


def _bias_facts(bias: Mapping[str, Any] | None) -> list[str]:
    if not bias:
        return []
    return [
        f"{d['column']}: demographic parity difference "
        f"{fmt(d['demographic_parity_difference'])}, equal opportunity difference "
        f"{fmt(d['equal_opportunity_difference'])}, AUC gap {fmt(d['auc_gap'])} over "
        f"slices {', '.join(d['judged_slices']) or '(none)'}"
        for d in bias.get("disparities", [])
    ]


def _limitations(card: Mapping[str, Any]) -> list[str]:
    """Slices too small to judge, undefined metrics and failed gates."""
    bias = card.get("bias")
    facts = []
    if bias:
        small = [f"{s['column']}={s['value']} ({s['size']} rows)" for s in bias.get("slices", [])
                 if not s["judged"]]
        if small:
            facts.append(f"Slices too small to judge (< {bias['min_slice_size']} rows): "
                         + ", ".join(small))
    for m, reason in (card.get("metrics", {}).get("undefined") or {}).items():
        facts.append(f"{m} undefined on the evaluation data: {reason}")
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


def _explainability(ex: Mapping[str, Any] | None) -> list[str]:
    if not ex:
        return []
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


def build_model_card(
    scorecard: Scorecard | Mapping[str, Any],
    manifest: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    card_date: str | None = None,
) -> ModelCard:
    """Fill the model-card template from a scorecard and a model-version manifest.

    Args:
        scorecard: a :class:`~validation.scorecard.Scorecard` or its ``to_dict()``.
        manifest: the model version's manifest; read (when present): ``description`` /
            ``intended_use``, ``framework``, ``architecture``/``model_type``, ``files``,
            ``signature``/``input_schema``, ``features``, ``labels``, ``requirements``,
            ``feature_view``, ``training_dataset_version``.
        overrides: owner texts, raw (as read from YAML) or from :func:`load_overrides`; merged
            as the module docstring describes.
        card_date: the card's date (default: today, ISO format).

    Returns:
        A :class:`ModelCard`.
    """
    card = scorecard.to_dict() if isinstance(scorecard, Scorecard) else dict(scorecard)
    if "baseline_differences" not in card or "status" not in card:
        card = Scorecard.from_dict(card).to_dict()
    manifest = dict(manifest or {})
    parsed: dict[str, tuple[str, str]]
    if overrides and all(isinstance(v, tuple) for v in overrides.values()):
        parsed = dict(overrides)  # already validated by load_overrides
    else:
        parsed = validate_overrides(overrides or {}, source="model-card overrides")
    generated = _generate(card, manifest)
    sections = []
    for key, (title, prompt) in SECTIONS.items():
        facts, needs_owner = generated[key]
        if key in parsed:
            mode, text = parsed[key]
            if mode == "replace":
                sections.append(CardSection(key, title, (), text, None, "owner"))
            else:
                sections.append(CardSection(key, title, tuple(facts), text, None,
                                            "generated+owner" if facts else "owner"))
        elif needs_owner:
            sections.append(CardSection(key, title, tuple(facts), None, prompt,
                                        "generated" if facts else "todo"))
        else:
            sections.append(CardSection(key, title, tuple(facts), None, None, "generated"))
    return ModelCard(
        model_name=str(card["model_name"]),
        model_version=str(card["model_version"]),
        date=card_date or date.today().isoformat(),
        status=str(card.get("status", "no gates")),
        sections=tuple(sections),
    )


__all__ = [
    "SECTIONS", "TODO", "CardSection", "ModelCard", "architecture", "build_model_card",
    "load_overrides", "model_facts", "validate_overrides",
]
