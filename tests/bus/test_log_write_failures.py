"""A session log write that fails part-way leaves no part of its line: the
fragment is cut off, or, when even that fails, ended before the next line,
so no event is ever glued to another. The limit is real (``RLIMIT_FSIZE``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bus import Agent, LogReader, LogWriteError, SessionLog, ToolCall

Limit = Callable[[int], None]


def _call(n: int, size: int = 300) -> ToolCall:
    return ToolCall(agent=Agent("a"), seq=n, call_id=f"c{n}", step=n, tool="t", args={"x": "y" * size})


def _ids(path: Path) -> tuple[list[str], dict[str, int]]:
    reader = LogReader(path)
    return [e.call_id for e in reader if isinstance(e, ToolCall)], dict(reader.report.skipped_by_reason)


def test_a_line_that_straddles_the_limit_is_taken_back(log_path: Path, file_size_limit: Limit) -> None:
    with SessionLog(log_path) as log:
        log.write(_call(1))
        file_size_limit(log_path.stat().st_size + 100)  # part of the next line fits
        with pytest.raises(LogWriteError, match=r"session log '.*': event not written \(File too large\)$") as info:
            log.write(_call(2))
        assert info.value.errno == 27
        file_size_limit(1 << 30)
        log.write(_call(3))
        assert (log.failures, log.error) == (1, info.value)
    assert _ids(log_path) == (["c1", "c3"], {})


@pytest.fixture
def uncut_fragment(
    log_path: Path, file_size_limit: Limit, monkeypatch: pytest.MonkeyPatch
) -> Callable[[SessionLog], None]:
    """Leaves ``c1``, then a fragment of ``c2`` the log cannot cut off (an
    append-only file, say), in the open log; the size limit stays."""

    def refuse(fd: int, length: int) -> None:
        raise OSError(1, "Operation not permitted")

    def leave(log: SessionLog) -> None:
        log.write(_call(1))
        monkeypatch.setattr(os, "ftruncate", refuse)
        file_size_limit(log_path.stat().st_size + 100)
        with pytest.raises(LogWriteError):
            log.write(_call(2))

    return leave


def test_when_the_fragment_cannot_be_cut_the_next_line_still_stands_alone(
    log_path: Path, file_size_limit: Limit, uncut_fragment: Callable[[SessionLog], None]
) -> None:
    with SessionLog(log_path) as log:
        uncut_fragment(log)
        with pytest.raises(LogWriteError):
            log.write(_call(3))  # not even the newline fits: still owed
        file_size_limit(1 << 30)
        log.write(_call(4))
    assert _ids(log_path) == (["c1", "c4"], {"invalid-json": 1})


def test_a_new_log_whose_header_does_not_fit_is_not_left_behind(log_path: Path, file_size_limit: Limit) -> None:
    file_size_limit(10)
    with pytest.raises(LogWriteError, match="File too large"):
        SessionLog(log_path)
    file_size_limit(1 << 30)
    assert not log_path.exists()
    SessionLog(log_path).close()  # so trying again just works


def test_a_batch_that_does_not_fit_leaves_none_of_its_lines(log_path: Path, file_size_limit: Limit) -> None:
    with SessionLog(log_path) as log:
        log.write_many([_call(1), _call(2)])
        file_size_limit(log_path.stat().st_size + 500)  # one line of the next batch fits, not three
        with pytest.raises(LogWriteError, match="File too large"):
            log.write_many([_call(3), _call(4), _call(5)])
        assert log.failures == 3
        file_size_limit(log_path.stat().st_size)  # not a byte of it fits
        with pytest.raises(LogWriteError, match="File too large"):
            log.write_many([_call(3)])
        assert log.failures == 4
        file_size_limit(1 << 30)
        log.write_many(iter([_call(6)]))
        log.write_many([])
    assert _ids(log_path) == (["c1", "c2", "c6"], {})


def test_a_batch_after_an_uncut_fragment_starts_on_a_line_of_its_own(
    log_path: Path, file_size_limit: Limit, uncut_fragment: Callable[[SessionLog], None]
) -> None:
    with SessionLog(log_path) as log:
        uncut_fragment(log)
        file_size_limit(1 << 30)
        log.write_many([_call(3), _call(4)])
        log.write(_call(5))
    assert _ids(log_path) == (["c1", "c3", "c4", "c5"], {"invalid-json": 1})


def test_a_batch_that_a_short_write_cut_is_finished(log_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real(fd, bytes(data)[:10]))
    with SessionLog(log_path, fsync=True) as log:
        log.write_many([_call(1), _call(2)])
    monkeypatch.setattr(os, "write", real)
    assert _ids(log_path) == (["c1", "c2"], {})


def _write_held(log: SessionLog, *numbers: int, fail: bool = False, close: bool = False) -> None:
    with log.held():
        for n in numbers:
            log.write(_call(n))
        if close:
            log.close()
        if fail:
            raise KeyError("the writer's own fault")


def test_held_lines_land_together_when_the_block_ends_or_not_at_all(log_path: Path, file_size_limit: Limit) -> None:
    with SessionLog(log_path) as log:
        with log.held():
            log.write(_call(1))
            log.write_many([_call(2)])
            assert _ids(log_path) == ([], {})  # nothing yet: a process killed here leaves none of them
        assert _ids(log_path)[0] == ["c1", "c2"]
        file_size_limit(log_path.stat().st_size + 500)  # one of the next three fits
        with pytest.raises(LogWriteError, match="File too large"):
            _write_held(log, 3, 4, 5)
        assert log.failures == 3
        file_size_limit(1 << 30)
        with pytest.raises(RuntimeError, match="already holding"), log.held(), log.held():
            pass
        with pytest.raises(KeyError):  # the writer failed: what it wrote still lands
            _write_held(log, 6, fail=True)
        with pytest.raises(LogWriteError, match="is closed"):  # closed before its lines could land
            _write_held(log, 7, close=True)
    assert _ids(log_path) == (["c1", "c2", "c6"], {})


class _Unprintable:
    """A value whose text needs more memory than there is."""

    def __repr__(self) -> str:
        raise MemoryError


def _needing_memory(n: int, *, surrogate: bool = False) -> ToolCall:
    args = {"a": "\ud800", "b": _Unprintable()} if surrogate else {"b": _Unprintable()}
    return ToolCall(agent=Agent("a"), seq=n, call_id=f"c{n}", step=n, tool="t", args=args)


@pytest.mark.parametrize("surrogate", [False, True], ids=["value", "value-beside-a-stand-in"])
def test_an_event_that_runs_out_of_memory_is_not_written_as_a_stand_in(log_path: Path, surrogate: bool) -> None:
    """Out of memory is no value to stand in for: the event is not written,
    counted, and said to be; a held block and a batch lose only their own."""
    with SessionLog(log_path) as log:
        log.write(_call(1))
        with pytest.raises(LogWriteError, match=r"event not written \(out of memory\)$"):
            log.write(_needing_memory(2, surrogate=surrogate))
        with log.held():
            log.write(_call(3))
            with pytest.raises(LogWriteError, match=r"out of memory"):
                log.write(_needing_memory(4, surrogate=surrogate))
        with pytest.raises(LogWriteError, match=r"out of memory"):
            log.write_many([_call(5), _needing_memory(6, surrogate=surrogate)])
        log.write(_call(7))
        assert log.failures == 4
    assert _ids(log_path) == (["c1", "c3", "c7"], {})


def test_arguments_kept_for_a_snapshot_do_not_hide_running_out_of_memory() -> None:
    from bus._codec import logged_args

    with pytest.raises(MemoryError):
        logged_args({"b": _Unprintable()})


@pytest.mark.parametrize("args", [{"b": _Unprintable()}, {"a": "\ud800", "b": _Unprintable()}])
def test_a_fingerprint_that_runs_out_of_memory_is_no_stand_in(args: dict[str, Any]) -> None:
    """Arguments the guard could not read for want of memory get no
    fingerprint of a placeholder, which would make unlike calls alike."""
    from guard import canonical_json

    with pytest.raises(MemoryError):
        canonical_json(args)


class _ModelOutOfMemory:
    """Shaped like a pydantic model whose dump needs more memory than there is."""

    def model_dump(self) -> dict[str, Any]:
        raise MemoryError


def test_a_model_that_runs_out_of_memory_dumping_itself_is_not_written(log_path: Path) -> None:
    with SessionLog(log_path) as log:
        call = ToolCall(agent=Agent("a"), seq=1, call_id="c1", step=1, tool="t", args={"m": _ModelOutOfMemory()})
        with pytest.raises(LogWriteError, match=r"out of memory"):
            log.write(call)
    assert _ids(log_path) == ([], {})


def test_lines_held_for_an_abandoned_event_are_discarded_whole(log_path: Path) -> None:
    with SessionLog(log_path) as log:
        log.discard_held()  # nothing held: nothing to drop
        log.write(_call(1))
        with log.held():
            log.write(_call(2))
            log.write(_call(3))
            log.discard_held()
            log.write(_call(4))
        assert log.failures == 0
    assert _ids(log_path) == (["c1", "c4"], {})
