"""Bytes per idle agent, proof that a gone agent leaves nothing behind, and
what a guard per session costs.

Counted with ``tracemalloc``: the guard's share is what the heap grows by
when each of N live agents makes one tool call (its per-agent state), apart
from the handles themselves, which belong to the runtime. Then the handles
are dropped (garbage collection) or the agents are ``disposed``: the state
table must be empty, and a second cycle of as many agents must not grow the
heap (what stays after the first is the emptied table's capacity, which a
CPython dict keeps until it next resizes, and the second cycle reuses).

A server holds a guard per session: what each costs is read from the
process's resident size (``/proc/self/statm``, so the compiled RE2 patterns,
which ``tracemalloc`` does not see, count too) over 1,000 guards built in a
fresh interpreter, with the default config and with ``recommended``. What
every guard shares is built before the count starts.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

from benchmarks._measure import Row
from benchmarks.settings import Settings
from bus import Agent, AgentStatus, Bus, ToolResult
from guard.guard import Guard

__all__ = ["memory"]

_GUARDS = 1000
_REPO = Path(__file__).resolve().parents[1]
_STATM = "/proc/self/statm"

_NOISE = 4096
"""Heap the interpreter itself may take between two cycles (free lists,
caches), whatever the number of agents; a leak of one byte per agent would
show above it at any size worth measuring."""


async def _touch(bus: Bus, agents: list[Agent]) -> None:
    for agent in agents:
        await bus.publish(ToolResult(agent=agent, call_id="c1", step=1, tool="grep", args={"pattern": "x"}))


_PER_GUARD = """
import gc, os, sys
from guard.config import PRESETS, Config
from guard.guard import Guard

def resident():
    with open({statm!r}) as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

config = PRESETS[sys.argv[1]] if sys.argv[1] else Config()
Guard(config)  # what guards share is built once, before the count
gc.collect()
before = resident()
guards = [Guard(config) for _ in range({count})]
print((resident() - before) / len(guards))
"""


def _per_guard(preset: str) -> float:
    """Resident bytes each further guard for ``preset`` (empty: the default
    config) adds, in a fresh interpreter: in this one, memory freed by
    earlier sections would be reused and hide the growth."""
    done = subprocess.run(
        [sys.executable, "-c", _PER_GUARD.format(count=_GUARDS, statm=_STATM), preset],
        capture_output=True,
        text=True,
        check=True,
        cwd=_REPO,
    )
    return float(done.stdout)


def _guard_rows() -> list[Row]:
    if not os.path.exists(_STATM):  # pragma: no cover - Linux has it
        return []
    section = f"memory per session, {_GUARDS:,} guards (resident size)"
    return [
        Row(section=section, name=f"a guard, {name}", rate=_per_guard(preset), unit="bytes")
        for name, preset in (("default config (remind)", ""), ("recommended", "recommended"))
    ]


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
        *_guard_rows(),
    ]
