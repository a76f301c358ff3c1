"""Model-dependent transformations, re-exported from :mod:`feature_store.core.transformations`.

Kept so that ``from feature_store.transformations import standard_scaler`` keeps working.
"""

from __future__ import annotations

from feature_store.core.transformations import *  # noqa: F403
from feature_store.core.transformations import __all__  # noqa: F401
