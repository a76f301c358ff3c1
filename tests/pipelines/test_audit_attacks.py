"""A sign-off a model-risk reviewer can trust (issue 30, items 1-4), attacked through the real
CLI on an adult model the pipelines made in a store with a trust list.

One signed store per module: a copy of the session's adult store, an owner (olga), a data
scientist who trains (dana), a validator (vic), two reviewers (rita, rob) and a reviewer key
of dana's own; version 2 trained with dana's key and validated with vic's. Each attack works
on a private copy of it.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.signed_store import Signed, cli


@pytest.fixture(scope="module")
def signed(signed_adult_store) -> Signed:
    return signed_adult_store


@pytest.fixture
def store(signed, tmp_path) -> Path:
    """A private copy of the signed store."""
    target = tmp_path / "store"
    shutil.copytree(signed.root, target)
    return target


def _approve(signed: Signed, root: Path, key: str, *extra: str):
    override = [] if signed.status == "passed" else ["--override", "bias traced to base rates"]
    return cli(["registry", "approve", signed.ref, "--note", "reviewed the scorecard", *override,
                *extra], root, key=signed.key(key))


def _one_line_error(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def _verify(root: Path, *args: str, **env: str):
    return cli(["registry", "verify", *args], root, **env)


def _version_dir(signed: Signed, root: Path) -> Path:
    return root / "model_registry" / signed.name / str(signed.version)


def _rehash(signed: Signed, root: Path, edit) -> None:
    """Tamper as someone with write access to the files and the index: apply ``edit(folder,
    manifest)`` and make the manifest's file hashes, its hash in index.sqlite and the index's
    history rows match the edited files."""
    import hashlib

    folder = _version_dir(signed, root)
    manifest = json.loads((folder / "manifest.json").read_text())
    edit(folder, manifest)
    for entry in manifest["files"]:
        entry["sha256"] = hashlib.sha256((folder / entry["path"]).read_bytes()).hexdigest()
    data = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    (folder / "manifest.json").write_bytes(data)
    records = {int(e["path"].split("/")[1]): e["sha256"] for e in manifest["files"]
               if e["path"].endswith("/record.json")}
    with sqlite3.connect(root / "model_registry" / "index.sqlite") as db:
        db.execute("UPDATE model_versions SET manifest_sha256 = ? WHERE name = ? AND version = ?",
                    (hashlib.sha256(data).hexdigest(), signed.name, signed.version))
        db.execute("DELETE FROM model_history WHERE name = ? AND version = ?",
                   (signed.name, signed.version))
        for seq, sha in records.items():
            db.execute("INSERT INTO model_history VALUES (?,?,?,?,?,?,?)",
                       (signed.name, signed.version, seq, "x", "", None, sha))


# ----------------------------------------------------------------------------- identities


def test_records_name_who_trained_validated_and_signed(signed):
    from fstrain.project import Project

    model = Project(signed.root).get_model_registry().get_model(signed.name, signed.version)
    creation, run = model.history()
    assert creation["kind"] == "creation" and creation["trained_by"] == "dana"
    assert creation["signer"]["role"] == "data-scientist"
    assert creation["training_dataset_version"] and creation["declared"]["training_config"]
    assert run["signer"]["person"] == "vic" and run["prev"] and run["signature"]
    assert set(run["files"]) >= {"scorecard.json", "scorecard.html", "model_card.md"}
    assert "manifest.json" not in run["artefacts"] and run["artefacts"]
    out = _verify(signed.root, signed.ref, FSTRAIN_TRUSTED_OWNER=signed.owner)
    assert out.exit_code == 0, out.output
    assert f"trusted owner: olga ({signed.owner})" in out.output
    assert f"{signed.ref}: verified (2 records, 2 signed" in out.output
    unpinned = _verify(signed.root)
    assert unpinned.exit_code == 0 and "warning: no owner pinned" in unpinned.output


def test_a_trust_list_rooted_elsewhere_is_refused(signed):
    out = _verify(signed.root, FSTRAIN_TRUSTED_OWNER="SHA256:" + "A" * 43)
    assert out.exit_code == 1 and "not at the pinned owner" in out.output


def test_unsigned_and_wrong_role_actions_are_refused(signed, store):
    no_key = cli(["registry", "approve", signed.ref, "--note", "ok", "--override", "x"], store)
    _one_line_error(no_key, "trust list", "FSTRAIN_KEY")
    _one_line_error(_approve(signed, store, "vic"), "validator")
    _one_line_error(cli(["keys", "new", "eve", "--role", "reviewer", "--out",
                         str(store / "eve")], store, key=signed.key("rita")), "only an owner")


def test_free_text_reviewer_must_be_the_key(signed, store):
    _one_line_error(_approve(signed, store, "rita", "--reviewer", "somebody-else"),
                    "not the signing key")


def test_an_unknown_key_is_refused(signed, store, tmp_path):
    from model_registry.audit import generate_key

    generate_key(tmp_path / "stranger", comment="stranger")
    out = cli(["registry", "approve", signed.ref, "--note", "ok", "--override", "x"], store,
              key=str(tmp_path / "stranger"))
    _one_line_error(out, "not enrolled")


def test_a_revoked_key_is_refused(signed, store):
    revoked = cli(["keys", "revoke", "rob", "--reason", "laptop stolen"], store,
                  key=signed.key("olga"))
    assert revoked.exit_code == 0, revoked.output
    _one_line_error(_approve(signed, store, "rob"), "revoked", "laptop stolen")
    listed = cli(["keys", "list"], store)
    assert "rob" in listed.output and "revoked" in listed.output


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen not installed")
def test_a_key_made_by_ssh_keygen_signs(signed, store, tmp_path):
    path = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "pass phrase", "-C", "ann@bank",
                    "-f", str(path)], check=True, timeout=30)
    added = cli(["keys", "add", "ann", "--role", "reviewer", "--public-key", f"{path}.pub"],
                store, key=signed.key("olga"))
    assert added.exit_code == 0, added.output
    printed = subprocess.run(["ssh-keygen", "-lf", f"{path}.pub"], capture_output=True,
                             text=True, check=True, timeout=30).stdout.split()[1]
    assert printed in added.output
    override = [] if signed.status == "passed" else ["--override", "accepted"]
    ok = cli(["registry", "approve", signed.ref, "--note", "fine", *override], store,
             key=str(path), FSTRAIN_KEY_PASSPHRASE="pass phrase")
    assert ok.exit_code == 0, ok.output
    assert f"by ann (reviewer, key ann {printed})" in ok.output


# ----------------------------------------------------------------------------- four eyes


def test_nobody_approves_what_they_trained_or_validated(signed, store):
    _one_line_error(_approve(signed, store, "dana-rev"), "four eyes", "dana trained it")
    enrolled = cli(["keys", "new", "vic-rev", "--role", "reviewer", "--person", "vic", "--out",
                    str(store / "vic-rev")], store, key=signed.key("olga"))
    assert enrolled.exit_code == 0, enrolled.output
    out = cli(["registry", "approve", signed.ref, "--note", "ok", "--override", "x"], store,
              key=str(store / "vic-rev"))
    _one_line_error(out, "four eyes", "vic signed its validation run 1")


def test_sign_off_transitions_are_explicit(signed, store):
    first = _approve(signed, store, "rita")
    assert first.exit_code == 0, first.output
    assert "approved by rita (reviewer" in first.output and "head " in first.output
    _one_line_error(_approve(signed, store, "rob"), "already approved", "--supersede")
    _one_line_error(cli(["registry", "reject", signed.ref, "--note", "no"], store,
                        key=signed.key("rob")), "already approved", "rejecting it now")
    superseding = cli(["registry", "reject", signed.ref, "--note", "leaks",
                       "--supersede", "found label leakage"], store, key=signed.key("rob"))
    assert superseding.exit_code == 0, superseding.output
    assert "supersedes event 2: found label leakage" in superseding.output
    _one_line_error(_approve(signed, store, "rita", "--run", "7"), "no validation run 7")
    out = _verify(store, signed.ref)
    assert out.exit_code == 0 and "verified (4 records, 4 signed" in out.output


def test_signing_a_run_that_is_no_longer_the_latest_is_refused(signed, store):
    from fstrain.project import Project

    model = Project(store).get_model_registry().get_model(signed.name, signed.version)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FSTRAIN_KEY", signed.key("vic"))
        model.record_validation("failed", {"failing_gates": ["a rerun"]}, {"note.txt": b"x"})
    _one_line_error(_approve(signed, store, "rita", "--run", "1"), "no longer the latest",
                    "run 2")


# ----------------------------------------------------------------------------- tampering


def test_an_edited_scorecard_is_detected_and_refused(signed, store):
    from fstrain.kernel.errors import VerificationError
    from fstrain.project import Project

    page = _version_dir(signed, store) / "history" / "0001" / "scorecard.html"
    page.write_text(page.read_text().replace("FAILED", "PASSED"))
    out = _verify(store, signed.ref)
    assert out.exit_code == 1
    assert "history/0001/scorecard.html: edited" in out.output
    _one_line_error(cli(["registry", "show", signed.ref], store), "scorecard.html: edited")
    _one_line_error(_approve(signed, store, "rita"), "scorecard.html: edited")
    listed = cli(["registry", "list"], store)
    assert listed.exit_code == 1 and "unverified" in listed.output
    assert "scorecard.html: edited" in listed.output
    report = cli(["registry", "report"], store)
    assert report.exit_code == 1
    assert "unverified" in (store / "model_registry" / "index.html").read_text()
    registry = Project(store).get_model_registry()
    registry.get_model(signed.name, 1).delete()  # the unsigned session version, out of the way
    with pytest.raises(VerificationError, match="scorecard.html"):
        registry.get_best_model(signed.name, "roc_auc")


def test_a_forged_record_with_its_hashes_updated_is_detected(signed, store):
    def forge(folder: Path, manifest: dict) -> None:
        record = folder / "history" / "0001" / "record.json"
        data = json.loads(record.read_text())
        data.update(status="passed", failing_gates=[])
        record.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")

    _rehash(signed, store, forge)
    out = _verify(store, signed.ref)
    assert out.exit_code == 1, out.output
    assert "history/0001/record.json: forged" in out.output
    _one_line_error(cli(["registry", "approve", signed.ref, "--note", "ok"], store,
                        key=signed.key("rita")), "forged")


def test_a_deleted_history_folder_is_a_clear_error(signed, store):
    shutil.rmtree(_version_dir(signed, store) / "history" / "0001")
    _one_line_error(cli(["registry", "show", signed.ref], store),
                    "history/0001/record.json: missing")
    out = _verify(store, signed.ref)
    assert out.exit_code == 1 and "history/0001/record.json: missing" in out.output


def test_a_removed_or_reordered_entry_breaks_the_chain(signed, store, tmp_path):
    assert _approve(signed, store, "rita").exit_code == 0

    def drop_run(folder: Path, manifest: dict) -> None:
        shutil.rmtree(folder / "history" / "0001")
        manifest["files"] = [e for e in manifest["files"]
                             if not e["path"].startswith("history/0001/")]

    _rehash(signed, store, drop_run)
    out = _verify(store, signed.ref)
    assert out.exit_code == 1
    assert "history/0002/record.json: out of order, or a record before it was removed" in out.output
    other = tmp_path / "reordered"
    shutil.copytree(signed.root, other)
    assert _approve(signed, other, "rita").exit_code == 0

    def swap(folder: Path, manifest: dict) -> None:
        history = folder / "history"
        (history / "0001").rename(history / "tmp")
        (history / "0002").rename(history / "0001")
        (history / "tmp").rename(history / "0002")
        for entry in manifest["files"]:
            path = entry["path"]
            if path.startswith(("history/0001/", "history/0002/")):
                number = "0002" if path.startswith("history/0001/") else "0001"
                entry["path"] = f"history/{number}/" + path.split("/", 2)[2]

    _rehash(signed, other, swap)
    out = _verify(other, signed.ref)
    assert out.exit_code == 1 and "out of order" in out.output


def test_an_edited_trust_list_is_detected(signed, store):
    signers = store / "trust" / "allowed_signers"
    text = signers.read_text()
    signers.write_text(text.replace('dana role="data-scientist"', 'dana role="reviewer"'))
    out = _verify(store)
    assert out.exit_code == 1 and "allowed_signers line" in out.output and "edited" in out.output
    _one_line_error(_approve(signed, store, "rita"), "trust list", "does not verify")


def test_truncation_is_seen_only_against_a_known_head(signed, store):
    approved = _approve(signed, store, "rita")
    assert approved.exit_code == 0, approved.output
    head = approved.output.split("head ")[1].split()[0]
    assert _verify(store, signed.ref, "--head", head).exit_code == 0

    def drop_newest(folder: Path, manifest: dict) -> None:
        shutil.rmtree(folder / "history" / "0002")
        manifest["files"] = [e for e in manifest["files"]
                             if not e["path"].startswith("history/0002/")]

    _rehash(signed, store, drop_newest)
    assert _verify(store, signed.ref).exit_code == 0  # the documented limit of a chain
    out = _verify(store, signed.ref, "--head", head)
    assert out.exit_code == 1 and "not in the chain" in out.output and "truncated" in out.output


def test_an_unsigned_store_verifies_as_unsigned(adult_store):
    out = _verify(adult_store.root)
    assert out.exit_code == 0, out.output
    assert "unsigned store" in out.output and ": unsigned (" in out.output


def test_model_card_and_review_page_name_the_signers(signed, store):
    """The owner's texts are signed by whoever validated with them: the run's signer; the
    review page's sign-off block names a signed approval's person, role, fingerprint and the
    hash of the run record it signed."""
    from fstrain.project import Project

    model = Project(store).get_model_registry().get_model(signed.name, signed.version)
    run = model.latest_validation()
    vic = run["signer"]
    card_md = model.read_history_file(run["seq"], "model_card.md").decode()
    assert f"signed by: vic ({vic['role']}, {vic['fingerprint']})" in card_md
    assert _approve(signed, store, "rita").exit_code == 0
    approval = model.history()[-1]
    report = cli(["registry", "report"], store)
    assert report.exit_code == 0, report.output
    page = (Path(report.output.strip()).parent / "review-pages" / signed.name
            / f"{signed.version}.html").read_text()
    row = page.split('class="signoff-row approved-row"')[1].split("</tr>")[0]
    for cell in ("rita", "reviewer", approval["signer"]["fingerprint"],
                 approval["run_record_sha256"], f"run {run['seq']}"):
        assert f">{cell}<" in row, (cell, row)
    assert "unsigned" not in row


def test_training_and_validating_are_signed_or_refused_before_any_work(signed, store):
    no_key = cli(["validate", signed.ref], store)
    _one_line_error(no_key, "trust list", "FSTRAIN_KEY")
    as_reviewer = cli(["validate", signed.ref], store, key=signed.key("rita"))
    _one_line_error(as_reviewer, "validation is signed by a data-scientist or validator key")
    train = cli(["train", "adult", "-t", "1"], store, key=signed.key("rita"))
    _one_line_error(train, "creation is signed by a data-scientist or validator key")


def test_key_option_chooses_the_identity_over_fstrain_key(signed, store):
    # FSTRAIN_KEY names a key that may validate/train; --key names a reviewer's, and wins
    as_reviewer = cli(["validate", signed.ref, "--key", signed.key("rita")], store,
                      key=signed.key("vic"))
    _one_line_error(as_reviewer, "validation is signed by a data-scientist or validator key")
    train = cli(["train", "adult", "-t", "1", "--key", signed.key("rita")], store,
                key=signed.key("dana"))
    _one_line_error(train, "creation is signed by a data-scientist or validator key")


def test_key_option_naming_a_missing_file_is_refused_before_any_work(tmp_path):
    missing = str(tmp_path / "no-such-key")
    for args in (["validate", "adult_income"], ["train", "adult", "-t", "1"]):
        result = cli([*args, "--key", missing], tmp_path / "store")
        _one_line_error(result, "--key", missing)
    assert not (tmp_path / "store").exists()
