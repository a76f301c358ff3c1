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
    assert [str(h) for h in hits] == ["feature_store/local/query/pit.py"]


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


# --------------------------------------------------------------------------- import cycles

PRODUCT_PACKAGES = ("fstrain", "feature_store", "feature_views", "pipelines", "model_registry",
                    "validation")
#: Packages whose inner cycles are being taken apart right now (issue 29): a cycle is tolerated
#: only when every member lies in one of them, and an entry without a cycle left fails as stale.
#: Nothing may add an entry; the list goes when it is empty.
CYCLES_BEING_REMOVED: tuple[str, ...] = ()


def _product_modules() -> dict[str, Path]:
    modules = {}
    for package in PRODUCT_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _import_graph() -> dict[str, set[str]]:
    """module -> the product modules it imports, counting every import statement: inside
    functions, under ``TYPE_CHECKING``, relative ones. ``from pkg import sub`` names the
    submodule ``sub`` when it is one, else ``pkg`` itself."""
    modules = _product_modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                         for a in node.names]
            else:
                continue
            graph[module] |= {m for m in map(owner, names) if m and m != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_no_import_cycle_between_product_files():
    """No two product files import each other, directly or round a loop, counting imports
    inside functions and under TYPE_CHECKING (a lazy import never hides a cycle)."""
    graph = _import_graph()
    cycles = _cycles(graph)

    def tolerated(cycle: frozenset[str]) -> str | None:
        return next((p for p in CYCLES_BEING_REMOVED if all(m.startswith(p) for m in cycle)), None)

    new = [sorted(c) for c in cycles if tolerated(c) is None]
    stale = sorted(set(CYCLES_BEING_REMOVED) - {tolerated(c) for c in cycles})
    detail = [f"{a} -> {b}" for c in cycles if sorted(c) in new for a in sorted(c)
              for b in sorted(graph[a] & c)]
    assert new == [], "import cycles (fix the design, not this test):\n" + "\n".join(detail)
    assert stale == [], f"no longer cycles; remove them from CYCLES_BEING_REMOVED: {stale}"


def test_the_cycle_finder_sees_lazy_and_type_checking_imports(tmp_path):
    """The finder itself: a cycle closed by an import inside a function is found."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [frozenset({"a", "b", "c"})]
    assert _cycles({"a": {"b"}, "b": set()}) == []
