"""Replaying a session log through a fresh guard, as verdicts."""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

import msgspec

from bus import AgentStatus, ContextMessage, Event, ReadReport, Replay
from guard.actions import Action
from guard.config import Config
from guard.guard import GUARD_PLUGINS, Guard
from guard.policy import Policy
from guard.rescue import RecordedAnswers, RescuePolicy

__all__ = [
    "ContextDifference",
    "ReplayOutcome",
    "Verdict",
    "answers_from_log",
    "is_guard_message",
    "is_guard_output",
    "replay_log",
]


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
        import json  # here: the command hook imports this module and never prints a verdict

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
    live_asks: bool = False,
) -> ReplayOutcome:
    """Feed the log at ``path`` through a fresh bus and guard (with the
    policies ``config`` enables, or exactly ``policies``).

    Escalations are answered from the log (``RecordedAnswers``): a replay
    never runs the ask command, so it spends nothing and agrees with what
    was recorded, unless ``live_asks`` is true.

    The guard's own recorded messages and halt requests are withheld and
    regenerated, so the
    outcome says both what the guard does on this log and whether that
    matches what was recorded.
    """
    replay = Replay(path, withhold=is_guard_output)
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
        if is_guard_output(event):
            regenerated.append(event)

    guard = Guard(config, on_action=on_action, policies=policies).attach(replay.bus)
    replay.bus.record(capture)
    with answers_from_log(guard, path, live_asks=live_asks):
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


@contextlib.contextmanager
def answers_from_log(guard: Guard, path: str | os.PathLike[str], *, live_asks: bool = False) -> Iterator[None]:
    """While inside, every rescue policy of ``guard`` answers escalations
    from the log at ``path`` (scanned only when a rescue policy runs), not
    by running the ask command, unless ``live_asks``; and records no trips,
    since the history's trips were recorded when they happened. On leaving,
    each gets its asker and its trip log back."""
    rescuers = [p for p in guard.policies if isinstance(p, RescuePolicy)]
    if not rescuers:
        yield
        return
    answers = None if live_asks else RecordedAnswers.from_log(path)
    previous = [(p.ask, p.trips) for p in rescuers]
    for policy in rescuers:
        policy.ask = answers or policy.ask
        policy.trips = None
    try:
        yield
    finally:
        for policy, (asker, trips) in zip(rescuers, previous, strict=True):
            policy.ask = asker
            policy.trips = trips


def is_guard_message(event: Event) -> bool:
    """A context message one of this package's policies wrote."""
    return isinstance(event, ContextMessage) and event.source.plugin in GUARD_PLUGINS


def is_guard_output(event: Event) -> bool:
    """The guard's own recorded output: its messages and halt requests,
    which a replay regenerates rather than re-publishes."""
    return is_guard_message(event) or (isinstance(event, AgentStatus) and event.status == "halt-requested")
