"""Fleet chaos run: ``serve --redis`` replicas killed and restarted under load.

Starts a redis-server and ``--replicas`` ``repeat-tool-guard serve --redis``
processes on free loopback ports, drives ``--sessions`` sessions from
``--clients`` concurrent HTTP clients (a minimal keep-alive HTTP/1.1
client, ``Http``), each request to a replica
chosen at random, while one replica is killed (SIGKILL) and restarted every
``--kill-every`` seconds. A request that fails because its replica died is
retried on another one. At the end every session is exported and compared
with a single-process replay of it:

- lost events: events a client got an answer for that the export lacks;
- action differences: ``replay --check`` differences (a missing, extra or
  changed reminder, denial, escalation or halt), over every session;
- throughput (tool calls per second, all replicas) and the latency of each
  answered request;
- the CPU the replicas (a killed one's up to its kill) and redis-server
  spent per tool call, from ``/proc``: the figure to compare between runs
  on a machine shared with other work.

    python -m benchmarks.fleet_chaos [--replicas 4] [--sessions 1000] [--clients 50] [--calls 6]
                                     [--kill-every 3 | --no-kill]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import structlog
from redis.asyncio import Redis

from benchmarks._measure import Row, process_cpu
from benchmarks._redis import start_redis_server
from benchmarks.settings import Settings
from bus.redis_log import RedisSessionLog
from guard.verdicts import replay_log


class Replica:
    def __init__(self, url: str, index: int) -> None:
        self.redis = url
        self.index = index
        self.proc: subprocess.Popen[str] | None = None
        self.base = ""
        self.kills = 0
        self.spent = 0.0
        """CPU seconds of its processes since ``mark`` was last called, up to their kills."""
        self._mark = 0.0

    def mark(self) -> None:
        """Count CPU from now on."""
        self.spent = 0.0
        self._mark = process_cpu(self.proc.pid) if self.proc is not None else 0.0

    def cpu(self) -> float:
        """CPU seconds since ``mark``, the killed processes' included."""
        return self.spent + (process_cpu(self.proc.pid) - self._mark if self.proc is not None else 0.0)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "guard", "serve", "--port", "0", "--redis", self.redis],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )  # fmt: skip
        assert self.proc.stderr is not None
        first = self.proc.stderr.readline()
        if "listening on " not in first:
            raise RuntimeError(f"replica {self.index} did not start: {first}")
        self.base = first.split("listening on ", 1)[1].split(" ", 1)[0]

    def kill(self) -> None:
        if self.proc is not None:
            self.spent += process_cpu(self.proc.pid) - self._mark
            self._mark = 0.0  # the next process's from its start
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.kills += 1

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


class Http:
    """A minimal HTTP/1.1 client for the benchmark's JSON posts: kept-alive
    connections per replica, nothing else. httpx spent a whole core of the
    2-vCPU machine driving 50 clients, so the run measured its client, not
    the fleet. A broken connection (a killed replica) raises ``OSError``,
    ``EOFError`` or ``TimeoutError`` and is dropped."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._idle: dict[str, list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]] = {}

    async def post(self, base: str, path: str, body: bytes) -> tuple[int, bytes]:
        idle = self._idle.setdefault(base, [])
        while True:
            reused = bool(idle)
            if reused:
                reader, writer = idle.pop()
            else:
                host, _, port = base.removeprefix("http://").rpartition(":")
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), self.timeout)
            try:
                writer.write(
                    b"POST %s HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                    % (path.encode(), base.removeprefix("http://").encode(), len(body), body)
                )
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.timeout)
            except asyncio.IncompleteReadError as exc:
                writer.close()
                if reused and not exc.partial:
                    continue  # the server closed the idle connection (keep-alive timeout): not a failure
                raise
            except (OSError, TimeoutError):
                writer.close()
                raise
            break
        try:
            status = int(head[9:12])
            length = 0
            for line in head.lower().split(b"\r\n"):
                if line.startswith(b"content-length:"):
                    length = int(line[15:])
            content = await asyncio.wait_for(reader.readexactly(length), self.timeout)
        except (OSError, EOFError, TimeoutError, ValueError):
            writer.close()
            raise
        idle.append((reader, writer))
        return status, content

    def close(self) -> None:
        for idle in self._idle.values():
            for _, writer in idle:
                writer.close()


class Run:
    def __init__(self, replicas: list[Replica]) -> None:
        self.replicas = replicas
        self.latencies: list[float] = []
        self.answered: dict[str, int] = {}
        self.retries = 0
        self.failures = 0
        self.calls = 0

    async def post(self, http: Http, session: str, event: dict[str, Any]) -> dict[str, Any]:
        body = msgspec.json.encode(event)
        for _ in range(50):
            replica = random.choice(self.replicas)
            if not replica.base:
                continue
            begun = time.perf_counter()
            try:
                status, content = await http.post(replica.base, f"/v1/sessions/{session}/events", body)
            except (OSError, EOFError, TimeoutError, ValueError):
                self.retries += 1
                await asyncio.sleep(0.05)
                continue
            if status == 200:
                self.latencies.append(time.perf_counter() - begun)
                answer: dict[str, Any] = msgspec.json.decode(content)
                self.answered[session] = max(self.answered.get(session, 0), answer["seq"])
                return answer
            if status == 409:  # a retry of what a dying replica had already recorded
                self.retries += 1
                return {"allowed": True, "seq": 0, "messages": []}
            self.retries += 1
            await asyncio.sleep(0.05)
        self.failures += 1
        return {"allowed": True, "seq": 0, "messages": []}

    async def session(self, http: Http, name: str, calls: int) -> None:
        rng = random.Random(name)
        for n in range(calls):
            args = {"pattern": "loader"} if rng.random() < 0.6 else {"pattern": f"{name}-{n}"}
            call = {"type": "tool/call", "agent": "main", "call_id": f"c{n}", "tool": "grep", "args": args}
            answer = await self.post(http, name, call)
            self.calls += 1
            if answer.get("allowed") is False:
                continue
            result = {"type": "tool/result", "agent": "main", "call_id": f"c{n}", "content": "no matches"}
            await self.post(http, name, result)


async def _chaos(replicas: list[Replica], every: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), every)
        except TimeoutError:
            victim = random.choice(replicas)
            victim.base = ""
            victim.kill()
            await asyncio.to_thread(victim.start)


async def _drive(args: argparse.Namespace, replicas: list[Replica], redis_pid: int) -> tuple[Run, float, float, float]:
    """The run, its seconds, and the CPU seconds the replicas and redis-server spent in it."""
    run = Run(replicas)
    names = [f"chaos-{n}" for n in range(args.sessions)]
    queue: asyncio.Queue[str] = asyncio.Queue()
    for name in names:
        queue.put_nowait(name)
    stop = asyncio.Event()
    http = Http(timeout=30)
    try:

        async def client() -> None:
            while not queue.empty():
                await run.session(http, queue.get_nowait(), args.calls)

        killer = asyncio.create_task(_chaos(replicas, args.kill_every, stop)) if not args.no_kill else None
        for replica in replicas:
            replica.mark()
        redis_cpu = process_cpu(redis_pid)
        begun = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(args.clients)))
        elapsed = time.perf_counter() - begun
        stop.set()
        if killer is not None:
            await killer  # before the CPU is read: a replica it is killing has no /proc entry to read
        replicas_cpu = sum(replica.cpu() for replica in replicas)
        redis_cpu = process_cpu(redis_pid) - redis_cpu
    finally:
        http.close()
    return run, elapsed, replicas_cpu, redis_cpu


async def _verify(url: str, run: Run, folder: Path) -> tuple[int, int, int]:
    client = Redis.from_url(url)
    lost = differences = sessions = 0
    try:
        for name, answered in run.answered.items():
            path = folder / f"{name}.jsonl"
            await RedisSessionLog(client, name).export(path)
            outcome = await replay_log(path)
            differences += len(outcome.differences)
            last = outcome.report.events
            lost += max(0, answered - last)
            sessions += 1
    finally:
        await client.aclose()
    return sessions, lost, differences


def chaos(replicas: int, sessions: int, clients: int, calls: int, kill_every: float | None) -> dict[str, Any]:
    """One run against a fresh redis-server; ``kill_every`` None kills no replica."""
    args = argparse.Namespace(
        replicas=replicas, sessions=sessions, clients=clients, calls=calls, kill_every=kill_every or 0.0,
        no_kill=kill_every is None,
    )  # fmt: skip
    server = start_redis_server()
    fleet = [Replica(server.url, i) for i in range(replicas)]
    try:
        for replica in fleet:
            replica.start()
        run, elapsed, replicas_cpu, redis_cpu = asyncio.run(_drive(args, fleet, server.process.pid))
        with tempfile.TemporaryDirectory() as folder:
            verified, lost, differences = asyncio.run(_verify(server.url, run, Path(folder)))
    finally:
        for replica in fleet:
            replica.stop()
        server.process.terminate()
        server.process.wait(30)
    latencies = sorted(run.latencies)
    return {
        "sessions": verified,
        "kills": sum(r.kills for r in fleet),
        "calls": run.calls,
        "elapsed": elapsed,
        "rate": run.calls / elapsed,
        "replicas_cpu": replicas_cpu / run.calls * 1000,
        "redis_cpu": redis_cpu / run.calls * 1000,
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[int(len(latencies) * 0.99)] * 1000,
        "retries": run.retries,
        "failures": run.failures,
        "lost": lost,
        "differences": differences,
    }


async def fleet_chaos(settings: Settings) -> list[Row]:
    """The section of ``python -m benchmarks``: ``serve --redis`` replicas
    without kills (throughput), then with a kill every few seconds (nothing lost)."""
    section = f"serve --redis, {settings.chaos_replicas} replicas, {settings.chaos_clients} clients"
    rows = []
    for name, every in (
        ("no kills", None),
        (f"a replica killed every {settings.chaos_kill_every:g} s", settings.chaos_kill_every),
    ):
        try:
            result = await asyncio.to_thread(
                chaos, settings.chaos_replicas, settings.chaos_sessions, settings.chaos_clients, 6, every
            )
        except FileNotFoundError as exc:
            return [Row(section=section, name=name, rate=0.0, unit="tool calls/s", extra=f"not measured: {exc}")]
        whole = not (result["lost"] or result["differences"] or result["failures"])
        rows.append(
            Row(
                section=section,
                name=f"{name}, {result['sessions']} sessions",
                rate=result["rate"],
                unit="tool calls/s",
                micros=1e6 / result["rate"],
                extra=f"{result['kills']} kills; latency p50 {result['p50']:.1f} ms, p99 {result['p99']:.1f} ms; "
                f"CPU per tool call: replicas {result['replicas_cpu']:.2f} ms, Redis {result['redis_cpu']:.2f} ms; "
                f"retries {result['retries']}, unanswered {result['failures']}, lost events {result['lost']}, "
                f"replay --check differences {result['differences']}",
                target="0 lost, 0 differences, 0 unanswered",
                met=whole,
            )
        )
    return rows


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=6, help="tool calls per session")
    parser.add_argument("--kill-every", type=float, default=3.0, help="seconds between replica kills")
    parser.add_argument("--no-kill", action="store_true", help="kill no replica: the fleet's steady state")
    args = parser.parse_args()
    result = chaos(args.replicas, args.sessions, args.clients, args.calls, None if args.no_kill else args.kill_every)
    load = ", ".join(f"{n:.2f}" for n in os.getloadavg())
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}; "
        f"load average after the run {load}"
    )
    print(
        f"{args.replicas} replicas, {result['sessions']} sessions, {args.clients} clients, "
        f"{result['kills']} kills; {result['calls']} tool calls in {result['elapsed']:.1f} s = "
        f"{result['rate']:,.0f} calls/s"
    )
    print(
        f"CPU per tool call: replicas {result['replicas_cpu']:.2f} ms, Redis {result['redis_cpu']:.2f} ms "
        "(two requests a call unless denied; a killed replica's CPU up to its kill)"
    )
    print(
        f"latency per request: p50 {result['p50']:.1f} ms, p99 {result['p99']:.1f} ms; retries {result['retries']}, "
        f"requests that never got an answer {result['failures']}"
    )
    print(f"lost events: {result['lost']}; replay --check differences over every session: {result['differences']}")
    if result["lost"] or result["differences"] or result["failures"]:
        sys.exit(1)  # the run is a check too: any loss or difference fails it


if __name__ == "__main__":
    main()
