"""Trainer overhead benchmark: our trainers vs the bare library, same data, same process.

1. XGBoost: ``fstrain.trainers.train`` (preprocessing fitted on train — numeric columns pass
   through for boosted trees, so here a ColumnTransformer fit — DMatrix, history callback,
   validation metrics) vs a bare ``xgboost.train`` on the same float32
   arrays with the same parameters and evaluation set.
2. PyTorch: our loop (``fstrain.trainers.loop.fit``: DataLoader, autocast/scaler plumbing,
   scheduler, per-epoch validation, no checkpoints) vs a minimal hand-written loop (randperm
   + slicing + AdamW), both on the same MLP and data.

3. Streamed input (``--streamed``): the input pipeline's share of the loop's train time (the
   loop's own ``data_seconds`` / ``train_seconds``: time spent waiting for the next batch) for
   the single-process streamed MLP (``torch.streaming``) and for ``--workers 2`` on a local Ray
   (each rank's shard through Ray Data: ``iter_torch_batches``), first epoch (Ray Data starting
   its pipeline) and later epochs apart.

Prints medians over ``--repeats`` runs and the ratio ours/bare (target: overhead ≤ 10%).

    python bench/train.py [--rows 100000] [--features 20] [--repeats 10] [--streamed]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def make_data(rows: int, features: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, features)).astype(np.float32)
    w = rng.normal(size=features)
    y = (X @ w + rng.normal(scale=2.0, size=rows) > 0).astype(np.int64)
    return X, y


def bench_xgboost(X: np.ndarray, y: np.ndarray, repeats: int, rounds: int) -> dict[str, float]:
    import xgboost as xgb

    from fstrain.trainers import train

    cut = int(len(X) * 0.8)
    cols = [f"f{i}" for i in range(X.shape[1])]
    Xtr, Xva = pd.DataFrame(X[:cut], columns=cols), pd.DataFrame(X[cut:], columns=cols)
    ytr, yva = pd.DataFrame({"label": y[:cut]}), pd.DataFrame({"label": y[cut:]})
    nthread = os.cpu_count() or 1
    config = {"model": "xgboost", "early_stopping_rounds": None, "device": "cpu",
              "params": {"n_estimators": rounds, "max_depth": 6, "learning_rate": 0.1,
                         "nthread": nthread}}
    params = {"tree_method": "hist", "device": "cpu", "max_depth": 6, "learning_rate": 0.1,
              "objective": "binary:logistic", "eval_metric": ["logloss", "auc"], "seed": 42,
              "nthread": nthread, "verbosity": 0}
    ours, bare, booster_only = [], [], []
    scratch = tempfile.TemporaryDirectory(prefix="fst-bench-")  # removed when done
    workdir = Path(scratch.name)
    def run_bare() -> None:
        t0 = time.perf_counter()
        dtrain = xgb.DMatrix(X[:cut], label=y[:cut])
        dval = xgb.DMatrix(X[cut:], label=y[cut:])
        booster = xgb.train(params, dtrain, rounds, evals=[(dval, "val")], verbose_eval=False)
        booster.predict(dval)
        bare.append(time.perf_counter() - t0)

    def run_ours() -> None:
        t0 = time.perf_counter()
        result = train(config, Xtr, ytr, Xva, yva, workdir=workdir)
        ours.append(time.perf_counter() - t0)
        booster_only.append(result.extra["booster_seconds"])

    try:
        for i in range(repeats):  # alternate which goes first: OpenMP warm-up favours the second
            for run in ((run_bare, run_ours) if i % 2 == 0 else (run_ours, run_bare)):
                run()
    finally:
        scratch.cleanup()
    return {"ours_s": statistics.median(ours), "bare_s": statistics.median(bare),
            "ours_booster_s": statistics.median(booster_only),
            "rows_per_s_ours": cut * rounds / statistics.median(ours),
            "rows_per_s_bare": cut * rounds / statistics.median(bare)}


def bench_torch(X: np.ndarray, y: np.ndarray, repeats: int, epochs: int,
                batch: int) -> dict[str, float]:
    import torch
    from sklearn.metrics import roc_auc_score

    from fstrain.trainers.config import TorchOptions
    from fstrain.trainers.loop import LoopSpec, fit
    from fstrain.trainers.torch_inputs import ArrayDataset
    from fstrain.trainers.nets import MLP

    val_rows = min(2000, len(X) // 10)
    Xtr, ytr, Xva, yva = X[val_rows:], y[val_rows:], X[:val_rows], y[:val_rows]
    opts = TorchOptions(epochs=epochs, batch_size=batch, lr=1e-3, scheduler="none",
                        amp="off", grad_clip=None, patience=None, checkpoint=False, device="cpu")
    ours, bare = [], []

    def run_ours() -> None:
        torch.manual_seed(0)
        net = MLP(X.shape[1], 2, hidden_sizes=[128, 64], dropout=0.1, norm="layer")
        t0 = time.perf_counter()
        fit(LoopSpec(model=net, train_set=ArrayDataset(Xtr, ytr), val_set=ArrayDataset(Xva, yva),
                     n_classes=2, options=opts, seed=0, metric="auc", mode="max"))
        ours.append(time.perf_counter() - t0)

    def run_bare() -> None:
        torch.manual_seed(0)
        net = MLP(X.shape[1], 2, hidden_sizes=[128, 64], dropout=0.1, norm="layer")
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
        loss_fn = torch.nn.CrossEntropyLoss()
        xt, yt = torch.from_numpy(Xtr), torch.from_numpy(ytr)
        xv = torch.from_numpy(Xva)
        gen = torch.Generator().manual_seed(0)
        t0 = time.perf_counter()
        for _epoch in range(epochs):
            net.train()
            perm = torch.randperm(len(xt), generator=gen)
            for start in range(0, len(xt), batch):
                idx = perm[start:start + batch]
                loss = loss_fn(net(xt[idx]), yt[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            net.eval()  # the same per-epoch validation our loop does
            with torch.no_grad():
                proba = torch.softmax(net(xv), dim=1)[:, 1].numpy()
            roc_auc_score(yva, proba)
        bare.append(time.perf_counter() - t0)

    for i in range(repeats):  # alternate which goes first, as for XGBoost
        for run in ((run_ours, run_bare) if i % 2 == 0 else (run_bare, run_ours)):
            run()
    n = len(Xtr) * epochs
    # input-pipeline share: the same batches our loop draws, fetched without any compute
    from fstrain.trainers.torch_inputs import epoch_indices, train_batches

    dataset = ArrayDataset(Xtr, ytr)
    t0 = time.perf_counter()
    for epoch in range(epochs):
        for _xb, _yb in train_batches(dataset, None,
                                      epoch_indices(len(Xtr), seed=0, epoch=epoch), batch, 0):
            pass
    data_s = time.perf_counter() - t0
    return {"ours_s": statistics.median(ours), "bare_s": statistics.median(bare),
            "data_share": data_s / statistics.median(ours),
            "samples_per_s_ours": n / statistics.median(ours),
            "samples_per_s_bare": n / statistics.median(bare)}


def bench_streamed(X: np.ndarray, y: np.ndarray, epochs: int, batch: int,
                   workers: int) -> dict[str, tuple[float, float]]:
    """Input-pipeline share (first epoch, later epochs) of the streamed single-process loop and
    of the Ray Data input of ``workers`` Ray Train ranks (rank 0's loop timings)."""
    cols = [f"f{i}" for i in range(X.shape[1])]
    cut = int(len(X) * 0.9)
    frames = {"train": (pd.DataFrame(X[:cut], columns=cols), pd.DataFrame({"label": y[:cut]})),
              "validation": (pd.DataFrame(X[cut:], columns=cols),
                             pd.DataFrame({"label": y[cut:]}))}
    # a short folder (Ray's socket paths), removed when done
    with tempfile.TemporaryDirectory(prefix="fsb-", dir="/tmp") as scratch:
        return _streamed_shares(Path(scratch), frames, epochs, batch, workers)


def _streamed_shares(workdir: Path, frames: dict[str, tuple[pd.DataFrame, pd.DataFrame]],
                     epochs: int, batch: int, workers: int) -> dict[str, tuple[float, float]]:
    from fstrain.trainers.distributed import train_distributed
    from fstrain.trainers.stream.source import StreamSource
    from fstrain.trainers.torch_models import train_torch_streamed

    source = StreamSource.from_frames(workdir / "input", frames)
    config = {"model": "mlp", "params": {"hidden_sizes": [128, 64], "dropout": 0.1},
              "torch": {"epochs": epochs, "batch_size": batch, "scheduler": "none",
                        "amp": "off", "patience": None, "device": "cpu"}}

    def shares(history: list[dict[str, float]]) -> tuple[float, float]:
        def share(rows: list[dict[str, float]]) -> float:
            return (sum(r["data_seconds"] for r in rows)
                    / max(sum(r["train_seconds"] for r in rows), 1e-9))
        return share(history[:1]), share(history[1:])

    t0 = time.perf_counter()
    one = train_torch_streamed(
        {**config, "torch": {**config["torch"], "streaming": True}}, source,
        workdir=workdir / "one")
    t1 = time.perf_counter()
    ddp = train_distributed(config, source=source, workdir=workdir / "ddp", num_workers=workers,
                            num_cpus=workers, use_gpu=False)
    print(f"(streamed run {t1 - t0:.0f} s, Ray run {time.perf_counter() - t1:.0f} s; per epoch "
          "data/train seconds: streamed "
          + ", ".join(f"{r['data_seconds']:.2f}/{r['train_seconds']:.2f}" for r in one.history)
          + "; Ray Data rank 0 "
          + ", ".join(f"{r['data_seconds']:.2f}/{r['train_seconds']:.2f}" for r in ddp.history)
          + ")")
    return {"streamed": shares(one.history), "ray_data": shares(ddp.history)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--streamed", action="store_true",
                        help="only the streamed and Ray Data input shares (starts Ray)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    X, y = make_data(args.rows, args.features)
    if args.streamed:
        res = bench_streamed(X, y, max(args.epochs, 3), args.batch_size, args.workers)
        for name, what in (("streamed", "single process, torch.streaming"),
                           ("ray_data", f"{args.workers} Ray Train ranks, Ray Data shards")):
            first, later = res[name]
            print(f"torch    input pipeline share ({what}): {100 * first:.1f}% of the first "
                  f"epoch's train time, {100 * later:.1f}% of later epochs'")
        return
    print(f"data: {args.rows} rows x {args.features} features, {args.repeats} repeats (medians)")
    # torch first: XGBoost's OpenMP worker threads keep spinning after training and slow any
    # torch CPU work that follows in the same process (two OpenMP runtimes on 2 cores).
    t_res = bench_torch(X, y, args.repeats, args.epochs, args.batch_size)
    xgb_res = bench_xgboost(X, y, args.repeats, args.rounds)
    ratio = xgb_res["ours_s"] / xgb_res["bare_s"]
    ratio_b = xgb_res["ours_booster_s"] / xgb_res["bare_s"]
    print(f"xgboost  {args.rounds} rounds: ours end-to-end {xgb_res['ours_s']:.3f}s (ratio "
          f"{ratio:.3f}, {100 * (ratio - 1):+.1f}%; includes fitting the preprocessor on train, "
          f"validation metrics)  ours DMatrix+boosting {xgb_res['ours_booster_s']:.3f}s (ratio "
          f"{ratio_b:.3f}, {100 * (ratio_b - 1):+.1f}%)  bare DMatrix+xgboost.train+predict "
          f"{xgb_res['bare_s']:.3f}s")
    ratio_t = t_res["samples_per_s_bare"] / t_res["samples_per_s_ours"]
    print(f"torch    MLP {args.epochs} epochs bs={args.batch_size}: ours "
          f"{t_res['samples_per_s_ours']:,.0f} samples/s  minimal loop "
          f"{t_res['samples_per_s_bare']:,.0f} samples/s  time ratio {ratio_t:.3f}  "
          f"(overhead {100 * (ratio_t - 1):+.1f}%, both validate every epoch)")
    print(f"torch    input pipeline (index order + batch slicing) is {100 * t_res['data_share']:.1f}% "
          "of our loop's time: the CPU waits on data for at most that share (no GPU here)")


if __name__ == "__main__":
    main()
