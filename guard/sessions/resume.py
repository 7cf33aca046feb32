"""Rebuilding a live guard from a session's recorded events: from a session
log, for runtimes that call the guard from a fresh process each time (Claude
Code command hooks), or from events read elsewhere (a Redis stream), for a
live session that another process moved on.

Both ways apply the history the same way: the guard sees it as in a replay
(its own recorded context messages withheld and regenerated, recorded halt
requests re-published, escalations answered from the record, no trip
recorded again), each agent's link gets the step, open calls and halt
request the history leaves it with, and the link gets back the latest
answers a hook route keeps for copies of the events that asked them
(``GuardLink.answers``), rebuilt from the events each answer's request
recorded."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bus import (
    AgentStatus,
    AnyEvent,
    Bus,
    ContextMessage,
    Decision,
    Event,
    LogError,
    Replay,
    SessionLog,
    ToolCall,
    ToolResult,
    UserMessage,
)
from guard.actions import SHADOW_FORM
from guard.config import Config
from guard.guard import ActionListener, Guard
from guard.sessions.answer import Answer, KeptAnswer, call_digest, result_digest, retry_key
from guard.sessions.link import ANSWERS_KEPT, GuardLink, LinkState
from guard.sessions.restore import regenerated, replaying

__all__ = ["follow", "resume_link"]


class _Tracker:
    """Follows each agent through a replay: where it stands (``LinkState``)
    and whether it was disposed. Starts from the agents ``link`` has live
    (none for a restore from nothing)."""

    def __init__(self, link: GuardLink | None = None) -> None:
        self.agents: dict[str, LinkState] = {}
        self.disposed: set[str] = set()
        self.kept = _Kept()
        for live in link.links() if link is not None else ():
            self.agents[live.agent.id] = live.state()

    def __call__(self, event: Event) -> None:
        agent = event.agent
        if agent is None:
            return
        state = self.agents.get(agent.id)
        if state is None:
            state = self.agents[agent.id] = LinkState(agent)
        self.kept.see(event, state)
        self.disposed.discard(agent.id)
        if isinstance(event, ToolCall):
            if event.step > state.step:
                state.step = event.step
                state.step_done = False
            state.calls[event.call_id] = event
        elif isinstance(event, ToolResult):
            newest = next(reversed(state.calls), None)
            state.calls.pop(event.call_id, None)
            if event.call_id == newest and state.calls and not state.steps_reported:
                state.step_done = True  # as AgentLink infers it: the older calls were never run
        elif isinstance(event, UserMessage):
            state.halt_reason = None
        elif isinstance(event, AgentStatus):
            if event.status == "halt-requested":
                state.halt_reason = event.reason or "the guard requested a halt"
            elif event.status == "started" and event.parent is not None:
                # a subagent reports steps as its parent does when it starts (the hooks' rule)
                parent = self.agents.get(event.parent)
                state.steps_reported = parent is not None and parent.steps_reported
            elif event.status == "disposed":
                # an agent back under the same id (a resumed session) starts afresh, as a live link's would
                self.agents[agent.id] = LinkState(agent)
                self.disposed.add(agent.id)
            elif event.status == "step-done":
                state.step_done = state.steps_reported = True
            elif event.status == "idle":
                state.step_done = True

    def restart(self) -> None:
        """Forget the agents an earlier run of the log left: a new run
        starts with none."""
        self.agents.clear()
        self.disposed.clear()
        self.kept = _Kept()

    def settle(self, link: GuardLink) -> None:
        """Give ``link`` the agents the replayed events leave live, each as
        they leave it: new ones adopted, disposed ones forgotten. A guard
        message a request left waiting in an agent's ``pending`` is dropped,
        as a restore would drop it: the session moved on elsewhere."""
        live = {agent.agent: agent for agent in link.links()}
        for state in self.agents.values():
            agent = live.get(state.agent)
            if state.agent.id in self.disposed:
                if agent is not None:
                    link._forget(state.agent)
                continue
            if agent is None:
                agent = link.adopt(state.agent)
            agent.restore(state)
            agent.pending.clear()
        for key, answer in self.kept.answers(self.agents):
            link.answers.add(key, answer)


class _Kept:
    """The answers a hook route keeps for copies (``GuardLink.answers``),
    rebuilt from recorded history as the route kept them: a denied call's
    and each result's, each with the guard's messages its request recorded
    for that call and the halt request standing once it was answered.

    It sees every event of a restore, so it does as little per event as it
    can: the answers are made, and small results hashed, only for the
    latest ``ANSWERS_KEPT`` at the end (a large result is hashed at once,
    so no tool's output is held)."""

    def __init__(self) -> None:
        self._open: dict[str, list[Any]] = {}
        """Each agent's latest call or result while its request's events
        follow: ``[event, decision, messages]``."""
        self._done: dict[tuple[bool, str, str], tuple[ToolCall | ToolResult | bytes, int, Any, Any, str | None]] = {}
        """Closed answers by (result?, agent, call id), oldest first: the
        event (or its digest), its seq, decision, messages and halt."""
        self._denials = 0
        """How many of ``_done`` are denials (a new call must drop its id's)."""

    def see(self, event: Event, state: LinkState) -> None:
        """Take ``event`` of ``state``'s agent (as it stood before it)."""
        kind = type(event)
        seen: Any = event  # its type is told by ``kind``
        agent_id = state.agent.id
        asked = self._open.get(agent_id)
        if kind is ContextMessage:
            if asked is not None and seen.call_id == asked[0].call_id and seen.source.form != SHADOW_FORM:
                if asked[2] is None:
                    asked[2] = []
                asked[2].append(seen)
            return
        if kind is AgentStatus and seen.status == "halt-requested":
            return  # the tracker keeps it: it stands once the request is answered
        if (
            kind is ToolResult
            and seen.denied_by is not None
            and asked is not None
            and type(asked[0]) is ToolCall
            and asked[0].call_id == seen.call_id
        ):
            advice = seen.advice if isinstance(seen.advice, str) else None
            asked[1] = Decision.deny(seen.content, seen.denied_by, advice=advice)
            return
        if asked is not None:
            self._close(agent_id, asked, state.halt_reason)
        if kind is ToolCall:
            if self._denials and self._done.pop((False, agent_id, seen.call_id), None) is not None:
                self._denials -= 1  # the id names this call now
            self._open[agent_id] = [seen, None, None]
        elif kind is ToolResult:
            self._open[agent_id] = [seen, None, None]

    def _close(self, agent_id: str, asked: list[Any], halt: str | None) -> None:
        del self._open[agent_id]
        event, decision, messages = asked
        result = type(event) is ToolResult
        if not result and decision is None:
            return  # an allowed call's copy is told by the call still running
        key, seq = (result, agent_id, event.call_id), event.seq
        done = self._done
        if done.pop(key, None) is None and not result:
            self._denials += 1
        if result and len(event.content) > _HASHED_AT_ONCE:
            event = result_digest(event.content, event.is_error)
        done[key] = (event, seq, decision, messages, halt)
        if len(done) > 2 * ANSWERS_KEPT:
            for stale in list(done)[:-ANSWERS_KEPT]:
                if not stale[0]:
                    self._denials -= 1
                del done[stale]

    def answers(self, agents: dict[str, LinkState]) -> list[tuple[str, KeptAnswer]]:
        """The latest ``ANSWERS_KEPT`` answers, oldest first; ``agents``
        are where the history leaves each agent (for the answers still open)."""
        for agent_id, asked in list(self._open.items()):
            self._close(agent_id, asked, agents[agent_id].halt_reason)
        kept: list[tuple[str, KeptAnswer]] = []
        for (result, agent_id, call_id), (event, seq, decision, messages, halt) in list(self._done.items())[
            -ANSWERS_KEPT:
        ]:
            if isinstance(event, ToolCall):
                digest = call_digest(event.tool, event.args)
            elif isinstance(event, ToolResult):
                digest = result_digest(event.content, event.is_error)
            else:
                digest = event
            answer = Answer(seq=seq, decision=decision, messages=tuple(messages or ()), halt=halt)
            key = retry_key("tool/result" if result else "tool/call", agent_id, call_id)
            kept.append((key, KeptAnswer(digest, answer)))
        return kept


_HASHED_AT_ONCE = 16_384
"""Characters of a result above which its digest is taken when it closes
rather than at the end: at most ``2 * ANSWERS_KEPT`` smaller ones are held."""


def _history(guard: Guard, tracker: _Tracker, path: Path | None = None) -> Replay:
    """A replay of recorded events (the log at ``path``, or fed to ``apply``)
    that withholds ``guard``'s recorded messages and feeds ``tracker``; the
    caller attaches the guard to its bus."""

    def restart() -> None:  # a new run of the log: its guard and agents started afresh
        guard.reset()
        tracker.restart()

    replay = Replay(path, withhold=lambda event: regenerated(guard, event), on_restart=restart)
    replay.bus.record(tracker)
    return replay


async def follow(link: GuardLink, guard: Guard, events: Sequence[AnyEvent]) -> None:
    """Apply ``events``, the session's next events after the last one
    ``link`` has seen, recorded by another process, to ``guard`` (attached
    to ``link.bus``) and to ``link``'s agents, leaving both as a restore of
    the whole session would: the history is replayed (see the module's
    docstring) on a bus of its own, whose clock reads each event's recorded
    ``ts``, so nothing reaches ``link.bus``'s recorders or the agents'
    ``pending``; then ``link.bus`` numbers on after the last event. The
    guard's action listeners hear the replayed actions: a caller that
    reports actions ignores these, which were reported where they happened."""
    tracker = _Tracker(link)
    replay = _history(guard, tracker)
    for agent in link.links():
        for call in agent.calls_in_flight():
            replay.expect(call)  # opened before; its result may be among ``events``
    guard.detach()
    guard.attach(replay.bus)
    try:
        with replaying(guard, events):
            for event in events:
                await replay.apply(event)
    finally:
        guard.detach()
        guard.attach(link.bus)
    link.bus.advance(replay.seq)
    tracker.settle(link)


async def resume_link(
    path: Path,
    session: str,
    config: Config | None = None,
    *,
    guard: Guard | None = None,
    mark_resume: bool = True,
    on_action: ActionListener | None = None,
    on_unreadable: Callable[[str], None] | None = None,
) -> tuple[GuardLink, SessionLog]:
    """A ``GuardLink`` whose guard has seen every event of the log at ``path``
    (replayed, the guard's own messages regenerated rather than re-read, no
    escalation asked again, no trip recorded again), and whose new events are
    appended to that log with their seq continued. A missing log starts a new
    session. ``guard`` is the fresh guard to resume (default ``Guard(config)``);
    ``mark_resume`` is ``SessionLog``'s. The caller closes the returned log.
    ``on_action`` hears of the guard's actions from now on, not of those the
    history replays.

    A file at ``path`` that is not a session log any more raises
    ``LogError``; given ``on_unreadable``, it is renamed
    ``*.unreadable-<time>`` instead, a new log begun, and ``on_unreadable``
    told why and where the file went: a damaged file costs its history,
    never the agent's tool calls."""
    if guard is None:
        guard = Guard(config)
    tracker = _Tracker()
    seq = 0
    exists = path.exists()
    if exists:
        try:
            replay = _history(guard, tracker, path)
        except LogError as exc:
            if on_unreadable is None:
                raise
            aside = path.with_name(f"{path.name}.unreadable-{time.time_ns()}")
            path.rename(aside)
            on_unreadable(f"{exc}; moved to {str(aside)!r} and a new log begun")
            exists = False
        else:
            guard.attach(replay.bus)
            with replaying(guard, path):
                await replay.run()
            guard.detach()
            seq = replay.seq
    if on_action is not None:
        guard.add_listener(on_action)
    bus = Bus(seq=seq)
    guard.attach(bus)
    log = SessionLog(path, session=session, append=exists, mark_resume=mark_resume).attach(bus)
    link = GuardLink(bus)
    tracker.settle(link)
    return link, log
