"""A bus can continue the seq numbering of a resumed session log."""

from __future__ import annotations

import pytest

from bus import Agent, Bus, UserMessage
from bus.testing import Capture

pytestmark = pytest.mark.anyio


async def test_resumed_bus_numbers_events_after_the_given_seq(anyio_backend: str) -> None:
    bus = Bus(seq=41)
    capture = Capture().attach(bus)
    await bus.publish(UserMessage(agent=Agent("main"), text="hi"))
    assert [e.seq for e in capture.events] == [42]


@pytest.mark.parametrize("seq", [-1, True, 1.5])
def test_bad_start_seq_is_refused_by_name(seq: object) -> None:
    with pytest.raises(ValueError, match="Bus seq must be an integer >= 0"):
        Bus(seq=seq)  # type: ignore[arg-type]
