"""The status words a reviewer reads: a validation run's and a sign-off's, qualifiers included.

A run judged under its gate policy is ``passed`` or ``failed``. A run whose gates were loosened,
removed or replaced, or whose decision threshold was chosen another way than the policy says,
is a *policy deviation*, and its status says so in the word itself: ``passed (policy
deviation)``, never a plain ``passed`` (so any code that asks ``status == "passed"`` treats it
as not passed). An approval given with ``--override`` is ``approved (override)``.

These strings are what ``registry list``/``show``, the report index, the scorecard header and
the records store; the helpers here build and read them so that no caller parses them itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PASSED = "passed"
FAILED = "failed"
PENDING = "pending"
DEVIATION = "policy deviation"
OVERRIDE = "override"
APPROVED = "approved"
REJECTED = "rejected"
NOT_REVIEWED = "not reviewed"

#: Every status a recorded validation run may carry.
RUN_STATUSES: tuple[str, ...] = (PASSED, FAILED, f"{PASSED} ({DEVIATION})", f"{FAILED} ({DEVIATION})")
#: Every status of a model version (``pending`` until its first validation run).
MODEL_STATUSES: tuple[str, ...] = (PENDING, *RUN_STATUSES)


def qualified(word: str, qualifier: str | None) -> str:
    """``word`` or ``word (qualifier)``."""
    return word if not qualifier else f"{word} ({qualifier})"


def run_status(verdict: str, *, deviation: bool) -> str:
    """A run's status from its gate verdict (``passed``/``failed``) and whether it deviated
    from its policy: ``passed``, ``failed``, ``passed (policy deviation)``, ..."""
    return qualified(verdict, DEVIATION if deviation else None)


def verdict_of(status: str | None) -> str | None:
    """The bare word of a status: ``passed (policy deviation)`` → ``passed``."""
    return None if status is None else str(status).split(" (", 1)[0]


def is_deviation(status: str | None) -> bool:
    """True for a status marked ``(policy deviation)``."""
    return status is not None and str(status).endswith(f"({DEVIATION})")


def is_clean_pass(status: str | None) -> bool:
    """True only for a plain ``passed``: gates passed under the policy, nothing loosened."""
    return status == PASSED


def passed_gates(status: str | None) -> bool:
    """True when the run's gates passed, with or without a deviation."""
    return verdict_of(status) == PASSED


def approval_word(signoff: Mapping[str, Any] | None) -> str:
    """``approved``, ``approved (override)``, ``rejected`` or ``not reviewed`` for a sign-off
    record (``None``: none applies)."""
    if signoff is None:
        return NOT_REVIEWED
    if signoff.get("kind") == "rejection":
        return REJECTED
    return qualified(APPROVED, OVERRIDE if signoff.get("override_reason") else None)


def is_approved(approval: str | None) -> bool:
    """True for ``approved`` and ``approved (override)``."""
    return verdict_of(approval) == APPROVED
