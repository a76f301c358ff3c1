"""The trust list of a Hopsworks project, kept in the project itself (HopsFS).

A trust list on one client's disk would leave every other client, and every job running on the
cluster, without it: their actions would pass as "unsigned". So on Hopsworks the two files of
:mod:`model_registry.audit.trust` (``log.jsonl``, ``allowed_signers``) live in the project's
``Resources/fstrain/trust/`` folder, and the local ``<project root>/trust/`` folder is only a
copy:

* every read downloads both files first (a file gone from the project is gone from the copy),
  so every client checks signatures against the same list;
* every enrolment or revocation is appended to the copy as on the local backend, then
  uploaded (each file under a temporary name, then moved over the old one), after checking that
  the project's log is still the one it was appended to. Another client's change meanwhile is
  refused and nothing is uploaded; the copy is downloaded again.

Edits made in HopsFS directly are caught as on the local backend: the log is chained and
signed, its first owner is pinned outside the store, and ``allowed_signers`` is checked
against the log.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fstrain.kernel.errors import BackendError
from model_registry.audit.trust import ALLOWED_SIGNERS, LOG_FILE, TRUST_DIR, TrustReport, TrustStore
from model_registry.hopsworks.remote_files import fetch_remote, replace_remote

REMOTE_DIR = "Resources/fstrain/trust"


class HopsworksTrustStore(TrustStore):
    """The trust list in ``Resources/fstrain/trust`` of ``project`` (a HopsworksProject),
    through a local copy under ``<project root>/trust``."""

    def __init__(self, project: Any) -> None:
        super().__init__(Path(project.root) / TRUST_DIR)
        self.project = project
        self._remote_log: bytes | None = None

    def __repr__(self) -> str:
        return f"HopsworksTrustStore('{REMOTE_DIR}')"

    @property
    def location(self) -> str:
        """``hopsworks:<project>/Resources/fstrain/trust/allowed_signers``."""
        return f"hopsworks:{getattr(self.project, 'name', '?')}/{REMOTE_DIR}/{ALLOWED_SIGNERS}"

    def exists(self) -> bool:
        """Whether the project has a trust list (either file)."""
        self.pull()
        return super().exists()

    def read(self, *, pin: str | None = None) -> TrustReport:
        """Download the project's files, then check them as the local backend does."""
        self.pull()
        return super().read(pin=pin)

    def pull(self) -> None:
        """Make the local copy what the project holds (a file the project lacks is removed)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for name in (LOG_FILE, ALLOWED_SIGNERS):
            data = fetch_remote(self.project, f"{REMOTE_DIR}/{name}", owner=self._owner(),
                                scratch=self.directory)
            local = self.directory / name
            if data is None:
                local.unlink(missing_ok=True)
            else:
                tmp = self.directory / f".{name}.download"
                tmp.write_bytes(data)
                os.replace(tmp, local)
            if name == LOG_FILE:
                self._remote_log = data

    def _append(self, trust: Any, body: dict[str, Any], signer: Any) -> str:
        """Append to the copy (as the local backend), then upload it unless the project's log
        changed since it was read."""
        created = super()._append(trust, body, signer)
        try:
            now = fetch_remote(self.project, f"{REMOTE_DIR}/{LOG_FILE}", owner=self._owner(),
                               scratch=self.directory)
            if now != self._remote_log:
                raise BackendError(
                    f"the trust list of Hopsworks project '{self.project.name}' "
                    f"({REMOTE_DIR}/{LOG_FILE}) changed while this change was being made "
                    "(another owner enrolled or revoked a key): nothing was uploaded. Run the "
                    "command again.")
            for name in (LOG_FILE, ALLOWED_SIGNERS):
                replace_remote(self.project, self.directory / name, REMOTE_DIR,
                               owner=self._owner(), scratch=self.directory)
        except BaseException:
            self.pull()  # the copy back to what the project holds
            raise
        return created

    def _owner(self) -> str:
        return f"trust list of Hopsworks project '{getattr(self.project, 'name', '?')}'"
