"""Bad input is refused before the work, not after it: gates on what the validation will not
compute, a model-card key typo before `fstrain run`'s stages, a bad gate of a chained job's
validate stage before its train stage; and the errors name the closest existing thing."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fstrain.cli.app import app


def _cli(root, *args):
    return CliRunner().invoke(app, [*args, "--root", str(root)])


def _one_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(("gate", "needles"), [
    ("disparate_impact_ratio[gender] >= 0.8", ["'gender' is not a slice column", "sex, race"]),
    ("demographic_parity_difference[rac] <= 0.1", ["'rac'", "Did you mean 'race'?"]),
    ("rmse <= 3", ["binary model", "does not compute 'rmse'", "roc_auc"]),
])
def test_validate_refuses_a_gate_on_what_it_will_not_compute(adult_store, adult_copy, gate,
                                                             needles):
    before = _files(adult_copy)
    line = _one_line(_cli(adult_copy, "validate", adult_store.name, "--gate", gate))
    assert all(needle in line for needle in needles), line
    assert _files(adult_copy) == before  # no FAILED run appended


def test_run_refuses_a_model_card_typo_before_any_stage(tmp_path):
    from feature_views import get_use_case

    card = f"model_cards/{get_use_case('adult').registry_model_name}.yaml"
    root = tmp_path / "store"
    (root / "model_cards").mkdir(parents=True)
    (root / card).write_text("intended_uses: scoring\n")
    line = _one_line(_cli(root, "run", "adult"))
    assert "'intended_uses'" in line and "Did you mean 'intended_use'" in line
    assert _files(root) == ["model_cards", card]  # no stage ran
    demo = _one_line(_cli(root, "demo", "airquality", "adult"))  # adult's card: checked first
    assert "'intended_uses'" in demo and _files(root) == ["model_cards", card]


def test_a_chained_jobs_bad_gate_is_refused_before_its_train_stage(adult_copy, capsys):
    from fstrain.cli.jobs import job_main

    before = _files(adult_copy)
    code = job_main(["train", "adult", "-t", "1", "--root", str(adult_copy), "--json",
                     "--then", "validate", "{model}", "--gate", "roc_auc >> 0.8"], app)
    assert code == 2 and "Gate 'roc_auc >> 0.8' is not understood" in capsys.readouterr().err
    assert _files(adult_copy) == before  # nothing trained


def test_names_get_did_you_mean_closest_first(adult_store):
    from fstrain.project import Project
    from model_registry.errors import UnknownMetricError

    line = _one_line(_cli(adult_store.root, "validate", adult_store.name[:-1]))
    assert f"Did you mean '{adult_store.name}'?" in line
    registry = Project(adult_store.root, create=False).get_model_registry()
    with pytest.raises(UnknownMetricError, match="Did you mean 'validation_roc_auc'"):
        registry.get_best_model(adult_store.name, "auc_roc")


def test_doctor_says_a_path_is_neither_a_model_nor_a_run_folder(adult_store):
    line = _one_line(_cli(adult_store.root, "doctor", "/etc/passwd"))
    assert "'/etc/passwd' is neither a model reference" in line and "nor a run folder" in line
    assert "it is a file" in line and "Rename" not in line
