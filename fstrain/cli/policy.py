"""``fstrain registry policy``: the gate policy a model is judged under (``policy_app``).

``set MODEL --file gates.yaml`` stores an owner's policy file as the model's next policy
version (:mod:`validation.policy`): signed with the owner's key (``--key`` or
``$FSTRAIN_KEY``, :func:`model_registry.audit.authorize.resolve_signer`) once the store keeps
a trust list, and refused without one; stored *unsigned*, and saying so, in a store without a
trust list. ``show MODEL`` prints the policy in
force (the newest policy file, or the use case's defaults) and every stored version.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from feature_views import USE_CASES, get_use_case
from fstrain.cli.errors import guarded
from fstrain.cli.options import JsonOpt, RootOpt, existing_store
from fstrain.cli.registry_open import open_registry
from fstrain.kernel.errors import ConfigError
from fstrain.project import Project
from model_registry.audit.authorize import resolve_signer
from model_registry.naming import check_model_name

policy_app = typer.Typer(
    help="The gate policy a model is judged under: the use case's defaults, or an owner's "
    "policy file (set, show).",
    no_args_is_help=True,
)

KeyOpt = Annotated[Path | None, typer.Option(
    "--key", help="The owner's private key (OpenSSH Ed25519; default $FSTRAIN_KEY).")]


def _registry(root: Path | None) -> Any:
    """The local registry of the store under ``root`` (a registry is created in an existing
    store when missing: a policy may be set before the model's first version is trained; a
    root that holds no store is refused)."""
    return Project(existing_store(root), create=False).get_model_registry()


def _use_case_gates(registry: Any, name: str) -> tuple[str | None, list[str]]:
    """The use case a model belongs to (by the feature view of its newest version, else by
    its default model name) and that use case's gates."""
    models = [] if registry is None else registry.get_models(name)
    view = models[-1].feature_view_name if models else None
    for use_case_name in USE_CASES:
        use_case = get_use_case(use_case_name)
        if (view is not None and use_case.feature_view_name == view) or (
                view is None and use_case.registry_model_name == name):
            return use_case.name, list(use_case.gates)
    return None, []


@policy_app.command("set")
def set_command(
    model: Annotated[str, typer.Argument(metavar="MODEL", help="Model name.")],
    file: Annotated[Path, typer.Option("--file", help="The policy file (YAML: gates, "
                                       "standard_gates, threshold_strategy, description).")],
    key: KeyOpt = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Store a policy file as MODEL's next gate-policy version (owner-signed once the store
    keeps a trust list; unsigned, and saying so, without one)."""
    def body() -> tuple[dict[str, Any], Any]:
        from validation.policy import set_policy

        try:
            document = file.read_bytes()
        except OSError as exc:
            raise ConfigError(f"policy file {file} cannot be read ({exc.strerror or exc}).") \
                from None

        registry = _registry(root)
        trust, signer = resolve_signer(registry.trust_store, "policy",
                                       label=f"policy of model '{model}'", key=key)
        return set_policy(registry, model, document, signer=signer, trust=trust)

    record, policy = guarded(body)
    if as_json:
        typer.echo(json.dumps({"record": record, "policy": policy.to_record()}, indent=2))
        return
    signed = ("UNSIGNED (this store has no trust list)" if record.get("signature") is None
              else f"signed by {policy.signed_by['name']} ({policy.signed_by['role']}, "
                   f"{policy.signed_by['fingerprint']})")
    lines = [f"policy of {model} v{record['version']} stored: sha256 {policy.sha256[:12]}, "
             f"{signed}", *(f"  gate: {g}" for g in policy.document.gates),
             f"  standard gates: {'yes' if policy.document.standard_gates else 'no'}; "
             f"threshold strategy: {policy.document.threshold_strategy}"]
    typer.echo("\n".join(lines))


@policy_app.command("show")
def show_command(
    model: Annotated[str, typer.Argument(metavar="MODEL", help="Model name.")],
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the gate policy MODEL is judged under and every stored policy version."""
    def body() -> dict[str, Any]:
        from validation.policy import current_policy, standard_gates, use_case_policy

        check_model_name(model)
        registry = open_registry(root)  # showing creates nothing, not even the registry
        use_case, gates = _use_case_gates(registry, model)
        if registry is None:  # a store without models: the use case's defaults
            policy, versions = use_case_policy(gates), []
        else:
            trust = None if registry.trust_store is None else registry.trust_store.load()
            policy = current_policy(registry, model, gates, trust=trust)
            versions = [{k: r.get(k) for k in ("version", "created", "user", "policy_sha256",
                                               "signer")}
                        for r, _ in registry.policies.versions(model, trust)]
        return {"model": model, "use_case": use_case, "policy": policy.to_record(),
                "summary": policy.summary(), "versions": versions,
                "standard_gates": {t: list(standard_gates(t))
                                   for t in ("binary", "multiclass", "regression")}}

    shown = guarded(body)
    if as_json:
        typer.echo(json.dumps(shown, indent=2))
        return
    policy = shown["policy"]
    lines = [f"policy of {model}: {shown['summary']}"
             + ("" if shown["use_case"] is None else f" (use case {shown['use_case']})"),
             *(f"  gate: {g}" for g in policy["gates"])]
    if policy["standard_gates"]:
        lines.append("  plus fstrain's standard gates: " + "; ".join(
            f"{task}: {', '.join(gates)}" for task, gates in shown["standard_gates"].items()))
    lines.append(f"  threshold strategy: {policy['threshold_strategy']}")
    for v in shown["versions"]:
        signer = v["signer"]
        who = "unsigned" if signer is None else f"signed by {signer['name']} ({signer['role']})"
        lines.append(f"  v{v['version']}: {(v['created'] or '')[:19]} by {v['user']}, "
                     f"sha256 {v['policy_sha256'][:12]}, {who}")
    if not shown["versions"]:
        lines.append("  no policy file stored: the use case's defaults apply "
                     "(fstrain registry policy set MODEL --file gates.yaml)")
    typer.echo("\n".join(lines))
