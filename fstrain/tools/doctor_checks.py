"""``fstrain doctor``'s checks, after the skill sheet's table of common training failures.

Each check reads what a run recorded (its learning curves, its training record) or what the
doctor measured again, and returns one :class:`Finding`: ``severe`` (the command exits
non-zero), ``warning``, ``ok`` or ``skipped`` (with the reason), always with its evidence and
the suggested fix. The table's rows:

- training loss does not fall → wrong labels, frozen parameters, a bad learning rate, a loss
  that does not match the output activation, dtype overflow, a broken input pipeline;
- validation much worse than training → overfitting, distribution shift, regularisation;
- NaN → learning rate too high, fp16 overflow, invalid inputs, unstable loss, exploding
  gradients;
- slow training → the data loader is the bottleneck, batches too small, CPU-side transforms;
- not reproducible → unpinned data or environment, non-deterministic kernels, hidden state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from feature_store.core import late_data
from validation.learning_curves import GAP_RATIO, flat_loss, loss_gap

SEVERITIES = ("severe", "warning", "ok", "skipped")
#: train/validation loss gap (share of the validation loss) judged severe
SEVERE_GAP = 0.5
#: share of the training step spent waiting on input
INPUT_SHARE_WARNING = 0.3
#: a gradient norm this many times the run's median norm is a spike
GRAD_SPIKE_RATIO = 10.0
#: a gradient norm above this is exploding whatever the run's median
GRAD_NORM_SEVERE = 1e4
#: minority-class share below which imbalance is extreme
EXTREME_MINORITY = 0.05
#: relative difference above which a re-run does not reproduce the record
REPRO_TOLERANCE = 1e-6


@dataclass
class Finding:
    """One row of the doctor's report."""

    check: str
    severity: str
    title: str
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def _skip(check: str, why: str) -> Finding:
    return Finding(check, "skipped", why)


def check_nan(curves: Mapping[str, Any] | None, diverged: Mapping[str, Any] | None) -> Finding:
    """A NaN/inf loss, from the loop's divergence record or nulls in the curves."""
    fix = ("Lower the learning rate, clip gradients (torch.grad_clip), use bf16 or no AMP "
           "instead of fp16, and look for NaN/inf in the input features.")
    if diverged:
        return Finding("nan_loss", "severe", f"The loss became {diverged.get('value')} at epoch "
                       f"{diverged.get('epoch')}, batch {diverged.get('batch')}; the run stopped.",
                       dict(diverged), fix)
    if curves is None:
        return _skip("nan_loss", "no learning curves were recorded")
    bad = {k: v for k, v in (curves.get("non_finite") or {}).items() if v}
    if bad:
        return Finding("nan_loss", "severe", "Non-finite values in the learning curves.",
                       {"non_finite_counts": bad}, fix)
    return Finding("nan_loss", "ok", "Every recorded loss is finite.",
                   {"steps": len(curves.get("steps") or [])})


def _prior_loss(imbalance: Mapping[str, Any], weighted: bool) -> float | None:
    """Log-loss of predicting the train split's class shares (the constant predictor); with
    ``weighted``, the shares after resampling and class weights, as a booster's train loss
    is measured."""
    before = imbalance.get("train_counts_before") or {}
    raw = (imbalance.get("train_counts_after") or before) if weighted else before
    weights = dict(imbalance.get("class_weight") or {}) if weighted else {}
    if weighted and not weights and imbalance.get("scale_pos_weight") and len(raw) == 2:
        weights = {list(raw)[1]: float(imbalance["scale_pos_weight"])}  # the positive class
    counts = [float(v) * float(weights.get(k, 1.0)) for k, v in raw.items()]
    total = sum(counts)
    if total <= 0 or len(counts) < 2:
        return None
    return -sum(c / total * math.log(c / total) for c in counts if c > 0)


def check_flat(curves: Mapping[str, Any] | None, imbalance: Mapping[str, Any]) -> Finding:
    """The training loss barely moved, or ends no better than the class prior."""
    fix = ("Check the labels (shuffled or constant?), that parameters are trainable, the "
           "learning rate (try 10x up and down), that the loss matches the output layer "
           "(logits into cross-entropy, no softmax before it), and the input pipeline.")
    if curves is None or curves.get("unit") == "fit":
        return _skip("flat_loss", "no per-step training loss was recorded (one-point curve)"
                     if curves else "no learning curves were recorded")
    flat = flat_loss(curves)
    if flat is not None:
        return Finding("flat_loss", "severe", "The training loss did not decrease "
                       f"({flat['first']:.4g} → {flat['last']:.4g}).", flat, fix)
    prior = (_prior_loss(imbalance, weighted=curves.get("unit") != "epoch")
             if curves.get("loss") == "logloss" else None)
    last = next((v for v in reversed(curves.get("train_loss") or []) if v is not None), None)
    if prior is not None and last is not None and last >= 0.98 * prior:
        return Finding("flat_loss", "severe", f"The final training log-loss {last:.4g} is no "
                       f"better than predicting the class shares ({prior:.4g}).",
                       {"train_loss": last, "constant_predictor_loss": prior}, fix)
    return Finding("flat_loss", "ok", "The training loss decreased.",
                   {"first": (curves.get("train_loss") or [None])[0], "last": last,
                    "constant_predictor_loss": prior})


def check_gradients(curves: Mapping[str, Any] | None, grad_clip: float | None,
                    amp: str | None) -> Finding:
    """Exploding gradients, from the per-epoch gradient norms the torch loop records."""
    extra = (curves or {}).get("extra") or {}
    maxima = [v for v in extra.get("grad_norm_max") or [] if v is not None]
    if not maxima:
        return _skip("exploding_gradients", "no gradient norms were recorded (only the torch "
                     "loop has gradients to record)")
    means = sorted(v for v in extra.get("grad_norm_mean") or [] if v is not None) or maxima
    median = means[len(means) // 2]
    peak = max(maxima)
    evidence = {"grad_norm_max_per_epoch": maxima, "median_epoch_mean": median,
                "grad_clip": grad_clip, "amp": amp}
    fix = ("Clip the gradient norm (torch.grad_clip, e.g. 1.0), lower the learning rate or "
           "lengthen warm-up, and check for outliers in the inputs.")
    if peak > GRAD_NORM_SEVERE:
        return Finding("exploding_gradients", "severe", f"A gradient norm reached {peak:.3g}.",
                       evidence, fix)
    if median > 0 and peak > GRAD_SPIKE_RATIO * median:
        clipped = f" (clipped at {grad_clip})" if grad_clip else " and nothing clips it"
        return Finding("exploding_gradients", "warning" if grad_clip else "severe",
                       f"Gradient spikes: the largest norm {peak:.3g} is "
                       f"{peak / median:.0f}x the median epoch mean {median:.3g}{clipped}.",
                       evidence, fix)
    return Finding("exploding_gradients", "ok", f"Gradient norms stayed within "
                   f"{GRAD_SPIKE_RATIO:.0f}x their median (largest {peak:.3g}).", evidence)


def check_gap(curves: Mapping[str, Any] | None, tuned: bool) -> Finding:
    """A large train/validation loss gap at the kept step."""
    if curves is None:
        return _skip("train_validation_gap", "no learning curves were recorded")
    if curves.get("unit") == "trees":
        return _skip("train_validation_gap", "a random forest's train loss is in-sample, so "
                     "the gap says nothing; read the validation curve on the scorecard")
    if tuned:
        return _skip("train_validation_gap", "a tuned model is refitted on train + validation, "
                     "so its validation loss is not held out")
    gap = loss_gap(curves)
    if gap is None:
        return _skip("train_validation_gap", "train or validation loss missing at the kept step")
    fix = ("Regularise (shallower trees / fewer leaves, more weight decay or dropout, "
           "min_child_weight), stop earlier, add data; check the validation rows come from the "
           "same distribution (a time split can show drift, not overfitting).")
    text = (f"At the kept {curves.get('unit')} {gap['step']} the validation loss "
            f"{gap['val_loss']:.4g} is {100 * gap['gap']:.0f}% above the train loss "
            f"{gap['train_loss']:.4g}.")
    severity = ("severe" if gap["gap"] > SEVERE_GAP else
                "warning" if gap["gap"] > GAP_RATIO else "ok")
    return Finding("train_validation_gap", severity, text, gap, fix if severity != "ok" else "")


def check_input_pipeline(curves: Mapping[str, Any] | None,
                         timings: Mapping[str, Any]) -> Finding:
    """The share of training time spent waiting on input (torch) or preprocessing (tabular)."""
    extra = (curves or {}).get("extra") or {}
    data = [v for v in extra.get("data_seconds") or [] if v is not None]
    total = [v for v in extra.get("train_seconds") or [] if v is not None]
    fix = ("Feed the loop faster: torch.num_workers > 0 with pinned memory, larger batches, "
           "decode/transform once before training instead of per step, keep data on local disk.")
    if data and sum(total) > 0:
        share = sum(data) / sum(total)
        evidence = {"data_seconds": sum(data), "train_seconds": sum(total), "share": share}
        label = "waiting on the input pipeline"
    elif timings.get("train_seconds") and timings.get("preprocess_seconds") is not None:
        share = timings["preprocess_seconds"] / timings["train_seconds"]
        evidence = {**dict(timings), "share": share}
        label = "preprocessing the features"
    else:
        return _skip("input_pipeline", "the run recorded no input-pipeline timings")
    severity = "warning" if share > INPUT_SHARE_WARNING else "ok"
    return Finding("input_pipeline", severity,
                   f"{100 * share:.0f}% of the training time was spent {label}.", evidence,
                   fix if severity == "warning" else "")


def check_imbalance(imbalance: Mapping[str, Any], metric: str | None) -> Finding:
    """Extreme class imbalance trained without any treatment."""
    counts = {str(k): float(v) for k, v in (imbalance.get("train_counts_before") or {}).items()}
    if len(counts) < 2:
        return _skip("imbalance", "no class counts were recorded (regression or older model)")
    total = sum(counts.values())
    minority, n_min = min(counts.items(), key=lambda kv: kv[1])
    share = n_min / total if total else 0.0
    strategy = imbalance.get("strategy", "none")
    evidence = {"train_counts": counts, "minority_class": minority, "minority_share": share,
                "strategy": strategy, "selection_metric": metric}
    if share >= EXTREME_MINORITY:
        return Finding("imbalance", "ok", f"The smallest class ({minority}) is "
                       f"{100 * share:.1f}% of the train rows.", evidence)
    if strategy in (None, "none"):
        return Finding("imbalance", "severe", f"Extreme imbalance left untreated: class "
                       f"{minority} is {100 * share:.2f}% of the train rows and no imbalance "
                       "strategy was applied.", evidence,
                       "Set imbalance (scale_pos_weight, class_weight or resampling of the train "
                       "split) and select on pr_auc or f1 rather than accuracy; choose the "
                       "decision threshold on the validation split.")
    return Finding("imbalance", "ok", f"Class {minority} is {100 * share:.2f}% of the train rows; "
                   f"treated with {strategy}.", evidence)


def check_leakage(table: Any) -> Finding:
    """Features that alone predict the label almost perfectly (``rank_features`` output)."""
    if table is None:
        return _skip("leakage", "the training data could not be read")
    leaks = table[table["likely_leak"]]
    metric = table.attrs.get("single_feature_metric", "auc")
    evidence = {"features_checked": int(len(table)),
                "suspects": [{"feature": r.feature, f"single_feature_{metric}":
                              float(r.single_feature_auc), "reason": r.leak_reason}
                             for r in leaks.itertuples()]}
    if len(leaks):
        names = ", ".join(repr(f) for f in leaks["feature"])
        return Finding("leakage", "severe", f"Leakage suspect(s): {names} alone predict(s) the "
                       "label almost perfectly.", evidence,
                       "Check how each suspect is computed: is it derived from the label or "
                       "observed after the prediction time? Drop it from the feature view (or "
                       "compute it point-in-time) and retrain.")
    return Finding("leakage", "ok", f"No single feature predicts the label almost perfectly "
                   f"({len(table)} checked).", evidence)


def check_late_data(extra: Mapping[str, Any] | None, threshold: float) -> Finding:
    """A version's late-data exposure (``td.extra["late_data"]``): a joined group more than
    ``threshold`` of whose matched rows were committed after their label time."""
    if extra is None:
        return _skip("late_data", "the model names no training-dataset version")
    if "late_data" not in extra:
        return _skip("late_data", "not recorded for this training-dataset version (created "
                     "before fstrain recorded late data)")
    records = late_data.groups(extra)
    flagged = late_data.over_threshold(extra, threshold)
    uncounted = [g for g in records if g.get("not_counted")]
    evidence = {"threshold": threshold, "as_known": bool(extra.get("as_known")),
                "groups": records}
    unseen = (" Not counted: " + ", ".join(f"'{g['group']}'" for g in uncounted) + "."
              if uncounted else "")
    if flagged:
        names = ", ".join(f"'{g['group']}' ({100 * late_data.share(g):.2f}%)" for g in flagged)
        return Finding("late_data", "warning", f"Possible leakage from late data: in {names} "
                       f"more than {100 * threshold:g}% of the joined rows were committed after "
                       "their label time (backfills, late batches or corrections no model "
                       f"serving then could have seen).{unseen}", evidence,
                       "Build the version as it was known: create the feature view with "
                       "as_known=True (or join with as_known=True); for history loaded after "
                       "the fact, declare the group's ingestion_time column. Then train again.")
    if uncounted:
        return Finding("late_data", "warning", "Late data not counted for "
                       + "; ".join(f"'{g['group']}': {g['not_counted']}" for g in uncounted)
                       + f". The version may hold rows committed after their label time that no "
                       f"check saw ({len(records) - len(uncounted)} other group(s) checked, none "
                       f"above {100 * threshold:g}%).", evidence,
                       "The group's early Delta commit files are gone (removed by another "
                       "writer's log cleanup), so when its rows arrived cannot be read from its "
                       "history. If the rows carry the time they arrived, write them into a new "
                       "version of the group declaring that column as its ingestion_time, build "
                       "the view on it and train again; otherwise treat the version's features "
                       "as possibly holding late data.")
    return Finding("late_data", "ok", f"No joined group above {100 * threshold:g}% of its rows "
                   f"committed after their label time ({len(records)} checked).", evidence)


def check_reproducible(recorded: Mapping[str, Any] | None, rerun: Mapping[str, Any] | None,
                       device: str | None, why_not: str | None = None) -> Finding:
    """The first round/epoch re-run with the same seeds against the recorded one."""
    if why_not:
        return _skip("reproducibility", why_not)
    if not recorded or not rerun:
        return _skip("reproducibility", "nothing to compare")
    diffs = {}
    for key, old in recorded.items():
        new = rerun.get(key)
        if old is None or new is None:
            continue
        diffs[key] = {"recorded": old, "rerun": new,
                      "relative_difference": abs(new - old) / max(abs(old), 1e-12)}
    if not diffs:
        return _skip("reproducibility", "the re-run produced no comparable values")
    worst = max(d["relative_difference"] for d in diffs.values())
    evidence = {"compared": diffs, "device": device}
    if worst <= REPRO_TOLERANCE:
        return Finding("reproducibility", "ok", "Re-running the first step with the recorded "
                       f"seeds gave the same values (largest relative difference {worst:.1e}).",
                       evidence)
    return Finding("reproducibility", "warning" if device == "cuda" else "severe",
                   f"Not reproducible: re-running the first step with the recorded seeds differs "
                   f"by up to {100 * worst:.3g}% from the record.", evidence,
                   "Pin the data (same training-dataset version), the environment (library "
                   "versions in the manifest) and the thread count; set torch.deterministic; "
                   "on a GPU expect last-bit differences from atomics.")


def summary(findings: Sequence[Finding]) -> dict[str, int]:
    """How many findings of each severity."""
    return {s: sum(f.severity == s for f in findings) for s in SEVERITIES}
