"""Answered means recorded, on the file store and on Redis: a request is
answered only once its events are recorded, a failed write is a 503 after
which the session is rebuilt from its record, and a retry after a restart
gets its original answer from the record."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import msgspec
import msgspec.structs
import pytest

from bus import ToolCall, ToolResult, UserMessage, read_log
from guard import Config, RemindConfig, TurnsConfig
from guard.server import FileSessionStore
from guard.server.events import ToolCallIn, ToolResultIn, answer_event
from guard.server.runner import raise_open_files_limit, read_token
from guard.verdicts import replay_log
from tests.guard.server.conftest import MakeServed, Served

DENYING = Config(remind=RemindConfig(enabled=False), turns=TurnsConfig(threshold=2, deny_after=1, halt_after=1))


def _events(path: Path) -> list[Any]:
    with read_log(path) as reader:
        return list(reader)


def _session(served: Served, calls: int) -> list[tuple[dict[str, Any], bytes]]:
    sent: list[tuple[dict[str, Any], bytes]] = []
    for n in range(calls):
        call: dict[str, Any] = {"type": "tool/call", "agent": "main", "call_id": f"c{n}", "tool": "grep", "step": n + 1}
        answer = served.post("/v1/sessions/k/events", call)
        assert answer.status_code == 200, answer.text
        sent.append((call, answer.content))
        if answer.json()["allowed"] is False:
            continue
        result = {"type": "tool/result", "agent": "main", "call_id": f"c{n}", "content": "none"}
        sent.append((result, served.post("/v1/sessions/k/events", result).content))
    return sent


def test_after_a_restart_retries_get_their_original_answers_from_the_log(
    make_served: MakeServed, tmp_path: Path
) -> None:
    first = make_served(DENYING)
    sent = _session(first, 4)
    open_call = {"type": "tool/call", "agent": "main", "call_id": "open", "tool": "ls", "step": 9}
    sent.append((open_call, first.post("/v1/sessions/k/events", open_call).content))
    first.post("/v1/sessions/k/events", {"type": "user/message", "agent": "main", "text": "go on"})
    assert any(b'"allowed":false' in answer for _, answer in sent)
    assert any(b'"halt":{' in answer for _, answer in sent)
    first.stop()
    log = tmp_path / "state" / "k.jsonl"
    before = [(type(e), e.seq) for e in _events(log)]
    second = make_served(DENYING)
    latest = {(event["type"], event["call_id"]): answer for event, answer in sent}
    retried = 0
    for (kind, call_id), answer in latest.items():
        if kind == "tool/call" and ("tool/result", call_id) in latest:
            continue  # its result is in: the id may start a new call
        again = second.post("/v1/sessions/k/events", next(e for e, a in sent if a is answer))
        assert (again.status_code, again.content) == (200, answer), (kind, call_id)
        retried += 1
    assert retried >= 5
    denied = next(e for e, a in sent if b'"allowed":false' in a)
    late = second.post(
        "/v1/sessions/k/events", {"type": "tool/result", "agent": "main", "call_id": denied["call_id"], "content": "x"}
    )
    assert late.status_code == 409
    second.stop()
    assert [(type(e), e.seq) for e in _events(log)] == before
    assert anyio.run(replay_log, log, DENYING).differences == []


def test_a_failed_write_is_a_503_and_the_session_is_rebuilt_from_what_was_recorded(
    make_served: MakeServed, tmp_path: Path, file_size_limit: Callable[[int], None]
) -> None:
    served = make_served()
    served.event("w", type="user/message", agent="main", text="hi")
    log = tmp_path / "state" / "w.jsonl"
    file_size_limit(log.stat().st_size + 300)
    statuses = []
    answered: dict[tuple[str, str], int] = {}
    for n in range(12):
        call = {"type": "tool/call", "agent": "main", "call_id": f"c{n}", "tool": "grep", "args": {"x": "y" * 60}}
        response = served.post("/v1/sessions/w/events", call)
        statuses.append(response.status_code)
        if response.status_code == 200:
            answered[("tool/call", f"c{n}")] = response.json()["seq"]
            result = {"type": "tool/result", "agent": "main", "call_id": f"c{n}", "content": "z" * 40}
            done = served.post("/v1/sessions/w/events", result)
            statuses.append(done.status_code)
            if done.status_code == 200:
                answered[("tool/result", f"c{n}")] = done.json()["seq"]
        else:
            error = response.json()["error"]
            assert "File too large" in error
            assert error.endswith("; the event was not recorded")
            assert "w" not in served.store  # dropped: its next request rebuilds it from the log
    assert 200 in statuses
    assert 503 in statuses
    recorded = {
        ("tool/call" if isinstance(e, ToolCall) else "tool/result", e.call_id): e.seq
        for e in _events(log)
        if isinstance(e, (ToolCall, ToolResult))
    }
    assert answered == recorded
    file_size_limit(1 << 30)
    served.event("w", type="user/message", agent="main", text="room again")  # the session is live once more
    file_size_limit(log.stat().st_size)  # not one more byte: the write fails before any lands
    refused = served.post("/v1/sessions/w/events", {"type": "user/message", "agent": "main", "text": "none of it"})
    assert refused.status_code == 503
    file_size_limit(1 << 30)
    after = served.event("w", type="tool/call", agent="main", call_id="after", tool="ls")
    assert after["seq"] == max(e.seq for e in _events(log))  # numbered on after what was recorded
    assert anyio.run(replay_log, log, None).differences == []


def test_with_fsync_each_request_is_forced_to_disk(make_served: MakeServed, tmp_path: Path) -> None:
    served = make_served(store_options={"fsync": True})
    served.event("f", type="user/message", agent="main", text="hi")
    assert len(_events(tmp_path / "state" / "f.jsonl")) == 2


@pytest.mark.anyio
async def test_a_copy_that_arrived_before_its_twin_was_recorded_is_dropped(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    arrived = time.time()
    async with store.use("s") as session:
        await answer_event(session, ToolCallIn(agent="main", call_id="c1", tool="ls"), arrived=time.time())
        await answer_event(session, ToolResultIn(agent="main", call_id="c1", content="x"), arrived=time.time())
        with pytest.raises(Exception, match="was recorded after this request arrived") as raised:
            await answer_event(session, ToolCallIn(agent="main", call_id="c1", tool="ls"), arrived=arrived)
        assert getattr(raised.value, "status", None) == 409
        again = await answer_event(session, ToolCallIn(agent="main", call_id="c1", tool="ls"), arrived=time.time())
        assert msgspec.json.decode(again)["seq"] == 4  # a later request with the id is a new call
    store.close()


@pytest.mark.parametrize("queued", [True, False], ids=["looked-for", "watched"])
def test_a_request_whose_client_hung_up_while_it_waited_is_dropped(
    make_served: MakeServed, server_backend: str, queued: bool
) -> None:
    """Whether the application looks once for a queued disconnect (as
    ``serve`` runs it on asyncio) or watches for it (the default, for any
    server and middleware in front)."""
    served = make_served(disconnects_queued=queued and server_backend == "asyncio")
    served.event("g", type="user/message", agent="main", text="hi")
    held = threading.Event()

    async def hold() -> None:
        async with served.store.use("g"):
            held.set()
            await anyio.sleep(1.0)

    holder = threading.Thread(target=anyio.from_thread.run, args=(hold,), kwargs={"token": served._token})
    holder.start()
    held.wait(10)
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    body = b'{"type": "user/message", "agent": "main", "text": "nobody reads this"}'
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(
            b"POST /v1/sessions/g/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
    holder.join(10)
    deadline = time.monotonic() + 10
    while "499" not in served.client.get("/metrics").text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 'route="events",status="499"' in served.client.get("/metrics").text
    assert "nobody reads this" not in (served.state_dir / "g.jsonl").read_text()


def test_a_state_dir_removed_while_serving_refuses_events_and_gives_no_seq_twice(served: Served) -> None:
    answered = [served.event("g1", type="user/message", agent="main", text=f"step {n}")["seq"] for n in range(3)]
    shutil.rmtree(served.state_dir)
    health = served.client.get("/healthz")
    assert health.status_code == 503
    assert "removed while the server ran" in health.json()["error"]
    errors = []
    for n in range(3):
        refused = served.post("/v1/sessions/g1/events", {"type": "user/message", "agent": "main", "text": f"late {n}"})
        assert refused.status_code == 503
        errors.append(refused.json()["error"])
    # the live session's write is refused, and the session is not rebuilt from nothing after it
    gone = f"state dir {str(served.state_dir)!r}: removed while the server ran; events are refused until the server"
    assert errors[0] == f"{gone} is restarted; the event was not recorded"
    assert errors[-1] == f"{gone} is restarted"
    assert not served.state_dir.exists()
    assert answered == sorted(set(answered))


def test_a_state_dir_made_again_while_serving_is_refused_until_a_restart(served: Served) -> None:
    answered = [served.event("g1", type="user/message", agent="main", text=f"step {n}")["seq"] for n in range(3)]
    shutil.rmtree(served.state_dir)
    served.state_dir.mkdir()
    health = served.client.get("/healthz")
    assert health.status_code == 503
    assert "removed and made again while the server ran" in health.json()["error"]
    for session in ("g1", "g2"):  # in memory, and new
        refused = served.post(f"/v1/sessions/{session}/events", {"type": "user/message", "agent": "main", "text": "x"})
        assert refused.status_code == 503
        assert "events are refused until the server is restarted" in refused.json()["error"]
    assert list(served.state_dir.iterdir()) == []  # no log begun anew, numbering its events from 1 again
    assert answered == [2, 3, 4]


@pytest.mark.anyio
async def test_a_store_that_cannot_write_says_so(tmp_path: Path) -> None:
    assert await FileSessionStore(tmp_path / "fine").unready() is None
    full = await FileSessionStore(Path("/proc/self")).unready()  # a file system with no room for anything
    assert full == "state dir '/proc/self' is not writable or its file system is full"


def test_token_files_must_be_small_regular_files(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(Exception, match="is a FIFO"):
        read_token(str(fifo))
    big = tmp_path / "big"
    big.write_text("x" * 5000)
    big.chmod(0o600)
    with pytest.raises(Exception, match="has 5000 bytes; a token file has at most 4096"):
        read_token(str(big))
    with pytest.raises(Exception, match="is a character device"):
        read_token("/dev/zero")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe")
    binary.chmod(0o600)
    with pytest.raises(Exception, match="codec can't decode"):
        read_token(str(binary))


def test_the_open_files_limit_is_raised_to_the_hard_limit() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 512), hard))
        assert raise_open_files_limit() == hard
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
        assert raise_open_files_limit() == hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_client_that_hangs_up_mid_body_is_a_400_not_a_500(served: Served) -> None:
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(
            b"POST /v1/sessions/half/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 500\r\n\r\n{"type": "user/'
        )
    deadline = time.monotonic() + 10
    while 'route="events",status="400"' not in served.client.get("/metrics").text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 'route="events",status="400"' in served.client.get("/metrics").text
    assert 'status="500"' not in served.client.get("/metrics").text
    assert "half" not in served.store


def test_only_the_latest_record_times_are_kept(tmp_path: Path) -> None:
    from bus import Agent

    store = FileSessionStore(tmp_path)
    session = anyio.run(store.restore, "bound")
    agent = Agent("main")
    for n in range(4097):
        call = ToolCall(agent=agent, call_id=f"c{n}", step=1, tool="ls", args=None)
        msgspec.structs.force_setattr(call, "ts", float(n))
        session.note_recorded(call)
    assert len(session.recorded) == 4096
    assert next(iter(session.recorded)).endswith("\x1fc1")


def test_a_log_whose_header_starts_with_a_bom_is_continued_and_replays_the_same(
    make_served: MakeServed, tmp_path: Path
) -> None:
    first = make_served(DENYING)
    sent = _session(first, 3)
    first.stop()
    log = tmp_path / "state" / "k.jsonl"
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(log.read_bytes())
    log.write_bytes(b"\xef\xbb\xbf" + log.read_bytes())
    second = make_served(DENYING)
    call, answer = sent[-1]
    assert second.post("/v1/sessions/k/events", call).content == answer
    second.event("k", type="user/message", agent="main", text="on")
    second.stop()
    with_bom = anyio.run(replay_log, log, DENYING)
    assert with_bom.differences == []
    assert with_bom.report.skipped == 0
    without = anyio.run(replay_log, plain, DENYING)
    assert with_bom.verdicts[: len(without.verdicts)] == without.verdicts


def test_a_session_no_request_recorded_in_leaves_no_log_and_a_log_no_bare_header(
    make_served: MakeServed, tmp_path: Path, file_size_limit: Callable[[int], None]
) -> None:
    orphan = {"type": "tool/result", "agent": "main", "call_id": "x", "content": "c"}  # never posted as a call
    log = tmp_path / "state" / "n.jsonl"
    first = make_served()
    assert first.post("/v1/sessions/n/events", orphan).status_code == 422
    assert not log.exists(), "a refused event opens no log"
    first.event("n", type="user/message", agent="main", text="hi")
    first.stop()
    recorded = log.read_bytes()
    assert recorded.startswith(b'{"type":"session/start"')

    second = make_served()  # restored from its log, as after a restart
    assert second.post("/v1/sessions/n/events", orphan).status_code == 422
    assert log.read_bytes() == recorded, "a refused event adds no resume header"
    file_size_limit(len(recorded.splitlines()[0]) + 10)  # room for a header alone: the first write fails part-way
    assert (
        second.post("/v1/sessions/m/events", {"type": "user/message", "agent": "main", "text": "a"}).status_code == 503
    )
    file_size_limit(1 << 30)
    assert not (tmp_path / "state" / "m.jsonl").exists()
    second.event("n", type="user/message", agent="main", text="again")
    second.event("m", type="user/message", agent="main", text="b")
    second.stop()
    third = make_served()
    recorded = log.read_bytes()
    file_size_limit(len(recorded))  # the restore's resume header finds no room
    failed = third.post("/v1/sessions/n/events", {"type": "user/message", "agent": "main", "text": "no room"})
    file_size_limit(1 << 30)
    assert failed.status_code == 503
    assert failed.json()["error"].endswith("; the event was not recorded")
    assert log.read_bytes() == recorded
    third.stop()
    for name, texts in (("n", ["hi", "again"]), ("m", ["b"])):
        with read_log(tmp_path / "state" / f"{name}.jsonl") as reader:
            assert [e.text for e in reader if type(e) is UserMessage] == texts
        assert anyio.run(replay_log, tmp_path / "state" / f"{name}.jsonl", None).differences == []
