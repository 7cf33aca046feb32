"""Module-level regular expressions compiled on first use.

A command hook starts a process for every tool call and imports every
built-in policy, whose rules hold dozens of Python regular expressions; most
of them never run in that process. Compiling each one when a rule first uses
it keeps their cost out of the start of every process that does not.
"""

from __future__ import annotations

import re
from typing import Any, cast

__all__ = ["lazy_compile"]

_SHOWN = (
    "search",
    "match",
    "fullmatch",
    "sub",
    "subn",
    "split",
    "findall",
    "finditer",
    "pattern",
    "flags",
    "groups",
    "groupindex",
)


class _Pattern:
    """Stands for a ``re.Pattern`` until first used; then the compiled
    pattern's methods and attributes are its own instance attributes, so a
    later use costs what the compiled pattern's own does."""

    def __init__(self, pattern: str, flags: int) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        compiled = re.compile(*self._source)
        for shown in _SHOWN:
            setattr(self, shown, getattr(compiled, shown))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy_compile({self._source[0]!r})"


def lazy_compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, compiled when the pattern is first
    used. An invalid pattern raises ``re.error`` then, not at import:
    ``tests/guard/test_regex.py`` compiles every one in the package."""
    return cast("re.Pattern[str]", _Pattern(pattern, flags))
