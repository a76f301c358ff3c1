"""What the server derives from a posted query: the joins' keys and the view's features.

A query arrives as the SDK serializes ``hsfs.constructor.query.Query``: ``leftFeatureGroup``
(id, name, version), ``leftFeatures`` and ``joins`` (each ``{query, on, leftOn, rightOn,
type, prefix}``). The server resolves the groups from its state, applies the join-key rule
(:func:`sdk_server.rules.join_keys`) and lists the view's features in query order, prefixed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sdk_server.rules import join_keys
from sdk_server.state import State


@dataclass
class Join:
    """One resolved join: the right query, its keys, type and prefix."""

    query: ResolvedQuery
    left_on: list[str]
    right_on: list[str]
    join_type: str
    prefix: str


@dataclass
class ResolvedQuery:
    """A query with its groups looked up and its joins' keys decided by the server rule."""

    group: dict[str, Any]
    features: list[str]
    joins: list[Join]
    filter: dict[str, Any] | None = None  #: the query's row filter (``Logic`` JSON)

    def groups(self) -> list[dict[str, Any]]:
        out = [self.group]
        for join in self.joins:
            out += join.query.groups()
        return out


def _name(feature: Any) -> str:
    return feature["name"] if isinstance(feature, dict) else str(feature)


def resolve(state: State, query: dict[str, Any]) -> ResolvedQuery:
    """Resolve a posted query (raises the server's HttpError on a bad join)."""
    left = query.get("leftFeatureGroup") or query.get("left_feature_group") or {}
    group = state.group(left["id"]).body
    features = [_name(f) for f in query.get("leftFeatures") or query.get("left_features") or []]
    joins = []
    for join in query.get("joins") or []:
        right = resolve(state, join["query"])
        left_on, right_on = join_keys([group], right.group, join)
        joins.append(Join(right, left_on, right_on,
                          str(join.get("type") or join.get("joinType") or "LEFT").upper(),
                          join.get("prefix") or ""))
    return ResolvedQuery(group, features, joins, query.get("filter") or None)


def view_features(resolved: ResolvedQuery, labels: list[str], training_helpers: list[str],
                  inference_helpers: list[str]) -> list[dict[str, Any]]:
    """The view's features (``TrainingDatasetFeature`` bodies) in query order."""
    out: list[dict[str, Any]] = []

    def add(query: ResolvedQuery, prefix: str) -> None:
        by_name = {f["name"]: f for f in query.group["features"]}
        for name in query.features:
            column = f"{prefix}{name}"
            out.append({
                "name": column, "type": by_name[name]["type"], "index": len(out),
                "featuregroup": query.group, "featureGroupFeatureName": name,
                "label": column in labels, "trainingHelperColumn": column in training_helpers,
                "inferenceHelperColumn": column in inference_helpers,
            })
        for join in query.joins:
            add(join.query, prefix + join.prefix)

    add(resolved, "")
    return out


def serving_keys(resolved: ResolvedQuery) -> list[dict[str, Any]]:
    """Every group's primary keys with its join index (``servingKeys`` of the view DTO); a
    key a join fills from the left side is not required from the caller."""
    out: list[dict[str, Any]] = []

    def add(query: ResolvedQuery, prefix: str, joined_on: list[str]) -> None:
        index = len({k["joinIndex"] for k in out})
        for feature in query.group["features"]:
            if feature.get("primary"):
                name = feature["name"]
                out.append({"featureName": name, "joinIndex": index,
                            "featureGroup": query.group, "required": name not in joined_on,
                            "prefix": prefix, "joinOn": None, "ignorePrefix": False})
        for join in query.joins:
            add(join.query, prefix + join.prefix, join.right_on)

    add(resolved, "", [])
    return out
