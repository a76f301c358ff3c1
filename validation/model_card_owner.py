"""What the model owner writes on a model card: the ``model_cards/<model>.yaml`` file, checked
strictly, and the claims in it that the generated findings contradict.

The file maps keys to text. Owner text is always shown *beside* the generated findings,
labelled as the owner's, never in their place (``{replace: ...}`` is refused). Keys:

* the items a reviewer needs from the owner, which alone make up the card's completeness:
  ``intended_use``, ``out_of_scope_uses``, ``users``, ``limitations``, ``data_provenance``
  (a mapping: ``source``, ``period``, ``licence``, optional ``notes``), ``owner``, ``contact``;
* optional notes beside a generated section: ``model_details``,
  ``feature_view_and_training_data``, ``performance``, ``bias_evaluation``, ``deployment``,
  ``monitoring``, ``explainability``, ``responsible_ai``, ``references``.

A value is text, or ``{append: text}`` (the older spelling, same meaning). Unknown keys, empty
texts and other shapes are refused with a :class:`ConfigError` naming the key (and the closest
known one), before any validation work starts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fstrain.kernel.errors import ConfigError, did_you_mean

#: Owner keys a reviewer needs (YAML path → label), in card order: completeness counts these.
REQUIRED: dict[str, str] = {
    "intended_use": "Intended use",
    "out_of_scope_uses": "Out-of-scope uses",
    "users": "Users",
    "limitations": "Limitations",
    "data_provenance.source": "Data source",
    "data_provenance.period": "Data collection period",
    "data_provenance.licence": "Data licence or consent",
    "owner": "Owner",
    "contact": "Contact",
}
#: Optional owner notes beside a generated section (key → label).
OPTIONAL: dict[str, str] = {
    "model_details": "Notes on the model",
    "feature_view_and_training_data": "Notes on the training data",
    "data_provenance.notes": "Notes on the data",
    "performance": "Notes on performance",
    "bias_evaluation": "Notes on bias",
    "deployment": "Deployment and retraining plan",
    "monitoring": "Monitoring plan",
    "explainability": "Notes on explainability",
    "responsible_ai": "Responsible AI",
    "references": "References",
}
PROVENANCE_KEYS = ("source", "period", "licence", "notes")
TOP_KEYS: tuple[str, ...] = tuple(dict.fromkeys(
    k.split(".")[0] for k in (*REQUIRED, *OPTIONAL)))
UNSIGNED = "unsigned"


@dataclass(frozen=True)
class OwnerFile:
    """The owner's texts (flat key → text, e.g. ``data_provenance.source``), and where they
    came from: the file (None for texts passed in Python) and its sha256."""

    texts: Mapping[str, str]
    path: str | None = None
    sha256: str | None = None

    def describe(self) -> str:
        """``in model_cards/x.yaml, sha256 1a2b3c4d5e6f`` or ``(texts passed in Python)``."""
        if self.path is None:
            return "(texts passed in Python)"
        return f"in {self.path}, sha256 {(self.sha256 or '')[:12]}"


def _text(source: str, key: str, value: Any) -> str:
    if isinstance(value, Mapping) and len(value) == 1 and "append" in value:
        value = value["append"]
    elif isinstance(value, Mapping) and "replace" in value:
        raise ConfigError(
            f"{source}: section {key!r} uses {{replace: ...}}, but owner text never replaces "
            f"the generated findings: it is shown beside them, labelled as the owner's. Write "
            f"the text directly ({key}: \"...\")."
        )
    if not isinstance(value, str):
        raise ConfigError(
            f"{source}: section {key!r} must be text (or {{append: text}}). Got {value!r:.80} "
            "instead."
        )
    if not value.strip():
        raise ConfigError(f"{source}: section {key!r} has empty text; remove the entry or "
                          "write the section.")
    return value.strip()


def validate_owner_texts(data: Any, *, source: str = "model_card.yaml") -> dict[str, str]:
    """Check an owner mapping (as read from YAML); return flat key → text."""
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{source} must map section keys to text. Got a {type(data).__name__} instead. "
            f"Known keys: {', '.join(TOP_KEYS)}."
        )
    out: dict[str, str] = {}
    for key, value in data.items():
        key = str(key)
        if key not in TOP_KEYS:
            raise ConfigError(
                f"{source}: unknown model-card section {key!r}.{did_you_mean(key, TOP_KEYS)}"
                f" Known sections: {', '.join(TOP_KEYS)}."
            )
        if key == "data_provenance" and isinstance(value, Mapping) and not (
                set(value) <= {"append", "replace"}):
            for sub, text in value.items():
                if sub not in PROVENANCE_KEYS:
                    raise ConfigError(
                        f"{source}: unknown data_provenance key {sub!r}."
                        f"{did_you_mean(str(sub), PROVENANCE_KEYS)} Known keys: "
                        f"{', '.join(PROVENANCE_KEYS)}.")
                out[f"data_provenance.{sub}"] = _text(source, f"data_provenance.{sub}", text)
        elif key == "data_provenance":
            out["data_provenance.notes"] = _text(source, key, value)
        else:
            out[key] = _text(source, key, value)
    return out


def load_owner_file(path: str | Path, *, missing_ok: bool = True,
                    shown_as: str | None = None) -> OwnerFile:
    """Read and check ``model_cards/<model>.yaml``; a missing file gives no texts when
    ``missing_ok``. ``shown_as`` is how the card names the file (default: ``path``)."""
    p = Path(path)
    if not p.exists():
        if missing_ok:
            return OwnerFile({})
        raise ConfigError(f"Model-card file {str(p)!r} does not exist.")
    raw = p.read_bytes()
    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: not valid YAML ({exc}).") from exc
    return OwnerFile(validate_owner_texts(data or {}, source=str(p)), shown_as or str(p),
                     hashlib.sha256(raw).hexdigest())


def as_owner_file(texts: OwnerFile | Mapping[str, Any] | None) -> OwnerFile:
    """An :class:`OwnerFile` from one, from raw YAML data, or from nothing."""
    if isinstance(texts, OwnerFile):
        return texts
    return OwnerFile(validate_owner_texts(texts or {}, source="model-card owner texts"))


# --------------------------------------------------------------------------------------------
# contradictions: owner claims the run's own findings refute
# --------------------------------------------------------------------------------------------

_FAIRNESS_CLAIMS = re.compile(
    r"\bno\s+(?:known\s+|significant\s+|material\s+|evidence\s+of\s+)?(?:bias(?:es)?|"
    r"fairness\s+(?:concerns?|issues?|problems?|risks?)|discrimination|disparit(?:y|ies)|"
    r"disparate\s+impact)\b"
    r"|\b(?:unbiased|bias[- ]free|free\s+(?:of|from)\s+bias|not\s+biased|fair\s+(?:to|for|"
    r"across)\s+all)\b"
    r"|\btreats?\s+(?:all\s+)?(?:groups|people|applicants|customers|everyone)\s+"
    r"(?:equally|fairly)\b",
    re.IGNORECASE)
_PASS_CLAIMS = re.compile(
    r"\b(?:pass(?:es|ed)?|meets|met|satisf(?:ies|ied))\s+(?:all\s+)?(?:of\s+)?(?:its\s+|the\s+)?"
    r"(?:acceptance\s+)?(?:gates|criteria|checks|validation)\b", re.IGNORECASE)


def _quote(text: str, match: re.Match[str]) -> str:
    """The sentence around a match (at most 160 characters)."""
    start = max(text.rfind(".", 0, match.start()) + 1, 0)
    end = text.find(".", match.end())
    sentence = text[start:end + 1 if end >= 0 else len(text)].strip()
    return sentence if len(sentence) <= 160 else sentence[:157] + "..."


def contradictions(texts: Mapping[str, str], *, failed_fairness: list[str],
                   bias_evaluated: bool, failed_gates: list[str]) -> dict[str, list[str]]:
    """Owner key → the contradictions found in its text.

    Args:
        texts: flat owner key → text.
        failed_fairness: the failed fairness gates (one line each, with value and limit).
        bias_evaluated: whether the run evaluated bias at all.
        failed_gates: every failed gate (one line each).
    """
    out: dict[str, list[str]] = {}
    for key, text in texts.items():
        found = []
        claim = _FAIRNESS_CLAIMS.search(text)
        if claim and failed_fairness:
            found.append(f"The owner writes \u201c{_quote(text, claim)}\u201d, but fairness "
                         f"gate(s) failed on this run: {'; '.join(failed_fairness)}.")
        elif claim and not bias_evaluated:
            found.append(f"The owner writes \u201c{_quote(text, claim)}\u201d, but this run "
                         "evaluated no bias (the view has no helper columns to slice by).")
        claim = _PASS_CLAIMS.search(text)
        if claim and failed_gates:
            found.append(f"The owner writes \u201c{_quote(text, claim)}\u201d, but acceptance "
                         f"gate(s) failed on this run: {'; '.join(failed_gates)}.")
        if found:
            out[key] = found
    return out
