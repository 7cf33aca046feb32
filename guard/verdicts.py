"""Replaying a session log through a fresh guard, as verdicts."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Sequence

import msgspec

from bus import AgentStatus, ContextMessage, Event, ReadReport, Replay
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
    """A guard output (a context message, or a halt request) the log
    recorded that replay did not regenerate the same way, or the reverse.
    ``index`` counts guard outputs in order."""

    index: int
    recorded: str | None
    regenerated: str | None


def _key(event: Event) -> str:
    agent = event.agent.id if event.agent else None
    if isinstance(event, ContextMessage):
        source = event.source
        fields = [agent, event.call_id, source.plugin, source.form, source.summary, event.text]
    else:
        assert isinstance(event, AgentStatus)
        fields = [agent, event.status, event.reason]
    return msgspec.json.encode(fields).decode()


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

    The guard's own recorded messages and halt requests are withheld and
    regenerated, so the
    outcome says both what the guard does on this log and whether that
    matches what was recorded.
    """
    replay = Replay(path, withhold=_is_guard_output)
    verdicts: list[Verdict] = []
    regenerated: list[Event] = []

    def on_action(action: Action, trigger: Event) -> None:
        verdict = Verdict(
            seq=replay.seq,
            call_number=replay.call_number,
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
        if _is_guard_output(event):
            regenerated.append(event)

    Guard(config, on_action=on_action, policies=policies).attach(replay.bus)
    replay.bus.record(capture)
    report = await replay.run()
    recorded = [_key(e) for e in replay.withheld]
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


def _is_guard_output(event: Event) -> bool:
    """The guard's own recorded output: its messages and halt requests,
    which a replay regenerates rather than re-publishes."""
    if isinstance(event, ContextMessage):
        return event.source.plugin in GUARD_PLUGINS
    return isinstance(event, AgentStatus) and event.status == "halt-requested"
