"""LoRA supervised fine-tuning (``model: lora``) of a causal LM on instruction records.

X holds the ``prompt`` column, y the reference ``response``. The base model is a local
checkpoint (``params.base_model``) or a generated tiny Llama (:mod:`fstrain.trainers.lora_base`).
PEFT adds LoRA adapters (rank ``rank``, scale ``alpha``) on the attention projections; only the
adapters train. The loop: AdamW, gradient accumulation over ``grad_accum_steps`` micro-batches,
a cosine schedule with linear warm-up (``warmup_ratio``) over at most ``max_steps`` optimizer
steps when set (training stops there, mid-epoch if need be), gradient clipping at 1.0, bf16
autocast on a GPU that supports it (fp32 otherwise); the loss covers the response tokens only.
After each epoch the validation loss is measured; early stopping keeps the best epoch's
adapters (``early_stopping_rounds`` epochs of patience); the base without its adapter is scored
on the validation rows too (``base_perplexity``). Seeds: the run seed drives the adapter
initialisation, dropout and shuffling inside a forked RNG (the global RNG is left as it was).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from fstrain.kernel.errors import ConfigError
from fstrain.trainers.config import TrainConfig
from fstrain.trainers.result import TrainResult
from fstrain.trainers.curves import from_history
from fstrain.trainers.lora_base import (
    attention_projections,
    build_tiny_base,
    load_local_base,
    require_llm,
)

DEFAULTS: dict[str, Any] = {
    "rank": 8, "alpha": 16, "dropout": 0.05, "target_modules": None, "max_length": 192,
    "epochs": 3, "batch_size": 8, "grad_accum_steps": 2, "lr": 2e-3, "warmup_ratio": 0.1,
    "weight_decay": 0.0, "max_new_tokens": 16, "vocab_size": 512, "hidden_size": 64,
    "layers": 2, "base_model": None, "max_steps": None,
}


def _params(config: TrainConfig) -> dict[str, Any]:
    if config.imbalance != "none":
        raise ConfigError(f"imbalance={config.imbalance!r} applies to classes; LoRA "
                          "fine-tuning has none. Drop it.")
    return {**DEFAULTS, **config.params}


def _device(config: TrainConfig) -> tuple[str, Any]:
    import torch

    if config.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device='cuda' but no CUDA device is available; use auto or cpu.")
    device = "cuda" if config.device != "cpu" and torch.cuda.is_available() else "cpu"
    bf16 = device == "cuda" and torch.cuda.is_bf16_supported()
    return device, (torch.bfloat16 if bf16 else None)


def _base(p: dict[str, Any], texts: list[str], seed: int, workdir: Path) -> tuple[Any, Any, dict, Path | None]:
    if p["base_model"]:
        model, tokenizer, identity = load_local_base(str(p["base_model"]))
        return model, tokenizer, identity, None
    folder = workdir / "base"
    model, tokenizer, identity = build_tiny_base(
        texts, seed=seed, vocab_size=int(p["vocab_size"]), hidden_size=int(p["hidden_size"]),
        layers=int(p["layers"]), max_length=int(p["max_length"]), folder=folder)
    return model, tokenizer, identity, folder


def _peft(model: Any, p: dict[str, Any]) -> Any:
    from peft import LoraConfig, get_peft_model

    targets = p["target_modules"] or attention_projections(model)
    # peft annotates lora_alpha as int but only divides it by r: a float scale is kept as given
    config = LoraConfig(r=int(p["rank"]), lora_alpha=float(p["alpha"]),  # type: ignore[arg-type]
                        lora_dropout=float(p["dropout"]), target_modules=list(targets),
                        task_type="CAUSAL_LM", bias="none")
    return get_peft_model(model, config), list(targets)


def _evaluate(model: Any, rows: list[Any], p: dict[str, Any], pad: int, device: str,
              dtype: Any) -> float:
    """Mean NLL per response token of ``rows``."""
    import torch

    from fstrain.trainers.lora_predictor import collate, token_nll

    model.eval()
    total, count = 0.0, 0
    with torch.inference_mode(), torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        for start in range(0, len(rows), int(p["batch_size"])):
            batch = collate(rows[start:start + int(p["batch_size"])], pad)
            s, c = token_nll(model, {k: v.to(device) for k, v in batch.items()})
            total, count = total + s, count + c
    return total / max(count, 1)


def _epoch(model: Any, rows: list[Any], order: list[int], opt: Any, sched: Any,
           p: dict[str, Any], pad: int, device: str, dtype: Any, steps_left: float
           ) -> tuple[float, int]:
    """One pass over the train rows with gradient accumulation, stopping after ``steps_left``
    optimizer steps; the mean micro-batch loss and the optimizer steps taken."""
    import torch

    from fstrain.trainers.lora_predictor import collate

    model.train()
    size, accum = int(p["batch_size"]), int(p["grad_accum_steps"])
    batches = [order[i:i + size] for i in range(0, len(order), size)]
    losses, steps = [], 0
    for i, idx in enumerate(batches):
        batch = {k: v.to(device) for k, v in collate([rows[j] for j in idx], pad).items()}
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            loss = model(**batch).loss
        (loss / accum).backward()
        losses.append(float(loss.detach()))
        if (i + 1) % accum == 0 or i + 1 == len(batches):
            torch.nn.utils.clip_grad_norm_(
                [q for q in model.parameters() if q.requires_grad], 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            steps += 1
            if steps >= steps_left:
                break
    return sum(losses) / max(len(losses), 1), steps


def train_lora(config: TrainConfig, X_train: pd.DataFrame, y_train: pd.DataFrame,
               X_val: pd.DataFrame, y_val: pd.DataFrame, *, workdir: Path,
               report: Callable[[dict[str, Any]], None] | None = None) -> TrainResult:
    """Fine-tune LoRA adapters on (prompt, response) rows; validate on the validation rows."""
    import torch

    from fstrain.trainers.data import label_series
    from fstrain.trainers.lora_predictor import PROMPT_COLUMN, encode

    require_llm()
    t0 = time.perf_counter()
    p = _params(config)
    if PROMPT_COLUMN not in X_train.columns:
        raise ConfigError(f"lora trains on a {PROMPT_COLUMN!r} column; the view gives "
                          f"{list(X_train.columns)}.")
    y_tr, y_va = label_series(y_train, split="train"), label_series(y_val, split="validation")
    device, dtype = _device(config)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        texts = [*X_train[PROMPT_COLUMN].astype(str), *y_tr.astype(str)]
        base, tokenizer, identity, folder = _base(p, texts, config.seed, Path(workdir))
        model, targets = _peft(base, p)
        model.to(device)
        enc = lambda X, y: [encode(tokenizer, a, b, int(p["max_length"]))  # noqa: E731
                            for a, b in zip(X[PROMPT_COLUMN].astype(str), y.astype(str),
                                            strict=True)]
        train_rows, val_rows = enc(X_train, y_tr), enc(X_val, y_va)
        history, best = _loop(config, model, train_rows, val_rows, p, tokenizer.pad_token_id,
                              device, dtype, report)
        with model.disable_adapter():
            base_loss = _evaluate(model, val_rows, p, tokenizer.pad_token_id, device, dtype)
    return _result(config, model, tokenizer, identity, folder, p, targets, history, best,
                   len(val_rows), device, dtype, time.perf_counter() - t0, base_loss=base_loss)


def _loop(config: TrainConfig, model: Any, train_rows: list[Any], val_rows: list[Any],
          p: dict[str, Any], pad: int, device: str, dtype: Any,
          report: Callable[[dict[str, Any]], None] | None) -> tuple[list[dict[str, Any]], int]:
    """Epochs with validation and early stopping; the best epoch's adapters are restored."""
    import torch
    from peft import get_peft_model_state_dict, set_peft_model_state_dict
    from transformers import get_cosine_schedule_with_warmup

    trainable = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=float(p["lr"]), weight_decay=float(p["weight_decay"]))
    steps = math.ceil(math.ceil(len(train_rows) / int(p["batch_size"]))
                      / int(p["grad_accum_steps"])) * int(p["epochs"])
    steps = min(steps, int(p["max_steps"] or steps))
    sched = get_cosine_schedule_with_warmup(opt, int(float(p["warmup_ratio"]) * steps), steps)
    shuffle = torch.Generator().manual_seed(config.seed)
    history: list[dict[str, Any]] = []
    best, best_loss, best_state = 0, math.inf, None
    done = 0
    for epoch in range(int(p["epochs"])):
        if done >= steps:
            break
        order = torch.randperm(len(train_rows), generator=shuffle).tolist()
        train_loss, taken = _epoch(model, train_rows, order, opt, sched, p, pad, device, dtype,
                                   steps - done)
        done += taken
        val_loss = _evaluate(model, val_rows, p, pad, device, dtype)
        row = {"epoch": epoch, "train_loss": train_loss, "val_loss": val_loss,
               "val_perplexity": math.exp(val_loss), "lr": sched.get_last_lr()[0],
               "steps": done}
        history.append(row)
        if report is not None:
            report(row)
        if val_loss < best_loss:
            best, best_loss = epoch, val_loss
            best_state = {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}
        elif config.early_stopping_rounds and epoch - best >= config.early_stopping_rounds:
            break
    if best_state is not None:
        set_peft_model_state_dict(model, best_state)
    return history, best


def _result(config: TrainConfig, model: Any, tokenizer: Any, identity: dict[str, Any],
            folder: Path | None, p: dict[str, Any], targets: list[str],
            history: list[dict[str, Any]], best: int, n_val: int, device: str, dtype: Any,
            seconds: float, *, base_loss: float) -> TrainResult:
    from fstrain.trainers.lora_predictor import LoraPredictor

    trainable = sum(q.numel() for q in model.parameters() if q.requires_grad)
    total = sum(q.numel() for q in model.parameters())
    params = {**{k: v for k, v in p.items() if k != "target_modules"},
              "target_modules": targets, "trainable_parameters": int(trainable),
              "total_parameters": int(total), "precision": "bf16" if dtype else "fp32"}
    predictor = LoraPredictor(model=model.cpu(), tokenizer=tokenizer, base=identity,
                              params=params, base_folder=folder)
    val_loss = history[best]["val_loss"]
    metrics = {"loss": val_loss, "perplexity": math.exp(val_loss), "n": float(n_val),
               "base_loss": base_loss, "base_perplexity": math.exp(base_loss),
               "steps": float(history[-1]["steps"])}
    curves = from_history(history, unit="epoch", loss="loss", metric="perplexity", mode="min",
                          step_key="epoch", best_step=best, extra_keys={"lr": "lr"},
                          notes=["loss: mean negative log-likelihood per response token "
                                 "(prompt tokens are not scored)"])
    notes = [f"LoRA SFT on {device} ({params['precision']}): deterministic on CPU for a fixed "
             "seed; GPU kernels (attention, matmul reductions) can differ in the last bits"]
    return TrainResult(model=predictor, metrics=metrics, history=history, params=params,
                       imbalance={"strategy": "none", "task": "generation"},
                       nondeterminism=notes, config=config, metric="perplexity", mode="min",
                       best_iteration=best, device=device, curves=curves,
                       extra={"train_seconds": seconds, "base_model": identity})
