"""K-fold cross-validation: the whole trainer is refitted on each fold's training rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fstrain.kernel.errors import ConfigError, InvalidArgumentError
from fstrain.trainers import cross_validate
from fstrain.trainers.cross_validation import CrossValidationResult


def test_preprocessing_is_fitted_on_each_folds_training_rows_only(binary_data, tmp_path):
    from feature_store.core.splits import kfold_indices

    X, y, _, _ = binary_data
    result = cross_validate({"model": "sklearn_logreg", "seed": 3}, X, y, k=3,
                            workdir=tmp_path, return_models=True)
    folds = kfold_indices(len(X), 3, 3, stratify=y["label"].to_numpy())
    for (train_idx, val_idx), model, row in zip(folds, result.models, result.folds, strict=True):
        imputer = model.preprocessor.named_transformers_["num"].named_steps["impute"]
        fold_mean = X.iloc[train_idx][["age", "income"]].mean().to_numpy()
        np.testing.assert_allclose(imputer.statistics_, fold_mean, rtol=1e-12)
        assert not np.allclose(imputer.statistics_, X[["age", "income"]].mean().to_numpy())
        assert (row["train_rows"], row["val_rows"]) == (len(train_idx), len(val_idx))
    assert sum(r["val_rows"] for r in result.folds) == len(X)


def test_scores_summary_and_reproducibility(binary_data, tmp_path):
    X, y, _, _ = binary_data
    config = {"model": "xgboost", "seed": 1, "params": {"n_estimators": 40}}
    first = cross_validate(config, X, y, k=4, workdir=tmp_path / "a")
    again = cross_validate(config, X, y, k=4, workdir=tmp_path / "b")
    assert isinstance(first, CrossValidationResult) and first.metric == "auc"
    assert first.folds == again.folds  # same folds, same deterministic models
    aucs = [f["auc"] for f in first.folds]
    assert first.summary["auc"]["mean"] == pytest.approx(np.mean(aucs))
    assert first.summary["auc"]["std"] == pytest.approx(np.std(aucs, ddof=1))
    assert min(aucs) > 0.65 and first.stratified
    other = cross_validate(config, X, y, k=4, workdir=tmp_path / "c", seed=2)
    assert other.folds != first.folds
    record = first.to_dict()
    assert record["k"] == 4 and record["summary"] == first.summary


def test_stratified_folds_keep_the_class_ratio(imbalanced_data, tmp_path):
    X, y, _, _ = imbalanced_data
    result = cross_validate({"model": "sklearn_logreg"}, X, y, k=5, workdir=tmp_path,
                            return_models=False)
    assert not result.models
    positives = y["label"].sum()
    from feature_store.core.splits import kfold_indices

    for _, val_idx in kfold_indices(len(X), 5, 42, stratify=y["label"].to_numpy()):
        assert abs(y["label"].iloc[val_idx].sum() - positives / 5) <= 1


def test_bad_inputs_are_refused(binary_data, tmp_path):
    X, y, _, _ = binary_data
    with pytest.raises(InvalidArgumentError, match="one-column DataFrame"):
        cross_validate({"model": "xgboost"}, X, pd.concat([y, y], axis=1), workdir=tmp_path)
    with pytest.raises(InvalidArgumentError, match="X has 900 rows but y has 10"):
        cross_validate({"model": "xgboost"}, X, y.iloc[:10], workdir=tmp_path)
    with pytest.raises(InvalidArgumentError, match="k must be an integer of at least 2"):
        cross_validate({"model": "xgboost"}, X, y, k=1, workdir=tmp_path)
    with pytest.raises(ConfigError, match="resume=True is refused"):
        cross_validate({"model": "mlp", "resume": True}, X, y, workdir=tmp_path)
    with pytest.raises(ConfigError, match="stratified folds need class labels"):
        cross_validate({"model": "xgboost", "task": "regression"}, X, y, stratified=True,
                       workdir=tmp_path)
