"""Fleet mode throughput and decision latency on a real redis-server.

``--workers`` worker processes, each one ``FleetGuard`` with its own
connection pool, drive concurrent sessions; one tool call is a ``tool/call``
(the decision) and its ``tool/result``. Three runs, against one server:

- **random routing**: after each tool call the session goes back to one
  shared queue in Redis and the next free worker, any of them, takes its
  next call, as a load balancer without session affinity would send it; a
  worker mostly finds its copy of the session stale and catches up from the
  stream (the harness's queue is in the workers' CPU figures: a pop per
  batch of calls handed out, a push per batch of calls returned);
- **sticky routing**: each session stays on one worker (a load balancer
  with session affinity), the cheapest case;
- **latency**: random, then sticky, routing with ``--latency-sessions``
  sessions in flight fleet-wide, a load well below saturation, for the
  decision latency a caller sees when the fleet is not queueing.

The baseline, measured in the same run against the same server, is one
process's bare pipelined ``XADD`` loop: the fastest way to put events into
Redis streams at all. CPU is reported per tool call for the workers (their
own process time) and for redis-server (from ``/proc``).

    python -m benchmarks.fleet [--workers 4] [--sessions 400] [--calls 40]

Starts its own redis-server on a free loopback port (persistence off).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import os
import platform
import statistics
import time
import zlib
from collections.abc import Sequence
from queue import Empty
from typing import Any

import structlog
from redis.asyncio import BlockingConnectionPool, Redis

from benchmarks._measure import Row, process_cpu
from benchmarks._redis import start_redis_server
from benchmarks.settings import Settings
from bus import Agent, ToolCall, ToolResult
from guard.sessions._group import GroupCommit
from guard.sessions.fleet import FleetGuard

_QUEUE = "bench:ready"
_DONE = "bench:done"


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


async def _tool_call(fleet: FleetGuard, session: str, step: int, latencies: list[float]) -> None:
    """One tool call of ``session``: about a third repeat an earlier call."""
    agent = Agent("main")
    repeat = zlib.crc32(f"{session}:{step}".encode()) % 10 < 3
    args = {"pattern": "x"} if repeat else {"pattern": f"{session}-{step}"}
    call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool="grep", args=args)
    begun = time.perf_counter()
    outcome = await fleet.handle(session, call)
    latencies.append(time.perf_counter() - begun)
    allowed = outcome.decision is None or outcome.decision.allowed
    result = ToolResult.answering(call, "no matches" if allowed else "denied")
    begun = time.perf_counter()
    await fleet.handle(session, result)
    latencies.append(time.perf_counter() - begun)


async def _sticky(
    fleet: FleetGuard, mode: str, index: int, workers: int, sessions: int, calls: int, lat: list[float]
) -> int:
    async def session(name: str) -> None:
        for step in range(1, calls + 1):
            await _tool_call(fleet, name, step, lat)

    mine = [f"{mode}-{n}" for n in range(sessions) if n % workers == index]
    await asyncio.gather(*(session(name) for name in mine))
    return len(mine) * calls


async def _random(fleet: FleetGuard, client: Redis, calls: int, lat: list[float]) -> int:
    """Take sessions' next calls from the shared queue until every session is
    done; a session goes back to the queue after each of its calls (the
    returns travel in batches, so the harness costs the workers little)."""
    done = 0
    failed: list[BaseException] = []
    running: set[asyncio.Task[None]] = set()
    back: GroupCommit[str, None] = GroupCommit(lambda tokens: _push(client, tokens))

    async def one(token: bytes) -> None:
        nonlocal done
        name, _, step = token.decode().rpartition(":")
        try:
            await _tool_call(fleet, name, int(step), lat)
            done += 1
            await back.submit(f"{name}:{int(step) + 1}" if int(step) < calls else "")
        except BaseException as exc:
            failed.append(exc)
            raise

    while not failed:
        tokens: list[bytes] = await client.lpop(_QUEUE, 64) or []  # type: ignore[assignment]
        if not tokens:
            # Idle: block (this coroutine only) until a session is queued.
            got = await client.blpop([_QUEUE], timeout=0.05)
            if got is None:
                if not running and int(await client.get(_DONE) or 0) >= int(await client.get("bench:n") or 0):
                    return done
                continue
            tokens = [got[1] if isinstance(got[1], bytes) else got[1].encode()]
        for token in tokens:
            task = asyncio.create_task(one(token))
            running.add(task)
            task.add_done_callback(running.discard)
    raise failed[0]


async def _push(client: Redis, tokens: Sequence[str]) -> list[None]:
    """Queue sessions' next calls; an empty token is a finished session."""
    pipe = client.pipeline(transaction=False)
    if any(tokens):
        pipe.rpush(_QUEUE, *[token for token in tokens if token])
    if not all(tokens):
        pipe.incrby(_DONE, sum(1 for token in tokens if not token))
    await pipe.execute()
    return [None] * len(tokens)


async def _worker(url: str, index: int, mode: str, args: Any, out: multiprocessing.Queue[Any]) -> None:
    client = Redis.from_url(url)
    harness = Redis(connection_pool=BlockingConnectionPool.from_url(url, max_connections=16))
    fleet = FleetGuard(client, worker=f"{mode}-w{index}")
    # Warm up out of the timed part: connections, Redis loading the scripts,
    # the first guard action and its log line are once per process.
    for step in range(1, 5):
        await fleet.handle(
            f"warm-up-{mode}-{index}",
            ToolCall(agent=Agent("main"), call_id=f"c{step}", step=step, tool="grep", args={}),
        )
    latencies: list[float] = []
    cpu = time.process_time()
    start = time.perf_counter()
    if mode.startswith("sticky"):
        calls = await _sticky(fleet, mode, index, args.workers, args.sessions, args.calls, latencies)
    else:
        calls = await _random(fleet, harness, args.calls, latencies)
    out.put((calls, time.perf_counter() - start, latencies, time.process_time() - cpu))
    await client.aclose()
    await harness.aclose()


def _run_worker(url: str, index: int, mode: str, args: Any, out: multiprocessing.Queue[Any]) -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    asyncio.run(_worker(url, index, mode, args, out))


async def _seed(url: str, mode: str, sessions: int) -> None:
    client = Redis.from_url(url)
    await client.delete(_QUEUE, _DONE)
    await client.set("bench:n", sessions)
    await client.rpush(_QUEUE, *[f"{mode}-{n}:1".encode() for n in range(sessions)])
    await client.aclose()


def _result(queue: multiprocessing.Queue[Any], procs: list[multiprocessing.Process]) -> Any:
    """The next worker's result; fails loudly, not forever, when a worker died."""
    while True:
        try:
            return queue.get(timeout=1)
        except Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"a worker process failed (exit code {dead[0]}); see its traceback above") from None


def _run(url: str, pid: int, mode: str, args: Any, sessions: int) -> dict[str, float]:
    if not mode.startswith("sticky"):
        asyncio.run(_seed(url, mode, sessions))
    run_args = argparse.Namespace(**{**vars(args), "sessions": sessions})
    queue: multiprocessing.Queue[Any] = multiprocessing.Queue()
    procs = [
        multiprocessing.Process(target=_run_worker, args=(url, i, mode, run_args, queue)) for i in range(args.workers)
    ]
    redis_cpu = process_cpu(pid)
    start = time.perf_counter()
    for proc in procs:
        proc.start()
    results = [_result(queue, procs) for _ in procs]
    wall = time.perf_counter() - start
    redis_cpu = process_cpu(pid) - redis_cpu
    for proc in procs:
        proc.join()
    calls = sum(r[0] for r in results)
    latencies = sorted(x for r in results for x in r[2])
    return {
        "calls": calls,
        "rate": calls / wall,
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[int(len(latencies) * 0.99)] * 1000,
        "worker_us": sum(r[3] for r in results) / calls * 1e6,
        "redis_us": redis_cpu / calls * 1e6,
    }


def measure(workers: int, sessions: int, calls: int, latency_sessions: int) -> dict[str, Any]:
    """The bare ``XADD`` baseline and every routing, against one fresh redis-server."""
    args = argparse.Namespace(workers=workers, sessions=sessions, calls=calls, latency_sessions=latency_sessions)
    server = start_redis_server()
    try:
        baseline = asyncio.run(_bare_xadd(server.url, 200_000))
        runs = {
            "random routing": _run(server.url, server.process.pid, "random", args, sessions),
            "sticky routing": _run(server.url, server.process.pid, "sticky", args, sessions),
            "latency (random)": _run(server.url, server.process.pid, "latency", args, latency_sessions),
            "latency (sticky)": _run(server.url, server.process.pid, "sticky-latency", args, latency_sessions),
        }
    finally:
        server.process.terminate()
        server.process.wait(30)
    return {"baseline": baseline, "runs": runs}


async def fleet(settings: Settings) -> list[Row]:
    """The section of ``python -m benchmarks``: tool calls per second, fleet-wide."""
    section = f"fleet: {settings.fleet_workers} FleetGuard workers, {settings.fleet_calls} tool calls per session"
    try:
        measured = await asyncio.to_thread(
            measure,
            settings.fleet_workers,
            settings.fleet_sessions,
            settings.fleet_calls,
            settings.fleet_latency_sessions,
        )
    except FileNotFoundError as exc:
        return [Row(section=section, name="fleet", rate=0.0, unit="tool calls/s", extra=f"not measured: {exc}")]
    base = measured["baseline"] / 2
    rows = [
        Row(
            section=section,
            name="bare pipelined XADD (2 events a call)",
            rate=base,
            unit="tool calls/s",
            micros=1e6 / base,
            ratio=1.0,
            baseline="bare pipelined XADD",
        )
    ]
    for name, run in measured["runs"].items():
        sessions = settings.fleet_latency_sessions if name.startswith("latency") else settings.fleet_sessions
        rows.append(
            Row(
                section=section,
                name=f"{name}, {sessions} sessions",
                rate=run["rate"],
                unit="tool calls/s",
                micros=1e6 / run["rate"],
                ratio=run["rate"] / base,
                baseline="bare pipelined XADD",
                extra=f"per event p50 {run['p50']:.2f} ms, p99 {run['p99']:.2f} ms; CPU per tool call: workers "
                f"{run['worker_us']:.0f} us, redis-server {run['redis_us']:.0f} us",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--calls", type=int, default=40, help="tool calls per session")
    parser.add_argument("--latency-sessions", type=int, default=16)
    args = parser.parse_args()
    measured = measure(args.workers, args.sessions, args.calls, args.latency_sessions)
    baseline, runs = measured["baseline"], measured["runs"]
    machine = platform.processor() or platform.machine()
    load = os.getloadavg()[0]
    print(f"machine: {machine}, {os.cpu_count()} cpus, Python {platform.python_version()}, load {load:.2f}")
    print(f"bare pipelined XADD: {baseline:,.0f} events/s ({baseline / 2:,.0f} tool calls/s at 2 events each)")
    print(f"{args.workers} workers; {args.calls} tool calls per session")
    for name, run in runs.items():
        sessions = args.latency_sessions if name.startswith("latency") else args.sessions
        print(
            f"{name:>17}: {sessions} sessions, {run['rate']:,.0f} tool calls/s "
            f"({run['rate'] * 2 / baseline:.2f}x bare XADD); per event p50 {run['p50']:.2f} ms, "
            f"p99 {run['p99']:.2f} ms; CPU per tool call: workers {run['worker_us']:.0f} us, "
            f"redis-server {run['redis_us']:.0f} us"
        )


if __name__ == "__main__":
    main()
