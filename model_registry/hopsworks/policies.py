"""Gate-policy files of a Hopsworks project, kept in the project itself (HopsFS).

Every client and every job on the cluster must judge a model by the same policy, so the policy
versions live in the project's ``Resources/fstrain/gate-policies/<model>/<NNNN>/`` folders
(``policy.yaml`` and ``record.json``, :mod:`model_registry.policy_records`), read through the
SDK's dataset API on every use and checked as the local registry checks its own: hashes, the
chain, and each seal against the project's trust list.

A version is uploaded file by file (each under a temporary name, then moved into place), its
record last: a newest folder without ``record.json`` is an upload that did not finish, not a
version, and the next version takes its number. Not atomic across clients: two owners storing
a policy at the same moment can race for one number (the second upload is refused when the
record it would write is already there).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from feature_store.hopsworks.sdk_calls import sdk_call
from fstrain.kernel.errors import BackendError, IntegrityError
from model_registry import policy_records as records
from model_registry.hopsworks.remote_files import fetch_remote, replace_remote
from model_registry.naming import check_model_name

if TYPE_CHECKING:  # pragma: no cover
    from model_registry.audit.identity import Signer
    from model_registry.audit.trust import TrustList

REMOTE_DIR = "Resources/fstrain/gate-policies"
LOCAL_DIR = "gate-policies"


class HopsworksPolicyStore:
    """The policy versions of every model of ``project`` (a HopsworksProject)."""

    def __init__(self, project: Any) -> None:
        self.project = project

    def __repr__(self) -> str:
        return f"HopsworksPolicyStore('{REMOTE_DIR}')"

    def _scratch(self) -> Path:
        path = Path(self.project.root) / LOCAL_DIR
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _fetch(self, remote: str, owner: str) -> bytes | None:
        return fetch_remote(self.project, remote, owner=owner, scratch=self._scratch())

    def _stored(self, name: str, trust: TrustList | None
                ) -> list[tuple[dict[str, Any], bytes, bytes]]:
        """``(record, record bytes, policy bytes)`` of every complete version, checked."""
        owner = f"policy of model '{name}'"
        folder = f"{REMOTE_DIR}/{check_model_name(name)}"
        datasets = self.project.get_dataset_api()
        if not sdk_call(datasets, "DatasetApi.exists", folder, _owner=owner):
            return []
        entries = sorted(Path(str(p)).name for p in
                         sdk_call(datasets, "DatasetApi.list", folder, _owner=owner) or [])
        stored = []
        for n, entry in enumerate(entries):
            raw = self._fetch(f"{folder}/{entry}/{records.RECORD_FILE}", owner)
            if raw is None and n == len(entries) - 1:
                break  # the newest upload did not finish: not a version
            document = self._fetch(f"{folder}/{entry}/{records.POLICY_FILE}", owner)
            record = records.parse_stored(name, entry, raw, document)
            assert raw is not None and document is not None  # parse_stored refused a missing one
            stored.append((record, raw, document))
        records.check_chain(name, stored, trust)
        return stored

    def versions(self, name: str, trust: TrustList | None = None
                 ) -> list[tuple[dict[str, Any], bytes]]:
        """Every stored version of ``name``'s policy, oldest first, as ``(record, policy file
        bytes)``, checked against ``trust``; empty when none was ever set.

        Raises:
            IntegrityError: a file was edited, removed or renamed in HopsFS (naming it);
                ``VerificationError`` when a seal does not verify.
        """
        return [(record, document) for record, _, document in self._stored(name, trust)]

    def append(self, name: str, document: bytes, *, policy_sha256: str, created: str,
               user: str, signer: Signer | None = None,
               trust: TrustList | None = None) -> dict[str, Any]:
        """Store ``document`` as the next version of ``name``'s policy in the project, sealed
        by ``signer`` (an owner's; ``None``: unsigned); the stored record."""
        owner = f"policy of model '{name}'"
        existing = self._stored(name, trust)
        version = len(existing) + 1
        record = records.build_record(name, version, document, policy_sha256=policy_sha256,
                                      previous=existing[-1][1] if existing else None,
                                      created=created, user=user, signer=signer)
        remote = f"{REMOTE_DIR}/{name}/{version:04d}"
        if self._fetch(f"{remote}/{records.RECORD_FILE}", owner) is not None:
            raise BackendError(f"{owner}: another client stored version {version} meanwhile; "
                               "check fstrain registry policy show and try again.")
        scratch = self._scratch() / f".upload-{version:04d}"
        scratch.mkdir(exist_ok=True)
        for file, data in ((records.POLICY_FILE, document),
                           (records.RECORD_FILE, records.record_bytes(record))):
            local = scratch / file
            local.write_bytes(data)
            replace_remote(self.project, local, remote, owner=owner, scratch=self._scratch())
            local.unlink()
        scratch.rmdir()
        stored = self._stored(name, trust)
        if len(stored) != version or stored[-1][1] != records.record_bytes(record):
            raise IntegrityError(f"{owner}: version {version} does not read back as written.")
        return record
