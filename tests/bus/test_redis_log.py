"""Session logs on Redis Streams, against a real redis-server.

redis-py's asyncio client does not run under trio, so these tests run on
asyncio only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from bus import Agent, AgentStatus, ReadReport, ToolCall, ToolResult, UserMessage, read_log
from bus.reader import LogError
from bus.redis_log import (
    EXTEND_SCRIPT,
    NOTES_SPAN,
    RedisSessionLog,
    append_many,
    env_password,
    parse_redis_target,
    redact_url,
    redis_client,
)
from tests.conftest import RedisClients

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


@pytest.fixture
def client(redis_clients: RedisClients) -> Redis:
    return redis_clients()


def _call(agent: Agent, n: int, tool: str = "grep") -> ToolCall:
    return ToolCall(agent=agent, call_id=f"c{n}", step=n, tool=tool, args={"pattern": "x", "n": n})


async def test_seq_is_assigned_in_append_order_and_the_line_carries_it(client: Redis, agent: Agent) -> None:
    log = RedisSessionLog(client, "s1", clock=lambda: 100.0)
    first = await log.append(UserMessage(agent=agent, text="go", ts=1.0))
    second = await log.append(_call(agent, 1))
    assert (first.seq, first.new, second.seq, second.new) == (1, True, 2, True)
    lines = [line async for _, line in log.entries()]
    assert lines[0].startswith(b'{"type":"user/message","seq":1,"ts":1.0,"agent":"main"')
    assert b'"seq":2,' in lines[1]


async def test_an_event_built_without_a_time_is_logged_at_the_log_s_clock(client: Redis, agent: Agent) -> None:
    """As ``Bus.publish`` stamps one: time-based rules of a guard reading the
    stream see the time the event was appended; a time given is kept."""
    log = RedisSessionLog(client, "s1", clock=lambda: 100.0)
    await log.append(_call(agent, 1))
    await log.append(UserMessage(agent=agent, text="go", ts=7.5))
    lines = [line async for _, line in log.entries()]
    assert [msgspec.json.decode(line)["ts"] for line in lines] == [100.0, 7.5]


async def test_an_event_no_reader_could_read_is_refused_before_anything_is_sent(client: Redis, agent: Agent) -> None:
    log = RedisSessionLog(client, "s1")
    with pytest.raises(TypeError, match=r"ToolCall cannot be logged: .* at `\$\.late`"):
        await log.append(ToolCall(agent=agent, call_id="c1", step=1, tool="t", late="no"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"UserMessage\.ts is nan"):
        await log.append(UserMessage(agent=agent, text="go", ts=float("nan")))
    assert await log.length() == 0


async def test_a_retry_under_the_same_key_is_applied_once(client: Redis, agent: Agent) -> None:
    log = RedisSessionLog(client, "s1")
    first = await log.append(_call(agent, 1), key="main:c1:tool/call")
    again = await log.append(_call(agent, 1), key="main:c1:tool/call")
    other = await log.append(_call(agent, 2), key="main:c2:tool/call")
    assert (first.seq, first.new) == (1, True)
    assert (again.seq, again.new) == (1, False)
    assert other.seq == 2
    assert await log.length() == 2


async def test_concurrent_writers_never_share_or_skip_a_seq(redis_clients: RedisClients, agent: Agent) -> None:
    clients = [redis_clients() for _ in range(4)]
    seqs: list[int] = []

    async def writer(client: Redis, base: int) -> None:
        log = RedisSessionLog(client, "shared")
        for n in range(50):
            seqs.append((await log.append(_call(agent, base + n))).seq)

    async with anyio.create_task_group() as tg:
        for i, client in enumerate(clients):
            tg.start_soon(writer, client, i * 1000)
    report = ReadReport()
    read = [event.seq async for event in RedisSessionLog(clients[0], "shared").read(report)]
    assert sorted(seqs) == list(range(1, 201))
    assert read == list(range(1, 201))
    assert report.events == 200


async def test_export_writes_a_session_log_the_file_reader_reads(client: Redis, agent: Agent, tmp_path: Path) -> None:
    log = RedisSessionLog(client, "s9", clock=lambda: 1764489600.0)
    sub = Agent("sub", parent_id="main")
    await log.append(AgentStatus(agent=agent, status="started"))
    await log.append(AgentStatus(agent=sub, status="started", parent="main"))
    await log.append(_call(sub, 1))
    await log.append(ToolResult.answering(_call(sub, 1), "hit"))
    out = tmp_path / "s9.jsonl"
    assert (await log.export(out)).events == 4
    assert out.stat().st_mode & 0o777 == 0o600
    with read_log(out) as reader:
        events = list(reader)
        assert reader.report.session == "s9"
        assert reader.report.skipped == 0
        assert reader.agents["sub"].parent_id == "main"
    assert [e.seq for e in events] == [1, 2, 3, 4]
    with pytest.raises(FileExistsError):
        await log.export(out)


async def test_a_bad_entry_is_skipped_and_counted(client: Redis, agent: Agent) -> None:
    log = RedisSessionLog(client, "s1")
    await log.append(_call(agent, 1))
    await client.xadd(log.stream, {"seq": 2, "line": b"{not json"})
    await client.xadd(log.stream, {"seq": 3, "line": b'{"type":"mystery","seq":3,"ts":0,"agent":"main"}'})
    await client.xadd(log.stream, {"seq": 4, "line": b'{"type":"tool/call","seq":4,"ts":0,"agent":"main"}'})
    mistyped = b'{"type":"tool/call","seq":5,"ts":0,"agent":"main","call_id":5,"step":1,"tool":"grep"}'
    await client.xadd(log.stream, {"seq": 5, "line": mistyped})  # read, its call id as text
    await log.append(_call(agent, 6))
    report = ReadReport()
    events = [event async for event in log.read(report)]
    assert [event.call_id for event in events] == ["c1", "5", "c6"]  # type: ignore[union-attr]
    assert report.skipped_by_reason == {"invalid-json": 1, "unknown-type": 1, "schema": 1}
    assert report.mistyped == 1


async def test_export_writes_only_the_entries_the_fleet_reads_and_counts_the_rest(
    client: Redis, agent: Agent, tmp_path: Path
) -> None:
    log = RedisSessionLog(client, "s1")
    await log.append(UserMessage(agent=agent, text="go"))
    await log.append(_call(agent, 2))
    await client.xadd(
        log.stream, {"seq": 3, "line": b'{"type":"user/message",\n"seq":3,"ts":0,"agent":"main","text":"on"}'}
    )
    two_in_one = b'{"type":"user/message","seq":4,"ts":0,"agent":"main","text":"a"}\n{"type":"user/message"}'
    await client.xadd(log.stream, {"seq": 4, "line": two_in_one})
    await client.xadd(log.stream, {"seq": 5, "other": b"no line field"})
    await client.xadd(log.stream, {"seq": 6, "line": b"[" * 101 + b"]" * 101})
    await client.xadd(log.stream, {"seq": 7, "line": b'{"type":"session/start","v":1,"session":"s1","ts":1.0}'})
    out = tmp_path / "s1.jsonl"
    report = await log.export(out)
    assert (report.events, report.skipped_by_reason) == (3, {"invalid-json": 2, "too-deep": 1, "schema": 1})
    assert [sample.line for sample in report.samples] == [5, 6, 7, 8]  # as lines of the log: the header is line 1
    assert len(out.read_bytes().splitlines()) == 4  # the header and one line per event, the newline one included
    with read_log(out) as reader:
        from_file = [(type(e).__name__, e.seq) for e in reader]
        assert reader.report.skipped == 0
    read = ReadReport()
    assert from_file == [(type(e).__name__, e.seq) async for e in log.read(read)]
    assert (read.events, read.skipped_by_reason) == (report.events, report.skipped_by_reason)


async def test_an_unknown_session_is_a_clear_error(client: Redis) -> None:
    log = RedisSessionLog(client, "nobody")
    with pytest.raises(LogError, match="no session 'nobody'"):
        await log.header()


async def test_maxlen_trims_and_ttl_expires(client: Redis, agent: Agent) -> None:
    log = RedisSessionLog(client, "s1", maxlen=10, ttl=60)
    for n in range(500):
        await log.append(_call(agent, n))
    assert await log.length() < 500
    assert 0 < await client.ttl(log.stream) <= 60


async def test_a_session_idle_past_ttl_leaves_the_session_index(client: Redis, agent: Agent) -> None:
    now = [1_000.0]
    for session in ("old", "kept"):
        await RedisSessionLog(client, session, ttl=60, clock=lambda: now[0]).append(_call(agent, 1))
        now[0] += 30
    await RedisSessionLog(client, "forever", clock=lambda: now[0]).append(_call(agent, 1))  # no ttl: prunes nothing
    assert await client.zcard("rtg:sessions") == 3
    now[0] = 1_000.0 + 75  # "old" was last appended to 75 s ago, "kept" 45 s ago
    await RedisSessionLog(client, "new", ttl=60, clock=lambda: now[0]).append(_call(agent, 1))
    assert await client.zrange("rtg:sessions", 0, -1) == [b"kept", b"forever", b"new"]


async def test_reading_in_batches_resumes_after_the_last_entry(client: Redis, agent: Agent) -> None:
    log = RedisSessionLog(client, "s1")
    for n in range(25):
        await log.append(_call(agent, n))
    ids = [entry async for entry, _ in log.entries(batch=10)]
    assert len(ids) == len(set(ids)) == 25
    tail = [entry async for entry, _ in log.entries(ids[19], batch=10)]
    assert tail == ids[20:]


def test_arguments_are_validated() -> None:
    client = Redis()
    with pytest.raises(ValueError, match="non-empty session"):
        RedisSessionLog(client, "")
    with pytest.raises(ValueError, match="maxlen=-1"):
        RedisSessionLog(client, "s", maxlen=-1)


def test_redis_urls_are_told_from_paths() -> None:
    assert parse_redis_target("redis://localhost:6379/0") is not None
    assert parse_redis_target("unix:///tmp/r.sock") is not None
    assert parse_redis_target("session.jsonl") is None


async def test_entries_read_the_same_through_a_decoding_client(redis_clients: RedisClients, agent: Agent) -> None:
    plain, decoding = redis_clients(), redis_clients(decode_responses=True)
    await RedisSessionLog(plain, "s1").append(_call(agent, 1))
    await plain.xadd(RedisSessionLog(plain, "s1").stream, {"seq": 2})  # no line at all
    report = ReadReport()
    events = [e async for e in RedisSessionLog(decoding, "s1").read(report)]
    assert [e.seq for e in events] == [1]
    assert report.skipped_by_reason == {"invalid-json": 1}


async def test_a_damaged_header_is_a_clear_error(client: Redis) -> None:
    await client.hset("rtg:{s1}:meta", mapping={"v": "one"})
    with pytest.raises(LogError, match="damaged header"):
        await RedisSessionLog(client, "s1").header()


@pytest.mark.parametrize(
    ("meta", "why"),
    [
        ({"v": "1", "ts": "nan"}, "session 's1' in Redis has a damaged header: its ts nan is no time"),
        ({"v": "1", "ts": "inf"}, "session 's1' in Redis has a damaged header: its ts inf is no time"),
        ({"v": "99", "ts": "1.0"}, "session 's1' in Redis has session log version 99; this reader knows version 1"),
        ({}, r"session 's1' in Redis has events but no header \(rtg:\{s1\}:meta is gone\)"),
    ],
)
async def test_a_header_a_reader_of_the_file_would_refuse_is_exported_as_no_file(
    client: Redis, agent: Agent, tmp_path: Path, meta: dict[str, str], why: str
) -> None:
    log = RedisSessionLog(client, "s1")
    await log.append(_call(agent, 1))
    await client.delete(log.meta)
    if meta:
        await client.hset(log.meta, mapping=meta)  # type: ignore[arg-type]
    with pytest.raises(LogError, match=f"^{why}$"):
        await log.export(tmp_path / "s1.jsonl")
    assert not (tmp_path / "s1.jsonl").exists()


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("rtg:{s1}:meta", r"session 's1' in Redis: rtg:\{s1\}:meta holds a string, not a hash"),
        ("rtg:{s1}:events", r"session 's1' in Redis: rtg:\{s1\}:events holds a string, not a stream"),
    ],
)
async def test_a_session_key_holding_another_kind_of_data_is_named(
    client: Redis, tmp_path: Path, key: str, why: str
) -> None:
    await client.set(key, "another program's value")
    with pytest.raises(LogError, match=f"^{why}$"):
        await RedisSessionLog(client, "s1").export(tmp_path / "s1.jsonl")
    assert not (tmp_path / "s1.jsonl").exists()


async def test_export_of_a_large_session_is_whole(client: Redis, agent: Agent, tmp_path: Path) -> None:
    log = RedisSessionLog(client, "big")
    sub = Agent("sub", parent_id="main")
    await log.append(AgentStatus(agent=sub, status="started", parent="main"))
    for n in range(40):
        await log.append(ToolResult.answering(_call(sub, n), "x" * 4000))
    report = ReadReport()
    read = [e async for e in log.read(report)]
    assert read[1].agent is read[0].agent
    assert read[0].agent is not None
    assert read[0].agent.parent_id == "main"
    out = tmp_path / "big.jsonl"
    assert (await log.export(out)).events == 41
    with read_log(out) as reader:
        assert len(list(reader)) == 41
        assert reader.report.skipped == 0


async def test_extend_appends_numbered_events_and_notes_only_where_the_writer_left_off(
    client: Redis, agent: Agent
) -> None:
    log = RedisSessionLog(client, "s1")
    assert await log.extend([], expected=0)  # nothing to write: nothing checked
    first = msgspec.structs.replace(_call(agent, 1), seq=1)
    assert await log.extend([first], expected=0, put={"a": b"1", "b": b"2"})
    assert await log.notes() == {"a": b"1", "b": b"2"}
    second = msgspec.structs.replace(_call(agent, 2), seq=2)
    assert not await log.extend([second], expected=0, put={"c": b"3"})  # another writer moved the stream
    assert await log.extend([second], expected=1, drop=["a"])
    assert await log.notes() == {"b": b"2"}
    assert await log.notes(["a", "b", "z"]) == {"b": b"2"}  # only those asked for, and set
    assert await log.notes([]) == {}
    assert [e.seq async for e in log.read()] == [1, 2]
    assert await log.last_seq() == 2


async def test_a_note_goes_once_its_session_moved_on_whoever_set_it(client: Redis, agent: Agent) -> None:
    """A writer keeps notes only for its own recent events and drops them
    itself; another writer taking over never learns of them, so the log
    removes every note ``NOTES_SPAN`` events after it was set."""
    first, later = RedisSessionLog(client, "s-span"), RedisSessionLog(client, "s-span")
    calls = [msgspec.structs.replace(_call(agent, n), seq=n) for n in range(1, NOTES_SPAN + 3)]
    assert await first.extend(calls[:1], expected=0, put={"old": b"1"})
    assert await first.extend(calls[1:2], expected=1, put={"recent": b"2"})
    seq = 2
    for start in range(2, NOTES_SPAN, 512):  # the other writer, which never heard of those notes
        batch = calls[start : min(start + 512, NOTES_SPAN)]
        assert await later.extend(batch, expected=seq)
        seq += len(batch)
    assert await later.notes() == {"old": b"1", "recent": b"2"}  # NOTES_SPAN - 1 events after "old"
    assert await later.extend(calls[NOTES_SPAN : NOTES_SPAN + 1], expected=seq)
    assert await later.notes() == {"recent": b"2"}
    assert await client.zrange("rtg:{s-span}:noted", 0, -1) == [b"recent"]


async def test_notes_and_their_seqs_expire_with_the_session(client: Redis, agent: Agent) -> None:
    log = RedisSessionLog(client, "s-ttl", ttl=60)
    assert await log.extend([msgspec.structs.replace(_call(agent, 1), seq=1)], expected=0, put={"a": b"1"})
    assert 0 < await client.ttl(log.notes_key) <= 60
    assert 0 < await client.ttl("rtg:{s-ttl}:noted") <= 60


async def test_notes_an_older_version_left_go_too(client: Redis, agent: Agent) -> None:
    log = RedisSessionLog(client, "s-legacy")
    await client.hset(log.notes_key, "legacy", b"1")  # set with no seq beside it
    calls = [msgspec.structs.replace(_call(agent, n), seq=n) for n in range(1, NOTES_SPAN + 2)]
    assert await log.extend(calls[:1], expected=0)
    assert await log.extend(calls[1:NOTES_SPAN], expected=1)
    assert await log.notes() == {"legacy": b"1"}
    assert await log.extend(calls[NOTES_SPAN:], expected=NOTES_SPAN)
    assert await log.notes() == {}


async def test_an_extension_run_by_another_script_appends_and_says_where(client: Redis, agent: Agent) -> None:
    log = RedisSessionLog(client, "s-ext")
    first = msgspec.structs.replace(_call(agent, 1), seq=1)
    keys, args = log.extension([first], expected=0, put={"a": b"1"})
    done, seq, entry = await client.register_script(EXTEND_SCRIPT)(keys=keys, args=args)
    assert (done, seq) == (1, 1)
    assert [ident async for ident, _ in log.entries()] == [entry.decode()]
    assert await client.hget(log.meta, "seq") == b"1"
    assert await log.notes() == {"a": b"1"}


async def test_extending_by_nothing_writes_nothing_and_succeeds(client: Redis, agent: Agent) -> None:
    log = RedisSessionLog(client, "s-empty")
    assert await log.extend([], expected=0) is True
    assert await client.exists(log.stream) == 0
    assert await log.last_seq() == 0


async def test_one_batch_appends_to_many_sessions_in_order_and_dedupes_within_itself(
    client: Redis, agent: Agent
) -> None:
    one, two = RedisSessionLog(client, "one"), RedisSessionLog(client, "two")
    answers = await append_many(
        client,
        [
            one.pending(_call(agent, 1), key="k1"),
            two.pending(_call(agent, 1)),
            one.pending(_call(agent, 1), key="k1"),
            one.pending(_call(agent, 2), after="-"),
        ],
    )
    assert [(a.seq, a.new) for a in answers] == [(1, True), (1, True), (1, False), (2, True)]
    assert [b'"seq":1,' in line for _, line in answers[3].entries] == [True, False]
    assert (await one.length(), await two.length()) == (2, 1)
    assert await append_many(client, []) == []


async def test_a_batch_under_two_prefixes_is_refused_before_anything_is_sent(client: Redis, agent: Agent) -> None:
    mine, theirs = RedisSessionLog(client, "s1"), RedisSessionLog(client, "s1", prefix="other")
    with pytest.raises(ValueError, match="one prefix: 'other:sessions' is not 'rtg:sessions'"):
        await append_many(client, [mine.pending(_call(agent, 1)), theirs.pending(_call(agent, 2))])
    assert await mine.length() == 0


@pytest.mark.parametrize(
    ("url", "printed"),
    [
        ("redis://:s3cret@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://user:s3cret@host/1", "redis://user:***@host/1"),
        ("redis://user:p@ss@[::1]:6379", "redis://user:***@[::1]:6379"),
        ("rediss://user@host", "rediss://user@host"),
        ("unix:///run/redis.sock?db=2&password=s3cret", "unix:///run/redis.sock?db=2&password=***"),
        ("redis://host:6379/0", "redis://host:6379/0"),
        ("rediss://host/0?ssl_password=s3cret&db=1", "rediss://host/0?ssl_password=***&db=1"),
        ("redis://host/0?pass%77ord=s3cret", "redis://host/0?pass%77ord=***"),
    ],
)
def test_a_url_is_printed_without_its_password(url: str, printed: str) -> None:
    assert redact_url(url) == printed


async def test_a_client_takes_a_connection_redis_closed_for_a_new_one(
    redis_url: str, redis_clients: RedisClients
) -> None:
    client = redis_client(redis_url, timeout=5)
    try:
        assert await client.ping()
        killed = await redis_clients().client_kill_filter(_type="normal", skipme=True)  # as Redis's idle timeout does
        assert killed >= 1
        assert await client.set("after", "kill")  # was: ConnectionError "Connection closed by server."
        assert await client.get("after") == b"kill"
    finally:
        await client.aclose()


async def test_appends_after_the_session_counter_was_lost_number_on_from_the_stream(
    client: Redis, agent: Agent
) -> None:
    log = RedisSessionLog(client, "lost")
    for n in range(1, 4):
        await log.append(_call(agent, n))
    await client.delete("rtg:{lost}:meta")  # evicted, or deleted by hand
    assert [(await log.append(_call(agent, n))).seq for n in range(4, 6)] == [4, 5]
    entries: Any = await client.xrange("rtg:{lost}:events")
    assert [int(fields[b"seq"]) for _, fields in entries] == [1, 2, 3, 4, 5]


async def test_a_batch_touching_a_key_of_the_wrong_type_writes_nothing(client: Redis, agent: Agent) -> None:
    good, bad = RedisSessionLog(client, "good"), RedisSessionLog(client, "bad")
    await client.set("rtg:{bad}:keys", "not a hash")
    batch = [good.pending(_call(agent, 1), key="k1"), bad.pending(_call(agent, 1), key="k1")]
    with pytest.raises(
        ResponseError, match=r"WRONGTYPE rtg:\{bad\}:keys holds a string, not a hash: nothing was written"
    ):
        await append_many(client, batch)
    assert await client.exists("rtg:{good}:events", "rtg:{good}:meta") == 0  # a retry finds nothing half done


async def test_an_export_that_fails_part_way_leaves_no_file(client: Redis, agent: Agent, tmp_path: Path) -> None:
    log = RedisSessionLog(client, "cut")
    await log.append(_call(agent, 1))
    await client.delete("rtg:{cut}:events")
    await client.set("rtg:{cut}:events", "not a stream")  # the header reads, the entries do not
    with pytest.raises(LogError, match=r"rtg:\{cut\}:events holds a string, not a stream"):
        await log.export(tmp_path / "cut.jsonl")
    assert not (tmp_path / "cut.jsonl").exists()  # was: a header-only log that replayed as a whole session


@pytest.mark.parametrize(
    ("url", "told"),
    [
        ("redis://:hunter2/secret@127.0.0.1:6379/0", "its password holds"),
        ("redis://worker:pa#ss@127.0.0.1:6379/0", "its password holds"),
        ("redis://:hunter2secret@127.0.0.1:6379/abc", "its database 'abc' is not a number"),
    ],
)
def test_a_client_for_an_unusable_url_is_refused_without_showing_its_password(url: str, told: str) -> None:
    with pytest.raises(ValueError, match=f"not a usable Redis URL '.*': {told}") as refused:
        redis_client(url, timeout=1)
    assert "hunter2" not in str(refused.value)
    assert "pa#ss" not in str(refused.value)


def test_the_password_of_a_url_without_one_comes_from_rediscli_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDISCLI_AUTH", raising=False)
    assert env_password("redis://127.0.0.1:6379/0") is None
    monkeypatch.setenv("REDISCLI_AUTH", "")
    assert env_password("redis://127.0.0.1:6379/0") is None
    monkeypatch.setenv("REDISCLI_AUTH", "s3cret")
    assert env_password("redis://127.0.0.1:6379/0") == "s3cret"
    assert env_password("redis://fleet@127.0.0.1:6379/0") == "s3cret", "an ACL user's"
    assert env_password("redis://:given@127.0.0.1:6379/0") is None, "the URL's own wins"
    assert env_password("unix:///run/redis.sock?db=0") == "s3cret"
