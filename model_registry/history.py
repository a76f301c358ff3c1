"""The append-only, signed and chained history of a model version.

Every event is an immutable folder of the version, ``history/<seq>/`` (``seq`` zero-padded),
holding ``record.json`` and, for a validation run, that run's scorecard, model card and
images. Event 0 is the version's **creation** (who trained it, from which training-dataset
version and config); then come **validation** runs (``passed``/``failed``), **approvals** and
**rejections**. Nothing under ``history/`` is ever replaced or deleted while the version
exists: the registry refuses to write a path that is already in the manifest.

Each record carries ``prev`` (the sha256 of the record before it), the sha256 of its own files
and of the version's artefacts, the code version, the time and the ``signer`` block with an
Ed25519 ``signature`` (see :mod:`model_registry.audit`). A store without a trust list writes
unsigned records (``"signature": null``); once the store has one, unsigned, unenrolled and
wrong-role actions are refused. :meth:`HistoryMixin.verify_history` checks all of it.

This module is backend-neutral: it builds the records and reads them back from a version's
manifest; each backend stores the files its own way (the local registry in one index
transaction, the Hopsworks registry through attachments) and seals a record with the
:class:`Sealer` it is given once it knows the record's ``seq`` and ``prev``.

Validation runs are ``passed`` or ``failed``, either marked ``(policy deviation)`` when the run
loosened its gate policy (:mod:`model_registry.statuses`); an approval given with an override
reads ``approved (override)``.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any

from fstrain.kernel.errors import IntegrityError, InvalidArgumentError, VerificationError
from model_registry import statuses
from model_registry.audit.authorize import SIGNOFF_KINDS, resolve_signer, signoff_payload
from model_registry.audit.identity import Signer
from model_registry.audit.layout import (
    HISTORY_DIR,
    RECORD_FILE,
    event_dir,
    head_of,
    history_sequence,
    is_history_path,
    next_seq,
    record_hashes,
)
from model_registry.audit.records import artefact_evidence, seal
from model_registry.audit.verify import VerificationReport, declared_fields, verify_version

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pathlib import Path

    from model_registry.audit.trust import TrustStore

__all__ = [
    "EVENT_KINDS", "HISTORY_DIR", "RECORD_FILE", "SIGNOFF_KINDS", "HistoryMixin", "Sealer",
    "approval_state", "build_event", "chained_event", "creation_event", "event_dir", "event_files",
    "history_sequence", "is_history_path", "latest", "next_seq", "read_history",
    "record_bytes", "sha256_bytes",
]

EVENT_KINDS = ("creation", "validation", "approval", "rejection")
RECORD_FORMAT = "fstrain.history/2"
_ANY = object()


def current_user() -> str:
    """The operating-system user running fstrain (``FSTRAIN_USER`` overrides it)."""
    user = os.environ.get("FSTRAIN_USER")
    if user:
        return user
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"


def fstrain_version() -> str | None:
    """The installed fstrain distribution's version, or None."""
    try:
        return metadata.version("fstrain")
    except metadata.PackageNotFoundError:
        return None


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


class Sealer:
    """Seals a record with ``signer`` (None: unsigned) once the backend has filled in its
    ``seq`` and ``prev``. With ``expect_prev`` the record must follow exactly that head: a
    record appended meanwhile (another reviewer's sign-off) refuses this one."""

    def __init__(self, signer: Signer | None, *, expect_prev: Any = _ANY) -> None:
        self.signer = signer
        self.expect_prev = expect_prev

    def __call__(self, record: dict[str, Any]) -> dict[str, Any]:
        """The sealed record (``signer`` and ``signature`` added)."""
        if self.expect_prev is not _ANY and record.get("prev") != self.expect_prev:
            raise InvalidArgumentError(
                "another record was appended to this version's history meanwhile; review "
                "the history again and sign off again."
            )
        return seal(record, self.signer)

    @property
    def person(self) -> str:
        """Who the record speaks for: the signer's person, else the OS user (unsigned)."""
        return self.signer.person if self.signer is not None else current_user()


def build_event(kind: str, payload: Mapping[str, Any], files: Mapping[str, bytes], *,
                seq: int, created: str, code_commit: str | None, prev: str | None,
                artefacts: Mapping[str, str]) -> dict[str, Any]:
    """The unsigned record of one event: who (OS user), when, which code, the payload, the
    previous record's sha256, the sha256 of every file stored with it (paths relative to the
    event folder) and of the version's artefacts (outside ``history/``)."""
    if kind not in EVENT_KINDS:
        raise InvalidArgumentError(
            f"History event kind must be one of {', '.join(EVENT_KINDS)}. Got {kind!r} instead."
        )
    for rel in files:
        if rel == RECORD_FILE or rel.startswith("/") or ".." in rel.split("/"):
            raise InvalidArgumentError(f"History event file name {rel!r} is not allowed.")
    return {
        "format": RECORD_FORMAT, "seq": seq, "kind": kind, "created": created,
        "user": current_user(), "fstrain_version": fstrain_version(),
        "code_commit": code_commit, **dict(payload), "prev": prev,
        "files": {rel: sha256_bytes(data) for rel, data in sorted(files.items())},
        "artefacts": dict(sorted(artefacts.items())),
    }


def chained_event(manifest: Mapping[str, Any], kind: str, payload: Mapping[str, Any],
                  files: Mapping[str, bytes], *, seq: int, created: str,
                  code_commit: str | None, sealer: Sealer) -> dict[str, Any]:
    """:func:`build_event` following the manifest's newest record, sealed."""
    record = build_event(kind, payload, files, seq=seq, created=created,
                         code_commit=code_commit, prev=head_of(manifest),
                         artefacts=artefact_evidence(manifest))
    return sealer(record)


def creation_event(manifest: Mapping[str, Any], *, version: int, created: str,
                   code_commit: str | None, sealer: Sealer) -> dict[str, Any]:
    """Event 0 of version ``version``: which model and version, who trained it, from which
    training dataset, and the sha256 of the manifest fields it vouches for (metrics,
    hyperparameters, training config, lineage, …)."""
    lineage = manifest.get("lineage") or {}
    td = lineage.get("training_dataset") or {}
    payload = {
        "model": {"name": manifest.get("name"), "version": version},
        "trained_by": sealer.person,
        "feature_view": lineage.get("feature_view"),
        "training_dataset_version": lineage.get("training_dataset_version"),
        "training_dataset_splits_sha256": {s: (m or {}).get("sha256")
                                           for s, m in (td.get("splits") or {}).items()},
        "declared": declared_fields(dict(manifest)),
    }
    record = build_event("creation", payload, {}, seq=0, created=created,
                         code_commit=code_commit, prev=None,
                         artefacts=artefact_evidence(manifest))
    return sealer(record)


def record_bytes(record: Mapping[str, Any]) -> bytes:
    """The stored bytes of a record (``record.json``)."""
    return (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()


def event_files(record: Mapping[str, Any], files: Mapping[str, bytes]) -> dict[str, bytes]:
    """Version-relative path → bytes of everything an event writes (its record included)."""
    base = event_dir(int(record["seq"]))
    out = {f"{base}/{rel}": data for rel, data in files.items()}
    out[f"{base}/{RECORD_FILE}"] = record_bytes(record)
    return out


def read_history(manifest: Mapping[str, Any], read: Callable[[str], bytes]) -> list[dict[str, Any]]:
    """Every event record of a version, oldest first (``read`` returns a file's bytes)."""
    return [json.loads(read(f"{event_dir(seq)}/{RECORD_FILE}"))
            for seq in history_sequence(manifest)]


def latest(history: Sequence[Mapping[str, Any]], kinds: tuple[str, ...]) -> Mapping[str, Any] | None:
    """The newest event of one of ``kinds``, or None."""
    for event in reversed(history):
        if event["kind"] in kinds:
            return event
    return None


def approval_state(history: Sequence[Mapping[str, Any]]) -> str:
    """``approved``, ``approved (override)``, ``rejected`` or ``not reviewed``: the newest
    sign-off, if it was given on the newest validation run (a later run needs a new sign-off)."""
    signoff = latest(history, SIGNOFF_KINDS)
    run = latest(history, ("validation",))
    if signoff is None or (run is not None and run["seq"] > signoff["seq"]):
        return statuses.NOT_REVIEWED
    return statuses.approval_word(signoff)


class HistoryMixin:
    """The history API of a model version, shared by the backends. A backend provides
    ``_append_history(kind, payload, files, status, sealer)`` (store one event atomically,
    refusing any existing path), ``_history_events()`` (every event record, integrity-checked),
    ``history_index()``, ``trust_store``, ``manifest``, ``model_path`` and ``_label()``."""

    def _append_history(self, kind: str, payload: dict[str, Any], files: dict[str, bytes],
                        status: str | None, sealer: Sealer) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def _history_events(self) -> list[dict[str, Any]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _label(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def trust_store(self) -> TrustStore | None:  # pragma: no cover - abstract
        """The store's trust list (None: the backend keeps none)."""
        raise NotImplementedError

    @property
    def manifest(self) -> dict[str, Any]:  # pragma: no cover - abstract
        """The version's manifest."""
        raise NotImplementedError

    @property
    def model_path(self) -> Path:  # pragma: no cover - abstract
        """The version's local folder."""
        raise NotImplementedError

    def history_index(self) -> dict[int, str] | None:  # pragma: no cover - abstract
        """``seq → record sha256`` as the registry's index keeps them (None: no index)."""
        raise NotImplementedError

    def stored_view(self) -> Any:  # pragma: no cover - abstract
        """The version as its backend holds it now, unchecked (name, version, manifest,
        model_path, trust_store, history_index): what verification reads."""
        raise NotImplementedError

    def signer_for(self, action: str, *, signer: Signer | None = None,
                   key: str | os.PathLike[str] | None = None) -> Signer | None:
        """The signer of ``action`` on this version (``validation``, ``approval``, …), checked
        against the trust list now: the key at ``key`` or ``$FSTRAIN_KEY`` (or ``signer``); None
        in a store without a trust list. Call it before long work to fail fast.

        Raises:
            UnauthorizedError: a signed store and no key, an unknown, revoked or wrong-role key.
        """
        return resolve_signer(self.trust_store, action, label=self._label(), signer=signer,
                              key=key)[1]

    def record_validation(self, status: str, payload: Mapping[str, Any],
                          files: Mapping[str, bytes], *, signer: Signer | None = None,
                          key: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """Append a validation run to the version's history and set ``validation_status``.

        ``payload`` (gates, results, failing gates, scorecard sha256, ...) and ``files``
        (scorecard, model card, images; names relative to the run's folder) are stored under
        ``history/<seq>/`` and never replaced. In a store with a trust list the run is signed
        by ``signer`` (else the key at ``key`` or ``$FSTRAIN_KEY``), a data-scientist or
        validator. Returns the stored record.

        Raises:
            UnauthorizedError: a signed store and no enrolled key of a role that validates.
            VerificationError: the version's history does not verify (nothing is appended).
        """
        if status not in statuses.RUN_STATUSES:
            raise InvalidArgumentError(
                f"{self._label()}: a validation run's status must be one of "
                f"{', '.join(statuses.RUN_STATUSES)}. Got {status!r} instead."
            )
        _, signer = resolve_signer(self.trust_store, "validation", label=self._label(),
                                   signer=signer, key=key)
        self.require_verified()
        return self._append_history("validation", {**payload, "status": status},
                                    {k: bytes(v) for k, v in files.items()}, status,
                                    Sealer(signer))

    def sign_off(self, decision: str, *, note: str, reviewer: str | None = None,
                 override: str | None = None, supersede: str | None = None,
                 run: int | None = None, signer: Signer | None = None,
                 key: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """Append a reviewer's ``"approval"`` or ``"rejection"`` of validation run ``run``
        (default the latest; it must be the latest), recording that run's record sha256.

        In a store with a trust list the sign-off is signed by ``signer`` (else the key at
        ``key`` or ``$FSTRAIN_KEY``): a reviewer, or a service key acting for a reviewer;
        ``reviewer``, if given, must be that identity. Approving a run that did not pass needs
        ``override`` (why); a second sign-off of the same run needs ``supersede`` (why).

        Raises:
            InvalidArgumentError: the rules above (run, override, supersede, reviewer).
            UnauthorizedError: unsigned/unknown/revoked/wrong-role key, or four eyes (the
                approver trained the version or signed one of its runs).
            VerificationError: the version's history does not verify (nothing is appended).
        """
        label = self._label()
        _, signer = resolve_signer(self.trust_store, decision, label=label, signer=signer,
                                   key=key)
        self.require_verified()
        manifest = self.manifest
        payload = signoff_payload(
            self.history(), decision, hashes=record_hashes(manifest), signer=signer, note=note,
            reviewer=reviewer, override=override, supersede=supersede, run=run, label=label)
        return self._append_history(decision, payload, {}, None,
                                    Sealer(signer, expect_prev=head_of(manifest)))

    def verify_history(self, *, head: str | None = None) -> VerificationReport:
        """Verify this version's files, history chain, signatures and rules (never raises
        for what it finds: see the report's ``problems``)."""
        return verify_version(self.stored_view(), head=head)

    def require_verified(self, *, head: str | None = None) -> VerificationReport:
        """:meth:`verify_history`, raising when anything is broken.

        Raises:
            VerificationError: one line per problem (``problems`` holds them).
        """
        report = self.verify_history(head=head)
        if not report.ok:
            raise VerificationError(
                f"{self._label()} does not verify: {'; '.join(report.problems)}",
                report.problems)
        return report

    def history(self) -> list[dict[str, Any]]:
        """Every history event (creation, validation runs and sign-offs), oldest first."""
        return self._history_events()

    @property
    def head(self) -> str | None:
        """The sha256 of the newest history record (the chain's head), or None."""
        return head_of(self.manifest)

    @property
    def approval_status(self) -> str:
        """``approved``, ``approved (override)``, ``rejected`` or ``not reviewed`` (a later
        validation run resets it)."""
        return approval_state(self.history())

    def latest_validation(self) -> dict[str, Any] | None:
        """The newest validation run's record, or None when the version was never validated."""
        event = latest(self.history(), ("validation",))
        return None if event is None else dict(event)

    def read_history_file(self, seq: int, name: str) -> bytes:
        """A file of history event ``seq`` (e.g. ``scorecard.json``), checked against its hash."""
        events = {e["seq"]: e for e in self.history()}
        if seq not in events or name not in events[seq]["files"]:
            raise InvalidArgumentError(
                f"{self._label()}: history event {seq} has no file {name!r}."
            )
        path = self.model_path / event_dir(seq) / name
        if not path.is_file():
            raise IntegrityError(f"{self._label()}: {event_dir(seq)}/{name} is missing.")
        data = path.read_bytes()
        if sha256_bytes(data) != events[seq]["files"][name]:
            raise IntegrityError(f"{self._label()}: {event_dir(seq)}/{name} was changed.")
        return data
