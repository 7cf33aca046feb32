"""``serve --redis`` replicas under real network faults: a TCP proxy of the
test's own between a replica and a real redis-server cuts the connection
while the script that records a request is in flight, before or after Redis
ran it. What every trial asserts: a 2xx only for what the stream holds, a
503 (one JSON line) otherwise, a retry answered as the first answer was
recorded, no event recorded twice, and ``replay --check`` passing on the
exported stream.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from bus import ToolCall, ToolResult, read_log
from tests.conftest import Proxy
from tests.faults.conftest import REPO
from tests.guard.server.conftest import StartServer

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")

MARK = b"cut-here"


@pytest.fixture(autouse=True)
def bounded() -> None:
    """These trials start real servers: bounded by their clients' timeouts instead."""


def _post(client: httpx.Client, **event: Any) -> httpx.Response:
    return client.post("/v1/sessions/cut/events", json=event)


def _export(redis_url: str, tmp_path: Path) -> Path:
    out = tmp_path / "cut.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "guard", "export", redis_url, "--session", "cut", "-o", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    checked = subprocess.run(
        [sys.executable, "-m", "guard", "replay", "--check", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=60, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return out


@pytest.mark.parametrize("mode", ["after", "before"])
def test_a_flush_cut_in_transit_is_a_503_and_the_retry_gets_what_the_stream_holds(
    start_server: StartServer, redis_url: str, redis_proxy: Proxy, tmp_path: Path, mode: str
) -> None:
    through = f"redis://127.0.0.1:{redis_proxy.port}/0"
    one = start_server("--redis", through, state_dir=tmp_path / "one")
    two = start_server("--redis", redis_url, state_dir=tmp_path / "two")
    answers: dict[tuple[str, str], bytes] = {}
    with one.client() as first, two.client() as second:
        for n in range(6):
            call = {"type": "tool/call", "agent": "main", "call_id": f"c{n}", "tool": "grep", "args": {"p": "x"}}
            if n == 3:
                call["args"] = {"p": MARK.decode()}
                redis_proxy.arm(mode, MARK)
            response = _post(first, **call)
            if response.status_code != 200:
                assert response.status_code == 503, response.text
                assert response.text.count("\n") == 0
                assert set(response.json()) == {"error"}
                response = _post(first, **call)  # the client retries, on the same replica
            assert response.status_code == 200, response.text
            answers[("tool/call", f"c{n}")] = response.content
            assert _post(second, **call).content == response.content  # and on the other: the same answer
            result = {"type": "tool/result", "agent": "main", "call_id": f"c{n}", "content": "none"}
            replica = second if n % 2 else first
            answered = _post(replica, **result)
            assert answered.status_code == 200, answered.text
            answers[("tool/result", f"c{n}")] = answered.content
    assert redis_proxy.cuts == 1
    with read_log(_export(redis_url, tmp_path)) as reader:
        events = list(reader)
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1))
    recorded = [
        ("tool/call" if isinstance(e, ToolCall) else "tool/result", e.call_id, e.seq)
        for e in events
        if isinstance(e, (ToolCall, ToolResult))
    ]
    assert len({(kind, call_id) for kind, call_id, _ in recorded}) == len(recorded) == 12  # none twice, none lost
    for kind, call_id, seq in recorded:
        assert f'"seq":{seq},'.encode() in answers[(kind, call_id)]


def test_healthz_is_not_ready_while_redis_is_unreachable(start_server: StartServer, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = start_server("--redis", f"redis://:hunter2@127.0.0.1:{port}/0", state_dir=tmp_path / "unused")
    assert "hunter2" not in server.stderr
    assert f"redis://:***@127.0.0.1:{port}/0" in server.stderr
    with server.client() as client:
        health = client.get("/healthz")
        assert health.status_code == 503
        assert health.json()["status"] == "unavailable"
        response = _post(client, type="user/message", agent="main", text="hi")
        assert response.status_code == 503
        assert response.json()["error"].startswith("session 'cut': Redis: ")
        assert "hunter2" not in response.text
    assert server.stop() == 0
    assert "hunter2" not in server.stderr
    assert "Traceback" not in server.stderr


def test_a_request_held_in_a_paused_replica_is_not_recorded_again_when_it_resumes(
    start_server: StartServer, redis_url: str, tmp_path: Path
) -> None:
    one = start_server("--redis", redis_url, state_dir=tmp_path / "one")
    two = start_server("--redis", redis_url, state_dir=tmp_path / "two")
    call = {"type": "tool/call", "agent": "main", "call_id": "c1", "tool": "grep", "args": {"p": "x"}}
    result = {"type": "tool/result", "agent": "main", "call_id": "c1", "content": "none"}
    with one.client() as first, two.client() as second:
        assert _post(first, type="user/message", agent="main", text="go").status_code == 200
        one.proc.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(httpx.TimeoutException):
                first.post("/v1/sessions/cut/events", json=call, timeout=1.0)  # held by the paused replica
            answered = _post(second, **call)  # the client retries elsewhere
            assert answered.status_code == 200
            assert _post(second, **result).status_code == 200
        finally:
            one.proc.send_signal(signal.SIGCONT)
        time.sleep(1.0)  # the resumed replica gets to the held request
        assert _post(first, type="user/message", agent="main", text="and on").status_code == 200
    with read_log(_export(redis_url, tmp_path)) as reader:
        events = list(reader)
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [c.call_id for c in calls] == ["c1"]  # recorded once: the stale copy was dropped
    assert one.stop() == 0
    assert "Traceback" not in one.stderr
