"""What only reads: calls that look at the world without changing it.

``loops`` denies the third unchanged result of a call "with nothing changed
in between". An edit is a change, but so may be any other action: a click,
``git pull``, a build, an INSERT, a sent message. So every successful call
that is not known to only read is taken as a possible change when it brings
news (see ``LoopsPolicy``); this module says which calls only read: the
read, search, list and fetch tools of the agent runtimes (unless a word of
the name acts: ``search_and_replace``), and shell commands whose every step
is a read-only program (``ls``, ``cat``, ``grep``, ``git log``, ...) used
in a way that writes nothing (not ``sed -i``, ``find -delete``, ``git branch
new``, a ``$(...)`` substitution). Anything else, an unknown tool included,
may change something.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from guard._regex import lazy_compile
from guard.patterns import RegexSet, ToolFilter
from guard.policies.progress import loose_tool_name

__all__ = [
    "DEFAULT_READ_ONLY_COMMANDS",
    "DEFAULT_READ_ONLY_TOOLS",
    "OPTIONS",
    "ReadOnlyRule",
    "hands_off",
    "keeps_books",
    "makes",
    "makes_command",
    "name_words",
    "names_a_read",
    "without_prefixes",
]

OPTIONS = r"(?:\s+--?[A-Za-z][\w.-]*(?:=\S*|\s+[^-\s;&|]\S*)?)*"
"""A regex fragment (RE2) for the options a command line may give between a
program and its subcommand (``kubectl -n staging get``, ``docker --context
prod ps``, ``gh -R org/app run list``): each a flag, with a value after
``=`` or as the next word."""

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
    "todowrite",
    "updatetodolist",
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
    "*snapshot*",
    "*screenshot*",
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
    r"export|set|unset|ulimit|umask|clear|history|view|read|list|show|"
    # SWE-agent's own commands for reading files (its text interface runs them as shell lines)
    r"open|goto|scroll_up|scroll_down|search_dir|search_file|find_file)(?:\s|$)",
    r"^git\s+(?:--no-pager\s+|-C\s+\S+\s+)*(?:status|log|diff|show|blame|grep|ls-files|ls-tree|rev-parse|"
    r"describe|shortlog|reflog|remote|branch|tag|config\s+--(?:get|list))(?:\s|$)",
    r"^(?:docker|podman)" + OPTIONS + r"\s+(?:ps|images|inspect|logs|version|info)(?:\s|$)",
    r"^kubectl" + OPTIONS + r"\s+(?:get|describe|logs|explain|version|config\s+view)(?:\s|$)",
    r"^gh" + OPTIONS + r"\s+(?:\w+\s+)?(?:view|list|status|checks|diff)(?:\s|$)",
    r"^(?:pip3?|uv\s+pip|npm|pnpm|yarn|cargo|go)\s+(?:list|ls|show|view|freeze|outdated|why|tree|metadata|env|"
    r"version|--version)(?:\s|$)",
    # PowerShell's and cmd's reads (cmdlet names are case-insensitive)
    r"(?i)^(?:get-(?:content|childitem|item|itemproperty|location|process|service|date|command|help|module|"
    r"filehash|acl|nettcpconnection|winevent|eventlog|computerinfo|variable|alias)|select-string|select-object|"
    r"where-object|sort-object|measure-object|format-(?:table|list|wide)|out-string|test-path|test-connection|"
    r"test-netconnection|resolve-path|split-path|join-path|write-output|write-host|convertto-json|"
    r"convertfrom-json|gc|gci|sls|type|findstr|where)(?:\s|$)",
)
"""Read-only shell steps, in RE2 syntax (``guard.patterns``), each matched
at the start of one step of a command (the command split at ``&&``, ``||``,
``;``, ``|`` and newlines, ``sudo``-like prefixes and ``VAR=value`` words
dropped). A command is read-only when every step matches; a redirection to
a file (``mutating_commands``) makes it an edit whatever its steps."""

_STEPS = lazy_compile(r"&&|\|\|?|[;\n&]")
_SEQUENCE = lazy_compile(r"&&|\|\||[;\n&]")  # the steps run one after another, a pipeline whole
# quoted text (a grep pattern holding ";" or "|"), a comment (its "'" or ";" is prose) and 2>&1
# separate no steps; whichever starts first wins, so a "#" inside quotes is no comment
_NOT_SEPARATORS = lazy_compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"|(?:^|(?<=[\s;&|(]))#[^\n]*|[0-9]*>&[0-9-]+")


def _blanked(found: re.Match[str]) -> str:
    """Quoted text as an empty quoted word (a pattern or a name, still a
    word); a comment as a bare ``#``; ``2>&1`` as nothing."""
    first = found.group()[:1]
    return " ''" if first in "'\"" else " #" if first == "#" else " "


_WORD = r"[^\s;&|]"  # a character of one word of a step: the step's separators end it
_PREFIXES = (
    r"(?:(?:sudo(?:\s+(?:-[CDghprTtUu]\s*" + _WORD + r"+|--[\w-]+(?:=" + _WORD + r"*)?|-[A-Za-z]+))*"
    r"|time(?:\s+-p)?|timeout(?:\s+(?:-[ks]\s*"
    + _WORD
    + r"+|--[\w-]+(?:="
    + _WORD
    + r"*)?|-[a-z]+))*\s+"
    + _WORD
    + r"+|nohup|exec|env(?:\s+(?:-u\s*"
    + _WORD
    + r"+|-[i0]))*|nice(?:\s+(?:-n\s*-?\d+|-\d+|--adjustment=-?\d+))?|xargs(?:\s+-"
    + _WORD
    + r"+)*)\s+|[A-Za-z_][A-Za-z0-9_]*="
    + _WORD
    + r"*\s+)+"
)
_PREFIXED = 16384
"""Commands longer than this keep their prefixes (``without_prefixes``)."""
_PREFIX = lazy_compile("^" + _PREFIXES)
_STEP_PREFIX = lazy_compile(r"(^|[;&|(\n]\s*)" + _PREFIXES)


def without_prefixes(command: str) -> str:
    """``command`` with the words that only run the rest of a step dropped
    from the start of each step (``sudo``, ``time``, ``timeout 60``,
    ``nohup``, ``env``, ``nice``, ``VAR=value``): ``sudo systemctl status
    app`` is a ``systemctl status`` as a pattern anchored at a step's start
    sees it (their own options too: ``sudo -u postgres``, ``timeout -k 5
    60``, ``nice -n 10``). ``command`` itself when there are none, or when it
    is longer than 16 KiB."""
    if len(command) > _PREFIXED:
        return command
    plain, dropped = _STEP_PREFIX.subn(r"\1", command)
    return plain if dropped else command


# Steps that change only the shell itself: in a persistent shell (Claude Code's, OpenHands',
# SWE-agent's) what the next command does
_SHELL_STATE = lazy_compile(
    r"^(?:(?:cd|pushd|popd)(?:\s|$)|(?:export|unset)\s+(?:-[fnv]\s+)*[A-Za-z_]|set\s+(?:[-+]o\s+\w|[-+][A-Za-np-z])"
    r"|ulimit\s+(?:-[A-Za-z]+\s+)*(?:\d|unlimited)|umask\s+\d)"
)
"""(``export`` with no name, ``set -o``, ``ulimit -a`` and a bare ``umask`` only print.)"""


# Steps that start like a read but write: an in-place edit, find's actions,
# an output file, a branch or tag made or deleted, a version bumped.
_WRITES_ANYWAY = RegexSet(
    (
        r"^sed\s(?:.*\s)?(?:-[a-zA-Z]*i|--in-place)",
        r"^g?awk\s(?:.*\s)?-i\s*inplace",
        r"^find\s(?:.*\s)?-(?:delete|fprint0?|fprintf|fls)\b",
        r"^sort\s(?:.*\s)?(?:-o|--output)",
        r"^date\s(?:.*\s)?(?:-s|--set)\b",
        r"^git\s(?:.*\s)?branch\s+(?:[^-\s]|-[a-zA-Z]*[dDmMcCf]\b|--(?:delete|move|copy|force|set-upstream-to))",
        r"^git\s(?:.*\s)?tag\s+(?:[^-\s]|-[a-zA-Z]*[dafsu]\b|--(?:delete|annotate|force|sign))",
        r"^git\s(?:.*\s)?remote\s+(?:add|remove|rm|rename|set-url|set-head|set-branches|prune|update)\b",
        r"^(?:npm|pnpm|yarn)\s+version\s+[^-\s]",
        r"^go\s+env\s+-[wu]\b",
        r"json\.tool(?:\s+--(?:indent(?:\s+|=)[0-9]+|tab|sort-keys|no-ensure-ascii|json-lines|compact))*"
        r"\s+[^-\s]\S*\s+[^-\s]",
    ),
    setting="read-only exceptions",
)
_FIND_RUNS = lazy_compile(r"\s-(?:exec|execdir|ok|okdir)\s+")
_FIND_END = lazy_compile(r"\\|\s\+(?:\s|$)")  # \; (its ";" splits steps first) or +
# what runs another command inside one: its effect is not the outer program's
_SUBSTITUTIONS = ("$(", "`", "<(", ">(")
# Words in a tool's name that say it acts, whatever read-like word it also holds
# (``search_and_replace``, ``slack_reply_to_thread``, ``mark_all_notifications_read``).
# fmt: off
_ACTION_WORDS = frozenset({
    "add", "apply", "approve", "archive", "assign", "cancel", "click", "close", "commit", "complete", "create",
    "delete", "deploy", "destroy", "disable", "drop", "edit", "enable", "execute", "fill", "insert", "install",
    "invite", "kill", "mark", "merge", "move", "patch", "post", "press", "publish", "purge", "push", "put",
    "reboot", "remove", "rename", "replace", "reply", "reset", "resolve", "restart", "restore", "revert",
    "rollback", "save", "send", "set", "shutdown", "submit", "terminate", "toggle", "update", "upload", "write",
})
# fmt: on
# ... unless the thing acted on is the agent's own bookkeeping (``tracker_update_task``)
_BOOKKEEPING_WORDS = frozenset({"todo", "todos", "tracker", "topic", "plan"})
_WORDS = lazy_compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def name_words(name: str) -> set[str]:
    """The words of a tool's name or a command, lower-cased: snake_case,
    kebab-case and camelCase split (``sheets_insertRow``: sheets, insert, row)."""
    return {word.lower() for word in _WORDS.findall(name)}


# bookkeeping tools whose names hold none of those words (Claude Code's task list, a think tool)
_BOOKKEEPING_NAMES = frozenset(
    {"think", "taskcreate", "taskupdate", "tasklist", "taskget", "completetask", "enterplanmode", "exitplanmode"}
)


def keeps_books(tool: str) -> bool:
    """Whether ``tool``'s name says it keeps the agent's own books: its
    todo list, plan, tracker or topic, a thought (``TodoWrite``,
    ``update_plan``, ``write_todos``, ``TaskUpdate``, ``think``). Asked of
    tools known to only read (``terraform_plan`` is no bookkeeping, but it
    is not read-only either). An MCP server's tool is another service's,
    never the agent's bookkeeping."""
    server, _, own = tool.rpartition("__")
    if server and own:
        return False
    return loose_tool_name(tool) in _BOOKKEEPING_NAMES or not _BOOKKEEPING_WORDS.isdisjoint(
        word.lower() for word in _WORDS.findall(tool)
    )


# Words in a tool's name that say each call makes something new: the same call made again makes another
_MAKING_WORDS = frozenset(
    {
        "add",
        "append",
        "clone",
        "copy",
        "create",
        "duplicate",
        "insert",
        "new",
        "post",
        "publish",
        "send",
        "submit",
        "upload",
    }
)


# ... unless it sends input: keys to a terminal or a page (``send_keys``, ``send_input``, ``type_text``)
_INPUT_WORDS = frozenset({"input", "keys", "keystroke", "keystrokes", "hotkey"})


def makes(tool: str) -> bool:
    """Whether ``tool``'s name says each call makes something new
    (``create_issue``, ``add_marker``, ``append_content``,
    ``mcp__slack__send_message``; not ``send_keys``, which types): an MCP
    server's tool by its own name."""
    own = tool.rpartition("__")[2] or tool
    found = [word.lower() for word in _WORDS.findall(own)]
    words = set(found)
    typed = not _INPUT_WORDS.isdisjoint(words) or {"send", "key"} <= words or found[:1] in (["type"], ["press"])
    return not _MAKING_WORDS.isdisjoint(words) and not typed


# An HTTP request that sends something (a body, a form, or POST named): each one may make a record
_SENDS = lazy_compile(
    r"^(?:curl\s(?:.*\s)?(?:-X\s*POST\b|--request[\s=]POST\b|-[dF]|--data|--form|--json)"
    r"|wget\s(?:.*\s)?--(?:post-data|post-file|method[\s=]POST\b)"
    r"|(?:https?|xh|xhs)\s(?:.*\s)?POST\s)"
)
_SAYS_ONLY = frozenset({"echo", "printf", "true", ":", "exit"})
"""Steps an agent appends that only report (``&& echo created``, ``; echo
"exit: $?"``, ``|| true``): the step before them is the one judged."""


def _program(part: str) -> str:
    """A pipeline part's words, from its program on (``sudo``-like prefixes dropped)."""
    return _PREFIX.sub("", part.strip().lstrip("({ "))


def _says_only(words: str) -> bool:
    return not words or words.split(None, 1)[0] in _SAYS_ONLY


_GETS = lazy_compile(r"\s(?:-[A-Za-z]*G[A-Za-z]*|--get)(?:\s|$)")  # curl -G, -sG
_LEADING = 5
"""How many words of a step may hold its program and subcommands
(``gh -R org/app issue create``)."""
_BARE = lazy_compile(r"[A-Za-z][\w-]*")


def makes_command(command: str) -> bool:
    """Whether shell ``command`` makes something new each time it runs, as
    a tool ``makes`` does, judged by its last step, whose output is the
    answer read, past steps that only report (``cd api && gh issue create
    ... && echo created``, and of a pipeline its first program, ``gh issue
    create ... | head -1``; not ``git add -A && ./deploy.sh``): a program and subcommand whose words say so (``gh issue
    create``, ``aws sqs send-message``, ``kubectl create job``; read as a
    tool's name, so ``tmux send-keys`` types), or an HTTP request that
    sends a body or says POST (``curl -d``, ``curl -X POST``, ``wget
    --post-data``, ``http POST``; not ``curl -G``, which sends its data as
    a query). Options, their values and paths among the first words are
    passed over; a script's name is no subcommand."""
    steps = [
        programs[0]
        for step in _SEQUENCE.split(_NOT_SEPARATORS.sub(_blanked, command))
        if (programs := [words for part in step.split("|") if not _says_only(words := _program(part))])
    ]  # of a pipeline its first program that does more than report (echo '{...}' | curl -d @- ...)
    if not steps:
        return False
    words = steps[-1]
    if _SENDS.match(words):
        return _GETS.search(words) is None
    leading = [word for word in words.split()[:_LEADING] if _BARE.fullmatch(word)]
    return bool(leading) and makes(" ".join(leading))


_HANDOFF = lazy_compile(r"(?i)transfer_(?:back_)?to_\w+")


def hands_off(tool: str) -> bool:
    """Whether ``tool`` hands the conversation to another agent
    (``transfer_to_billing_agent``, as the OpenAI Agents SDK and LangGraph's
    swarm name handoffs; Google ADK's ``transfer_to_agent``; LangGraph's
    supervisor hands back with ``transfer_back_to_supervisor``): like the
    agent's books, it moves the work along without doing any, and takes the
    same arguments (often none) and gives the same answer every time."""
    return _HANDOFF.fullmatch(tool) is not None


class ReadOnlyRule:
    """Says whether a call only reads (``reads``); see the module docstring.
    A tool matched by a pattern with a wildcard (``search*``, ``*read``)
    only reads unless a word of its name says it acts (``add``, ``replace``,
    ``reply``, ``mark``, ...) and none names the agent's own bookkeeping
    (``tracker_update_task``); a name listed whole (``TaskUpdate``,
    ``update_plan``) always only reads. An MCP server's tool
    (``mcp__asana__task_update``) is judged by the words of its own name
    alone: another service's task is no bookkeeping of the agent's."""

    def __init__(self, tools: Iterable[str], commands: Iterable[str]) -> None:
        patterns = tuple(loose_tool_name(p) for p in tools)
        self._tools = ToolFilter(patterns, normalize=loose_tool_name, own_names=True) if patterns else None
        self._whole = _whole_names(patterns)
        self._steps = RegexSet(commands, setting="loops.read_only_commands")
        self._memo: dict[str, bool] = {}

    def reads(self, tool: str, command: str | None) -> bool:
        """Whether the call of ``tool`` only reads; ``command`` is its shell
        command (``guard.patterns.shell_command``), if it has one. Answers
        for commands are remembered here; ``loops`` remembers what a tool's
        name says, this answer among it."""
        if command is not None:
            return self._command_reads(command)
        if self._tools is None:
            return False
        return (self._tools.tracks(tool) and self._tool_reads(tool)) or _server_reads(tool)

    def _tool_reads(self, tool: str) -> bool:
        server, _, own = tool.rpartition("__")
        if server and own:  # an MCP server's tool: another service's task or tracker is no bookkeeping of the agent's
            return name_words(own).isdisjoint(_ACTION_WORDS)
        if loose_tool_name(tool) in self._whole:
            return True
        words = name_words(tool)
        return words.isdisjoint(_ACTION_WORDS) or not words.isdisjoint(_BOOKKEEPING_WORDS)

    def _command_reads(self, command: str) -> bool:
        memo = self._memo
        reads = memo.get(command)
        if reads is None:
            steps = _STEPS.split(_NOT_SEPARATORS.sub(_blanked, command))
            reads = (
                bool(self._steps)
                and not any(mark in command for mark in _SUBSTITUTIONS)
                and all(self._step_reads(step) for step in steps)
                # a command that only moves the shell (cd, export) changes what the next one does
                and not _moves_shell(steps)
            )
            _remember(memo, command, reads)
        return reads

    def _step_reads(self, step: str) -> bool:
        words = _PREFIX.sub("", step.strip().lstrip("({ ").rstrip(")} "))
        if not words or words == "#":  # nothing, or a comment: nothing runs
            return True
        if not self._steps.match(words) or _WRITES_ANYWAY.search(words):
            return False
        # what find runs for each file (-exec grep -l x {} \;) must only read too
        ran = _FIND_RUNS.split(words)[1:] if words.startswith("find") else ()
        return all(self._step_reads(_FIND_END.split(command, 1)[0].replace("{}", " ")) for command in ran)


# Words of an MCP server's tool name that say it reads, wherever they stand in it: servers name their
# tools for the thing first (``issue_get``, ``jira_get_issue``, ``notion_retrieve_page``)
_READING_WORDS = frozenset(
    {"get", "list", "read", "search", "find", "fetch", "retrieve", "query", "view", "show", "describe", "lookup"}
)


def _server_reads(tool: str) -> bool:
    """Whether an MCP server's tool only reads by the words of its own name:
    one that reads and none that acts (``directive_get``,
    ``slack_get_channel_history``; not ``cache_get_or_create``)."""
    server, _, own = tool.rpartition("__")
    return bool(server and own) and names_a_read(own)


def names_a_read(tool: str) -> bool:
    """Whether a tool's name (an MCP server's tool's own part) has a word
    that reads and none that acts (``fetch_url``, ``get_order``; not
    ``cache_get_or_create``)."""
    words = name_words(tool.rpartition("__")[2])
    return not words.isdisjoint(_READING_WORDS) and words.isdisjoint(_ACTION_WORDS)


def _moves_shell(steps: list[str]) -> bool:
    """Whether a command's steps do nothing but change the shell itself."""
    words = [step.strip() for step in steps if step.strip()]
    return bool(words) and all(_SHELL_STATE.match(word) for word in words)


def _remember(memo: dict[str, bool], key: str, reads: bool) -> None:
    if len(memo) >= 4096:
        memo.clear()
    memo[key] = reads


@functools.lru_cache(maxsize=16)
def _whole_names(patterns: tuple[str, ...]) -> frozenset[str]:
    """The names among ``patterns`` listed whole (no wildcard), built once
    per process for each setting and shared by every session's guard."""
    return frozenset(p for p in patterns if "*" not in p)
