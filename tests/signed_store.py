"""A signed adult store for the tests that attack or read a signed history: a copy of the
session's adult store with an owner (olga), a data scientist who trains (dana), a validator
(vic), two reviewers (rita, rob) and a reviewer key of dana's own; version 2 trained with dana's
key and validated with vic's. Built once per session (:func:`build_signed`, the
``signed_adult_store`` fixture of ``tests/conftest.py``); tests change private copies of it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fstrain.cli.app import app

KEYS = (("dana", "data-scientist", "dana"), ("vic", "validator", "vic"),
        ("rita", "reviewer", "rita"), ("rob", "reviewer", "rob"),
        ("dana-rev", "reviewer", "dana"))


@dataclass(frozen=True)
class Signed:
    root: Path
    keys: Path
    name: str
    version: int
    owner: str  # the owner's fingerprint
    status: str  # of the validation run (run 1)

    @property
    def ref(self) -> str:
        return f"{self.name}:{self.version}"

    def key(self, name: str) -> str:
        return str(self.keys / name)


def cli(args: list[str], root: Path, *, key: str | None = None, **env: str):
    environ = {"FSTRAIN_KEY": key or "", **env}
    return CliRunner().invoke(app, [*args, "--root", str(root)], env=environ)


def build_signed(adult_store: Any, base: Path) -> Signed:
    """Make the signed store under ``base`` (``store/`` and ``keys/``)."""
    import feature_store
    from pipelines import model_validation, training

    root, keys = base / "store", base / "keys"
    shutil.copytree(adult_store.root, root)
    made = cli(["keys", "new", "olga", "--role", "owner", "--out", str(keys / "olga")], root)
    assert made.exit_code == 0, made.output
    owner = made.output.split("FSTRAIN_TRUSTED_OWNER=")[1].split()[0]
    for name, role, person in KEYS:
        out = cli(["keys", "new", name, "--role", role, "--person", person, "--out",
                   str(keys / name)], root, key=str(keys / "olga"))
        assert out.exit_code == 0, out.output
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FSTRAIN_KEY", str(keys / "dana"))
        project = feature_store.login(backend="local", root=root)
        ref = training.run(project, training.TrainingPipelineConfig(
            use_case="adult", training_dataset_version=adult_store.training_dataset_version,
            model={"params": {"n_estimators": 20}}))
        env.setenv("FSTRAIN_KEY", str(keys / "vic"))
        result = model_validation.run(project, model_validation.ModelValidationConfig(
            model_name=ref.name, version=ref.version, bootstrap_resamples=10, shap_samples=10))
    return Signed(root, keys, ref.name, ref.version, owner, result.status)
