"""What one Claude Code HTTP hook round trip to ``repeat-tool-guard serve``
costs, and that it stays flat as the session grows; the command hook timed
in the same run for comparison.

The server runs as a real process on loopback (``--port 0``). For each
session length N (earlier tool calls: a realistic mix of distinct reads, an
edit-and-test cycle and a grep loop), the session's log is prepared as the
server leaves it, and the server restores it on the session's first request
(once; not timed). Then each round posts, for every N in turn, a
``PreToolUse`` and its ``PostToolUse`` for new calls (each post is one hook
invocation, timed from the client: request, guard, log write, answer) over
one keep-alive connection, as Claude Code's HTTP client keeps one. Rounds
interleave the sizes, so a noisy neighbour slows them alike.

The command hook (``repeat-tool-guard hook``, a process per invocation) is
timed in the same run on the same kind of session, fewer times (it costs
far more). Beside each round's hook posts, the same number of ``GET
/healthz`` requests (the server's barest route: the same server, framework
and connection, no guard) are timed, and the server process's CPU time
(user + system, from ``/proc``) is taken around each batch, so the guard's
own cost per request is its CPU over the bare route's. Not a test: nothing
here asserts a timing.

``--export`` times instead the cost of OpenTelemetry export: two servers
side by side (``--config recommended``), one exporting every guard action
over OTLP to a real receiver (``--otlp-endpoint URL``, or an Arize Phoenix
the benchmark starts from ``$REPEAT_TOOL_GUARD_PHOENIX``), one not; each
round sends both the same loops (the same call over and over, so most hooks
answer with a guard action to export), alternating which goes first.

    python -m benchmarks.http_hook                  # sizes 0 1000 10000 100000
    python -m benchmarks.http_hook --sizes 0 1000 --rounds 5 --json
    python -m benchmarks.http_hook --export --rounds 20
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import structlog

from benchmarks._measure import Row
from benchmarks.command_hook import hook_calls
from benchmarks.settings import Settings
from bus import Bus, SessionLog
from guard import Config
from guard.adapters import GuardLink
from guard.adapters.claude_hooks import ClaudeHooks
from guard.guard import Guard

REPO = Path(__file__).resolve().parents[1]


def _payload(session: str, event: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": session, "hook_event_name": event, "cwd": "/w", "transcript_path": "/t", **fields}


async def prepare(state: Path, session: str, n: int) -> None:
    """``state/<session>.jsonl`` after ``n`` tool calls through the hook translation."""
    bus = Bus()
    Guard(Config()).attach(bus)
    with SessionLog(state / f"{session}.jsonl", session=session).attach(bus):
        hooks = ClaudeHooks(GuardLink(bus))
        await hooks.handle(_payload(session, "UserPromptSubmit", prompt="find the config loader"))
        for k, (tool, args) in enumerate(hook_calls(n)):
            pre = _payload(session, "PreToolUse", tool_use_id=f"t{k}", tool_name=tool, tool_input=args)
            await hooks.handle(pre)
            await hooks.handle(pre | {"hook_event_name": "PostToolUse", "tool_response": "ok"})


def _new_call(session: str, k: int) -> tuple[dict[str, Any], dict[str, Any]]:
    pre = _payload(
        session, "PreToolUse", tool_use_id=f"new{k}", tool_name="Read", tool_input={"file_path": f"new/{k}.py"}
    )
    return pre, pre | {"hook_event_name": "PostToolUse", "tool_response": "text"}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _start_server(state: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    server = subprocess.Popen(
        [sys.executable, "-m", "guard", "serve", "--port", "0", "--state-dir", str(state), *args],
        cwd=REPO,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**environ, **(env or {})},
    )
    assert server.stderr is not None
    line = server.stderr.readline()
    if "listening on " not in line:
        raise RuntimeError(f"the server did not start: {line}{server.stderr.read()}")
    return server, line.split("listening on ", 1)[1].split(" ", 1)[0]


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _command_hook(state: Path, payload: dict[str, Any]) -> float:
    script = Path(sys.executable).with_name("repeat-tool-guard")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "guard"]
    started = time.perf_counter()
    subprocess.run(
        [*command, "hook", "--state-dir", str(state)],
        input=json.dumps(payload).encode(),
        capture_output=True,
        check=True,
    )
    return time.perf_counter() - started


def run(sizes: list[int], rounds: int, pairs: int, command_calls: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="http-hook-bench-"))
    try:
        serve_state, hook_state = work / "serve", work / "hook"
        serve_state.mkdir()
        hook_state.mkdir()
        for n in sizes:
            anyio.run(prepare, serve_state, f"s{n}", n)
        command_sizes = [n for n in sizes if n <= 1000] if command_calls else []
        for n in command_sizes:
            anyio.run(prepare, hook_state, f"s{n}", n)
        server, url = _start_server(serve_state)
        times: dict[int, list[float]] = {n: [] for n in sizes}
        bare: list[float] = []
        cpu: dict[int | str, float] = {"bare": 0.0, **dict.fromkeys(sizes, 0.0)}
        try:
            with httpx.Client(base_url=url, timeout=120) as client:
                for n in sizes:  # the restore of each session, once, untimed
                    client.post("/hooks/claude-code", json=_payload(f"s{n}", "UserPromptSubmit", prompt="go on"))
                k = 0
                for _ in range(rounds):
                    before = _cpu(server.pid)
                    for _ in range(pairs * 2):
                        started = time.perf_counter()
                        response = client.get("/healthz")
                        bare.append(time.perf_counter() - started)
                        response.raise_for_status()
                    cpu["bare"] += _cpu(server.pid) - before
                    for n in sizes:
                        before = _cpu(server.pid)
                        for _ in range(pairs):
                            for payload in _new_call(f"s{n}", k):
                                started = time.perf_counter()
                                response = client.post("/hooks/claude-code", json=payload)
                                times[n].append(time.perf_counter() - started)
                                response.raise_for_status()
                            k += 1
                        cpu[n] += _cpu(server.pid) - before
        finally:
            server.terminate()
            server.wait(60)
            assert server.stderr is not None
            server.stderr.close()
        command: dict[int, list[float]] = {n: [] for n in command_sizes}
        for k in range(command_calls):
            for n in command_sizes:
                for payload in _new_call(f"s{n}", 10_000_000 + k):
                    command[n].append(_command_hook(hook_state, payload))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    http_rows = {
        n: {
            "median_ms": statistics.median(t) * 1e3,
            "p99_ms": _percentile(t, 0.99) * 1e3,
            "invocations": len(t),
            "cpu_us": cpu[n] / len(t) * 1e6,
        }
        for n, t in times.items()
    }
    bare_row = {
        "median_ms": statistics.median(bare) * 1e3,
        "p99_ms": _percentile(bare, 0.99) * 1e3,
        "invocations": len(bare),
        "cpu_us": cpu["bare"] / len(bare) * 1e6,
    }
    command_rows = {n: {"median_ms": statistics.median(t) * 1e3, "invocations": len(t)} for n, t in command.items()}
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_implementation()} "
        f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f}",
        "bare": bare_row,
        "http": http_rows,
        "command": command_rows,
    }


async def http_hook(settings: Settings) -> list[Row]:
    """The section of ``python -m benchmarks``: the HTTP hook per request at
    each session size against the same server's bare route."""
    result = await anyio.to_thread.run_sync(
        run, list(settings.hook_sizes), settings.http_rounds, settings.http_pairs, 0
    )
    bare = result["bare"]
    section = (
        f"HTTP hook via serve, per request ({settings.http_rounds} rounds of {settings.http_pairs * 2} requests "
        "per size, one keep-alive connection)"
    )
    rows = [
        Row(
            section=section,
            name="GET /healthz (the bare route)",
            rate=1e3 / bare["median_ms"],
            unit="requests/s",
            micros=bare["median_ms"] * 1e3,
            ratio=1.0,
            baseline="GET /healthz",
            extra=f"p99 {bare['p99_ms']:.2f} ms; server CPU {bare['cpu_us']:.0f} us a request",
        )
    ]
    first = result["http"][min(result["http"])]
    for n, row in result["http"].items():
        cpu_ratio = row["cpu_us"] / bare["cpu_us"] if bare["cpu_us"] else float("inf")
        rows.append(
            Row(
                section=section,
                name=f"POST /hooks/claude-code, {n:,} earlier calls",
                rate=1e3 / row["median_ms"],
                unit="requests/s",
                micros=row["median_ms"] * 1e3,
                ratio=bare["median_ms"] / row["median_ms"],
                baseline="GET /healthz",
                extra=f"p99 {row['p99_ms']:.2f} ms, {row['median_ms'] / first['median_ms']:.2f}× the "
                f"{min(result['http']):,}-call session; server CPU {row['cpu_us']:.0f} us a request, "
                f"{cpu_ratio:.2f}× the bare route's",
                target="server CPU <= 2× the bare route's",
                met=cpu_ratio <= 2,
            )
        )
    return rows


def _markdown(result: dict[str, Any]) -> str:
    http, command = result["http"], result["command"]
    base = http[min(http)]["median_ms"]
    lines = [
        f"Machine: {result['machine']}",
        "",
        "| earlier calls | HTTP hook median | HTTP hook p99 | vs. 0 calls | command hook median | command / HTTP |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n, row in http.items():
        cmd = command.get(n)
        cmd_text = f"{cmd['median_ms']:.0f} ms" if cmd else "-"
        ratio = f"{cmd['median_ms'] / row['median_ms']:.0f}×" if cmd else "-"
        lines.append(
            f"| {n:,} | {row['median_ms']:.2f} ms | {row['p99_ms']:.2f} ms | {row['median_ms'] / base:.2f}× "
            f"| {cmd_text} | {ratio} |"
        )
    return "\n".join(lines)


def _start_phoenix(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    executable = os.environ.get("REPEAT_TOOL_GUARD_PHOENIX")
    if not executable:
        raise SystemExit("--export needs --otlp-endpoint URL or REPEAT_TOOL_GUARD_PHOENIX (a phoenix executable)")
    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {"PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(ports[0]),
            "PHOENIX_GRPC_PORT": str(ports[1]), "PHOENIX_TELEMETRY_ENABLED": "false"}  # fmt: skip
    phoenix = subprocess.Popen(
        [executable, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{ports[0]}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and phoenix.poll() is None:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return phoenix, url
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    phoenix.kill()
    raise SystemExit("Phoenix did not start")


def export_overhead(rounds: int, loops: int, endpoint: str | None) -> dict[str, Any]:
    """Median HTTP hook latency with OTLP export on and off, same run, same loops."""
    work = Path(tempfile.mkdtemp(prefix="http-hook-export-"))
    phoenix = None
    try:
        if endpoint is None:
            phoenix, endpoint = _start_phoenix(work / "phoenix")
        otel = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_SERVICE_NAME": "http-hook-benchmark",
            # Phoenix takes traces only; a receiver that takes metrics gets them with --otlp-endpoint
            "OTEL_METRICS_EXPORTER": "none" if phoenix is not None else "otlp",
        }
        servers = {
            "off": _start_server(work / "off", "--config", "recommended"),
            "on": _start_server(work / "on", "--config", "recommended", env=otel),
        }
        times: dict[str, list[float]] = {"off": [], "on": []}
        actions = {"off": 0, "on": 0}
        try:
            clients = {name: httpx.Client(base_url=url, timeout=120) for name, (_, url) in servers.items()}
            for r in range(rounds):
                for name in ("off", "on") if r % 2 == 0 else ("on", "off"):
                    client = clients[name]
                    for j in range(loops):
                        session = f"r{r}-l{j}"
                        client.post("/hooks/claude-code", json=_payload(session, "UserPromptSubmit", prompt="go"))
                        for k in range(8):
                            call = {"tool_use_id": f"t{k}", "tool_name": "Bash", "tool_input": {"command": "make"}}
                            pre = _payload(session, "PreToolUse", **call)
                            for payload in (pre, pre | {"hook_event_name": "PostToolUse", "tool_response": "E1"}):
                                started = time.perf_counter()
                                response = client.post("/hooks/claude-code", json=payload)
                                times[name].append(time.perf_counter() - started)
                                answer = response.raise_for_status().json()
                                output = answer.get("hookSpecificOutput", {})
                                actions[name] += bool(output)
                                if output.get("permissionDecision") == "deny":
                                    break  # Claude Code runs no denied tool
            for client in clients.values():
                client.close()
        finally:
            for server, _ in servers.values():
                server.terminate()
                server.wait(60)
                if server.stderr is not None:
                    server.stderr.close()
    finally:
        if phoenix is not None:
            phoenix.terminate()
            phoenix.wait(60)
        shutil.rmtree(work, ignore_errors=True)
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_implementation()} "
        f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f}",
        "receiver": "Arize Phoenix (started by the benchmark)" if phoenix is not None else endpoint,
        "export_off": {
            "median_ms": off * 1e3,
            "p99_ms": _percentile(times["off"], 0.99) * 1e3,
            "invocations": len(times["off"]),
            "actions": actions["off"],
        },
        "export_on": {
            "median_ms": on * 1e3,
            "p99_ms": _percentile(times["on"], 0.99) * 1e3,
            "invocations": len(times["on"]),
            "actions": actions["on"],
        },
        "ratio": on / off,
    }


def _export_markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Machine: {result['machine']}; receiver: {result['receiver']}",
        "",
        "| OpenTelemetry export | HTTP hook median | p99 | hook calls | answered with an action |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in ("export_off", "export_on"):
        row = result[name]
        lines.append(
            f"| {name.split('_')[1]} | {row['median_ms']:.2f} ms | {row['p99_ms']:.2f} ms | {row['invocations']:,} "
            f"| {row['actions']:,} |"
        )
    lines.append(f"\nexport on / off (median): {result['ratio']:.2f}×")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 1000, 10_000, 100_000], metavar="N")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default: 10)")
    parser.add_argument("--pairs", type=int, default=25, help="new calls per size per round (default: 25)")
    parser.add_argument("--command-calls", type=int, default=10, help="command hook calls per size (default: 10)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--export", action="store_true", help="time OpenTelemetry export on against off instead")
    parser.add_argument("--loops", type=int, default=10, help="--export: looping sessions per round (default: 10)")
    parser.add_argument("--otlp-endpoint", help="--export: the OTLP/HTTP receiver (default: a Phoenix it starts)")
    args = parser.parse_args(argv)
    if args.export:
        exported = export_overhead(args.rounds, args.loops, args.otlp_endpoint)
        print(json.dumps(exported, indent=2) if args.json else _export_markdown(exported))
        return
    result = run(args.sizes, args.rounds, args.pairs, args.command_calls)
    print(json.dumps(result, indent=2) if args.json else _markdown(result))


if __name__ == "__main__":
    main()
