"""Fixtures for the model-registry tests: a registry in tmp_path and a tiny model folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_registry.local.registry import LocalModelRegistry


@pytest.fixture
def registry(tmp_path: Path) -> LocalModelRegistry:
    """An empty local registry under ``tmp_path/model_registry``."""
    return LocalModelRegistry(tmp_path / "model_registry")


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A folder with two small model files (one nested)."""
    path = tmp_path / "model_src"
    (path / "sub").mkdir(parents=True)
    (path / "weights.bin").write_bytes(b"\x00\x01weights")
    (path / "sub" / "vocab.txt").write_text("a\nb\n")
    return path


class FakeTrainingDataset:
    """Duck type of a training dataset: only ``to_dict()``, in the shape of
    :class:`feature_store.api.TrainingDataset` (splits by name with rows and sha256)."""

    def __init__(self, version: int) -> None:
        self.version = version

    def to_dict(self) -> dict:
        return {
            "version": self.version,
            "feature_group_commits": {"transactions_1": 1700000000123},
            "seed": 7,
            "split_spec": {"strategy": "random", "test_size": 0.2},
            "splits": {"train": {"rows": 80, "sha256": "a" * 64},
                       "test": {"rows": 20, "sha256": "b" * 64}},
        }


class FakeFeatureView:
    """Duck type of a feature view, as the model registry consumes it."""

    def __init__(self, *, with_training_dataset: bool = True) -> None:
        self.name = "fraud_fv"
        self.version = 2
        self.labels = ["is_fraud"]
        self.training_helper_columns = ["event_time"]
        self.inference_helper_columns = ["card_id"]
        self.schema = [
            {"name": "amount", "type": "double"},
            {"name": "card_id", "type": "bigint"},
            {"name": "category", "type": "string"},
            {"name": "event_time", "type": "timestamp"},
            {"name": "is_fraud", "type": "boolean"},
        ]
        if with_training_dataset:
            self.get_training_dataset = FakeTrainingDataset


@pytest.fixture
def fake_feature_view() -> FakeFeatureView:
    """A feature view with labels, helper columns and a training-dataset getter."""
    return FakeFeatureView()


@pytest.fixture
def fake_feature_view_no_td() -> FakeFeatureView:
    """A feature view without ``get_training_dataset``."""
    return FakeFeatureView(with_training_dataset=False)
