"""Replaying a session log through a fresh guard, as verdicts."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Sequence

import msgspec

from bus import AnyEvent, ContextMessage, Event, ReadReport, Replay, ToolCall, ToolResult
from guard.actions import Action
from guard.config import Config
from guard.guard import GUARD_PLUGINS, Guard
from guard.policy import Policy

__all__ = ["ContextDifference", "ReplayOutcome", "Verdict", "replay_log"]


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """One guard action placed in its log: ``seq`` is the triggering event's
    seq in the log, ``call_number`` the 1-based ordinal of the triggering call
    among all the log's tool calls, every agent counted."""

    seq: int
    call_number: int
    agent: str | None
    policy: str
    action: str
    tool: str
    count: int
    text: str

    def json_line(self) -> str:
        """This verdict as ``replay --json`` prints it: one JSON object, the
        fields in the order above, formatted as DESIGN.md shows them."""
        return json.dumps(msgspec.to_builtins(self), ensure_ascii=False)


class ContextDifference(msgspec.Struct, frozen=True, kw_only=True):
    """A guard message the log recorded that replay did not regenerate the
    same way, or the reverse. ``index`` counts guard messages in order."""

    index: int
    recorded: str | None
    regenerated: str | None


def _key(message: ContextMessage) -> str:
    agent = message.agent.id if message.agent else None
    source = message.source
    return msgspec.json.encode(
        [agent, message.call_id, source.plugin, source.form, source.summary, message.text]
    ).decode()


class ReplayOutcome:
    """What a replay found: the verdicts in order, the reader's report, and
    the differences between recorded and regenerated guard messages."""

    def __init__(self, verdicts: list[Verdict], report: ReadReport, differences: list[ContextDifference]) -> None:
        self.verdicts = verdicts
        self.report = report
        self.differences = differences

    def counts(self) -> Counter[str]:
        return Counter(v.action for v in self.verdicts)


async def replay_log(
    path: str | os.PathLike[str],
    config: Config | None = None,
    *,
    on_verdict: Callable[[Verdict], None] | None = None,
    policies: Sequence[Policy] | None = None,
) -> ReplayOutcome:
    """Feed the log at ``path`` through a fresh bus and guard (with the
    policies ``config`` enables, or exactly ``policies``).

    The guard's own recorded messages are withheld and regenerated, so the
    outcome says both what the guard does on this log and whether that
    matches what was recorded.
    """
    replay = Replay(path, withhold=_is_guard_message)
    verdicts: list[Verdict] = []
    regenerated: list[ContextMessage] = []
    # The ordinal of each call still waiting for its result, and of the call
    # whose result is being delivered: parallel calls of one step are all
    # published before their results, so "the latest call" is not the trigger.
    open_calls: dict[tuple[str | None, str], int] = {}
    answered = 0

    def call_number(trigger: Event) -> int:
        if type(trigger) is ToolCall:
            return open_calls.get(_call_key(trigger), replay.call_number)
        return answered  # actions come from a call or from a result

    def on_action(action: Action, trigger: Event) -> None:
        verdict = Verdict(
            seq=replay.seq,
            call_number=call_number(trigger),
            agent=action.agent,
            policy=action.policy,
            action=action.action,
            tool=action.tool,
            count=action.count,
            text=action.text,
        )
        verdicts.append(verdict)
        if on_verdict is not None:
            on_verdict(verdict)

    def capture(event: Event) -> None:
        nonlocal answered
        if type(event) is ToolCall:
            open_calls[_call_key(event)] = replay.call_number
        elif type(event) is ToolResult:
            answered = open_calls.pop(_call_key(event), replay.call_number)
        elif type(event) is ContextMessage and event.source.plugin in GUARD_PLUGINS:
            regenerated.append(event)

    Guard(config, on_action=on_action, policies=policies).attach(replay.bus)
    replay.bus.record(capture)
    report = await replay.run()
    recorded = [_key(e) for e in replay.withheld if type(e) is ContextMessage]
    fresh = [_key(e) for e in regenerated]
    differences = [
        ContextDifference(
            index=i,
            recorded=recorded[i] if i < len(recorded) else None,
            regenerated=fresh[i] if i < len(fresh) else None,
        )
        for i in range(max(len(recorded), len(fresh)))
        if i >= len(recorded) or i >= len(fresh) or recorded[i] != fresh[i]
    ]
    return ReplayOutcome(verdicts, report, differences)


def _call_key(event: ToolCall | ToolResult) -> tuple[str | None, str]:
    return (event.agent.id if event.agent else None, event.call_id)


def _is_guard_message(event: AnyEvent) -> bool:
    return type(event) is ContextMessage and event.source.plugin in GUARD_PLUGINS
