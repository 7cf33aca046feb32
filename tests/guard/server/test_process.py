"""``repeat-tool-guard serve`` as a real process: TCP on a free port, a Unix
socket, a restart that restores sessions, a graceful SIGTERM."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from bus import ToolResult, read_log
from guard import GENTLE_REMINDER
from tests.conftest import AskScript
from tests.guard.server.conftest import REPO, ServerProcess, StartServer, hook_payload

pytestmark = pytest.mark.slow


def grep(client: httpx.Client, session: str, call_id: str) -> dict[str, Any]:
    call = {"type": "tool/call", "agent": "main", "call_id": call_id, "tool": "grep", "args": {"pattern": "x"}}
    assert client.post(f"/v1/sessions/{session}/events", json=call).json()["allowed"] is True
    result = {"type": "tool/result", "agent": "main", "call_id": call_id, "content": "none"}
    response = client.post(f"/v1/sessions/{session}/events", json=result)
    assert response.status_code == 200
    answer: dict[str, Any] = response.json()
    return answer


def replay_check(log: Path, *config: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", "replay", "--check", str(log), *config],
        capture_output=True,
        text=True,
        cwd=REPO,
    )


def test_tcp_on_a_free_port_answers_and_stops_cleanly_on_sigterm(start_server: StartServer) -> None:
    server = start_server()
    assert server.where.startswith("http://127.0.0.1:")
    with server.client() as client:
        assert client.get("/healthz").json() == {"status": "ok", "sessions": 0}
        answers = [grep(client, "tcp", f"c{n}") for n in range(3)]
        hook = client.post("/hooks/claude-code", json=hook_payload("tcp-claude", "UserPromptSubmit", prompt="hi"))
        assert (hook.status_code, hook.json()) == (200, {})
    assert [m["text"] for m in answers[2]["messages"]] == [GENTLE_REMINDER]
    assert server.stop() == 0
    assert "SIGTERM: finishing in-flight requests" in server.stderr
    assert server.stderr.rstrip().endswith("stopped; every session log is closed")
    assert "Traceback" not in server.stderr
    for log in ("tcp.jsonl", "tcp-claude.jsonl"):
        checked = replay_check(server.state_dir / log)
        assert checked.returncode == 0, checked.stderr
        assert "check: every guard action matches the log" in checked.stderr


def test_a_connection_idle_longer_than_a_client_pool_keeps_it_is_still_answered(start_server: StartServer) -> None:
    """Client pools expire idle connections after a few seconds (httpx: 5 s);
    the server keeps them longer, so a request sent on a pooled connection
    never meets one the server is closing."""
    server = start_server()
    host, port = server.where.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", "/healthz")
        assert connection.getresponse().read() == b'{"status":"ok","sessions":0}'
        sock = connection.sock
        time.sleep(6)  # past the 5 s that httpx keeps an idle connection
        connection.request("GET", "/healthz")
        assert connection.getresponse().status == 200
        assert connection.sock is sock
    finally:
        connection.close()
    assert server.stop() == 0


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_connection_its_client_closed_is_closed_at_once(start_server: StartServer, backend: str) -> None:
    """A curl hook per tool call (Codex, Gemini CLI) opens a connection, is
    answered and closes it: the server closes its end too, instead of
    holding the socket (CLOSE-WAIT) until its keep-alive timeout, which
    ran a busy server out of file descriptors."""
    server = start_server("--backend", backend)
    host, port = server.where.removeprefix("http://").split(":")
    descriptors = f"/proc/{server.proc.pid}/fd"
    before = len(os.listdir(descriptors))
    for _ in range(40):
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request("GET", "/healthz")
        assert connection.getresponse().status == 200
        connection.close()
    deadline = time.monotonic() + 10
    while len(os.listdir(descriptors)) > before + 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(os.listdir(descriptors)) <= before + 2, "the closed connections are still held"
    assert server.stop() == 0


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_client_that_half_closes_after_its_request_still_gets_an_answer(
    start_server: StartServer, backend: str
) -> None:
    """``socat`` or ``nc -N`` piping a hook's payload shuts its side down
    once the request is sent: the request in flight is answered (or, where
    the server reads that as the client leaving, told 499), never dropped."""
    server = start_server("--backend", backend)
    host, port = server.where.removeprefix("http://").split(":")
    body = json.dumps({"type": "tool/call", "agent": "main", "call_id": "c1", "tool": "grep", "args": {}}).encode()
    request = (
        f"POST /v1/sessions/half/events HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection((host, int(port)), timeout=15) as client:
        client.sendall(request + body)
        client.shutdown(socket.SHUT_WR)
        answer = b""
        while b"\r\n\r\n" not in answer and (chunk := client.recv(65536)):
            answer += chunk
    assert answer.split(b" ", 2)[1] in (b"200", b"499"), answer
    assert server.stop() == 0


@pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) is not installed")
def test_the_listen_queue_holds_a_burst_of_hooks(start_server: StartServer) -> None:
    """Hypercorn's queue of 100 overflowed when 1,000 hooks connected at once:
    the kernel refused most, and each client retried a second later."""
    server = start_server()
    port = server.where.rsplit(":", 1)[1]
    listening = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True)
    (line,) = listening.stdout.splitlines()
    queue = int(line.split()[2])  # Send-Q of a listening socket: its backlog
    limit = int(Path("/proc/sys/net/core/somaxconn").read_text())
    assert queue == min(4096, limit)
    assert server.stop() == 0


def test_a_unix_socket_only_its_owner_can_open_removed_at_exit(start_server: StartServer, tmp_path: Path) -> None:
    sock = tmp_path / "guard.sock"
    server = start_server("--uds", str(sock), "--backend", "trio")
    assert server.where == f"unix:{sock}"
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    with server.client() as client:
        assert [len(grep(client, "uds", f"c{n}")["messages"]) for n in range(3)] == [0, 0, 1]
    assert server.stop() == 0
    assert not sock.exists()
    assert replay_check(server.state_dir / "uds.jsonl").returncode == 0


def test_a_restarted_server_restores_each_session_from_its_log(start_server: StartServer, tmp_path: Path) -> None:
    first = start_server()
    with first.client() as client:
        grep(client, "kept", "c1")
        grep(client, "kept", "c2")
    assert first.stop() == 0
    second = start_server(state_dir=first.state_dir)
    with second.client() as client:
        assert [m["text"] for m in grep(client, "kept", "c3")["messages"]] == [GENTLE_REMINDER]
        assert "repeat_tool_guard_sessions_restored_total 1.0" in client.get("/metrics").text
    assert second.stop() == 0
    assert replay_check(first.state_dir / "kept.jsonl").returncode == 0


def test_sigterm_lets_the_request_in_flight_finish_and_its_events_reach_the_log(
    start_server: StartServer, ask_script: AskScript, tmp_path: Path
) -> None:
    asking = tmp_path / "asking"
    ask = ask_script(f"touch '{asking}'\nsleep 1.5\necho 'Read src/cfg.py instead.'")
    config = tmp_path / "guard.toml"
    config.write_text(f'[remind]\nenabled = false\n[rescue]\nask_command = "{ask}"\nnudge_at = 2\nrescue_at = 3\n')
    server = start_server("--config", str(config))
    answer: dict[str, Any] = {}

    def third_call() -> None:
        with server.client() as client:
            call = {"type": "tool/call", "agent": "main", "call_id": "c3", "tool": "grep", "args": {"pattern": "x"}}
            answer.update(client.post("/v1/sessions/slow/events", json=call).json())

    with server.client() as client:
        for n in (1, 2):
            call = {"type": "tool/call", "agent": "main", "call_id": f"c{n}", "tool": "grep", "args": {"pattern": "x"}}
            client.post("/v1/sessions/slow/events", json=call)
            client.post("/v1/sessions/slow/events", json={**call, "type": "tool/result", "content": "none"})
    in_flight = threading.Thread(target=third_call)
    in_flight.start()
    deadline = time.monotonic() + 30
    while not asking.exists():  # the escalation's ask is running: the request is in flight
        assert time.monotonic() < deadline, server.stderr
        time.sleep(0.02)
    assert server.stop() == 0
    in_flight.join(30)
    assert answer["allowed"] is False
    assert "Read src/cfg.py instead." in answer["reason"]
    with read_log(server.state_dir / "slow.jsonl") as reader:
        denied = [e for e in reader if type(e) is ToolResult and e.denied_by == "loop-rescue"]
    assert [e.call_id for e in denied] == ["c2", "c3"]
    assert replay_check(server.state_dir / "slow.jsonl", "--config", str(config)).returncode == 0


def test_a_second_server_on_the_same_state_dir_is_refused(start_server: StartServer) -> None:
    first = start_server()
    second = subprocess.run(
        [sys.executable, "-m", "guard", "serve", "--port", "0", "--state-dir", str(first.state_dir)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert second.returncode == 2
    assert second.stderr == (
        f"repeat-tool-guard serve: state dir {str(first.state_dir)!r} is in use by another server "
        f"(pid {first.proc.pid})\n"
    )
    assert first.stop() == 0


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_either_stop_signal_closes_the_logs(start_server: StartServer, sig: str) -> None:
    import signal

    server: ServerProcess = start_server()
    with server.client() as client:
        grep(client, "sig", "c1")
    assert server.stop(getattr(signal, sig)) == 0
    assert f"{sig}: finishing in-flight requests" in server.stderr
    assert os.path.getsize(server.state_dir / "sig.jsonl") > 0
    # nothing holds the state dir any more: a new server takes it at once
    assert start_server(state_dir=server.state_dir).stop() == 0


def test_the_recommended_preset_denies_the_third_identical_call(start_server: StartServer) -> None:
    server = start_server("--config", "recommended")
    with server.client() as client:
        grep(client, "rec", "c1")
        grep(client, "rec", "c2")
        call = {"type": "tool/call", "agent": "main", "call_id": "c3", "tool": "grep", "args": {"pattern": "x"}}
        answer = client.post("/v1/sessions/rec/events", json=call).json()
    assert answer["allowed"] is False
    assert answer["reason"].startswith("loop-detector denied this call; it did not run.")
    assert server.stop() == 0
    assert replay_check(server.state_dir / "rec.jsonl", "--config", "recommended").returncode == 0
