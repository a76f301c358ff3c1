"""The error hierarchy, re-exported from :mod:`fstrain.kernel.errors` where it lives.

Kept so that ``from feature_store.errors import NotFoundError`` (the public path since 0.1) keeps
working; new code imports from :mod:`fstrain.kernel.errors`.
"""

from __future__ import annotations

from fstrain.kernel.errors import *  # noqa: F403
from fstrain.kernel.errors import __all__  # noqa: F401
