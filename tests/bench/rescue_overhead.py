"""What the rescue policy adds to a tool call, against a bare bus, same run.

    python -m tests.bench.rescue_overhead [--calls N] [--rounds R]

Drives N tool calls the way a runtime does (``bus.decide`` then publish the
result) through three buses: bare, with the default guard (``remind``), and
with ``rescue`` alone; the call mix is realistic (distinct reads, an
edit-build cycle, a grep loop that gets denied and rescued from the advice
cache). Prints the best-of-R microseconds per call and the ratios to the
bare bus. The ask command is a real executable that answers once; every
later escalation is served from the cache, as in the seed's incident.
"""

from __future__ import annotations

import argparse
import logging
import os
import stat
import tempfile
import time
from pathlib import Path

import anyio
import structlog

from bus import Agent, Bus, ToolCall, ToolResult
from bus.testing import FakeClock
from guard import Config, Guard, RemindConfig, RescueConfig


def _mix(n: int) -> list[tuple[str, dict[str, str]]]:
    calls: list[tuple[str, dict[str, str]]] = []
    i = 0
    while len(calls) < n:
        calls += [("read", {"path": f"src/mod{i}.rs"}), ("edit", {"path": f"src/mod{i}.rs", "old": "a", "new": "b"})]
        calls += [("bash", {"command": "cargo build"}), ("bash", {"command": "cargo clippy", "description": f"#{i}"})]
        calls += [("grep", {"pattern": "fn resolve", "path": "src"})] * 6 + [("read", {"path": "src/config.rs"})]
        i += 1
    return calls[:n]


async def _drive(bus: Bus, clock: FakeClock, calls: list[tuple[str, dict[str, str]]]) -> float:
    agent = Agent("main")
    started = time.perf_counter()
    for n, (tool, args) in enumerate(calls):
        clock.advance(1.0)
        call = ToolCall(agent=agent, call_id=f"c{n}", step=n, tool=tool, args=args)
        decision = await bus.decide(call)
        content = "ok" if decision.allowed else decision.reason or ""
        await bus.publish(ToolResult.answering(call, content, denied_by=decision.by))
    return time.perf_counter() - started


async def _measure(config: Config | None, calls: list[tuple[str, dict[str, str]]], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        clock = FakeClock()
        bus = Bus(clock=clock)
        if config is not None:
            Guard(config).attach(bus)
        best = min(best, await _drive(bus, clock, calls))
    return best / len(calls) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory() as scratch:
        ask = Path(scratch) / "ask"
        ask.write_text("#!/bin/sh\necho 'Use the output you already have.'\n")
        ask.chmod(ask.stat().st_mode | stat.S_IXUSR)
        rescue = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=os.fspath(ask)))
        calls = _mix(options.calls)
        bare = anyio.run(_measure, None, calls, options.rounds)
        remind = anyio.run(_measure, Config(), calls, options.rounds)
        rescued = anyio.run(_measure, rescue, calls, options.rounds)
    print(f"{options.calls} calls, best of {options.rounds}")
    print(f"  bare bus        {bare:7.2f} µs/call   1.00×")
    print(f"  remind guard    {remind:7.2f} µs/call   {remind / bare:.2f}×   (+{remind - bare:.2f} µs)")
    print(f"  rescue guard    {rescued:7.2f} µs/call   {rescued / bare:.2f}×   (+{rescued - bare:.2f} µs)")


if __name__ == "__main__":
    main()
