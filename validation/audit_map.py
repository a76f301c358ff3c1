"""What auditors ask for, item by item, and where a dossier answers each (or that it does not).

The items are the EU AI Act's Annex IV (technical documentation of a high-risk AI system) and
the US supervisors' SR 11-7 (model risk management), summarised in our own words from
``reference/audit-frameworks.md``. :func:`framework_rows` reads a dossier (its JSON form,
:mod:`validation.dossier`) and gives one row per item: ``answered``, ``partly`` or ``not
answered``, the dossier section that answers it, and a sentence saying what is there and what
is missing. An item fstrain cannot answer says so plainly instead of pointing at something
near it. This is a checklist for a reviewer, not legal advice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

ANSWERED, PARTLY, NOT_ANSWERED = "answered", "partly", "not answered"
ANNEX_IV = "EU AI Act Annex IV"
SR_11_7 = "SR 11-7"

Answer = tuple[str, str, str]  # (status, dossier section anchor or "", sentence)


@dataclass(frozen=True)
class Item:
    """One auditor item: its framework, reference, what it asks, and how to answer it."""

    framework: str
    ref: str
    asks: str
    answer: Callable[[Mapping[str, Any]], Answer]


def _owner(d: Mapping[str, Any], *keys: str) -> list[str]:
    """Those of ``keys`` the model card holds the owner's text for: an owner text of that key
    (``data_provenance`` for any of its parts), or for a card recorded before owner texts
    were kept apart, a section of that key whose source names the owner."""
    written: set[str] = set()
    for section in (d.get("model_card") or {}).get("sections", []):
        texts = section.get("owner")
        if isinstance(texts, list):
            written |= {str(t.get("key", "")).split(".")[0] for t in texts}
        elif "owner" in str(section.get("source", "")):
            written.add(str(section.get("key")))
    return [k for k in keys if k in written]


def _runs(d: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(d.get("scorecards") or [])


def _verified(d: Mapping[str, Any]) -> bool:
    return bool((d.get("verification") or {}).get("ok"))


def _signed(d: Mapping[str, Any]) -> bool:
    history = d.get("history") or []
    return bool(history) and all(e.get("signer") for e in history)


def _general(d: Mapping[str, Any]) -> Answer:
    owner = _owner(d, "intended_use", "deployment")
    has = "name, version, framework and library versions, code version"
    if "intended_use" in owner:
        return (ANSWERED if "deployment" in owner else PARTLY, "#model-card",
                f"{has}; the intended purpose in the owner's words"
                + ("; deployment and instructions for use in the owner's words." if "deployment"
                   in owner else "; no owner text on deployment or instructions for use."))
    return (PARTLY, "#model", f"{has}. The owner has not stated the intended purpose, the "
            "provider or instructions for use (model card: to be completed).")


def _methods(d: Mapping[str, Any]) -> Answer:
    if (d.get("training") or {}).get("trainer"):
        return (ANSWERED, "#training", "the recorded training configuration (trainer, tuning, "
                "cross-validation, imbalance handling, seeds), the code version and the "
                "library versions it ran with.")
    return (PARTLY, "#training", "the code and library versions only: this version was "
            "registered without fstrain's training record (an external model).")


def _design(d: Mapping[str, Any]) -> Answer:
    owner = _owner(d, "model_details", "limitations")
    why = ("; rationale and assumptions in the owner's words" if owner
           else "; the rationale for the design choices and its assumptions are not stated")
    return (ANSWERED if owner else PARTLY, "#training",
            "hyperparameters and what the training optimised (its metric, early stopping)"
            + why + ".")


def _compute(d: Mapping[str, Any]) -> Answer:
    training = d.get("training") or {}
    seen = [k for k in ("device", "distributed", "timings") if training.get(k)]
    return (PARTLY, "#training", "the model kind and size from the model card"
            + (f"; the compute record ({', '.join(seen)})" if seen else "")
            + ". Resources used for testing and validation are not recorded.")


def _data(d: Mapping[str, Any]) -> Answer:
    lineage = d.get("lineage") or {}
    if not lineage.get("training_dataset_version"):
        return (NOT_ANSWERED, "#lineage", "this version was registered without its lineage: "
                "no training dataset, feature-group commits or content hashes to show.")
    provenance = "data_provenance" in _owner(d, "data_provenance")
    return (ANSWERED if provenance else PARTLY, "#lineage",
            "feature-group commits, the training-dataset version, its split, seed, per-split "
            "content sha256, rows and label distribution"
            + ("; the data's source, period and licence in the owner's words." if provenance
               else ". The data's source, collection period and licence are not stated by "
               "the owner."))


def _oversight(d: Mapping[str, Any]) -> Answer:
    signoffs = [e for e in d.get("history") or [] if e.get("kind") in ("approval", "rejection")]
    text = (f"{len(signoffs)} reviewer sign-off(s) with the four-eyes rule"
            if signoffs else "no reviewer has signed off this version yet")
    return (PARTLY, "#history", f"{text}; the scorecards' explanations (SHAP) help interpret "
            "outputs. The oversight measures needed in operation are the operator's to state.")


def _validation(d: Mapping[str, Any]) -> Answer:
    runs = _runs(d)
    if not runs:
        return (NOT_ANSWERED, "#scorecards", "this version was never validated: no test "
                "report.")
    return (ANSWERED, "#scorecards", f"{len(runs)} validation run(s): the gates and where they "
            "came from, the test split (rows, content sha256), metrics with intervals, "
            "baselines, calibration and subgroup figures for discriminatory impact.")


def _dated_signed(d: Mapping[str, Any]) -> Answer:
    if not d.get("history"):
        return (NOT_ANSWERED, "#history", "no test log: the version has no history record.")
    if not _verified(d):
        return (NOT_ANSWERED, "#verification", "the signed history does NOT verify (see the "
                "verification results): its dates and signatures cannot be relied on.")
    if not _signed(d):
        return (PARTLY, "#history", "every record is dated, hashed and chained, but unsigned: "
                "the store has no trust list, so no responsible person signed them.")
    return (ANSWERED, "#history", "every record is dated and signed (person, role, key "
            "fingerprint) and verifies against the trust list and its chain head.")


def _security(d: Mapping[str, Any]) -> Answer:
    return (PARTLY, "#verification", "the integrity of the artefacts: sha256 of every file, "
            "safe model formats, signed records. No threat model or resilience testing is "
            "recorded.")


def _groups(d: Mapping[str, Any]) -> Answer:
    runs = _runs(d)
    if not runs:
        return (NOT_ANSWERED, "#scorecards", "never validated: no accuracy figures.")
    sliced = any(r.get("slices") for r in runs)
    limits = "limitations" in _owner(d, "limitations")
    return (ANSWERED if sliced and limits else PARTLY, "#scorecards",
            "overall accuracy with intervals" + ("; accuracy per group (slices)" if sliced
                                                 else "; no subgroup figures")
            + ("; limitations in the owner's words" if limits
               else "; the owner has not stated the limitations or foreseeable misuse")
            + "; the input specification (model schema).")


def _metric_choice(d: Mapping[str, Any]) -> Answer:
    return (PARTLY, "#scorecards", "which gates and metrics judged the version and where each "
            "came from (use-case policy, command line). Why these metrics suit the system is "
            "not stated unless the owner wrote it in the model card.")


def _not_covered(sentence: str) -> Callable[[Mapping[str, Any]], Answer]:
    return lambda d: (NOT_ANSWERED, "", sentence)


def _changes(d: Mapping[str, Any]) -> Answer:
    return (PARTLY, "#history", "every change to this version (validation runs, sign-offs, "
            "policy deviations, overrides) in order, and the model's other versions with their "
            "training data; `fstrain registry diff` compares two versions.")


def _records(d: Mapping[str, Any]) -> Answer:
    return (PARTLY, "#history", "the append-only history and this dossier. Keeping them for "
            "ten years is the operator's duty; fstrain does not enforce retention.")


def _purpose(d: Mapping[str, Any]) -> Answer:
    if _owner(d, "intended_use"):
        return ANSWERED, "#model-card", "the intended use in the owner's words."
    return (NOT_ANSWERED, "#model-card", "the owner has not stated the model's purpose (model "
            "card: to be completed).")


def _testing(d: Mapping[str, Any]) -> Answer:
    if not _runs(d):
        return NOT_ANSWERED, "#scorecards", "never validated."
    return (PARTLY, "#scorecards", "accuracy with bootstrap intervals, calibration, subgroup "
            "stability and baselines on the held-out test split. Behaviour outside expected "
            "inputs (stress tests) is not tested.")


def _challenge(d: Mapping[str, Any]) -> Answer:
    approvals = [e for e in d.get("history") or [] if e.get("kind") == "approval"]
    if not approvals:
        return NOT_ANSWERED, "#history", "no reviewer has approved this version."
    if not (_signed(d) and _verified(d)):
        return (PARTLY, "#history", "approved, but the records are unsigned or do not "
                "verify, so the approver's independence cannot be shown.")
    return (ANSWERED, "#history", "approved by a signed reviewer who neither trained nor "
            "validated it (the four-eyes rule compares persons).")


def _soundness(d: Mapping[str, Any]) -> Answer:
    return (PARTLY, "#scorecards", "baselines the model must beat and the design in the model "
            "card. A comparison with published research or industry practice is the "
            "validator's to write.")


def _monitoring(d: Mapping[str, Any]) -> Answer:
    return (PARTLY, "#verification", "process verification (files, records and chain "
            "checked), benchmarking against baselines and the previous best version, and every "
            "override with its reason. Monitoring in production (drift, delayed labels) is not "
            "covered yet.")


def _outcomes(d: Mapping[str, Any]) -> Answer:
    return (PARTLY, "#scorecards", "back-testing on a held-out test split with pinned "
            "feature-group commits. Outputs are not compared with outcomes after deployment.")


def _cadence(d: Mapping[str, Any]) -> Answer:
    runs = _runs(d)
    last = max((str(r.get("created") or "") for r in runs), default="")
    return (PARTLY, "#scorecards", (f"last validated {last[:10]}" if last else "never validated")
            + "; fstrain does not schedule yearly revalidation.")


def _governance(d: Mapping[str, Any]) -> Answer:
    return (PARTLY, "#verification", "roles are enforced through the trust list (who may "
            "train, validate, approve, enrol) and gates come from a policy. The policies and "
            "procedures themselves are the organisation's.")


def _inventory(d: Mapping[str, Any]) -> Answer:
    return (ANSWERED, "#versions", "this model's versions are listed here; `fstrain registry "
            "list` is the inventory of every model.")


def _third_party(d: Mapping[str, Any]) -> Answer:
    return (ANSWERED, "#model", "this dossier: one folder with the card, every scorecard, the "
            "signed history and its verification, and the lineage.")


def _vendor(d: Mapping[str, Any]) -> Answer:
    loader = (d.get("model") or {}).get("loader")
    kind = "an fstrain-trained model" if loader in (None, "fstrain") else f"a {loader} model"
    return (ANSWERED, "#model", f"{kind}; any registered model, third-party ones included, gets "
            "the same hashes, validation and sign-off.")


ITEMS: tuple[Item, ...] = (
    Item(ANNEX_IV, "1", "General description: purpose, provider, name and version, software "
         "versions, how it is made available, instructions for use", _general),
    Item(ANNEX_IV, "2(a)", "Methods and steps of development, tools used", _methods),
    Item(ANNEX_IV, "2(b)", "Design choices, rationale, assumptions, what it optimises", _design),
    Item(ANNEX_IV, "2(c)", "Architecture and computational resources", _compute),
    Item(ANNEX_IV, "2(d)", "Data requirements: provenance, scope, selection, labelling, "
         "cleaning", _data),
    Item(ANNEX_IV, "2(e)", "Human-oversight measures; interpreting outputs", _oversight),
    Item(ANNEX_IV, "2(f)", "Predetermined changes", _not_covered(
        "fstrain records no plan of predetermined changes: each retraining is a new version, "
        "validated and signed off anew.")),
    Item(ANNEX_IV, "2(g)", "Validation and testing: procedures, test data, metrics for "
         "accuracy, robustness and discriminatory impact", _validation),
    Item(ANNEX_IV, "2(g)", "Test logs and reports dated and signed by the responsible persons",
         _dated_signed),
    Item(ANNEX_IV, "2(h)", "Cybersecurity measures", _security),
    Item(ANNEX_IV, "3", "Capabilities and limitations, accuracy for specific groups, risks, "
         "input specifications", _groups),
    Item(ANNEX_IV, "4", "Why the performance metrics are appropriate", _metric_choice),
    Item(ANNEX_IV, "5", "The risk-management system (Article 9)", _not_covered(
        "not part of the model record: the provider's risk-management system is documented "
        "outside fstrain.")),
    Item(ANNEX_IV, "6", "Relevant changes through the lifecycle", _changes),
    Item(ANNEX_IV, "7", "Harmonised standards or other specifications applied", _not_covered(
        "fstrain records no standard the provider applied.")),
    Item(ANNEX_IV, "8", "EU declaration of conformity", _not_covered(
        "the provider's declaration is not stored with the model.")),
    Item(ANNEX_IV, "9", "Post-market monitoring system and plan (Article 72)", _not_covered(
        "not covered yet: fstrain does not monitor deployed models (batch drift against the "
        "training dataset is a candidate).")),
    Item(ANNEX_IV, "Art. 12, 18", "Logs kept; documentation kept for ten years", _records),
    Item(SR_11_7, "Development", "A clear statement of purpose", _purpose),
    Item(SR_11_7, "Development", "Sound, documented methodology", _methods),
    Item(SR_11_7, "Development", "Data quality and relevance checked and documented", _data),
    Item(SR_11_7, "Development", "Testing of accuracy, robustness, stability, limitations, "
         "behaviour outside expected inputs", _testing),
    Item(SR_11_7, "Validation", "Independent validation, effective challenge", _challenge),
    Item(SR_11_7, "Validation", "Conceptual soundness", _soundness),
    Item(SR_11_7, "Validation", "Ongoing monitoring: process verification, benchmarking, "
         "tracking of overrides", _monitoring),
    Item(SR_11_7, "Validation", "Outcomes analysis, back-testing", _outcomes),
    Item(SR_11_7, "Validation", "Validation at least yearly and on material change", _cadence),
    Item(SR_11_7, "Governance", "Policies, procedures, roles and responsibilities", _governance),
    Item(SR_11_7, "Governance", "A model inventory", _inventory),
    Item(SR_11_7, "Governance", "Documentation a party unfamiliar with the model can follow",
         _third_party),
    Item(SR_11_7, "Governance", "Vendor and third-party models under the same expectations",
         _vendor),
)


def framework_rows(dossier: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per auditor item: ``framework``, ``ref``, ``asks``, ``status``, ``where`` (a
    section anchor of the dossier page, empty when nothing answers it) and ``answer``."""
    rows = []
    for item in ITEMS:
        status, where, answer = item.answer(dossier)
        rows.append({"framework": item.framework, "ref": item.ref, "asks": item.asks,
                     "status": status, "where": where, "answer": answer})
    return rows
