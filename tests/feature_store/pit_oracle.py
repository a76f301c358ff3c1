"""The point-in-time oracle, with the as-known switch: one semantics, one oracle.

:func:`pit_oracle` is a brute-force replay. For each label row it takes each joined group as
the label row's query would see it: with ``as_known=False`` the group as read (its latest
commit); with ``as_known=True`` the group time-travelled to the commit current at the label's
event time (``as_of``), so only rows committed by then, with the values they had then. It then
does a plain point-in-time join of that one label row (the latest row with
``event_time <= label time`` on the join key; ties: the smallest tie-break value). No SQL of
the store is used: the groups' states come from ``as_of(...).read()``.

:func:`random_history` writes a random history under an injected commit clock: first loads,
backfills (old event times committed late), corrections (new values for existing rows), new
rows, and (optionally) deletions, each insert one commit at a chosen time.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

T0 = pd.Timestamp("2024-01-01", tz="UTC")


@contextmanager
def commit_clock(monkeypatch, start: pd.Timestamp = T0) -> Iterator[list[pd.Timestamp]]:
    """Commits are recorded at ``clock[0]`` (set it before each write)."""
    from feature_store.local.storage import delta_table

    clock = [start]
    monkeypatch.setattr(delta_table, "commit_clock", lambda: int(clock[0].value // 1_000_000))
    yield clock


def hours(h: float) -> pd.Timestamp:
    """``T0`` plus ``h`` hours (to the minute)."""
    return T0 + pd.Timedelta(minutes=int(round(float(h) * 60)))


@dataclass
class Joined:
    """One joined group of the oracle: the group, its join key, its value columns, and the
    tie-break column (a primary-key column beyond the join key), if any."""

    fg: object
    key: str
    values: list[str]
    tie: str | None = None
    commits: list[pd.Timestamp] = field(default_factory=list)


def state(j: Joined, at: pd.Timestamp | None) -> pd.DataFrame:
    """The group as of ``at`` (None: latest); empty before its first commit."""
    if at is None:
        return j.fg.read()
    if at < min(j.commits):
        return j.fg.read().iloc[0:0]
    return j.fg.select_all().as_of(at).read()


def _current_commit(j: Joined, at: pd.Timestamp) -> pd.Timestamp | None:
    """The time of the commit current at ``at`` (states are read once per commit)."""
    before = [c for c in j.commits if c <= at]
    return max(before) if before else None


def backfilled(fs, monkeypatch) -> tuple:
    """Two groups with a known backfill: labels at 10h and 30h; a feature row of 4h written at
    5h, then at 20h a backfill of 8h and a correction of the 4h row, so the label at 10h knew
    only the first value (1.0) where a plain join sees the backfill (2.0). ``(labels, feats)``."""
    with commit_clock(monkeypatch) as clock:
        labels = fs.create_feature_group("lab", version=1, primary_key=["id"], event_time="ts")
        labels.insert(pd.DataFrame({"id": [1, 2], "k": [1, 1], "ts": [hours(10), hours(30)]}))
        feats = fs.create_feature_group("f", version=1, primary_key=["k"], event_time="ts")
        clock[0] = hours(5)
        feats.insert(pd.DataFrame({"k": [1], "ts": [hours(4)], "x": [1.0]}))
        clock[0] = hours(20)
        feats.insert(pd.DataFrame({"k": [1, 1], "ts": [hours(8), hours(4)], "x": [2.0, 1.5]}))
    return labels, feats


def pit_oracle(labels: pd.DataFrame, joined: list[Joined], *, as_known: bool,
               label_key: dict[str, str], lookback: dict[str, pd.Timedelta] | None = None,
               inner: frozenset[str] = frozenset()) -> pd.DataFrame:
    """The labels (``id``, ``ts``, their key columns) with each joined group's values, by brute
    force (see the module docstring). ``label_key[group name]`` is the label column joined on
    that group's key; ``lookback[group name]``: a best match older than the label time less it
    is none; the groups in ``inner`` drop the labels they match none for."""
    out = labels.copy()
    keep = np.ones(len(labels), bool)
    for j in joined:
        window = (lookback or {}).get(j.fg.name)
        states: dict[pd.Timestamp | None, pd.DataFrame] = {}
        picked = {v: [] for v in j.values}
        for _, row in labels.iterrows():
            at = _current_commit(j, row["ts"]) if as_known else None
            if at not in states:
                states[at] = state(j, at) if at is not None or not as_known else state(j, row["ts"])
            cand = states[at]
            cand = cand[(cand[j.key] == row[label_key[j.fg.name]]) & (cand["ts"] <= row["ts"])]
            best = None
            if len(cand):
                order = ["ts"] + ([j.tie] if j.tie else [])
                asc = [False] + ([True] if j.tie else [])
                best = cand.sort_values(order, ascending=asc).iloc[0]
                if window is not None and best["ts"] < row["ts"] - window:
                    best = None
            for v in j.values:
                picked[v].append(np.nan if best is None else best[v])
            if best is None and j.fg.name in inner:
                keep[len(picked[j.values[0]]) - 1] = False
        for v in j.values:
            out[v] = picked[v]
    return out[keep].reset_index(drop=True)


def random_history(fs, clock: list[pd.Timestamp], rng: np.random.Generator, name: str,
                   key: str, *, tie: bool, deletes: bool, entities: int = 4,
                   commits: int = 5) -> Joined:
    """A feature group ``name`` (primary key ``key`` [+ ``s``], event time ``ts``) written in
    ``commits`` commits at increasing clock times over hours 0..100: new rows near the commit
    time, backfills of old event times, corrections of existing rows, and deletions."""
    pk = [key, "s"] if tie else [key]
    fg = fs.get_or_create_feature_group(name, version=1, primary_key=pk, event_time="ts")
    value = f"v_{name}"
    j = Joined(fg, key, [value], "s" if tie else None)
    rows: dict[tuple, float] = {}
    times = np.sort(rng.choice(np.arange(2, 100), size=commits, replace=False))
    for c, at in enumerate(times):
        clock[0] = hours(at)
        batch = []
        for _ in range(int(rng.integers(1, 6))):
            kind = rng.choice(["new", "backfill", "correct"]) if rows else "new"
            if kind == "correct":
                k = list(rows)[int(rng.integers(0, len(rows)))]
            else:
                lo = 0 if kind == "backfill" else max(0, at - 12)
                k = (int(rng.integers(0, entities)), int(rng.integers(lo, at + 1)))
                if tie:
                    k = (*k, int(rng.integers(0, 2)))
            batch.append(k)
        batch = list(dict.fromkeys(batch))
        frame = pd.DataFrame({key: [k[0] for k in batch], "ts": [hours(k[1]) for k in batch],
                              value: np.round(rng.normal(size=len(batch)), 3)})
        if tie:
            frame["s"] = [k[2] for k in batch]
        if c > 0 and deletes and rows and rng.random() < 0.4:
            gone = list(rows)[int(rng.integers(0, len(rows)))]
            doomed = pd.DataFrame({key: [gone[0]], "ts": [hours(gone[1])]})
            if tie:
                doomed["s"] = [gone[2]]
            fg.remove_rows(doomed)
            j.commits.append(clock[0])
            del rows[gone]
            clock[0] = clock[0] + pd.Timedelta(minutes=10)
        fg.insert(frame)
        j.commits.append(clock[0])
        for k, v in zip(batch, frame[value], strict=True):
            rows[k] = v
    return j
