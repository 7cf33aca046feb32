"""What the ``turns`` policy costs per tool call, against a bare bus, in one run.

    python -m tests.bench.turns_overhead [--calls N] [--repeat R] [--agents A]

Each variant drives the same stream through a real ``Bus`` the way a runtime
does (``decide`` the call, publish the result), on anyio's asyncio backend:

- ``bare bus``: no guard (the baseline every ratio is against);
- ``remind``: the default guard;
- ``turns``: the turns policy alone;
- ``remind+turns``: both.

Two streams: ``varied`` (50 distinct calls in rotation, nothing fires) and
``loop`` (the same call every turn, advisory every 5th turn, ladder off, so
a context message is published every 5 calls). Prints the best of R runs (variants
interleaved) in
microseconds per call and the ratio to the bare bus, then bytes per agent
of guard state with turns alone (one call each for A agents, measured with
tracemalloc, the agent handles themselves left out). structlog is set to
drop info events, as a deployment that does not print them would.
Not a test: no timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
import time
import tracemalloc
from typing import Any

import anyio
import structlog

from bus import Agent, Bus, ToolCall, ToolResult
from guard import Config, Guard, RemindConfig, TurnsConfig

ARGS = [{"pattern": f"symbol_{i}", "path": "src", "flags": ["-n", "-r"]} for i in range(50)]

VARIANTS: dict[str, Config | None] = {
    "bare bus": None,
    "remind": Config(),
    "turns": Config(remind=RemindConfig(enabled=False), turns=TurnsConfig(deny_after=0, halt_after=0)),
    "remind+turns": Config(turns=TurnsConfig(deny_after=0, halt_after=0)),
}


async def _drive(config: Config | None, calls: int, loop: bool) -> float:
    bus = Bus()
    if config is not None:
        Guard(config).attach(bus)
    agent = Agent("main")
    stream = [ARGS[0] if loop else ARGS[i % len(ARGS)] for i in range(calls)]
    start = time.perf_counter()
    for step, args in enumerate(stream, 1):
        call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool="grep", args=args)
        decision = await bus.decide(call)
        await bus.publish(ToolResult.answering(call, "no matches", denied_by=decision.by))
    return (time.perf_counter() - start) / calls * 1e6


def _bytes_per_agent(agents: int) -> float:
    async def run() -> float:
        bus = Bus()
        Guard(Config(remind=RemindConfig(enabled=False), turns=TurnsConfig())).attach(bus)
        keep: list[Agent] = []
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(agents):
            agent = Agent(f"a{i}")
            keep.append(agent)
            call = ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args=ARGS[i % len(ARGS)])
            await bus.decide(call)
            await bus.publish(ToolResult.answering(call, "no matches"))
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        # the handles themselves are the runtime's, not the guard's
        handles = sum(map(_size, keep))
        return (after - before - handles) / agents

    return anyio.run(run)


def _size(obj: Any) -> int:
    return sys.getsizeof(obj) + sys.getsizeof(obj.id)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--agents", type=int, default=10_000)
    options = parser.parse_args(argv)
    print(f"{options.calls} calls per run, best of {options.repeat}")
    for stream in ("varied", "loop"):
        results = dict.fromkeys(VARIANTS, float("inf"))
        for _ in range(options.repeat):  # round robin, so load changes hit every variant alike
            for name, config in VARIANTS.items():
                results[name] = min(results[name], anyio.run(_drive, config, options.calls, stream == "loop"))
        base = results["bare bus"]
        for name, micros in results.items():
            print(f"  {stream:6} {name:13} {micros:7.2f} µs/call  x{micros / base:5.2f}  (+{micros - base:5.2f} µs)")
    per_agent = _bytes_per_agent(options.agents)
    print(f"turns state: {per_agent:.0f} bytes per agent after one call ({options.agents} agents)")


if __name__ == "__main__":
    # Guard actions are structlog info events; a deployment filters or ships
    # them, so measure the guard, not a console renderer.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    main()
