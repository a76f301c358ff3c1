"""The ``fstrain`` root loads a command's module only when that command runs or shows its help
(``fstrain.cli.app.COMMANDS``), so ``fstrain --help`` and a command's start import no other
command's pipelines, tools or registry code; the listed help is each command's own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.core import TyperCommand

from fstrain.cli.app import COMMANDS, load_command

REPO = Path(__file__).resolve().parents[2]
#: what only a command's own module may bring in
PRODUCT = ("pipelines", "feature_views", "model_registry", "validation", "fstrain.tools",
           "fstrain.trainers", "fstrain.serve")


def _loaded_after(argv: list[str]) -> list[str]:
    code = (
        "import json, sys\n"
        "from fstrain.cli.app import app\n"
        "try:\n"
        f"    app({argv!r}, prog_name='fstrain')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, check=True, timeout=120)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _modules_of(names: list[str]) -> set[str]:
    return {COMMANDS[n][0].partition(":")[0] for n in names}


def test_root_help_imports_no_command_module():
    loaded = _loaded_after(["--help"])
    assert _modules_of(list(COMMANDS)) & set(loaded) == set()
    assert [m for m in loaded if m.startswith(PRODUCT)] == []


def test_a_command_imports_its_own_module_and_no_other_command_module():
    loaded = set(_loaded_after(["features", "--help"]))
    assert "fstrain.cli.features" in loaded and "pipelines.feature" in loaded
    others = _modules_of([n for n in COMMANDS if n != "features"]) - {"fstrain.cli.features"}
    assert others & loaded == set(), sorted(others & loaded)


def test_the_listed_help_is_each_commands_own():
    for name, (_, text) in COMMANDS.items():
        listed = TyperCommand(name, help=text).get_short_help_str(10**6)
        assert load_command(name).get_short_help_str(10**6) == listed, name


def test_an_unknown_command_is_refused_with_the_known_ones():
    from typer.testing import CliRunner

    from fstrain.cli.app import app

    result = CliRunner().invoke(app, ["featurse"])
    assert result.exit_code == 2 and "features" in result.output, result.output
