"""The adapters use only their runtimes' public API: an underscore attribute
of a runtime's object can change in any release without notice."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ADAPTERS = Path(__file__).resolve().parents[3] / "guard" / "adapters"


def _private_reads(tree: ast.AST) -> list[str]:
    """Every ``x._name`` where ``x`` is not ``self``/``cls``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in {"self", "cls"}:
                continue
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


OUR_OWN = {"guard._decide"}
"""Private reads of this project's own objects (a ``RepeatToolGuard`` found through a context variable)."""


@pytest.mark.parametrize("module", sorted(p.name for p in ADAPTERS.glob("*.py") if not p.name.startswith("_")))
def test_adapter_reads_no_private_attribute_of_its_runtime(module: str) -> None:
    tree = ast.parse((ADAPTERS / module).read_text(), module)
    reads = [r for r in _private_reads(tree) if r.split(": ", 1)[1] not in OUR_OWN]
    assert reads == [], f"guard/adapters/{module} reads private attributes: {reads}"
