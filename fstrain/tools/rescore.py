"""Re-score a registered version on its own test split: the rows ``registry diff`` pairs.

:func:`score_test_rows` reads the test split of the training-dataset version the model was
trained on (the read model validation makes, plus the root group's primary key and event time
to match rows across versions), loads the version's predictor through its load-and-predict
record and returns its predictions as :class:`validation.compare.RowScores`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from fstrain.kernel.errors import ConfigError
from fstrain.trainers.external import load_registered_predictor
from model_registry.predictor_record import record_of
from validation.compare import RowScores


def score_test_rows(model: Any) -> RowScores:
    """``model``'s predictions on its test rows (P(positive) for a binary classifier)."""
    if not model.feature_view_name or model.training_dataset_version is None:
        raise ConfigError(
            f"model {model.name}:{model.version} was registered without its lineage, so there "
            "is no test split to re-score it on. Register it with create_model(..., "
            "feature_view=fv, training_dataset_version=v).")
    fv = model.get_feature_view(init=False)
    version = int(model.training_dataset_version)
    names = tuple(fv.get_training_dataset(version).splits)
    if "validation" in names:
        parts = fv.get_train_validation_test_split(version, primary_key=True, event_time=True)
        X_test, y_train, y_test = parts[2], parts[3], parts[5]
    else:
        _X_train, X_test, y_train, y_test = fv.get_train_test_split(
            version, primary_key=True, event_time=True)
    key_columns = [c for c in fv.root_key_columns if c in X_test.columns]
    keys = X_test[key_columns].reset_index(drop=True) if key_columns else None
    X = X_test.drop(columns=key_columns)
    label = str(y_test.columns[0])
    predictor = _predictor(model, y_train[label])
    labels = predictor.labels
    if labels.task == "binary":
        scores = np.asarray(predictor.predict_proba(X), dtype=float)
        positive = labels.classes[1]
    else:
        scores, positive = np.asarray(predictor.predict(X)), None
    return RowScores(labels.task, label, y_test[label].to_numpy(), scores, keys,
                     positive=positive)


def _predictor(model: Any, y_train: Any) -> Any:
    """The version's predictor, loaded from a verified download removed before returning."""
    with tempfile.TemporaryDirectory(prefix="fstrain-rescore-") as scratch:
        folder = Path(model.download(scratch))
        return load_registered_predictor(folder, record_of(model.manifest), y_train=y_train)
