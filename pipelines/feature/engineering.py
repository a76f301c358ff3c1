"""Feature engineering of the feature pipeline, delegated to each use case's source module.

A source module may define ``engineer(frames)`` (derived columns; ccfraud's are in
:mod:`feature_views.ccfraud.features`) and ``WINDOWED`` (its event-time groups that are cut
to the run window after engineering). A use case with ``WINDOWED`` groups loads everything
before the window, because its features need the past (:func:`history_start`), and keeps only
the window's rows afterwards (:func:`restrict`), so a windowed run's rows equal a full run's rows
in that window.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from feature_views import get_source


def _windowed(use_case: str) -> dict[str, str]:
    return dict(getattr(get_source(use_case), "WINDOWED", {}))


def history_start(use_case: str, start: Any) -> Any:
    """Where loading must begin so a run starting at ``start`` sees the history it needs:
    the beginning for a use case with engineered, windowed groups, else ``start``."""
    return None if _windowed(use_case) else start


def restrict(use_case: str, frames: dict[str, pd.DataFrame], start: Any, end: Any) -> dict[str, pd.DataFrame]:
    """Keep only the rows of ``[start, end)`` of the use case's event-time groups."""
    windowed = _windowed(use_case)
    if not windowed or (start is None and end is None):
        return frames
    out = dict(frames)
    for name, column in windowed.items():
        frame = out[name]
        mask = np.ones(len(frame), dtype=bool)
        if start is not None:
            mask &= (frame[column] >= start).to_numpy()
        if end is not None:
            mask &= (frame[column] < end).to_numpy()
        out[name] = frame.loc[mask].reset_index(drop=True)
    return out


def engineer(use_case: str, frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Return ``frames`` with the use case's engineered columns added (if it has any)."""
    derive = getattr(get_source(use_case), "engineer", None)
    return frames if derive is None else derive(frames)
