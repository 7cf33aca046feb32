"""What only reads: calls that look at the world without changing it.

``loops`` denies the third unchanged result of a call "with nothing changed
in between". An edit is a change, but so may be any other action: a click,
``git pull``, a build, an INSERT, a sent message. So every successful call
that is not known to only read is taken as a possible change when it brings
news (see ``LoopsPolicy``); this module says which calls only read: the
read, search, list and fetch tools of the agent runtimes, and shell commands
whose every step is a read-only program (``ls``, ``cat``, ``grep``, ``git
log``, ...). Anything else, an unknown tool included, may change something.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from guard.patterns import RegexSet, ToolFilter
from guard.policies.progress import loose_tool_name, names_tool

__all__ = ["DEFAULT_READ_ONLY_COMMANDS", "DEFAULT_READ_ONLY_TOOLS", "ReadOnlyRule"]

DEFAULT_READ_ONLY_TOOLS: tuple[str, ...] = (
    "read*",
    "get*",
    "list*",
    "search*",
    "find*",
    "grep*",
    "glob*",
    "ls",
    "view*",
    "show*",
    "open",
    "goto",
    "cat",
    "head",
    "tail",
    "stat",
    "describe*",
    "inspect*",
    "lookup*",
    "query*",
    "count*",
    "webfetch",
    "fetch",
    "websearch",
    "googlewebsearch",
    "readmanyfiles",
    "notebookread",
    "think",
    "todo*",
    "writetodos",
    "updateplan",
    "tasktracker",
    "tracker*",
    "taskcreate",
    "taskupdate",
    "tasklist",
    "taskget",
    "updatetopic",
    "completetask",
    "enterplanmode",
    "exitplanmode",
    "*read",
    "*search",
    "*view",
    "*getstate*",
    "*getcontent*",
    "*gettext*",
    "*readpage*",
)
"""Tools that only read, compared loosely (``loose_tool_name``; an MCP tool,
``mcp__server__name``, by its own name). Bookkeeping tools (a plan, a todo
or task list, a thought, the topic a CLI files its work under, a plan mode
entered or left) change nothing another call could see."""

DEFAULT_READ_ONLY_COMMANDS: tuple[str, ...] = (
    r"^(?:ls|ll|dir|cat|tac|head|tail|less|more|nl|od|xxd|hexdump|strings|wc|file|stat|du|df|pwd|echo|printf|"
    r"which|whereis|type|command -v|env|printenv|date|whoami|id|uname|hostname|ps|pgrep|free|uptime|tree|find|fd|"
    r"grep|egrep|fgrep|rg|ag|ack|diff|cmp|sort|uniq|cut|tr|column|jq|yq|awk|sed|realpath|readlink|basename|"
    r"dirname|test|\[|true|false|sleep|md5sum|sha1sum|sha256sum|cksum|python3? -m json\.tool|cd|pushd|popd|"
    r"export|source|\.|set|unset|ulimit|umask|clear|history|view|read|list|show)(?:\s|$)",
    r"^git\s+(?:--no-pager\s+|-C\s+\S+\s+)*(?:status|log|diff|show|blame|grep|ls-files|ls-tree|rev-parse|"
    r"describe|shortlog|reflog|remote|branch|tag|config\s+--(?:get|list))(?:\s|$)",
    r"^(?:docker|podman)\s+(?:ps|images|inspect|logs|version|info)(?:\s|$)",
    r"^kubectl\s+(?:get|describe|logs|explain|version|config\s+view)(?:\s|$)",
    r"^gh\s+(?:\w+\s+)?(?:view|list|status|checks|diff)(?:\s|$)",
    r"^(?:pip3?|uv\s+pip|npm|pnpm|yarn|cargo|go)\s+(?:list|ls|show|view|freeze|outdated|why|tree|metadata|env|"
    r"version|--version)(?:\s|$)",
)
"""Read-only shell steps, in RE2 syntax (``guard.patterns``), each matched
at the start of one step of a command (the command split at ``&&``, ``||``,
``;``, ``|`` and newlines, ``sudo``-like prefixes and ``VAR=value`` words
dropped). A command is read-only when every step matches; a redirection to
a file (``mutating_commands``) makes it an edit whatever its steps."""

_STEPS = re.compile(r"&&|\|\|?|[;\n&]")
# quoted text (a grep pattern holding ";" or "|") and 2>&1 separate no steps
_NOT_SEPARATORS = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"|[0-9]*>&[0-9-]+")
_PREFIX = re.compile(
    r"^(?:(?:sudo|time|timeout\s+\S+|nohup|exec|env|nice|xargs(?:\s+-\S+)*)\s+|[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+"
)


class ReadOnlyRule:
    """Says whether a call only reads (``reads``); see the module docstring."""

    def __init__(self, tools: Iterable[str], commands: Iterable[str]) -> None:
        patterns = [loose_tool_name(p) for p in tools]
        self._tools = ToolFilter(patterns, normalize=loose_tool_name) if patterns else None
        self._steps = RegexSet(commands, setting="loops.read_only_commands")
        self._memo: dict[str, bool] = {}

    def reads(self, tool: str, command: str | None) -> bool:
        """Whether the call of ``tool`` only reads; ``command`` is its shell
        command (``guard.patterns.shell_command``), if it has one."""
        if command is not None:
            return self._command_reads(command)
        return self._tools is not None and names_tool(self._tools, tool)

    def _command_reads(self, command: str) -> bool:
        memo = self._memo
        reads = memo.get(command)
        if reads is None:
            reads = bool(self._steps) and all(
                self._step_reads(step) for step in _STEPS.split(_NOT_SEPARATORS.sub(" ''", command))
            )
            if len(memo) >= 4096:
                memo.clear()
            memo[command] = reads
        return reads

    def _step_reads(self, step: str) -> bool:
        words = _PREFIX.sub("", step.strip().lstrip("({ ").rstrip(")} "))
        return not words or self._steps.match(words)
