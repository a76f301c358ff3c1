"""As-known join benchmark: ``fv.training_data()`` of a view created with ``as_known=True``
against the same view's plain point-in-time join, on the same tables, in the same process.

Generates ``--rows`` label rows over ``--entities`` entities and three feature groups of about
``--rows`` rows each (4, 6 and 8 numeric columns), written through the fstrain API in
``--commits`` daily-batch commits under an injected commit clock: each batch carries the rows of
its period, backfills of older event times (``--backfill``) and corrections of rows already
written (``--correct``), the shapes an as-known join exists for. Then times, interleaved:

- ``plain_cold`` / ``as_known``: ``fv.training_data()`` of the plain view (PIT join by event
  time only) / of the as-known view, with no row versions in memory (cold: the first read of
  a commit in a process). Both build them: the as-known join reads them, and the plain view's
  late-data figures need its groups' current rows' known times, which a group whose files
  corrections rewrote has only in its history;
- ``plain`` / ``as_known_warm``: the same with the row versions of the pinned commits (and the
  as-known join's timelines) kept in memory, as every later read of the same commits in one
  process.

Prints the median of ``--repeat`` runs and the ratios, cold to cold and warm to warm; target
<= 1.3. It also prints the cold as-known run against the warm plain one, the ratio this bench
printed as "cold" before 2026-12-02.

    python bench/as_known_join.py [--rows 1000000] [--entities 100000] [--commits 12] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import feature_store

T0 = pd.Timestamp("2024-01-01", tz="UTC")
SPAN_S = 365 * 86_400
WIDTHS = (4, 6, 8)


def _set_clock(at: pd.Timestamp) -> None:
    """Record the next commits at ``at`` (the injectable commit clock)."""
    from feature_store.local.storage import delta_table

    delta_table.commit_clock = lambda: int(at.value // 1_000_000)


def _history(rng: np.random.Generator, fg: object, rows: int, entities: int, width: int,
             prefix: str, commits: int, backfill: float, correct: float) -> None:
    """Write ``rows`` rows in ``commits`` commits: each commit the rows whose event time falls
    in its period, plus backfills of older event times and corrections of written rows."""
    ts = np.sort(rng.integers(0, SPAN_S, rows))
    frame = pd.DataFrame({"entity": rng.integers(0, entities, rows),
                          "ts": T0 + pd.to_timedelta(ts, unit="s")})
    for c in range(width):
        frame[f"{prefix}{c}"] = rng.normal(size=rows)
    frame = frame.drop_duplicates(["entity", "ts"]).reset_index(drop=True)
    seconds = ((frame["ts"] - T0).dt.total_seconds()).to_numpy()
    period = SPAN_S / commits
    batch = np.minimum((seconds // period).astype(int), commits - 1)
    late = rng.random(len(frame)) < backfill  # committed some batches after their period
    batch = np.where(late, np.minimum(batch + rng.integers(1, 4, len(frame)), commits - 1), batch)
    written: list[pd.DataFrame] = []
    for c in range(commits):
        part = frame[batch == c]
        if written and correct > 0:
            old = pd.concat(written)
            fixes = old.sample(n=min(len(old), int(len(part) * correct)), random_state=c)
            fixes = fixes.assign(**{f"{prefix}0": rng.normal(size=len(fixes))})
            part = pd.concat([part, fixes]).drop_duplicates(["entity", "ts"], keep="last")
        _set_clock(T0 + pd.Timedelta(seconds=(c + 1) * period))
        fg.insert(part)  # type: ignore[attr-defined]
        written.append(frame[batch == c])


def build(root: Path, rows: int, entities: int, commits: int, backfill: float,
          correct: float) -> None:
    """Create the label group, three feature groups with histories, and the two views."""
    rng = np.random.default_rng(7)
    fs = feature_store.login(root=root).get_feature_store()
    _set_clock(T0)
    labels = fs.create_feature_group("labels", version=1, primary_key=["id"], event_time="ts",
                                     statistics_config=False)
    labels.insert(pd.DataFrame({
        "id": np.arange(rows), "entity": rng.integers(0, entities, rows),
        "ts": T0 + pd.to_timedelta(rng.integers(0, SPAN_S, rows), unit="s"),
        "label": rng.integers(0, 2, rows)}))
    query = labels.select_all()
    for i, width in enumerate(WIDTHS):
        fg = fs.create_feature_group(f"feats{i}", version=1, primary_key=["entity"],
                                     event_time="ts", statistics_config=False)
        _history(rng, fg, rows, entities, width, f"f{i}_", commits, backfill, correct)
        query.join(fg.select_features(), on=["entity"])
    _set_clock(T0 + pd.Timedelta(seconds=SPAN_S + 86_400))
    fs.create_feature_view("plain", version=1, query=query, labels=["label"])
    fs.create_feature_view("known", version=1, query=query, labels=["label"], as_known=True)


def _training_data(root: Path, view: str) -> pd.DataFrame:
    fv = feature_store.login(root=root).get_feature_store().get_feature_view(view, 1)
    X, _ = fv.training_data(statistics_config=False, seed=0)
    return X


def _forget_histories() -> None:
    from feature_store.local.storage import row_history

    row_history._cache.clear()  # cold: the row versions are built by this run


def run_plain_cold(root: Path) -> int:
    _forget_histories()
    return len(_training_data(root, "plain"))


def run_plain(root: Path) -> int:
    return len(_training_data(root, "plain"))


def run_as_known(root: Path) -> int:
    _forget_histories()
    return len(_training_data(root, "known"))


def run_as_known_warm(root: Path) -> int:
    return len(_training_data(root, "known"))


METHODS = {"plain_cold": run_plain_cold, "as_known": run_as_known, "plain": run_plain,
           "as_known_warm": run_as_known_warm}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--commits", type=int, default=12)
    parser.add_argument("--backfill", type=float, default=0.05,
                        help="share of rows committed after their period")
    parser.add_argument("--correct", type=float, default=0.02,
                        help="corrections per commit, as a share of its new rows")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        build(root, args.rows, args.entities, args.commits, args.backfill, args.correct)
        print(f"built {args.rows:,} label rows + 3 feature groups of ~{args.rows:,} rows in "
              f"{args.commits} commits each in {time.perf_counter() - start:.1f} s")
        rows = {m: METHODS[m](root) for m in METHODS}  # warm-up runs
        times: dict[str, list[float]] = {m: [] for m in METHODS}
        for _ in range(args.repeat):  # interleaved, so drift on a shared machine hits all alike
            for method, run in METHODS.items():
                gc.collect()
                t = time.perf_counter()
                rows[method] = run(root)
                times[method].append(time.perf_counter() - t)
        results = {m: {"median_s": statistics.median(times[m]), "rows": rows[m]} for m in METHODS}
        for method, r in results.items():
            print(f"{method:14s} median {r['median_s']:.3f} s  rows {r['rows']:,}")
        median = {m: r["median_s"] for m, r in results.items()}
        print(f"as_known / plain time (cold): {median['as_known'] / median['plain_cold']:.2f}  "
              "(target <= 1.3)")
        print(f"as_known / plain time (warm): {median['as_known_warm'] / median['plain']:.2f}  "
              "(target <= 1.3)")
        print(f"as_known cold / plain warm:   {median['as_known'] / median['plain']:.2f}  "
              "(this bench's 'cold' before 2026-12-02)")
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
