"""Instructions: supervised fine-tuning (LoRA) of a causal language model on instruction records.

Root ``instructions`` (HumanEval problems as instruction/response pairs); the label is the
response, the feature the prompt; ``source`` and ``tags`` are training helper columns, so model
validation reports exact match per record source. The versions are stored as JSONL.
"""

from __future__ import annotations

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
    demo={"model": {"params": {"epochs": 1, "max_length": 96}}},
)
