"""The benchmarks run from a checkout without the test tools: no module in
``benchmarks/`` imports ``tests`` or a test-only package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TEST_ONLY = frozenset({"tests", "pytest", "hypothesis", "_pytest"})


def _imported(path: Path) -> set[str]:
    """Top-level names of every module ``path`` imports, at any depth of its code."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


MODULES = sorted(BENCHMARKS.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(BENCHMARKS)) for p in MODULES])
def test_no_benchmark_module_imports_the_tests(path: Path) -> None:
    assert _imported(path) & TEST_ONLY == set()


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from tests.conftest import x\n    import pytest.mark\n")
    assert _imported(module) == {"tests", "pytest"}
