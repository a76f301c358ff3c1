"""``fstrain features``: the feature pipeline of a use case."""

from __future__ import annotations

from typing import Annotated

import typer

from fstrain.cli.invocation import emit as _emit
from fstrain.cli.invocation import guard as _guard
from fstrain.cli.invocation import project as _project
from fstrain.cli.invocation import set_options as _set
from fstrain.cli.invocation import step as _step
from fstrain.cli.options import (
    WINDOW_END_HELP,
    WINDOW_START_HELP,
    BackendOpt,
    DebugOpt,
    JsonOpt,
    RootOpt,
)
from pipelines import feature


def features(
    use_case: Annotated[str, typer.Argument(help="flights, adult, mnist, ccfraud, instructions or airquality.")],
    start: Annotated[str | None, typer.Option(help=WINDOW_START_HELP)] = None,
    end: Annotated[str | None, typer.Option(help=WINDOW_END_HELP)] = None,
    policy: Annotated[str, typer.Option(help="Ingestion policy of the expectation suites: strict or always.")] = "strict",
    sample: Annotated[int | None, typer.Option(help="Deterministic subsample of the root rows.")] = None,
    n_transactions: Annotated[int | None, typer.Option(help="ccfraud: transactions to generate (default 100000).")] = None,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """Feature pipeline: source data → validated feature groups (upsert; re-runs change nothing)."""
    _set(root, backend, as_json, debug)

    def body() -> None:
        given = {k: v for k, v in (("sample", sample), ("n_transactions", n_transactions))
                 if v is not None}
        # --policy is any string here: the config refuses one that is not a policy
        config = feature.FeaturePipelineConfig.model_validate(
            {"use_case": use_case, "start": start, "end": end, "ingestion_policy": policy, **given},
        )
        with _step(f"feature pipeline: {use_case}"):
            ref = feature.run(_project(create=True), config)
        _emit(ref.to_dict(), ref.summary())

    _guard(body)


__all__ = ['features']
