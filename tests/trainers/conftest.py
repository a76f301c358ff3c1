"""Small synthetic data sets for the trainer tests (seeded, built in milliseconds)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def make_binary(n: int = 1200, seed: int = 0, pos_rate: float | None = None):
    """Binary label driven by two numeric and one categorical feature, with missing values."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "age": rng.normal(40, 10, n),
            "income": rng.lognormal(10, 0.5, n),
            "city": rng.choice(["oslo", "rome", "lima", "pune"], n),
            "member": rng.random(n) < 0.4,
        }
    )
    X.loc[rng.choice(n, n // 20, replace=False), "age"] = np.nan
    X.loc[rng.choice(n, n // 20, replace=False), "city"] = None
    logit = 0.12 * (X["age"].fillna(40) - 40) + 1.2 * (X["city"] == "oslo") - 0.8 * X["member"]
    if pos_rate is not None:
        logit = logit + np.log(pos_rate / (1 - pos_rate))
    y = pd.DataFrame({"label": (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)})
    return X, y


def split(X: pd.DataFrame, y: pd.DataFrame, frac: float = 0.75):
    cut = int(len(X) * frac)
    return X.iloc[:cut], y.iloc[:cut], X.iloc[cut:], y.iloc[cut:]


@pytest.fixture(scope="session")
def binary_data():
    return split(*make_binary())


@pytest.fixture(scope="session")
def multiclass_data():
    rng = np.random.default_rng(1)
    n = 900
    X = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n),
                      "tag": rng.choice(["a", "b"], n)})
    score = X["x1"] + 0.5 * (X["tag"] == "a")
    y = pd.DataFrame({"kind": np.select([score < -0.4, score < 0.6], ["low", "mid"], "high")})
    return split(X, y)


def _digit(cls: int, rng: np.random.Generator) -> np.ndarray:
    """A 28×28 uint8 image whose pattern depends on the class: bars, a box, a diagonal."""
    img = rng.integers(0, 40, (28, 28)).astype(np.uint8)
    off = rng.integers(-2, 3)
    if cls == 0:
        img[6:22, 12 + off:16 + off] = 255
    elif cls == 1:
        img[12 + off:16 + off, 6:22] = 255
    else:
        for i in range(5, 23):
            img[i, min(27, max(0, i + off))] = 255
    return img


@pytest.fixture(scope="session")
def image_data():
    """A tiny MNIST-like feature group: ``image_path`` to PNG files + ``label`` (3 classes)."""
    from PIL import Image

    root = Path(tempfile.mkdtemp(prefix="fstrain-img-"))
    rng = np.random.default_rng(2)
    paths, labels = [], []
    for i in range(240):
        cls = i % 3
        path = root / f"{i:04d}.png"
        Image.fromarray(_digit(cls, rng), mode="L").save(path)
        paths.append(str(path))
        labels.append(cls)
    X = pd.DataFrame({"image_path": paths})
    y = pd.DataFrame({"label": labels})
    return split(X, y)


@pytest.fixture
def short_tmp():
    """A short temp directory (Ray's socket paths must stay under ~107 characters)."""
    path = Path(tempfile.mkdtemp(prefix="fst-", dir="/tmp"))
    yield path
    import shutil

    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def imbalanced_data():
    """About 10% positives."""
    return split(*make_binary(n=1600, seed=3, pos_rate=0.1))


def _assert_resumed_run_equals_full(full: Path, resumed: Path, resumed_from_step: int) -> None:
    """The final weights (bitwise) and history a resume worker wrote match the uninterrupted
    run's, and the resumed run started from ``resumed_from_step``."""
    import json

    from safetensors.torch import load_file

    a, b = load_file(str(full / "final.safetensors")), load_file(str(resumed / "final.safetensors"))
    assert a.keys() == b.keys()
    for key in a:
        assert np.array_equal(a[key].numpy(), b[key].numpy()), key  # bitwise
    ha = json.loads((full / "history.json").read_text())
    hb = json.loads((resumed / "history.json").read_text())
    assert hb["resumed_from"]["global_step"] == resumed_from_step
    assert ha["history"] == hb["history"]


@pytest.fixture
def assert_resumed_run_equals_full():
    """Compare the outputs of the kill-and-resume workers with an uninterrupted run."""
    return _assert_resumed_run_equals_full
