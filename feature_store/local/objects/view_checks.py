"""The checks a local feature view passes at creation, and its prohibited tags at every read:
roles and features that fit its query, scalers only on numeric columns, no feature from a group
or feature carrying a prohibited tag (the rules themselves are :mod:`feature_store.core.view_rules`)."""

from __future__ import annotations

from typing import Any

from feature_store.core.view_rules import (
    carried_tags,
    check_columns,
    check_label_fill_values,
    check_not_prohibited,
)
from feature_store.local.query.query_plan import plan
from fstrain.kernel.errors import InvalidArgumentError


def validate_feature_view(fv: Any) -> None:
    """Refuse views whose roles or features do not fit their query (names the column)."""
    columns = [f.name for f in fv.features]
    check_columns(fv.owner, columns, fv.labels, fv.training_helper_columns,
                  fv.inference_helper_columns)
    check_label_fill_values(fv.owner, fv.label_fill_values, fv.labels)
    if fv.transformation_functions:
        from feature_store.core.transformations import validate_transformations

        validate_transformations(fv.transformation_functions, columns)
        _check_numeric_inputs(fv)
    if fv.prohibited_tags:
        check_prohibited(fv)


_NUMERIC_BUILTINS = ("min_max_scaler", "standard_scaler", "robust_scaler")


def _check_numeric_inputs(fv: Any) -> None:
    """Refuse a scaler bound to a column that is not numeric (it would fail at the first fit,
    or worse, scale codes of a string column)."""
    types = {f.name: str(f.type) for f in fv.features}
    for tf in fv.transformation_functions:
        name = getattr(tf, "name", None)
        if name not in _NUMERIC_BUILTINS:
            continue
        kind = types.get(tf.feature, "")
        if not (kind.startswith("int") or kind in ("double", "float", "bigint")
                or kind.startswith("uint") or kind.startswith("decimal")):
            raise InvalidArgumentError(
                f"{fv.owner}: {name}('{tf.feature}') needs a numeric column, but "
                f"'{tf.feature}' is {kind or 'unknown'}. Use label_encoder or one_hot_encoder "
                "for categories, or cast the column in the feature group."
            )


def check_prohibited(fv: Any) -> None:
    """Refuse a view one of whose features comes from a group or feature with a prohibited tag."""
    exempt = set(fv.training_helper_columns) | set(fv.inference_helper_columns)
    features = [f for f in fv.features if f.name not in exempt]
    if not features:
        return
    sources = _source_columns(fv)
    for feature in features:
        fg = feature.feature_group
        source = sources.get(feature.name, feature.name)
        check_not_prohibited(
            fv.owner, feature.name, fg.name, source, carried_tags(fg.get_tags()),
            carried_tags(fg.get_all_feature_tags().get(source, {})), fv.prohibited_tags,
        )


def _source_columns(fv: Any) -> dict[str, str]:
    """Output column name → the column of its feature group it comes from (one plan)."""
    return {column.name: column.source for column in plan(fv.query.spec()).columns}
