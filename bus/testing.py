"""Helpers for testing your own integration with the bus, in the manner of
``structlog.testing``: capture what was published, and control the clock."""

from __future__ import annotations

from typing import TypeVar

from bus.bus import Bus
from bus.events import Event

__all__ = ["Capture", "FakeClock"]

E = TypeVar("E", bound=Event)


class Capture:
    """Records every event a bus publishes, in publish order.

    >>> capture = Capture().attach(bus)
    >>> ... run the agent ...
    >>> [m.text for m in capture.of(ContextMessage)]
    """

    def __init__(self) -> None:
        self.events: list[Event] = []

    def attach(self, bus: Bus) -> Capture:
        bus.record(self.events.append)
        return self

    def of(self, event_type: type[E]) -> list[E]:
        """The captured events of exactly ``event_type``."""
        return [e for e in self.events if type(e) is event_type]

    def clear(self) -> None:
        self.events.clear()


class FakeClock:
    """A clock for ``Bus(clock=...)`` that moves only when told to."""

    def __init__(self, start: float = 1_764_489_600.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot go back: advance({seconds})")
        self.now += seconds
