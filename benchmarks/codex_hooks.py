"""What the guard's hooks add to each tool call of the real Codex CLI, end to
end: ``codex exec`` runs a script of N shell calls (distinct commands, so
nothing is denied) against a scripted Responses API on loopback, with no
hooks (the baseline), with ``mcp_tool`` hooks calling ``serve``'s ``/mcp``,
with curl command hooks forwarding to ``serve``, and with the command hook
(``repeat-tool-guard hook --agent codex``, a Python start per event). Each
variant's wall time minus the baseline's, divided by N, is its cost per tool
call (a call is two hook events, PreToolUse and PostToolUse). Rounds
interleave the variants, so a noisy neighbour slows them alike; the median
round is reported. Not a test: nothing here asserts a timing.

Needs the Codex CLI (``codex`` on PATH, or ``$REPEAT_TOOL_GUARD_NPM_CLIS``
holding the npm install ``.ci/run`` makes) and the ``serve`` extra.

    python -m benchmarks.codex_hooks                   # 20 calls, 3 rounds
    python -m benchmarks.codex_hooks --calls 40 --rounds 5 --json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("none", "mcp_tool", "curl", "command")


def codex_binary() -> Path | None:
    base = os.environ.get("REPEAT_TOOL_GUARD_NPM_CLIS")
    for candidate in ([Path(base) / "node_modules" / ".bin" / "codex"] if base else []) + [
        Path("/work/npm-clis/node_modules/.bin/codex")
    ]:
        if candidate.exists():
            return candidate
    found = shutil.which("codex")
    return Path(found) if found else None


class _Responses:
    """N ``exec_command`` calls, one per response, then a text answer, streamed."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.served = 0
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def reset(self) -> None:
        with self._lock:
            self.served = 0

    def _next(self) -> dict[str, Any]:
        with self._lock:
            self.served += 1
            n = self.served
        if n <= self.calls:
            arguments = json.dumps({"cmd": f"echo call {n}"})
            return {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": "exec_command",
                "arguments": arguments,
                "status": "completed",
            }
        content = [{"type": "output_text", "text": "done", "annotations": []}]
        return {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed", "content": content}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                item = api._next()
                response = {"id": "resp", "object": "response", "status": "in_progress", "model": "gpt-5.1-codex"}
                usage = {
                    "input_tokens": 1,
                    "output_tokens": 1,
                    "total_tokens": 2,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens_details": {"reasoning_tokens": 0},
                }
                events = [
                    ("response.created", {"type": "response.created", "response": {**response, "output": []}}),
                    (
                        "response.output_item.done",
                        {"type": "response.output_item.done", "output_index": 0, "item": item},
                    ),
                    (
                        "response.completed",
                        {
                            "type": "response.completed",
                            "response": {**response, "status": "completed", "output": [item], "usage": usage},
                        },
                    ),
                ]
                body = b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _settings(*args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "guard", "hook-settings", "--agent", "codex", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def _serve(state: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "guard", "serve", "--port", str(port), "--state-dir", str(state)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                return server, url
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise RuntimeError("serve did not start")


def _round_trips(url: str, rounds: int = 200) -> dict[str, float]:
    """Milliseconds, median, from this process over one kept-alive
    connection: a ``PreToolUse`` and ``PostToolUse`` pair through ``/mcp``
    (what one Codex tool call costs serve) and a ``/healthz`` (the floor: the
    HTTP stack alone), in the same conditions as the Codex runs."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)

    def post(path: str, body: Any) -> None:
        connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        connection.getresponse().read()

    def pair(n: int) -> None:
        tool = {"tool_name": "Bash", "tool_input": {"command": f"echo {n}"}, "tool_use_id": f"bench_{n}"}
        for event, extra in (("PreToolUse", {}), ("PostToolUse", {"tool_response": "ok"})):
            arguments = {"session_id": "bench-round-trips", "hook_event_name": event, **tool, **extra}
            params = {"name": "codex_hook", "arguments": arguments}
            post("/mcp", {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params})

    def healthz(n: int) -> None:
        connection.request("GET", "/healthz")
        connection.getresponse().read()

    timings: dict[str, float] = {}
    for name, step in (("mcp_pair", pair), ("healthz", healthz)):
        samples = []
        for n in range(rounds):
            started = time.perf_counter()
            step(n)
            samples.append(time.perf_counter() - started)
        timings[name] = 1000 * statistics.median(samples[rounds // 10 :])
    connection.close()
    return timings


def _run(codex: Path, home: Path, api: _Responses, hooks: Any, extra_toml: str) -> float:
    codex_home = home / ".codex"
    shutil.rmtree(home, ignore_errors=True)
    (home / "work").mkdir(parents=True)
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        'model = "gpt-5.1-codex"\nmodel_provider = "bench"\napproval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\n'
        f'[model_providers.bench]\nname = "bench"\nbase_url = "{api.url}"\nwire_api = "responses"\n'
        'env_key = "BENCH_KEY"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n' + extra_toml
    )
    if hooks is not None:
        (codex_home / "hooks.json").write_text(json.dumps(hooks))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "BENCH_KEY": "sk-bench",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    api.reset()
    started = time.perf_counter()
    done = subprocess.run(
        [str(codex), "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust", "go"],
        cwd=home / "work",
        env=env,
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or api.served != api.calls + 1:
        raise RuntimeError(f"codex exec failed ({done.returncode}, {api.served} requests): {done.stderr[-500:]}")
    return elapsed


def measure(calls: int, rounds: int) -> dict[str, Any]:
    codex = codex_binary()
    if codex is None:
        raise SystemExit("the Codex CLI is not installed (npm @openai/codex; .ci/run installs it)")
    api = _Responses(calls)
    times: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="codex-bench-") as scratch:
        root = Path(scratch)
        server, url = _serve(root / "serve-state")
        try:
            variants = {
                "none": (None, ""),
                "mcp_tool": (
                    _settings("--http", url, "--mcp"),
                    f'[mcp_servers.repeat_tool_guard]\nurl = "{url}/mcp"\n',
                ),
                "curl": (_settings("--http", url), ""),
                "command": (_settings("--state-dir", str(root / "hook-state")), ""),
            }
            _run(codex, root / "warm", api, None, "")  # first start pays for cold caches
            for _ in range(rounds):
                for variant, (hooks, toml) in variants.items():
                    times[variant].append(_run(codex, root / variant, api, hooks, toml))
            direct = _round_trips(url)
        finally:
            server.terminate()
            server.wait(10)
    base = statistics.median(times["none"])
    return {
        "calls": calls,
        "rounds": rounds,
        "codex": subprocess.run([str(codex), "--version"], capture_output=True, text=True).stdout.strip(),
        "seconds": {variant: statistics.median(values) for variant, values in times.items()},
        "ms_per_call_over_none": {
            variant: 1000 * (statistics.median(values) - base) / calls for variant, values in times.items()
        },
        "serve_ms": direct,
    }


def _rows(result: dict[str, Any]) -> Iterator[str]:
    yield f"{result['codex']}: {result['calls']} shell calls per run, median of {result['rounds']} rounds"
    for variant in VARIANTS:
        seconds = result["seconds"][variant]
        over = result["ms_per_call_over_none"][variant]
        yield f"  {variant:9} {seconds:7.2f} s   {over:+8.1f} ms per tool call over no hooks"
    direct = result["serve_ms"]
    yield (
        f"  serve alone: {direct['mcp_pair']:.2f} ms per PreToolUse+PostToolUse pair through /mcp, "
        f"{direct['healthz']:.2f} ms per /healthz (the HTTP floor)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.codex_hooks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.calls, args.rounds)
    print(json.dumps(result, indent=2) if args.json else "\n".join(_rows(result)))


if __name__ == "__main__":
    main()
