"""Which calls a policy looks at: tool-name patterns (``*`` is a wildcard,
every other character is literal) and regexes over a shell command."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["CommandPatterns", "ToolFilter", "compile_pattern", "compile_regex", "shell_command"]


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile a tool-name pattern; ``*`` matches any run of characters."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


def compile_regex(pattern: str) -> re.Pattern[str]:
    """Compile a regular expression from a setting: the one place every
    configured regex (command patterns, result normalisation, poll
    patterns) is compiled."""
    return re.compile(pattern)


class ToolFilter:
    """Which tools a policy tracks: those matching ``include`` (all when it is
    empty) and no ``exclude`` pattern. Patterns are predicates over whatever
    tools exist, so a pattern that matches nothing is valid. ``normalize``,
    when given, is applied to each tool name before matching (the patterns
    are taken as given); answers are memoized by the name as called."""

    _MEMO_LIMIT = 4096

    def __init__(
        self,
        include: Iterable[str] = (),
        exclude: Iterable[str] = (),
        *,
        normalize: Callable[[str], str] | None = None,
    ) -> None:
        self._include = [compile_pattern(p) for p in include]
        self._exclude = [compile_pattern(p) for p in exclude]
        self._normalize = normalize
        self._memo: dict[str, bool] = {}

    def tracks(self, tool: str) -> bool:
        tracked = self._memo.get(tool)
        if tracked is None:
            name = self._normalize(tool) if self._normalize is not None else tool
            tracked = (not self._include or any(p.fullmatch(name) for p in self._include)) and not any(
                p.fullmatch(name) for p in self._exclude
            )
            if len(self._memo) >= self._MEMO_LIMIT:
                self._memo.clear()
            self._memo[tool] = tracked
        return tracked


def shell_command(args: Any) -> str | None:
    """A call's top-level string ``command`` argument (a shell command, or an
    editing tool's sub-command), or ``None`` when it has none."""
    command = args.get("command") if isinstance(args, dict) else None
    return command if isinstance(command, str) else None


class CommandPatterns:
    """Regular expressions searched (``re.search``) in a call's top-level
    string ``command`` argument; a call without one matches none."""

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self._patterns = [compile_regex(p) for p in patterns]

    def match(self, args: Any) -> bool:
        if not self._patterns:
            return False
        command = shell_command(args)
        return command is not None and any(p.search(command) for p in self._patterns)
