"""Gate policies: the gates a model version is judged by, and whether a run kept to them.

A model's **policy** is either

* its use case's defaults: the feature view's ``gates`` (``feature_views/<use case>``) plus
  fstrain's standard gates for the task (:data:`validation.evaluate.STANDARD_BINARY_GATES`), or
* the newest **policy file** stored for it in the registry (``fstrain registry policy set MODEL
  --file gates.yaml``), signed by an ``owner`` where the store keeps a trust list.

A policy file is YAML::

    gates:                      # required: the model's acceptance gates (validation.gates grammar)
      - roc_auc >= 0.85
      - max_abs_dp_difference <= 0.25
    standard_gates: true        # optional: also fstrain's standard gates for the task (default)
    threshold_strategy: f1      # optional: f1 (default), youden or a fixed number
    description: why these gates   # optional, free text

A run may only **tighten** its policy: ``--gate`` adds a gate, or replaces a policy gate on the
same metric and bound (``roc_auc >= 0.9`` over ``roc_auc >= 0.85``) with one at least as strict.
Anything else is a **policy deviation**, recorded in the run with each change (before → after):
``--replace-gates``, a looser threshold, a removed gate, another threshold strategy. Strictness
is decided on the parsed gates (:func:`implies`), never by comparing strings. A deviating run's
status is never a plain ``passed`` (:mod:`model_registry.statuses`).

Every run records the policy it was judged under by its sha256 (:meth:`PolicyDocument.sha256`,
the canonical JSON of what the policy decides) and its source (``use-case default`` or
``policy file vN``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from fstrain.kernel.errors import ConfigError, IntegrityError, UnauthorizedError, did_you_mean
from fstrain.kernel.timeutil import utc_now_iso
from model_registry.history import current_user
from model_registry.naming import check_model_name
from model_registry.statuses import run_status
from validation.evaluate import STANDARD_BINARY_GATES, STANDARD_GATES, GateSpec
from validation.gates import Gate, parse_gate, parse_gates

USE_CASE_DEFAULT = "use-case default"
FSTRAIN_STANDARD = "fstrain standard"
POLICY_FILE = "policy file"
EXTRA_SOURCES = ("command line", "config file")
DEFAULT_STRATEGY = "f1"
_KEYS = ("gates", "standard_gates", "threshold_strategy", "description")
#: The metric names that are the same figure (``BiasReport.figures``: the worst demographic
#: parity difference is also published as ``max_abs_dp_difference``).
_ALIASES = {"max_abs_dp_difference": "demographic_parity_difference"}

#: Kinds of :class:`GateChange`; the last four make a run a policy deviation.
CHANGE_KINDS = ("added", "tightened", "loosened", "removed", "replaced defaults",
                "threshold strategy")
DEVIATING = frozenset(CHANGE_KINDS[2:])


# ------------------------------------------------------------------------- the policy itself


def normalize_strategy(value: Any, *, what: str = "threshold_strategy") -> str | float:
    """``"f1"``, ``"youden"`` or a finite number (numbers given as text are read as numbers).

    Raises:
        ConfigError: anything else, naming ``what`` and the value.
    """
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be 'f1', 'youden' or a number. Got {value!r} instead.")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str) and value.strip().lower() in ("f1", "youden"):
        return value.strip().lower()
    else:
        try:
            number = float(str(value).strip())
        except ValueError:
            raise ConfigError(f"{what} must be 'f1', 'youden' or a number. Got {value!r} "
                              "instead.") from None
    if not math.isfinite(number):
        raise ConfigError(f"{what}: a fixed threshold must be finite. Got {value!r} instead.")
    return number


@dataclass(frozen=True)
class PolicyDocument:
    """What a policy decides: its gates, whether fstrain's standard gates apply too, and how
    the decision threshold is chosen. ``description`` is the owner's note (not hashed)."""

    gates: tuple[str, ...]
    standard_gates: bool = True
    threshold_strategy: str | float = DEFAULT_STRATEGY
    description: str | None = None

    def canonical(self) -> dict[str, Any]:
        """The hashed content: each gate in its canonical form (:func:`canonical_gate`)."""
        return {"gates": [canonical_gate(g) for g in self.gates],
                "standard_gates": self.standard_gates,
                "threshold_strategy": self.threshold_strategy}

    def sha256(self) -> str:
        """Hex sha256 of :meth:`canonical` as sorted, compact JSON."""
        text = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def canonical_gate(gate: str | Gate) -> str:
    """One spelling per gate: ``roc_auc>=0.90`` → ``roc_auc >= 0.9``,
    ``better_than_previous( roc_auc )`` → ``better_than_previous(roc_auc)``."""
    g = gate if isinstance(gate, Gate) else parse_gate(gate)
    if g.kind == "threshold":
        return f"{g.metric} {g.op} {g.threshold!r}"
    if g.kind == "explanation":
        return g.name
    args = [a for a in (g.metric, f"tolerance={g.tolerance!r}" if g.tolerance else None) if a]
    word = "better_than_baseline" if g.kind == "baseline" else "better_than_previous"
    return word + (f"({', '.join(args)})" if args else "")


def parse_policy_document(text: str | bytes, *, what: str = "policy file") -> PolicyDocument:
    """Read a policy file's YAML strictly: a mapping with ``gates`` (a non-empty list of gate
    strings, every metric known), optional ``standard_gates``, ``threshold_strategy`` and
    ``description``.

    Raises:
        ConfigError: malformed YAML, an unknown key, an unknown metric or a bad value, naming
            ``what`` and the offending key or gate.
    """
    try:
        data = yaml.safe_load(text.decode("utf-8") if isinstance(text, bytes) else text)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{what} is not valid YAML: {exc}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what} must be a YAML mapping with a 'gates' list. Got "
                          f"{type(data).__name__} instead.")
    for key in data:
        if key not in _KEYS:
            raise ConfigError(f"{what}: unknown key {key!r}.{did_you_mean(str(key), _KEYS)} "
                              f"Known keys: {', '.join(_KEYS)}.")
    gates = data.get("gates")
    if not isinstance(gates, list) or not gates or not all(isinstance(g, str) for g in gates):
        raise ConfigError(f"{what}: 'gates' must be a non-empty list of gate strings, e.g. "
                          f"['roc_auc >= 0.85']. Got {gates!r} instead.")
    try:
        parsed = parse_gates(gates)
    except ConfigError as exc:
        raise ConfigError(f"{what}: {exc}") from None
    standard = data.get("standard_gates", True)
    if not isinstance(standard, bool):
        raise ConfigError(f"{what}: 'standard_gates' must be true or false. Got {standard!r}.")
    description = data.get("description")
    if description is not None and not isinstance(description, str):
        raise ConfigError(f"{what}: 'description' must be text. Got {description!r}.")
    strategy = normalize_strategy(data.get("threshold_strategy", DEFAULT_STRATEGY),
                                  what=f"{what}: threshold_strategy")
    return PolicyDocument(tuple(canonical_gate(g) for g in parsed), standard, strategy,
                          description)


@dataclass(frozen=True)
class GatePolicy:
    """The policy a model is judged under and where it comes from.

    ``source`` is :data:`USE_CASE_DEFAULT` or :data:`POLICY_FILE` (then ``version`` is the
    file's version in the registry, ``file_sha256`` the stored file's hash and ``signed_by``
    who signed it — ``None`` for an unsigned file on a store without a trust list).
    """

    document: PolicyDocument
    source: str = USE_CASE_DEFAULT
    version: int | None = None
    file_sha256: str | None = None
    signed_by: Mapping[str, Any] | None = None

    @property
    def label(self) -> str:
        """``use-case default`` or ``policy file v3``."""
        return self.source if self.version is None else f"{self.source} v{self.version}"

    @property
    def sha256(self) -> str:
        """The policy's hash (:meth:`PolicyDocument.sha256`)."""
        return self.document.sha256()

    def gate_specs(self, task: str) -> list[GateSpec]:
        """The policy's gates for a model of ``task`` (``binary``, ``multiclass``,
        ``regression`` or ``generation``), each with its source."""
        listed = USE_CASE_DEFAULT if self.source == USE_CASE_DEFAULT else self.label
        specs = [GateSpec(g, listed) for g in self.document.gates]
        if self.document.standard_gates:
            specs += [GateSpec(g, FSTRAIN_STANDARD) for g in standard_gates(task)]
        return _dedupe(specs)

    def summary(self) -> str:
        """``policy file v2, sha256 0a1b2c3d4e5f, signed by ann (owner, SHA256:…)`` or
        ``…, unsigned``."""
        signer = self.signed_by
        signed = (f"signed by {signer.get('name')} ({signer.get('role')}, "
                  f"{signer.get('fingerprint')})" if signer else "unsigned")
        return f"{self.label}, sha256 {self.sha256[:12]}, {signed}"

    def to_record(self) -> dict[str, Any]:
        """JSON for a run's record and ``policy show``."""
        return {"source": self.source, "label": self.label, "version": self.version,
                "sha256": self.sha256, "file_sha256": self.file_sha256,
                "signed_by": None if self.signed_by is None else dict(self.signed_by),
                **self.document.canonical(), "description": self.document.description}


def standard_gates(task: str) -> tuple[str, ...]:
    """fstrain's standard gates for ``task`` (a text generator has no SHAP gate)."""
    return (STANDARD_BINARY_GATES if task == "binary" else ()
            if task == "generation" else STANDARD_GATES)


def use_case_policy(gates: Sequence[str]) -> GatePolicy:
    """The default policy of a use case with these ``gates`` (plus the standard gates)."""
    return GatePolicy(PolicyDocument(tuple(canonical_gate(g) for g in gates)))


# ------------------------------------------------------------------------- comparing gates


def _metric(name: str | None) -> str | None:
    """A metric key with its aliases resolved (``max_abs_dp_difference[sex]`` →
    ``demographic_parity_difference[sex]``)."""
    if name is None:
        return None
    base, bracket, rest = name.partition("[")
    return _ALIASES.get(base, base) + bracket + rest


def _side(op: str | None) -> str:
    return "lower" if op in (">=", ">") else "upper"


def rule_key(gate: Gate) -> tuple[Any, ...]:
    """What a gate constrains: its kind, metric (aliases resolved) and, for a threshold, which
    bound (``lower`` for ``>=``/``>``, ``upper`` for ``<=``/``<``). Two gates with one key are
    the same rule at possibly different strictness."""
    if gate.kind == "threshold":
        return ("threshold", _metric(gate.metric), _side(gate.op))
    return (gate.kind, _metric(gate.metric))


def implies(a: Gate, b: Gate) -> bool:
    """True when every model that passes gate ``a`` also passes gate ``b``: ``a`` is at least as
    strict as ``b`` on the same rule (:func:`rule_key`). Gates on different rules never imply
    each other (a per-column bias gate says nothing about another column)."""
    if rule_key(a) != rule_key(b):
        return False
    if a.kind == "previous":
        return a.tolerance <= b.tolerance
    if a.kind != "threshold":
        return True  # explanation_available, better_than_baseline(m): no strictness to vary
    assert a.threshold is not None and b.threshold is not None
    if a.threshold == b.threshold:
        return a.op == b.op or a.op in (">", "<")  # a strict bound implies the inclusive one
    return a.threshold > b.threshold if _side(a.op) == "lower" else a.threshold < b.threshold


@dataclass(frozen=True)
class GateChange:
    """One difference between a policy and a run: ``kind`` is one of :data:`CHANGE_KINDS`;
    ``before`` is the policy's gate (or strategy), ``after`` the run's (``None`` for a gate
    that was removed or added)."""

    kind: str
    before: str | None
    after: str | None

    @property
    def deviates(self) -> bool:
        """True for a loosening, a removal, replaced defaults or another threshold strategy."""
        return self.kind in DEVIATING

    def line(self) -> str:
        """``roc_auc >= 0.85 → roc_auc >= 0.5 (loosened)``, ``… (removed)``, ``+ gate (added)``."""
        if self.kind == "added":
            return f"{self.after} (added)"
        if self.kind == "removed":
            return f"{self.before} (removed)"
        if self.kind == "replaced defaults":
            return "--replace-gates: the policy's gates were replaced"
        return f"{self.before} → {self.after} ({self.kind})"

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"kind": self.kind, "before": self.before, "after": self.after,
                "deviates": self.deviates, "line": self.line()}


def compare_gates(policy: Sequence[str | Gate], run: Sequence[str | Gate]) -> list[GateChange]:
    """Classify a run's gates against its policy's.

    Each policy gate is kept when some run gate :func:`implies` it (``tightened`` when none is
    the same gate), ``loosened`` when the run has only looser gates on its rule, ``removed``
    when the run has none; each run gate that neither keeps nor loosens a policy gate is
    ``added``. Unchanged gates produce no entry.
    """
    want = [g if isinstance(g, Gate) else parse_gate(g) for g in policy]
    have = [g if isinstance(g, Gate) else parse_gate(g) for g in run]
    used: set[int] = set()
    changes: list[GateChange] = []
    for p in want:
        same = [i for i, r in enumerate(have) if implies(r, p) and implies(p, r)]
        covering = [i for i, r in enumerate(have) if implies(r, p)]
        related = [i for i, r in enumerate(have) if rule_key(r) == rule_key(p)]
        used.update(related)
        if same:
            continue
        if covering:
            changes.append(GateChange("tightened", p.name, have[covering[0]].name))
        elif related:
            changes.append(GateChange("loosened", p.name, have[related[0]].name))
        else:
            changes.append(GateChange("removed", p.name, None))
    changes += [GateChange("added", None, r.name) for i, r in enumerate(have) if i not in used]
    return changes


def merge_gates(policy: Sequence[GateSpec], extra: Sequence[GateSpec]) -> list[GateSpec]:
    """The gates of a run that keeps its policy: each policy gate, unless an extra gate
    constrains the same rule (then the extra ones take its place), followed by the other
    extra gates. A gate listed twice is kept once."""
    extra_keys = [(rule_key(parse_gate(e.gate)), e) for e in extra]
    out: list[GateSpec] = []
    placed: set[int] = set()
    for spec in policy:
        key = rule_key(parse_gate(spec.gate))
        matches = [i for i, (k, _) in enumerate(extra_keys) if k == key]
        if not matches:
            out.append(spec)
        for i in matches:
            if i not in placed:
                out.append(extra_keys[i][1])
                placed.add(i)
    out += [e for i, (_, e) in enumerate(extra_keys) if i not in placed]
    return _dedupe(out)


def _dedupe(specs: Sequence[GateSpec]) -> list[GateSpec]:
    seen: dict[str, GateSpec] = {}
    for spec in specs:
        seen.setdefault(parse_gate(spec.gate).name, spec)
    return list(seen.values())


# ------------------------------------------------------------------------- one run's plan


def check_extra_gates(extra: Sequence[str] | None, *, replace: bool) -> list[Gate]:
    """Parse a run's extra gates before any work: an unknown metric, a malformed gate or a gate
    listed twice raises :class:`ConfigError`; ``replace`` without gates too."""
    if replace and not extra:
        raise ConfigError("replace_gates needs at least one gate to replace the defaults with.")
    return parse_gates(list(extra or []))


@dataclass(frozen=True)
class GatePlan:
    """What one validation run is judged by: the policy, the gates it evaluates (with their
    sources), the threshold strategy, and every change against the policy."""

    policy: GatePolicy
    task: str
    gates: tuple[GateSpec, ...]
    threshold_strategy: str | float
    changes: tuple[GateChange, ...] = field(default_factory=tuple)
    replaced: bool = False

    @property
    def deviations(self) -> tuple[GateChange, ...]:
        """The changes that make the run a policy deviation."""
        return tuple(c for c in self.changes if c.deviates)

    @property
    def deviation(self) -> bool:
        """True when the run did not keep to its policy."""
        return bool(self.deviations)

    def status(self, verdict: str) -> str:
        """The run's status for gate verdict ``passed``/``failed``."""
        return run_status(verdict, deviation=self.deviation)

    def to_record(self) -> dict[str, Any]:
        """The ``policy`` block of a run's record and scorecard: the policy (source, version,
        sha256, signer, its gates for this task), whether the run deviated and each change."""
        return {**self.policy.to_record(),
                "policy_gates": [s.gate for s in self.policy.gate_specs(self.task)],
                "run_threshold_strategy": self.threshold_strategy,
                "replaced": self.replaced, "deviation": self.deviation,
                "changes": [c.to_dict() for c in self.changes],
                "deviations": [c.line() for c in self.deviations],
                "summary": self.policy.summary(), "warning": self.warning()}

    def warning(self) -> str | None:
        """``POLICY DEVIATION from the use-case default (sha256 …): <each change>``, or None."""
        if not self.deviation:
            return None
        return (f"POLICY DEVIATION from the {self.policy.label} (sha256 "
                f"{self.policy.sha256[:12]}): " + "; ".join(c.line() for c in self.deviations))


def plan_gates(policy: GatePolicy, extra: Sequence[str] | None, *, task: str,
               source: str = "command line", replace: bool = False,
               threshold_strategy: Any = None) -> GatePlan:
    """The gates of one run under ``policy`` for a model of ``task``.

    Args:
        policy: the model's policy (:func:`use_case_policy` or a stored policy file).
        extra: gates given for this run (``--gate`` or a config file), already checked by
            :func:`check_extra_gates` or checked here.
        task: ``binary``, ``multiclass``, ``regression`` or ``generation``.
        source: where ``extra`` came from (``command line`` or ``config file``).
        replace: ``--replace-gates``: evaluate only ``extra`` (always a deviation).
        threshold_strategy: the run's strategy; ``None`` keeps the policy's.

    Returns:
        A :class:`GatePlan` whose ``changes`` say, gate by gate, how the run differs.
    """
    if source not in EXTRA_SOURCES:
        raise ConfigError(f"gate source must be one of {', '.join(EXTRA_SOURCES)}. Got "
                          f"{source!r} instead.")
    check_extra_gates(extra, replace=replace)
    base = policy.gate_specs(task)
    extras = [GateSpec(g, source) for g in extra or []]
    gates = _dedupe(extras) if replace else merge_gates(base, extras)
    changes = compare_gates([s.gate for s in base], [s.gate for s in gates])
    if replace:
        changes.insert(0, GateChange("replaced defaults", None, None))
    wanted = policy.document.threshold_strategy
    strategy = wanted if threshold_strategy is None else normalize_strategy(threshold_strategy)
    if strategy != wanted:
        changes.append(GateChange("threshold strategy", str(wanted), str(strategy)))
    return GatePlan(policy, task, tuple(gates), strategy, tuple(changes), replace)


# ------------------------------------------------------------------------- stored policies


def current_policy(registry: Any, name: str, use_case_gates: Sequence[str], *,
                   trust: Any = None) -> GatePolicy:
    """The policy model ``name`` is judged under: the newest policy file stored for it in
    ``registry`` (checked: hashes and chain; with the store's ``trust`` list, each seal — an
    owner's signature, or unsigned from before the trust list began), else the use case's
    defaults (``use_case_gates`` plus the standard gates).

    Raises:
        IntegrityError: the stored policy was edited, removed or reordered
            (``VerificationError`` when a seal does not verify).
    """
    versions = registry.policies.versions(name, trust)
    if not versions:
        return use_case_policy(use_case_gates)
    record, document = versions[-1]
    where = f"policy of model '{name}' version {record['version']}"
    parsed = parse_policy_document(document, what=where)
    if parsed.sha256() != record.get("policy_sha256"):
        raise IntegrityError(f"{where}: the policy's hash does not match its record.")
    return GatePolicy(parsed, POLICY_FILE, int(record["version"]), record.get("file_sha256"),
                      record.get("signer"))


def set_policy(registry: Any, name: str, document: bytes, *, signer: Any = None,
               trust: Any = None) -> tuple[dict[str, Any], GatePolicy]:
    """Check ``document`` (a policy file's bytes, :func:`parse_policy_document`) and store it
    as the next version of ``name``'s policy, sealed by ``signer`` (an owner's
    :class:`~model_registry.audit.identity.Signer`). Without a trust list (``trust`` None) it
    may be unsigned, and says so; with one, an owner's signer is required. Returns the stored
    record and the policy now in force.

    Raises:
        ConfigError: the file is not a valid policy (nothing is stored).
        UnauthorizedError: a trust list exists and ``signer`` is missing or not an owner.
    """
    check_model_name(name)
    parsed = parse_policy_document(document, what=f"policy file for model '{name}'")
    if trust is not None and signer is None:
        raise UnauthorizedError(
            f"policy of model '{name}': this store keeps a trust list, so an owner must sign "
            "the policy: set --key or FSTRAIN_KEY to an owner's private key.")
    record = registry.policies.append(name, bytes(document), policy_sha256=parsed.sha256(),
                                      created=utc_now_iso(), user=current_user(),
                                      signer=signer, trust=trust)
    return record, GatePolicy(parsed, POLICY_FILE, int(record["version"]),
                              record.get("file_sha256"), record.get("signer"))
