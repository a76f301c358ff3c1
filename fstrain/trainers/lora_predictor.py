"""A LoRA-adapted causal LM behind the predictor interface: generate, score, save, load.

Saved as ``adapter/`` (PEFT's ``adapter_model.safetensors`` + ``adapter_config.json``),
``tokenizer/`` and, for a generated base, ``base/`` (its safetensors weights and config);
``predictor.json`` records the base model's identity (source, path, weights sha256), the prompt
template and the training parameters. Loading checks the base's weights against the recorded
hash, and never unpickles anything.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any
import contextlib
import shutil

import numpy as np
import pandas as pd

from fstrain.kernel.errors import InvalidArgumentError
from fstrain.trainers.data import LabelInfo
from fstrain.trainers.predictor_base import ExplainTarget, PredictorBase
from fstrain.trainers.lora_base import load_local_base, require_llm
from model_registry.manifest import find_version_root, verify_directory

TEMPLATE = "### Instruction:\n{prompt}\n### Response:\n"
PROMPT_COLUMN = "prompt"
_SLOT = "\x00PROMPT\x00"  # where the prompt goes when a chat template is rendered


def normalise(text: str) -> str:
    """Whitespace-insensitive form used by exact match."""
    return " ".join(str(text).split())


def template_parts(tokenizer: Any) -> tuple[str, str]:
    """The text before and after a prompt: the model's own chat template when its tokenizer
    has one (the prompt as the user's turn, then the assistant's turn opened), else
    :data:`TEMPLATE` (a generated base's tokenizer has no chat template)."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template([{"role": "user", "content": _SLOT}],
                                             tokenize=False, add_generation_prompt=True)
        before, after = str(text).split(_SLOT)
        return before, after
    before, after = TEMPLATE.split("{prompt}")
    return before, after


def prompt_format(tokenizer: Any) -> str:
    """How prompts are framed, as ``predictor.json`` records it."""
    if getattr(tokenizer, "chat_template", None):
        return "chat template: " + "{prompt}".join(template_parts(tokenizer))
    return TEMPLATE


def encode(tokenizer: Any, prompt: str, response: str | None, max_length: int
           ) -> tuple[list[int], list[int]]:
    """Token ids of ``[<s>] before prompt after response </s>`` and labels (-100 on all but
    the response); ``before``/``after`` are :func:`template_parts` (a chat template brings its
    own start tokens, so no ``<s>`` is added then).

    Too long: the response keeps at least half of ``max_length`` (its end is cut), and the
    prompt loses its beginning (its end, next to the answer, and the template stay)."""
    before, after = template_parts(tokenizer)
    chat = bool(getattr(tokenizer, "chat_template", None))
    pre = tokenizer.encode(before, add_special_tokens=False)
    post = tokenizer.encode(after, add_special_tokens=False)
    body = tokenizer.encode(str(prompt), add_special_tokens=False)
    tail = ([] if response is None else
            tokenizer.encode(str(response), add_special_tokens=False) + [tokenizer.eos_token_id])
    bos = [] if chat or tokenizer.bos_token_id is None else [tokenizer.bos_token_id]
    tail = tail[: max(max_length - len(bos) - len(pre) - len(post) - len(body), max_length // 2)]
    room = max_length - len(bos) - len(post) - len(tail)  # for the template's start + prompt
    kept = body[-(room - len(pre)):] if room > len(pre) else []
    head = bos + ((pre + kept)[-room:] if room > 0 else []) + post
    # a template longer than max_length itself loses its start (a tiny max_length only)
    return (head + tail)[-max_length:], ([-100] * len(head) + tail)[-max_length:]


def collate(rows: list[tuple[list[int], list[int]]], pad_id: int) -> dict[str, Any]:
    """Right-padded batch tensors (labels -100 on padding)."""
    import torch

    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (x, y) in enumerate(rows):
        ids[i, : len(x)] = torch.tensor(x)
        labels[i, : len(y)] = torch.tensor(y)
        mask[i, : len(x)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def token_nll(model: Any, batch: dict[str, Any]) -> tuple[float, int]:
    """Summed negative log-likelihood of the labelled tokens, and their count."""
    import torch

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    shift_logits = logits[:, :-1].float()
    shift_labels = batch["labels"][:, 1:]
    loss = torch.nn.functional.cross_entropy(
        shift_logits.reshape(-1, shift_logits.shape[-1]), shift_labels.reshape(-1),
        ignore_index=-100, reduction="sum")
    return float(loss), int((shift_labels != -100).sum())


class LoraPredictor(PredictorBase):
    """A PEFT model (base + LoRA adapter) and its tokenizer; answers prompts."""

    framework = "torch"
    task = "generation"

    def __init__(self, *, model: Any, tokenizer: Any, base: dict[str, Any],
                 params: dict[str, Any], label: str = "response",
                 base_folder: Path | None = None) -> None:
        self.kind = "lora"
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.base = base
        self.params = params
        self.labels = LabelInfo(name=label, classes=())
        self.base_folder = base_folder
        self.max_length = int(params.get("max_length", 192))
        self.batch_size = int(params.get("batch_size", 8))

    def _prompts(self, X: pd.DataFrame) -> list[str]:
        if PROMPT_COLUMN not in X.columns:
            raise InvalidArgumentError(f"the lora model reads column {PROMPT_COLUMN!r}, which X "
                                       f"lacks (columns: {list(X.columns)}).")
        return X[PROMPT_COLUMN].astype(str).tolist()

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """A language model has no class probabilities: use :meth:`predict` or :meth:`nll`."""
        raise InvalidArgumentError("the lora model generates text; it has no class "
                                   "probabilities. Use predict() or nll().")

    def nll(self, X: pd.DataFrame, y: pd.Series, *, adapter: bool = True) -> tuple[float, int]:
        """Summed NLL of the reference responses given the prompts, and the token count
        (``adapter=False``: the base model alone)."""
        import torch

        rows = [encode(self.tokenizer, p, r, self.max_length)
                for p, r in zip(self._prompts(X), y.astype(str), strict=True)]
        total, count = 0.0, 0
        ctx = contextlib.nullcontext() if adapter else self.model.disable_adapter()
        device = next(self.model.parameters()).device
        with torch.inference_mode(), ctx:
            for start in range(0, len(rows), self.batch_size):
                batch = collate(rows[start:start + self.batch_size], self.tokenizer.pad_token_id)
                s, c = token_nll(self.model, {k: v.to(device) for k, v in batch.items()})
                total, count = total + s, count + c
        return total, count

    def perplexity(self, X: pd.DataFrame, y: pd.Series, *, adapter: bool = True) -> float:
        """exp(mean NLL per response token)."""
        total, count = self.nll(X, y, adapter=adapter)
        return math.exp(total / max(count, 1))

    def predict(self, X: pd.DataFrame, max_new_tokens: int | None = None, *,
                adapter: bool = True) -> np.ndarray:
        """Greedy answers to the prompts (text after the template, up to ``</s>``);
        ``adapter=False``: the base model's answers."""
        import torch

        limit = int(max_new_tokens or self.params.get("max_new_tokens", 16))
        device = next(self.model.parameters()).device
        out = []
        ctx = contextlib.nullcontext() if adapter else self.model.disable_adapter()
        with torch.inference_mode(), ctx:
            for prompt in self._prompts(X):
                ids, _ = encode(self.tokenizer, prompt, None, self.max_length - limit)
                x = torch.tensor([ids], device=device)
                gen = self.model.generate(input_ids=x, attention_mask=torch.ones_like(x),
                                          max_new_tokens=limit, do_sample=False,
                                          eos_token_id=self.tokenizer.eos_token_id,
                                          pad_token_id=self.tokenizer.pad_token_id)
                out.append(self.tokenizer.decode(gen[0, len(ids):], skip_special_tokens=True))
        return np.asarray(out, dtype=object)

    @property
    def explain_target(self) -> ExplainTarget:
        """The PEFT model; no SHAP explanation for generation (validation reports loss,
        perplexity and exact match instead)."""
        return ExplainTarget(kind="lora", model=self.model, transform=lambda X: X,
                             feature_names=[PROMPT_COLUMN], classes=())

    def save(self, directory: Path) -> dict[str, Any]:
        """adapter/ (safetensors), tokenizer/, base/ for a generated base, predictor.json."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(directory / "adapter", safe_serialization=True)
        self.tokenizer.save_pretrained(directory / "tokenizer")
        if self.base.get("source") == "generated" and self.base_folder is not None:
            shutil.copytree(self.base_folder, directory / "base", dirs_exist_ok=True)
        files = [p for p in directory.rglob("*") if p.is_file()]
        body = {"base_model": self.base, "template": prompt_format(self.tokenizer),
                "params": dict(self.params)}
        return self._write_manifest(directory, body, files)


def load_lora_predictor(directory: Path, info: dict[str, Any], device: str = "cpu"
                        ) -> LoraPredictor:
    """Rebuild a saved :class:`LoraPredictor`: the base (checked against its recorded sha256)
    plus the adapter, both from safetensors."""
    from peft import PeftModel
    from transformers import AutoTokenizer

    require_llm()
    directory = Path(directory)
    root = find_version_root(directory)
    if root is not None:
        verify_directory(root, label=f"'{root}'")
    base = dict(info["base_model"])
    folder = directory / "base" if base.get("source") == "generated" else Path(base["path"])
    model, _, _ = load_local_base(str(folder), expected_sha256=base["sha256"])
    tokenizer = AutoTokenizer.from_pretrained(directory / "tokenizer", local_files_only=True)
    peft_model = PeftModel.from_pretrained(model, directory / "adapter", local_files_only=True)
    return LoraPredictor(model=peft_model.to(device), tokenizer=tokenizer, base=base,
                         params=dict(info.get("params") or {}), label=info["labels"]["name"])
