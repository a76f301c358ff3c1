"""The scheduled GitHub workflow: a durable store, each failure at its own step, the report
uploaded even on failure. Step scripts are run with the shell GitHub uses for `shell: bash`."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "pipelines.yml"


@pytest.fixture(scope="module")
def workflow():
    return yaml.safe_load(WORKFLOW.read_text())


def _steps(workflow):
    return {s.get("name", s.get("uses")): s for s in workflow["jobs"]["pipelines"]["steps"]}


def _fake_fstrain(tmp_path: Path, body: str) -> None:
    exe = tmp_path / ".venv" / "bin" / "fstrain"
    exe.parent.mkdir(parents=True)
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


def _run_step(step, tmp_path: Path):
    out = tmp_path / "github_output"
    out.touch()
    env = {**os.environ, "GITHUB_OUTPUT": str(out), "USE_CASE": "ccfraud"}
    # what GitHub runs for `shell: bash`
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    return proc, out.read_text()


def test_store_persists_on_a_branch_not_a_cache(workflow):
    assert not any("actions/cache" in s.get("uses", "") for s in _steps(workflow).values())
    assert workflow["defaults"]["run"]["shell"] == "bash"
    steps = _steps(workflow)
    save = steps["Save the store (also when a stage or gate failed)"]
    assert save["if"].startswith("always()") and "git push" in save["run"]
    assert workflow["concurrency"]["cancel-in-progress"] is False
    upload = steps["actions/upload-artifact@v4"]
    assert upload["if"] == "always()"
    assert steps["Registry report"]["if"].startswith("always()")


def test_a_failing_dataset_stage_fails_its_own_step(workflow, tmp_path):
    _fake_fstrain(tmp_path, 'echo "Split \'test\' is empty" >&2; exit 2')
    proc, outputs = _run_step(_steps(workflow)["Training-dataset pipeline"], tmp_path)
    assert proc.returncode != 0
    assert "version=" not in outputs  # the next step is skipped, not fed an empty version


def test_feature_step_reports_an_unchanged_window(workflow, tmp_path):
    _fake_fstrain(tmp_path, 'echo \'{"use_case": "ccfraud", "feature_groups": [], '
                            '"empty": true, "wrote_nothing": true}\'')
    proc, outputs = _run_step(_steps(workflow)["Feature pipeline"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "wrote_nothing=true" in outputs
    dataset = _steps(workflow)["Training-dataset pipeline"]
    assert "wrote_nothing == 'false'" in dataset["if"]


def test_dataset_then_train_pass_versions_along(workflow, tmp_path):
    _fake_fstrain(tmp_path, 'case "$1" in dataset) echo \'{"version": 7}\';; '
                            'train) echo \'{"name": "ccfraud_xgb", "version": 3}\';; esac')
    _, outputs = _run_step(_steps(workflow)["Training-dataset pipeline"], tmp_path)
    assert "version=7" in outputs
