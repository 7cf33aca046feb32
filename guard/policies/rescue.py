"""Policy ``rescue``: windowed detection, progress epochs, denial, escalation.

Where ``remind`` counts consecutive identical calls (so any other
call in between resets it, and a cycle like ``grep X ×5, read Y`` is never
caught), ``rescue`` counts how often a call's signature occurs among the
agent's last ``window`` tracked calls, so a cycle of any period is caught.
Observations only count while nothing changes: a successful call that
changed something (``guard.policies.progress``: a mutating tool, or a shell command
that edits files), or a genuine user message, starts a new progress epoch and
voids them all, which is what lets an edit-build-edit-build cycle through.
The same edit made again (identical arguments to the editing call that
opened the epoch) changed nothing and is not progress.

At ``nudge_at`` occurrences the call is denied before it runs and the
guidance becomes its result. At ``rescue_at`` occurrences (or when
``stall_at`` redundant calls pile up in one epoch) the policy asks a stronger
model, through the ask command, for one concrete way forward, and that
advice rides the denial. Advice is bought once per signature per epoch,
``max_rescues`` times per agent per session, at least ``cooldown_ms`` apart
(measured on event timestamps, so replays agree); a failed ask refunds the
budget and falls back to the free local denial.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import os
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, Self

import msgspec
from msgspec.structs import force_setattr

from bus import AnyEvent, ContextMessage, ToolCall, ToolResult, UserMessage
from guard.actions import SHADOW_FORM, Action, action_for
from guard.calls import DEFAULT_IGNORED_ARGS, DEFAULT_INTERJECTIONS, CallSelector, Interjections
from guard.fingerprint import Fingerprint, FingerprintCache
from guard.patterns import shell_command
from guard.policies.escalation import AskCommand, AskOutcome, as_argument
from guard.policies.progress import (
    DEFAULT_MUTATING_COMMANDS,
    DEFAULT_MUTATING_TOOLS,
    ProgressRule,
    check_loose_patterns,
)
from guard.policies.trips import Trip, TripKind, TripLog, TripTrigger
from guard.policy import History, Policy
from guard.redact import Excerpt, Redactor
from guard.section import (
    ConfigError,
    Section,
    check_bool,
    check_int,
    check_names,
    check_patterns,
    check_regexes,
    default_of,
)

__all__ = ["RESCUE_PLUGIN", "Asker", "RecordedAnswers", "RescuePolicy", "advice_in"]

RESCUE_PLUGIN = "loop-rescue"
_MENTIONED = RESCUE_PLUGIN.encode()
"""What every log line of a rescue denial holds (its ``denied_by``, or the
``source.plugin`` of its shadow record): the recorded answers are read from
those lines alone."""

_SHADOW_SOURCE = (RESCUE_PLUGIN, SHADOW_FORM)
"""The source of a rescue denial's record in shadow mode, where no call is denied."""

_ARGUMENTS_PREVIEW = 500
_QUESTION_TASK = 4000
_QUESTION_ARGUMENTS = 2000
_QUESTION_OUTPUT = 6000
_REASON_CHARS = 200
_SEEN_KEPT = 4096
"""Distinct calls an agent's epoch remembers, to tell a redundant call."""
"""A failed ask's reason as the trip log keeps it, redacted first."""
_QUESTION_RECENT = 300
_QUESTION_TOOL = 200
_QUESTION_BYTES = 100_000
"""The whole question at most, in UTF-8 as the ask command gets it
(``as_argument``): it is one argument, and Linux refuses one over 128 KiB."""
_LEFT_OUT = f"({{n}} earlier calls left out: the question is capped at {_QUESTION_BYTES} bytes)"
"""The question's last line when its oldest recent calls do not fit (ASCII: its length is its bytes)."""

_REPEAT_HEAD = (
    "loop-rescue denied this call; it did not run.\n"
    "You have made this exact call {count} times in your last {seen} tool calls, with nothing changed in between:\n"
    "- tool: {tool}\n"
    "- arguments: {arguments}\n"
)
_STALL_HEAD = (
    "loop-rescue denied this call; it did not run.\n"
    "You have made {redundant} redundant tool calls since anything last changed (no successful edit, no new "
    "user message), and this call repeats one of them:\n"
    "- tool: {tool}\n"
    "- arguments: {arguments}\n"
)
_LOCAL_GUIDANCE = (
    "Repeating it would return the output you already have. Re-read that output and act on it: use what it "
    "tells you, try a different approach or different arguments, or finish the task if you have enough "
    "evidence. Only this exact call is blocked; other calls still run."
)
_ADVICE = (
    "A stronger model reviewed your task, this call and the output you already have, and advises:\n\n"
    "{advice}\n\n"
    "Follow that advice instead of repeating the call. Only this exact call is blocked; other calls still run."
)

_QUESTION = """\
An AI agent working on a task is stuck in a loop: it keeps repeating a tool call that cannot tell it anything new.
Reply with ONE concrete next action it should take instead: a specific different step, or the conclusion it can \
already draw from the output it has. A few sentences, no questions back. You cannot run tools; answer from \
this text alone.

## The agent's task
{task}

## The repeated call ({why})
tool: {tool}
arguments: {arguments}

## The output the agent already has from this call
{output}

## Its recent calls, oldest first
"""


class Asker(Protocol):
    """Where escalations go: the ask command, or a record of its answers."""

    async def ask(self, question: str, call: ToolCall | None = None) -> AskOutcome: ...


_ADVICE_HEAD, _ADVICE_TAIL = _ADVICE.split("{advice}")


def advice_in(denial: str) -> str | None:
    """The advice a rescue denial text quotes, or ``None`` for a denial
    that carries none (a local denial, a failed escalation). Only for
    denials recorded without their ``advice`` field."""
    start = denial.find(_ADVICE_HEAD)
    if start < 0 or not denial.endswith(_ADVICE_TAIL):
        return None
    return denial[start + len(_ADVICE_HEAD) : len(denial) - len(_ADVICE_TAIL)]


class RecordedAnswers:
    """Answers escalations from a recorded session instead of running the
    ask command: the advice each rescue denial in the log carried. A
    denial of ``rescue`` in shadow mode is recorded only as a shadow
    ``context/message`` (no call was denied): its text quotes the advice.

    Replaying a log (``replay``, ``audit``, the Claude Code hook rebuilding
    its state) must neither spend money nor depend on what a model says
    today. An escalation the record answered gets the same advice; one it
    did not (the original ask failed, or the log came from elsewhere) fails
    the same way, refunding the budget as the original did.

    A call's answer is the first rescue denial recorded under its agent and
    call id at or after the call's ``ts`` (a replay stamps each event with
    its recorded ``ts``): the denial that answered it, also when a runtime
    names every call alike (``call_0``). ``answers`` given directly answer
    any call under their key.
    """

    def __init__(self, answers: Mapping[tuple[str | None, str], str] | None = None) -> None:
        self._recorded: dict[tuple[str | None, str], list[tuple[float, str | None]]] = {
            key: [(math.inf, advice)] for key, advice in (answers or {}).items()
        }

    @property
    def answers(self) -> dict[tuple[str | None, str], str]:
        """The advice last recorded under each agent and call id."""
        latest: dict[tuple[str | None, str], str] = {}
        for key, denials in self._recorded.items():
            for _, advice in denials:
                if advice is not None:
                    latest[key] = advice
        return latest

    @classmethod
    def from_log(cls, path: str | os.PathLike[str]) -> RecordedAnswers:
        """Collect the advice of every rescue denial in the log at ``path``:
        its ``advice`` field, or, for a denial recorded without one (logs
        written before the field, or by a runtime that dropped it), the
        advice its text quotes."""
        return cls.from_history(History(path))

    @classmethod
    def from_history(cls, history: History) -> RecordedAnswers:
        """``from_log`` for any recorded history: of a log, only the lines
        that name this plugin are decoded."""
        return cls.from_events(history.events(containing=_MENTIONED))

    @classmethod
    def from_events(cls, events: Iterable[AnyEvent]) -> RecordedAnswers:
        """``from_log`` for events already read (a session's stream, say)."""
        answers = cls()
        recorded = answers._recorded
        for event in events:
            # a denial without advice is kept too: it says that call's escalation failed
            if type(event) is ToolResult and event.denied_by == RESCUE_PLUGIN:
                advice = event.advice if isinstance(event.advice, str) else advice_in(event.content)
            elif type(event) is ContextMessage and (event.source.plugin, event.source.form) == _SHADOW_SOURCE:
                advice = advice_in(event.text)
            else:
                continue
            key = (event.agent.id if event.agent else None, event.call_id)
            recorded.setdefault(key, []).append((event.ts, advice))
        for denials in recorded.values():
            denials.sort(key=_recorded_at)  # stable: a log's order among denials stamped alike
        return answers

    async def ask(self, question: str, call: ToolCall | None = None) -> AskOutcome:
        key = (call.agent.id if call is not None and call.agent else None, call.call_id if call else "")
        denials = self._recorded.get(key, ())
        at = bisect.bisect_left(denials, call.ts if call is not None else -math.inf, key=_recorded_at)
        advice = denials[at][1] if at < len(denials) else None
        if advice is None:
            return AskOutcome(advice=None, reason="the recorded session has no answer for this call", elapsed_ms=0.0)
        return AskOutcome(advice=advice, reason="answered from the recorded session", elapsed_ms=0.0)


def _recorded_at(denial: tuple[float, str | None]) -> float:
    return denial[0]


class _Pending:
    """An ask in flight for one signature; parallel calls of it wait here.

    The event is made by the first call that waits: a process that drives
    the guard without an event loop (the command hook) never has a parallel
    call, and cannot make one."""

    __slots__ = ("_event", "advice")

    def __init__(self) -> None:
        self.advice: str | None = None
        self._event: Any = None

    async def wait(self) -> None:
        if self._event is None:
            import anyio

            self._event = anyio.Event()
        await self._event.wait()

    def finish(self) -> None:
        if self._event is not None:
            self._event.set()


class _Hit:
    """A tracked call that crossed a threshold, and what the agent's state
    looked like then (an ask may outlive the epoch it was made in)."""

    __slots__ = ("call", "count", "epoch", "fp", "redundant", "seen", "trigger")

    def __init__(self, state: _AgentState, call: ToolCall, fp: Fingerprint, count: int, trigger: TripTrigger) -> None:
        self.call = call
        self.fp = fp
        self.count = count
        self.trigger = trigger
        self.seen = len(state.window)
        self.redundant = state.redundant
        self.epoch = state.epoch


class _AgentState:
    """One agent's observations (reset every epoch) and its budget (never reset)."""

    __slots__ = (
        "advice",
        "counts",
        "epoch",
        "last_ask",
        "opener",
        "outputs",
        "pending",
        "redundant",
        "seen",
        "task",
        "used",
        "window",
    )

    def __init__(self) -> None:
        # (tool, digest, arguments excerpt): bounded, so memory does not grow
        # with argument size.
        self.window: deque[tuple[str, bytes, Excerpt]] = deque()
        self.counts: dict[bytes, int] = {}
        self.seen: dict[bytes, None] = {}
        self.redundant = 0
        self.outputs: dict[bytes, Excerpt] = {}
        self.advice: dict[bytes, str] = {}
        self.pending: dict[bytes, _Pending] = {}
        self.epoch = 0
        self.opener: bytes | None = None
        self.task = ""
        self.used = 0
        self.last_ask: float | None = None

    def new_epoch(self, opener: bytes | None = None) -> None:
        """Void every observation. ``opener`` is the digest of the editing
        call that made the progress, if one did."""
        self.epoch += 1
        self.opener = opener
        self.window.clear()
        self.counts.clear()
        self.seen.clear()
        self.redundant = 0
        self.outputs.clear()
        self.advice.clear()

    def observe(self, tool: str, fp: Fingerprint, size: int) -> tuple[int, bool]:
        """Add a call to the window: its occurrences there, and whether it
        repeats a call made earlier in the epoch."""
        window = self.window
        counts = self.counts
        if len(window) == size:
            old = window.popleft()[1]
            left = counts[old] - 1
            if left:
                counts[old] = left
            else:
                del counts[old]
                self.outputs.pop(old, None)
        digest = fp.digest
        window.append((tool, digest, Excerpt.of(fp.canonical.decode("utf-8", "replace"), _QUESTION_RECENT)))
        count = counts.get(digest, 0) + 1
        counts[digest] = count
        seen = self.seen
        if digest in seen:
            self.redundant += 1
            return count, True
        seen[digest] = None
        if len(seen) > _SEEN_KEPT:  # an epoch of endless new calls: the oldest are long out of any loop
            del seen[next(iter(seen))]
        return count, False


class RescueConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Policy ``rescue``: windowed detection, denial, escalation.

    Keys are the rescue guard's names in snake_case; ``mutating_commands``,
    ``escalation_tools`` and ``redact_patterns`` are additions (docs/policies/rescue.md). A relative
    ``ask_command`` or ``log_file`` in a config file is resolved against the
    file's directory by ``load_config``.
    """

    window: int = 12
    nudge_at: int = 3
    rescue_at: int = 5
    stall_at: int = 40
    max_rescues: int = 3
    cooldown_ms: int = 45_000
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ("todo_write", "ask_user", "mcp__claude__*")
    exclude_commands: tuple[str, ...] = ()
    ignored_args: tuple[str, ...] = DEFAULT_IGNORED_ARGS
    interjections: tuple[str, ...] = DEFAULT_INTERJECTIONS
    mutating_tools: tuple[str, ...] = DEFAULT_MUTATING_TOOLS
    mutating_commands: tuple[str, ...] = DEFAULT_MUTATING_COMMANDS
    escalation_tools: tuple[str, ...] = ("mcp__claude__*",)
    ask_command: str = "~/.local/bin/ask-claude"
    ask_model: str = "opus"
    ask_timeout_ms: int = 45_000
    redact_patterns: tuple[str, ...] = ()
    log_file: str = ""

    def __post_init__(self) -> None:
        check_bool("rescue.enabled", self.enabled)
        self.check_mode("rescue")
        check_int("rescue.nudge_at", self.nudge_at, 2)
        check_int("rescue.rescue_at", self.rescue_at, 3)
        check_int("rescue.window", self.window, 3)
        check_int("rescue.stall_at", self.stall_at, 0)
        check_int("rescue.max_rescues", self.max_rescues, 0)
        check_int("rescue.cooldown_ms", self.cooldown_ms, 0)
        check_int("rescue.ask_timeout_ms", self.ask_timeout_ms, 1)
        if self.rescue_at <= self.nudge_at:
            raise ConfigError("rescue.rescue_at", self.rescue_at, f"must exceed rescue.nudge_at ({self.nudge_at})")
        if self.window < self.rescue_at:
            raise ConfigError("rescue.window", self.window, f"must be at least rescue.rescue_at ({self.rescue_at})")
        if self.stall_at and self.stall_at < self.rescue_at:
            rule = f"must be 0 (disabled) or at least rescue.rescue_at ({self.rescue_at})"
            raise ConfigError("rescue.stall_at", self.stall_at, rule)
        check_patterns("rescue.include", self.include)
        check_patterns("rescue.exclude", self.exclude)
        check_regexes("rescue.exclude_commands", self.exclude_commands, default_of(self, "exclude_commands"))
        check_names("rescue.ignored_args", self.ignored_args)
        check_regexes("rescue.interjections", self.interjections, default_of(self, "interjections"))
        check_loose_patterns("rescue.mutating_tools", self.mutating_tools)
        check_regexes("rescue.mutating_commands", self.mutating_commands, default_of(self, "mutating_commands"))
        check_patterns("rescue.escalation_tools", self.escalation_tools)
        check_regexes("rescue.redact_patterns", self.redact_patterns, default_of(self, "redact_patterns"))
        for key in ("ask_command", "ask_model"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"rescue.{key}", value, "must be a non-empty string")
        if not isinstance(self.log_file, str):
            raise ConfigError("rescue.log_file", self.log_file, "must be a string ('' disables the trip log)")
        for key in ("ask_command", "ask_model", "log_file"):
            value = getattr(self, key)
            if "\x00" in value:
                raise ConfigError(f"rescue.{key}", value, "must not hold a NUL character")
            try:
                os.fsencode(value)  # a path or an environment value: what the operating system is given
            except UnicodeEncodeError:
                raise ConfigError(
                    f"rescue.{key}", value, "holds a lone surrogate, which no file name or program takes"
                ) from None
        for key in (
            "include",
            "exclude",
            "exclude_commands",
            "ignored_args",
            "interjections",
            "mutating_tools",
            "mutating_commands",
            "escalation_tools",
        ):
            force_setattr(self, key, tuple(getattr(self, key)))
        force_setattr(self, "redact_patterns", tuple(self.redact_patterns))

    def relative_to(self, base: Path) -> Self:
        """This section with a relative ``ask_command`` path (one with a
        slash; a bare name is looked up on ``PATH``) and a relative
        ``log_file`` resolved against ``base``."""
        changes: dict[str, str] = {}
        command = self.ask_command
        if "/" in command and not command.startswith("~") and not Path(command).is_absolute():
            changes["ask_command"] = str(base / command)
        log_file = self.log_file
        if log_file and not log_file.startswith("~") and not Path(log_file).is_absolute():
            changes["log_file"] = str(base / log_file)
        return msgspec.structs.replace(self, **changes) if changes else self


class RescuePolicy(Policy[_AgentState]):
    """The loop rescue: window, progress epochs, denial, escalation. Denials are ``by`` the plugin ``loop-rescue``."""

    name = "rescue"
    plugin = RESCUE_PLUGIN
    section = RescueConfig
    waits = True  # an escalation asks a model; the agent's parallel calls share or outlive the ask

    def __init__(self, config: RescueConfig, *, ask: Asker | None = None) -> None:
        self.config = config
        self._calls = CallSelector(
            config.include, (*config.exclude, *config.escalation_tools), config.exclude_commands, config.ignored_args
        )
        self._progress = ProgressRule(config.mutating_tools, config.mutating_commands)
        self._interjection = Interjections(config.interjections)
        self._window = config.window
        self._nudge_at = config.nudge_at
        self._rescue_at = config.rescue_at
        self._stall_at = config.stall_at
        self._cooldown = config.cooldown_ms / 1000
        self.command = AskCommand(config.ask_command, model=config.ask_model, timeout_ms=config.ask_timeout_ms)
        self.ask: Asker = ask or self.command
        self._redact = Redactor(config.redact_patterns)
        self.trips: TripLog | None = TripLog(config.log_file)
        """Where trips are recorded; ``None`` while history is replayed, whose
        trips were recorded when they happened."""

    def new_state(self) -> _AgentState:
        return _AgentState()

    @contextlib.contextmanager
    def replaying(self, history: History) -> Iterator[None]:
        """Escalations are answered from the advice ``history`` recorded
        (``RecordedAnswers``; asked live when ``history.answered`` is
        false), and no trip is recorded: the history's trips were recorded
        when they happened. On leaving, the asker and trip log are back."""
        previous = (self.ask, self.trips)
        if history.answered:
            self.ask = RecordedAnswers.from_history(history)
        self.trips = None
        try:
            yield
        finally:
            self.ask, self.trips = previous

    def _tracks(self, tool: str, args: Any) -> bool:
        return self._calls.tracks(tool, args)

    async def on_call(self, state: _AgentState, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        if not self._tracks(call.tool, call.args):
            return None
        fp = self._calls.fingerprint(fingerprints, call.tool, call.args, call.call_id)
        count, redundant = state.observe(call.tool, fp, self._window)
        hit = None
        if count >= self._rescue_at:
            hit = _Hit(state, call, fp, count, "repeat")
        elif redundant and self._stall_at and state.redundant % self._stall_at == 0:
            hit = _Hit(state, call, fp, count, "stall")
        if hit is not None:
            if call.late is True:  # the call already ran: advice bought now could stop nothing
                return self._trip(state, hit, "deny", reason="the call had already run")
            return await self._escalate(state, hit)
        if count >= self._nudge_at:
            return self._trip(state, _Hit(state, call, fp, count, "repeat"), "deny")
        return None

    def on_result(self, state: _AgentState, result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        if result.denied_by is not None:
            return None
        progress = None if result.is_error else self._progress.kind(result.tool, shell_command(result.args))
        if progress is not None:
            opener = None
            if progress == "edit":
                opener = self._calls.fingerprint(fingerprints, result.tool, result.args, result.call_id).digest
                if opener == state.opener:
                    return None  # the edit that opened this epoch, made again: it changed nothing
            state.new_epoch(opener)
        elif state.counts and self._tracks(result.tool, result.args):
            digest = self._calls.fingerprint(fingerprints, result.tool, result.args, result.call_id).digest
            if digest in state.counts:
                state.outputs[digest] = Excerpt.of(result.content, _QUESTION_OUTPUT)
        return None

    def on_user_message(self, state: _AgentState, message: UserMessage) -> None:
        if self._interjection(message.text):
            return
        state.new_epoch()
        state.task = message.text

    async def _escalate(self, state: _AgentState, hit: _Hit) -> Action:
        digest = hit.fp.digest
        advice = state.advice.get(digest)
        if advice is not None:
            return self._trip(state, hit, "rescue", advice, cached=True)
        pending = state.pending.get(digest)
        if pending is not None:
            await pending.wait()
            if pending.advice is not None:
                return self._trip(state, hit, "rescue", pending.advice, cached=True)
            return self._trip(state, hit, "deny", reason="a parallel ask for this call failed")
        limit = self.config.max_rescues
        if state.used >= limit:
            return self._trip(state, hit, "deny", reason=f"rescue budget spent ({limit} asks)")
        since = None if state.last_ask is None else hit.call.ts - state.last_ask
        if since is not None and since < self._cooldown:
            return self._trip(state, hit, "deny", reason=f"cooldown ({self._cooldown - since:.1f} s left)")
        question = self._question(state, hit)
        previous = state.last_ask
        state.used += 1
        state.last_ask = hit.call.ts
        pending = state.pending[digest] = _Pending()
        outcome: AskOutcome | None = None
        try:
            outcome = await self.ask.ask(question, hit.call)
        finally:
            del state.pending[digest]
            if outcome is None:  # cancelled: as if never asked, so the next repeat asks again
                state.used -= 1
                if state.last_ask == hit.call.ts:  # no later ask has started its own cooldown
                    state.last_ask = previous
            elif outcome.advice is None:
                state.used -= 1  # a failed ask costs nothing; its cooldown stands
            else:
                pending.advice = outcome.advice
                if state.epoch == hit.epoch:
                    state.advice[digest] = outcome.advice
            pending.finish()
        if outcome.advice is None:
            # the ask command's own words may hold anything; the other reasons are ours
            reason = self._redact.capped(outcome.reason, _REASON_CHARS)
            return self._trip(state, hit, "escalation-failed", ask_ms=outcome.elapsed_ms, reason=reason)
        return self._trip(state, hit, "rescue", outcome.advice, ask_ms=outcome.elapsed_ms)

    def _question(self, state: _AgentState, hit: _Hit) -> str:
        if hit.trigger == "repeat":
            why = f"made {hit.count} times in its last {hit.seen} tool calls"
        else:
            why = f"the latest of {hit.redundant} redundant calls since anything last changed"
        redact = self._redact
        output = state.outputs.get(hit.fp.digest)
        question = as_argument(
            _QUESTION.format(
                task=redact.capped(state.task, _QUESTION_TASK) or "(no user message recorded)",
                why=why,
                tool=redact.capped(hit.call.tool, _QUESTION_TOOL),
                arguments=redact.capped(hit.fp.canonical.decode("utf-8", "replace"), _QUESTION_ARGUMENTS),
                output=redact.capped(output, _QUESTION_OUTPUT)
                if output is not None and output.total
                else "(none: every earlier attempt was denied or printed nothing)",
            )
        )
        # The question is one argument of the ask command, which the system caps (128 KiB on Linux): measured as
        # that argument, the recent calls fill what is left, newest kept, with room kept for the line that says
        # how many were left out.
        room = _QUESTION_BYTES - len(question.encode()) - len(_LEFT_OUT.format(n=len(state.window))) - 1
        recent: list[str] = []
        for n in range(len(state.window), 0, -1):
            tool, _, args = state.window[n - 1]
            line = as_argument(f"{n}. {redact.capped(tool, _QUESTION_TOOL)} {redact.capped(args, _QUESTION_RECENT)}")
            room -= len(line.encode()) + 1
            if room < 0:
                recent.append(_LEFT_OUT.format(n=n))
                break
            recent.append(line)
        return question + "\n".join(reversed(recent)) + "\n"

    def _trip(
        self,
        state: _AgentState,
        hit: _Hit,
        kind: TripKind,
        advice: str | None = None,
        *,
        cached: bool = False,
        ask_ms: float | None = None,
        reason: str | None = None,
    ) -> Action:
        call = hit.call
        arguments = hit.fp.preview(_ARGUMENTS_PREVIEW)
        if hit.trigger == "repeat":
            head = _REPEAT_HEAD.format(count=hit.count, seen=hit.seen, tool=call.tool, arguments=arguments)
            shown, threshold = hit.count, self._rescue_at if hit.count >= self._rescue_at else self._nudge_at
        else:
            head = _STALL_HEAD.format(redundant=hit.redundant, tool=call.tool, arguments=arguments)
            shown, threshold = hit.redundant, self._stall_at
        if self.trips is not None:
            # a record kept outside the agent, as the live page and `watch` are: an id or a tool's name (an MCP
            # tool's may carry its server's URL) can hold a credential
            redact = self._redact
            self.trips.record(
                Trip(
                    ts=call.ts,
                    kind=kind,
                    agent=redact(call.agent.id) if call.agent is not None else None,
                    tool=redact(call.tool),
                    call_id=call.call_id,
                    signature=hit.fp.digest.hex(),
                    count=hit.count,
                    epoch=hit.epoch,
                    trigger=hit.trigger,
                    redundant=hit.redundant,
                    rescues_used=state.used,
                    cached=cached,
                    ask_ms=ask_ms,
                    reason=reason,
                )
            )
        text = head + (_LOCAL_GUIDANCE if advice is None else _ADVICE.format(advice=advice))
        return action_for(call, policy=self.name, kind=kind, count=shown, text=text, threshold=threshold, advice=advice)
