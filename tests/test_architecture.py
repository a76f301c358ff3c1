"""The import rules that keep the house readable (DESIGN.md), checked on the source."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = ("feature", "training_dataset", "training", "model_validation")
LIBRARIES = ("feature_store", "model_registry", "feature_views", "validation")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_libraries_never_import_pipelines():
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for package in LIBRARIES
        for path in (ROOT / package).rglob("*.py")
        for name in _imports(path)
        if name == "pipelines" or name.startswith("pipelines.")
    ]
    assert offenders == []


def _stage_files(stage: str) -> list[Path]:
    """A pipeline's files: ``pipelines/<stage>.py`` or the package ``pipelines/<stage>/``."""
    module = ROOT / "pipelines" / f"{stage}.py"
    return [module] if module.is_file() else sorted((ROOT / "pipelines" / stage).rglob("*.py"))


def test_a_pipeline_never_imports_another_pipeline():
    offenders = []
    for stage in PIPELINES:
        for path in _stage_files(stage):
            for name in _imports(path):
                for other in PIPELINES:
                    if other != stage and (name == f"pipelines.{other}"
                                           or name.startswith(f"pipelines.{other}.")):
                        offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offenders == []


def test_pipelines_holds_the_four_pipelines_and_nothing_else():
    """``pipelines/`` is the four stages (a module or a package each) and the two
    one-release compatibility re-exports; everything else lives where its name says."""
    entries = {p.name for p in (ROOT / "pipelines").iterdir() if p.name != "__pycache__"}
    stages = {n for n in entries if n.removesuffix(".py") in PIPELINES}
    assert len(stages) == len(PIPELINES)
    assert entries - stages == {"__init__.py", "cli.py", "jobs.py", "jobs_example.yaml"}
    for shim in ("cli.py", "jobs.py"):
        assert len((ROOT / "pipelines" / shim).read_text().splitlines()) <= 12


def test_backend_specific_storage_stays_in_its_packages():
    """deltalake and duckdb are used only by the local backend (and benchmarks)."""
    allowed = {ROOT / "feature_store" / "local"}
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for package in (*LIBRARIES, "pipelines")
        for path in (ROOT / package).rglob("*.py")
        if not any(parent in allowed for parent in path.parents)
        for name in _imports(path)
        if name.split(".")[0] in ("deltalake", "duckdb")
    ]
    assert offenders == []


def test_point_in_time_join_is_written_once():
    hits = [
        path.relative_to(ROOT)
        for package in (*LIBRARIES, "pipelines")
        for path in (ROOT / package).rglob("*.py")
        if re.search(r"ASOF (LEFT )?JOIN", path.read_text())
    ]
    assert [str(h) for h in hits] == ["feature_store/local/pit.py"]


def test_import_contracts_hold():
    """The import-linter contracts in pyproject.toml (layers, backends apart, pipelines last)."""
    import subprocess
    import sys

    linter = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


def test_both_backends_satisfy_the_contracts_for_the_type_checker():
    """mypy proves tests/typing/conformance.py: each backend class implements the protocols."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]


def test_each_use_case_is_defined_in_one_place():
    """Per-use-case knowledge lives in feature_views/<uc>/ (its view and its source):
    no other module branches on a use case's name."""
    names = ("flights", "adult", "mnist", "ccfraud")
    pattern = re.compile(r"""(==|!=|\bin)\s*\(?\s*["'](%s)["']""" % "|".join(names))
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for package in ("pipelines", "validation", "model_registry", "feature_store", "fstrain")
        for path in (ROOT / package).rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if pattern.search(line)
    ]
    assert offenders == []
