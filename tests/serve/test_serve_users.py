"""``fstrain users``: passwords from stdin only, argon2 hashes, a signed and chained log beside
the trust list; a store with a trust list needs the owner's key, and a forged user is refused."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fstrain.cli.app import app as cli
from fstrain.kernel.errors import UnauthorizedError, VerificationError
from fstrain.serve.users import UserStore, users_path

PASSWORD = "correct horse battery staple"


def _keys(tmp_path, *names_roles, attests=()):
    """A trust list under ``tmp_path/store/trust``: an owner ``olga`` and then each
    ``(name, role)``; returns name → private key path."""
    from model_registry.audit import TrustStore, generate_key, load_private_key

    root = tmp_path / "store"
    paths = {}
    store = TrustStore(root / "trust")
    owner = None
    for name, role in (("olga", "owner"), *names_roles):
        path = tmp_path / "keys" / name
        line = generate_key(path, comment=name)
        paths[name] = path
        signer = owner if owner is not None else load_private_key(path)
        store.enrol(signer, name=name, role=role, public_key=line,
                    attests_for=attests if role == "service" else ())
        owner = owner or load_private_key(path)
    return root, paths


def _run(args, stdin=PASSWORD + "\n", env=None):
    return CliRunner().invoke(cli, args, input=stdin, env=env or {})


def _unsigned_store(tmp_path):
    """A store without a trust list (its registry only): users are added to a store."""
    from fstrain.project import Project

    root = tmp_path / "store"
    Project(root).get_model_registry()
    return root


def test_users_add_reads_the_password_from_stdin_and_stores_only_an_argon2_hash(tmp_path):
    root = _unsigned_store(tmp_path)
    out = _run(["users", "add", "rita", "--role", "reviewer", "--root", str(root)])
    assert out.exit_code == 0, out.output
    assert "unsigned (this store has no trust list)" in out.output
    text = users_path(root).read_text()
    assert PASSWORD not in text and "$argon2id$" in text
    assert users_path(root).stat().st_mode & 0o077 == 0
    listed = _run(["users", "list", "--root", str(root), "--json"])
    assert json.loads(listed.output) == [{**json.loads(listed.output)[0], "name": "rita",
                                          "role": "reviewer"}]
    assert "argon2" not in listed.output


def test_users_add_refuses_a_password_argument_a_short_password_and_a_bad_role(tmp_path):
    root = str(_unsigned_store(tmp_path))
    missing = _run(["users", "add", "rita", "--role", "reviewer", "--root", root + "x"])
    assert missing.exit_code == 2 and "does not exist" in missing.output
    assert not (tmp_path / "storex").exists()
    assert _run(["users", "add", "rita", "--role", "reviewer", "--password", "x" * 20,
                 "--root", root]).exit_code == 2  # no such option
    short = _run(["users", "add", "rita", "--role", "reviewer", "--root", root], stdin="short\n")
    assert short.exit_code == 2 and "at least 12 characters" in short.output
    bad = _run(["users", "add", "rita", "--role", "boss", "--root", root])
    assert bad.exit_code == 2 and "viewer, data-scientist, reviewer, owner" in bad.output
    twice = [_run(["users", "add", "rita", "--role", "viewer", "--root", root]) for _ in range(2)]
    assert twice[0].exit_code == 0 and twice[1].exit_code == 2
    assert "already exists" in twice[1].output


def test_with_a_trust_list_users_change_only_with_the_owners_key(tmp_path):
    root, paths = _keys(tmp_path, ("dana", "data-scientist"))
    args = ["users", "add", "rita", "--role", "reviewer", "--root", str(root)]
    unsigned = _run(args)
    assert unsigned.exit_code == 2 and "FSTRAIN_KEY" in unsigned.output
    wrong = _run(args, env={"FSTRAIN_KEY": str(paths["dana"])})
    assert wrong.exit_code == 2 and "data-scientist key" in wrong.output
    ok = _run(args, env={"FSTRAIN_KEY": str(paths["olga"])})
    assert ok.exit_code == 0 and "signed by olga (SHA256:" in ok.output
    record = json.loads(users_path(root).read_text().splitlines()[0])
    assert record["signer"]["name"] == "olga" and record["signature"]
    assert UserStore(root).get("rita").role == "reviewer"
    passwd = _run(["users", "passwd", "rita", "--root", str(root)],
                  stdin="another long passphrase\n", env={"FSTRAIN_KEY": str(paths["olga"])})
    assert passwd.exit_code == 0, passwd.output
    removed = _run(["users", "remove", "rita", "--root", str(root)],
                   env={"FSTRAIN_KEY": str(paths["olga"])})
    assert removed.exit_code == 0 and UserStore(root).get("rita") is None


def test_a_user_written_into_the_log_by_hand_is_refused(tmp_path):
    from fstrain.kernel.canonical_json import canonical_bytes
    from model_registry.audit import load_private_key, sha256_hex

    root, paths = _keys(tmp_path)
    store = UserStore(root)
    trust = store.trust_store.load()
    store.add("vic", "viewer", PASSWORD, signer=trust.signer(load_private_key(paths["olga"])))
    lines = users_path(root).read_bytes().splitlines()
    forged = {"seq": 2, "created": "2099-01-01T00:00:00+00:00", "prev": sha256_hex(lines[0]),
              "kind": "user-add", "user": "mallory", "role": "reviewer",
              "password_hash": "$argon2id$forged", "fstrain_version": None,
              "signer": None, "signature": None}
    users_path(root).write_bytes(b"\n".join([*lines, canonical_bytes(forged)]) + b"\n")
    with pytest.raises(VerificationError, match="line 2: unsigned"):
        UserStore(root).get("mallory")
    # editing vic's role in place breaks the signature
    edited = json.loads(lines[0])
    edited["role"] = "reviewer"
    users_path(root).write_bytes(canonical_bytes(edited) + b"\n")
    with pytest.raises(VerificationError, match="forged"):
        UserStore(root).get("vic")


def test_a_signed_log_without_its_trust_list_is_refused(tmp_path):
    import shutil

    from model_registry.audit import load_private_key

    root, paths = _keys(tmp_path)
    store = UserStore(root)
    store.add("vic", "viewer", PASSWORD,
              signer=store.trust_store.load().signer(load_private_key(paths["olga"])))
    keep = users_path(root).read_bytes()
    shutil.rmtree(root / "trust")
    users_path(root).parent.mkdir()
    users_path(root).write_bytes(keep)
    with pytest.raises(VerificationError, match="no trust list"):
        UserStore(root).list()


def test_the_server_needs_its_service_key_once_a_trust_list_exists(tmp_path):
    import fstrain
    from fstrain.kernel.errors import ConfigError
    from fstrain.serve import ServeSettings, create_app

    root, paths = _keys(tmp_path, ("dana", "data-scientist"), ("web", "service"),
                        attests=("rita:reviewer",))
    project = fstrain.login(backend="local", root=root)
    with pytest.raises(ConfigError, match="service key"):
        create_app(ServeSettings(root=root), project=project)
    with pytest.raises(ConfigError, match="data-scientist key"):
        create_app(ServeSettings(root=root, key=paths["dana"]), project=project)
    app = create_app(ServeSettings(root=root, key=paths["web"]), project=project)
    assert app is not None
    with pytest.raises(UnauthorizedError):
        UserStore(root).add("rita", "reviewer", PASSWORD)


def test_the_product_hashes_with_argon2_cffis_defaults():
    from argon2 import PasswordHasher, Type, extract_parameters

    from tests.serve.conftest import PRODUCT_HASHER

    params = extract_parameters(PRODUCT_HASHER().hash(PASSWORD))
    defaults = PasswordHasher()
    assert params.type is Type.ID
    assert (params.time_cost, params.memory_cost, params.parallelism) == (
        defaults.time_cost, defaults.memory_cost, defaults.parallelism)
