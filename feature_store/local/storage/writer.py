"""The write path of local feature groups: insert, remove_rows, append_features.

Order of an insert (as Hopsworks): normalise and check the schema, create the metadata on the
first write, run the expectation suite, write one Delta commit, then keep the report and the
statistics. Every check runs before anything is written; a STRICT suite failure writes no data.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from feature_store.core.expectations import categorical_safe_columns, referenced_columns, validate
from feature_store.feature import Feature
from feature_store.local.storage import schema as schema_rules
from feature_store.local.storage.storage_errors import storage_boundary
from fstrain.kernel.errors import (
    DataValidationError,
    InvalidArgumentError,
    SchemaMismatchError,
    did_you_mean,
)
from fstrain.kernel.names import normalize_feature_name
from fstrain.kernel.timeutil import utc_now

if TYPE_CHECKING:  # pragma: no cover
    from feature_store.core.expectations import ValidationReport
    from feature_store.local.catalog import Catalog
    from feature_store.local.storage.stored_group import WritableGroup

_OPERATIONS = ("upsert", "insert")


class FeatureGroupWriter:
    """Writes data into local feature groups (validation reports go to ``catalog``)."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def insert(self, fg: WritableGroup, data: Any, **options: Any) -> tuple[None, ValidationReport | None]:
        """Insert ``data`` into ``fg`` (see :meth:`FeatureGroup.insert`); storage errors are
        translated into fstrain errors naming the group."""
        with storage_boundary(fg.owner, "insert"):
            return self._insert(fg, data, **options)

    def _insert(
        self,
        fg: WritableGroup,
        data: Any,
        *,
        overwrite: bool,
        operation: str,
        storage: str | None,
        validation_options: dict[str, Any],
    ) -> tuple[None, ValidationReport | None]:
        if operation not in _OPERATIONS:
            raise InvalidArgumentError(
                f"{fg.owner}: operation must be one of {_OPERATIONS}. Got {operation!r} instead."
            )
        if storage not in (None, "offline"):
            raise InvalidArgumentError(
                f"{fg.owner}: storage must be None or 'offline' on the local backend. "
                f"Got {storage!r} instead."
            )
        table = schema_rules.normalize_table(data, fg.owner)
        if fg.id is None:
            fg.adopt_existing()
        if fg.id is None:
            target = schema_rules.infer_schema(table, fg.owner)
            _check_declared_keys(fg, target)
        else:
            target = fg.delta_table.schema()
        table = schema_rules.conform(table, target, fg.owner)
        schema_rules.check_ingestion_time(table, fg.owner, fg.ingestion_time)

        # ALWAYS writes regardless of the outcome, so its validation starts now and runs beside
        # the key checks and the Delta write (GX is pandas-bound; DuckDB and delta-rs release
        # the GIL). STRICT must know the outcome before anything is written.
        pending = None
        report = None
        strict = fg.validation_ingestion_policy == "STRICT"
        if not strict and self._will_validate(fg, validation_options):
            executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fstrain-gx")
            pending = executor.submit(self._validate, fg, table, validation_options)
            executor.shutdown(wait=False)

        schema_rules.check_keys(table, fg.owner, fg.primary_key, fg.event_time, fg.upsert_key)
        if strict:
            report = self._validate(fg, table, validation_options)
            if report is not None and not report.success:
                if fg.id is not None:
                    self._save_report(fg, report)
                raise DataValidationError(
                    f"{fg.owner}: the data failed expectation suite '{report.suite_name}' whose "
                    f"ingestion policy is STRICT, so nothing was written. Failed expectations:\n"
                    f"{report.summary()}",
                    report=report,
                )

        if fg.id is None:
            fg.create_metadata(target)
        delta = fg.delta_table
        with delta.write_lock():
            commit_id = delta.upsert(table, fg.upsert_key, overwrite=overwrite)
        # past this point the data is committed: a failure says so instead of "insert failed"
        with storage_boundary(fg.owner, f"recording the report and statistics of commit "
                                        f"{commit_id} (its data is committed)"):
            if pending is not None:
                report = pending.result()
            if report is not None and validation_options.get("save_report", True):
                self._save_report(fg, report)
            if fg.statistics_config.get("enabled", True):
                fg.compute_statistics(commit_id)
        return None, report

    @staticmethod
    def _will_validate(fg: WritableGroup, options: dict[str, Any]) -> bool:
        suite = fg.expectation_suite
        if suite is None:
            return False
        return bool(options.get("run_validation", suite.get("run_validation", True)))

    def _validate(
        self, fg: WritableGroup, table: pa.Table, options: dict[str, Any]
    ) -> ValidationReport | None:
        if not self._will_validate(fg, options):
            return None
        suite = fg.expectation_suite
        assert suite is not None  # _will_validate
        columns = referenced_columns(suite)
        subset = table.select(columns) if columns is not None else table
        # string columns only checked by set/null/uniqueness/pattern expectations travel to
        # pandas as categoricals: the same verdicts, about half the GX time on 1M rows
        for name in categorical_safe_columns(suite, subset):
            index = subset.column_names.index(name)
            subset = subset.set_column(index, name, pc.dictionary_encode(subset.column(name)))
        return validate(subset.to_pandas(), suite, fg.validation_ingestion_policy)

    def _save_report(self, fg: WritableGroup, report: ValidationReport) -> None:
        self._catalog.insert_validation_report(
            fg.require_saved(), utc_now().isoformat(), report.success, report.ingestion_result,
            report.to_dict(),
        )

    def remove_rows(self, fg: WritableGroup, data: Any) -> int:
        with storage_boundary(fg.owner, "remove_rows"):
            return self._remove_rows(fg, data)

    def _remove_rows(self, fg: WritableGroup, data: Any) -> int:
        fg.require_saved()
        table = schema_rules.normalize_table(data, fg.owner)
        missing = [k for k in fg.upsert_key if k not in table.column_names]
        if missing:
            raise SchemaMismatchError(
                f"{fg.owner}: remove_rows needs the key columns {fg.upsert_key}; {missing} "
                "are missing from the data."
            )
        target = fg.delta_table.schema()
        keys = table.select(fg.upsert_key)
        keys = schema_rules.conform(keys, pa.schema([target.field(k) for k in fg.upsert_key]), fg.owner)
        schema_rules.check_keys(keys, fg.owner, fg.primary_key, fg.event_time, fg.upsert_key)
        delta = fg.delta_table
        with delta.write_lock():
            commit_id = delta.delete_matching(keys, fg.upsert_key)
        if fg.statistics_config.get("enabled", True):
            fg.compute_statistics(commit_id)
        return commit_id

    def append_features(self, fg: WritableGroup, features: Feature | list[Feature]) -> WritableGroup:

        fg.require_saved()
        new = [features] if isinstance(features, Feature) else list(features)
        if not new:
            raise InvalidArgumentError(f"{fg.owner}: append_features needs at least one Feature.")
        existing = {f.name for f in fg.features}
        fields = []
        for f in new:
            if not isinstance(f, Feature):
                raise InvalidArgumentError(
                    f"{fg.owner}: append_features takes Feature objects. Got {f!r} instead."
                )
            name = normalize_feature_name(f.name, owner=fg.owner)
            if name in existing:
                raise SchemaMismatchError(
                    f"{fg.owner} already has a feature '{name}'. Features can only be added."
                )
            fields.append(pa.field(name, _parse_type(f.type, fg.owner, name)))
            existing.add(name)
        delta = fg.delta_table
        with delta.write_lock():
            delta.add_columns(fields)
        fg.refresh_features({f.name.lower(): f.description for f in new})
        return fg


def _check_declared_keys(fg: WritableGroup, target: pa.Schema) -> None:
    columns = target.names
    for role, cols in (
        ("primary key", fg.primary_key),
        ("partition key", fg.partition_key),
        ("foreign key", fg.foreign_key),
        ("event_time", [fg.event_time] if fg.event_time else []),
    ):
        for c in cols:
            if c not in columns:

                raise SchemaMismatchError(
                    f"{fg.owner}: {role} column '{c}' is not in the data (columns: {columns})."
                    f"{did_you_mean(c, columns)}"
                )


_TYPE_NAMES = {
    "int": pa.int64(), "bigint": pa.int64(), "int64": pa.int64(), "integer": pa.int64(),
    "float": pa.float64(), "double": pa.float64(), "float64": pa.float64(),
    "string": pa.string(), "str": pa.string(), "varchar": pa.string(),
    "boolean": pa.bool_(), "bool": pa.bool_(),
    "timestamp": schema_rules.TIMESTAMP, "date": pa.date32(),
}


def _parse_type(name: str, owner: str, feature: str) -> pa.DataType:
    key = str(name).lower()
    if key in _TYPE_NAMES:
        return _TYPE_NAMES[key]
    if key.startswith("timestamp"):
        return schema_rules.TIMESTAMP
    raise SchemaMismatchError(
        f"{owner}: feature '{feature}' has unsupported type {name!r}; use one of "
        f"{sorted(_TYPE_NAMES)}."
    )
