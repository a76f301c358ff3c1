"""The feature-view rules both backends enforce, as pure functions over names and tags.

A view's labels and helper columns must be columns of its query, no column may play two roles,
fill values are only for labels, and no *feature* may come from a group or feature carrying one
of the view's prohibited tags (helper columns may: they never reach the model). The local store
and the Hopsworks adapter gather the names and tags their own way and call these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fstrain.kernel.errors import InvalidArgumentError, did_you_mean

__all__ = ["carried_tags", "check_columns", "check_label_fill_values", "check_not_prohibited"]


def check_columns(owner: str, columns: list[str], labels: list[str],
                  training_helpers: list[str], inference_helpers: list[str]) -> None:
    """Every label and helper is a query column, and no column has two roles."""
    roles = {"label": labels, "training_helper_columns": training_helpers,
             "inference_helper_columns": inference_helpers}
    for role, names in roles.items():
        for col in names:
            if col not in columns:
                raise InvalidArgumentError(
                    f"{owner}: {role} '{col}' is not a column of the query (columns: "
                    f"{columns}).{did_you_mean(col, columns)}"
                )
    kinds = {"label": set(labels), "training helper": set(training_helpers),
             "inference helper": set(inference_helpers)}
    names = list(kinds)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            both = sorted(kinds[a] & kinds[b])
            if both:
                raise InvalidArgumentError(
                    f"{owner}: column '{both[0]}' cannot be both a {a} and a {b} column."
                )


def check_label_fill_values(owner: str, fill_values: Iterable[str], labels: list[str]) -> None:
    """Fill values (for positives-only label groups) may only name labels."""
    for col in fill_values:
        if col not in labels:
            raise InvalidArgumentError(
                f"{owner}: label_fill_values names '{col}', which is not a label "
                f"(labels: {labels}).{did_you_mean(col, labels)}"
            )


def carried_tags(tags: Mapping[str, Any], ignore: Iterable[str] = ()) -> set[str]:
    """Tags a group or feature carries: present with a value other than ``False``/``None``."""
    skip = set(ignore)
    return {name for name, value in tags.items()
            if name not in skip and value is not False and value is not None}


def check_not_prohibited(owner: str, feature: str, group: str, source: str,
                         group_tags: set[str], feature_tags: set[str],
                         prohibited: Iterable[str]) -> None:
    """Refuse ``feature`` (column ``source`` of ``group``) if it carries a prohibited tag."""
    hit = sorted((group_tags | feature_tags) & set(prohibited))
    if not hit:
        return
    where = f"feature group '{group}'" if hit[0] in group_tags else f"feature '{group}.{source}'"
    raise InvalidArgumentError(
        f"{owner}: feature '{feature}' comes from {where} tagged '{hit[0]}', which this view "
        "prohibits. Remove it from the query or make it a training/inference helper column "
        "(helpers never reach the model)."
    )
