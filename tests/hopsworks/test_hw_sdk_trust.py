"""The trust list of a Hopsworks project lives in the project (HopsFS), through the real SDK's
dataset API against the fake cluster: a second client (another machine, a job) sees the same
list, an edit in HopsFS is caught, and two owners changing it at once cannot lose a change."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sdk_server import serve

import feature_store
from fstrain.kernel.errors import BackendError
from model_registry.audit import keys
from model_registry.audit.trust import ENV_TRUSTED_OWNER
from model_registry.hopsworks.trust import REMOTE_DIR, HopsworksTrustStore

PROJECT = "fstrain_ci"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Any]]:
    """The fake cluster and two clients of its project, each with its own local root (logging
    in takes seconds: once per module)."""
    root = tmp_path_factory.mktemp("trust_cluster")
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
    """The module's cluster with no trust list, in the project or in either client's copy."""
    import shutil

    for var in (keys.ENV_KEY, ENV_TRUSTED_OWNER):
        monkeypatch.delenv(var, raising=False)
    fake, one, two = cluster
    for folder in (_remote(fake), one.root / "trust", two.root / "trust"):
        shutil.rmtree(folder, ignore_errors=True)
    return cluster


def _key(tmp_path: Path, name: str) -> Any:
    keys.generate_key(tmp_path / name, comment=name)
    return keys.load_private_key(tmp_path / name)


def _remote(fake: Any) -> Path:
    return fake.server.state.hopsfs / "Projects" / PROJECT / REMOTE_DIR


def test_a_second_client_sees_the_projects_trust_list(clients, tmp_path):
    fake, one, two = clients
    owner = _key(tmp_path, "olga")
    first = HopsworksTrustStore(one)
    assert not first.exists()
    first.enrol(owner, name="olga", role="owner", public_key=keys.public_key_line(owner))
    assert sorted(p.name for p in _remote(fake).iterdir()) == ["allowed_signers", "log.jsonl"]
    rita = _key(tmp_path, "rita")
    first.enrol(owner, name="rita", role="reviewer", public_key=keys.public_key_line(rita))
    report = HopsworksTrustStore(two).read()
    assert not report.problems
    assert {i.name for i in report.trust.identities.values()} == {"olga", "rita"}
    assert (_remote(fake) / "log.jsonl").read_bytes() == (two.root / "trust/log.jsonl").read_bytes()
    assert not [p for p in _remote(fake).iterdir() if p.name.endswith(".part")]


def test_an_edit_in_hopsfs_is_caught_and_a_local_copy_is_not_the_truth(clients, tmp_path):
    fake, one, two = clients
    owner = _key(tmp_path, "olga")
    HopsworksTrustStore(one).enrol(owner, name="olga", role="owner",
                                   public_key=keys.public_key_line(owner))
    mallory = _key(tmp_path, "mallory")
    signers = _remote(fake) / "allowed_signers"
    signers.write_text(signers.read_text() + f'mallory namespaces="fstrain",role="owner" '
                       f"{keys.public_key_line(mallory)}\n")
    assert any("allowed_signers" in p for p in HopsworksTrustStore(two).read().problems)
    (one.root / "trust/log.jsonl").unlink()  # a client's copy is only a copy
    assert HopsworksTrustStore(one).read().trust is not None
    for path in _remote(fake).iterdir():
        path.unlink()  # gone from the project: gone from every copy
    store = HopsworksTrustStore(two)
    assert store.read().trust is None and not (two.root / "trust/log.jsonl").exists()


def test_two_owners_changing_it_at_once_cannot_lose_a_change(clients, tmp_path, monkeypatch):
    fake, one, two = clients
    owner = _key(tmp_path, "olga")
    HopsworksTrustStore(one).enrol(owner, name="olga", role="owner",
                                   public_key=keys.public_key_line(owner))
    late = HopsworksTrustStore(two)
    late.read()  # read before the other change lands
    rita, vic = _key(tmp_path, "rita"), _key(tmp_path, "vic")
    HopsworksTrustStore(one).enrol(owner, name="rita", role="reviewer",
                                   public_key=keys.public_key_line(rita))
    monkeypatch.setattr(late, "pull", lambda: None)  # as if the change landed meanwhile
    with pytest.raises(BackendError, match="changed while this change was being made"):
        late.enrol(owner, name="vic", role="validator", public_key=keys.public_key_line(vic))
    monkeypatch.undo()
    names = {i.name for i in HopsworksTrustStore(two).read().trust.identities.values()}
    assert names == {"olga", "rita"}  # rita kept, vic not half-written


def test_fstrain_keys_with_backend_hopsworks_writes_the_projects_list(clients, tmp_path):
    from typer.testing import CliRunner

    from fstrain.cli.app import app

    fake, one, two = clients
    env = {"HOPSWORKS_HOST": fake.server.host, "HOPSWORKS_PORT": str(fake.server.port),
           "HOPSWORKS_PROJECT": PROJECT, "HOPSWORKS_API_KEY": fake.api_key, "FSTRAIN_KEY": ""}
    made = CliRunner().invoke(app, ["keys", "new", "olga", "--role", "owner", "--out",
                                    str(tmp_path / "olga"), "--backend", "hopsworks",
                                    "--root", str(tmp_path / "three")], env=env)
    assert made.exit_code == 0, made.output
    assert f"hopsworks:{PROJECT}/{REMOTE_DIR}/allowed_signers" in made.output
    assert (_remote(fake) / "log.jsonl").is_file()
    names = {i.name for i in HopsworksTrustStore(two).read().trust.identities.values()}
    assert names == {"olga"}
