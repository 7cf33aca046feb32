"""Policy ``turns``: the same call on N consecutive turns; advise, deny, halt.

A turn is one model response (one ``step``
of an agent); it holds the set of (tool, canonical arguments) pairs it
called. When a pair appears in ``threshold`` consecutive turns the model gets
one advisory after that call's result, and the pair's count starts over. If
the run goes on, the call is denied from ``deny_after`` more turns on, and
``halt_after`` turns after the first denial the runtime is asked to end the
run. Turn bookkeeping happens at call time (``on_call``), so a call can be
denied before it runs; messages follow the result they annotate
(``on_result``).

What ends runs:

- a turn that lacks the pair ends that pair's run (and its ladder);
- a turn without tracked tool calls ends every run. It shows on the bus as
  a step gap (the next call's step is more than one past the last), a step
  that goes backwards (the runtime restarted its count), or an
  ``agent/status`` ``idle`` (the agent stopped: its last response had no
  tool calls);
- a genuine user message ends every run and resets the ladder.

Calls to ``exempt`` tools, and calls whose top-level shell ``command`` matches
one of ``exempt_commands``, are transparent: they neither count nor end a
run, and a turn that calls only exempt ones is skipped as if it did not happen.
"""

from __future__ import annotations

from msgspec.structs import force_setattr

from bus import AgentStatus, ToolCall, ToolResult, UserMessage
from guard.actions import Action, ActionKind, action_for
from guard.calls import CallSelector, Interjections
from guard.fingerprint import FingerprintCache
from guard.policies.turn_ring import Pair, TurnRing, detect_loop
from guard.policy import Policy
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

__all__ = ["TURNS_ADVISORY", "TURNS_DENIAL", "TURNS_HALT_REASON", "TurnsPolicy", "summarize_result"]

TURNS_ADVISORY = (
    "Tool-call loop detected: you have called {tool} with identical arguments in {count} consecutive turns. "
    "Its last result (truncated): {summary}\n"
    "Calling it again with the same arguments will not give a different result. Change your approach: use "
    "different arguments or a different tool, or finish the task with what you have.{warning}"
)

TURNS_DENIAL = (
    "Denied by tool-loop-guard: {tool} with identical arguments has been called in {count} consecutive turns "
    "after an advisory to change approach, so this call was not run. Its last result (truncated): {summary}\n"
    "Use different arguments or a different tool, or finish the task with what you have.{warning}"
)

TURNS_HALT_REASON = (
    "tool-loop-guard: {tool} was called with identical arguments in {count} consecutive turns despite an "
    "advisory{denials}; the run should end."
)

_DENY_WARNING = " If this call repeats in {more}, it will be denied."
_HALT_WARNING = " If this call repeats in {more}, the run will be stopped."


def summarize_result(content: str, limit: int) -> str:
    """A tool result as one short line: whitespace runs collapsed, cut at
    ``limit`` characters with a marker giving the full length. Reads at most
    ``4 * limit`` characters, so a huge result costs no more than a small one."""
    window = content[: 4 * limit]
    text = " ".join(window.split())
    if len(text) > limit or len(content) > len(window):
        return f"{text[:limit]}… ({len(content)} chars in all)"
    return text or "(empty)"


def _more(turns: int) -> str:
    return f"{turns} more consecutive turn" + ("" if turns == 1 else "s")


class _Note:
    """A tracked call of the current turn, waiting for its result: what it
    counted as and the action its result will carry (``remind``, ``halt``)."""

    __slots__ = ("count", "denied", "kind", "pair", "tool")

    def __init__(self, pair: Pair, tool: str, count: int, denied: bool, kind: ActionKind | None) -> None:
        self.pair = pair
        self.tool = tool
        self.count = count
        self.denied = denied
        self.kind = kind


class _Rung:
    """An advised pair whose run goes on: turns since the first advisory,
    and its last result that ran (denials quote it)."""

    __slots__ = ("after", "summary")

    def __init__(self) -> None:
        self.after = 0
        self.summary = "(empty)"


class _AgentTurns:
    """One agent's turn bookkeeping. ``step`` is the last step seen on any
    call; ``turn`` maps the pairs of the newest tracked turn (at
    ``turn_step``) to their notes; ``calls`` holds the current step's tracked
    calls until their results."""

    __slots__ = ("calls", "ladder", "ring", "step", "turn", "turn_step")

    def __init__(self, size: int) -> None:
        self.ring = TurnRing(size)
        self.step: int | None = None
        self.turn_step: int | None = None
        self.turn: dict[Pair, _Note] = {}
        self.ladder: dict[Pair, _Rung] = {}
        self.calls: dict[str, _Note] = {}

    def reset(self) -> None:
        """End every run and the ladder. Calls already in flight keep their
        notes (their results are still recognised) but lose their actions."""
        self.ring.clear()
        self.ladder.clear()
        self.turn = {}
        self.turn_step = None
        for note in self.calls.values():
            note.kind = None


class TurnsConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Policy ``turns``: the same call on N consecutive turns.

    ``threshold`` consecutive turns draw one advisory (0 switches the policy
    off); if the call goes on, ``deny_after`` more turns deny it and
    ``halt_after`` more after that request a halt (0 switches a rung off).
    Tools outside ``include`` or in ``exclude``, and calls whose shell
    ``command`` matches one of ``exclude_commands`` (deliberate polling
    through a shell tool), are invisible to it; ``exempt`` and
    ``exempt_commands`` are the older names of the same lists. ``summary_chars`` caps the quoted
    last result. The environment variable ``REPEAT_TOOL_GUARD_TURNS_THRESHOLD``
    overrides ``threshold`` for live guards (``apply_environment``).
    """

    threshold: int = 5
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    exclude_commands: tuple[str, ...] = ()
    exempt: tuple[str, ...] = ()
    exempt_commands: tuple[str, ...] = ()
    ignored_args: tuple[str, ...] = ()
    interjections: tuple[str, ...] = ()
    deny_after: int = 2
    halt_after: int = 2
    summary_chars: int = 200

    def __post_init__(self) -> None:
        check_bool("turns.enabled", self.enabled)
        self.check_mode("turns")
        check_int("turns.threshold", self.threshold, 0)
        if self.threshold == 1:
            raise ConfigError(
                "turns.threshold", 1, "must be 0 (off) or an integer >= 2: at 1 every call would be a loop"
            )
        check_patterns("turns.include", self.include)
        check_patterns("turns.exclude", self.exclude)
        check_regexes("turns.exclude_commands", self.exclude_commands)
        for key in ("include", "exclude", "exclude_commands"):
            force_setattr(self, key, tuple(getattr(self, key)))
        check_patterns("turns.exempt", self.exempt)
        force_setattr(self, "exempt", tuple(self.exempt))
        check_regexes("turns.exempt_commands", self.exempt_commands, default_of(self, "exempt_commands"))
        force_setattr(self, "exempt_commands", tuple(self.exempt_commands))
        check_names("turns.ignored_args", self.ignored_args)
        check_regexes("turns.interjections", self.interjections, default_of(self, "interjections"))
        force_setattr(self, "ignored_args", tuple(self.ignored_args))
        force_setattr(self, "interjections", tuple(self.interjections))
        check_int("turns.deny_after", self.deny_after, 0)
        check_int("turns.halt_after", self.halt_after, 0)
        check_int("turns.summary_chars", self.summary_chars, 1)

    @property
    def active(self) -> bool:
        """Threshold 0 switches the policy off, enabled or not."""
        return self.enabled and self.threshold > 0


class TurnsPolicy(Policy[_AgentTurns]):
    name = "turns"
    plugin = "tool-loop-guard"
    shareable = True
    section = TurnsConfig

    def __init__(self, config: TurnsConfig) -> None:
        self.config = config
        self._calls = CallSelector(
            config.include,
            (*config.exclude, *config.exempt),
            (*config.exclude_commands, *config.exempt_commands),
            config.ignored_args,
        )
        self._interjection = Interjections(config.interjections)
        self._threshold = config.threshold
        self._deny_after = config.deny_after
        self._halt_after = config.halt_after
        self._summary_chars = config.summary_chars

    def new_state(self) -> _AgentTurns:
        return _AgentTurns(max(self._threshold, 1))

    async def on_call(self, state: _AgentTurns, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        note = self._observe(state, call.tool, call.args, call.step, call.call_id, fingerprints)
        if note is None:
            return None
        state.calls[call.call_id] = note
        if not note.denied:
            return None
        summary = state.ladder[note.pair].summary
        text = TURNS_DENIAL.format(tool=call.tool, count=note.count, summary=summary, warning=self._warning(note.count))
        return action_for(call, policy=self.name, kind="deny", count=note.count, text=text, threshold=self._deny_after)

    def on_result(self, state: _AgentTurns, result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        note = state.calls.pop(result.call_id, None)
        if note is None:
            # A call the guard was not asked about (the runtime skipped
            # decide, or an earlier interceptor denied it): count it now,
            # unless it belongs to a turn that is already over.
            if state.step is not None and result.step < state.step:
                return None
            note = self._observe(state, result.tool, result.args, result.step, result.call_id, fingerprints)
            if note is None:
                return None
        rung = state.ladder.get(note.pair)
        if rung is None:  # not advised in this run: nothing to remember or say
            return None
        summary = summarize_result(result.content, self._summary_chars)
        if result.denied_by is None:
            rung.summary = summary
        if note.kind is None:
            return None
        if note.kind == "halt":
            denied = note.count - self._threshold - self._deny_after + 1 if self._deny_after else 0
            denials = f" and {denied} denied calls" if denied else ""
            text = TURNS_HALT_REASON.format(tool=note.tool, count=note.count, denials=denials)
            threshold = self._halt_after
        else:
            text = TURNS_ADVISORY.format(
                tool=note.tool, count=note.count, summary=summary, warning=self._warning(note.count)
            )
            threshold = self._threshold
        return action_for(result, policy=self.name, kind=note.kind, count=note.count, text=text, threshold=threshold)

    def on_user_message(self, state: _AgentTurns, message: UserMessage) -> None:
        if not self._interjection(message.text):
            state.reset()

    def on_status(self, state: _AgentTurns, status: AgentStatus) -> None:
        if status.status == "idle":
            state.reset()

    def _observe(
        self,
        state: _AgentTurns,
        tool: str,
        args: object,
        step: int,
        call_id: str,
        fingerprints: FingerprintCache,
    ) -> _Note | None:
        """Place one call in its turn and decide what it counts as; ``None``
        for an exempt tool."""
        if step != state.step:
            if state.step is not None and step != state.step + 1:
                state.reset()  # a turn without tool calls, or a restarted count
            state.step = step
            state.calls.clear()
        if not self._calls.tracks(tool, args):
            return None
        pair = self._calls.fingerprint(fingerprints, tool, args, call_id).digest
        if state.turn_step != step:
            if state.ladder:
                previous = state.turn
                for broken in [p for p in state.ladder if p not in previous]:
                    del state.ladder[broken]
            state.ring.open()
            state.turn = {}
            state.turn_step = step
        first = state.turn.get(pair)
        if first is not None:  # parallel calls in one turn count once
            return _Note(pair, tool, first.count, first.denied, None)
        state.ring.add(pair)
        note = self._climb(state, pair, tool)
        state.turn[pair] = note
        return note

    def _climb(self, state: _AgentTurns, pair: Pair, tool: str) -> _Note:
        """The ladder for a pair's first call in a turn."""
        threshold = self._threshold
        rung = state.ladder.get(pair)
        if rung is None:
            if not detect_loop(state.ring.turns, pair, threshold):
                return _Note(pair, tool, 0, False, None)
            state.ring.forget(pair)
            state.ladder[pair] = _Rung()
            return _Note(pair, tool, threshold, False, "remind")
        rung.after += 1
        after = rung.after
        denied = self._deny_after > 0 and after >= self._deny_after
        kind: ActionKind | None = None
        if not denied and detect_loop(state.ring.turns, pair, threshold):
            state.ring.forget(pair)
            kind = "remind"
        if self._halt_after and after == self._deny_after + self._halt_after:
            kind = "halt"
        return _Note(pair, tool, threshold + after, denied, kind)

    def _warning(self, count: int) -> str:
        """What comes next if the call repeats, for a message at run length ``count``."""
        after = count - self._threshold
        if self._deny_after and after < self._deny_after:
            return _DENY_WARNING.format(more=_more(self._deny_after - after))
        halt_at = self._deny_after + self._halt_after
        if self._halt_after and after < halt_at:
            return _HALT_WARNING.format(more=_more(halt_at - after))
        return ""
