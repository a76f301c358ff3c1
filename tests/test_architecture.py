"""The import rules that keep the house readable (DESIGN.md), checked on the source."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import tomllib
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


#: The tables of product modules that a module loads with ``importlib`` when one is chosen (a
#: backend when a project first asks for it, a command when it runs), never when it is itself
#: imported: module -> the table's name. Each table says beside it what its entries cost; this
#: is the only other way a product module may defer loading one of ours (the lazy-import rule
#: below). The cycle test counts every entry as an import of the module holding the table.
LAZY_MODULE_TABLES: dict[str, str] = {
    "fstrain.project": "BACKEND_MODULES",
    "fstrain.cli.app": "COMMANDS",
}


def _table_entries(path: Path, table: str) -> list[str] | None:
    """The module names in the module-level dict literal ``table`` of the file at ``path``
    (a value is the name or ``name:object``, or a tuple that starts with one); None when there
    is no such table."""
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == table and isinstance(node.value, ast.Dict):
            values = [v.elts[0] if isinstance(v, ast.Tuple) else v for v in node.value.values]
            return [v.value.partition(":")[0] for v in values
                    if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return None


def _lazy_module_tables(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the product modules its listed table (LAZY_MODULE_TABLES) names."""
    return {module: set(_table_entries(modules[module], table) or []) & set(modules)
            for module, table in LAZY_MODULE_TABLES.items()}


def _import_graph() -> dict[str, set[str]]:
    """module -> the product modules it imports, counting every import statement: inside
    functions, under ``TYPE_CHECKING``, relative ones, and the entries of its lazy module
    table (LAZY_MODULE_TABLES). ``from pkg import sub`` names the submodule ``sub`` when it is
    one, else ``pkg`` itself."""
    modules = _product_modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = _imported_names(module, path, node, modules)
                graph[module] |= {m for m in map(owner, names) if m and m != module}
    for module, entries in _lazy_module_tables(modules).items():
        graph[module] |= entries - {module}
    return graph


def _imported_names(module: str, path: Path, node: ast.Import | ast.ImportFrom,
                    modules: dict[str, Path],
                    exports: dict[str, str] | None = None) -> list[str]:
    """The absolute names one import statement of ``module`` imports: relative ones resolved,
    ``from pkg import sub`` naming the submodule ``sub`` when it is one, else ``pkg`` itself,
    or, given ``exports`` (:func:`_lazy_exports`), the module a package's ``__getattr__``
    loads for that name."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    base = node.module or ""
    if node.level:
        up = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*up, base] if base else up)
    exports = exports or {}
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules
            else exports.get(f"{base}.{a.name}", base) for a in node.names]


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


# --------------------------------------------------------------------------- lazy imports

#: The libraries whose import cost is measured: a product module may import them inside a
#: function. Each costs at least two interpreter starts (``python bench/import_cost.py``: a
#: fresh subprocess each, its own ``-X importtime``, median of 3; 2026-12-02 on the shared 2-core
#: box at load 6-9, where ``python -c pass`` took 60-120 ms). The figures are that importtime in
#: ms ("wall": wall time less the interpreter's start, the benchmark's first version). Anything
#: cheaper is imported at the top of its module: typer 114-133, pydantic 93-104, requests 90,
#: uvicorn 74, argon2 93, jinja2 42, rich.progress 96, rich.table 76, PIL.Image 41-135,
#: deltalake 30, yaml 19, tokenizers 9. Add a library only with its figure from the benchmark.
HEAVY_LIBRARIES: tuple[str, ...] = (
    "peft",  # 24513
    "skops.io",  # 26017
    "keras",  # 22453
    "skl2onnx",  # wall 16234
    "torch",  # 12914
    "safetensors.torch",  # torch's
    "shap",  # 12397
    "jax",  # 12015
    "lightgbm",  # 9702
    "mlflow",  # 6671
    "cleanlab",  # 6049
    "xgboost",  # 5602
    "sklearn",  # 5377
    "onnxmltools",  # wall 5342
    "flax",  # 5327
    "optax",  # 5225
    "great_expectations",  # 5087
    "scipy.stats",  # 4551 (scipy itself: 174)
    "transformers",  # 4477
    "onnx",  # wall 4420
    "catboost",  # 3924
    "ray",  # 3066
    "hsfs",  # wall 2866
    "hopsworks",  # wall 1958
    "pandas",  # 1792
    "polars",  # 910
    "pyspark",  # 893
    "matplotlib",  # 826 (matplotlib.pyplot: 2000)
    "gguf",  # wall 812
    "duckdb",  # 727
    "hsml",  # wall 469
    "pyarrow",  # 431
    "joblib",  # 359
    "numpy",  # 249-333
    "onnxruntime",  # 329
    "safetensors.numpy",  # 263 (numpy's)
)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _catches_import_error(node: ast.Try | ast.TryStar) -> bool:
    kinds = [k for h in node.handlers if h.type is not None
             for k in (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type])]
    return any(isinstance(k, ast.Name) and k.id in ("ImportError", "ModuleNotFoundError")
               for k in kinds)


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _import_statements(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement with where it runs: ``"top"`` (module level, at import time),
    ``"typing"`` (a module-level ``if TYPE_CHECKING:`` block: never at run time), ``"lazy"``
    (inside a def or class body) or ``"probe"`` (lazy, inside a ``try`` that catches
    ImportError or ModuleNotFoundError)."""
    found: list[tuple[ast.Import | ast.ImportFrom, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        for field, value in ast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            for child in (c for c in children if isinstance(c, ast.AST)):
                inner = where
                if isinstance(child, _SCOPES) and where in ("top", "typing"):
                    inner = "lazy"
                elif (isinstance(node, ast.Try | ast.TryStar) and field == "body"
                      and where == "lazy" and _catches_import_error(node)):
                    inner = "probe"
                elif where == "top" and field == "body" and _is_type_checking(node):
                    inner = "typing"
                if isinstance(child, ast.Import | ast.ImportFrom):
                    found.append((child, inner))
                visit(child, inner)

    visit(tree, "top")
    return found


def _prefixes(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _costly_key(name: str, optional: frozenset[str]) -> str | None:
    """The HEAVY_LIBRARIES entry ``name`` lies in (``torch.nn`` in ``torch``), or its
    top-level package when only an extra installs it; None for a cheap module."""
    heavy = [p for p in _prefixes(name) if p in HEAVY_LIBRARIES]
    if heavy:
        return heavy[-1]
    return name.split(".")[0] if name.split(".")[0] in optional else None


def _optional_libraries() -> frozenset[str]:
    """The import names of the libraries only an extra installs (pyproject's
    optional-dependencies but ``dev``, less its dependencies), read from the installed
    distributions."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(requirements: list[str]) -> set[str]:
        return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-")
                for r in requirements}

    extras = {n for extra, reqs in project["optional-dependencies"].items() if extra != "dev"
              for n in names(reqs)}
    found: set[str] = set()
    for dist in sorted(extras - names(project["dependencies"]) - {project["name"]}):
        try:
            files = importlib.metadata.distribution(dist).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in files:
            top = file.parts[0]
            if not top.endswith((".dist-info", ".egg-info", ".data", ".pth")) and top != "..":
                found.add(top.split(".")[0])
    return frozenset(found - {"__pycache__"})


def _lazy_exports(modules: dict[str, Path]) -> dict[str, str]:
    """``pkg.name`` -> the module a package's module-level ``__getattr__`` imports for
    ``name``: the package's dict literals of names to product modules (the lazy re-export
    tables, read by ``importlib.import_module``)."""
    found: dict[str, str] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        if not any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body):
            continue
        for node in tree.body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if isinstance(value, ast.Dict):
                pairs = [(k.value, v.value) for k, v in zip(value.keys, value.values)
                         if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)]
                found |= {f"{module}.{k}": v for k, v in pairs if v in modules}
    return found


def _costly_loads(modules: dict[str, Path], optional: frozenset[str],
                  exports: dict[str, str]) -> dict[str, frozenset[str]]:
    """module -> the heavy or extra-only libraries importing it loads: its own run-time
    top-level imports, those of the product modules and packages it imports at its top and
    those of its own packages, transitively. Computed from the source, never listed."""
    direct: dict[str, set[str]] = {}
    needs: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        names = {n for node, where in _import_statements(tree) if where == "top"
                 for n in _imported_names(module, path, node, modules, exports)}
        direct[module] = {k for n in names if (k := _costly_key(n, optional))}
        needs[module] = {p for n in names | {module} for p in _prefixes(n) if p in modules}
        needs[module].discard(module)
    loads = {m: set(d) for m, d in direct.items()}
    grew = True
    while grew:
        grew = False
        for module, deps in needs.items():
            more = set().union(*(loads[d] for d in deps)) - loads[module]
            if more:
                loads[module] |= more
                grew = True
    return {m: frozenset(v) for m, v in loads.items()}


def _may_be_lazy(name: str, where: str, here: frozenset[str], loads: dict[str, frozenset[str]],
                 optional: frozenset[str]) -> bool:
    """Whether ``name`` may be imported inside a function of a module that loads ``here``."""
    if name.split(".")[0] in PRODUCT_PACKAGES:
        cost = set().union(*(loads[p] for p in _prefixes(name) if p in loads))
        return bool(cost - here)
    return where == "probe" or _costly_key(name, optional) not in (None, *here)


def _lazy_offenders(module: str, path: Path, source: str, modules: dict[str, Path],
                    loads: dict[str, frozenset[str]], optional: frozenset[str],
                    exports: dict[str, str] | None = None) -> list[str]:
    """``path:line imports names`` for each import statement of ``module`` inside a def or
    class body that the rule does not allow. Allowed there, when ``module`` does not load it
    at its top already: a heavy library; a library only an extra installs (the module must
    import without the extra); a product module whose import loads one of those (computed).
    Allowed too: any library inside a ``try`` that catches ImportError (an availability
    probe, turning absence into an error that names the extra). Never our own modules
    otherwise, not even in a ``try``: they are always there, so that is no probe but a cycle
    or a cost in hiding."""
    found = []
    here = loads.get(module, frozenset())
    for node, where in _import_statements(ast.parse(source, filename=str(path))):
        if where not in ("lazy", "probe"):
            continue
        bad = [name for name in _imported_names(module, path, node, modules, exports)
               if not _may_be_lazy(name, where, here, loads, optional)]
        if bad:
            found.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno} imports "
                         + ", ".join(sorted(set(bad))))
    return found


def lazy_import_offenders() -> list[str]:
    """Every product import statement inside a function that the rule does not allow."""
    modules = _product_modules()
    optional = _optional_libraries()
    exports = _lazy_exports(modules)
    loads = _costly_loads(modules, optional, exports)
    return [o for module, path in sorted(modules.items())
            for o in _lazy_offenders(module, path, path.read_text(), modules, loads, optional,
                                     exports)]


def test_lazy_imports_are_only_of_measured_heavy_libraries():
    """An import inside a function is for a library whose import cost is measured
    (HEAVY_LIBRARIES), a library an extra installs, an availability probe, or a product module
    that loads one of those at its top; never to break a cycle or by habit."""
    offenders = lazy_import_offenders()
    assert offenders == [], ("imports inside functions of cheap modules; hoist them to the top "
                             "of the module, or load a costly one of ours from a table of "
                             f"LAZY_MODULE_TABLES ({len(offenders)}):\n" + "\n".join(offenders))


def test_the_lazy_import_rule_sees_what_it_should():
    """The rule itself, on a made-up module ``fstrain.x`` next to a costly ``fstrain.h``."""
    modules = {"fstrain": ROOT / "fstrain" / "__init__.py", "fstrain.x": ROOT / "fstrain" / "x.py",
               "fstrain.h": ROOT / "fstrain" / "h.py", "fstrain.c": ROOT / "fstrain" / "c.py"}
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import pandas\n"
        "def f():\n    import json\n    import torch.nn\n    from . import h\n"
        "    from fstrain import c\n"
        "    try:\n        import yaml\n        from fstrain.c import C\n"
        "    except ImportError:\n        pass\n"
        "    import starlette\n"
        "class K:\n    import re\n"
    )
    loads = {"fstrain": frozenset(), "fstrain.x": frozenset(), "fstrain.c": frozenset(),
             "fstrain.h": frozenset({"torch"})}
    found = _lazy_offenders("fstrain.x", modules["fstrain.x"], source, modules, loads,
                            frozenset({"starlette"}))
    assert [f.split(":", 1)[1] for f in found] == [
        "5 imports json", "8 imports fstrain.c", "11 imports fstrain.c", "16 imports re"]
    # what the module loads at its top anyway is no reason to defer it
    loads["fstrain.x"] = frozenset({"torch"})
    found = _lazy_offenders("fstrain.x", modules["fstrain.x"], source, modules, loads,
                            frozenset({"starlette"}))
    assert [f.split(" ", 1)[0].split(":")[1] for f in found] == ["5", "6", "7", "8", "11", "16"]
    assert "starlette" in _optional_libraries() and "numpy" not in _optional_libraries()


def test_the_lazy_import_rule_reads_lazy_re_export_tables(tmp_path):
    """``from pkg import f`` where pkg's ``__getattr__`` loads ``f`` from ``pkg.m``: the cost
    is ``pkg.m``'s."""
    (tmp_path / "pkg").mkdir()
    init, m = tmp_path / "pkg" / "__init__.py", tmp_path / "pkg" / "m.py"
    init.write_text("_LAZY = {'f': 'pkg.m', 'g': 'elsewhere'}\ndef __getattr__(name): ...\n")
    m.write_text("import torch\n")
    modules = {"pkg": init, "pkg.m": m}
    exports = _lazy_exports(modules)
    assert exports == {"pkg.f": "pkg.m"}
    assert _costly_loads(modules, frozenset(), exports) == {"pkg": frozenset(),
                                                            "pkg.m": frozenset({"torch"})}


def test_lazy_module_tables_name_product_modules_that_load_only_when_chosen():
    """Each listed table exists and names only product modules; the module holding it imports
    none of them (at its top they would load with it; inside a function the lazy-import rule
    refuses them), and importing it in a fresh interpreter loads none of them."""
    import subprocess
    import sys

    modules = _product_modules()
    for module, table in LAZY_MODULE_TABLES.items():
        entries = _table_entries(modules[module], table)
        assert entries, f"{module} has no table {table} (update LAZY_MODULE_TABLES)"
        assert set(entries) <= set(modules), sorted(set(entries) - set(modules))
        tree = ast.parse(modules[module].read_text())
        imported = {n for node, where in _import_statements(tree) if where != "typing"
                    for n in _imported_names(module, modules[module], node, modules)}
        assert imported & set(entries) == set(), (module, sorted(imported & set(entries)))
        code = (f"import sys, {module}; "
                f"print(sorted(m for m in {sorted(set(entries))!r} if m in sys.modules))")
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                              text=True, check=True)
        assert done.stdout.strip() == "[]", (module, done.stdout)


def test_the_cycle_finder_reads_lazy_module_tables(tmp_path):
    (tmp_path / "m.py").write_text("TABLE = {'a': 'pkg.a', 'b': ('pkg.b:f', 'help'), 'c': 1}\n")
    assert _table_entries(tmp_path / "m.py", "TABLE") == ["pkg.a", "pkg.b"]
    assert _table_entries(tmp_path / "m.py", "OTHER") is None


# --------------------------------------------------------------------------- type-checking imports

def _checker_only_names_used_at_run_time(source: str) -> list[tuple[int, str]]:
    """(line, name) of every run-time use of a name that the module imports only under
    ``if TYPE_CHECKING:`` (annotations excluded: they are not evaluated), which raises NameError
    when that line runs. Hoisting a function's import away when the name was also imported for
    the type checker left two such uses in the Hopsworks adapter."""
    tree = ast.parse(source)
    checker_only, bound = set(), set()
    for node in tree.body:
        guarded = isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node):
            if isinstance(inner, (ast.Import, ast.ImportFrom)):
                names = {(a.asname or a.name).split(".")[0] for a in inner.names}
                (checker_only if guarded else bound).update(names)
            elif not guarded and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                    ast.ClassDef)):
                bound.add(inner.name)
            elif not guarded and isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                bound.add(inner.id)
    checker_only -= bound
    annotations = {id(part) for node in ast.walk(tree)
                   for field in ("annotation", "returns")
                   if (value := getattr(node, field, None)) is not None
                   for part in ast.walk(value)}
    return sorted((n.lineno, n.id) for n in ast.walk(tree)
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                  and n.id in checker_only and id(n) not in annotations)


def test_names_imported_only_for_the_type_checker_are_not_used_at_run_time():
    offenders = [f"{path.relative_to(ROOT)}:{line}: {name}"
                 for path in sorted(_product_modules().values())
                 for line, name in _checker_only_names_used_at_run_time(path.read_text())]
    assert offenders == [], "import these at run time (or use them only in annotations)"


def test_the_type_checker_import_rule_sees_a_run_time_use():
    source = ("from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n    from a import B, C\n"
              "def f(x: B) -> C:\n    return B()\n"
              "def g():\n    from a import C\n    return C()\n")
    assert _checker_only_names_used_at_run_time(source) == [(6, "B")]
