"""Writes that fail: a full disk or a file-size limit never leaves half a
line that swallows the next event; the writer raises, the bus logs it, the
hook exits 1 with one line. Files the project creates are 0600 and logs are
not written through symbolic links unless asked.

The disk is real: a small tmpfs mounted for the test where the system
allows it (root), and a real file size limit (``RLIMIT_FSIZE``) everywhere.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
import structlog

from bus import Agent, Bus, LogReader, LogWriteError, NotRegularFileError, SessionLog, ToolCall, UserMessage
from guard.policies.trips import Trip, TripLog
from tests.faults.conftest import CLI


def _call(n: int, size: int) -> ToolCall:
    return ToolCall(agent=Agent("a"), seq=n, call_id=f"c{n}", step=n, tool="t", args={"x": "y" * size})


def _fill(log: SessionLog, count: int) -> list[str]:
    """Write ``count`` calls of growing sizes; the ids of those written."""
    landed = []
    for n in range(count):
        try:
            log.write(_call(n, (n * 37) % 700))
        except LogWriteError:
            continue
        landed.append(f"c{n}")
    return landed


def _trip(tool: str = "t") -> Trip:
    return Trip(
        ts=1.0, kind="deny", agent=None, tool=tool, call_id="c", signature="s", count=5, epoch=0,
        trigger="repeat", redundant=0, rescues_used=0,
    )  # fmt: skip


_PROMPT = json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}).encode()


def _read(path: Path) -> tuple[list[str], dict[str, int]]:
    reader = LogReader(path)
    ids = [e.call_id for e in reader if isinstance(e, ToolCall)]
    return ids, dict(reader.report.skipped_by_reason)


def test_a_full_disk_loses_only_the_events_that_did_not_fit(small_disk: Path) -> None:
    path = small_disk / "s.jsonl"
    with SessionLog(path) as log:
        landed = _fill(log, 400)
        assert 0 < len(landed) < 400
        assert log.failures == 400 - len(landed)
    assert _read(path) == (landed, {})


@pytest.mark.parametrize("repair", ["cut", "newline"])
@pytest.mark.parametrize("limit", [1000, 5_000, 20_011])
def test_a_file_size_limit_never_glues_two_events(
    repair: str, limit: int, tmp_path: Path, file_size_limit: Callable[[int], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(fd: int, length: int) -> None:
        raise OSError(30, "Read-only file system")

    if repair == "newline":
        monkeypatch.setattr(os, "ftruncate", refuse)  # the fragment stays: the next line must still stand alone
    path = tmp_path / "s.jsonl"
    landed = []
    with SessionLog(path) as log:
        file_size_limit(limit)
        for n in range(200):
            try:
                log.write(_call(n, (n * 37) % 700))
            except LogWriteError:
                limit += 1500  # room for a line or two more, then full again
                file_size_limit(limit)
                continue
            landed.append(f"c{n}")
        file_size_limit(1 << 40)
    monkeypatch.undo()
    assert 20 < len(landed) < 180
    ids, skipped = _read(path)
    assert ids == landed, "every event the writer accepted is there, none merged"
    assert set(skipped) <= ({"invalid-json"} if repair == "newline" else set())


def test_the_bus_carries_on_and_logs_a_write_failure(small_disk: Path) -> None:
    path = small_disk / "s.jsonl"

    async def publish() -> None:
        bus = Bus()
        log = SessionLog(path).attach(bus)
        for n in range(300):
            await bus.publish(_call(n, 500))
        log.close()
        assert log.failures > 0

    with structlog.testing.capture_logs() as events:
        anyio.run(publish)
    failures = [e for e in events if e["event"] == "recorder failed"]
    assert "exc_info" not in failures[0]
    assert failures[0]["error"].endswith(": event not written (No space left on device)")
    assert failures
    assert all(e["log_level"] == "error" for e in failures)
    ids, skipped = _read(path)
    assert skipped == {}
    assert ids == [f"c{n}" for n in range(len(ids))]


_OUT_OF_MEMORY = """
import resource, sys
import anyio
from bus import Agent, Bus, LogWriteError, SessionLog, ToolCall

def call(n, value):
    return ToolCall(agent=Agent("a"), call_id=f"c{n}", step=n, tool="t", args={"x": value})

async def main():
    bus = Bus()
    log = SessionLog(sys.argv[1]).attach(bus)
    await bus.publish(call(0, "small"))
    big = "y" * (64 << 20)
    size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (size + (24 << 20), resource.RLIM_INFINITY))
    with log.held():  # as the command hook records an answer's events
        await bus.publish(call(1, big))
        await bus.publish(call(2, "small"))
    try:
        log.write(call(3, big))
    except LogWriteError as exc:
        print("raised:", exc)
    log.write(call(4, "small"))
    print("failures:", log.failures, "error:", log.error)
    log.close()

anyio.run(main)
"""


def test_an_event_too_big_for_the_memory_left_is_counted_not_lost_silently(tmp_path: Path) -> None:
    """Under a memory limit (``ulimit -v``), an event whose line cannot be
    encoded is not written and is said to be: ``failures`` counts it and
    ``error`` names it, as for a full disk, so the command hook exits 1
    instead of answering as if it were recorded; the events around it land."""
    path = tmp_path / "s.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", _OUT_OF_MEMORY, str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "raised: session log" in done.stdout
    assert "event not written (out of memory)" in done.stdout
    assert "failures: 2 error: session log" in done.stdout
    ids, skipped = _read(path)
    assert ids == ["c0", "c2", "c4"]
    assert skipped == {}


_OUT_OF_MEMORY_GUARDED = """
import resource, sys
import anyio
from bus import Agent, Bus, SessionLog, ToolCall
from guard import Config, Guard, LoopsConfig

def call(n, value):
    return ToolCall(agent=Agent("a"), call_id=f"c{n}", step=n, tool="t", args={"x": value})

async def main():
    bus = Bus()
    Guard(Config(loops=LoopsConfig(enabled=True))).attach(bus)
    log = SessionLog(sys.argv[1]).attach(bus)
    await bus.decide(call(0, "small"))
    bigs = ["y" * (n << 20) for n in (6, 7, 8, 9)]
    size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (size + (int(sys.argv[2]) << 20), resource.RLIM_INFINITY))
    for n, big in enumerate(bigs, 1):
        print("decided", n, (await bus.decide(call(n, big))).allowed)
    try:
        log.write_many([call(10 + n, big) for n, big in enumerate(bigs)])
    except Exception as exc:
        print("write_many:", type(exc).__name__)
    print("decided 20", (await bus.decide(call(20, "small"))).allowed)
    log.close()

anyio.run(main)
"""


@pytest.mark.parametrize("headroom_mb", [2, 8])
def test_arguments_too_big_for_the_memory_left_never_crash_the_process(tmp_path: Path, headroom_mb: int) -> None:
    """msgspec's ``encode`` crashes the process when memory runs out as its
    buffer grows; the guard's fingerprint and the log's batches encode with
    ``encode_into``, which raises ``MemoryError``: the policy's failure is
    logged and the call allowed, the batch refused, and the agent goes on."""
    path = tmp_path / "s.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", _OUT_OF_MEMORY_GUARDED, str(path), str(headroom_mb)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    printed = done.stdout.splitlines()
    assert [line for line in printed if line.startswith("decided")] == [
        "decided 1 True",
        "decided 2 True",
        "decided 3 True",
        "decided 4 True",
        "decided 20 True",
    ]
    assert "write_many: LogWriteError" in printed
    assert "guard.policy_failed" in done.stdout + done.stderr
    ids, _ = _read(path)
    assert (ids[0], ids[-1]) == ("c0", "c20")


def test_import_onto_a_full_disk_is_one_line_and_leaves_a_readable_log(
    small_disk: Path, tmp_path: Path, cli: CLI
) -> None:
    source = tmp_path / "t.jsonl"
    lines = [{"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "s"}}]
    for n in range(300):
        call = {"type": "function_call", "name": "sh", "arguments": json.dumps({"c": "x" * 400}), "call_id": f"c{n}"}
        lines.append({"timestamp": "2026-01-01T00:00:01Z", "type": "response_item", "payload": call})
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = small_disk / "out.jsonl"
    assert "No space left on device" in cli("import", source, "-o", out).clean_error(2)
    ids, skipped = _read(out)
    assert skipped == {}
    assert ids == [f"c{n}" for n in range(len(ids))]


def test_a_full_trip_log_is_reported_and_never_torn(small_disk: Path) -> None:
    trips = TripLog(str(small_disk / "trips.jsonl"))
    trip = _trip("t" * 900)
    with structlog.testing.capture_logs() as events:
        for _ in range(100):
            trips.record(trip)
    assert any(e["event"] == "rescue.trip_log_failed" for e in events)
    lines = (small_disk / "trips.jsonl").read_bytes().splitlines(keepends=True)
    assert lines
    assert all(json.loads(line)["tool"] == "t" * 900 and line.endswith(b"\n") for line in lines)


# --- file modes and symbolic links ----------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_the_project_creates_are_private(tmp_path: Path, cli: CLI, zero_umask: None) -> None:
    state = tmp_path / "state"
    assert cli("hook", "--state-dir", state, stdin=_PROMPT).code == 0
    assert (_mode(state), _mode(state / "s.jsonl"), _mode(state / "s.lock")) == (0o700, 0o600, 0o600)
    html = tmp_path / "report.html"
    assert cli("audit", state / "s.jsonl", "--html", html).code == 0
    assert _mode(html) == 0o600
    assert cli("import", state / "s.jsonl", "-o", tmp_path / "copy.jsonl").code == 0
    assert _mode(tmp_path / "copy.jsonl") == 0o600
    trips = tmp_path / "trips" / "t.jsonl"
    TripLog(str(trips)).record(_trip())
    assert (_mode(trips.parent), _mode(trips)) == (0o700, 0o600)


def test_a_log_is_not_written_through_a_symbolic_link_unless_asked(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.jsonl"
    SessionLog(target, session="elsewhere").close()
    link = tmp_path / "s.jsonl"
    link.symlink_to(target)
    with pytest.raises(NotRegularFileError, match="is a symbolic link"):
        SessionLog(link, append=True)
    assert target.read_bytes().count(b"\n") == 1
    with SessionLog(link, append=True, follow_symlinks=True) as log:
        log.write(UserMessage(agent=Agent("a"), seq=1, text="asked for"))
    assert [e.text for e in LogReader(target) if isinstance(e, UserMessage)] == ["asked for"]


def test_the_hook_refuses_a_state_log_that_links_to_another_log(tmp_path: Path, cli: CLI) -> None:
    victim = tmp_path / "victim.jsonl"
    SessionLog(victim, session="victim").close()
    before = victim.read_bytes()
    state = tmp_path / "state"
    state.mkdir()
    (state / "s.jsonl").symlink_to(victim)
    line = cli("hook", "--state-dir", state, stdin=_PROMPT).clean_error(1)
    assert "is a symbolic link" in line
    assert victim.read_bytes() == before


def test_the_hook_sets_aside_a_state_log_that_links_to_something_else(tmp_path: Path, cli: CLI) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    state = tmp_path / "state"
    state.mkdir()
    (state / "s.jsonl").symlink_to(victim)
    assert cli("hook", "--state-dir", state, stdin=_PROMPT).code == 0
    assert victim.read_text() == "keep me\n"
    assert not (state / "s.jsonl").is_symlink()


def test_a_trip_log_that_is_a_symbolic_link_is_not_written(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "trips.jsonl").symlink_to(victim)
    with structlog.testing.capture_logs() as events:
        TripLog(str(tmp_path / "trips.jsonl")).record(_trip())
    assert victim.read_text() == "keep me\n"
    assert "rescue.trip_log_failed" in [e["event"] for e in events]


def test_a_trip_log_path_the_system_refuses_is_reported_not_raised(tmp_path: Path) -> None:
    with structlog.testing.capture_logs() as events:
        TripLog(str(tmp_path / "a\x00b")).record(_trip())  # the policy's action goes on regardless
    (failed,) = [e for e in events if e["event"] == "rescue.trip_log_failed"]
    assert "null byte" in failed["error"]


def test_a_trip_that_does_not_fit_at_all_is_reported(tmp_path: Path, file_size_limit: Callable[[int], None]) -> None:
    path = tmp_path / "trips.jsonl"
    trips = TripLog(str(path))
    trips.record(_trip())
    size = path.stat().st_size
    with structlog.testing.capture_logs() as events:
        file_size_limit(size)
        trips.record(_trip())
        file_size_limit(1 << 40)
    assert "rescue.trip_log_failed" in [e["event"] for e in events]
    assert path.stat().st_size == size
