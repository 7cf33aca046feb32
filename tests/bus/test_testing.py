"""bus.testing: the helpers users test their own integrations with."""

from __future__ import annotations

import pytest

from bus import Agent, AgentStatus, Bus, ContextMessage, ContextSource, UserMessage
from bus.testing import Capture, FakeClock


@pytest.mark.anyio
async def test_capture_records_everything_in_publish_order_and_filters_by_type(bus: Bus, agent: Agent) -> None:
    capture = Capture()
    assert capture.attach(bus) is capture
    source = ContextSource(plugin="p")
    await bus.publish(UserMessage(agent=agent, text="a"))
    await bus.publish(ContextMessage(agent=agent, call_id="c", source=source, text="note"))
    await bus.publish(UserMessage(agent=agent, text="b"))
    assert [e.seq for e in capture.events] == [1, 2, 3]
    assert [m.text for m in capture.of(UserMessage)] == ["a", "b"]
    assert [m.text for m in capture.of(ContextMessage)] == ["note"]
    assert capture.of(AgentStatus) == []
    capture.clear()
    assert capture.events == []
    await bus.publish(UserMessage(agent=agent, text="c"))
    assert [m.text for m in capture.of(UserMessage)] == ["c"]


def test_fake_clock_moves_only_when_told() -> None:
    clock = FakeClock()
    assert clock() == clock.now == 1_764_489_600.0
    clock.advance(0)
    clock.advance(2.5)
    assert clock() == 1_764_489_602.5
    assert FakeClock(start=5.0)() == 5.0


def test_fake_clock_refuses_to_go_back() -> None:
    clock = FakeClock(10.0)
    with pytest.raises(ValueError, match=r"a clock cannot go back: advance\(-1\)"):
        clock.advance(-1)
    assert clock() == 10.0
