"""Subprocess used by the data-parallel kill-and-resume test (not a test module itself).

    python ddp_resume_worker.py WORKDIR full|kill|resume [KILL_AT_STEP]

Runs the shared training loop in two processes joined in a gloo process group, each wrapping
the MLP in DistributedDataParallel (what a Ray Train worker does, without Ray). In ``kill``
mode rank 1 sends itself SIGKILL right after optimizer step KILL_AT_STEP; the spawner then
stops rank 0. Every mode that finishes writes rank 0's final weights to
WORKDIR/final.safetensors and the history to WORKDIR/history.json.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path

from resume_worker import CONFIG as SINGLE_PROCESS_CONFIG
from resume_worker import data

CONFIG = {**SINGLE_PROCESS_CONFIG,
          "torch": {**SINGLE_PROCESS_CONFIG["torch"], "epochs": 3, "batch_size": 16}}
WORLD_SIZE = 2


def _rank_main(rank: int, workdir: str, mode: str, kill_at: int, port: int) -> None:
    import torch
    import torch.distributed as tdist
    from torch.nn.parallel import DistributedDataParallel

    from fstrain.trainers.config import load_config
    from fstrain.trainers.loop import LoopSpec, fit
    from fstrain.trainers.loop_resume import DistContext
    from fstrain.trainers.metrics import resolve_metric
    from fstrain.trainers.nets import build_net
    from fstrain.trainers.seeding import deterministic_mode, seed_everything
    from fstrain.trainers.torch_models import prepare_torch_data

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    tdist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE,
                             timeout=timedelta(seconds=60))
    torch.set_num_threads(1)
    cfg = load_config(CONFIG)
    prepared = prepare_torch_data(cfg, *data())
    metric, mode_ = resolve_metric(cfg, prepared.labels.n_classes)

    def on_step(step: int) -> None:
        if mode == "kill" and rank == 1 and step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    with deterministic_mode(True):
        seed_everything(cfg.seed)
        net = build_net(prepared.arch)
        torch.manual_seed(cfg.seed + 1000 * rank)  # distinct dropout masks per rank
        out = fit(LoopSpec(
            model=net, train_set=prepared.train_set, val_set=prepared.val_set,
            n_classes=prepared.labels.n_classes, options=cfg.torch, seed=cfg.seed,
            metric=metric, mode=mode_, class_weight=prepared.plan.class_weight,
            checkpoint_dir=Path(workdir) / "checkpoints", config=cfg.fingerprint_dict(),
            lineage={"training_dataset": "synthetic", "version": 1},
            resume=(mode == "resume"), on_step=on_step,
            dist=DistContext(rank=rank, world_size=WORLD_SIZE,
                             wrap=lambda m: DistributedDataParallel(m)),
        ))
    if rank == 0:
        from safetensors.torch import save_file

        state = {k: v.contiguous() for k, v in out.model.state_dict().items()}
        save_file(state, str(Path(workdir) / "final.safetensors"))
        (Path(workdir) / "history.json").write_text(json.dumps(
            {"history": [{k: v for k, v in r.items() if not k.endswith("_seconds")}
                         for r in out.history],
             "resumed_from": out.resumed_from}))
    # leave together: a rank that tore gloo down while rank 0 was still writing its files
    # aborted once under load ("terminate called without an active exception", SIGABRT)
    tdist.barrier()
    tdist.destroy_process_group()


def main() -> None:
    import socket

    import torch.multiprocessing as mp

    workdir, mode = sys.argv[1], sys.argv[2]
    kill_at = int(sys.argv[3]) if len(sys.argv) > 3 else -1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_rank_main, args=(workdir, mode, kill_at, port), nprocs=WORLD_SIZE, join=True)


if __name__ == "__main__":
    main()
