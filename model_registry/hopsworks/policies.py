"""Gate-policy files on Hopsworks: not kept there yet.

A model on Hopsworks is judged by its use case's default gates; storing an owner's policy file
is refused with a message saying so (the embedded registry keeps them, ``model_registry.local
.policies``).
"""

from __future__ import annotations

from typing import Any

from fstrain.kernel.errors import BackendError


class HopsworksPolicyStore:
    """No stored policy files: :meth:`versions` is empty and :meth:`append` refuses."""

    def versions(self, name: str, trust: Any = None) -> list[tuple[dict[str, Any], bytes]]:
        """No version: the model is judged by its use case's defaults."""
        return []

    def append(self, name: str, document: bytes, *, policy_sha256: str, created: str,
               user: str, signer: Any = None, trust: Any = None) -> dict[str, Any]:
        """Refused: Hopsworks keeps no gate-policy files yet."""
        raise BackendError(
            f"policy of model '{name}': the Hopsworks backend does not store gate-policy files "
            "yet; models there are judged by their use case's default gates. Set the policy on "
            "the embedded (local) registry, or pass stricter gates with --gate."
        )
