"""The append-only history of a model version: validation runs and reviewer sign-offs.

Every event is an immutable folder of the version, ``history/<seq>/`` (``seq`` zero-padded,
1, 2, ...), holding ``record.json`` and, for a validation run, that run's scorecard, model card
and images. Nothing under ``history/`` is ever replaced or deleted while the version exists:
the registry refuses to write a path that is already in the manifest, and the manifest's
sha256 list (checked on download and ``verify``) detects any edit afterwards.

This module is backend-neutral: it builds the records and reads them back from a version's
manifest; each backend stores the files its own way (the local registry in one index
transaction, the Hopsworks registry through attachments).

Event kinds: ``validation`` (status ``passed``/``failed``), ``approval`` and ``rejection``.
A sign-off refers to the latest validation run; approving a version whose latest validation
failed (or that was never validated) needs an ``override`` reason.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any

from fstrain.kernel.errors import InvalidArgumentError

HISTORY_DIR = "history"
RECORD_FILE = "record.json"
EVENT_KINDS = ("validation", "approval", "rejection")
SIGNOFF_KINDS = ("approval", "rejection")


def event_dir(seq: int) -> str:
    """``history/0003`` for event 3."""
    return f"{HISTORY_DIR}/{seq:04d}"


def is_history_path(rel: str) -> bool:
    """True for a path inside the history folder (never writable as an attachment)."""
    return rel == HISTORY_DIR or rel.startswith(HISTORY_DIR + "/")


def _event_folders(manifest: Mapping[str, Any]) -> dict[int, set[str]]:
    folders: dict[int, set[str]] = {}
    for entry in manifest.get("files", []):
        parts = str(entry["path"]).split("/", 2)
        if len(parts) == 3 and parts[0] == HISTORY_DIR and parts[1].isdigit():
            folders.setdefault(int(parts[1]), set()).add(parts[2])
    return folders


def history_sequence(manifest: Mapping[str, Any]) -> list[int]:
    """The complete events (those with their ``record.json``) in a manifest, ascending."""
    return sorted(seq for seq, names in _event_folders(manifest).items() if RECORD_FILE in names)


def next_seq(manifest: Mapping[str, Any]) -> int:
    """The number of the next event: after every folder, complete or not (an upload that
    failed half-way on a backend without multi-file atomicity is never reused)."""
    return max(_event_folders(manifest), default=0) + 1


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


def build_event(kind: str, payload: Mapping[str, Any], files: Mapping[str, bytes], *,
                seq: int, created: str, code_commit: str | None) -> dict[str, Any]:
    """The immutable record of one event: who, when, which code, the payload and the sha256 of
    every file stored with it (paths relative to the event folder)."""
    if kind not in EVENT_KINDS:
        raise InvalidArgumentError(
            f"History event kind must be one of {', '.join(EVENT_KINDS)}. Got {kind!r} instead."
        )
    for rel in files:
        if rel == RECORD_FILE or rel.startswith("/") or ".." in rel.split("/"):
            raise InvalidArgumentError(f"History event file name {rel!r} is not allowed.")
    return {
        "seq": seq, "kind": kind, "created": created, "user": current_user(),
        "fstrain_version": fstrain_version(), "code_commit": code_commit,
        **dict(payload),
        "files": {rel: sha256_bytes(data) for rel, data in sorted(files.items())},
    }


def event_files(record: Mapping[str, Any], files: Mapping[str, bytes]) -> dict[str, bytes]:
    """Version-relative path → bytes of everything an event writes (its record included)."""
    base = event_dir(int(record["seq"]))
    out = {f"{base}/{rel}": data for rel, data in files.items()}
    out[f"{base}/{RECORD_FILE}"] = (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()
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
    """``approved``, ``rejected`` or ``not reviewed``: the newest sign-off, if it was given on
    the newest validation run (a later run needs a new sign-off)."""
    signoff = latest(history, SIGNOFF_KINDS)
    run = latest(history, ("validation",))
    if signoff is None or (run is not None and run["seq"] > signoff["seq"]):
        return "not reviewed"
    return "approved" if signoff["kind"] == "approval" else "rejected"


def signoff_payload(history: Sequence[Mapping[str, Any]], decision: str, *, reviewer: str,
                    note: str, override: str | None, label: str) -> dict[str, Any]:
    """Check a sign-off against the history and return its payload.

    Approving needs a validation run that passed, unless ``override`` gives a reason.
    """
    if decision not in SIGNOFF_KINDS:
        raise InvalidArgumentError(f"decision must be 'approval' or 'rejection'. Got {decision!r}.")
    for field, value in (("reviewer", reviewer), ("note", note)):
        if not isinstance(value, str) or not value.strip():
            raise InvalidArgumentError(f"{label}: a sign-off needs a non-empty {field}.")
    if override is not None and not override.strip():
        raise InvalidArgumentError(f"{label}: --override needs a reason (non-empty text).")
    run = latest(history, ("validation",))
    status = None if run is None else run.get("status")
    if decision == "approval" and status != "passed" and override is None:
        why = ("was never validated" if run is None
               else f"failed its latest validation (run {run['seq']}: "
                    + (", ".join(run.get("failing_gates") or []) or "failed") + ")")
        raise InvalidArgumentError(
            f"{label} {why}; approving it needs --override with a reason."
        )
    return {"reviewer": reviewer.strip(), "note": note.strip(),
            "override_reason": None if override is None else override.strip(),
            "validation_seq": None if run is None else run["seq"],
            "validation_status": status}


class HistoryMixin:
    """The history API of a model version, shared by the backends. A backend provides
    ``_append_history(kind, payload, files, status)`` (store one event atomically, refusing any
    existing path), ``_history_events()`` (every event record, integrity-checked),
    ``model_path`` and ``_label()``."""

    def _append_history(self, kind: str, payload: dict[str, Any], files: dict[str, bytes],
                        status: str | None) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _history_events(self) -> list[dict[str, Any]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _label(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def record_validation(self, status: str, payload: Mapping[str, Any],
                          files: Mapping[str, bytes]) -> dict[str, Any]:
        """Append a validation run to the version's history and set ``validation_status``.

        ``payload`` (gates, results, failing gates, scorecard sha256, ...) and ``files``
        (scorecard, model card, images; names relative to the run's folder) are stored under
        ``history/<seq>/`` and never replaced. Returns the stored record (with ``seq``,
        ``created``, ``user``, ``fstrain_version``, ``code_commit`` and file hashes).
        """
        if status not in ("passed", "failed"):
            raise InvalidArgumentError(
                f"{self._label()}: a validation run is 'passed' or 'failed'. Got {status!r}."
            )
        return self._append_history("validation", {**payload, "status": status},
                                    {k: bytes(v) for k, v in files.items()}, status)

    def sign_off(self, decision: str, *, reviewer: str, note: str,
                 override: str | None = None) -> dict[str, Any]:
        """Append a reviewer's ``"approval"`` or ``"rejection"`` of the latest validation run.

        Approving a version whose latest run failed (or that was never validated) raises
        :class:`InvalidArgumentError` unless ``override`` gives the reason.
        """
        payload = signoff_payload(self.history(), decision, reviewer=reviewer, note=note,
                                  override=override, label=self._label())
        return self._append_history(decision, payload, {}, None)

    def history(self) -> list[dict[str, Any]]:
        """Every history event (validation runs and sign-offs) of this version, oldest first."""
        return self._history_events()

    @property
    def approval_status(self) -> str:
        """``approved``, ``rejected`` or ``not reviewed`` (a later validation run resets it)."""
        return approval_state(self.history())

    def latest_validation(self) -> dict[str, Any] | None:
        """The newest validation run's record, or None when the version was never validated."""
        event = latest(self.history(), ("validation",))
        return None if event is None else dict(event)

    def read_history_file(self, seq: int, name: str) -> bytes:
        """A file of history event ``seq`` (e.g. ``scorecard.json``), checked against its hash."""
        from fstrain.kernel.errors import IntegrityError

        events = {e["seq"]: e for e in self.history()}
        if seq not in events or name not in events[seq]["files"]:
            raise InvalidArgumentError(
                f"{self._label()}: history event {seq} has no file {name!r}."
            )
        data = (self.model_path / event_dir(seq) / name).read_bytes()  # type: ignore[attr-defined]
        if sha256_bytes(data) != events[seq]["files"][name]:
            raise IntegrityError(f"{self._label()}: {event_dir(seq)}/{name} was changed.")
        return data
