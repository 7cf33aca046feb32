"""Regular expressions compiled on first use."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from guard._regex import _Pattern, lazy_compile

REPO = Path(__file__).resolve().parents[2]


def _modules_with_lazy_patterns() -> list[str]:
    return sorted(
        ".".join(path.relative_to(REPO).with_suffix("").parts)
        for path in (REPO / "guard").rglob("*.py")
        if "lazy_compile(" in path.read_text(encoding="utf-8") and path.name != "_regex.py"
    )


def test_every_lazy_pattern_in_the_package_compiles() -> None:
    """An invalid pattern would raise only when its rule first runs: each one
    is compiled here instead."""
    found = 0
    for name in _modules_with_lazy_patterns():
        for value in vars(importlib.import_module(name)).values():
            if isinstance(value, _Pattern):
                assert value.pattern == value._source[0]
                found += 1
    assert found >= 50, "the policies' rules hold most of them"


def test_a_lazy_pattern_answers_as_the_compiled_one_and_compiles_once() -> None:
    lazy = lazy_compile(r"(?P<word>[a-z]+)(\d)", re.IGNORECASE)
    assert "search" not in vars(lazy), "nothing compiled before the first use"
    compiled = re.compile(r"(?P<word>[a-z]+)(\d)", re.IGNORECASE)
    assert lazy.search("--Ab1--") is not None
    assert lazy.search("--Ab1--").group("word") == compiled.search("--Ab1--").group("word")  # type: ignore[union-attr]
    assert lazy.sub(r"<\g<word>>", "x1 y2") == compiled.sub(r"<\g<word>>", "x1 y2")
    assert [m.span() for m in lazy.finditer("a1 b2")] == [m.span() for m in compiled.finditer("a1 b2")]
    assert (lazy.groups, lazy.groupindex, lazy.flags) == (compiled.groups, compiled.groupindex, compiled.flags)
    search = vars(lazy)["search"]
    lazy.match("a1")
    assert vars(lazy)["search"] is search, "compiled once, its methods kept"
    assert repr(lazy) == "lazy_compile('(?P<word>[a-z]+)(\\\\d)')"


def test_an_invalid_lazy_pattern_raises_at_its_first_use() -> None:
    lazy = lazy_compile(r"(unclosed")
    with pytest.raises(re.error, match="missing \\)"):
        lazy.search("x")
