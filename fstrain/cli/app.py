"""``fstrain``: the command line of the four pipelines (parses, connects, calls ``run``).

Every command takes ``--root`` (default ``$FSTRAIN_HOME``, else ``./.fstrain``), ``--backend``
(``local`` or ``hopsworks``), ``--json`` and ``--debug``. User errors print one clean message
and exit 2; ``fstrain validate`` exits 0 when the model passed its gates, 3 when it failed and 4
when it passed only under a policy deviation (gates loosened, removed or replaced).

Each command lives in a module of its own that imports what it needs at its top, and this root
imports a command's module only when that command runs or shows its help (:data:`COMMANDS`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, cast

import typer
from typer.core import TyperCommand, TyperGroup

#: Every command of ``fstrain``: its name -> (``module:object``, the first sentence of its help,
#: which ``fstrain --help`` lists). The object is a command function or a sub-app; its module is
#: imported when the command runs or shows its help, never before, so ``fstrain --help`` imports
#: none and a command imports only its own. Importing them all costs 1,130 ms more than
#: ``import fstrain.cli.app`` alone (median ``python -X importtime`` of 5 fresh runs, 2026-12-02,
#: the shared 2-core box at load 4); the architecture test counts each entry as an import of this
#: module (LAZY_MODULE_TABLES) and checks each help against its command's.
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("fstrain.cli.serve:serve_command", "Serve the store and the model registry in a "
              "browser (pages read the store live; sign-off follows the command line's rules)."),
    "features": ("fstrain.cli.features:features", "Feature pipeline: source data → validated "
                 "feature groups (upsert; re-runs change nothing)."),
    "dataset": ("fstrain.cli.dataset:dataset", "Training-dataset pipeline: feature view + split "
                "→ a new immutable version, or the newest one again when nothing changed (same "
                "split, same feature-group commits)."),
    "select-features": ("fstrain.cli.tool_commands:select_features", "Rank a version's "
                        "train-split features by mutual information; flag constant, redundant "
                        "and leaky ones."),
    "train": ("fstrain.cli.train:train", "Training pipeline: a training-dataset version → a "
              "model version (status pending), or the model already trained on it with the same "
              "configuration (reused)."),
    "validate": ("fstrain.cli.validate:validate", "Model-validation pipeline: scorecard + model "
                 "card; exit 0 passed, 3 failed, 4 passed under a policy deviation."),
    "doctor": ("fstrain.cli.tool_commands:doctor", "Check a run against common training "
               "failures; exit 0 fine, 3 on a severe finding."),
    "ablate": ("fstrain.cli.tool_commands:ablate", "Retrain a registered model's configuration "
               "without each group/feature; metric deltas with bootstrap intervals, attached to "
               "the model as a table and a plot."),
    "run": ("fstrain.cli.end_to_end:run_command",
            "All four pipelines of one use case, printing each ref."),
    "demo": ("fstrain.cli.end_to_end:demo", "The main job: every use case end to end on the "
             "embedded store, then a summary table."),
    "registry": ("fstrain.cli.registry:registry_app", "Browse the model registry (list, show, "
                 "report, diff, dossier), sign off versions (approve, reject) and set each "
                 "model's gate policy (policy)."),
    "jobs": ("fstrain.cli.jobs:jobs_app",
             "Deploy, list and run the pipeline stages as scheduled Hopsworks jobs."),
    "fg": ("fstrain.cli.browse:fg_app", "Feature groups: list, show."),
    "fv": ("fstrain.cli.browse:fv_app", "Feature views: list, show."),
    "td": ("fstrain.cli.browse:td_app", "Training datasets of a feature view: list, show, delete."),
    "users": ("fstrain.cli.serve:users_app",
              "Web users of `fstrain serve`: add, passwd, remove, list."),
    "keys": ("fstrain.cli.keys:keys_app", "Signing keys of the store: new, add (an existing "
             "ssh-keygen key), list, revoke."),
}


def load_command(name: str) -> TyperCommand | TyperGroup:
    """The command ``name`` of :data:`COMMANDS`, its module imported now; built as the root
    would build it (plain help, as for every command)."""
    module, _, attr = COMMANDS[name][0].partition(":")
    found = getattr(importlib.import_module(module), attr)
    holder = typer.Typer(rich_markup_mode=None)
    if isinstance(found, typer.Typer):
        holder.add_typer(found, name=name)
    else:
        holder.command(name)(found)
    return cast("TyperCommand | TyperGroup", typer.main.get_group(holder).commands[name])


class _LoadedWhenAsked(Mapping[str, "TyperCommand | TyperGroup"]):
    """:data:`COMMANDS` as the root group's commands: a command is loaded when it is looked up."""

    def __init__(self) -> None:
        self._loaded: dict[str, TyperCommand | TyperGroup] = {}

    def __getitem__(self, name: str) -> TyperCommand | TyperGroup:
        if name not in COMMANDS:
            raise KeyError(name)
        if name not in self._loaded:
            self._loaded[name] = load_command(name)
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


class _Commands(TyperGroup):
    """The root group: its commands are :data:`COMMANDS`, each loaded when it is asked for
    (to run it or show its help; a typo's suggestions need only the names)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        # read-only: every command comes from the table (click adds only through add_command)
        self.commands = cast("MutableMapping[str, Any]", _LoadedWhenAsked())

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list of ``fstrain --help``, from the table (no command is imported);
        ``ctx`` and ``formatter`` are of the click that typer carries."""
        listed = TyperGroup(commands=[TyperCommand(name, help=text)
                                      for name, (_, text) in COMMANDS.items()])
        listed.format_commands(ctx, formatter)


app = typer.Typer(
    cls=_Commands,
    help="fstrain: feature-store-backed training pipelines (feature → training dataset → "
    "training → model validation).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # plain help: rich's option table cuts long option names at 80 columns or when piped
    rich_markup_mode=None,
)


@app.callback()
def _root() -> None:
    # the root takes no options of its own (a callback makes the app a group of commands)
    return None


def main() -> None:
    """Console-script entry point."""
    app(prog_name="fstrain")


__all__ = ["COMMANDS", "app", "load_command", "main"]

if __name__ == "__main__":  # pragma: no cover
    main()

