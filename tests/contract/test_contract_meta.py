"""The deviations table must name real contract tests with a kind and a reason."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

HERE = Path(__file__).parent


def _deviations() -> dict:
    spec = importlib.util.spec_from_file_location("fstrain_contract_dev_meta", HERE / "deviations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DEVIATIONS


def _contract_tests() -> set[str]:
    names = set()
    for path in HERE.glob("test_contract_*.py"):
        if path.name == Path(__file__).name:
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                args = [a.arg for a in node.args.args]
                if "backend" in args:
                    names.add(node.name)
    return names


def test_deviations_name_existing_contract_tests_with_reasons():
    tests = _contract_tests()
    assert len(tests) >= 15
    table = _deviations()
    assert set(table) == {"local", "hopsworks"}
    for backend, entries in table.items():
        for name, (kind, reason) in entries.items():
            assert name in tests, f"{backend}: deviation for unknown test {name!r}"
            assert kind in ("xfail", "skip")
            assert len(reason) > 30


def test_every_contract_test_uses_the_backend_fixture():
    for path in HERE.glob("test_contract_*.py"):
        if path.name == Path(__file__).name:
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                assert "backend" in [a.arg for a in node.args.args], f"{path.name}::{node.name}"
