"""Policy-bound sign-off in the registry: stored policy files (hashes, chain, signatures), a
deviating run needs an override, and get_best_model skips overridden approvals unless asked."""

from __future__ import annotations

import hashlib
import inspect
import json

import pytest

from fstrain.kernel.errors import (
    ConfigError,
    IntegrityError,
    InvalidArgumentError,
    UnauthorizedError,
    VerificationError,
)
from model_registry.audit import keys
from model_registry.audit.trust import TrustStore
from model_registry.hopsworks.registry import HopsworksModelRegistry
from model_registry.local.registry import LocalModelRegistry
from validation.policy import current_policy, set_policy

POLICY = b"# owner: risk office\ngates:\n  - roc_auc >= 0.9\n  - max_abs_dp_difference <= 0.1\n"


def _run(model, status, *, deviation=()):
    return model.record_validation(
        status, {"metrics": {"roc_auc": 0.9}, "failing_gates": [],
                 "policy_deviation": list(deviation)},
        {"scorecard.json": json.dumps({"status": status}).encode()})


def _trust(tmp_path):
    """A trust list with owner ``olga`` and reviewer ``rita`` (the audit package's keys)."""
    store = TrustStore(tmp_path / "trust")
    made = {}
    for name, role in (("olga", "owner"), ("rita", "reviewer")):
        keys.generate_key(tmp_path / name, comment=name)
        made[name] = keys.load_private_key(tmp_path / name)
        store.enrol(made["olga"], name=name, role=role, public_key=keys.public_key_line(made[name]))
    trust = store.load()
    return trust, trust.signer(made["olga"]), trust.signer(made["rita"])


def test_a_policy_file_is_versioned_and_replaces_the_defaults(registry):
    assert current_policy(registry, "fraud", ["roc_auc >= 0.8"]).label == "use-case default"
    record, policy = set_policy(registry, "fraud", POLICY)
    assert record["version"] == 1 and record["signature"] is None  # no trust list: unsigned
    assert record["signer"] is None
    assert policy.summary().endswith("unsigned")
    second, _ = set_policy(registry, "fraud", POLICY.replace(b"0.9", b"0.92"))
    assert second["prev"] and second["version"] == 2
    now = current_policy(registry, "fraud", ["roc_auc >= 0.8"])
    assert now.label == "policy file v2" and now.document.gates[0] == "roc_auc >= 0.92"
    stored = registry.root / "gate-policies" / "fraud" / "0001" / "policy.yaml"
    assert stored.read_bytes() == POLICY  # the owner's file, comments and all


def test_a_bad_policy_file_stores_nothing(registry):
    with pytest.raises(ConfigError, match="unknown metric"):
        set_policy(registry, "fraud", b"gates: ['auc_roc >= 0.9']\n")
    assert registry.policies.versions("fraud") == []


def test_an_owner_signed_policy_is_refused_once_edited(registry, tmp_path):
    trust, owner, _ = _trust(tmp_path)
    record, policy = set_policy(registry, "fraud", POLICY, signer=owner, trust=trust)
    assert record["signer"]["role"] == "owner" and record["signature"]
    assert f"signed by olga (owner, {owner.identity.fingerprint})" in policy.summary()
    assert current_policy(registry, "fraud", [], trust=trust).version == 1
    folder = registry.root / "gate-policies" / "fraud" / "0001"
    (folder / "policy.yaml").write_bytes(POLICY.replace(b"0.1", b"0.4"))
    with pytest.raises(IntegrityError, match=r"version 1: policy.yaml was edited"):
        current_policy(registry, "fraud", [], trust=trust)
    # the forger also fixes the hash in the record: the owner's signature no longer verifies
    forged = json.loads((folder / "record.json").read_text())
    forged["file_sha256"] = hashlib.sha256((folder / "policy.yaml").read_bytes()).hexdigest()
    (folder / "record.json").write_text(json.dumps(forged))
    with pytest.raises(VerificationError, match="forged"):
        current_policy(registry, "fraud", [], trust=trust)
    with pytest.raises(VerificationError):  # and the chain is never extended
        set_policy(registry, "fraud", POLICY, signer=owner, trust=trust)


def test_with_a_trust_list_only_an_owner_sets_a_policy(registry, tmp_path):
    trust, _, reviewer = _trust(tmp_path)
    with pytest.raises(UnauthorizedError, match="an owner must sign"):
        set_policy(registry, "fraud", POLICY, trust=trust)
    with pytest.raises(UnauthorizedError, match="only an owner key signs.*rita"):
        set_policy(registry, "fraud", POLICY, signer=reviewer, trust=trust)
    assert registry.policies.versions("fraud") == []


def test_an_unsigned_policy_written_after_the_trust_list_began_does_not_verify(registry,
                                                                               tmp_path):
    trust, _, _ = _trust(tmp_path)
    set_policy(registry, "fraud", POLICY)  # written around the trust list, unsigned
    with pytest.raises(VerificationError, match="unsigned, in a store whose trust list began"):
        current_policy(registry, "fraud", [], trust=trust)


def test_a_removed_policy_version_breaks_the_chain(registry):
    for threshold in (b"0.9", b"0.91", b"0.92"):
        set_policy(registry, "fraud", POLICY.replace(b"0.9", threshold))
    import shutil

    shutil.rmtree(registry.root / "gate-policies" / "fraud" / "0002")
    with pytest.raises(IntegrityError, match="out of order"):
        current_policy(registry, "fraud", [])


def test_approving_a_deviation_needs_an_override_and_reads_so(registry, model_dir):
    model = registry.python.create_model("fraud", metrics={"auc": 0.9}).save(model_dir)
    change = "roc_auc >= 0.85 → roc_auc >= 0.5 (loosened)"
    _run(model, "passed (policy deviation)", deviation=[change])
    assert registry.get_model("fraud", 1).validation_status == "passed (policy deviation)"
    with pytest.raises(InvalidArgumentError, match=r"policy deviation \(roc_auc >= 0.85 → "
                                                   r"roc_auc >= 0.5 \(loosened\)\).*--override"):
        model.sign_off("approval", reviewer="rita", note="fine")
    model.sign_off("approval", reviewer="rita", note="fine", override="board decision 12")
    assert model.approval_status == "approved (override)"


def test_best_model_skips_overridden_approvals_unless_asked(registry, model_dir):
    high = registry.python.create_model("fraud", metrics={"auc": 0.95}).save(model_dir)
    low = registry.python.create_model("fraud", metrics={"auc": 0.8}).save(model_dir)
    _run(high, "passed (policy deviation)", deviation=["x (removed)"])
    high.sign_off("approval", reviewer="rita", note="ok", override="accepted")
    assert registry.get_best_model("fraud", "auc", require_approval=True) is None
    assert registry.get_best_model("fraud", "auc", require_approval=True,
                                   allow_overrides=True).version == 1
    _run(low, "passed")
    low.sign_off("approval", reviewer="rita", note="ok")
    assert registry.get_best_model("fraud", "auc", require_approval=True).version == 2
    assert registry.get_best_model("fraud", "auc", validated_only=True).version == 2
    assert registry.get_best_model("fraud", "auc").version == 1


@pytest.mark.parametrize("registry_class", [LocalModelRegistry, HopsworksModelRegistry])
def test_get_best_model_keeps_hsml_positional_parameters(registry_class):
    params = inspect.signature(registry_class.get_best_model).parameters
    assert list(params)[1:4] == ["name", "metric", "direction"]
    for extra in ("require_approval", "allow_overrides"):
        assert params[extra].kind is inspect.Parameter.KEYWORD_ONLY
