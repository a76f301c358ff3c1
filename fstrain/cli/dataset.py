"""``fstrain dataset``: the training-dataset pipeline of a use case."""

from __future__ import annotations

from typing import Annotated

import typer

from fstrain.cli.invocation import emit as _emit
from fstrain.cli.invocation import guard as _guard
from fstrain.cli.invocation import project as _project
from fstrain.cli.invocation import set_options as _set
from fstrain.cli.invocation import step as _step
from fstrain.cli.options import BackendOpt, DebugOpt, ForceOpt, JsonOpt, RootOpt
from fstrain.kernel.window import resolve_window
from pipelines import training_dataset


def _window_note(start: str | None, end: str | None) -> str:
    """What a label window given to ``dataset`` means, for its output ('' without one)."""
    if start in (None, "") and end in (None, ""):
        return ""
    return f"\nlabels in {resolve_window(start, end, environ={}).describe()}"


def dataset(
    use_case: Annotated[str, typer.Argument(help="flights, adult, mnist, ccfraud, instructions or airquality.")],
    split: Annotated[str | None, typer.Option(help="random, stratified, group or time (default: the use case's).")] = None,
    seed: Annotated[int | None, typer.Option(help="Split seed (default: the use case's, else drawn and recorded).")] = None,
    validation_size: Annotated[float | None, typer.Option(help="Fraction for validation.")] = None,
    test_size: Annotated[float | None, typer.Option(help="Fraction for test.")] = None,
    group_column: Annotated[str | None, typer.Option(help="Group split: column whose groups stay together.")] = None,
    gap: Annotated[str | None, typer.Option(help="Time split: gap between splits, e.g. 1D.")] = None,
    test_window: Annotated[str | None, typer.Option(help="Time split: test = the last TEST_WINDOW before the anchor, e.g. 30D.")] = None,
    validation_window: Annotated[str | None, typer.Option(help="Time split: validation = the VALIDATION_WINDOW before test, e.g. 30D.")] = None,
    anchor: Annotated[str | None, typer.Option(help="Relative windows end at: data (last event time, default), end-time ($HOPS_END_TIME) or a date.")] = None,
    data_format: Annotated[str | None, typer.Option(help="parquet, csv or jsonl (default: the use case's, else parquet).")] = None,
    start: Annotated[str | None, typer.Option(help="Keep the labels whose event time is at or after START (ISO-8601). Never read from $HOPS_START_TIME. Without --end the window is open: every label from START on.")] = None,
    end: Annotated[str | None, typer.Option(help="Keep the labels whose event time is before END (exclusive). Never read from $HOPS_END_TIME. Without --start: every label before END.")] = None,
    force: ForceOpt = False,
    root: RootOpt = None, backend: BackendOpt = "local", as_json: JsonOpt = False, debug: DebugOpt = False,
) -> None:
    """Training-dataset pipeline: feature view + split → a new immutable version, or the
    newest one again when nothing changed (same split, same feature-group commits)."""
    _set(root, backend, as_json, debug)

    def body() -> None:
        # --split and --data-format are any strings here: the config refuses unknown ones
        config = training_dataset.TrainingDatasetConfig.model_validate({
            "use_case": use_case, "split": split, "seed": seed, "validation_size": validation_size,
            "test_size": test_size, "group_column": group_column, "gap": gap,
            **({"data_format": data_format} if data_format else {}),
            "test_window": test_window, "validation_window": validation_window, "anchor": anchor,
            "start": start, "end": end, "force": force,
        })
        training_dataset.check_config(config)  # bad input is named before the store is opened
        with _step(f"training-dataset pipeline: {use_case}"):
            ref = training_dataset.run(_project(), config)
        _emit(ref.to_dict(), str(ref) + _window_note(start, end))

    _guard(body)


__all__ = ['dataset']
