"""Gate-policy files of a Hopsworks project live in the project (HopsFS), through the real SDK's
dataset API against the fake cluster: a second client judges by the same policy, an owner's
signature is checked against the project's trust list, an edit in HopsFS is refused and an
upload that did not finish is not a version."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sdk_server import serve

import feature_store
from fstrain.kernel.errors import IntegrityError, VerificationError
from model_registry.audit import keys
from model_registry.audit.trust import ENV_TRUSTED_OWNER
from model_registry.hopsworks.policies import REMOTE_DIR
from model_registry.hopsworks.trust import HopsworksTrustStore
from validation.policy import current_policy, set_policy

PROJECT = "fstrain_ci"
POLICY = b"gates:\n  - roc_auc >= 0.9\nstandard_gates: false\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Any]]:
    """The fake cluster and two clients of its project (logging in takes seconds)."""
    root = tmp_path_factory.mktemp("policy_cluster")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("REST_ENDPOINT", "HOPSWORKS_HOST", "HOPSWORKS_PROJECT", "HOPSWORKS_API_KEY"):
            mp.delenv(var, raising=False)
        with serve(root / "cluster") as fake:
            one = feature_store.login(backend="hopsworks", root=root / "one", **fake.login_kwargs)
            two = feature_store.login(backend="hopsworks", root=root / "two", **fake.login_kwargs)
            yield fake, one, two
            assert not fake.server.unrouted, fake.server.unrouted


@pytest.fixture
def clients(cluster: tuple[Any, Any, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, Any]:
    """The module's cluster with no policy file and no trust list."""
    for var in (keys.ENV_KEY, ENV_TRUSTED_OWNER):
        monkeypatch.delenv(var, raising=False)
    fake, one, two = cluster
    for folder in (_remote(fake), _remote(fake).parent / "trust", one.root / "trust",
                   two.root / "trust"):
        shutil.rmtree(folder, ignore_errors=True)
    return cluster


def _remote(fake: Any) -> Path:
    return fake.server.state.hopsfs / "Projects" / PROJECT / REMOTE_DIR


def test_a_second_client_is_judged_by_the_same_policy(clients):
    fake, one, two = clients
    record, _ = set_policy(one.get_model_registry(), "fraud", POLICY)
    assert record["version"] == 1 and record["signature"] is None
    assert (_remote(fake) / "fraud" / "0001" / "policy.yaml").read_bytes() == POLICY
    seen = current_policy(two.get_model_registry(), "fraud", ["roc_auc >= 0.5"])
    assert seen.label == "policy file v1" and seen.document.gates == ("roc_auc >= 0.9",)
    second, _ = set_policy(two.get_model_registry(), "fraud", POLICY.replace(b"0.9", b"0.95"))
    assert second["version"] == 2 and second["prev"]
    assert current_policy(one.get_model_registry(), "fraud", []).version == 2


def test_an_edit_in_hopsfs_is_refused_and_an_unfinished_upload_is_no_version(clients):
    fake, one, _ = clients
    registry = one.get_model_registry()
    for threshold in (b"0.9", b"0.91"):
        set_policy(registry, "fraud", POLICY.replace(b"0.9", threshold))
    (_remote(fake) / "fraud" / "0002" / "record.json").unlink()  # the upload stopped there
    assert current_policy(registry, "fraud", []).version == 1
    assert set_policy(registry, "fraud", POLICY)[0]["version"] == 2  # takes the number again
    (_remote(fake) / "fraud" / "0001" / "policy.yaml").write_bytes(POLICY.replace(b"0.9", b"0"))
    with pytest.raises(IntegrityError, match="version 1: policy.yaml was edited"):
        current_policy(registry, "fraud", [])


def test_the_owners_signature_is_checked_against_the_projects_trust_list(clients, tmp_path):
    fake, one, two = clients
    keys.generate_key(tmp_path / "olga", comment="olga")
    owner = keys.load_private_key(tmp_path / "olga")
    HopsworksTrustStore(one).enrol(owner, name="olga", role="owner",
                                   public_key=keys.public_key_line(owner))
    trust = HopsworksTrustStore(two).load()  # the other client reads the project's list
    record, policy = set_policy(two.get_model_registry(), "fraud", POLICY,
                                signer=trust.signer(owner), trust=trust)
    assert record["signer"]["name"] == "olga" and "signed by olga (owner" in policy.summary()
    assert current_policy(one.get_model_registry(), "fraud", [], trust=trust).version == 1
    folder = _remote(fake) / "fraud" / "0001"  # a loosened file, its hash fixed in the record
    (folder / "policy.yaml").write_bytes(POLICY.replace(b"0.9", b"0.5"))
    forged = json.loads((folder / "record.json").read_text())
    forged["file_sha256"] = hashlib.sha256((folder / "policy.yaml").read_bytes()).hexdigest()
    (folder / "record.json").write_text(json.dumps(forged))
    with pytest.raises(VerificationError, match="forged"):
        current_policy(one.get_model_registry(), "fraud", [], trust=trust)
