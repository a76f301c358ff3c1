"""Gate-policy files of a local registry: ``<root>/gate-policies/<model>/<NNNN>/``.

Each version folder holds ``policy.yaml`` (the owner's file, byte for byte) and ``record.json``
(:mod:`model_registry.policy_records`). A version is assembled under ``<root>/.tmp`` and moved
into place with one rename, which fails when another writer took the number first (this one
then takes the next): a version folder only ever appears complete and is never replaced.
``gate-policies`` cannot clash with a model folder (a model name has no ``-``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fstrain.kernel.errors import BackendError, IntegrityError
from model_registry import policy_records as records
from model_registry.naming import check_model_name

if TYPE_CHECKING:  # pragma: no cover
    from model_registry.audit.identity import Signer
    from model_registry.audit.trust import TrustList

POLICY_DIR = "gate-policies"
_ATTEMPTS = 20


class LocalPolicyStore:
    """The policy versions of every model of the registry rooted at ``root``."""

    def __init__(self, root: Path, new_staging_dir: Any) -> None:
        """``new_staging_dir()`` returns an empty folder under the registry's ``.tmp``."""
        self.root = Path(root)
        self._new_staging_dir = new_staging_dir

    def _model_dir(self, name: str) -> Path:
        return self.root / POLICY_DIR / check_model_name(name)

    def versions(self, name: str, trust: TrustList | None = None
                 ) -> list[tuple[dict[str, Any], bytes]]:
        """Every stored version of ``name``'s policy, oldest first, as ``(record, policy file
        bytes)``, checked (:func:`~model_registry.policy_records.check_chain`, seals against
        ``trust``); empty when none was ever set.

        Raises:
            IntegrityError: a file was edited, removed or renamed (the message names it);
                ``VerificationError`` when a seal does not verify.
        """
        folder = self._model_dir(name)
        if not folder.is_dir():
            return []
        stored = []
        for entry in sorted(folder.iterdir(), key=lambda p: p.name):
            if not entry.is_dir():
                raise IntegrityError(f"policy of model '{name}': {entry.name} is not a policy "
                                     "version folder (added outside fstrain).")
            raw, document = _read(entry / records.RECORD_FILE), _read(entry / records.POLICY_FILE)
            record = records.parse_stored(name, entry.name, raw, document)
            assert raw is not None and document is not None  # parse_stored refused a missing one
            stored.append((record, raw, document))
        records.check_chain(name, stored, trust)
        return [(record, document) for record, _, document in stored]

    def append(self, name: str, document: bytes, *, policy_sha256: str, created: str,
               user: str, signer: Signer | None = None,
               trust: TrustList | None = None) -> dict[str, Any]:
        """Store ``document`` as the next version of ``name``'s policy, sealed by ``signer``
        (an owner's; ``None``: unsigned); the stored record. The existing versions are checked
        first against ``trust`` (an edited chain is never extended)."""
        folder = self._model_dir(name)
        for _ in range(_ATTEMPTS):
            existing = self.versions(name, trust)
            version = len(existing) + 1
            previous = (None if not existing
                        else (folder / f"{version - 1:04d}" / records.RECORD_FILE).read_bytes())
            record = records.build_record(name, version, document, policy_sha256=policy_sha256,
                                          previous=previous, created=created, user=user,
                                          signer=signer)
            staged = self._new_staging_dir()
            try:
                (staged / records.POLICY_FILE).write_bytes(document)
                (staged / records.RECORD_FILE).write_bytes(records.record_bytes(record))
                folder.mkdir(parents=True, exist_ok=True)
                try:
                    os.rename(staged, folder / f"{version:04d}")
                except OSError:
                    if (folder / f"{version:04d}").exists():
                        continue  # another writer stored this version first: take the next
                    raise
                return record
            except OSError as exc:
                raise BackendError(f"policy of model '{name}' could not be stored in {folder} "
                                   f"({type(exc).__name__}: {exc}).") from exc
            finally:
                shutil.rmtree(staged, ignore_errors=True)
        raise BackendError(f"policy of model '{name}': too many concurrent writers; try again.")


def _read(path: Path) -> bytes | None:
    """A file's bytes, or None when it is missing."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
