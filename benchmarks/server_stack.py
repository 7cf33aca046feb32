"""Server CPU per request of ``serve``'s application under each ASGI server:
Hypercorn (what ``serve`` runs), uvicorn with h11, uvicorn with httptools.

Each server runs the same application (``create_app`` over a file store) as
a process of its own on loopback. One client connection (a minimal
keep-alive HTTP/1.1 client, so the client's own cost stays out of the
server's figures) sends, per round, ``--requests`` ``GET /healthz`` (the
barest route of the same stack) and then as many hook requests (a
``PreToolUse`` and its ``PostToolUse`` for a new call); the server process's
CPU time (user + system, from ``/proc``) is taken around each batch. Rounds
alternate the servers, so a busy neighbour slows them alike. A server that
is not installed is reported as such. Not a test: nothing here asserts a
timing.

``--limits`` adds what each server does with oversized headers, which no
application limit can see (it gets a request only once its headers are
complete): the answer to one request with a 100 KB header, and how much of
20 MB of headers that never end the server reads, and how far its memory
grows meanwhile.

    python -m benchmarks.server_stack [--servers hypercorn,uvicorn-h11,uvicorn-httptools] [--rounds 3] [--limits]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["SERVERS", "measure"]

SERVERS = ("hypercorn", "uvicorn-h11", "uvicorn-httptools")
_NEEDS = {"hypercorn": "hypercorn", "uvicorn-h11": "uvicorn", "uvicorn-httptools": "httptools"}

_SERVER = """
import sys
from pathlib import Path

import anyio
from prometheus_client import disable_created_metrics

from guard.server.app import create_app
from guard.server.sessions import FileSessionStore

disable_created_metrics()
kind, port, state = sys.argv[1], int(sys.argv[2]), sys.argv[3]
app = create_app(FileSessionStore(Path(state), None))
if kind == "hypercorn":
    from guard.server.runner import hypercorn_config, serve_app

    config = hypercorn_config(f"127.0.0.1:{port}")
    config.listen("asyncio")
    print("ready", flush=True)
    anyio.run(lambda: serve_app(app, config, "asyncio", shutdown_trigger=anyio.Event().wait))
else:
    import uvicorn

    print("ready", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, http=kind.split("-", 1)[1], loop="asyncio",
                log_level="warning", access_log=False, lifespan="on")
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _request(sock: socket.socket, method: str, path: str, body: bytes = b"") -> None:
    sock.sendall(
        f"{method} {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n".encode()
        + body
    )
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"{method} {path}: {head.splitlines()[0]!r}")
    length = next(int(line[15:]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:"))
    while len(rest) < length:
        rest += sock.recv(65536)


def _connect(port: int) -> socket.socket:
    deadline = time.monotonic() + 30
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
        else:
            return sock


@contextlib.contextmanager
def _server(kind: str, state: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A ``kind`` server process serving the application, ready; its port."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, kind, str(port), str(state)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    try:
        assert server.stdout is not None
        server.stdout.readline()
        yield server, port
    finally:
        server.terminate()
        server.wait(60)
        if server.stdout is not None:
            server.stdout.close()


def _round(kind: str, requests: int, state: Path) -> tuple[float, float]:
    """Server CPU seconds per bare request and per hook request, one server process."""
    # one connection: fewer requests than the 1,000 Hypercorn serves on one
    with _server(kind, state) as (server, port), _connect(port) as sock:
        _request(sock, "GET", "/healthz")
        before = _cpu(server.pid)
        for _ in range(requests):
            _request(sock, "GET", "/healthz")
        bare = (_cpu(server.pid) - before) / requests
        before = _cpu(server.pid)
        for k in range(requests // 2):
            pre = {
                "session_id": "bench",
                "hook_event_name": "PreToolUse",
                "tool_use_id": f"t{k}",
                "tool_name": "Read",
                "tool_input": {"file_path": f"src/{k}.py"},
            }
            post = pre | {"hook_event_name": "PostToolUse", "tool_response": "text"}
            _request(sock, "POST", "/hooks/claude-code", json.dumps(pre).encode())
            _request(sock, "POST", "/hooks/claude-code", json.dumps(post).encode())
        hook = (_cpu(server.pid) - before) / (requests // 2 * 2)
    return bare, hook


def _rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0])


def limits(kind: str, state: Path) -> tuple[str, str]:
    """What ``kind`` answers to a 100 KB header, and what it does with 20 MB
    of headers that never end (bytes it took before closing, memory growth)."""
    with _server(kind, state) as (server, port):
        with _connect(port) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: bench\r\nx-big: " + b"a" * 100_000 + b"\r\n\r\n")
            big = sock.recv(200).split(b"\r\n")[0].decode("latin-1") or "closed without an answer"
        before = _rss_kib(server.pid)
        sent = 0
        with _connect(port) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: bench\r\n")
            try:
                for n in range(2_000):
                    sock.sendall(b"x-h%d: " % n + b"a" * 10_000 + b"\r\n")
                    sent += 10_000
            except OSError:
                endless = f"refused more after {sent // 1024} KiB were sent"
            else:
                time.sleep(0.5)
                endless = f"took all {sent // 1_000_000} MB; memory +{(_rss_kib(server.pid) - before) // 1024} MB"
    return big, endless


def measure(servers: list[str], rounds: int, requests: int) -> dict[str, dict[str, float] | str]:
    """Per server: median CPU microseconds per bare and per hook request, or why it was not measured."""
    missing = {
        kind: f"not installed ({_NEEDS[kind]})" for kind in servers if not importlib.util.find_spec(_NEEDS[kind])
    }
    runnable = [kind for kind in servers if kind not in missing]
    samples: dict[str, list[tuple[float, float]]] = {kind: [] for kind in runnable}
    with tempfile.TemporaryDirectory(prefix="server-stack-") as work:
        for n in range(rounds):
            for kind in runnable:
                samples[kind].append(_round(kind, requests, Path(work) / f"{kind}-{n}"))
    results: dict[str, dict[str, float] | str] = dict(missing)
    for kind, rows in samples.items():
        results[kind] = {
            "bare_us": statistics.median(r[0] for r in rows) * 1e6,
            "hook_us": statistics.median(r[1] for r in rows) * 1e6,
        }
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--servers", default=",".join(SERVERS), help=f"comma-separated, of {', '.join(SERVERS)}")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per server; the median is kept (3)")
    parser.add_argument("--requests", type=int, default=400, help="bare and hook requests per round (400)")
    parser.add_argument("--limits", action="store_true", help="also probe each server with oversized headers")
    args = parser.parse_args(argv)
    servers = args.servers.split(",")
    unknown = [kind for kind in servers if kind not in SERVERS]
    if unknown:
        parser.error(f"--servers: unknown {', '.join(unknown)} (known: {', '.join(SERVERS)})")
    results = measure(servers, args.rounds, args.requests)
    load = ", ".join(f"{n:.2f}" for n in os.getloadavg())
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, load average after the run {load}")
    first = next((r for r in results.values() if isinstance(r, dict)), None)
    for kind in servers:
        result = results[kind]
        if isinstance(result, str):
            print(f"{kind:>18}: {result}")
            continue
        versus = (
            f"; hook {first['hook_us'] / result['hook_us']:.2f}x as fast as {servers[0]}"
            if first and result["hook_us"]
            else ""
        )
        ratio = f"{result['hook_us'] / result['bare_us']:.2f}x" if result["bare_us"] else "-"
        print(
            f"{kind:>18}: server CPU per request: bare route {result['bare_us']:.0f} us, "
            f"hook {result['hook_us']:.0f} us ({ratio} the bare route){versus}"
        )
    if args.limits:
        with tempfile.TemporaryDirectory(prefix="server-limits-") as work:
            for kind in servers:
                if isinstance(results[kind], dict):
                    big, endless = limits(kind, Path(work) / kind)
                    print(f"{kind:>18}: a 100 KB header: {big}; 20 MB of endless headers: {endless}")


if __name__ == "__main__":
    main()
