"""Keys, fingerprints, signatures and the trust list (model_registry.audit), without a model."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from fstrain.kernel.errors import (
    ConfigError,
    InvalidArgumentError,
    UnauthorizedError,
    VerificationError,
)
from model_registry.audit import keys
from model_registry.audit.identity import Signer
from model_registry.audit.records import seal
from model_registry.audit.trust import ENV_TRUSTED_OWNER, TrustStore

SSH_KEYGEN = shutil.which("ssh-keygen")


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for var in (keys.ENV_KEY, keys.ENV_PASSPHRASE, ENV_TRUSTED_OWNER):
        monkeypatch.delenv(var, raising=False)


def _key(tmp_path, name, passphrase=None):
    path = tmp_path / name
    keys.generate_key(path, comment=name, passphrase=passphrase)
    return path, keys.load_private_key(path, passphrase=passphrase)


def _store(tmp_path):
    """A trust list with owner ``olga`` and reviewer ``rita``; the owner key and the store."""
    trust = TrustStore(tmp_path / "trust")
    _, owner = _key(tmp_path, "olga")
    trust.enrol(owner, name="olga", role="owner", public_key=keys.public_key_line(owner))
    _, rita = _key(tmp_path, "rita")
    trust.enrol(owner, name="rita", role="reviewer", public_key=keys.public_key_line(rita))
    return trust, owner, rita


@pytest.mark.skipif(SSH_KEYGEN is None, reason="ssh-keygen not installed")
def test_fingerprint_is_what_ssh_keygen_prints_and_its_keys_load(tmp_path, monkeypatch):
    path = tmp_path / "id_ed25519"
    subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "secret", "-C", "me@host", "-f",
                    str(path)], check=True, timeout=30)
    printed = subprocess.run([SSH_KEYGEN, "-lf", f"{path}.pub"], capture_output=True, text=True,
                             check=True, timeout=30).stdout.split()[1]
    assert keys.fingerprint((tmp_path / "id_ed25519.pub").read_text()) == printed
    with pytest.raises(ConfigError, match="FSTRAIN_KEY_PASSPHRASE"):
        keys.load_private_key(path)
    monkeypatch.setenv(keys.ENV_PASSPHRASE, "wrong")
    with pytest.raises(ConfigError, match="passphrase is wrong"):
        keys.load_private_key(path)
    monkeypatch.setenv(keys.ENV_PASSPHRASE, "secret")
    assert keys.fingerprint(keys.load_private_key(path)) == printed
    ours = tmp_path / "ours"
    keys.generate_key(ours, comment="ours")
    again = subprocess.run([SSH_KEYGEN, "-lf", str(ours)], capture_output=True, text=True,
                           check=True, timeout=30).stdout.split()[1]
    assert keys.fingerprint(keys.load_private_key(ours)) == again  # ssh-keygen reads ours


def test_keys_are_never_overwritten_and_are_private(tmp_path):
    path, _ = _key(tmp_path, "k", passphrase="pw")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    with pytest.raises(InvalidArgumentError, match="never overwritten"):
        keys.generate_key(path, comment="again")
    with pytest.raises(ConfigError, match="not an OpenSSH private key"):
        keys.load_private_key(path.with_name("k.pub"))


def test_a_signature_covers_every_field_and_names_its_domain(tmp_path):
    _, key = _key(tmp_path, "k")
    message = b'{"a":1}'
    signature = keys.sign(key, message)
    assert keys.signature_valid(keys.public_key_line(key), message, signature)
    assert not keys.signature_valid(keys.public_key_line(key), b'{"a":2}', signature)
    raw_without_domain = __import__("base64").b64encode(key.sign(message)).decode()
    assert not keys.signature_valid(keys.public_key_line(key), message, raw_without_domain)
    assert not keys.signature_valid(keys.public_key_line(key), message, "not base64!")


def test_first_key_must_be_an_owner_that_signs_itself(tmp_path):
    trust = TrustStore(tmp_path / "trust")
    _, a = _key(tmp_path, "a")
    _, b = _key(tmp_path, "b")
    with pytest.raises(UnauthorizedError, match="first key must be an owner"):
        trust.enrol(a, name="a", role="reviewer", public_key=keys.public_key_line(a))
    with pytest.raises(UnauthorizedError, match="sign its own enrolment"):
        trust.enrol(b, name="a", role="owner", public_key=keys.public_key_line(a))
    assert not trust.exists()
    trust.enrol(a, name="a", role="owner", public_key=keys.public_key_line(a))
    assert trust.load().root.fingerprint == keys.fingerprint(a)


def test_only_an_active_owner_changes_the_trust_list(tmp_path):
    trust, owner, rita = _store(tmp_path)
    _, other = _key(tmp_path, "other")
    with pytest.raises(UnauthorizedError, match="only an owner"):
        trust.enrol(rita, name="x", role="reviewer", public_key=keys.public_key_line(other))
    with pytest.raises(UnauthorizedError, match="not enrolled"):
        trust.enrol(other, name="x", role="reviewer", public_key=keys.public_key_line(other))
    with pytest.raises(InvalidArgumentError, match="enrolled already"):
        trust.enrol(owner, name="rita2", role="reviewer", public_key=keys.public_key_line(rita))
    with pytest.raises(UnauthorizedError, match="last active owner"):
        trust.revoke(owner, "olga", reason="leaving")
    revoked = trust.revoke(owner, "rita", reason="left the bank")
    assert revoked.revoked is not None
    listed = trust.load()
    assert listed.find("rita").revoked == revoked.revoked
    with pytest.raises(UnauthorizedError, match="revoked"):
        listed.signer(rita)


def test_allowed_signers_is_git_form_and_an_edit_is_detected(tmp_path):
    trust, owner, rita = _store(tmp_path)
    lines = [line for line in trust.signers_path.read_text().splitlines()
             if not line.startswith("#")]
    name, options, kind, blob, comment = lines[1].split(" ", 4)
    assert (name, kind) == ("rita", "ssh-ed25519")
    assert 'role="reviewer"' in options and 'person="rita"' in options and "valid-after=" in options
    assert comment == keys.fingerprint(rita)
    text = trust.signers_path.read_text().replace('role="reviewer"', 'role="owner"')
    trust.signers_path.write_text(text)
    report = trust.read()
    assert any("allowed_signers line 3: edited" in p for p in report.problems), report.problems
    with pytest.raises(VerificationError):
        trust.enrol(owner, name="x", role="reviewer", public_key=keys.public_key_line(rita))


def test_an_edited_or_truncated_or_reordered_log_is_detected(tmp_path):
    trust, owner, _ = _store(tmp_path)
    raw = trust.log_path.read_bytes().splitlines()
    edited = json.loads(raw[1])
    edited["identity"]["role"] = "owner"
    trust.log_path.write_bytes(raw[0] + b"\n" + json.dumps(edited, sort_keys=True,
                                                           separators=(",", ":")).encode() + b"\n")
    assert any("line 2: forged" in p for p in trust.read().problems)
    trust.log_path.write_bytes(raw[1] + b"\n" + raw[0] + b"\n")
    assert any("line 1" in p for p in trust.read().problems)
    trust.log_path.write_bytes(b"")
    assert trust.read().problems


def test_the_pinned_owner_roots_the_trust_list(tmp_path, monkeypatch):
    trust, owner, _ = _store(tmp_path)
    report = trust.read()
    assert not report.problems and "no owner pinned" in report.notes[0]
    monkeypatch.setenv(ENV_TRUSTED_OWNER, keys.fingerprint(owner))
    assert "trusted owner: olga" in trust.read().notes[0]
    # an attacker replaces the whole trust list with their own self-signed owner
    shutil.rmtree(trust.directory)
    _, mallory = _key(tmp_path, "mallory")
    trust.enrol(mallory, name="olga", role="owner", public_key=keys.public_key_line(mallory))
    with pytest.raises(VerificationError, match="not at the pinned owner"):
        trust.load()


def test_check_seal_names_unknown_forged_revoked_and_mismatched_signers(tmp_path):
    trust, owner, rita = _store(tmp_path)
    listed = trust.load()
    signer = listed.signer(rita)
    record = seal({"seq": 1, "kind": "approval", "created": "2999-01-01T00:00:00+00:00"}, signer)
    assert listed.check_seal(record, where="r") == []
    assert "forged" in listed.check_seal({**record, "seq": 2}, where="r")[0]
    _, stranger = _key(tmp_path, "stranger")
    from model_registry.audit.identity import Identity

    fake = Signer(stranger, Identity("rita", "rita", "reviewer", keys.fingerprint(stranger),
                                     keys.public_key_line(stranger)))
    assert "unknown key" in listed.check_seal(seal(record, fake), where="r")[0]
    boosted = {**record, "signer": {**record["signer"], "role": "owner"}}
    assert listed.check_seal(boosted, where="r")  # the signer block is signed too
    assert "unsigned" in listed.check_seal(seal(record, None), where="r")[0]
    trust.revoke(owner, "rita", reason="key lost")
    assert "revoked" in trust.load().check_seal(record, where="r")[0]


def test_a_service_key_attests_only_for_the_persons_it_was_enrolled_for(tmp_path):
    trust, owner, _ = _store(tmp_path)
    _, web = _key(tmp_path, "web")
    trust.enrol(owner, name="web", role="service", public_key=keys.public_key_line(web),
                attests_for=["alice:reviewer"])
    signer = trust.load().signer(web)
    assert signer.acting_as("alice").role == "reviewer"
    assert signer.acting_as("alice").block()["acting_for"] == "alice"
    with pytest.raises(UnauthorizedError, match="not enrolled to attest"):
        signer.acting_as("bob")
    with pytest.raises(InvalidArgumentError, match="PERSON:ROLE"):
        trust.enrol(owner, name="web2", role="service", public_key=keys.public_key_line(owner),
                    attests_for=["alice"])


def test_a_service_key_may_vouch_for_any_person_in_a_role(tmp_path):
    trust, owner, _ = _store(tmp_path)
    _, web = _key(tmp_path, "web")
    trust.enrol(owner, name="web", role="service", public_key=keys.public_key_line(web),
                attests_for=["*:reviewer"])
    listed = trust.load()
    signer = listed.signer(web).acting_as("carol")
    assert (signer.person, signer.role) == ("carol", "reviewer")
    record = seal({"seq": 1, "kind": "approval", "created": "2999-01-01T00:00:00+00:00"}, signer)
    assert listed.check_seal(record, where="r") == []
    with pytest.raises(UnauthorizedError, match="as a data-scientist"):
        listed.signer(web).acting_as("carol", "data-scientist")
