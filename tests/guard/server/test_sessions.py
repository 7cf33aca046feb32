"""The session store: bounded memory (idle and least-recently-used eviction)
without losing a session's guard state, which comes back from its log."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import pytest
from structlog.testing import capture_logs

from bus import Agent, ToolCall
from bus.testing import FakeClock
from guard import GENTLE_REMINDER, parse_config
from guard.server import FileSessionStore, Session, scope
from guard.server.events import AgentStatusIn, ToolCallIn, ToolResultIn, UserMessageIn, answer_event, apply_event
from guard.server.sessions import StoreError

pytestmark = pytest.mark.anyio


async def grep(store: FileSessionStore, session_id: str, call_id: str) -> list[str]:
    """One identical grep call and its result; the texts of the guard's messages."""
    async with store.use(session_id) as session:
        await apply_event(session, ToolCallIn(agent="main", call_id=call_id, tool="grep", args={"pattern": "x"}))
        answer = await apply_event(session, ToolResultIn(agent="main", call_id=call_id, content="none"))
    return [m.text for m in answer.messages]


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> FileSessionStore:
    return FileSessionStore(tmp_path / "state", idle_seconds=60, max_sessions=3, clock=clock)


LongStore = Callable[[int], FileSessionStore]


@pytest.fixture
def long_store(tmp_path: Path) -> Iterator[LongStore]:
    """``long_store(calls)``: a store whose state directory holds the log of
    session ``long``, ``calls`` distinct calls of agent ``main``, each with
    its result; closed after the test."""
    state = tmp_path / "state"
    stores: list[FileSessionStore] = []

    def make(calls: int) -> FileSessionStore:
        lines = [b'{"type":"session/start","v":1,"session":"long","ts":1.0}']
        for n in range(calls):
            call = {"agent": "main", "call_id": f"c{n}", "step": n + 1, "tool": "Bash", "args": {"cmd": f"make {n}"}}
            lines.append(msgspec.json.encode({"type": "tool/call", "seq": 2 * n + 1, "ts": 2.0, **call}))
            result = {"type": "tool/result", "seq": 2 * n + 2, "ts": 2.0, **call, "content": "ok", "is_error": False}
            lines.append(msgspec.json.encode(result))
        state.mkdir()
        (state / "long.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        stores.append(FileSessionStore(state))
        return stores[-1]

    yield make
    for store in stores:
        store.close()


async def test_an_idle_session_is_evicted_and_its_state_comes_back_from_its_log(
    store: FileSessionStore, clock: FakeClock
) -> None:
    assert await grep(store, "s", "c1") == []
    assert await grep(store, "s", "c2") == []
    clock.advance(59)
    assert store.evict_idle() == 0
    clock.advance(1)
    assert store.evict_idle() == 1
    assert "s" not in store
    assert (store.evicted, store.restored) == (1, 0)
    # the third identical call still draws the reminder: the count survived eviction
    assert await grep(store, "s", "c3") == [GENTLE_REMINDER]
    assert store.restored == 1


async def test_beyond_max_sessions_the_least_recently_used_goes_first(store: FileSessionStore) -> None:
    for name in ("a", "b", "c"):
        await grep(store, name, "c1")
    await grep(store, "a", "c2")  # a is now the most recently used
    await grep(store, "d", "c1")
    assert len(store) == 3
    assert "b" not in store
    assert {"a", "c", "d"} <= {name for name in ("a", "c", "d") if name in store}


async def test_a_session_in_use_is_never_evicted(store: FileSessionStore, clock: FakeClock) -> None:
    async with store.use("busy") as session:
        await apply_event(session, UserMessageIn(agent="main", text="a long tool call follows"))
        clock.advance(3600)
        assert store.evict_idle() == 0
        for name in ("x", "y", "z"):  # over max_sessions while busy is held
            await grep(store, name, "c1")
        assert "busy" in store
    assert "x" not in store  # the least recently used one that was free
    assert store.evict_idle() == 0  # busy was last used just now, when its request ended
    assert "busy" in store


async def test_a_request_waiting_for_a_session_that_ends_gets_it_restored(store: FileSessionStore) -> None:
    seen: list[Session] = []

    async def second() -> None:
        async with store.use("s") as session:
            seen.append(session)
            await apply_event(session, UserMessageIn(agent="main", text="again"))

    async with anyio.create_task_group() as tasks, store.use("s") as first:
        await apply_event(first, UserMessageIn(agent="main", text="hello"))
        tasks.start_soon(second)
        await anyio.sleep(0.05)  # second now waits for the lock
        await apply_event(first, AgentStatusIn(agent="main", status="disposed"))
    (restored,) = seen
    assert restored is not first
    assert first.closed
    assert "s" in store


async def test_evict_idle_forever_evicts_on_its_own(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path / "state", idle_seconds=0.05)
    await grep(store, "s", "c1")
    with anyio.move_on_after(1):
        await store.evict_idle_forever(0.02)
    assert len(store) == 0
    assert store.evicted == 1


async def test_a_state_directory_given_as_a_str_is_a_path(tmp_path: Path) -> None:
    store = FileSessionStore(str(tmp_path / "state"))
    await grep(store, "s", "c1")
    assert store.state_dir == tmp_path / "state"
    assert (tmp_path / "state").is_dir()
    store.close()


async def test_a_tiny_idle_timeout_never_spins_the_eviction(tmp_path: Path) -> None:
    """``--idle-timeout 1e-9``: idle sessions are looked for once a second,
    not as fast as the loop can spin."""
    store = FileSessionStore(tmp_path / "state", idle_seconds=1e-9)
    await grep(store, "s", "c1")
    checks = 0
    evict_idle = store.evict_idle

    def counted() -> int:
        nonlocal checks
        checks += 1
        return evict_idle()

    store.evict_idle = counted  # type: ignore[method-assign]
    with anyio.move_on_after(1.5):
        await store.evict_idle_forever()
    assert (checks, len(store)) == (1, 0)


async def test_close_closes_every_session(store: FileSessionStore) -> None:
    await grep(store, "a", "c1")
    async with store.use("a") as session:
        pass
    store.close()
    assert len(store) == 0
    assert session.closed
    session.close()  # twice is harmless


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"idle_seconds": 0}, "idle_seconds = 0: must be > 0"),
        ({"max_sessions": 0}, "max_sessions = 0: must be an integer >= 1"),
        ({"max_sessions": True}, "max_sessions = True: must be an integer >= 1"),
    ],
)
def test_bad_limits_are_refused(tmp_path: Path, options: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        FileSessionStore(tmp_path, **options)


async def test_requests_racing_to_open_a_new_session_share_one(store: FileSessionStore) -> None:
    opened: list[Session] = []

    async def open_it() -> None:
        async with store.use("race") as session:
            opened.append(session)
            await apply_event(session, UserMessageIn(agent="main", text="hi"))

    async with anyio.create_task_group() as tasks:
        for _ in range(3):
            tasks.start_soon(open_it)
    assert len(opened) == 3
    assert opened[0] is opened[1] is opened[2]
    assert (store.restored, store.evicted) == (0, 0)


async def test_with_every_other_session_busy_the_store_goes_over_its_bound_for_a_while(
    tmp_path: Path,
) -> None:
    store = FileSessionStore(tmp_path / "state", max_sessions=1)
    async with store.use("busy") as busy:
        await apply_event(busy, UserMessageIn(agent="main", text="a slow call follows"))
        assert await grep(store, "other", "c1") == []  # opened although busy holds the only place
        assert len(store) == 2
    assert await grep(store, "third", "c1") == []
    assert len(store) == 1


def test_only_the_latest_denials_and_answers_are_remembered(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path / "state")
    session = anyio.run(store.restore, "d")
    for n in range(300):
        session.remember_denial("main", f"c{n}", b"call %d" % n)
    for n in range(1100):
        session.remember_answer(f"k{n}", b"{}")
    assert session.denied_call("main", "c0") is None
    assert session.denied_call("main", "c299") == b"call 299"
    assert "k0" not in session.answers
    assert len(session.answers) == 64
    session.close()


async def test_a_file_that_is_no_session_log_is_set_aside_and_the_session_begins_anew(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "s.jsonl").write_text("this is not a session log\n")
    store = FileSessionStore(state)
    with capture_logs() as logs:
        assert await grep(store, "s", "c1") == []
    (aside,) = state.glob("s.jsonl.unreadable-*")
    assert aside.read_text() == "this is not a session log\n"
    [logged] = [entry for entry in logs if entry["event"] == "serve.log_restarted"]
    assert logged["session"] == "s"
    assert logged["reason"].endswith(f"; moved to {str(aside)!r} and a new log begun")
    assert (state / "s.jsonl").read_text().startswith('{"type":"session/start"')
    store.close()


async def test_a_request_cancelled_before_it_is_answered_records_nothing(store: FileSessionStore) -> None:
    assert await grep(store, "s", "c1") == []
    with anyio.CancelScope() as scope:
        async with store.use("s") as session:
            await apply_event(session, ToolCallIn(agent="main", call_id="c2", tool="grep", args={"pattern": "x"}))
            scope.cancel()  # a shutdown's deadline, before the answer
            await anyio.sleep(1)
    assert "s" not in store  # its live state saw the call: dropped, rebuilt from the log
    assert await grep(store, "s", "c3") == []  # the second call of the log, not the third: c2 was never recorded


async def test_a_long_restore_lets_other_sessions_be_served_meanwhile(long_store: LongStore) -> None:
    store = long_store(2000)
    served: list[str] = []

    async def other_sessions() -> None:
        for n in itertools.count():
            await grep(store, f"other{n}", "c1")  # each a new session, restored from nothing
            served.append(f"other{n}")
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(other_sessions)
        async with store.use("long") as session:
            served_meanwhile = len(served)
            assert session.link.bus.seq == 4000
        tasks.cancel_scope.cancel()
    assert served_meanwhile >= 5  # a turn every few hundred events of the replay, and of its answers recalled


async def test_requests_for_a_session_being_restored_wait_for_that_one_restore(long_store: LongStore) -> None:
    store = long_store(600)
    opened: list[Session] = []

    async def request() -> None:
        async with store.use("long") as session:
            opened.append(session)
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tasks:
        for _ in range(3):
            tasks.start_soon(request)
    first, *rest = opened
    assert len(rest) == 2
    assert all(session is first for session in rest)
    assert store.restored == 1


async def test_a_long_session_keeps_only_the_latest_answers_and_record_times(store: FileSessionStore) -> None:
    async with store.use("s") as session:
        for n in range(200):
            await answer_event(session, ToolCallIn(agent="main", call_id=f"c{n}", tool="ls", args={"n": n}))
            await answer_event(session, ToolResultIn(agent="main", call_id=f"c{n}", content="x"))
    assert (len(session.answers), len(session.recorded)) == (64, 32)
    assert list(session.answers)[-1] == "tool/result\x1fmain\x1fc199"
    async with store.use("s") as again:
        retried = await answer_event(again, ToolResultIn(agent="main", call_id="c199", content="x"))
    assert msgspec.json.decode(retried)["seq"] == 401  # the original answer


async def test_record_times_are_kept_while_a_request_in_flight_may_need_them(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path / "state")
    session = await store.restore("s")
    store._live["s"] = session
    agent = Agent("main")

    def record(n: int, ts: float) -> None:
        call = ToolCall(agent=agent, call_id=f"c{n}", step=1, tool="ls", args=None)
        msgspec.structs.force_setattr(call, "ts", ts)
        session.note_recorded(call)

    for n in range(200):
        record(n, float(n))

    async def request(arrived: float) -> None:
        token = scope.enter("events")
        here = scope.current()
        assert here is not None
        here.arrived = arrived
        async with store._turn("s"):
            pass
        scope.leave(token)

    async with anyio.create_task_group() as tasks:
        async with store._turn("s"):  # a request of the session that arrived now: it ends first
            tasks.start_soon(request, 50.5)  # arrived after the first 51 records, waits for its turn
            await anyio.wait_all_tasks_blocked()
        assert len(session.recorded) == 149  # more than the latest 32: all since the request waiting arrived
        assert next(iter(session.recorded.values())) == 51.0
    assert len(session.recorded) == 32  # no request in flight: the latest alone
    async with store._turn("gone"):  # a session not live: nothing to forget
        pass
    session.close()


def claim(state: Path) -> None:
    """Claim ``state`` with a store of its own and let it go, as a second server would."""
    other = FileSessionStore(state)
    try:
        other.claim()
    finally:
        other.release()
        other.close()


async def test_a_state_dir_made_again_is_refused_and_its_lock_taken(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = FileSessionStore(state)
    store.claim()
    assert (state / "serve.lock").exists()
    with pytest.raises(StoreError, match=r"is in use by another server \(pid \d+\)$"):
        claim(state)
    assert await grep(store, "s", "c1") == []
    shutil.rmtree(state)
    gone = "removed while the server ran; events are refused until the server is restarted"
    assert await store.unready() == f"state dir {str(state)!r}: {gone}"
    state.mkdir()
    made_again = (
        f"state dir {str(state)!r}: removed and made again while the server ran (its logs and lock went with "
        "the old one); events are refused until the server is restarted"
    )
    assert await store.unready() == made_again
    with pytest.raises(StoreError, match=r"is in use by another server"):
        claim(state)  # the server took the new directory's lock: no second server starts on it
    with pytest.raises(StoreError) as live:
        await grep(store, "s", "c2")  # in memory: its write is refused
    assert str(live.value) == f"{made_again}; the event was not recorded"
    with pytest.raises(StoreError) as restored:
        await grep(store, "t", "c1")  # restored from the new directory: refused before
    assert str(restored.value) == made_again
    assert list(state.iterdir()) == [state / "serve.lock"]
    store.release()
    store.release()  # twice is harmless
    claim(state)
    store.close()


async def test_sessions_share_the_configs_rules_and_still_count_apart(tmp_path: Path) -> None:
    """Every session's guard holds the same ``loops`` (its compiled rules
    follow from the config) and its own ``rescue``; each session counts
    its own repeats."""
    config = parse_config({"loops": {}, "rescue": {"ask_command": "true"}})
    store = FileSessionStore(tmp_path / "state", config)
    policies = [{p.name: p for p in store.new_guard().policies} for _ in range(2)]
    assert policies[0]["loops"] is policies[1]["loops"]
    assert policies[0]["rescue"] is not policies[1]["rescue"]

    answers: dict[str, list[bool | None]] = {"a": [], "b": []}
    for n in range(3):
        for session_id in answers:
            async with store.use(session_id) as session:
                call = ToolCallIn(agent="main", call_id=f"c{n}", tool="Bash", args={"command": "cat notes.txt"})
                answers[session_id].append(allowed := (await apply_event(session, call)).allowed)
                if allowed:
                    await apply_event(session, ToolResultIn(agent="main", call_id=f"c{n}", content="same notes"))
    assert answers == {"a": [True, True, False], "b": [True, True, False]}
    store.close()
