"""Label-noise finding with Cleanlab on out-of-fold predicted probabilities.

``--cv K --find-label-issues``: the K fold models of the cross-validation (each trained without
its held-out rows, so a row's probabilities never come from a model that saw its label) predict
their held-out rows; Cleanlab's confident learning (``cleanlab.filter.find_label_issues``,
pruned by noise rate) flags the train rows whose given label disagrees with those out-of-fold
probabilities, ranked by label quality (``self_confidence``, the probability of the given
label). The report names each suspect row by the root group's primary key and event time, with
the feature-group commits the training dataset was read at, and is saved next to the model
(``label_issues.json`` and ``label_issues.csv``, hashed in the model's manifest).
``--drop-label-issues`` then trains the registered model without those rows (recorded in the
model's training config).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import ConfigError
from feature_store.core.carve import train_keys
from fstrain.trainers.cross_validation import cross_validate

REPORT_JSON = "label_issues.json"
REPORT_CSV = "label_issues.csv"


@dataclass
class LabelIssues:
    """The suspect rows of one train split (``issues``: one row each, most suspect first)."""

    k: int
    seed: int
    rows: int
    classes: list[Any]
    issues: pd.DataFrame  # position, key columns, given_label, suggested_label, label_quality
    feature_group_commits: dict[str, int] = field(default_factory=dict)
    dropped: bool = False

    @property
    def positions(self) -> np.ndarray:
        """Positions of the suspect rows in the train split."""
        return self.issues["position"].to_numpy(dtype=np.int64)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary (the rows themselves are in the CSV and the JSON report)."""
        return {"method": "cleanlab.filter.find_label_issues (prune_by_noise_rate) on "
                          "out-of-fold predicted probabilities",
                "cv_folds": self.k, "seed": self.seed, "train_rows": self.rows,
                "classes": [_plain(c) for c in self.classes], "n_issues": int(len(self.issues)),
                "share": float(len(self.issues) / self.rows) if self.rows else 0.0,
                "feature_group_commits": dict(self.feature_group_commits),
                "dropped_from_training": self.dropped,
                "files": [REPORT_JSON, REPORT_CSV]}

    def write(self, directory: Path) -> list[Path]:
        """Write the JSON report and the CSV of suspect rows into ``directory``."""
        directory = Path(directory)
        csv_path, json_path = directory / REPORT_CSV, directory / REPORT_JSON
        self.issues.to_csv(csv_path, index=False)
        rows = json.loads(self.issues.to_json(orient="records", date_format="iso"))
        json_path.write_text(json.dumps({**self.to_dict(), "issues": rows}, indent=2,
                                        sort_keys=True))
        return [json_path, csv_path]


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _cleanlab() -> Any:
    try:
        import cleanlab.filter
        import cleanlab.rank
    except ImportError as exc:
        raise ConfigError("--find-label-issues needs Cleanlab: install the 'tracking' extra "
                          "(pip install 'fstrain[tracking]', which pins cleanlab).") from exc
    return cleanlab


def out_of_fold_probabilities(cfg: Any, X: pd.DataFrame, y: pd.DataFrame, *, k: int,
                              workdir: Path) -> tuple[np.ndarray, list[Any], dict[str, Any]]:
    """``(probabilities (n, K), classes, cross-validation record)``: row ``i``'s probabilities
    come from the fold model that did not train on it (folds as :func:`cross_validate`)."""
    from feature_store.core.splits import kfold_indices

    if cfg.task == "regression":
        raise ConfigError("--find-label-issues looks for wrong class labels; a regression has "
                          "no classes. Drop --find-label-issues.")
    labels = y.iloc[:, 0].to_numpy()
    result = cross_validate(cfg, X, y, k=k, workdir=workdir, stratified=True,
                            return_models=True)
    classes = sorted(pd.unique(labels).tolist())
    probs = np.full((len(X), len(classes)), np.nan)
    folds = kfold_indices(len(X), k, result.seed, stratify=labels)
    for model, (_train_idx, val_idx) in zip(result.models, folds, strict=True):
        mat = np.asarray(model.predict_proba(X.iloc[val_idx]), dtype=float)
        if mat.ndim == 1:
            mat = np.column_stack([1.0 - mat, mat])
        columns = np.array([classes.index(c) for c in model.labels.classes], dtype=np.intp)
        probs[np.ix_(val_idx, columns)] = mat
    probs = np.nan_to_num(probs, nan=0.0)
    probs /= probs.sum(axis=1, keepdims=True)
    return probs, classes, result.to_dict()


def find_label_issues(cfg: Any, X: pd.DataFrame, y: pd.DataFrame, keys: pd.DataFrame, *, k: int,
                      workdir: Path, commits: dict[str, int]) -> tuple[LabelIssues, dict[str, Any]]:
    """Cleanlab's suspect rows of ``(X, y)`` (``keys``: the rows' primary key and event time,
    same order), and the cross-validation record of the out-of-fold run."""
    if len(keys) != len(X):
        raise ConfigError(f"label issues: {len(keys)} key rows for {len(X)} train rows; the "
                          "keys must be read from the same split.")
    cleanlab = _cleanlab()
    probs, classes, cv = out_of_fold_probabilities(cfg, X, y, k=k, workdir=workdir)
    given = y.iloc[:, 0].to_numpy()
    codes = np.asarray(pd.Index(classes).get_indexer(given), dtype=np.int64)
    ranked = np.asarray(cleanlab.filter.find_label_issues(
        codes, probs, filter_by="prune_by_noise_rate",
        return_indices_ranked_by="self_confidence"), dtype=np.int64)
    quality = cleanlab.rank.get_label_quality_scores(codes, probs, method="self_confidence")
    table = keys.iloc[ranked].reset_index(drop=True)
    table.insert(0, "position", ranked)
    table["given_label"] = [_plain(v) for v in given[ranked]]
    table["suggested_label"] = [_plain(classes[i]) for i in probs[ranked].argmax(axis=1)]
    table["label_quality"] = quality[ranked]
    issues = LabelIssues(k=k, seed=int(cv["seed"]), rows=len(X), classes=classes, issues=table,
                         feature_group_commits=dict(commits))
    return issues, cv


def label_issues_step(fv: Any, version: int, carve: dict[str, Any] | None, cfg: Any,
                      splits: tuple[Any, ...], *, k: int, workdir: Path,
                      drop: bool) -> tuple[LabelIssues, dict[str, Any], tuple[Any, ...]]:
    """The training pipeline's step: find the suspect train rows of a training-dataset version
    and, with ``drop``, return the splits without them; also the cross-validation record."""
    X_tr, X_va, y_tr, y_va = splits
    keys = train_keys(fv, version, carve)
    commits = dict(getattr(fv.get_training_dataset(version), "feature_group_commits", {}) or {})
    issues, cv = find_label_issues(cfg, X_tr, y_tr, keys, k=k, workdir=workdir, commits=commits)
    if not drop:
        return issues, cv, splits
    keep = np.ones(len(X_tr), dtype=bool)
    keep[issues.positions] = False
    if not keep.any():
        raise ConfigError(f"--drop-label-issues: Cleanlab flagged all {len(X_tr)} train rows; "
                          "nothing would be left to train on. Drop --drop-label-issues.")
    issues.dropped = True
    kept = (X_tr[keep].reset_index(drop=True), X_va, y_tr[keep].reset_index(drop=True), y_va)
    return issues, cv, kept
