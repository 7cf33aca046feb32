"""Bytes per idle agent, and proof that a gone agent leaves nothing behind.

Counted with ``tracemalloc``: the guard's share is what the heap grows by
when each of N live agents makes one tool call (its per-agent state), apart
from the handles themselves, which belong to the runtime. Then the handles
are dropped (garbage collection) or the agents are ``disposed``: the state
table must be empty, and a second cycle of as many agents must not grow the
heap (what stays after the first is the emptied table's capacity, which a
CPython dict keeps until it next resizes, and the second cycle reuses).
"""

from __future__ import annotations

import gc
import tracemalloc

from benchmarks._measure import Row
from benchmarks.settings import Settings
from bus import Agent, AgentStatus, Bus, ToolResult
from guard.guard import Guard

__all__ = ["memory"]

_NOISE = 4096
"""Heap the interpreter itself may take between two cycles (free lists,
caches), whatever the number of agents; a leak of one byte per agent would
show above it at any size worth measuring."""


async def _touch(bus: Bus, agents: list[Agent]) -> None:
    for agent in agents:
        await bus.publish(ToolResult(agent=agent, call_id="c1", step=1, tool="grep", args={"pattern": "x"}))


def _heap() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


async def memory(settings: Settings) -> list[Row]:
    count = settings.agents
    section = f"memory, {count:,} idle agents"
    bus = Bus()
    guard = Guard().attach(bus)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    gc.collect()
    gc.freeze()  # what the process held before is not the guard's: each collection below skips it
    try:
        empty = _heap()
        agents = [Agent(f"agent-{i}") for i in range(count)]
        handles = _heap()
        await _touch(bus, agents)
        idle = _heap()
        tracked = guard.agent_count()
        del agents
        collected = _heap()
        after_gc = guard.agent_count()

        agents = [Agent(f"agent-{i}") for i in range(count)]
        await _touch(bus, agents)
        for agent in agents:
            await bus.publish(AgentStatus(agent=agent, status="disposed"))
        disposed_count = guard.agent_count()
        del agents
        disposed = _heap()
    finally:
        gc.unfreeze()
        if started:
            tracemalloc.stop()
    per_agent = (idle - handles) / count
    return [
        Row(
            section=section,
            name="guard state per idle agent",
            rate=per_agent,
            unit="bytes",
            extra=f"{tracked:,} agents tracked; handle itself {(handles - empty) / count:.0f} B (runtime's)",
            target="< 500 bytes",
            met=per_agent < 500 and tracked == count,
        ),
        Row(
            section=section,
            name="heap left after the handles are collected",
            rate=float(collected - empty),
            unit="bytes",
            extra=f"{after_gc} agents still tracked; what is left is the emptied state table's capacity",
            target="0 agents tracked",
            met=after_gc == 0,
        ),
        Row(
            section=section,
            name="growth over a second cycle ended by agent/status disposed",
            rate=float(disposed - collected),
            unit="bytes",
            extra=f"{disposed_count} agents tracked after disposal, before the handles go",
            target="0 tracked; growth < 4 KB + 1 B/agent",
            met=disposed_count == 0 and disposed - collected < _NOISE + count,
        ),
    ]
