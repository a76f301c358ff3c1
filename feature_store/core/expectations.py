"""Great Expectations 1.x suites for feature groups: storing, validating, reporting.

Great Expectations is imported only when a suite is actually used (importing it costs seconds).
A suite can be given as a ``great_expectations.ExpectationSuite``, as its JSON dict
(``suite.to_json_dict()``), or as a list of ``{"type": ..., "kwargs": {...}}`` entries (the
expectation type may be the snake_case name or the class name).

Ingestion policies (as Hopsworks):

- ``ALWAYS``: the report is kept as ``INGESTED`` and the data is written even if it failed;
- ``STRICT``: a failed report is kept as ``REJECTED`` and nothing is written.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from fstrain.kernel.errors import InvalidArgumentError, did_you_mean

POLICIES = ("ALWAYS", "STRICT")


@dataclass(frozen=True)
class ExpectationResult:
    """Outcome of one expectation."""

    expectation_type: str
    kwargs: dict[str, Any]
    success: bool
    observed: dict[str, Any]


@dataclass(frozen=True)
class ValidationReport:
    """Outcome of validating one batch against a suite (mirrors ``hsfs.ValidationReport``)."""

    success: bool
    ingestion_result: str
    suite_name: str
    evaluated_expectations: int
    successful_expectations: int
    results: list[ExpectationResult] = field(default_factory=list)
    validation_time: str = ""

    def failed(self) -> list[ExpectationResult]:
        """The expectations that did not pass."""
        return [r for r in self.results if not r.success]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ValidationReport:
        results = [ExpectationResult(**r) for r in data.get("results", [])]
        return cls(**{**data, "results": results})

    def summary(self) -> str:
        """One line per failed expectation, for error messages."""
        lines = []
        for r in self.failed():
            column = r.kwargs.get("column", "")
            unexpected = r.observed.get("partial_unexpected_list") or r.observed.get("observed_value")
            lines.append(
                f"  - {r.expectation_type}(column={column!r}): "
                f"{r.observed.get('unexpected_count', '?')} unexpected, e.g. {unexpected!r}"
            )
        return "\n".join(lines)


def normalize_policy(policy: str) -> str:
    """Validate an ingestion policy name (case-insensitive)."""
    upper = str(policy).upper()
    if upper not in POLICIES:
        raise InvalidArgumentError(
            f"validation_ingestion_policy must be 'always' or 'strict'. Got {policy!r} instead."
        )
    return upper


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() if name[:1].isupper() else name


_NAME_KEYS = ("name", "expectation_suite_name", "expectationSuiteName")
_TYPE_KEYS = ("type", "expectation_type", "expectationType")


def _json_field(value: Any) -> Any:
    """A field the SDK may serialise as a JSON string (``kwargs``, ``meta``) as a Python value."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _expectation_dict(exp: Any) -> Any:
    """One expectation as a plain dict, from GX 1.x, GX 0.x-style or ``hsfs`` objects."""
    if isinstance(exp, dict):
        return exp
    if hasattr(exp, "expectation_type") and hasattr(exp, "kwargs"):  # hsfs.GeExpectation, GX 0.x
        return {"type": exp.expectation_type, "kwargs": exp.kwargs}
    if hasattr(exp, "to_json_dict"):
        return exp.to_json_dict()
    if hasattr(exp, "type") and hasattr(exp, "kwargs"):
        return {"type": exp.type, "kwargs": dict(exp.kwargs)}
    return exp


def suite_to_dict(suite: Any, default_name: str) -> dict[str, Any]:
    """Canonical JSON form of a suite given in any accepted shape.

    Accepted: a ``great_expectations.ExpectationSuite`` (1.x), the SDK's own
    ``hsfs.expectation_suite.ExpectationSuite``, their dicts (GX's ``name``/``type``, GX 0.x's
    ``expectation_suite_name``/``expectation_type``, or the SDK's camelCase JSON with
    ``expectationSuiteName``/``expectationType`` and ``kwargs`` as a JSON string), or a list of
    expectations.
    """
    if type(suite).__module__.startswith("hsfs") and hasattr(suite, "to_json_dict"):
        suite = suite.to_json_dict()  # camelCase dict, handled below
    if isinstance(suite, dict):
        data = dict(suite)
        expectations = data.get("expectations", [])
        name = next((data[k] for k in _NAME_KEYS if data.get(k)), default_name)
    elif isinstance(suite, list | tuple):
        expectations, name = list(suite), default_name
    elif hasattr(suite, "to_json_dict"):
        data = suite.to_json_dict()
        expectations, name = data.get("expectations", []), data.get("name") or default_name
    else:
        raise InvalidArgumentError(
            f"expectation_suite must be a great_expectations.ExpectationSuite, an "
            f"hsfs ExpectationSuite, their dict, or a list of {{'type', 'kwargs'}} entries. "
            f"Got {type(suite).__name__} instead."
        )
    canonical = []
    for i, exp in enumerate(_json_field(expectations) or []):
        exp = _expectation_dict(exp)
        kind = next((exp[k] for k in _TYPE_KEYS if exp.get(k)), None) if isinstance(exp, dict) else None
        if kind is None:
            raise InvalidArgumentError(
                f"expectation #{i} of suite '{name}' must have a 'type'. Got {exp!r} instead."
            )
        kwargs = _json_field(exp.get("kwargs")) or {}
        if not isinstance(kwargs, dict):
            raise InvalidArgumentError(
                f"expectation #{i} ({kind}) of suite '{name}' must have dict kwargs. "
                f"Got {kwargs!r} instead."
            )
        canonical.append({"type": _snake(str(kind)), "kwargs": dict(kwargs)})
    return {"name": name, "expectations": canonical}


def build_suite(data: dict[str, Any]) -> Any:
    """A ``great_expectations.ExpectationSuite`` from :func:`suite_to_dict` output."""
    import great_expectations as gx

    try:
        return gx.ExpectationSuite(
            name=data["name"],
            expectations=[{"type": e["type"], "kwargs": e["kwargs"]} for e in data["expectations"]],
        )
    except Exception as exc:  # GX raises many types for bad configurations
        raise InvalidArgumentError(
            f"expectation suite '{data['name']}' is invalid for Great Expectations: {exc}"
        ) from exc


def check_suite(data: dict[str, Any], columns: list[str] | None, owner: str) -> None:
    """Refuse suites that reference columns the feature group does not have."""
    build_suite(data)
    if columns is None:
        return
    for exp in data["expectations"]:
        column = exp["kwargs"].get("column")
        if column is not None and column not in columns:
            raise InvalidArgumentError(
                f"{owner}: expectation {exp['type']} refers to column '{column}', which the "
                f"feature group does not have (columns: {columns}).{did_you_mean(column, columns)}"
            )


_CONTEXT_LOCK = threading.Lock()
_COLUMN_KWARGS = ("column", "column_A", "column_B", "column_list")


#: Expectations whose verdict on a string column is the same whether pandas holds it as
#: object strings or as a categorical (no ordering, arithmetic or min/max involved).
CATEGORICAL_SAFE = frozenset({
    "expect_column_values_to_not_be_null", "expect_column_values_to_be_null",
    "expect_column_values_to_be_in_set", "expect_column_values_to_not_be_in_set",
    "expect_column_values_to_be_unique", "expect_column_distinct_values_to_be_in_set",
    "expect_column_distinct_values_to_contain_set", "expect_column_distinct_values_to_equal_set",
    "expect_column_values_to_match_regex", "expect_column_values_to_not_match_regex",
    "expect_column_value_lengths_to_be_between", "expect_column_value_lengths_to_equal",
})


def categorical_safe_columns(suite_data: dict[str, Any], table: Any) -> list[str]:
    """String columns of ``table`` that only :data:`CATEGORICAL_SAFE` expectations read."""
    import pyarrow as pa

    strings = {f.name for f in table.schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)}
    unsafe: set[str] = set()
    used: set[str] = set()
    for exp in suite_data["expectations"]:
        kwargs = exp["kwargs"]
        names = [kwargs[k] for k in _COLUMN_KWARGS if k in kwargs]
        flat = {n for v in names for n in (v if isinstance(v, list) else [v])}
        used |= flat
        if exp["type"] not in CATEGORICAL_SAFE or not flat:
            unsafe |= flat if flat else strings
    return sorted((strings & used) - unsafe)


def referenced_columns(suite_data: dict[str, Any]) -> list[str] | None:
    """Columns a suite reads, or ``None`` when some expectation needs the whole table."""
    columns: list[str] = []
    for exp in suite_data["expectations"]:
        kwargs = exp["kwargs"]
        found = [kwargs[k] for k in _COLUMN_KWARGS if k in kwargs]
        if not found or exp["type"].startswith("expect_table_"):
            return None
        for value in found:
            for column in value if isinstance(value, list) else [value]:
                if column not in columns:
                    columns.append(column)
    return columns


@functools.cache
def _batch_definition() -> Any:
    """One ephemeral GX context per process (creating one costs time and a temp folder)."""
    import great_expectations as gx

    context = gx.get_context(mode="ephemeral")
    try:
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context.variables.progress_bars = ProgressBarsConfig(globally=False)
    except Exception:  # pragma: no cover - cosmetic only
        pass
    source = context.data_sources.add_pandas("fstrain")
    asset = source.add_dataframe_asset("batch")
    return asset.add_batch_definition_whole_dataframe("whole")


def validate(frame: Any, suite_data: dict[str, Any], policy: str) -> ValidationReport:
    """Validate a pandas DataFrame against a suite and build the report."""
    import pandas as pd

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    suite = build_suite(suite_data)
    from great_expectations.validator.v1_validator import Validator

    with _CONTEXT_LOCK:
        # One validator loads (and fingerprints) the batch once; ``Batch.validate`` would load it
        # a second time. A passing batch needs no per-value detail: check cheaply first, and only
        # when something failed validate again, on the same loaded batch, for the counts and
        # examples a reviewer needs.
        validator = Validator(
            _batch_definition(),
            result_format="BOOLEAN_ONLY",
            batch_parameters={"dataframe": frame},
        )
        raw = validator.validate_expectation_suite(suite).to_json_dict()
        if not raw["success"]:
            validator.result_format = "BASIC"
            raw = validator.validate_expectation_suite(suite).to_json_dict()
    results = []
    for r in raw["results"]:
        config = r["expectation_config"]
        kwargs = {k: v for k, v in config["kwargs"].items() if k != "batch_id"}
        observed = {
            k: v
            for k, v in (r.get("result") or {}).items()
            if k in ("unexpected_count", "unexpected_percent", "partial_unexpected_list",
                     "observed_value", "element_count", "missing_count")
        }
        results.append(
            ExpectationResult(
                expectation_type=config["type"],
                kwargs=kwargs,
                success=bool(r["success"]),
                observed=observed,
            )
        )
    stats = raw["statistics"]
    success = bool(raw["success"])
    return ValidationReport(
        success=success,
        ingestion_result="INGESTED" if success or policy == "ALWAYS" else "REJECTED",
        suite_name=suite_data["name"],
        evaluated_expectations=int(stats["evaluated_expectations"]),
        successful_expectations=int(stats["successful_expectations"]),
        results=results,
        validation_time=pd.Timestamp.now(tz="UTC").isoformat(),
    )
