"""The in-process event bus: ordered, awaited delivery with isolated errors."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from types import CoroutineType
from typing import Any, TypeVar, cast

import msgspec
from msgspec.structs import force_setattr

from bus._codec import checked_time, conform
from bus._logging import LazyLogger, name_of
from bus.agent import Agent
from bus.events import Event, ToolCall

__all__ = ["ALLOW", "Bus", "Decision", "Handler", "Interceptor", "Recorder"]

E = TypeVar("E", bound=Event)

Handler = Callable[[E], Awaitable[None] | None]
"""A subscriber for one event type: an ``async def``, or a plain function."""

Recorder = Callable[[Event], None]
"""A synchronous observer of every event, run at publish time before any
subscriber: the session log is one, so the file is always in ``seq`` order."""

_log = LazyLogger("bus")


class Decision(msgspec.Struct, frozen=True):
    """What ``Bus.decide`` concluded about a tool call.

    A deny carries the text the model will read as the tool's result, the
    name of the interceptor that denied, and any ``advice`` an escalation
    bought (``reason`` quotes it); the runtime records both in the denied
    call's ``ToolResult``.
    """

    allowed: bool = True
    reason: str | None = None
    by: str | None = None
    advice: str | None = None

    @classmethod
    def deny(cls, reason: str, by: str, *, advice: str | None = None) -> Decision:
        return cls(allowed=False, reason=reason, by=by, advice=advice)


ALLOW = Decision()

Interceptor = Callable[[ToolCall], Awaitable[Decision | None] | Decision | None]
"""Consulted before a tool runs (an ``async def``, or a plain function);
return a deny ``Decision`` to stop it, or ``None`` (or ``ALLOW``) to let it
through."""


class Bus:
    """Carries one session's events to its subscribers.

    ``publish`` returns once every subscriber of the event's type has handled
    it, in subscription order, including whatever those subscribers published
    in turn. A subscriber that raises is logged and skipped; the publisher
    never sees its exception. Works under asyncio and trio.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time, seq: int = 0) -> None:
        """``seq`` is the number the first event follows: pass the last seq of
        a session log to continue its numbering on a resumed session."""
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise ValueError(f"Bus seq must be an integer >= 0, got {seq!r}")
        self._clock = clock
        self._seq = seq
        self._handlers: dict[type[Event], tuple[Handler[Any], ...]] = {}
        self._recorders: tuple[Recorder, ...] = ()
        self._interceptors: tuple[tuple[str, Interceptor], ...] = ()

    @property
    def seq(self) -> int:
        """The ``seq`` of the most recently published event (0 before any)."""
        return self._seq

    def advance(self, seq: int) -> None:
        """Continue numbering after ``seq``: events up to it were numbered
        elsewhere (another process appended them to the session's log) and
        applied to this bus's subscribers some other way. Never moves back."""
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise ValueError(f"Bus seq must be an integer, got {seq!r}")
        self._seq = max(self._seq, seq)

    def subscribe(self, event_type: type[E], handler: Handler[E]) -> None:
        """Call ``handler`` for every published event of exactly ``event_type``
        (an ``async def``; a plain function is called too)."""
        if not isinstance(event_type, type):
            raise TypeError(f"subscribe(event_type, handler): the event type comes first, got {event_type!r}")
        _check_callable("subscribe", "handler", handler)
        self._handlers[event_type] = (*self._handlers.get(event_type, ()), handler)

    def unsubscribe(self, event_type: type[E], handler: Handler[E]) -> None:
        """Remove one subscription; a handler that is not subscribed is a ``ValueError``.

        Handlers compare by equality, so ``bus.unsubscribe(T, plugin.method)``
        finds the bound method that ``subscribe`` was given.
        """
        handlers = list(self._handlers.get(event_type, ()))
        if handler not in handlers:
            raise ValueError(f"{name_of(handler)} is not subscribed to {event_type.__name__} on this bus")
        handlers.remove(handler)
        self._handlers[event_type] = tuple(handlers)

    def record(self, recorder: Recorder) -> None:
        """Call ``recorder`` synchronously for every event, before subscribers."""
        _check_callable("record", "recorder", recorder)
        self._recorders = (*self._recorders, recorder)

    def unrecord(self, recorder: Recorder) -> None:
        """Remove a recorder; one that is not recording is a ``ValueError``."""
        recorders = list(self._recorders)
        if recorder not in recorders:
            raise ValueError(f"{name_of(recorder)} is not a recorder of this bus")
        recorders.remove(recorder)
        self._recorders = tuple(recorders)

    def intercept(self, name: str, interceptor: Interceptor) -> None:
        """Consult ``interceptor`` in ``decide`` (an ``async def``; a plain
        function's answer counts too); ``name`` is who a deny is ``by``."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"intercept(name, interceptor): the name comes first, a non-empty str, got {name!r}")
        _check_callable("intercept", "interceptor", interceptor)
        self._interceptors = (*self._interceptors, (name, interceptor))

    def unintercept(self, interceptor: Interceptor) -> None:
        """Stop consulting ``interceptor`` (compared by equality, so a bound
        method matches); one that is not registered is a ``ValueError``."""
        kept = tuple(entry for entry in self._interceptors if entry[1] != interceptor)
        if len(kept) == len(self._interceptors):
            raise ValueError(f"{name_of(interceptor)} is not an interceptor of this bus")
        self._interceptors = kept

    async def publish(self, event: Event) -> None:
        """Stamp ``seq`` and ``ts`` on ``event`` and deliver it.

        Publish each event object once: the stamp is written into it. A
        field of another type than the event's schema has (msgspec builds
        events unchecked) is first made what a reader of the session log
        gets (``call_id=7`` is call ``"7"``, a dict as ``content`` its JSON
        text), so subscribers see live what a replay sees; one no reader
        could read (``step=None``) is a ``TypeError`` naming it, and nothing
        is published.
        """
        if type(event.agent) is not Agent and event.agent is not None:
            raise TypeError(
                f"{type(event).__name__}.agent must be a bus.Agent (one handle per agent, used for all its"
                f" events), got {type(event.agent).__name__} {event.agent!r}"
            )
        conform(event)
        ts = self._clock()
        if type(ts) is not float or ts - ts != 0.0:  # neither NaN nor infinite, and a number
            ts = checked_time(ts, "the bus clock returned")
        self._seq = seq = self._seq + 1
        force_setattr(event, "seq", seq)
        force_setattr(event, "ts", ts)
        recorders = self._recorders
        if recorders:
            for recorder in recorders:
                try:
                    recorder(event)
                except OSError as exc:  # a full disk, say: the message says it all
                    _log.error(
                        "recorder failed", event_type=type(event).__name__, subscriber=name_of(recorder), error=str(exc)
                    )
                except Exception:
                    _log.exception("recorder failed", event_type=type(event).__name__, subscriber=name_of(recorder))
        for handler in self._handlers.get(type(event), ()):
            try:
                answer = handler(event)
                if type(answer) is CoroutineType or (answer is not None and hasattr(type(answer), "__await__")):
                    await cast("Awaitable[None]", answer)  # a plain function's return value is no concern of ours
            except Exception:
                _log.exception("subscriber failed", event_type=type(event).__name__, subscriber=name_of(handler))

    async def decide(self, call: ToolCall) -> Decision:
        """Publish ``call``, then ask the interceptors in order; the first deny wins.

        An interceptor that raises, or returns something other than a
        ``Decision`` (whose ``allowed`` is a bool) or ``None``, is logged and
        counts as allow, so a guard
        fault never stops a tool. A deny without ``by`` is attributed to the
        interceptor's registered name. The runtime runs the tool only when the
        decision is allowed, and publishes a ``ToolResult`` either way.
        """
        await self.publish(call)
        for name, interceptor in self._interceptors:
            try:
                answer = interceptor(call)
                awaited = type(answer) is CoroutineType or hasattr(type(answer), "__await__")
                decision = await cast("Awaitable[Decision | None]", answer) if awaited else answer
            except Exception:
                _log.exception("interceptor failed", event_type="ToolCall", subscriber=name)
                continue
            if decision is None:
                continue
            if not isinstance(decision, Decision) or type(decision.allowed) is not bool:
                returned = name_of(decision) if not isinstance(decision, Decision) else f"allowed={decision.allowed!r}"
                _log.error("interceptor failed", event_type="ToolCall", subscriber=name, returned=returned)
                continue
            if not decision.allowed:
                if decision.by is None:
                    return Decision.deny(decision.reason or "", name, advice=decision.advice)
                return decision
        return ALLOW


def _check_callable(method: str, what: str, value: object) -> None:
    """A registration of what can never be called is refused at once, not
    logged as a failure at every event."""
    if not callable(value):
        raise TypeError(f"{method}(): the {what} must be callable, got {type(value).__name__} {value!r}")
