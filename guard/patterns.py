"""Every pattern the guard matches, compiled in one place so none can hang it.

Two kinds of pattern reach the guard from a config:

* tool-name patterns (``Glob``): ``*`` matches any run of characters, every
  other character is literal. Matching is a left-to-right scan for the
  literal pieces, linear in the name whatever the number of ``*``.
* regular expressions (``compile_regex``, ``RegexSet``), in RE2 syntax,
  compiled with google-re2: matching takes time linear in the input, so a
  pattern such as ``(a+)+$`` cannot backtrack catastrophically. What RE2
  cannot run in linear time (backreferences, lookahead, lookbehind) it
  refuses, and ``PatternError`` names the setting that held the pattern.

Each regular expression sees at most the first ``PATTERN_INPUT_LIMIT``
characters of its input, which bounds the cost of one match however large a
command or result is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import re2  # type: ignore[import-untyped]

from guard._regex import lazy_compile

__all__ = [
    "PATTERN_INPUT_LIMIT",
    "CommandPatterns",
    "Glob",
    "LiteralSet",
    "PatternError",
    "Regex",
    "RegexSet",
    "RegexSets",
    "Substitutions",
    "ToolFilter",
    "check_regexes",
    "compile_regex",
    "shell_command",
]

PATTERN_INPUT_LIMIT = 131_072
"""Characters of input a configured regular expression looks at (the head)."""


class PatternError(ValueError):
    """A pattern setting holds a regular expression RE2 refuses. ``setting``
    names the setting (``rescue.mutating_commands``), ``pattern`` is the
    entry and ``reason`` says what is wrong with it."""

    def __init__(self, setting: str, pattern: str, reason: str) -> None:
        self.setting = setting
        self.pattern = pattern
        self.reason = reason
        super().__init__(f"{setting} = {pattern!r}: {reason}")


def _options(*, capture: bool = True, case_sensitive: bool = True) -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern to stderr
    options.never_capture = not capture
    options.case_sensitive = case_sensitive
    return options


_UNSUPPORTED = (
    ("(?=", "lookahead"),
    ("(?!", "lookahead"),
    ("(?<=", "lookbehind"),
    ("(?<!", "lookbehind"),
)


_RULE = "must be a valid RE2 regular expression"


def _reason(pattern: str, error: Exception) -> str:
    detail = error.args[0].decode("utf-8", "replace")  # google-re2 reports RE2's message as bytes
    for token, what in _UNSUPPORTED:
        if token in pattern:
            return f"{_RULE}: {what} is not supported, as it can take exponential time ({detail})"
    if detail.partition("invalid escape sequence: \\")[2].isdecimal():  # "\1"; not "\x{110000}"
        return f"{_RULE}: backreferences are not supported, as they can take exponential time ({detail})"
    return f"must be a valid RE2 regular expression ({detail})"


def _compile(pattern: str, setting: str, options: Any) -> Any:
    if not isinstance(pattern, str):
        raise PatternError(setting, repr(pattern), "each entry must be a string")
    try:
        return re2.compile(pattern.encode("utf-8", "surrogatepass"), options)
    except re2.error as exc:
        raise PatternError(setting, pattern, _reason(pattern, exc)) from None


# google-re2's Python wrapper builds a match object (and, in ``sub``, expands
# the template) for every match; a yes/no answer or a literal replacement needs
# only the spans its engine returns, so those go to the engine directly.
_UNANCHORED = re2._re2.RE2.Anchor.UNANCHORED
_ANCHOR_START = re2._re2.RE2.Anchor.ANCHOR_START
_ANCHOR_BOTH = re2._re2.RE2.Anchor.ANCHOR_BOTH
_NO_MATCH = (-1, -1)


def _found(engine: Any, anchor: Any, text: str) -> bool:
    """Whether ``engine`` matches ``text`` (its head) with ``anchor``."""
    data = _encode(text)
    return bool(engine.Match(anchor, data, 0, len(data))[0] != _NO_MATCH)


def _sub_literal(engine: Any, data: bytes, replacement: bytes) -> bytes:
    """Every match of ``engine`` in ``data`` replaced by ``replacement``,
    matches found as the wrapper's ``sub`` finds them (an empty match moves
    the search on by one byte)."""
    pieces: list[bytes] = []
    end = pos = 0
    limit = len(data)
    match = engine.Match
    while True:
        start, stop = match(_UNANCHORED, data, pos, limit)[0]
        if start < 0:
            break
        pieces.append(data[end:start])
        pieces.append(replacement)
        end = stop
        if pos == limit:
            break
        pos = pos + 1 if pos == stop else stop
    if not pieces:
        return data
    pieces.append(data[end:])
    return b"".join(pieces)


def _encode(text: str) -> bytes:
    return text[:PATTERN_INPUT_LIMIT].encode("utf-8", "surrogatepass")


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # a match boundary fell inside a lone surrogate
        return data.decode("utf-8", "replace")


class Regex:
    """One compiled regular expression (RE2 syntax) over capped input.

    ``search``, ``match`` and ``fullmatch`` answer whether it matches
    anywhere, at the start, or the whole text; ``sub`` replaces every match
    (``\\1`` and ``\\g<name>`` refer to groups) and leaves text past
    ``PATTERN_INPUT_LIMIT`` as it was; ``finditer_bytes`` yields matches in
    UTF-8 the caller encoded, for callers that work on bytes.
    """

    __slots__ = ("_regexp", "pattern")

    def __init__(self, pattern: str, regexp: Any) -> None:
        self.pattern = pattern
        self._regexp = regexp

    def search(self, text: str) -> bool:
        return _found(self._regexp._regexp, _UNANCHORED, text)

    def match(self, text: str) -> bool:
        """Whether it matches at the start of ``text``."""
        return _found(self._regexp._regexp, _ANCHOR_START, text)

    def fullmatch(self, text: str) -> bool:
        """Whether it matches the whole of ``text`` (never for a text longer
        than the cap, which it cannot see whole)."""
        return len(text) <= PATTERN_INPUT_LIMIT and self._regexp.fullmatch(_encode(text)) is not None

    def sub(self, replacement: str, text: str) -> str:
        head = _encode(text)
        template = replacement.encode("utf-8", "surrogatepass")
        if b"\\" in template:  # group references: the wrapper expands them
            replaced = self._regexp.sub(template, head)
        else:
            replaced = _sub_literal(self._regexp._regexp, head, template)
        return text if replaced == head else _decode(replaced) + text[PATTERN_INPUT_LIMIT:]

    def finditer_bytes(self, data: bytes) -> Iterator[Any]:
        """RE2 match objects (``span(group)`` in bytes) over ``data``, UTF-8
        that the caller encoded and capped itself."""
        return self._regexp.finditer(data)  # type: ignore[no-any-return]

    def group_index(self, name: str) -> int:
        """The number of the group called ``name``, 0 when there is none."""
        index = self._regexp.groupindex  # keys are bytes: the pattern was compiled as UTF-8
        return int(index.get(name.encode("utf-8"), 0))

    def __repr__(self) -> str:
        return f"Regex({self.pattern!r})"


def compile_regex(pattern: str, *, setting: str = "pattern", ignore_case: bool = False) -> Regex:
    """Compile one regular expression in RE2 syntax; ``PatternError`` names
    ``setting`` when RE2 refuses it."""
    return Regex(pattern, _compile(pattern, setting, _options(case_sensitive=not ignore_case)))


def check_regexes(setting: str, patterns: Iterable[str]) -> None:
    """Raise ``PatternError`` for the first entry of ``patterns`` RE2 refuses."""
    for pattern in patterns:
        _compile(pattern, setting, _options())


class RegexSet:
    """Several regular expressions asked one question: does any match?

    They run as one RE2 alternation (captures off, so group names may
    repeat across entries), one linear pass over the capped input whatever
    their number. Each entry is compiled on its own first, so an error
    names the entry.
    """

    __slots__ = ("_any", "patterns")

    def __init__(self, patterns: Iterable[str] = (), *, setting: str = "patterns") -> None:
        self.patterns = tuple(patterns)
        check_regexes(setting, self.patterns)
        joined = "|".join(f"(?:{p})" for p in self.patterns)
        self._any = _compile(joined, setting, _options(capture=False)) if self.patterns else None

    def __bool__(self) -> bool:
        return self._any is not None

    def search(self, text: str) -> bool:
        """Whether any entry matches somewhere in ``text`` (its head)."""
        return self._any is not None and _found(self._any._regexp, _UNANCHORED, text)

    def match(self, text: str) -> bool:
        """Whether any entry matches at the start of ``text``."""
        return self._any is not None and _found(self._any._regexp, _ANCHOR_START, text)

    def fullmatch(self, text: str) -> bool:
        """Whether any entry matches the whole of ``text`` (a short value)."""
        return self._any is not None and _found(self._any._regexp, _ANCHOR_BOTH, text)


class RegexSets:
    """Several ``RegexSet`` objects asked of one text at once: one RE2 set pass
    says which of them have an entry that matches, however many there are.
    An ``anchored`` set's entries must match at the start of the text, as
    ``RegexSet.match`` asks; the others anywhere, as ``RegexSet.search``.
    The answer is a bit mask: bit ``i`` is set when the ``i``-th set matches.
    """

    __slots__ = ("_owners", "_set", "_sets")

    def __init__(self, sets: Iterable[tuple[RegexSet, bool]]) -> None:
        self._sets = tuple(sets)
        self._owners = [index for index, (regexes, _) in enumerate(self._sets) for _ in regexes.patterns]
        self._set: Any = None
        if self._owners:
            self._set = re2.Set.SearchSet(_options(capture=False))
            for regexes, anchored in self._sets:
                for pattern in regexes.patterns:
                    entry = rf"\A(?:{pattern})" if anchored else pattern
                    self._set.Add(entry.encode("utf-8", "surrogatepass"))
            try:
                self._set.Compile()
            except re2.error:  # too large together for RE2's memory bound: each set answers on its own
                self._set = None

    def matching(self, text: str) -> int:
        """The sets that match ``text`` (its head), as a bit mask."""
        found = 0
        if self._set is None:
            for index, (regexes, anchored) in enumerate(self._sets):
                if regexes.match(text) if anchored else regexes.search(text):
                    found |= 1 << index
            return found
        owners = self._owners
        for entry in self._set.Match(_encode(text)) or ():
            found |= 1 << owners[entry]
        return found


class Substitutions:
    """Regular expressions applied in order, each replacing every match of
    its own with ``replacement`` in what the ones before it left.

    The result is that of running each ``Regex.sub`` in turn, but one RE2
    set pass over the text says which entries match at all, and only those
    run; after a substitution changes the text the set looks again, so an
    entry that only matches what an earlier one wrote (a marker) still runs.
    Most texts match few entries, so the cost is near one pass, not one per
    entry.
    """

    __slots__ = ("_regexes", "_set")

    def __init__(self, patterns: Iterable[str], *, setting: str = "patterns") -> None:
        self._regexes = [compile_regex(p, setting=setting) for p in patterns]
        self._set: Any = re2.Set.SearchSet(_options())
        for regex in self._regexes:
            self._set.Add(regex.pattern.encode("utf-8", "surrogatepass"))
        try:
            self._set.Compile()
        except re2.error:  # too large together for RE2's memory bound: each runs on its own
            self._set = None

    def _matching(self, text: str, after: int) -> list[int]:
        if self._set is None:
            return list(range(after + 1, len(self._regexes)))
        return sorted(i for i in self._set.Match(_encode(text)) or () if i > after)

    def sub(self, replacement: str, text: str) -> str:
        regexes = self._regexes
        pending = self._matching(text, -1)
        while pending:
            index = pending.pop(0)
            changed = regexes[index].sub(replacement, text)
            if changed != text:
                text = changed
                pending = self._matching(text, index)
        return text


class LiteralSet:
    """Which of several literal byte strings occur in a text: one pass of an
    RE2 set, however many there are (the redaction rules' keywords)."""

    __slots__ = ("_set",)

    def __init__(self, literals: Iterable[bytes]) -> None:
        self._set = re2.Set.SearchSet(_options())
        for literal in literals:
            self._set.Add(re2.escape(literal.decode("utf-8", "surrogatepass")))
        self._set.Compile()

    def found(self, data: bytes) -> list[int]:
        """Indexes (in the order given) of the literals that occur in ``data``."""
        return self._set.Match(data) or []


class Glob:
    """A tool-name pattern: ``*`` matches any run of characters (newlines
    too), every other character is literal, and the whole name must match.

    The literal pieces between stars are found left to right, each at its
    earliest place after the previous one; for a pattern whose only
    wildcard is ``*`` that greedy scan is exact, and it never backtracks.
    """

    __slots__ = ("_first", "_last", "_middle", "_star", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        pieces = pattern.split("*")
        self._star = len(pieces) > 1
        self._first = pieces[0]
        self._last = pieces[-1] if self._star else ""
        self._middle = tuple(p for p in pieces[1:-1] if p)

    def matches(self, name: str) -> bool:
        if not self._star:
            return name == self.pattern
        first, last = self._first, self._last
        if len(name) < len(first) + len(last) or not name.startswith(first) or not name.endswith(last):
            return False
        at, end = len(first), len(name) - len(last)
        for piece in self._middle:
            found = name.find(piece, at, end)
            if found < 0:
                return False
            at = found + len(piece)
        return True

    def __repr__(self) -> str:
        return f"Glob({self.pattern!r})"


@functools.lru_cache(maxsize=64)
def _globs(patterns: tuple[str, ...]) -> tuple[Glob, ...]:
    """The patterns as globs, built once per process and shared: every
    session's guard filters tools, most with the same settings (a ``Glob``
    never changes once built)."""
    return tuple(Glob(p) for p in patterns)


class ToolFilter:
    """Which tools a policy tracks: those matching ``include`` (all when it is
    empty) and no ``exclude`` pattern. Patterns are predicates over whatever
    tools exist, so a pattern that matches nothing is valid. ``normalize``,
    when given, is applied to each tool name before matching (the patterns
    are taken as given). With ``own_names``, an MCP server's tool
    (``mcp__filesystem__edit_file``, ``developer__text_editor``) is also
    matched by its own name, the part after the server's: included when
    either name is, excluded when either is. Answers are memoized by the
    name as called: this runs on every call."""

    _MEMO_LIMIT = 4096

    def __init__(
        self,
        include: Iterable[str] = (),
        exclude: Iterable[str] = (),
        *,
        normalize: Callable[[str], str] | None = None,
        own_names: bool = False,
    ) -> None:
        self._include = _globs(tuple(include))
        self._exclude = _globs(tuple(exclude))
        self._normalize = normalize
        self._own_names = own_names
        self._memo: dict[str, bool] = {}

    def tracks(self, tool: str) -> bool:
        tracked = self._memo.get(tool)
        if tracked is None:
            server, _, own = tool.rpartition("__") if self._own_names else ("", "", "")
            names = (tool, own) if server and own else (tool,)
            tracked = any(map(self._included, names)) and not any(map(self._excluded, names))
            if len(self._memo) >= self._MEMO_LIMIT:
                self._memo.clear()
            self._memo[tool] = tracked
        return tracked

    def _included(self, tool: str) -> bool:
        name = self._normalize(tool) if self._normalize is not None else tool
        return not self._include or any(p.matches(name) for p in self._include)

    def _excluded(self, tool: str) -> bool:
        name = self._normalize(tool) if self._normalize is not None else tool
        return any(p.matches(name) for p in self._exclude)


def shell_command(args: Any) -> str | None:
    """A call's top-level ``command`` argument (a shell command, or an
    editing tool's sub-command), or without one its ``cmd`` (Codex's
    ``exec_command``); ``None`` when it has neither. A command given as an
    argv list is read only when it hands a script to a shell (Codex's
    ``shell``: ``["bash", "-lc", "git status"]`` is ``git status``, and on
    Windows ``["powershell.exe", "-NoProfile", "-Command", "Get-Content
    a.txt"]`` or ``["cmd.exe", "/c", "dir"]``): other lists (a container's
    ``["sleep", "3600"]``) are no shell command. A command string that only
    hands a script to PowerShell or cmd (``powershell -Command "Start-Sleep
    20"``, ``cmd //c timeout /t 15`` from Git Bash) is that script."""
    if not isinstance(args, dict):
        return None
    command = args.get("command")
    if command is None:
        command = args.get("cmd")
    if isinstance(command, str):
        if command[:3].lower() in _WRAPPERS:
            wrapped = _WRAPPED.match(command, 0, 512)  # the shell and its flags come first
            if wrapped is not None:
                script = command[wrapped.start(1) :].strip()
                quoted = len(script) > 1 and script[0] == script[-1] and script[0] in "'\""
                return script[1:-1] if quoted else script
        return command
    if (
        isinstance(command, list)
        and len(command) >= 3
        and all(isinstance(part, str) for part in command)
        and command[-2].lower() in _SCRIPT_FLAGS
        and command[0].replace("\\", "/").rsplit("/", 1)[-1].lower().removesuffix(".exe") in _SHELLS
        and all(part[:1] in ("-", "/") for part in command[1:-2])
    ):
        return str(command[-1])
    return None


_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "powershell", "pwsh", "cmd"})
# a command string that only hands its script to a Windows shell, flags before the script's own
_WRAPPERS = frozenset({"pow", "pws", "cmd"})
_WRAPPED = lazy_compile(
    r"(?is)\s*(?:powershell|pwsh|cmd)(?:\.exe)?(?:\s+[-/]{1,2}(?!file\b)\w+(?:\s+[^-/\s]\S*)?)*?"
    r"\s+[-/]{1,2}(?:c|command)\s+(\S.*)"
)
# the flag after which a shell's argv holds its script (any other flags before it)
_SCRIPT_FLAGS = frozenset({"-c", "-lc", "-cl", "-command", "/c"})


class CommandPatterns:
    """Regular expressions (RE2) searched in a call's top-level string
    ``command`` argument; a call without one matches none. ``setting``
    names the config key an error is reported under."""

    __slots__ = ("_patterns",)

    def __init__(self, patterns: Iterable[str] = (), *, setting: str = "patterns") -> None:
        regexes = RegexSet(patterns, setting=setting)
        self._patterns = regexes if regexes else None

    def match(self, args: Any) -> bool:
        """Whether a call's ``command`` argument matches (``args`` read with
        ``shell_command``, only when there are patterns to match)."""
        return self._patterns is not None and self.search(shell_command(args))

    def search(self, command: str | None) -> bool:
        """Whether ``command``, a call's command read with ``shell_command``
        (``None`` for a call without one), matches."""
        return command is not None and self._patterns is not None and self._patterns.search(command)
