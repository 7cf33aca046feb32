"""Fleet mode throughput and decision latency on a real redis-server.

Four worker processes, each a ``FleetGuard`` with its own connection, drive
concurrent sessions (one tool call = a ``tool/call`` decision and its
``tool/result``); every session's events go to a worker chosen at random per
event, as a load balancer would send them. The baseline, measured in the
same run against the same server, is a bare pipelined ``XADD`` loop: the
fastest way to put events into Redis streams at all.

    python -m benchmarks.fleet [--workers 4] [--sessions 200] [--calls 50]

Starts its own redis-server on a free loopback port (persistence off).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import platform
import random
import statistics
import time
from typing import Any

import structlog
from redis.asyncio import Redis

from bus import Agent, ToolCall, ToolResult
from guard.fleet import FleetGuard
from tests.conftest import start_redis_server


async def _bare_xadd(url: str, events: int) -> float:
    client = Redis.from_url(url)
    line = b'{"type":"tool/call","seq":1,"ts":0.0,"agent":"main","call_id":"c1","step":1,"tool":"grep","args":{}}'
    start = time.perf_counter()
    pipe = client.pipeline(transaction=False)
    for n in range(events):
        pipe.xadd(f"bare:{{s{n % 200}}}:events", {"seq": n, "line": line})
        if n % 1000 == 999:
            await pipe.execute()
    await pipe.execute()
    elapsed = time.perf_counter() - start
    await client.aclose()
    return events / elapsed


async def _worker(
    url: str, index: int, workers: int, sessions: int, calls: int, out: multiprocessing.Queue[Any]
) -> None:
    client = Redis.from_url(url, max_connections=64)
    fleet = FleetGuard(client, worker=f"w{index}")
    latencies: list[float] = []
    rng = random.Random(index)

    async def session(name: str) -> None:
        agent = Agent("main")
        for step in range(1, calls + 1):
            args = {"pattern": "x"} if rng.random() < 0.3 else {"pattern": f"{name}-{step}"}
            call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool="grep", args=args, ts=float(step))
            begun = time.perf_counter()
            outcome = await fleet.handle(name, call)
            latencies.append(time.perf_counter() - begun)
            allowed = outcome.decision is None or outcome.decision.allowed
            result = ToolResult.answering(call, "no matches" if allowed else "denied")
            begun = time.perf_counter()
            await fleet.handle(name, result)
            latencies.append(time.perf_counter() - begun)

    # Each worker drives its share of sessions; sessions' events interleave
    # on the server with every other worker's.
    mine = [f"bench-{n}" for n in range(sessions) if n % workers == index]
    start = time.perf_counter()
    await asyncio.gather(*(session(name) for name in mine))
    elapsed = time.perf_counter() - start
    await client.aclose()
    out.put((len(mine) * calls, elapsed, latencies))


def _run_worker(url: str, index: int, workers: int, sessions: int, calls: int, out: multiprocessing.Queue[Any]) -> None:
    asyncio.run(_worker(url, index, workers, sessions, calls, out))


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    server = start_redis_server()
    try:
        baseline = asyncio.run(_bare_xadd(server.url, 200_000))
        queue: multiprocessing.Queue[Any] = multiprocessing.Queue()
        procs = [
            multiprocessing.Process(
                target=_run_worker, args=(server.url, i, args.workers, args.sessions, args.calls, queue)
            )
            for i in range(args.workers)
        ]
        start = time.perf_counter()
        for proc in procs:
            proc.start()
        results = [queue.get() for _ in procs]
        wall = time.perf_counter() - start
        for proc in procs:
            proc.join()
    finally:
        server.process.terminate()
        server.process.wait()
    calls = sum(r[0] for r in results)
    latencies = sorted(x for r in results for x in r[2])
    rate = calls / wall
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[int(len(latencies) * 0.99)] * 1000
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {multiprocessing.cpu_count()} cpus, Python {platform.python_version()}")
    print(f"bare pipelined XADD: {baseline:,.0f} events/s ({baseline / 2:,.0f} tool calls/s at 2 events each)")
    print(
        f"fleet, {args.workers} workers, {args.sessions} sessions x {args.calls} calls: {rate:,.0f} tool calls/s "
        f"({rate * 2 / baseline:.2f}x the bare XADD event rate)"
    )
    print(f"decision latency per event: p50 {p50:.2f} ms, p99 {p99:.2f} ms")


if __name__ == "__main__":
    main()
