"""Which calls a policy sees, how their arguments are compared, and which
user messages end a run: the one seam every policy uses.

Every policy section names these settings the same way: ``include`` and
``exclude`` (tool-name patterns), ``exclude_commands`` (regexes over a shell
``command``), ``ignored_args`` (top-level argument names left out of the
comparison, for fields a harness rewrites on every call) and
``interjections`` (user messages that carry no new instruction and so do
not reset anything).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from guard.fingerprint import Fingerprint, FingerprintCache
from guard.patterns import CommandPatterns, ToolFilter, compile_regex

__all__ = ["DEFAULT_IGNORED_ARGS", "DEFAULT_INTERJECTIONS", "LOOPS_INTERJECTIONS", "CallSelector", "Interjections"]

DEFAULT_IGNORED_ARGS: tuple[str, ...] = (
    "description",
    "task_progress",
    "explanation",
    "reasoning",
    "thought",
    "comment",
    "__intent",
    "_i",
    "intent",
    "_intent",
    "metadata",
)
"""Argument names that say why a call is made, not what it does: Claude
Code's Bash ``description``, Cline's ``task_progress``, reasoning fields, and
harness intent or metadata fields (``__intent``, ``_i``). Where such a
key is all a call holds, or the tool's name names it, it is what the call
carries and is compared (``guard.fingerprint``)."""

DEFAULT_INTERJECTIONS: tuple[str, ...] = (
    r"(?i)(ok(ay)?|k|yes|yep|yeah|sure|right|fine|good|great|nice|cool|thanks?( you)?|thx|ty|done|go( on| ahead)?|"
    r"continue|proceed|keep going|carry on|next|come on|hurry( up)?|please( continue| proceed| go on)?|"
    r"try again|again|well|so|and|hm+|\?+|\.+|!+)[\s.!?,]*",
    r"(?i)(please )?(continue|proceed|go on|keep going)( please)?( with the task| where you left off| working)?"
    r"[\s.!?,]*",
    r"(?i)(please )?continue( the conversation)? from where (we|you) left( it)? off[\s.!?,]*",
    # "go on" in other languages
    r"(?i)(bitte )?(weiter|mach weiter|weitermachen|fortfahren|continue[rz]?|vas-y|allez|sigue|contin[uú]a|adelante|"
    r"dale|vai|avanti|prosegui|продолжай|дальше|давай|继续|繼續|続けて|続行|계속|계속해|ga door|verder|dalej|"
    r"kontynuuj)( bitte| por favor| s'il te plaît| per favore)?[\s.!?,。！、]*",
)
"""User messages that carry no instruction (matched whole, after trimming
whitespace): short acknowledgements and nudges ("Done", "Come on", "ok"),
the canned continuation messages runtimes send ("please continue",
"Continue from where you left off"), and "go on" in other languages
("weiter", "continúa", "继续", "続けて")."""

LOOPS_INTERJECTIONS: tuple[str, ...] = (
    r"(?i)(ok(ay)?|k|right|fine|good|great|nice|cool|thanks?( you)?|thx|ty|done|go on|"
    r"continue|proceed|keep going|carry on|next|come on|hurry( up)?|please( continue| proceed| go on)?|"
    r"well|so|and|hm+|\?+|\.+|!+)[\s.!?,]*",
    *DEFAULT_INTERJECTIONS[1:],
)
"""``DEFAULT_INTERJECTIONS`` without "again" and "try again", nor the
answers that approve what the agent proposed ("yes", "sure", "go ahead"):
a user who says "again" asks for the call once more, and one who says
"yes" to "shall I run it again?" does too, which is an instruction (as
"ja" or "oui" always were)."""


class CallSelector:
    """A section's ``include``/``exclude``/``exclude_commands`` and
    ``ignored_args``: whether a call is tracked, and its fingerprint."""

    def __init__(
        self,
        include: Iterable[str] = (),
        exclude: Iterable[str] = (),
        exclude_commands: Iterable[str] = (),
        ignored_args: Iterable[str] = (),
    ) -> None:
        self._filter = ToolFilter(include, exclude, own_names=True)
        self._commands = CommandPatterns(exclude_commands)
        self.ignored = frozenset(ignored_args)

    def tracks(self, tool: str, args: Any) -> bool:
        """Whether the policy counts this call; an untracked call neither
        counts nor resets anything."""
        return self._filter.tracks(tool) and not self._commands.match(args)

    def tracks_command(self, tool: str, command: str | None) -> bool:
        """``tracks``, for a policy that has read the call's command already
        (``guard.patterns.shell_command``) and would otherwise read it twice."""
        return self._filter.tracks(tool) and not self._commands.search(command)

    def fingerprint(self, fingerprints: FingerprintCache, tool: str, args: Any, call_id: str) -> Fingerprint:
        """The call's fingerprint with ``ignored_args`` left out."""
        return fingerprints.get(tool, args, self.ignored, call_id=call_id)


class Interjections:
    """Recognises a user message that carries no new instruction: it matches
    one of ``patterns`` in full, after trimming whitespace."""

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self._patterns = [compile_regex(p) for p in patterns]

    def __call__(self, text: str) -> bool:
        stripped = text.strip()
        return any(p.fullmatch(stripped) for p in self._patterns)
