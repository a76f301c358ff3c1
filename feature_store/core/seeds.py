"""Seeds for random splits: drawn from the OS when not given, and always recorded."""

from __future__ import annotations

import secrets


def draw_seed() -> int:
    """A fresh seed from the OS (the global ``random`` state is never touched)."""
    return secrets.randbelow(2**31 - 1)
