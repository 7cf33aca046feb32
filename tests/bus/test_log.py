"""The session log writer: exact lines, file safety, and never losing an event."""

from __future__ import annotations

import datetime
import errno
import fcntl
import math
import os
import stat
import subprocess
import sys
import threading
from itertools import accumulate
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from bus import (
    MAX_NESTING,
    Agent,
    AgentStatus,
    Bus,
    ContextMessage,
    ContextSource,
    LogInUseError,
    LogWriteError,
    NotRegularFileError,
    SessionLog,
    ToolCall,
    ToolResult,
    UserMessage,
    read_log,
)
from bus._codec import too_deep
from bus.testing import FakeClock


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def test_header_line_is_exactly_the_documented_form(log_path: Path) -> None:
    SessionLog(log_path, session="s1", clock=FakeClock(1764489600.0)).close()
    assert log_path.read_bytes() == b'{"type":"session/start","v":1,"session":"s1","ts":1764489600.0}\n'


def test_session_id_defaults_to_a_fresh_unique_id(tmp_path: Path) -> None:
    first = SessionLog(tmp_path / "a.jsonl")
    second = SessionLog(tmp_path / "b.jsonl")
    first.close()
    second.close()
    assert first.session != second.session
    assert len(first.session) == 32
    with read_log(tmp_path / "a.jsonl") as reader:
        assert reader.report.session == first.session


@pytest.mark.anyio
async def test_events_are_written_one_line_each_in_the_documented_form(log_path: Path) -> None:
    clock = FakeClock(1764489600.0)
    bus = Bus(clock=clock)
    log = SessionLog(log_path, session="s1", clock=clock).attach(bus)
    main = Agent("main")
    clock.now = 1764489600.1
    await bus.publish(AgentStatus(agent=main, status="started"))
    clock.now = 1764489600.2
    await bus.publish(UserMessage(agent=main, text="find the config loader"))
    clock.now = 1764489601.0
    call = ToolCall(agent=main, call_id="c1", step=1, tool="grep", args={"pattern": "load_config"})
    await bus.decide(call)
    clock.now = 1764489601.2
    await bus.publish(ToolResult.answering(call, "src/cfg.py:12"))
    clock.now = 1764489601.3
    source = ContextSource(plugin="repeat-tool-reminder", summary="grep × 3")
    await bus.publish(ContextMessage(agent=main, call_id="c1", source=source, text="note"))
    log.close()
    assert _lines(log_path) == [
        b'{"type":"session/start","v":1,"session":"s1","ts":1764489600.0}',
        b'{"type":"agent/status","seq":1,"ts":1764489600.1,"agent":"main","status":"started","parent":null,'
        b'"reason":null}',
        b'{"type":"user/message","seq":2,"ts":1764489600.2,"agent":"main","text":"find the config loader"}',
        b'{"type":"tool/call","seq":3,"ts":1764489601.0,"agent":"main","call_id":"c1","step":1,"tool":"grep",'
        b'"args":{"pattern":"load_config"}}',
        b'{"type":"tool/result","seq":4,"ts":1764489601.2,"agent":"main","call_id":"c1","step":1,"tool":"grep",'
        b'"args":{"pattern":"load_config"},"content":"src/cfg.py:12","is_error":false,"denied_by":null}',
        b'{"type":"context/message","seq":5,"ts":1764489601.3,"agent":"main","call_id":"c1",'
        b'"source":{"kind":"plugin","plugin":"repeat-tool-reminder","form":"notice","summary":"grep \xc3\x97 3"},'
        b'"text":"note"}',
    ]


@pytest.mark.anyio
async def test_each_event_is_on_disk_as_soon_as_publish_returns(bus: Bus, log_path: Path, agent: Agent) -> None:
    log = SessionLog(log_path).attach(bus)
    for i in range(1, 4):
        await bus.publish(UserMessage(agent=agent, text=f"m{i}"))
        assert len(_lines(log_path)) == 1 + i  # read through a separate file handle, before close
    log.close()


def test_event_without_an_agent_is_written_as_null(log_path: Path) -> None:
    with SessionLog(log_path, session="s") as log:
        log.write(ToolCall(agent=None, call_id="c", step=1, tool="t"))
    assert b'"agent":null' in _lines(log_path)[1]


def test_log_file_is_private_to_its_owner(log_path: Path, zero_umask: None) -> None:
    SessionLog(log_path).close()
    assert stat.S_IMODE(log_path.stat().st_mode) == 0o600


def test_existing_log_is_never_overwritten(log_path: Path) -> None:
    log_path.write_bytes(b"precious\n")
    with pytest.raises(FileExistsError, match="already exists; pass append=True") as info:
        SessionLog(log_path)
    assert str(log_path) in str(info.value)
    assert log_path.read_bytes() == b"precious\n"


def test_a_new_log_onto_what_is_no_file_says_what_is_there(tmp_path: Path) -> None:
    with pytest.raises(NotRegularFileError, match="is a directory, not a regular file"):
        SessionLog(tmp_path)  # not "pass append=True", which would not help
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotRegularFileError, match="is a FIFO"):
        SessionLog(tmp_path / "fifo")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(NotRegularFileError, match="is a symbolic link; it is not written through unless asked to"):
        SessionLog(tmp_path / "link.jsonl")
    (tmp_path / "elsewhere.jsonl").write_bytes(b"precious\n")
    with pytest.raises(FileExistsError, match="already exists; pass append=True"):
        SessionLog(tmp_path / "link.jsonl", follow_symlinks=True)
    locked = tmp_path / "locked.jsonl"
    locked.write_bytes(b"")
    locked.chmod(0)
    with pytest.raises(FileExistsError, match="already exists; pass append=True"):
        SessionLog(locked)
    assert (tmp_path / "elsewhere.jsonl").read_bytes() == b"precious\n"


def test_missing_directory_is_an_error_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "no-such-dir" / "s.jsonl"
    with pytest.raises(FileNotFoundError) as info:
        SessionLog(path)
    assert str(path) in str(info.value)


def test_append_continues_a_log_with_a_resume_header_the_reader_accepts(log_path: Path) -> None:
    clock = FakeClock(100.0)
    with SessionLog(log_path, session="first", clock=clock) as log:
        log.write(UserMessage(agent=Agent("a"), seq=1, ts=100.5, text="before"))
    clock.advance(60)
    with SessionLog(log_path, session="second", clock=clock, append=True) as log:
        log.write(UserMessage(agent=Agent("a"), seq=1, ts=160.5, text="after"))
    lines = _lines(log_path)
    assert lines[2] == b'{"type":"session/start","v":1,"session":"second","ts":160.0}'
    reader = read_log(log_path)
    assert [e.text for e in reader if isinstance(e, UserMessage)] == ["before", "after"]
    assert reader.report.skipped == 0
    assert reader.report.events == 2
    assert reader.report.lines == 4
    assert reader.report.session == "first"


def test_append_after_a_crash_keeps_the_resume_header_off_the_torn_line(log_path: Path) -> None:
    with SessionLog(log_path, session="first") as log:
        log.write(UserMessage(agent=Agent("a"), seq=1, text="before"))
    with log_path.open("ab") as torn:
        torn.write(b'{"type":"user/message","seq":2,"ts":1.0,"agent":"a","te')  # killed mid-line
    with SessionLog(log_path, session="second", append=True) as log:
        log.write(UserMessage(agent=Agent("a"), seq=1, text="after"))
    reader = read_log(log_path)
    assert [e.text for e in reader if isinstance(e, UserMessage)] == ["before", "after"]
    assert [(s.line, s.reason) for s in reader.report.samples] == [(3, "invalid-json")]
    assert _lines(log_path)[3].startswith(b'{"type":"session/start","v":1,"session":"second",')


@pytest.mark.parametrize(
    ("first", "says"),
    [
        (b"my notes: do not lose me\n", "it is no session log"),
        (b'{"type":"session/start","v":2,"session":"s","ts":1.0}\n', "it has session log version 2"),
        (b'\xef\xbb\xbf{"type":"user/message","seq":1}\n', "it is no session log"),
    ],
)
def test_append_refuses_a_file_that_is_no_session_log_and_leaves_it_as_it_was(
    log_path: Path, first: bytes, says: str
) -> None:
    """Lines appended there could never be read back, and the file is
    someone else's."""
    log_path.write_bytes(first + b"more\n")
    with pytest.raises(ValueError, match=f"session log '{log_path}' cannot be continued: {says}"):
        SessionLog(log_path, append=True)
    assert log_path.read_bytes() == first + b"more\n"


def test_append_continues_a_log_that_opens_with_a_byte_order_mark(log_path: Path) -> None:
    log_path.write_bytes(b'\xef\xbb\xbf{"type":"session/start","v":1,"session":"s","ts":1.0}\n')
    with SessionLog(log_path, append=True) as log:
        log.write(UserMessage(agent=Agent("a"), seq=1, text="after"))
    assert [e.text for e in read_log(log_path) if isinstance(e, UserMessage)] == ["after"]


def test_a_log_can_go_to_a_device(zero_umask: None) -> None:
    with SessionLog("/dev/null", append=True, fsync=False) as log:
        log.write(UserMessage(agent=Agent("a"), text="discarded"))


def test_a_device_log_is_shared_by_two_writers_at_once() -> None:
    """``/dev/null`` keeps nothing to interleave: any number may write it."""
    with SessionLog(os.devnull, append=True) as first, SessionLog(os.devnull, append=True) as second:
        first.write(UserMessage(agent=Agent("a"), text="discarded"))
        second.write(UserMessage(agent=Agent("b"), text="discarded"))


_REPO = Path(__file__).resolve().parents[2]


def _in_use(path: Path) -> str:
    return (
        f"session log {str(path)!r} is open for writing already (by another process, or another"
        " SessionLog in this one); a log has one writer at a time"
    )


def test_a_second_writer_of_one_log_is_refused_while_the_first_has_it_open(log_path: Path) -> None:
    """Two writers' lines would interleave, and each seq that steps back
    would replay as a new run: the second is refused, with nothing written,
    no descriptor leaked, and the first writes on."""
    with SessionLog(log_path, session="first") as first:
        first.write(UserMessage(agent=Agent("a"), seq=1, text="one"))
        before = log_path.read_bytes()
        open_before = len(os.listdir("/proc/self/fd"))
        for _ in range(2):  # refused as often as it is tried
            with pytest.raises(LogInUseError) as info:
                SessionLog(log_path, session="second", append=True)
            assert str(info.value) == _in_use(log_path)
            assert isinstance(info.value, OSError)  # callers that handle OSError keep working
            assert info.value.errno == errno.EWOULDBLOCK
        assert len(os.listdir("/proc/self/fd")) == open_before
        assert log_path.read_bytes() == before
        first.write(UserMessage(agent=Agent("a"), seq=2, text="two"))
    with read_log(log_path) as reader:
        assert [e.text for e in reader if isinstance(e, UserMessage)] == ["one", "two"]
        assert (reader.report.session, reader.report.lines) == ("first", 3)


def test_a_log_closed_by_its_writer_can_be_continued_by_the_next(log_path: Path) -> None:
    first = SessionLog(log_path, session="first")
    with pytest.raises(LogInUseError):
        SessionLog(log_path, append=True)
    first.write(UserMessage(agent=Agent("a"), seq=1, text="one"))
    first.close()
    with SessionLog(log_path, session="second", append=True) as second:
        second.write(UserMessage(agent=Agent("a"), seq=1, text="two"))
        with pytest.raises(LogInUseError):
            SessionLog(log_path, append=True)  # the next writer holds it now
    with SessionLog(log_path, session="third", append=True) as third:
        third.write(UserMessage(agent=Agent("a"), seq=1, text="three"))
    assert [e.text for e in read_log(log_path) if isinstance(e, UserMessage)] == ["one", "two", "three"]


def test_a_log_another_process_writes_is_refused_until_that_process_closes_it(log_path: Path) -> None:
    SessionLog(log_path, session="first").close()
    holder = (
        "import sys\n"
        "from bus import SessionLog\n"
        "with SessionLog(sys.argv[1], session='holder', append=True):\n"
        "    print('open', flush=True)\n"
        "    sys.stdin.readline()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", holder, str(log_path)],
        cwd=_REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdin is not None
            assert child.stdout.readline() == "open\n"
            before = log_path.read_bytes()
            with pytest.raises(LogInUseError, match="is open for writing already"):
                SessionLog(log_path, session="refused", append=True)
            assert log_path.read_bytes() == before
            child.stdin.close()  # the holder closes its log and exits
            assert child.wait(timeout=60) == 0
        finally:
            if child.poll() is None:
                child.kill()
    SessionLog(log_path, session="next", append=True).close()
    headers = [msgspec.json.decode(line)["session"] for line in _lines(log_path)]
    assert headers == ["first", "holder", "next"]


def test_a_process_cannot_write_a_log_this_one_has_open(log_path: Path) -> None:
    refused = (
        "import errno, sys\n"
        "from bus import LogInUseError, SessionLog\n"
        "try:\n"
        "    SessionLog(sys.argv[1], append=True)\n"
        "except LogInUseError as exc:\n"
        "    print(exc.errno == errno.EWOULDBLOCK, exc)\n"
    )
    with SessionLog(log_path, session="s") as log:
        done = subprocess.run(
            [sys.executable, "-c", refused, str(log_path)], cwd=_REPO, capture_output=True, text=True, timeout=60
        )
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout == f"True {_in_use(log_path)}\n"
        log.write(UserMessage(agent=Agent("a"), seq=1, text="mine"))
    with read_log(log_path) as reader:
        assert [e.text for e in reader if isinstance(e, UserMessage)] == ["mine"]
        assert reader.report.lines == 2


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL])
def test_a_log_on_a_file_system_without_locks_is_written_unlocked(
    log_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """NFS without a lock daemon, some FUSE file systems: no lock to take,
    and no reason to refuse the log."""

    def unsupported(fd: int, operation: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(fcntl, "flock", unsupported)
    with SessionLog(log_path, session="first") as first, SessionLog(log_path, append=True) as second:
        first.write(UserMessage(agent=Agent("a"), seq=1, text="one"))
        second.write(UserMessage(agent=Agent("a"), seq=1, text="two"))
    assert [e.text for e in read_log(log_path) if isinstance(e, UserMessage)] == ["one", "two"]


def test_a_lock_that_fails_otherwise_raises_and_leaks_no_descriptor(
    log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    SessionLog(log_path).close()
    before = log_path.read_bytes()

    def failing(fd: int, operation: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(fcntl, "flock", failing)
    open_before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError, match="Input/output error"):
        SessionLog(log_path, append=True)
    assert len(os.listdir("/proc/self/fd")) == open_before
    assert log_path.read_bytes() == before


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux /dev/full and /proc")
def test_a_full_disk_at_open_raises_and_leaks_no_descriptor() -> None:
    open_before = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        with pytest.raises(OSError, match="No space left on device"):
            SessionLog("/dev/full", append=True)
    assert len(os.listdir("/proc/self/fd")) == open_before


def test_append_to_a_missing_file_creates_it_privately(log_path: Path, zero_umask: None) -> None:
    SessionLog(log_path, session="s", append=True).close()
    assert stat.S_IMODE(log_path.stat().st_mode) == 0o600
    with read_log(log_path) as reader:
        assert reader.report.session == "s"


def test_fsync_forces_every_line_to_disk(log_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    with SessionLog(log_path, fsync=True) as log:
        log.write(UserMessage(agent=Agent("a"), text="x"))
        log.write(UserMessage(agent=Agent("a"), text="y"))
    assert len(synced) == 3  # header and both events, each synced as written
    assert len(_lines(log_path)) == 3
    synced.clear()
    with SessionLog(log_path, append=True) as log:
        log.write(UserMessage(agent=Agent("a"), text="z"))
    assert synced == []


def test_write_after_close_is_a_write_error_naming_the_path(log_path: Path) -> None:
    log = SessionLog(log_path)
    log.close()
    log.close()  # closing twice is harmless
    with pytest.raises(LogWriteError, match=r"event not written \(the log is closed\)$") as info:
        log.write(UserMessage(agent=Agent("a"), text="late"))
    assert str(log_path) in str(info.value)
    assert (info.value.errno, log.failures, log.error) == (errno.EBADF, 1, info.value)


@pytest.mark.parametrize(
    ("event", "named"),
    [
        (ToolCall(agent=None, call_id="c", step=None, tool="t", args={}), "at `$.step`"),  # type: ignore[arg-type]
        (ToolResult(agent=None, call_id="c", step=1, tool="t", content="x", is_error="yes"), "at `$.is_error`"),  # type: ignore[arg-type]
        (UserMessage(agent=None, text="x", ts=math.nan), "UserMessage.ts is nan"),
        (UserMessage(agent=None, text="x", seq=None), "seq must be an int, got None"),  # type: ignore[arg-type]
    ],
)
def test_an_event_written_directly_that_no_reader_could_read_is_refused(log_path: Path, event: Any, named: str) -> None:
    """What the bus refuses to publish, ``write`` and ``write_many`` refuse to
    write, naming the field: the line would be lost to every replay."""
    good = UserMessage(agent=None, text="kept", seq=1, ts=1.0)
    with SessionLog(log_path) as log:
        with pytest.raises(TypeError, match=named.replace("$", r"\$")):
            log.write(event)
        with pytest.raises(TypeError, match=named.replace("$", r"\$")):
            log.write_many([good, event])
        log.write(good)
    assert [e.text for e in read_log(log_path) if isinstance(e, UserMessage)] == ["kept"]


def test_an_event_written_directly_with_a_field_of_another_type_is_written_as_it_reads_back(log_path: Path) -> None:
    call = ToolCall(agent=None, call_id=7, step="2", tool="t", args={}, seq=1, ts=1.0)  # type: ignore[arg-type]
    with SessionLog(log_path) as log:
        log.write(call)
    assert (call.call_id, call.step) == ("7", 2), "the event in hand is the one a replay reads"
    (read,) = (e for e in read_log(log_path) if isinstance(e, ToolCall))
    assert (read.call_id, read.step) == ("7", 2)


def test_a_clock_that_gives_no_time_makes_no_log(log_path: Path) -> None:
    with pytest.raises(TypeError, match="the session log's clock returned nan: an event's ts must be a finite"):
        SessionLog(log_path, clock=lambda: math.nan)
    assert not log_path.exists()


@pytest.mark.anyio
async def test_a_log_closed_under_a_bus_is_reported_in_one_line_per_event(
    bus: Bus, log_path: Path, agent: Agent
) -> None:
    """A log closed while its bus still publishes (a ``GuardLink`` closed
    before the agent on it stopped) fails as a full disk does: the bus logs
    which log and why, with no traceback, and the publisher goes on."""
    log = SessionLog(log_path).attach(bus)
    log.close()
    with capture_logs() as logs:
        for text in ("one", "two"):
            await bus.publish(UserMessage(agent=agent, text=text))
    closed = f"session log {str(log_path)!r}: event not written (the log is closed)"
    assert [(e["event"], e["error"], "exc_info" in e) for e in logs] == [("recorder failed", closed, False)] * 2
    assert log.failures == 2


@pytest.mark.anyio
async def test_a_detached_log_records_no_more_of_the_bus(bus: Bus, log_path: Path, agent: Agent) -> None:
    log = SessionLog(log_path).attach(bus)
    await bus.publish(UserMessage(agent=agent, text="one"))
    log.detach(bus)
    await bus.publish(UserMessage(agent=agent, text="two"))
    with pytest.raises(ValueError, match="is not a recorder of this bus"):
        log.detach(bus)
    log.close()
    assert [e.text for e in read_log(log_path) if isinstance(e, UserMessage)] == ["one"]


class _Opaque:
    def __repr__(self) -> str:
        return "<opaque handle>"


class _ReprRaises:
    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")


def _recursive_list() -> list[Any]:
    items: list[Any] = [1]
    items.append(items)
    return items


def _deep(depth: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(depth):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


@pytest.mark.parametrize(
    ("value", "on_disk"),
    [
        pytest.param(b"\x00\xff", "AP8=", id="bytes-as-base64"),
        pytest.param((1, "two"), [1, "two"], id="tuple-as-array"),
        pytest.param({3}, [3], id="set-as-array"),
        pytest.param(frozenset({"a"}), ["a"], id="frozenset-as-array"),
        pytest.param({3, 1, 2}, [1, 2, 3], id="set-in-order"),
        pytest.param({1, "a", (0, "b")}, ["a", 1, [0, "b"]], id="set-whose-members-do-not-compare-by-json-text"),
        pytest.param(datetime.datetime(2025, 1, 2, 3, 4, 5), "2025-01-02T03:04:05", id="datetime-as-iso"),
        pytest.param(math.nan, None, id="nan-as-null"),
        pytest.param(math.inf, None, id="inf-as-null"),
        pytest.param(_Opaque(), "<_Opaque: <opaque handle>>", id="object-as-its-type-and-repr"),
        pytest.param(_ReprRaises(), "<_ReprRaises>", id="object-whose-repr-raises"),
        pytest.param(2**80, 2**80, id="big-int"),
        pytest.param(
            [10**5000, {7**6000: "k"}], [hex(10**5000), {hex(7**6000): "k"}], id="int-too-long-for-decimal-as-hex"
        ),
        pytest.param({(1, 2): "tuple key", 7: "int key"}, {"[1,2]": "tuple key", "7": "int key"}, id="non-str-keys"),
        pytest.param("bad \ud800 surrogate", "bad \\ud800 surrogate", id="lone-surrogate-escaped"),
        pytest.param(
            {"\udcff": ["\udcfe", 1.5, None, True]}, {"\\udcff": ["\\udcfe", 1.5, None, True]}, id="surrogates-at-depth"
        ),
        pytest.param(_recursive_list(), [1, "<recursive list>"], id="self-containing-list"),
        pytest.param(
            {"s\udc80": b"\x01", 5: datetime.date(2025, 1, 2), 1.5: _Opaque(), (1,): (2, 3)},
            {"s\\udc80": "AQ==", "5": "2025-01-02", "1.5": "<_Opaque: <opaque handle>>", "[1]": [2, 3]},
            id="surrogate-beside-other-non-json-values",
        ),
    ],
)
def test_non_json_args_never_lose_the_event(log_path: Path, value: Any, on_disk: Any) -> None:
    with SessionLog(log_path, session="s") as log:
        log.write(ToolCall(agent=Agent("a"), seq=1, ts=1.0, call_id="c1", step=1, tool="t", args=value))
        log.write(UserMessage(agent=Agent("a"), seq=2, ts=2.0, text="next"))
    reader = read_log(log_path)
    events = list(reader)
    assert reader.report.skipped == 0
    assert [e.seq for e in events] == [1, 2]
    call = events[0]
    assert isinstance(call, ToolCall)
    assert (call.call_id, call.tool) == ("c1", "t")
    assert call.args == on_disk


def test_surrogates_in_every_text_field_are_escaped_not_dropped(log_path: Path) -> None:
    source = ContextSource(plugin="p\ud800", summary="s\udcff")
    event = ContextMessage(agent=Agent("a\ud801"), seq=1, ts=1.0, call_id="c\ud802", source=source, text="t\ud803")
    with SessionLog(log_path, session="s\ud804") as log:
        log.write(event)
    reader = read_log(log_path)
    [decoded] = list(reader)
    assert isinstance(decoded, ContextMessage)
    assert reader.report.session == "s\\ud804"
    assert decoded.agent is not None
    assert decoded.agent.id == "a\\ud801"
    assert (decoded.call_id, decoded.text) == ("c\\ud802", "t\\ud803")
    assert decoded.source == ContextSource(plugin="p\\ud800", summary="s\\udcff")


def test_nesting_deeper_than_the_encoder_allows_is_cut_with_a_marker(log_path: Path) -> None:
    with SessionLog(log_path) as log:
        log.write(ToolCall(agent=Agent("a"), seq=1, call_id="c", step=1, tool="t", args=_deep(5000)))
    [call] = list(read_log(log_path))
    assert isinstance(call, ToolCall)
    depth, node = 0, call.args
    while isinstance(node, list):
        depth += 1
        node = node[0]
    assert isinstance(node, str)
    assert node.startswith("<list nested deeper than")
    assert depth == MAX_NESTING - 1  # the event object is the first level


def test_an_unencodable_object_deep_in_a_bad_value_still_gets_its_stand_in(log_path: Path) -> None:
    class SurrogateRepr:
        def __repr__(self) -> str:
            return "obj\udc80"

    with SessionLog(log_path) as log:
        log.write(ToolCall(agent=Agent("a"), seq=1, call_id="c", step=1, tool="t", args=[SurrogateRepr()]))
    [call] = list(read_log(log_path))
    assert isinstance(call, ToolCall)
    [stand_in] = call.args
    assert stand_in.startswith("<test_an_unencodable_object")
    assert stand_in.endswith(".SurrogateRepr: obj\\udc80>")


def test_a_value_that_raises_on_being_looked_at_stands_as_its_type(log_path: Path) -> None:
    import weakref

    class Gone:
        pass

    target = Gone()
    dead = weakref.proxy(target)
    del target
    with SessionLog(log_path) as log:
        log.write(ToolCall(agent=Agent("a"), seq=1, call_id="c", step=1, tool="read", args={"f": dead}))
    assert log.failures == 0
    [call] = list(read_log(log_path))
    assert isinstance(call, ToolCall)
    assert call.args == {"f": "<ProxyType>"}, "the event written whole, the value by its type"


def test_ten_megabyte_argument_is_written_whole(log_path: Path) -> None:
    payload = "x" * (10 * 1024 * 1024 - 7) + "\u00e9tude"
    with SessionLog(log_path) as log:
        log.write(ToolCall(agent=Agent("a"), seq=1, call_id="c", step=1, tool="write", args={"content": payload}))
        log.write(UserMessage(agent=Agent("a"), seq=2, text="after"))
    events = list(read_log(log_path))
    assert isinstance(events[0], ToolCall)
    assert events[0].args == {"content": payload}
    assert isinstance(events[1], UserMessage)
    assert events[1].text == "after"


def test_written_lines_are_plain_msgspec_json(log_path: Path) -> None:
    with SessionLog(log_path) as log:
        log.write(UserMessage(agent=Agent("a"), seq=1, ts=2.5, text="é"))
    decoded = [msgspec.json.decode(line) for line in _lines(log_path)]
    assert decoded[1] == {"type": "user/message", "seq": 1, "ts": 2.5, "agent": "a", "text": "é"}


def test_a_session_continued_without_a_resume_mark_keeps_its_one_header(log_path: Path) -> None:
    with SessionLog(log_path, session="s", append=True, mark_resume=False) as log:
        log.write(UserMessage(agent=Agent("a"), seq=1, text="first process"))
    with log_path.open("ab") as torn:
        torn.write(b'{"type":"user/message","seq":2')  # the next process was killed mid-line
    with SessionLog(log_path, session="s", append=True, mark_resume=False) as log:
        log.write(UserMessage(agent=Agent("a"), seq=2, text="third process"))
    lines = _lines(log_path)
    assert [line.startswith(b'{"type":"session/start"') for line in lines] == [True, False, False, False]
    assert [e.text for e in read_log(log_path) if isinstance(e, UserMessage)] == ["first process", "third process"]


def _nested(depth: int) -> list[Any]:
    node: list[Any] = []
    for _ in range(depth):
        node = [node]
    return node


@pytest.mark.parametrize(
    "odd",
    [
        pytest.param(None, id="plain"),
        pytest.param("bad \ud800 surrogate", id="lone-surrogate"),
        pytest.param(_nested(150), id="nested-too-deep"),
        pytest.param("[{" * 120, id="brackets-in-a-string"),
        pytest.param(object(), id="not-json"),
    ],
)
def test_a_batch_is_written_as_its_events_one_by_one_are(tmp_path: Path, odd: Any) -> None:
    agent = Agent("main")
    events = [
        ToolCall(agent=agent, seq=n, ts=float(n), call_id=f"c{n}", step=n, tool="grep", args={"q": n})
        for n in range(1, 50)
    ]
    if odd is not None:  # one event that needs a stand-in, or a closer look, amid plain ones
        events[12] = msgspec.structs.replace(events[12], args={"odd": odd})
    with SessionLog(tmp_path / "one.jsonl", session="s", clock=lambda: 1.0) as log:
        for event in events:
            log.write(event)
    with SessionLog(tmp_path / "many.jsonl", session="s", clock=lambda: 1.0) as log:
        log.write_many(events[:10])
        log.write_many(iter(events[10:]))
        log.close()
        with pytest.raises(LogWriteError, match="is closed"):
            log.write_many(events)
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "many.jsonl").read_bytes()


@given(st.text(alphabet="[]{}ab ", max_size=300), st.integers(min_value=0, max_value=40), st.booleans())
def test_nesting_is_told_from_the_brackets_however_many_there_are(text: str, limit: int, long: bool) -> None:
    depth = max(accumulate({"[": 1, "{": 1, "]": -1, "}": -1}[c] for c in text if c in "[]{}"), default=0)
    padding = " " * 10_000 if long else ""  # a long line is counted another way
    assert too_deep((text + padding).encode(), limit) == (depth > limit)


@pytest.mark.parametrize("path", ["", "a\x00b"])
def test_a_path_that_names_no_file_is_refused_naming_it(path: str) -> None:
    with pytest.raises(ValueError, match=r"session log path .*: must be a file name, without NUL"):
        SessionLog(path)


@pytest.mark.parametrize("session", [12345, ["s"], b"s"])
def test_a_session_id_that_is_no_str_is_refused_before_a_file_is_made(session: object, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"session log session id .*: must be a str, not "):
        SessionLog(tmp_path / "s.jsonl", session=session)  # type: ignore[arg-type]
    assert not (tmp_path / "s.jsonl").exists()


def test_threads_sharing_a_log_write_whole_lines_and_lose_none(log_path: Path) -> None:
    """Two runtime threads (pydantic-ai's ``run_sync`` from a thread pool)
    publishing into one bus write through one log: every line lands whole."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        with SessionLog(log_path, session="s") as log:

            def write(name: str) -> None:
                agent = Agent(name)
                for n in range(3000):
                    log.write(ToolCall(agent=agent, call_id=f"{name}-{n}", step=n, tool="read", args={"i": n}))

            threads = [threading.Thread(target=write, args=(name,)) for name in ("a", "b")]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        sys.setswitchinterval(interval)
    lines = log_path.read_bytes().splitlines()[1:]
    calls = [msgspec.json.decode(line) for line in lines]
    assert len(calls) == 6000
    assert {(c["agent"], c["step"]) for c in calls} == {(agent, n) for agent in "ab" for n in range(3000)}
