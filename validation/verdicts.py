"""Verdicts on disparity figures, read from the acceptance gates: their one source of limits.

A scorecard's bias tables, its model card and its gates must never disagree, so no figure has
a limit of its own: a figure is judged only by the threshold gates that name it. A gate on
``<figure>[<column>]`` judges that column; an unqualified gate (``max_abs_dp_difference <=
0.25``) takes the worst column, so it judges every column with the same limit; a gate on
``<figure>_all_groups`` judges the figure over all groups instead of the judged slices.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

from fstrain.kernel.errors import ConfigError
from validation.fairness import split_figure
from validation.gates import parse_gate

_OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}


def fairness_target(gate_name: str) -> tuple[str, str | None, str] | None:
    """``(figure, column or None, basis)`` of a threshold gate on a disparity figure, else None
    (basis: ``"judged slices"`` or ``"all groups"``)."""
    try:
        gate = parse_gate(gate_name)
    except ConfigError:
        return None
    if gate.kind != "threshold" or gate.metric is None:
        return None
    return split_figure(gate.metric)


def gate_basis(gate_name: str) -> str | None:
    """What a gate's figure is computed over, for a fairness gate (else None): e.g.
    ``"judged slices of every helper column (worst column)"``."""
    target = fairness_target(gate_name)
    if target is None:
        return None
    _, column, basis = target
    return f"{basis} of {column}" if column else f"{basis} of every helper column (worst column)"


def failed_fairness_gates(gates: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The failed gate results that judge a disparity figure."""
    return [r for r in (gates or {}).get("results", [])
            if r.get("status") == "failed" and fairness_target(str(r.get("name"))) is not None]


def disparity_verdicts(disparity: Mapping[str, Any], gates: Mapping[str, Any] | None
                       ) -> list[dict[str, Any]]:
    """Every gate verdict on one helper column's figures.

    Returns:
        One entry per (gate, figure) that applies to the column: ``{"figure", "basis",
        "gate", "op", "limit", "value", "passed"}``; ``passed`` is None when an unqualified
        gate meets a figure this column does not define (the gate judged the other columns).
    """
    out = []
    column = disparity.get("column")
    for result in (gates or {}).get("results", []):
        target = fairness_target(str(result.get("name")))
        if target is None or target[1] not in (None, column):
            continue
        figure, qualified, basis = target
        values = disparity if basis == "judged slices" else (disparity.get("all_groups") or {})
        value = values.get(figure)
        op, limit = result.get("op"), result.get("threshold")
        if value is None:
            passed = False if qualified else None
        else:
            passed = bool(_OPS[op](value, limit)) if op in _OPS and limit is not None else None
        out.append({"figure": figure, "basis": basis, "gate": result["name"], "op": op,
                    "limit": limit, "value": value, "passed": passed})
    return out


def verdict_word(passed: bool | None) -> str:
    """``pass``, ``FAIL`` or ``not judged``."""
    return "not judged" if passed is None else ("pass" if passed else "FAIL")


def verdicts_by_figure(verdicts: Sequence[Mapping[str, Any]], figure: str, basis: str
                       ) -> list[Mapping[str, Any]]:
    """The verdicts on one figure over one basis."""
    return [v for v in verdicts if v["figure"] == figure and v["basis"] == basis]
