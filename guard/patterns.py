"""Tool-name patterns: ``*`` is a wildcard, every other character is literal."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["ToolFilter", "compile_pattern"]


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile a tool-name pattern; ``*`` matches any run of characters."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


class ToolFilter:
    """Which tools a policy tracks: those matching ``include`` (all when it is
    empty) and no ``exclude`` pattern. Patterns are predicates over whatever
    tools exist, so a pattern that matches nothing is valid."""

    _MEMO_LIMIT = 4096

    def __init__(self, include: Iterable[str] = (), exclude: Iterable[str] = ()) -> None:
        self._include = [compile_pattern(p) for p in include]
        self._exclude = [compile_pattern(p) for p in exclude]
        self._memo: dict[str, bool] = {}

    def tracks(self, tool: str) -> bool:
        tracked = self._memo.get(tool)
        if tracked is None:
            tracked = (not self._include or any(p.fullmatch(tool) for p in self._include)) and not any(
                p.fullmatch(tool) for p in self._exclude
            )
            if len(self._memo) >= self._MEMO_LIMIT:
                self._memo.clear()
            self._memo[tool] = tracked
        return tracked
