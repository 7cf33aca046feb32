"""``serve --redis``: sessions shared by replicas through a real redis-server.

The store-level tests run two stores in one process, each with its own
connection and memory, as two replicas would; the process-level tests run
real ``serve`` processes. redis-py's asyncio client does not run under trio:
asyncio only.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
import redis
from redis.asyncio import Redis

from bus.redis_log import RedisSessionLog, redact_url, redis_client
from guard import GENTLE_REMINDER, Config, RemindConfig, RescueConfig, TurnsConfig
from guard.adapters.claude_hooks import CLAUDE_CODE
from guard.cli import main
from guard.config import load_config
from guard.server.events import EventAnswer, RequestError, answer_event, apply_event, decode_event, retry_keys
from guard.server.redis_store import LeaseTimeout, RedisSessionStore
from guard.server.sessions import Session, StoreError
from guard.sessions.answer import retry_key
from tests.conftest import AskScript, Proxy, RedisClients, start_redis_server
from tests.guard.server.conftest import REPO, StartServer, hook_payload, wait_listening

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


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
        return await post_in(live, **event)


async def post_in(live: Session, **event: Any) -> EventAnswer:
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


async def test_a_request_redis_stops_answering_fails_after_one_timeout_not_a_retry(
    redis_proxy: Proxy, anyio_backend: str
) -> None:
    store = RedisSessionStore(redis_client(f"redis://127.0.0.1:{redis_proxy.port}/0", timeout=1))
    try:
        assert (await grep(store, "h1", "c0")).seq == 3
        redis_proxy.arm("blackhole", b"stalled-here")
        with pytest.raises(StoreError, match="Timeout reading"):
            await post(store, "h1", type="user/message", agent="main", text="stalled-here")
        assert redis_proxy.sent == 1  # the script was not sent again after its timeout
    finally:
        await store.aclose()


async def test_fleet_counts_are_left_out_while_redis_cannot_answer() -> None:
    store = RedisSessionStore(redis_client("redis://127.0.0.1:1/0", timeout=1))  # nothing listens on port 1
    try:
        assert await store.fleet_counts() is None  # /metrics then serves this replica's own counts (was a 500)
    finally:
        await store.aclose()


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


async def test_a_hook_copy_at_another_replica_gets_the_original_answer_and_nothing_twice(
    replicas: Replicas, redis_url: str, tmp_path: Path
) -> None:
    config = Config(turns=TurnsConfig(threshold=2, deny_after=1, halt_after=3))
    one, two = replicas(2, config)
    tool = {"tool_name": "Bash", "tool_input": {"command": "ls src"}}
    script = []
    for n in range(5):
        script.append(hook_payload("h1", "PreToolUse", tool_use_id=f"toolu_{n}", **tool))
        script.append(hook_payload("h1", "PostToolUse", tool_use_id=f"toolu_{n}", tool_response="a.py", **tool))

    async def hook(store: RedisSessionStore, payload: dict[str, Any]) -> dict[str, Any]:
        async with store.use("h1") as live:
            return await live.hooks_for(CLAUDE_CODE).handle(payload)

    sent = []
    denied = set()
    for payload in script:
        if payload["tool_use_id"] in denied:
            continue  # a denied call runs no tool: Claude Code sends no post hook for it
        answer = await hook(one, payload)
        if "permissionDecision" in json.dumps(answer):
            denied.add(payload["tool_use_id"])
        if payload["hook_event_name"] == "PostToolUse" or payload["tool_use_id"] in denied:
            sent.append((payload, answer))
    recorded = await _exported(redis_url, "h1", tmp_path / "before.jsonl")
    assert any("additionalContext" in json.dumps(answer) for _, answer in sent), "a result drew a reminder"
    assert any("permissionDecision" in json.dumps(answer) for _, answer in sent), "a call was denied"

    assert [await hook(two, payload) for payload, _ in sent] == [answer for _, answer in sent]
    assert await _exported(redis_url, "h1", tmp_path / "after.jsonl") == recorded


async def _event(store: RedisSessionStore, session: str, **event: Any) -> bytes:
    """``event`` answered as the events route answers it."""
    decoded = decode_event(json.dumps(event).encode())
    async with store.use(session, retry_keys=retry_keys(decoded)) as live:
        return await answer_event(live, decoded)


async def test_answers_given_elsewhere_are_read_only_when_a_retry_comes(
    replicas: Replicas, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = replicas(2)
    reads: list[list[str]] = []
    notes = RedisSessionLog.notes

    async def counted(self: RedisSessionLog, names: Any = None) -> dict[str, bytes]:
        reads.append(list(names))
        return await notes(self, names)

    monkeypatch.setattr(RedisSessionLog, "notes", counted)
    call = {"type": "tool/call", "agent": "main", "call_id": "c0", "tool": "grep", "args": {"p": 1}}
    first = await _event(one, "lazy", **call)
    assert reads == []  # the replica holds every answer it gave
    other = {**call, "call_id": "c1"}
    second = await _event(two, "lazy", **other)  # a restore, then a call no one answered: nothing to read
    assert reads == []
    assert await _event(two, "lazy", **call) == first  # a retry of the other replica's answer, stream unmoved
    assert reads == [[retry_key("tool/call", "main", "c0")]]
    assert await _event(two, "lazy", **call) == first  # read once, then held
    assert await _event(one, "lazy", **other) == second  # a retry that catches up: read with the lease
    assert len(reads) == 1


async def test_a_call_id_used_again_is_answered_anew_on_every_replica(replicas: Replicas) -> None:
    one, two, three = replicas(3)
    call = {"type": "tool/call", "agent": "main", "call_id": "c0", "tool": "grep", "args": {"p": 1}}
    result = {"type": "tool/result", "agent": "main", "call_id": "c0", "content": "none"}
    first = msgspec.json.decode(await _event(one, "again", **call))
    await _event(two, "again", **result)  # the call's answer is forgotten, on the other replica too
    await _event(one, "again", type="user/message", agent="main", text="go on")
    again = msgspec.json.decode(await _event(three, "again", **{**call, "args": {"p": 2}}))
    assert again["seq"] > first["seq"]  # a new call, not the first one's answer
    assert msgspec.json.decode(await _event(one, "again", **{**call, "args": {"p": 2}})) == again  # its retry
    second = msgspec.json.decode(await _event(two, "again", **{**result, "content": "some"}))
    assert second["seq"] > again["seq"]  # a new result, not the first one's answer


async def test_a_long_session_remembers_the_latest_answers_given_elsewhere(
    replicas: Replicas, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("guard.server.redis_store._UNFETCHED_KEPT", 4)
    one, two = replicas(2)
    answers = [await _event(one, "long", type="tool/call", agent="main", call_id=f"c{n}", tool="ls", args={"n": n})
               for n in range(5)]  # fmt: skip
    await _event(two, "long", type="user/message", agent="main", text="hi")  # a restore: 5 calls answered
    assert (
        await _event(two, "long", type="tool/call", agent="main", call_id="c4", tool="ls", args={"n": 4})
        == (answers[4])
    )
    with pytest.raises(RequestError, match="already open"):  # c0's answer is no longer kept on this replica
        await _event(two, "long", type="tool/call", agent="main", call_id="c0", tool="ls", args={"n": 0})


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
    client = Redis.from_url(redis_url)

    async def stale() -> None:
        async with one.use("s3") as live:
            await client.delete("rtg:{s3}:serving")  # lapsed, as under a long pause
            await grep(two, "s3", "c1")  # the stream moves on without ``one``
            await post_in(live, type="user/message", agent="main", text="stale")

    try:
        with pytest.raises(StoreError, match="another replica took it over; the event was not recorded"):
            await stale()
    finally:
        await client.aclose()
    assert "s3" not in one  # refused and dropped; its next request rebuilds from the stream
    checked = await _replay_check(redis_url, "s3", tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "stale" not in (tmp_path / "s3.jsonl").read_text()
    assert (await grep(one, "s3", "c2")).seq > 5  # rebuilt from the stream, numbering on after it


async def test_a_key_briefly_of_the_wrong_type_writes_nothing_and_the_session_goes_on(
    replicas: Replicas, redis_url: str, tmp_path: Path
) -> None:
    (store,) = replicas(1)
    client = Redis.from_url(redis_url)
    try:
        assert (await grep(store, "w1", "c0")).seq == 3
        await client.set("rtg:{w1}:notes", "not a hash")
        with pytest.raises(
            StoreError, match=r"WRONGTYPE rtg:\{w1\}:notes holds a string, not a hash: nothing was written"
        ):
            await grep(store, "w1", "c1")
        assert await client.xlen("rtg:{w1}:events") == 3
        await client.delete("rtg:{w1}:notes")
        assert (await grep(store, "w1", "c1")).seq == 5  # was a 503 on every request from then on
        checked = await _replay_check(redis_url, "w1", tmp_path)
        assert checked.returncode == 0, checked.stderr
    finally:
        await client.aclose()


@pytest.mark.parametrize(("name", "kind"), [("events", "stream"), ("meta", "hash"), ("notes", "hash")])
async def test_a_key_of_the_wrong_type_is_named_by_a_replica_rebuilding_the_session_too(
    replicas: Replicas, redis_url: str, name: str, kind: str
) -> None:
    one, two = replicas(2)
    session = f"wt-{name}"
    client = Redis.from_url(redis_url)
    try:
        await grep(one, session, "c0")
        await client.delete(f"rtg:{{{session}}}:{name}")
        await client.set(f"rtg:{{{session}}}:{name}", "x")
        wrong = rf"WRONGTYPE rtg:\{{{session}\}}:{name} holds a string, not a {kind}: nothing was written"
        for store in (one, two):  # the replica that knows the session, and one that rebuilds it
            with pytest.raises(StoreError, match=wrong):
                await grep(store, session, "c1")
    finally:
        await client.aclose()


async def test_a_lost_session_counter_is_taken_from_its_stream(
    replicas: Replicas, redis_url: str, tmp_path: Path
) -> None:
    one, two = replicas(2)
    client = Redis.from_url(redis_url)
    try:
        assert (await grep(one, "w2", "c0")).seq == 3
        await client.delete("rtg:{w2}:meta")  # evicted (maxmemory-policy allkeys-lru) or deleted
        assert (await grep(one, "w2", "c1")).seq == 5
        assert (await grep(two, "w2", "c2")).seq >= 7
        entries: Any = await client.xrange("rtg:{w2}:events")
        seqs = [int(fields[b"seq"]) for _, fields in entries]
        assert seqs == list(range(1, len(seqs) + 1))  # numbered on, never from 1 again
        checked = await _replay_check(redis_url, "w2", tmp_path)
        assert checked.returncode == 0, checked.stderr
    finally:
        await client.aclose()


async def test_a_held_lease_times_out_with_a_clear_error(replicas: Replicas, redis_url: str) -> None:
    (store,) = replicas(1, wait_ms=50)
    client = Redis.from_url(redis_url)
    try:
        await client.set("rtg:{s4}:serving", "someone else", px=5000)
        with pytest.raises(LeaseTimeout, match="held by another replica"):
            async with store.use("s4"):
                pass
    finally:
        await client.aclose()


@pytest.mark.parametrize("option", [{"lease_ms": 2}, {"wait_ms": -1}])
def test_lease_options_are_validated(option: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(option))):
        RedisSessionStore(Redis(), **option)


async def test_a_request_keeps_its_lease_while_it_runs_and_a_dead_ones_lapses(
    replicas: Replicas, redis_url: str
) -> None:
    one, two = replicas(2, lease_ms=300)  # above a full garbage collection's pause in a long test run
    client = Redis.from_url(redis_url)
    try:
        async with one.use("r1") as live:
            await anyio.sleep(1.0)  # three lease lengths: renewed all along
            assert await client.get("rtg:{r1}:serving") is not None
            await post_in(live, type="user/message", agent="main", text="hi")
        await client.set("rtg:{r1}:serving", "a replica that died", px=60)  # never renewed
        assert (await grep(two, "r1", "c0")).seq == 4  # after the start, the message and the call
    finally:
        await client.aclose()


async def test_a_request_that_lost_its_lease_is_refused_and_stops_renewing(replicas: Replicas, redis_url: str) -> None:
    (one,) = replicas(1, lease_ms=30)
    client = Redis.from_url(redis_url)

    async def lost() -> None:
        async with one.use("r2") as live:
            await client.delete("rtg:{r2}:serving")  # lapsed, as under a long pause
            await anyio.sleep(0.05)
            await post_in(live, type="user/message", agent="main", text="lost")

    try:
        with pytest.raises(StoreError, match="not recorded"):
            await lost()
        assert "r2" not in one  # refused: nothing appended
        assert await RedisSessionLog(client, "r2").last_seq() == 0
    finally:
        await client.aclose()


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


@pytest.mark.slow
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
    assert re.search(r"^repeat_tool_guard_sessions_caught_up_total [1-9]", metrics, re.M), metrics
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
        (("--redis", "redis://127.0.0.1:1/abc"), "--redis redis://127.0.0.1:1/abc: its database 'abc' is not a number"),
        (("--redis", "redis://:pw@[::1"), "--redis redis://<malformed>: it does not parse (Invalid IPv6 URL)"),
        (
            ("--redis", "redis://:p?w@127.0.0.1/0"),
            "--redis redis://:***@127.0.0.1/0: its password holds '/', '?' or '#': percent-encode them (%2F, %3F, %23)",
        ),
        (
            ("--redis", "redis://127.0.0.1/0?foo=1"),
            "--redis redis://127.0.0.1/0?foo=1: its query does not suit the Redis "
            "client (got an unexpected keyword argument 'foo')",
        ),
    ],
)
def test_redis_mode_refuses_trio_and_bad_urls(
    args: tuple[str, ...], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--port", "0", *args]) == 2
    assert capsys.readouterr().err == f"repeat-tool-guard serve: {message}\n"


@pytest.mark.parametrize(
    ("credentials", "database", "refusal"),
    [
        ("nobody:wrong@", "0", "invalid username-password pair"),
        ("", "99", "DB index is out of range"),
    ],
)
def test_redis_mode_refuses_to_start_on_what_waiting_cannot_mend(
    redis_url: str, credentials: str, database: str, refusal: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A wrong password or database would answer every request 503."""
    url = redis_url.replace("redis://", f"redis://{credentials}").rsplit("/", 1)[0] + f"/{database}"
    assert main(["serve", "--port", "0", "--redis", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"repeat-tool-guard serve: --redis {redact_url(url)}: Redis refused it: "), err
    assert refusal in err
    assert "wrong" not in err, "the password is not printed"


@pytest.mark.parametrize(
    ("rules", "prefix", "refusal"),
    [
        ("+ping +client +select ~*", "rtg", "no permissions to run the 'evalsha' command"),
        ("+@all ~rtg:*", "other", "no permissions to access one of the keys"),
    ],
)
def test_redis_mode_refuses_to_start_for_a_user_that_may_not_do_what_requests_do(
    redis_url: str, rules: str, prefix: str, refusal: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user who may ping but not run the lease scripts, or not on the
    fleet's keys, would answer every request 503 while ``/healthz`` said ok."""
    user = f"u{os.getpid()}x{len(prefix)}"
    admin = redis.Redis.from_url(redis_url)
    admin.execute_command("ACL", "SETUSER", user, "reset", "on", ">pw", *rules.split())  # type: ignore[no-untyped-call]
    try:
        url = redis_url.replace("redis://", f"redis://{user}:pw@")
        assert main(["serve", "--port", "0", "--redis", url, "--redis-prefix", prefix]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"repeat-tool-guard serve: --redis {redact_url(url)}: Redis refused it: "), err
        assert refusal in err
    finally:
        admin.execute_command("ACL", "DELUSER", user)  # type: ignore[no-untyped-call]
        admin.close()


def test_redis_mode_starts_on_a_redis_out_of_memory_and_says_so(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from guard.server.runner import _check_redis

    admin = redis.Redis.from_url(redis_url)
    admin.config_set("maxmemory", 1)
    admin.config_set("maxmemory-policy", "noeviction")
    try:
        _check_redis(redis_url, "rtg")
    finally:
        admin.config_set("maxmemory", 0)
        admin.close()
    err = capsys.readouterr().err
    assert err.startswith(f"repeat-tool-guard serve: warning: Redis at {redis_url} cannot record events yet (")
    assert "maxmemory" in err
    assert err.endswith("requests get 503 until it can\n")


@pytest.mark.parametrize(
    ("policy", "ttl", "warned"),
    [
        ("allkeys-lru", 0, True),
        ("allkeys-random", 60, True),
        ("volatile-lru", 60, True),
        ("volatile-lru", 0, False),
        ("noeviction", 60, False),
    ],
)
def test_redis_mode_warns_of_a_redis_that_evicts_the_fleets_keys(
    redis_url: str, capsys: pytest.CaptureFixture[str], policy: str, ttl: int, warned: bool
) -> None:
    """Full, such a Redis drops a session's keys: its loops start over
    uncounted and every request still answers 200."""
    from guard.server.runner import _check_redis

    admin = redis.Redis.from_url(redis_url)
    admin.config_set("maxmemory-policy", policy)
    try:
        _check_redis(redis_url, "rtg", ttl)
    finally:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.close()
    err = capsys.readouterr().err
    said = f"warning: Redis at {redis_url} evicts keys when full (maxmemory-policy {policy}): a session whose keys"
    assert (said in err) is warned, err


@pytest.mark.parametrize(("skew", "said"), [(0.0, None), (120.0, "120.0 s ahead of"), (-5.0, "5.0 s behind")])
def test_redis_mode_warns_of_a_clock_off_redis(
    redis_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, skew: float, said: str | None
) -> None:
    """A replica stamps the events it answers: one whose clock is off makes
    a session's patient polls look like fast repeats on another's clock."""
    import time

    from guard.server.runner import _check_redis

    clock = time.time
    monkeypatch.setattr(time, "time", lambda: clock() + skew)
    _check_redis(redis_url, "rtg")
    err = capsys.readouterr().err
    if said is None:
        assert "clock" not in err, err
    else:
        assert f"warning: this machine's clock is {said} Redis's at {redis_url}: replicas stamp" in err, err


def test_a_user_who_may_not_read_redis_settings_gets_no_eviction_warning(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A managed Redis often refuses CONFIG (and may refuse TIME): the policy
    cannot be told, and nothing is claimed about it."""
    from guard.server.runner import _check_redis

    user = f"noconfig{os.getpid()}"
    admin = redis.Redis.from_url(redis_url)
    admin.config_set("maxmemory-policy", "allkeys-lru")
    admin.execute_command("ACL", "SETUSER", user, "reset", "on", ">pw", "+@all", "-config", "-time", "~*", "&*")  # type: ignore[no-untyped-call]
    try:
        _check_redis(redis_url.replace("redis://", f"redis://{user}:pw@"), "rtg", 0)
    finally:
        admin.execute_command("ACL", "DELUSER", user)  # type: ignore[no-untyped-call]
        admin.config_set("maxmemory-policy", "noeviction")
        admin.close()
    err = capsys.readouterr().err
    assert "evicts keys" not in err
    assert "clock" not in err  # nor about a clock it may not read


def test_a_served_fleets_keys_expire_and_its_streams_are_trimmed_as_asked(
    redis_url: str, start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server("--redis", redis_url, "--redis-ttl", "600", "--redis-maxlen", "50", state_dir=tmp_path / "x")
    with server.client() as client:
        for n in range(120):
            event = {"type": "tool/call", "agent": "main", "call_id": f"c{n}", "tool": "grep", "args": {"n": n}}
            assert client.post("/v1/sessions/kept/events", json=event).status_code == 200
    admin = redis.Redis.from_url(redis_url)
    try:
        keys = [key for key in admin.scan_iter("rtg:*") if b"{kept}" in key]
        assert keys
        assert all(0 < admin.ttl(key) <= 600 for key in keys), "every key of the session expires"
        (stream,) = [key for key in keys if admin.type(key) == b"stream"]
        assert admin.xlen(stream) < 120
    finally:
        admin.close()
    assert server.stop() == 0


def test_a_served_fleet_takes_its_redis_password_from_rediscli_auth(
    redis_url: str, start_server: StartServer, tmp_path: Path
) -> None:
    """``serve`` runs for days: a password in its ``--redis`` URL would be
    in ``ps`` all that time."""
    user = f"u{os.getpid()}served"
    admin = redis.Redis.from_url(redis_url)
    admin.execute_command("ACL", "SETUSER", user, "on", ">pw", "~*", "+@all")  # type: ignore[no-untyped-call]
    try:
        url = redis_url.replace("redis://", f"redis://{user}@")
        server = start_server("--redis", url, state_dir=tmp_path / "x", env={"REDISCLI_AUTH": "pw"})
        with server.client() as client:
            event = {"type": "tool/call", "agent": "main", "call_id": "c1", "tool": "grep", "args": {}}
            assert client.post("/v1/sessions/s/events", json=event).status_code == 200
        assert server.stop() == 0
        assert "pw" not in server.stderr
    finally:
        admin.execute_command("ACL", "DELUSER", user)  # type: ignore[no-untyped-call]
        admin.close()


async def test_health_fails_while_redis_is_out_of_memory(replicas: Replicas, redis_url: str) -> None:
    (store,) = replicas(1)
    admin = Redis.from_url(redis_url)
    try:
        assert await store.unready() is None
        await admin.config_set("maxmemory", 1)
        await admin.config_set("maxmemory-policy", "noeviction")
        unready = await store.unready()
        assert unready is not None, "every event would get a 503: not healthy"
        assert "maxmemory" in unready
        with pytest.raises(StoreError, match="maxmemory"):
            await grep(store, "oom", "c0")
    finally:
        await admin.config_set("maxmemory", 0)
        await admin.aclose()
    assert await store.unready() is None
    assert (await grep(store, "oom", "c1")).seq == 3


async def test_a_lease_taking_sent_again_after_its_answer_was_lost_gets_the_lease(
    redis_proxy: Proxy, anyio_backend: str
) -> None:
    """Redis took the lease but its answer was lost with the connection: the
    client sends the same taking again, which finds the lease its own
    (``wait_ms=0``: any wait for it fails)."""
    store = RedisSessionStore(redis_client(f"redis://127.0.0.1:{redis_proxy.port}/0", timeout=1), wait_ms=0)
    try:
        await grep(store, "warm", "c0")  # the scripts loaded
        redis_proxy.arm("after", b"{h2}:serving")
        assert (await grep(store, "h2", "c0")).seq == 3  # the agent's start, the call, its result
        assert redis_proxy.cuts == 1
    finally:
        await store.aclose()


async def test_a_lease_taken_after_its_request_gave_up_is_taken_back_not_waited_out(anyio_backend: str) -> None:
    """A Redis that stalled runs a lease's taking once it resumes, after
    the request gave up waiting: no request holds that lease, and this
    replica's next request of the session takes it back instead of waiting
    it out (``wait_ms=0``: any wait for it fails)."""
    server = start_redis_server()
    store = RedisSessionStore(redis_client(server.url, timeout=0.5), wait_ms=0)
    try:
        await grep(store, "warm", "c0")  # the scripts loaded
        server.process.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(StoreError, match="Timeout"):
                await grep(store, "h2", "c0")
        finally:
            server.process.send_signal(signal.SIGCONT)
        client = Redis.from_url(server.url)
        try:
            with anyio.fail_after(10):
                while not await client.exists("rtg:{h2}:serving"):  # the taking ran when Redis resumed
                    await anyio.sleep(0.01)
        finally:
            await client.aclose()
        assert (await grep(store, "h2", "c1")).seq == 3
    finally:
        await store.aclose()
        server.process.terminate()
        server.process.wait(timeout=10)


async def test_requests_waiting_behind_one_redis_did_not_answer_fail_with_it(
    redis_proxy: Proxy, anyio_backend: str
) -> None:
    """Parallel calls of one session queue for it: when Redis does not
    answer the first within its timeout, those queued behind it fail at
    once rather than each waiting out a timeout of its own; a request that
    comes after tries Redis again."""
    store = RedisSessionStore(redis_client(f"redis://127.0.0.1:{redis_proxy.port}/0", timeout=1))
    failures: list[str] = []

    async def call(call_id: str) -> None:
        try:
            await grep(store, "h3", call_id)
        except StoreError as exc:
            failures.append(f"{call_id}: {exc}")

    try:
        await grep(store, "warm", "c0")
        redis_proxy.arm("blackhole", b"{h3}:serving")
        async with anyio.create_task_group() as tasks:
            for n in range(3):
                tasks.start_soon(call, f"c{n}")
                await anyio.sleep(0.05)
        assert len(failures) == 3, failures
        assert [f for f in failures if "a request before this one" in f] == failures[1:]
        assert (await grep(store, "h3", "c9")).seq == 3  # the agent's start, the call, its result
    finally:
        await store.aclose()


def test_redis_mode_starts_on_a_redis_not_answering_yet_and_says_so(
    unused_tcp_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    from guard.server.runner import _check_redis

    _check_redis(f"redis://:secret@127.0.0.1:{unused_tcp_port}/0", "rtg")
    err = capsys.readouterr().err
    assert err.startswith(f"repeat-tool-guard serve: warning: Redis at redis://:***@127.0.0.1:{unused_tcp_port}/0 does")
    assert err.endswith("requests get 503 until it does\n")


def test_the_command_in_redis_mode_keeps_sessions_in_redis(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sock = tmp_path / "guard.sock"
    seen: dict[str, Any] = {}

    def client() -> None:
        wait_listening(sock)
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://guard", timeout=30) as http:
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


def _scenario() -> list[dict[str, Any]]:
    """One session touching every kind of state a replica must carry over:
    a subagent started and disposed, parallel calls answered out of order,
    a call repeated until the guard reminds, escalates, denies and halts,
    then a user message that ends the halt."""
    events: list[dict[str, Any]] = [
        {"type": "user/message", "agent": "main", "text": "find the loader"},
        {"type": "agent/status", "agent": "helper", "status": "started", "parent": "main"},
        {"type": "tool/call", "agent": "main", "call_id": "p1", "step": 1, "tool": "read", "args": {"f": "a"}},
        {"type": "tool/call", "agent": "main", "call_id": "p2", "step": 1, "tool": "read", "args": {"f": "b"}},
        {"type": "tool/result", "agent": "main", "call_id": "p2", "content": "b"},
        {"type": "tool/result", "agent": "main", "call_id": "p1", "content": "a"},
    ]
    for n in range(3):
        events.append({"type": "tool/call", "agent": "helper", "call_id": f"h{n}", "tool": "ls", "args": {}})
        events.append({"type": "tool/result", "agent": "helper", "call_id": f"h{n}", "content": "x"})
    events.append({"type": "agent/status", "agent": "helper", "status": "disposed"})
    for n in range(9):
        events.append({"type": "tool/call", "agent": "main", "call_id": f"c{n}", "tool": "grep", "args": {"p": 1}})
        events.append({"type": "tool/result", "agent": "main", "call_id": f"c{n}", "content": "none"})
    events.append({"type": "user/message", "agent": "main", "text": "try another way"})
    events.append({"type": "tool/call", "agent": "main", "call_id": "d0", "tool": "grep", "args": {"p": 2}})
    events.append({"type": "tool/result", "agent": "main", "call_id": "d0", "content": "found"})
    return events


async def _drive(stores: list[RedisSessionStore], session: str, *, to: list[int] | None = None) -> list[dict[str, Any]]:
    """The scenario's answers, request ``n`` to ``stores[n % len(stores)]``
    (each store's index appended to ``to``); a denied call's result is not
    posted (its denial is its result)."""
    answers: list[dict[str, Any]] = []
    denied: set[str] = set()
    for n, event in enumerate(_scenario()):
        if event["type"] == "tool/result" and event["call_id"] in denied:
            continue
        if to is not None:
            to.append(n % len(stores))
        async with stores[n % len(stores)].use(session) as live:
            answer = msgspec.json.decode(await answer_event(live, decode_event(json.dumps(event).encode())))
        if answer["allowed"] is False:
            denied.add(event["call_id"])
        for message in answer["messages"]:
            del message["ts"]
        answers.append(answer)
    return answers


async def _exported(redis_url: str, session: str, path: Path) -> list[dict[str, Any]]:
    client = Redis.from_url(redis_url)
    try:
        await RedisSessionLog(client, session).export(path)
    finally:
        await client.aclose()
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    for line in lines:
        del line["ts"]
    return lines


async def test_two_replicas_taking_turns_answer_as_one_process_would(
    replicas: Replicas, redis_url: str, tmp_path: Path, ask_script: AskScript
) -> None:
    asked = tmp_path / "asked"
    script = ask_script(f"echo x >> {asked}\necho 'Open src/loader.py instead.'")
    toml = tmp_path / "guard.toml"
    toml.write_text(
        f'[turns]\nthreshold = 3\ndeny_after = 3\nhalt_after = 1\n[rescue]\nask_command = "{script}"\nnudge_at = 3\n'
    )
    config = load_config(toml)
    alone = await _drive(replicas(1, config), "alone")
    asked_alone = len(asked.read_text().splitlines())
    pair = replicas(2, config)
    turns: list[int] = []
    together = await _drive(pair, "pair", to=turns)
    assert together == alone
    assert len(asked.read_text().splitlines()) == 2 * asked_alone == 2  # the pair asked once, as one process did
    assert any(a["messages"] for a in alone)  # the scenario reaches a reminder,
    assert any("Open src/loader.py instead." in (a["reason"] or "") for a in alone)  # an escalation's denial,
    assert any(a["halt"] for a in alone)  # a halt,
    assert alone[-1]["halt"] is None  # and the user message ends it
    assert [s.restored for s in pair] == [0, 1]
    switches = sum(a != b for a, b in itertools.pairwise(turns))
    assert pair[0].caught_up + pair[1].caught_up == switches - 1  # every switch but the first caught up
    assert await _exported(redis_url, "pair", tmp_path / "pair.jsonl") == await _exported(
        redis_url, "alone", tmp_path / "alone.jsonl"
    )
    checked = subprocess.run(
        [sys.executable, "-m", "guard", "replay", "--check", str(tmp_path / "pair.jsonl"), "--config", str(toml)],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr


async def test_a_stream_trimmed_past_a_replica_is_rebuilt_not_caught_up(replicas: Replicas, redis_url: str) -> None:
    one, two = replicas(2)
    await grep(one, "t1", "c0")
    for n in range(1, 4):
        await grep(two, "t1", f"c{n}")  # one reminder, at the third call
    client = Redis.from_url(redis_url)
    try:
        await client.xtrim("rtg:{t1}:events", maxlen=3, approximate=False)  # ``one``'s position is gone
    finally:
        await client.aclose()
    answer = await grep(one, "t1", "c4")
    assert (one.restored, one.caught_up) == (1, 0)
    assert answer.seq == 12  # numbering goes on from the stream's last seq


async def test_a_new_life_that_reached_a_replica_s_seq_is_rebuilt_not_answered_from_the_old(
    replicas: Replicas, redis_url: str, tmp_path: Path
) -> None:
    """Redis lost the session (a restart without persistence, a flush) and
    its new life, through another replica, reached the seq this replica's
    copy stands at: the copy is rebuilt from the new stream, so a call the
    old life had denied is decided anew, and recorded."""
    config = load_config("recommended")
    one, two = replicas(2, config)
    answers = [await grep(two, "life", f"c{n}") for n in range(3)]
    assert answers[-1].allowed is False, "the old life's third identical grep was denied"
    client = Redis.from_url(redis_url)
    try:
        old = await client.xlen("rtg:{life}:events")
        await client.flushall()
        seq = 0
        while seq < old:
            seq = (await post(one, "life", type="user/message", agent="main", text=f"new life {seq}")).seq
        assert seq == old, "the new life stands at the old one's seq"
    finally:
        await client.aclose()
    call = await post(two, "life", type="tool/call", agent="main", call_id="c2", tool="grep", args={"p": 1})
    assert call.allowed is True, "a first grep of the new life"
    assert (call.seq, two.restored) == (old + 1, 1), "rebuilt from the new stream"
    checked = await _replay_check(redis_url, "life", tmp_path, "--config", "recommended")
    assert checked.returncode == 0, checked.stderr + checked.stdout


async def test_an_entry_that_does_not_decode_makes_a_rebuild_that_skips_it(replicas: Replicas, redis_url: str) -> None:
    one, two = replicas(2)
    await grep(one, "t2", "c0")
    await grep(two, "t2", "c1")
    client = Redis.from_url(redis_url)
    try:
        seq = await client.hincrby("rtg:{t2}:meta", "seq", 1)
        await client.xadd("rtg:{t2}:events", {"seq": seq, "line": b"{not json"})
    finally:
        await client.aclose()
    answer = await grep(one, "t2", "c2")
    assert (one.restored, one.caught_up) == (1, 0)
    assert answer.seq == seq + 2
    assert [m.text for m in answer.messages] == [GENTLE_REMINDER]  # the rebuild counted both earlier calls


async def test_a_catch_up_that_fails_half_way_leaves_no_half_applied_copy(
    replicas: Replicas, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = replicas(2)
    await grep(one, "t3", "c0")
    await grep(two, "t3", "c1")

    def broken(*args: object) -> None:
        raise ConnectionError("went away after the guard applied the events")

    with monkeypatch.context() as patched:
        patched.setattr("guard.server.redis_store.recall", broken)
        with pytest.raises(ConnectionError):
            await grep(one, "t3", "c2")
    assert "t3" not in one
    answer = await grep(one, "t3", "c2")
    assert one.restored == 1
    assert [m.text for m in answer.messages] == [GENTLE_REMINDER]


async def test_a_long_catch_up_reads_on_past_what_the_lease_read(
    replicas: Replicas, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("guard.sessions.lease.PREFETCH", 2)
    one, two = replicas(2)
    await grep(one, "t4", "c0")
    for n in range(1, 3):
        await grep(two, "t4", f"c{n}")
    three = replicas(1)[0]  # restores from a stream longer than one read
    answer = await grep(one, "t4", "c3")
    assert (one.restored, one.caught_up) == (0, 1)
    assert answer.messages == []  # the reminder at the third call was the other replica's
    (fifth,) = (await grep(three, "t4", "c4")).messages
    assert "consecutive_calls: 5" in fifth.text  # the second reminder: all four calls before it counted
    assert three.restored == 1


async def test_one_replicas_concurrent_requests_for_a_session_take_turns(replicas: Replicas) -> None:
    (store,) = replicas(1)
    await post(store, "t5", type="user/message", agent="main", text="go")
    answers: list[EventAnswer] = []

    async def call(call_id: str) -> None:
        answers.append(await post(store, "t5", type="tool/call", agent="main", call_id=call_id, tool="ls", args={}))

    async with anyio.create_task_group() as tg:
        for n in range(4):
            tg.start_soon(call, f"c{n}")
    assert sorted(a.seq for a in answers) == [3, 4, 5, 6]
    assert (store.restored, store.caught_up) == (0, 0)


async def test_restore_reads_the_stream_itself_when_no_lease_read_it(replicas: Replicas) -> None:
    one, two = replicas(2)
    await grep(one, "t6", "c0")
    session = await two.restore("t6")
    assert session.link.bus.seq == 3
    assert [agent.agent.id for agent in session.link.links()] == ["main"]
    session.close()


def _through(proxy: Proxy) -> Redis:
    return Redis.from_url(f"redis://127.0.0.1:{proxy.port}/0", socket_timeout=2, socket_connect_timeout=2)


async def test_a_flush_cut_in_transit_fails_the_request_and_drops_the_copy(
    redis_proxy: Proxy, redis_url: str, tmp_path: Path
) -> None:
    store = RedisSessionStore(_through(redis_proxy), worker="cut")
    try:
        await grep(store, "cut", "c0")
        redis_proxy.arm("after", b"cut-here", then_refuse=True)
        with pytest.raises(StoreError, match="the event may not be recorded"):
            await post(store, "cut", type="user/message", agent="main", text="cut-here")
        assert "cut" not in store  # rebuilt from the stream before it answers again
        assert "Redis" in (await store.unready() or "")
        redis_proxy.refusing = False
        assert await store.unready() is None
        again = await post(store, "cut", type="user/message", agent="main", text="after")
        assert again.seq == 5  # the cut message (4) was appended, Redis ran the script: numbering goes on after it
    finally:
        store.close()
        await store.client.aclose()
    checked = await _replay_check(redis_url, "cut", tmp_path)
    assert checked.returncode == 0, checked.stderr


async def test_redis_failing_while_a_session_is_restored_is_a_store_error(
    replicas: Replicas, redis_proxy: Proxy
) -> None:
    (one,) = replicas(1)
    await grep(one, "late", "c0")
    two = RedisSessionStore(_through(redis_proxy), worker="late", lease_ms=30)
    two.leases.prefetch = 1  # the restore reads on past what its lease read
    try:
        redis_proxy.arm("before", b"XRANGE", then_refuse=True)
        with pytest.raises(StoreError, match="session 'late': Redis: "):
            await post(two, "late", type="user/message", agent="main", text="hi")
        with pytest.raises(StoreError, match="session 'late': Redis: "):
            await post(two, "late", type="user/message", agent="main", text="hi")  # at the lease, now
    finally:
        two.close()
        await two.client.aclose()


async def test_a_request_whose_lease_cannot_be_renewed_fails_instead_of_recording(redis_proxy: Proxy) -> None:
    from guard.sessions.lease import _RENEW

    store = RedisSessionStore(_through(redis_proxy), worker="renew", lease_ms=30)

    async def request() -> None:
        async with store.use("renew") as live:
            redis_proxy.arm("before", hashlib.sha1(_RENEW.encode()).hexdigest().encode(), then_refuse=True)
            await anyio.sleep(0.2)  # renewals fail meanwhile, and stop
            await post_in(live, type="user/message", agent="main", text="unrenewed")

    try:
        with pytest.raises(StoreError):
            await request()
        assert redis_proxy.cuts == 1
    finally:
        store.close()
        await store.client.aclose()


async def test_concurrent_requests_share_round_trips_and_each_gets_its_own_answer(
    replicas: Replicas, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (store,) = replicas(1)
    pipelines = 0
    pipeline = Redis.pipeline

    def counted(self: Redis, *args: Any, **kwargs: Any) -> Any:
        nonlocal pipelines
        pipelines += 1
        return pipeline(self, *args, **kwargs)

    monkeypatch.setattr(Redis, "pipeline", counted)
    answers: dict[str, EventAnswer] = {}

    async def session(name: str) -> None:
        for n in range(3):
            answers[f"{name}-{n}"] = await grep(store, name, f"c{n}")

    client = Redis.from_url(redis_url)
    try:
        await client.script_flush()  # as after a Redis restart: the scripts are loaded again
        async with anyio.create_task_group() as tasks:
            for s in range(8):
                tasks.start_soon(session, f"b{s}")
        for s in range(8):
            assert await RedisSessionLog(client, f"b{s}").last_seq() == 8  # started, 3 calls, 3 results, 1 reminder
    finally:
        await client.aclose()
    assert pipelines > 0
    assert [answers[f"b{s}-2"].seq for s in range(8)] == [7] * 8  # the third result in each session


async def test_concurrent_requests_without_redis_each_fail(unused_tcp_port: int) -> None:
    store = RedisSessionStore(Redis.from_url(f"redis://127.0.0.1:{unused_tcp_port}/0"), worker="none")
    failures: list[BaseException] = []

    async def request(name: str) -> None:
        try:
            await post(store, name, type="user/message", agent="main", text="hi")
        except StoreError as exc:
            failures.append(exc)

    try:
        async with anyio.create_task_group() as tasks:
            for name in ("n1", "n2", "n3"):
                tasks.start_soon(request, name)
    finally:
        store.close()
        await store.client.aclose()
    assert len(failures) == 3


async def test_a_lease_asked_for_by_a_request_cancelled_meanwhile_lapses(replicas: Replicas) -> None:
    (store,) = replicas(1, lease_ms=50)
    asking = asyncio.ensure_future(store.leases.acquire("late", store._stream("late"), -1, "-"))
    await asyncio.sleep(0)  # the request asks for its lease, then is cancelled before the reply
    asking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asking
    assert (await post(store, "late", type="user/message", agent="main", text="hi")).seq == 2  # once it lapsed


async def test_a_request_cancelled_before_its_lease_is_asked_for_takes_none(replicas: Replicas, redis_url: str) -> None:
    (store,) = replicas(1)
    with anyio.move_on_after(0):
        await post(store, "gone", type="user/message", agent="main", text="never sent")
    client = Redis.from_url(redis_url)
    try:
        assert await client.get("rtg:{gone}:serving") is None
    finally:
        await client.aclose()
    assert (await post(store, "gone", type="user/message", agent="main", text="hi")).seq == 2
