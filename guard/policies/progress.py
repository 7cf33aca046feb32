"""What counts as progress: a call that changed something.

Policy ``rescue`` voids its observations when the agent makes progress, so an
edit-build-edit-build cycle runs freely. Agent tools spell their editing
tools differently (``Edit``, ``MultiEdit``, ``str_replace_editor``,
``write_file``, ``apply_patch``) and shell-only agents edit through commands
(``sed -i``, ``cat <<EOF > file``, ``git apply``), so both the tool name and a
shell ``command`` argument are consulted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from guard._regex import lazy_compile
from guard.patterns import CommandPatterns, ToolFilter, shell_command
from guard.section import ConfigError, check_patterns

__all__ = [
    "DEFAULT_MUTATING_COMMANDS",
    "DEFAULT_MUTATING_TOOLS",
    "ProgressRule",
    "check_loose_patterns",
    "loose_tool_name",
]

DEFAULT_MUTATING_TOOLS: tuple[str, ...] = (
    "edit",
    "write",
    "multi_edit",
    "str_replace_editor",
    "apply_patch",
    "create_file",
    "notebook_edit",
    "write_file",
    "replace",
    "str_replace_based_edit_tool",
    "file_editor",
    "edit_file",
    "search_replace",
    "replace_in_file",
    "write_to_file",
    "apply_diff",
    "insert_content",
    "text_editor",
    "create_new_file",
    "edit_existing_file",
    "replace_file_content",
)
"""Editing tools of the agent runtimes, compared loosely (``loose_tool_name``)."""

DEFAULT_MUTATING_COMMANDS: tuple[str, ...] = (
    r"\bsed\b[^|;&]*\s(?:-[a-zA-Z]*i|--in-place)",
    r"\bperl\b[^|;&]*\s-[a-zA-Z]*i",
    # A redirection of output to a file (1>>log too): not 2>&1, not >/dev/null (RE2 has no lookaround, so spelled out).
    r"(?:^|[^0-9&>]|(?:^|[^0-9])1)>>?\s*(?:[\w.~$\"'\x{80}-\x{10FFFF}-]|/(?:$|[^d]|d(?:$|[^e]|e(?:$|[^v]|v(?:$|[^/]|/(?:$|[^n]"
    r"|n(?:$|[^u]|u(?:$|[^l]|l(?:$|[^l])))))))))",
    r"\btee\b",
    r"\bpatch\b",
    r"\bapply_patch\b",
    r"\bgit\s+(apply|am|checkout|restore|reset|stash|commit|merge|rebase|cherry-pick|mv|rm|switch)\b",
    r"(^|[;&|(]\s*|\s)(mv|cp|rm|mkdir|touch|chmod|ln|truncate|dd)\s",
    r"\b(pip3?|uv|npm|yarn|pnpm|cargo|go|apt-get|apt)\s+(install|add|remove|uninstall|get)\b",
    # an inline script (python -c, node -e, a heredoc) that opens a file for writing
    r"\bopen\([^()]*,\s*(?:mode\s*=\s*)?['\"](?:[wax]|r\+)",
    r"\.write_(?:text|bytes)\(|\bwriteFile(?:Sync)?\(",
)
"""Shell commands that change files or the environment, in RE2 syntax
(``guard.patterns``), searched in a call's top-level string ``command``
argument."""

_READ_ONLY_SUBCOMMANDS = frozenset({"view", "read", "list", "show", "cat"})


def loose_tool_name(name: str) -> str:
    """Lower case with separators dropped: ``MultiEdit``, ``multi_edit`` and
    ``multi-edit`` are one name; letters of any script survive, and ``*``
    for patterns."""
    return _NOT_NAME.sub("", name.lower())


_NOT_NAME = lazy_compile(r"[^\w*]|_")


def check_loose_patterns(key: str, value: Any) -> None:
    """``check_patterns`` for tool-name patterns compared loosely: each must
    keep a letter, a digit or ``*`` once separators are dropped."""
    check_patterns(key, value)
    for item in value:
        if not loose_tool_name(item):
            raise ConfigError(key, item, "must name a tool: it holds only separators")


class ProgressRule:
    """Decides whether a successful call was progress.

    A call is progress when its tool matches ``mutating_tools`` (compared
    loosely, see ``loose_tool_name``; an MCP tool, ``mcp__server__name`` or
    ``server__name``, by the name after its server's) unless its top-level ``command``
    argument names a read-only sub-command (``view``, as OpenHands'
    ``str_replace_editor`` does), or when its top-level string ``command``
    matches one of ``mutating_commands``.
    """

    def __init__(self, mutating_tools: Iterable[str], mutating_commands: Iterable[str]) -> None:
        patterns = [loose_tool_name(p) for p in mutating_tools]
        self._tools = ToolFilter(patterns, normalize=loose_tool_name, own_names=True) if patterns else None
        self._commands = CommandPatterns(mutating_commands, setting="rescue.mutating_commands")

    def kind(self, tool: str, command: str | None) -> Literal["edit", "command"] | None:
        """``edit`` for an editing tool's call (see ``edits_by_tool``),
        ``command`` for a shell command that edits, ``None`` for no progress.
        ``command`` is the call's, read with ``shell_command``."""
        if self.edits_by_tool(tool, command):
            return "edit"
        return "command" if self._commands.search(command) else None

    def is_progress(self, tool: str, args: Any) -> bool:
        return self.kind(tool, shell_command(args)) is not None

    def edits_by_tool(self, tool: str, command: str | None) -> bool:
        """Whether the call is an editing tool's (``mutating_tools``, not a
        read-only sub-command). Its arguments alone say what it changes, so
        the same arguments again change nothing; a shell command's effect
        depends on more than its text."""
        if self._tools is None or not self._tools.tracks(tool):
            return False
        return not (command is not None and command.strip().lower() in _READ_ONLY_SUBCOMMANDS)
