"""The project's own session logs go through import and audit unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bus import ToolCall, read_log
from guard import Config
from guard.audit import audit
from guard.importers import TranscriptError, detect_format, open_sessions

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
GENTLE = SCENARIOS / "remind" / "gentle_then_detailed.jsonl"


def test_a_session_log_is_detected_and_streamed_as_recorded() -> None:
    assert detect_format(GENTLE) == "session-log"
    [session] = open_sessions(GENTLE)
    assert (session.format, session.session) == ("session-log", "remind-gentle_then_detailed")
    assert [type(e) for e in session.events()] == [type(e) for e in read_log(GENTLE)]


def test_bad_lines_of_a_session_log_are_counted_as_skipped(tmp_path: Path) -> None:
    log = tmp_path / "torn.jsonl"
    log.write_bytes(GENTLE.read_bytes() + b'{"type":"tool/call","seq":99,')
    [session] = open_sessions(log)
    calls = [e for e in session.events() if isinstance(e, ToolCall)]
    assert len(calls) == 10
    assert session.report.skipped == {"torn": 1}


def test_a_session_log_of_an_unknown_version_is_a_clear_error(tmp_path: Path) -> None:
    log = tmp_path / "v9.jsonl"
    log.write_text('{"type":"session/start","v":9,"session":"s","ts":0.0}\n')
    with pytest.raises(TranscriptError, match="version 9"):
        list(open_sessions(log))


def test_audit_reads_session_logs_beside_transcripts(tmp_path: Path) -> None:
    shutil.copy(GENTLE, tmp_path / "a.jsonl")
    report = audit([tmp_path], Config())
    [session] = report.sessions
    assert (session.format, session.calls, session.longest_run) == ("session-log", 10, 10)
    assert session.actions == {"remind:remind": 3}


def test_a_log_whose_reading_fails_part_way_keeps_what_was_read_and_is_read_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A disk error partway through a session log ends the session there:
    the events read before it are kept, and the file is not read again."""
    from collections.abc import Iterator

    from bus import LogReader

    reads: list[int] = []
    events = LogReader._events

    def failing_at_the_sixth(self: LogReader) -> Iterator[object]:
        reads.append(1)
        for n, event in enumerate(events(self), 1):
            if n == 6:
                raise OSError(5, "Input/output error")
            yield event

    monkeypatch.setattr(LogReader, "_events", failing_at_the_sixth)
    (session,) = open_sessions(GENTLE)
    assert [event.seq for event in session.events()] == [1, 2, 3, 4, 5]
    assert len(reads) == 1
    assert session.report.skipped == {"bad-record": 1, "stopped-early": 1}
    assert session.report.problems[-1].startswith("the import stopped at a failure outside any record")
