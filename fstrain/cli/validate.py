"""``fstrain validate``: the model-validation pipeline of a registered model version."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from fstrain.cli.errors import EXIT_POLICY_DEVIATION, EXIT_VALIDATION_FAILED
from fstrain.cli.invocation import emit as _emit
from fstrain.cli.invocation import guard as _guard
from fstrain.cli.invocation import project as _project
from fstrain.cli.invocation import set_options as _set
from fstrain.cli.invocation import step as _step
from fstrain.cli.invocation import require_key_file as _require_key_file
from fstrain.cli.options import BackendOpt, DebugOpt, JsonOpt, KeyOpt, RootOpt
from fstrain.kernel.errors import ConfigError
from pipelines import model_validation


def _model_ref(ref: str) -> tuple[str, int | None]:
    """``NAME``, ``NAME:latest`` or ``NAME:VERSION`` (a positive integer), else a ConfigError."""
    name, sep, version = ref.partition(":")
    if not sep or version == "latest":
        return name, None
    if not version.isdigit() or int(version) < 1:
        raise ConfigError(f"model reference {ref!r}: the version after ':' must be a positive "
                          f"integer, e.g. '{name}:1'. Got {version!r} instead.")
    return name, int(version)


def validate(
    model_ref: Annotated[str, typer.Argument(metavar="NAME[:VERSION]", help="Model (latest version if none).")],
    gate: Annotated[list[str] | None, typer.Option(help="Extra acceptance gate, e.g. 'roc_auc >= 0.9' (repeatable): adds a gate to the model's gate policy, or replaces the policy's gate on the same metric and bound; a looser one is a policy deviation.")] = None,
    replace_gates: Annotated[bool, typer.Option("--replace-gates", help="Use only the --gate gates instead of the gate policy's: always a policy deviation (recorded, exit 4 when it passes, approval needs --override).")] = False,
    threshold_strategy: Annotated[str | None, typer.Option(help="f1, youden or a fixed number (default: the gate policy's, f1); another than the policy's is a policy deviation.")] = None,
    key: KeyOpt = None,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """Model-validation pipeline: scorecard + model card; exit 0 passed, 3 failed, 4 passed
    under a policy deviation."""
    _set(root, backend, as_json, debug)

    def body() -> Any:
        _require_key_file(key)
        name, version = _model_ref(model_ref)
        config = model_validation.ModelValidationConfig(
            model_name=name, version=version, gates=gate,
            gate_source="command line", replace_gates=replace_gates,
            threshold_strategy=threshold_strategy,
        )
        with _step(f"model-validation pipeline: {model_ref}"):
            ref = model_validation.run(_project(), config, key=key)
        _emit({**ref.to_dict(), "verdict": ref.verdict},
              f"model {ref.model}: {ref.verdict}\n"
              + (f"{ref.versus_baseline}\n" if ref.versus_baseline else "")
              + f"scorecard (run {ref.run}): {ref.scorecard_html}")
        return ref

    ref = _guard(body)
    if ref.deviation and ref.gates_passed:
        raise typer.Exit(EXIT_POLICY_DEVIATION)
    if not ref.passed:
        raise typer.Exit(EXIT_VALIDATION_FAILED)


__all__ = ['validate']
