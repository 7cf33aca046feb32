"""The replay driver: feeds a session log through a fresh bus, in order."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

from bus.bus import Bus, Decision
from bus.events import DELIVERIES_KEPT, AnyEvent, ToolCall, ToolResult, trimmed
from bus.reader import LogReader, ReadReport

__all__ = ["CHECKPOINT_EVERY", "Replay"]

_OPEN_IDS = 4096
_OPEN_PER_ID = 64
CHECKPOINT_EVERY = 256
"""Events a replay applies between two turns it gives the other tasks (and
so does whatever else goes through a long history inside a server)."""


class Replay:
    """Re-publishes a recorded session on ``self.bus`` so subscribers can
    re-derive what they did.

    Attach subscribers to ``bus`` before ``run``. While an event is being
    re-published, ``seq`` is its seq in the log, ``call_number`` the ordinal
    among all the log's calls of the call it belongs to (for a result, its
    own call's, even when parallel calls came in between; for other events,
    the latest call's), and the bus clock reads
    the event's recorded ``ts``, so time-based rules replay deterministically.
    Tool calls go through ``bus.decide``; a result with no recorded call
    (each call under an id is answered by one result) gets
    one synthesized from it first, unless it is a result delivered again
    (``ToolResult.delivery`` equal to that of the id's latest result, with no
    call under the id between): that is re-published as it is, for the call
    it answered. Events for which ``withhold`` is true are
    not re-published (a guard withholds its own recorded messages, to
    regenerate them); ``withheld`` counts them. The predicate sees each one:
    keep there what you need of them, for the replay keeps nothing (its
    memory stays constant however long the log).

    ``run`` and ``apply`` let the event loop's other tasks run every few
    hundred events (an anyio checkpoint), so replaying a long log inside a
    server never holds its other requests for the whole log.

    An event whose seq is not above the one before it (and not 0, the seq
    of an event never published) begins a new run: the
    log was continued by a fresh bus (a program run again, appending to its
    log), whose subscribers started afresh. Calls the earlier run left open
    are forgotten (their ids may come again), ``restarts`` counts the runs
    after the first, and ``on_restart`` is called, so a subscriber can start
    afresh too, as the live one did.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        withhold: Callable[[AnyEvent], bool] | None = None,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        self.reader = LogReader(path) if path is not None else None
        self.bus = Bus(clock=self._now)
        self.seq = 0
        self.call_number = 0
        self.withheld = 0
        self.restarts = 0
        self._withhold = withhold
        self._on_restart = on_restart
        self._ts = 0.0
        self._calls = 0
        # (agent id, call id) -> the numbers of its calls still open, oldest first: a
        # runtime may reuse an id before the call that had it is answered
        self._open_calls: dict[tuple[str | None, str], list[int]] = {}
        # (agent id, call id) -> the delivery of a latest result and its call's number
        self._answered: dict[tuple[str | None, str], tuple[tuple[object, ...], int]] = {}
        self._fed = ReadReport()
        self._applied = 0

    @property
    def report(self) -> ReadReport:
        return self.reader.report if self.reader is not None else self._fed

    def _now(self) -> float:
        return self._ts

    def expect(self, call: ToolCall) -> None:
        """``call`` was published before this replay began (live, on another
        bus) and its result may come among the events applied here: that
        result answers it, as in a whole replay, rather than being a result
        whose call was never recorded."""
        self._calls += 1
        self._open((call.agent.id if call.agent else None, call.call_id), self._calls)

    async def run(self, *, then: Callable[[AnyEvent], None] | None = None) -> ReadReport:
        """Replay the whole log; returns the reader's report of skipped lines.
        ``then``, when given, is called with each event once it was applied
        (or withheld), so a caller can follow the log in the same pass."""
        if self.reader is None:
            raise ValueError("this Replay has no log to run; feed it events with apply()")
        step = self._step
        for count, event in enumerate(self.reader, 1):
            pending = step(event)
            if pending is not None:
                await pending
            if then is not None:
                then(event)
            if not count % CHECKPOINT_EVERY:
                await _turn()
        return self.reader.report

    async def apply(self, event: AnyEvent) -> Decision | None:
        """Re-publish one event, as ``run`` does for each event of the log;
        for a tool call, returns what ``bus.decide`` concluded. Feeding
        events one at a time lets a caller follow a log that is still being
        written (another process's appends) with the same state a whole
        replay would reach."""
        pending = self._step(event)
        decision = None if pending is None else await pending
        self._applied += 1
        if not self._applied % CHECKPOINT_EVERY:
            await _turn()
        return decision

    def _step(self, event: AnyEvent) -> Awaitable[Decision | None] | None:
        """Apply ``event`` up to what is left to await (its publish, or for
        a call its decision), so ``run`` awaits one coroutine per event."""
        if 0 < event.seq <= self.seq:
            self._restart()
        self.seq = event.seq
        self._ts = event.ts
        withhold = self._withhold
        if withhold is not None and withhold(event):
            self.withheld += 1
            return None
        bus = self.bus
        if isinstance(event, ToolCall):
            self.call_number = self._calls = number = self._calls + 1
            key = (event.agent.id if event.agent else None, event.call_id)
            self._open(key, number)
            self._answered.pop(key, None)  # its result is new, whatever it holds
            return bus.decide(event)
        if isinstance(event, ToolResult):
            key = (event.agent.id if event.agent else None, event.call_id)
            delivery = event.delivery()
            before = self._answered.get(key)
            if before is not None and before[0] == delivery:
                self.call_number = before[1]
                return bus.publish(event)  # delivered again: it answers the call it answered before
            opened = self._open_calls.get(key)
            known = opened.pop(0) if opened else None
            if opened is not None and not opened:
                del self._open_calls[key]
            if known is None:
                self._remember(key, delivery, self._calls + 1)
                self.call_number = self._calls = self._calls + 1
                call = ToolCall(
                    agent=event.agent,
                    call_id=event.call_id,
                    step=event.step,
                    tool=event.tool,
                    args=event.args,
                )
                return self._decide_then_publish(call, event)
            self._remember(key, delivery, known)
            self.call_number = known
        else:
            self.call_number = self._calls
        return bus.publish(event)

    def _open(self, key: tuple[str | None, str], number: int) -> None:
        """Note a call as open until its result comes. A runtime that never
        reports results keeps them open: only the latest of each id are
        kept, and of the ids the latest, so memory stays bounded."""
        opened = self._open_calls.get(key)
        if opened is None:
            opened = self._open_calls[key] = []
            if len(self._open_calls) > _OPEN_IDS:
                del self._open_calls[next(iter(self._open_calls))]
        elif len(opened) >= _OPEN_PER_ID:
            del opened[0]
        opened.append(number)

    def _remember(self, key: tuple[str | None, str], delivery: tuple[object, ...], number: int) -> None:
        """Keep the delivery of a result (of an agent: the guard passes over
        the others) as the guard keeps it: the latest ``DELIVERIES_KEPT``."""
        if key[0] is None:
            return
        answered = self._answered
        answered[key] = (delivery, number)
        if len(answered) >= 2 * DELIVERIES_KEPT:
            self._answered = trimmed(answered)

    def _restart(self) -> None:
        self._open_calls.clear()
        self._answered.clear()
        self.restarts += 1
        if self._on_restart is not None:
            self._on_restart()

    async def _decide_then_publish(self, call: ToolCall, result: ToolResult) -> None:
        await self.bus.decide(call)
        await self.bus.publish(result)


async def _turn() -> None:
    """Let the event loop's other tasks run (an anyio checkpoint). anyio is
    imported here, at the first turn, not with the package: the command
    hook imports ``bus`` and runs a replay to its end with no event loop,
    where there is nothing else to let run."""
    from anyio.lowlevel import checkpoint

    try:
        await checkpoint()
    except RuntimeError:  # no event loop (anyio's NoEventLoopError; sniffio's error before anyio 4.11)
        return
