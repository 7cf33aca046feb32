"""``serve --redis``: sessions shared by replicas through a real redis-server.

The store-level tests run two stores in one process, each with its own
connection and memory, as two replicas would; the process-level tests run
real ``serve`` processes. redis-py's asyncio client does not run under trio:
asyncio only.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from bus.redis_log import RedisSessionLog
from guard import GENTLE_REMINDER, Config, RemindConfig, RescueConfig
from guard.cli import main
from guard.server.events import EventAnswer, answer_event, apply_event, decode_event
from guard.server.redis_store import LeaseTimeout, RedisSessionStore
from tests.conftest import AskScript, RedisClients
from tests.guard.server.conftest import REPO, StartServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


Replicas = Callable[..., list[RedisSessionStore]]


@pytest.fixture
async def replicas(redis_clients: RedisClients) -> AsyncIterator[Replicas]:
    made: list[RedisSessionStore] = []

    def make(n: int, config: Config | None = None, **options: Any) -> list[RedisSessionStore]:
        for _ in range(n):
            made.append(RedisSessionStore(redis_clients(), config, worker=f"r{len(made)}", **options))
        return made[-n:]

    yield make
    for store in made:
        store.close()


async def post(store: RedisSessionStore, session: str, **event: Any) -> EventAnswer:
    async with store.use(session) as live:
        return await apply_event(live, decode_event(json.dumps(event).encode()))


async def grep(store: RedisSessionStore, session: str, call_id: str) -> EventAnswer:
    call = await post(store, session, type="tool/call", agent="main", call_id=call_id, tool="grep", args={"p": 1})
    if call.allowed is False:
        return call
    return await post(store, session, type="tool/result", agent="main", call_id=call_id, content="none")


async def _replay_check(redis_url: str, session: str, tmp_path: Path, *config: str) -> subprocess.CompletedProcess[str]:
    client = Redis.from_url(redis_url)
    try:
        path = tmp_path / f"{session}.jsonl"
        await RedisSessionLog(client, session).export(path)
    finally:
        await client.aclose()
    return subprocess.run(
        [sys.executable, "-m", "guard", "replay", "--check", str(path), *config],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )


async def test_replicas_taking_turns_count_one_session_as_one_process(
    replicas: Replicas, redis_url: str, tmp_path: Path
) -> None:
    stores = replicas(3)
    answers = [await grep(stores[n % 3], "s1", f"c{n}") for n in range(5)]
    texts = [[m.text for m in a.messages] for a in answers]
    assert texts[2] == [GENTLE_REMINDER]
    assert [len(t) for t in texts] == [0, 0, 1, 0, 1]
    assert [s.restored for s in stores] == [0, 1, 1]  # the first turn of each later replica reads the stream
    assert [s.caught_up for s in stores] == [1, 1, 0]  # later turns apply only what the others appended
    checked = await _replay_check(redis_url, "s1", tmp_path)
    assert checked.returncode == 0, checked.stderr
    counts = await stores[1].fleet_counts()
    assert counts is not None
    assert counts.actions == {("remind", "remind"): 2}
    assert counts.events == 13  # the agent started, 5 calls, 5 results, 2 reminders


async def test_a_retry_on_another_replica_gets_the_original_answer_and_nothing_twice(
    replicas: Replicas, redis_url: str
) -> None:
    one, two = replicas(2)
    answers = []
    for n in range(3):
        for store in (one, two):  # the first replica answers; the client's retry lands on the other
            async with store.use("s5") as live:
                call = {"type": "tool/call", "agent": "main", "call_id": f"c{n}", "tool": "grep", "args": {"p": 1}}
                answers.append(await answer_event(live, decode_event(json.dumps(call).encode())))
        async with one.use("s5") as live:
            result = {"type": "tool/result", "agent": "main", "call_id": f"c{n}", "content": "none"}
            await answer_event(live, decode_event(json.dumps(result).encode()))
    assert answers[0::2] == answers[1::2]
    client = Redis.from_url(redis_url)
    try:
        assert await RedisSessionLog(client, "s5").last_seq() == 8  # started, 3 calls, 3 results, 1 reminder
    finally:
        await client.aclose()


async def test_a_replica_that_keeps_the_session_does_not_rebuild_it(replicas: Replicas) -> None:
    (store,) = replicas(1)
    for n in range(4):
        await grep(store, "s1", f"c{n}")
    assert store.restored == 0
    assert len(store) == 1


async def test_an_escalation_is_asked_once_and_replayed_from_the_stream(
    replicas: Replicas, redis_url: str, tmp_path: Path, ask_script: AskScript
) -> None:
    asked = tmp_path / "asked"
    script = ask_script(f"echo x >> {asked}\necho 'Open src/app.py instead.'")
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(script)))
    stores = replicas(2, config)
    answers = [await grep(stores[n % 2], "s2", f"c{n}") for n in range(6)]
    assert asked.read_text().splitlines() == ["x"]
    assert any("Open src/app.py instead." in (a.reason or "") for a in answers if a.allowed is False)
    toml = tmp_path / "rescue.toml"
    toml.write_text(f'[remind]\nenabled = false\n[rescue]\nask_command = "{script}"\n')
    checked = await _replay_check(redis_url, "s2", tmp_path, "--config", str(toml))
    assert checked.returncode == 0, checked.stderr


async def test_a_stale_replica_that_lost_its_lease_cannot_fork_the_session(
    replicas: Replicas, redis_url: str, tmp_path: Path
) -> None:
    one, two = replicas(2)
    await grep(one, "s3", "c0")
    await grep(two, "s3", "c1")  # the stream moves on without ``one``
    live, shared = one._live["s3"], one._shared["s3"]
    await live.agents["main"].user_message("stale")  # ``one`` acting on its old copy, as after a lapsed lease
    await one._flush(live, shared, dict(live.answers), "a lapsed lease's token")
    assert "s3" not in one  # refused and dropped; its next request rebuilds from the stream
    checked = await _replay_check(redis_url, "s3", tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "stale" not in (tmp_path / "s3.jsonl").read_text()


async def test_a_held_lease_times_out_with_a_clear_error(replicas: Replicas, redis_url: str) -> None:
    (store,) = replicas(1, lease_ms=50)
    client = Redis.from_url(redis_url)
    try:
        await client.set("rtg:{s4}:serving", "someone else", px=5000)
        with pytest.raises(LeaseTimeout, match="held by another replica"):
            async with store.use("s4"):
                pass
    finally:
        await client.aclose()


def test_lease_ms_is_validated() -> None:
    with pytest.raises(ValueError, match="lease_ms"):
        RedisSessionStore(Redis(), lease_ms=0)


def _grep_http(client: httpx.Client, session: str, call_id: str) -> dict[str, Any]:
    call = {"type": "tool/call", "agent": "main", "call_id": call_id, "tool": "grep", "args": {"pattern": "x"}}
    answer: dict[str, Any] = client.post(f"/v1/sessions/{session}/events", json=call).json()
    if answer["allowed"] is False:
        return answer
    result = {"type": "tool/result", "agent": "main", "call_id": call_id, "content": "none"}
    response = client.post(f"/v1/sessions/{session}/events", json=result)
    assert response.status_code == 200, response.text
    done: dict[str, Any] = response.json()
    return done


def test_replicas_as_processes_share_sessions_and_survive_a_kill(
    start_server: StartServer, redis_url: str, tmp_path: Path
) -> None:
    servers = [start_server("--redis", redis_url, state_dir=tmp_path / f"unused{i}") for i in range(3)]
    clients = [s.client() for s in servers]
    rng = random.Random(7)
    reminders = 0
    try:
        for n in range(8):
            if n == 4:  # a replica dies mid-session, as a crash would end it
                servers[0].proc.send_signal(signal.SIGKILL)
                servers[0].proc.wait(10)
                clients.pop(0).close()
            answer = _grep_http(rng.choice(clients), "shared", f"c{n}")
            reminders += len(answer["messages"])
        metrics = clients[0].get("/metrics").text
    finally:
        for client in clients:
            client.close()
    assert reminders == 3  # remind at 3, 5 and 8, each once, whichever replica answered
    assert 'repeat_tool_guard_fleet_actions_total{policy="remind",action="remind"} 3' in metrics
    for server in servers[1:]:
        assert server.stop() == 0
        assert "Traceback" not in server.stderr
    exported = tmp_path / "shared.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "guard", "export", redis_url, "--session", "shared", "-o", str(exported)],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    checked = subprocess.run(
        [sys.executable, "-m", "guard", "replay", "--check", str(exported)],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--redis", "redis://127.0.0.1:1/0", "--backend", "trio"),
            "--redis runs on asyncio only (the Redis client has no trio support)",
        ),
        (("--redis", "http://nowhere"), "--redis http://nowhere: must be a redis://, rediss:// or unix:// URL"),
    ],
)
def test_redis_mode_refuses_trio_and_bad_urls(
    args: tuple[str, ...], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--port", "0", *args]) == 2
    assert capsys.readouterr().err == f"repeat-tool-guard serve: {message}\n"


def test_the_command_in_redis_mode_keeps_sessions_in_redis(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sock = tmp_path / "guard.sock"
    seen: dict[str, Any] = {}

    def client() -> None:
        deadline = time.monotonic() + 30
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://guard", timeout=30) as http:
            while time.monotonic() < deadline:
                try:
                    http.get("/healthz")
                    break
                except (httpx.ConnectError, FileNotFoundError):
                    time.sleep(0.02)
            seen["answers"] = [_grep_http(http, "cli", f"c{n}") for n in range(3)]
            seen["metrics"] = http.get("/metrics").text
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=client)
    thread.start()
    code = main(["serve", "--uds", str(sock), "--redis", redis_url, "--state-dir", str(tmp_path / "unused")])
    thread.join(30)
    assert code == 0
    assert [len(a["messages"]) for a in seen["answers"]] == [0, 0, 1]
    assert 'repeat_tool_guard_fleet_actions_total{policy="remind",action="remind"} 1' in seen["metrics"]
    assert 'repeat_tool_guard_actions_total{action="remind",policy="remind"} 1.0' in seen["metrics"]
    assert f"listening on unix:{sock} (sessions in {redis_url}," in capsys.readouterr().err
    assert not (tmp_path / "unused").exists()


async def test_a_request_that_records_nothing_appends_nothing(replicas: Replicas, redis_url: str) -> None:
    (store,) = replicas(1)
    async with store.use("quiet"):
        pass
    client = Redis.from_url(redis_url)
    try:
        assert await RedisSessionLog(client, "quiet").last_seq() == 0
    finally:
        await client.aclose()
