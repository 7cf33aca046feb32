"""Rebuilding a live guard from a session's recorded events: from a session
log, for runtimes that call the guard from a fresh process each time (Claude
Code command hooks), or from events read elsewhere (a Redis stream), for a
live session that another process moved on.

Both ways apply the history the same way: the guard sees it as in a replay
(its own recorded context messages withheld and regenerated, recorded halt
requests re-published, escalations answered from the record, no trip
recorded again), and each agent's link gets the step, open calls and halt
request the history leaves it with."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from bus import (
    AgentStatus,
    AnyEvent,
    Bus,
    Event,
    LogError,
    Replay,
    SessionLog,
    ToolCall,
    ToolResult,
    UserMessage,
)
from guard.config import Config
from guard.guard import ActionListener, Guard
from guard.sessions.link import GuardLink, LinkState
from guard.sessions.restore import regenerated, replaying

__all__ = ["follow", "resume_link", "resume_or_restart"]


class _Tracker:
    """Follows each agent through a replay: where it stands (``LinkState``)
    and whether it was disposed. Starts from the agents ``link`` has live
    (none for a restore from nothing)."""

    def __init__(self, link: GuardLink | None = None) -> None:
        self.agents: dict[str, LinkState] = {}
        self.disposed: set[str] = set()
        for live in link.links() if link is not None else ():
            self.agents[live.agent.id] = live.state()

    def __call__(self, event: Event) -> None:
        agent = event.agent
        if agent is None:
            return
        state = self.agents.get(agent.id)
        if state is None:
            state = self.agents[agent.id] = LinkState(agent)
        self.disposed.discard(agent.id)
        if isinstance(event, ToolCall):
            if event.step > state.step:
                state.step = event.step
                state.step_done = False
            state.calls[event.call_id] = event
        elif isinstance(event, ToolResult):
            state.calls.pop(event.call_id, None)
        elif isinstance(event, UserMessage):
            state.halt_reason = None
        elif isinstance(event, AgentStatus):
            if event.status == "halt-requested":
                state.halt_reason = event.reason or "the guard requested a halt"
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
) -> tuple[GuardLink, SessionLog]:
    """A ``GuardLink`` whose guard has seen every event of the log at ``path``
    (replayed, the guard's own messages regenerated rather than re-read, no
    escalation asked again, no trip recorded again), and whose new events are
    appended to that log with their seq continued. A missing log starts a new
    session. ``guard`` is the fresh guard to resume (default ``Guard(config)``);
    ``mark_resume`` is ``SessionLog``'s. The caller closes the returned log.
    ``on_action`` hears of the guard's actions from now on, not of those the
    history replays."""
    if guard is None:
        guard = Guard(config)
    tracker = _Tracker()
    seq = 0
    exists = path.exists()
    if exists:
        replay = _history(guard, tracker, path)
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


async def resume_or_restart(
    path: Path, session: str, config: Config | None = None, *, on_action: ActionListener | None = None
) -> tuple[GuardLink, SessionLog]:
    """``resume_link``, except that a file at ``path`` which is not a session
    log any more is renamed ``*.unreadable-<time>`` and a new log begun, so a
    damaged file costs its history, never the agent's tool calls."""
    try:
        return await resume_link(path, session, config, on_action=on_action)
    except LogError:
        path.rename(path.with_name(f"{path.name}.unreadable-{time.time_ns()}"))
        return await resume_link(path, session, config, on_action=on_action)
