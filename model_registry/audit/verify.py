"""Verify a model version's history: files, hashes, the chain, signatures, the rules; a report.

:func:`verify_version` checks, for one version:

* every file of the version outside ``history/`` against the manifest (the manifest itself
  against the registry's hash), and every history folder against the manifest and the
  registry index (a folder deleted, added or edited outside the registry);
* every record: its stored bytes, its own files (``files``) and the artefacts it vouches for
  (``artefacts``; model files never change, an attachment may only change before the newest
  record that lists it), the version's identity fields against its creation record;
* the chain: each record's ``prev`` is the sha256 of the record before it, seq and time go up;
* signatures against the store's trust list (unknown, revoked, forged keys), the role each
  action needs, and the four-eyes rule of every approval.

It returns a :class:`VerificationReport` (state ``verified``, ``unsigned`` or ``broken``, one
line per problem naming the file, and the chain's ``head``). Limit: a chain cannot show that
its newest record was removed together with its index row; ``head`` (a hash you noted, printed
by every sign-off) checks that: it must still be in the chain.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fstrain.kernel.canonical_json import canonical_bytes
from fstrain.kernel.errors import FeatureStoreError, InvalidArgumentError, VerificationError
from model_registry.audit.identity import role_allows
from model_registry.audit.layout import (
    HISTORY_DIR,
    RECORD_FILE,
    event_dir,
    event_folders,
    record_path,
)
from model_registry.audit.records import HISTORY_PREFIX, sha256_hex
from model_registry.audit.trust import TrustList, TrustReport, TrustStore

#: manifest fields a creation record vouches for (by the sha256 of their canonical JSON).
DECLARED_FIELDS = ("name", "version", "framework", "metrics", "hyperparameters",
                   "training_config", "lineage", "model_schema", "input_example", "libraries",
                   "predictor")


def declared_fields(manifest: dict[str, Any]) -> dict[str, str]:
    """``field → sha256`` of the manifest fields a creation record vouches for."""
    return {k: sha256_hex(canonical_bytes(manifest.get(k))) for k in DECLARED_FIELDS}


class VersionView(Protocol):
    """What verification reads of a version (a :class:`~model_registry.model.Model`)."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int | None: ...

    @property
    def manifest(self) -> dict[str, Any]: ...

    @property
    def model_path(self) -> Path: ...

    @property
    def trust_store(self) -> TrustStore | None: ...

    def history_index(self) -> dict[int, str] | None: ...


@dataclass
class VerificationReport:
    """The result of verifying one version."""

    name: str
    version: int | None
    state: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    head: str | None = None
    records: int = 0
    signed: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing is broken (``verified`` or ``unsigned``)."""
        return not self.problems

    @property
    def ref(self) -> str:
        """``name:version``."""
        return f"{self.name}:{self.version}"

    def reason(self) -> str:
        """One line: the first problem (and how many more), or the state."""
        if not self.problems:
            return self.state
        more = f" (+{len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        return self.problems[0] + more

    def to_dict(self) -> dict[str, Any]:
        """JSON form (for ``--json`` and the dossier)."""
        return {"name": self.name, "version": self.version, "state": self.state, "ok": self.ok,
                "problems": list(self.problems), "notes": list(self.notes), "head": self.head,
                "records": self.records, "signed": self.signed}


@dataclass
class _Record:
    seq: int
    raw: bytes
    data: dict[str, Any]

    @property
    def sha(self) -> str:
        return sha256_hex(self.raw)

    @property
    def where(self) -> str:
        return record_path(self.seq)


class _VersionCheck:
    """One version's verification; methods append to ``problems`` and ``notes``."""

    def __init__(self, view: VersionView, manifest: dict[str, Any],
                 trust: TrustList | None) -> None:
        self.view = view
        self.manifest = manifest
        self.folder = Path(view.model_path)
        self.trust = trust
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.folders = event_folders(manifest)
        self.entries = {str(e["path"]): e for e in manifest.get("files", [])}

    def artefact_files(self) -> None:
        for rel, entry in self.entries.items():
            if rel.startswith(HISTORY_PREFIX):
                continue
            path = self.folder / rel
            if not path.is_file():
                self.problems.append(f"{rel}: missing")
            elif sha256_hex(path.read_bytes()) != entry["sha256"]:
                self.problems.append(f"{rel}: edited (its sha256 differs from the manifest)")

    def history_folders(self, index: dict[int, str] | None) -> None:
        base = self.folder / HISTORY_DIR
        on_disk = {int(p.name) for p in base.iterdir() if p.is_dir() and p.name.isdigit()
                   } if base.is_dir() else set()
        for seq in sorted(on_disk - set(self.folders)):
            self.problems.append(f"{event_dir(seq)}: not in the manifest (added outside the "
                                 "registry)")
        for seq, names in sorted(self.folders.items()):
            if RECORD_FILE not in names:
                self.notes.append(f"{event_dir(seq)}: incomplete event (no record.json), ignored")
        if index is None:
            return
        listed = {seq for seq, names in self.folders.items() if RECORD_FILE in names}
        for seq in sorted(set(index) - listed):
            self.problems.append(f"{record_path(seq)}: missing (the registry index lists it)")
        for seq in sorted(listed - set(index)):
            self.problems.append(f"{record_path(seq)}: not in the registry index (added "
                                 "outside the registry)")
        for seq in sorted(listed & set(index)):
            if index[seq] != self.folders[seq][RECORD_FILE]:
                self.problems.append(f"{record_path(seq)}: edited (the manifest and the "
                                     "registry index disagree on its sha256)")

    def read_records(self) -> list[_Record]:
        out: list[_Record] = []
        for seq in sorted(s for s, names in self.folders.items() if RECORD_FILE in names):
            path = self.folder / record_path(seq)
            if not path.is_file():
                self.problems.append(f"{record_path(seq)}: missing")
                continue
            raw = path.read_bytes()
            if sha256_hex(raw) != self.folders[seq][RECORD_FILE]:
                self.problems.append(f"{record_path(seq)}: edited (its sha256 differs from the "
                                     "manifest)")
            try:
                data = json.loads(raw)
            except ValueError:
                self.problems.append(f"{record_path(seq)}: not a JSON record (edited)")
                continue
            if not isinstance(data, dict) or data.get("seq") != seq:
                seen = data.get("seq") if isinstance(data, dict) else None
                self.problems.append(f"{record_path(seq)}: out of order (the record says it is "
                                     f"event {seen})")
                continue
            out.append(_Record(seq, raw, data))
        return out

    def chain(self, records: list[_Record]) -> None:
        previous: _Record | None = None
        for record in records:
            if "prev" not in record.data:
                self.notes.append(f"{record.where}: written before records were chained")
            elif record.data["prev"] != (None if previous is None else previous.sha):
                after = "the start" if previous is None else previous.where
                self.problems.append(
                    f"{record.where}: out of order, or a record before it was removed (its prev "
                    f"does not match {after})")
            if previous is not None and str(record.data.get("created")) < str(
                    previous.data.get("created")):
                self.problems.append(f"{record.where}: out of order (dated before "
                                     f"{previous.where})")
            previous = record

    def event_files(self, record: _Record) -> None:
        signed = record.data.get("files") or {}
        listed = {n: s for n, s in self.folders.get(record.seq, {}).items() if n != RECORD_FILE}
        for name in sorted(set(listed) - set(signed)):
            self.problems.append(f"{event_dir(record.seq)}/{name}: added after "
                                 f"{record.where} was written")
        for name, sha in sorted(signed.items()):
            rel = f"{event_dir(record.seq)}/{name}"
            path = self.folder / rel
            if name not in listed or not path.is_file():
                self.problems.append(f"{rel}: missing")
            elif listed[name] != sha or sha256_hex(path.read_bytes()) != sha:
                self.problems.append(f"{rel}: edited (differs from what {record.where} covers)")

    def artefacts(self, records: list[_Record]) -> None:
        newest: dict[str, tuple[_Record, str]] = {}
        for record in records:
            for rel, sha in (record.data.get("artefacts") or {}).items():
                entry = self.entries.get(rel)
                if entry is None:
                    self.problems.append(f"{rel}: removed ({record.where} covers it)")
                elif entry.get("kind") != "attachment" and entry["sha256"] != sha:
                    self.problems.append(f"{rel}: changed since {record.where} covered it")
                newest[rel] = (record, sha)
        for rel, (record, sha) in newest.items():
            entry = self.entries.get(rel)
            if entry is not None and entry.get("kind") == "attachment" and entry["sha256"] != sha:
                self.problems.append(f"{rel}: changed after {record.where} covered it")

    def creation(self, records: list[_Record]) -> None:
        first = next((r for r in records if r.data.get("kind") == "creation"), None)
        if first is None:
            created = str(self.manifest.get("created") or "")
            if self.trust is not None and created >= self.trust.started:
                self.problems.append(f"{record_path(0)}: missing (a version created after the "
                                     "trust list began has a signed creation record)")
            else:
                self.notes.append("no creation record (created before fstrain recorded it)")
            return
        said = first.data.get("model") or {}
        if (said.get("name"), said.get("version")) != (self.view.name, self.view.version):
            self.problems.append(f"{first.where}: it is the creation record of "
                                 f"{said.get('name')}:{said.get('version')}, not of this version")
        declared = first.data.get("declared") or {}
        current = declared_fields(self.manifest)
        for key, sha in sorted(declared.items()):
            if current.get(key) != sha:
                self.problems.append(f"manifest.json: {key} changed since the version was "
                                     f"created ({first.where})")

    def seals(self, records: list[_Record]) -> int:
        signed = 0
        for record in records:
            if record.data.get("signature") is None:
                if self.trust is not None:
                    self.problems.extend(self.trust.check_seal(record.data, where=record.where))
                continue
            if self.trust is None:
                self.problems.append(f"{record.where}: signed, but the store has no trust list "
                                     "to check it against (was trust/ removed?)")
                continue
            found = self.trust.check_seal(record.data, where=record.where)
            self.problems.extend(found)
            signed += 1
            if not found:
                self._rules(record, records)
        return signed

    def _rules(self, record: _Record, records: list[_Record]) -> None:
        kind = str(record.data.get("kind"))
        block = record.data.get("signer") or {}
        if not role_allows(str(block.get("role")), kind):
            self.problems.append(f"{record.where}: a {kind} signed by {block.get('person')} as "
                                 f"a {block.get('role')}, a role that may not do it")
        if kind != "approval":
            return
        for earlier in records:
            if earlier.seq >= record.seq:
                break
            person = (earlier.data.get("signer") or {}).get("person")
            if person and person == block.get("person") and earlier.data.get("kind") in (
                    "creation", "validation"):
                self.problems.append(f"{record.where}: four eyes broken: {person} approved a "
                                     f"version whose {earlier.data.get('kind')} they signed "
                                     f"({earlier.where})")
                return


def verify_version(view: VersionView, *, head: str | None = None,
                   trust_report: TrustReport | None = None) -> VerificationReport:
    """Verify one version (see the module doc). ``head``: a record hash noted earlier that
    must still be in the chain; ``trust_report``: the store's trust list, read once by a
    caller that verifies many versions."""
    store = view.trust_store
    trust_report = trust_report or (store.read() if store is not None else TrustReport(None))
    report = VerificationReport(view.name, view.version, "broken",
                                problems=[f"trust list: {p}" for p in trust_report.problems])
    try:
        manifest = view.manifest
        index = view.history_index()
    except FeatureStoreError as exc:
        report.problems.append(f"manifest.json: {exc}")
        return report
    check = _VersionCheck(view, manifest, None if trust_report.problems else trust_report.trust)
    check.artefact_files()
    check.history_folders(index)
    records = check.read_records()
    check.chain(records)
    for record in records:
        check.event_files(record)
    check.artefacts(records)
    check.creation(records)
    report.signed = check.seals(records)
    report.records, report.head = len(records), (records[-1].sha if records else None)
    _check_head(report, records, head)
    report.problems += check.problems
    report.notes += check.notes
    signed_store = trust_report.trust is not None
    report.state = ("broken" if report.problems else "verified"
                    if signed_store and report.records and report.signed == report.records
                    else "unsigned")
    return report


def _check_head(report: VerificationReport, records: list[_Record], head: str | None) -> None:
    if head is None:
        return
    hashes = [r.sha for r in records]
    wanted = head.strip().lower()
    if wanted not in hashes:
        now = (report.head or "none")[:12]
        report.problems.append(
            f"--head {wanted[:12]}…: not in the chain (its head is {now}…): the records after "
            "it were removed (truncated), or it is another version's head")
    elif hashes[-1] != wanted:
        report.notes.append(f"{len(hashes) - 1 - hashes.index(wanted)} record(s) after the "
                            "given head")


@dataclass
class RegistryVerification:
    """The result of verifying a registry (or some of its versions): the trust list once, one
    report per version, and the problems of the models' gate-policy files (one line each)."""

    trust: TrustReport
    versions: list[VerificationReport]
    policies: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the trust list, every version and every policy file verify."""
        return (not self.trust.problems and all(v.ok for v in self.versions)
                and not self.policies)

    def problem_lines(self) -> list[str]:
        """One line per broken item: ``trust list: …``, ``NAME:VERSION FILE: what`` or
        ``policy of model 'NAME' version N: what``."""
        lines = [f"trust list: {p}" for p in self.trust.problems]
        for report in self.versions:
            lines += [f"{report.ref} {p}" for p in report.problems
                      if not p.startswith("trust list: ")]
        return lines + self.policies


class _Registry(Protocol):
    @property
    def trust_store(self) -> TrustStore | None: ...

    def list_models(self, name: str | None = None) -> list[Any]: ...

    def get_model(self, name: str, version: int | None = None) -> Any: ...

    @property
    def policies(self) -> Any: ...


def verify_registry(registry: _Registry, *, name: str | None = None, version: int | None = None,
                    head: str | None = None) -> RegistryVerification:
    """Verify the trust list and every version of the registry (of model ``name``, or the one
    version ``name:version``, which ``head`` may then pin)."""
    store = registry.trust_store
    trust_report = store.read() if store is not None else TrustReport(None)
    models = ([registry.get_model(name, version)] if name is not None and version is not None
              else registry.list_models(name))
    if head is not None and len(models) != 1:
        raise InvalidArgumentError("--head checks one version's chain: name it as NAME:VERSION.")
    return RegistryVerification(trust_report, [
        verify_version(m, head=head, trust_report=trust_report) for m in models],
        _policy_problems(registry, [name] if name is not None else
                         sorted({m.name for m in models}), trust_report))


def _policy_problems(registry: _Registry, names: list[str], trust: TrustReport) -> list[str]:
    """What is wrong with each model's stored gate-policy files (hashes, chain, seals)."""
    problems: list[str] = []
    for name in names:
        try:
            registry.policies.versions(name, trust.trust)
        except VerificationError as exc:
            problems += exc.problems or [str(exc)]
        except FeatureStoreError as exc:
            problems.append(str(exc))
    return problems
