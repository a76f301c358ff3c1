"""Policy-bound gates on the real adult pipelines: loosening the gates is a recorded policy
deviation that a reviewer sees in every status, that needs an override to approve, and that
get_best_model(require_approval=True) does not hand out; tightening is a plain run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import feature_store
from fstrain.cli.registry import registry_app
from fstrain.kernel.errors import ConfigError, IntegrityError, InvalidArgumentError
from pipelines import model_validation

FAST = {"bootstrap_resamples": 20, "shap_samples": 20}


@pytest.fixture
def adult(adult_store, adult_copy):
    """A private copy of the session's adult store (its model validated once with the
    defaults, and failing them on fairness): ``(project, root, ref)``."""
    return (feature_store.login(backend="local", root=adult_copy), adult_copy,
            model_validation.ModelRef(adult_store.name, adult_store.version))


def _validate(project, ref, **config):
    return model_validation.run(project, model_validation.ModelValidationConfig(
        model_name=ref.name, version=ref.version, gate_source="command line", **FAST, **config))


def test_loosen_then_approve_is_a_marked_override_not_a_clean_pass(adult):
    project, root, ref = adult
    target = f"{ref.name}:{ref.version}"
    model = project.get_model_registry().get_model(ref.name, ref.version)
    assert model.latest_validation()["status"] == "failed"  # fails its fairness gates
    attack = _validate(project, ref, gates=["roc_auc >= 0.5"], replace_gates=True)
    assert attack.status == "passed (policy deviation)" and not attack.passed
    assert "roc_auc >= 0.85 → roc_auc >= 0.5 (loosened)" in attack.deviations
    assert "max_abs_dp_difference <= 0.25 (removed)" in attack.deviations
    assert attack.verdict.startswith("PASSED (roc_auc = ") and "POLICY DEVIATION" in attack.verdict

    model = project.get_model_registry().get_model(ref.name, ref.version)
    run = model.latest_validation()
    assert run["status"] == "passed (policy deviation)"
    assert run["policy"]["label"] == "use-case default" and len(run["policy"]["sha256"]) == 64
    assert run["policy"]["sha256"] == default_run_policy(model)  # both runs: the same policy
    assert model.validation_status == "passed (policy deviation)"

    runner = CliRunner()
    approve = ["approve", target, "--reviewer", "rita", "--note", "looks fine", "--root",
               str(root)]
    refused = runner.invoke(registry_app, approve)
    assert refused.exit_code == 2 and "policy deviation" in refused.output
    assert "--override" in refused.output
    with pytest.raises(InvalidArgumentError, match="only under a policy deviation"):
        model.sign_off("approval", reviewer="rita", note="looks fine")
    ok = runner.invoke(registry_app, [*approve, "--override", "board accepted the risk"])
    assert ok.exit_code == 0, ok.output
    registry = project.get_model_registry()
    assert registry.get_best_model(ref.name, "auc", require_approval=True) is None
    assert registry.get_best_model(ref.name, "auc", require_approval=True,
                                   allow_overrides=True).version == ref.version

    listed = json.loads(runner.invoke(registry_app, ["list", "--root", str(root), "--json"]).output)
    assert (listed[0]["validation_status"], listed[0]["approval_status"]) == (
        "passed (policy deviation)", "approved (override)")
    table = runner.invoke(registry_app, ["list", "--root", str(root)]).output
    assert "passed (policy deviation)" in table and "approved (override)" in table
    shown = runner.invoke(registry_app, ["show", target, "--root", str(root)]).output
    assert "status passed (policy deviation)  approval approved (override)" in shown
    assert runner.invoke(registry_app, ["report", "--root", str(root)]).exit_code == 0
    index = (root / "model_registry" / "index.html").read_text()
    assert "PASSED (POLICY DEVIATION)</span>" in index and "APPROVED (OVERRIDE)</span>" in index
    scorecard = Path(attack.scorecard_html).read_text()
    header = scorecard[:scorecard.index("</header>")]
    assert "PASSED (POLICY DEVIATION)</span>" in header and 'id="policy-deviation"' in header


def default_run_policy(model) -> str:
    return next(e for e in model.history() if e["kind"] == "validation")["policy"]["sha256"]


def test_tightening_keeps_to_the_policy_and_unknown_metrics_do_no_work(adult):
    project, _, ref = adult
    tight = _validate(project, ref, gates=["roc_auc >= 0.9",
                                           "demographic_parity_difference[sex] <= 0.1"])
    assert tight.status == "failed" and not tight.deviations  # stricter, still failing
    card = json.loads(Path(tight.scorecard_html).with_name("scorecard.json").read_text())
    names = [r["name"] for r in card["gates"]["results"]]
    assert "roc_auc >= 0.9" in names and "roc_auc >= 0.85" not in names
    assert card["policy"]["deviation"] is False
    assert {c["kind"] for c in card["policy"]["changes"]} == {"tightened", "added"}
    registry = project.get_model_registry()
    runs = len(registry.get_model(ref.name, ref.version).history())
    with pytest.raises(ConfigError, match="unknown metric 'roc_aucc'"):
        _validate(project, ref, gates=["roc_aucc >= 0.9"])
    assert len(registry.get_model(ref.name, ref.version).history()) == runs


def test_an_owner_policy_file_judges_the_run_and_an_edit_is_refused(adult):
    from validation.policy import set_policy

    project, root, ref = adult
    registry = project.get_model_registry()
    policy = (b"gates:\n  - roc_auc >= 0.75\n  - max_abs_dp_difference <= 0.5\n"
              b"standard_gates: false\n")
    set_policy(registry, ref.name, policy)
    run = _validate(project, ref)
    assert run.status == "passed" and not run.deviations
    record = registry.get_model(ref.name, ref.version).latest_validation()
    assert record["policy"]["label"] == "policy file v1" and record["policy"]["signed_by"] is None
    card = json.loads(Path(run.scorecard_html).with_name("scorecard.json").read_text())
    assert card["policy"]["summary"].startswith("policy file v1, sha256 ")
    assert card["policy"]["summary"].endswith("unsigned")
    stored = root / "model_registry" / "gate-policies" / ref.name / "0001" / "policy.yaml"
    stored.write_bytes(policy.replace(b"0.75", b"0.5"))
    with pytest.raises(IntegrityError, match="policy.yaml was edited"):
        _validate(project, ref)


def test_validate_exits_4_under_a_deviation_0_clean_3_failed(adult):
    from fstrain.cli.app import app

    _, root, ref = adult
    target = f"{ref.name}:{ref.version}"
    runner = CliRunner()

    def validate(*args):
        return runner.invoke(app, ["validate", target, "--root", str(root), "--json", *args])

    loose = validate("--gate", "roc_auc >= 0.5", "--replace-gates")
    assert loose.exit_code == 4, loose.output
    out = json.loads(loose.stdout)
    assert out["status"] == "passed (policy deviation)" and "POLICY DEVIATION" in out["verdict"]
    assert validate("--gate", "roc_auc >= 0.9").exit_code == 3  # tightened, and failing
    assert validate("--threshold-strategy", "youden").exit_code == 3  # deviates, still failing
    bad = validate("--gate", "roc_aucc >= 0.9")
    assert bad.exit_code == 2 and "unknown metric 'roc_aucc'" in bad.output
    bad = validate("--threshold-strategy", "best")
    assert bad.exit_code == 2 and "'f1', 'youden' or a number" in bad.output
    policy = root / "gates.yaml"
    policy.write_text("gates: ['roc_auc >= 0.7']\n")
    set_ = runner.invoke(app, ["registry", "policy", "set", ref.name, "--file", str(policy),
                               "--root", str(root)])
    assert set_.exit_code == 0 and "UNSIGNED (this store has no trust list)" in set_.output
    assert validate().exit_code == 0  # a plain pass under the owner's policy
    shown = runner.invoke(app, ["registry", "policy", "show", ref.name, "--root", str(root)])
    assert "policy file v1" in shown.output and "gate: roc_auc >= 0.7" in shown.output
    assert "unsigned" in shown.output


def test_with_a_trust_list_only_an_owner_key_sets_the_policy(adult, monkeypatch, tmp_path):
    from fstrain.cli.app import app
    from model_registry.audit import keys
    from model_registry.audit.trust import TrustStore

    _, root, ref = adult
    monkeypatch.delenv(keys.ENV_KEY, raising=False)
    trust = TrustStore(root / "trust")
    for name, role in (("olga", "owner"), ("rita", "reviewer"), ("vic", "validator")):
        keys.generate_key(tmp_path / name, comment=name)
        trust.enrol(keys.load_private_key(tmp_path / "olga"), name=name, role=role,
                    public_key=(tmp_path / f"{name}.pub").read_text())
    policy = root / "gates.yaml"
    policy.write_text("gates: ['roc_auc >= 0.7']\n")
    runner = CliRunner()
    base = ["registry", "policy", "set", ref.name, "--file", str(policy), "--root", str(root)]
    unsigned = runner.invoke(app, base)
    assert unsigned.exit_code == 2 and "every policy is signed" in unsigned.output
    reviewer = runner.invoke(app, [*base, "--key", str(tmp_path / "rita")])
    assert reviewer.exit_code == 2 and "key rita acts as a reviewer" in reviewer.output
    monkeypatch.setenv(keys.ENV_KEY, str(tmp_path / "olga"))
    owner = runner.invoke(app, base)
    assert owner.exit_code == 0 and "signed by olga (owner, SHA256:" in owner.output
    shown = runner.invoke(app, ["registry", "policy", "show", ref.name, "--root", str(root),
                                "--json"])
    assert json.loads(shown.stdout)["policy"]["signed_by"]["role"] == "owner"
    stored = root / "model_registry" / "gate-policies" / ref.name / "0001" / "policy.yaml"
    stored.write_text("gates: ['roc_auc >= 0.1']\n")
    monkeypatch.setenv(keys.ENV_KEY, str(tmp_path / "vic"))  # a validator signs the run
    edited = runner.invoke(app, ["validate", f"{ref.name}:{ref.version}", "--root", str(root)])
    assert edited.exit_code == 2 and "policy.yaml was edited" in edited.output
    verify = runner.invoke(app, ["registry", "verify", ref.name, "--root", str(root)])
    assert verify.exit_code == 1 and "version 1: policy.yaml was edited" in verify.output


def test_in_a_signed_store_a_deviation_is_signed_marked_and_needs_an_override(
        signed_adult_store, tmp_path):
    import shutil

    from tests.signed_store import cli

    signed = signed_adult_store
    root = tmp_path / "store"
    shutil.copytree(signed.root, root)
    loose = cli(["validate", signed.ref, "--gate", "roc_auc >= 0.5", "--replace-gates",
                 "--json"], root, key=signed.key("vic"))
    assert loose.exit_code == 4, loose.output
    refused = cli(["registry", "approve", signed.ref, "--note", "fine"], root,
                  key=signed.key("rita"))
    assert refused.exit_code == 2 and "only under a policy deviation" in refused.output
    ok = cli(["registry", "approve", signed.ref, "--note", "fine", "--override",
              "board decision 12"], root, key=signed.key("rita"))
    assert ok.exit_code == 0, ok.output
    listed = json.loads(cli(["registry", "list", "--json"], root).output)
    row = next(r for r in listed if r["version"] == signed.version)
    assert (row["validation_status"], row["approval_status"]) == (
        "passed (policy deviation)", "approved (override)")
    verified = cli(["registry", "verify", signed.ref], root, FSTRAIN_TRUSTED_OWNER=signed.owner)
    assert verified.exit_code == 0, verified.output
    registry = feature_store.login(backend="local", root=root).get_model_registry()
    assert registry.get_best_model(signed.name, "auc", require_approval=True) is None

    policy = tmp_path / "gates.yaml"
    policy.write_text("gates: ['roc_auc >= 0.5']\nstandard_gates: false\n")
    assert cli(["registry", "policy", "set", signed.name, "--file", str(policy)], root,
               key=signed.key("vic")).exit_code == 2  # a validator may not set the policy
    owner = cli(["registry", "policy", "set", signed.name, "--file", str(policy)], root,
                key=signed.key("olga"))
    assert owner.exit_code == 0 and "signed by olga (owner" in owner.output
    clean = cli(["validate", signed.ref, "--json"], root, key=signed.key("vic"))
    assert clean.exit_code == 0, clean.output  # a plain pass under the owner's policy
    run = registry.get_model(signed.name, signed.version).latest_validation()
    assert run["policy"]["label"] == "policy file v1"
    assert run["policy"]["signed_by"]["name"] == "olga"


def test_a_policy_file_gate_on_a_column_the_view_does_not_slice_is_refused_before_work(adult):
    """An owner's policy gating on ``gender`` where the view slices by ``sex`` and ``race``
    used to record a permanent FAILED run ("was not computed") after the whole validation;
    it is refused first, naming the gate, the policy and the slice columns, and nothing is
    appended."""
    from fstrain.cli.app import app

    _, root, ref = adult
    policy = root / "gates.yaml"
    policy.write_text("gates: ['roc_auc >= 0.7', 'disparate_impact_ratio[gender] >= 0.8']\n")
    runner = CliRunner()
    stored = runner.invoke(app, ["registry", "policy", "set", ref.name, "--file", str(policy),
                                 "--root", str(root)])
    assert stored.exit_code == 0, stored.output
    model = feature_store.login(backend="local", root=root).get_model_registry().get_model(
        ref.name, ref.version)
    runs = len(model.history())
    out = runner.invoke(app, ["validate", f"{ref.name}:{ref.version}", "--root", str(root)])
    assert out.exit_code == 2, out.output
    assert "'gender' is not a slice column" in out.output and "policy file v1" in out.output
    assert "Slice columns: sex, race" in out.output and "Traceback" not in out.output
    assert len(model.history()) == runs
