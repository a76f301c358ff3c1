"""Layering inside the local backend, checked on the source (issue 14, step 3).

* Every SQL statement against the catalog lives in the catalog repository
  (``feature_store/local/catalog/``); the rest of the backend calls its named methods.

Cross-object private accesses (``other._name``) are counted per package in
``tests/test_code_shape.py``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FEATURE_STORE = ROOT / "feature_store"
CATALOG_PACKAGE = FEATURE_STORE / "local" / "catalog"

# the catalog's tables (feature_store/local/catalog/database.py, _SCHEMA)
_CATALOG_TABLES = ("feature_groups", "feature_views", "training_datasets", "tags", "statistics",
                   "validation_reports", "transformation_functions")
# SQL keywords are written in capitals here, so prose ("read from tags") does not match
_CATALOG_SQL = re.compile(
    r"\b(FROM|INTO|UPDATE|TABLE|JOIN)\s+(IF NOT EXISTS\s+)?(" + "|".join(_CATALOG_TABLES) + r")\b"
)
# the raw database handle's methods: only the repository itself may call them
_RAW_METHODS = {"execute", "executemany", "executescript", "query", "query_one", "transaction",
                "read", "cursor"}


def _chain_names(node: ast.expr) -> list[str]:
    """The names along an attribute chain: ``self._store.catalog`` -> [self, _store, catalog]."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
    return names[::-1]


def catalog_sql_offenders(source: str, where: str) -> list[str]:
    """Catalog SQL in ``source``: SQL text naming a catalog table, an ``import sqlite3``, or a raw
    database call (``execute``/``query``/``transaction``...) on something called ``catalog``."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _CATALOG_SQL.search(node.value):
                found.append(f"{where}:{node.lineno} SQL on a catalog table: {node.value[:60]!r}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            if any(m and m.split(".")[0] == "sqlite3" for m in modules):
                found.append(f"{where}:{node.lineno} imports sqlite3")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _RAW_METHODS
              and any(n.lstrip("_") == "catalog" for n in _chain_names(node.func.value))):
            found.append(f"{where}:{node.lineno} raw catalog call .{node.func.attr}()")
    return found


def test_catalog_sql_lives_only_in_the_catalog_repository():
    offenders = [
        hit
        for path in sorted(FEATURE_STORE.rglob("*.py"))
        if CATALOG_PACKAGE not in path.parents
        for hit in catalog_sql_offenders(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert offenders == []


def test_the_catalog_sql_check_catches_each_kind_of_leak():
    leaks = {
        "select": 'rows = store.catalog.feature_group_rows()\nq = "SELECT * FROM feature_groups"',
        "fstring": 'q = f"UPDATE feature_views SET spec={spec} WHERE id=?"',
        "insert": 'q = ("INSERT OR REPLACE INTO tags (entity_type) "\n     "VALUES (?)")',
        "sqlite": "import sqlite3",
        "raw call": "with self._store.catalog.transaction() as conn:\n    pass",
        "raw query": "fs._catalog.query(sql)",
    }
    for kind, source in leaks.items():
        assert catalog_sql_offenders(source, kind), kind
    # DuckDB SQL over Delta scans and named repository calls are fine
    clean = ('con.execute(f"SELECT {cols} FROM {source_sql}")\n'
             'rows = self._store.catalog.feature_group_rows(name)\n'
             'sql = "SELECT * FROM read_parquet(?)"')
    assert catalog_sql_offenders(clean, "clean") == []



def _imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top, inside functions or for type checking."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_the_local_readers_know_none_of_their_consumers():
    """The local backend hands out files, pieces and record batches; the torch Dataset and the
    Ray datasource that consume them live with the trainers (``fstrain/trainers/readers/``),
    wired in by the composition root."""
    frameworks = ("torch", "ray", "fstrain.trainers")
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((FEATURE_STORE / "local").rglob("*.py"))
        for name in _imported_modules(path)
        if any(name == f or name.startswith(f + ".") for f in frameworks)
    ]
    assert offenders == []
