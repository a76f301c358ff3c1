"""The small frozen values the pipelines hand to each other (and print): nothing else passes."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class FeatureGroupRef:
    """A feature group version at one commit."""

    name: str
    version: int
    commit: int
    rows_inserted: int = 0
    rows_updated: int = 0
    unchanged: bool = False  # the data was already there: no commit was written

    def __str__(self) -> str:
        if self.unchanged:
            return f"{self.name} v{self.version} @ commit {self.commit} (unchanged, nothing written)"
        return (f"{self.name} v{self.version} @ commit {self.commit} "
                f"({self.rows_inserted} inserted, {self.rows_updated} updated)")


@dataclass(frozen=True)
class FeaturePipelineRef:
    """What one run of the feature pipeline wrote.

    ``empty``: the window held no rows of the root group, so nothing was written at all.
    """

    use_case: str
    feature_groups: tuple[FeatureGroupRef, ...]
    window: str = "[-inf, +inf)"
    empty: bool = False

    @property
    def wrote_nothing(self) -> bool:
        """Whether the run left every feature group as it was."""
        return self.empty or all(r.unchanged for r in self.feature_groups)

    def summary(self) -> str:
        """Human lines: one per group, or why nothing was written."""
        if self.empty:
            return (f"{self.use_case}: the window {self.window} holds no rows; nothing was "
                    "written.")
        lines = [f"feature group {r}" for r in self.feature_groups]
        if self.wrote_nothing:
            lines.append(f"{self.use_case}: the data of window {self.window} is already in the "
                         "store; nothing was written.")
        elif self.window != "[-inf, +inf)":
            lines.append(f"{self.use_case}: window {self.window}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {**asdict(self), "wrote_nothing": self.wrote_nothing}


@dataclass(frozen=True)
class TrainingDatasetRef:
    """A training-dataset version of a feature view."""

    feature_view: str
    feature_view_version: int
    version: int
    reused: bool = False  # the inputs were unchanged: the newest version, nothing created

    def __str__(self) -> str:
        text = (f"feature view {self.feature_view} v{self.feature_view_version} → training "
                f"dataset v{self.version}")
        if self.reused:
            text += " (reused: unchanged inputs, nothing created; --force makes a new version)"
        return text

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ModelRef:
    """A model version in the registry."""

    name: str
    version: int
    reused: bool = False  # already trained on the same training dataset with the same config

    def __str__(self) -> str:
        return f"{self.name}:{self.version}"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ValidationRef:
    """The outcome of validating one model version."""

    model: ModelRef
    status: str  # "passed", "failed", or either marked "(policy deviation)"
    key_metric: str
    key_value: float | None
    scorecard_html: str
    failing_gates: tuple[str, ...] = ()  # "gate (value v, required op t)" per failing gate
    run: int | None = None  # the validation run's number in the version's history
    deviations: tuple[str, ...] = ()  # each change against the gate policy that loosened it
    # the model against its task's baseline in one line, where the task has one that reads so
    # (generation: perplexity and exact match with the adapter and without it)
    versus_baseline: str | None = None

    @property
    def verdict(self) -> str:
        """``PASSED (key = v)`` or ``FAILED: <every failing gate with value and threshold>``,
        followed by the policy deviation when there was one."""
        deviation = ("" if not self.deviations
                     else " under a POLICY DEVIATION: " + "; ".join(self.deviations))
        if self.gates_passed:
            value = "n/a" if self.key_value is None else f"{self.key_value:.4f}"
            return f"PASSED ({self.key_metric} = {value}){deviation}"
        return ("FAILED: " + ("; ".join(self.failing_gates) or "no acceptance gate was evaluated")
                + deviation)

    @property
    def passed(self) -> bool:
        """True only for a plain pass: every gate passed under the model's gate policy."""
        return self.status == "passed"

    @property
    def gates_passed(self) -> bool:
        """True when the run's gates passed, with or without a policy deviation."""
        return self.status.split(" (", 1)[0] == "passed"

    @property
    def deviation(self) -> bool:
        """True when the run did not keep to the model's gate policy."""
        return self.status.endswith("(policy deviation)")

    def to_dict(self) -> dict:
        return asdict(self)
