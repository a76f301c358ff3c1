"""``train --resume`` with no checkpoint at all is refused before any work; ``--resume-or-start``
starts a new run and says so, on the command line and in the registered run's record (issue 32).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fstrain.cli.app import app

CONFIG = {"model": "mlp", "params": {}, "torch": {"epochs": 1, "batch_size": 256}}


@pytest.fixture
def mlp(tmp_path):
    """``fstrain train adult`` with a one-epoch MLP (the CLI reads JSON as YAML)."""
    (tmp_path / "mlp.json").write_text(json.dumps(CONFIG))
    return ["train", "adult", "-t", "1", "--config", str(tmp_path / "mlp.json"),
            "--model-name", "adult_mlp_resume"]


def test_resume_without_a_checkpoint_is_refused_and_resume_or_start_says_it_started(adult_copy,
                                                                                   mlp):
    import feature_store

    out = CliRunner().invoke(app, [*mlp, "--resume", "--root", str(adult_copy)])
    assert out.exit_code == 2, out.output
    line = out.output.strip()
    assert "\n" not in line and line.startswith("error: --resume: model 'adult_mlp_resume' has "
                                                "no checkpoint for training dataset v1"), line
    assert "--resume-or-start" in line
    registry = feature_store.login(root=adult_copy).get_model_registry()
    assert registry.get_models("adult_mlp_resume") == []
    assert not (adult_copy / "runs" / "adult_mlp_resume_td1").exists()

    both = CliRunner().invoke(app, [*mlp, "--resume", "--resume-or-start",
                                    "--root", str(adult_copy)])
    assert both.exit_code == 2 and "not both" in both.output

    out = CliRunner().invoke(app, [*mlp, "--resume-or-start", "--root", str(adult_copy)])
    assert out.exit_code == 0, out.output
    said = [ln for ln in out.output.splitlines() if ln.startswith("--resume-or-start")]
    assert said == ["--resume-or-start: no checkpoint to resume from, so a new run was started "
                    "(recorded with the model)"]
    model = registry.get_model("adult_mlp_resume", 1)
    assert model.training_config["resume"] == {
        "requested": "--resume-or-start", "checkpoint_found": False, "started_new_run": True}
    assert model.training_config["resumed_from"] is None

    # its checkpoint is there now: the same flag resumes from it (and --json says so)
    again = CliRunner().invoke(app, [*mlp, "--resume-or-start", "--json",
                                     "--root", str(adult_copy)])
    assert again.exit_code == 0, again.output
    payload = json.loads(again.output[again.output.index("{"):])
    assert payload["resume"] == {"requested": "--resume-or-start", "checkpoint_found": True,
                                 "started_new_run": False}
    assert registry.get_model("adult_mlp_resume", 2).training_config["resumed_from"] is not None
