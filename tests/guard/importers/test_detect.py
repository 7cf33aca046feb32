"""Format detection, clear errors for what cannot be imported, and the log writer."""

from __future__ import annotations

import codecs
import errno
import io
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import guard.importers._source
from bus import MAX_NESTING, Agent, AgentStatus, AnyEvent, LogReader, ToolCall, UserMessage, read_log
from guard.importers import (
    FORMATS,
    TranscriptError,
    UnknownFormatError,
    detect_format,
    open_sessions,
    write_log,
)
from guard.importers._session import ImportedSession, ImportReport, parse_time, text_of
from guard.importers._source import read_document, read_jsonl
from tests.guard.importers._transcripts import CORPUS, ClaudeCodeSession, calls, corpus_file, of, only, write_lines

EXPECTED = {
    "claude-code/a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl": "claude-code",
    "claude-code/agent-c8d9b115.jsonl": "claude-code",
    "codex/codex-pomodor-timer.jsonl": "codex",
    "gemini-cli/gemini-cli-pomodoro-timer.json": "gemini-cli",
    "gemini-cli/stream-json-two-runs.jsonl": "gemini-cli",
    "openhands/output.jsonl": "openhands",
    "openhands/basic.json": "openhands",
    "swe-agent/pydicom__pydicom-1458.traj": "swe-agent",
    "swe-agent/function_calling_simple.traj": "swe-agent",
    "mini-swe-agent/django__django-15563.traj.json": "mini-swe-agent",
    "opencode/session__jolly-eagle__ses_39b5d713cffeRgAoxPIwS3Plus.json": "opencode",
    "pi/large-session.jsonl": "pi",
}


@pytest.mark.parametrize(("relative", "format"), EXPECTED.items())
def test_every_corpus_file_is_detected(relative: str, format: str) -> None:
    assert detect_format(corpus_file(relative)) == format


def test_formats_are_tried_in_a_documented_order() -> None:
    assert list(FORMATS) == [
        "claude-code",
        "codex",
        "gemini-cli",
        "openhands",
        "swe-agent",
        "cline",
        "goose",
        "mini-swe-agent",
        "opencode",
        "pi",
        "session-log",
    ]


_AT = "2026-01-30T06:10:01.547Z"


@pytest.mark.parametrize(
    ("line", "format"),
    [
        ({"type": "init", "timestamp": _AT, "session_id": "s1", "model": "gemini-2.5-flash"}, "gemini-cli"),
        ({"type": "tool_use", "timestamp": _AT, "tool_name": "ls", "tool_id": "t1", "parameters": {}}, "gemini-cli"),
        ({"type": "tool_result", "timestamp": _AT, "tool_id": "t1", "status": "success", "output": ""}, "gemini-cli"),
        ({"type": "system", "subtype": "init", "session_id": "s1", "tools": []}, "claude-code"),
        ({"timestamp": _AT, "type": "session_meta", "payload": {"id": "r1"}}, "codex"),
        ({"type": "tool_use", "timestamp": 1, "sessionID": "ses_1", "part": {"type": "tool"}}, "opencode"),
        ({"type": "message", "id": "m1", "timestamp": _AT, "message": {"role": "user", "content": "hi"}}, "pi"),
        ({"type": "session/start", "v": 1, "session": "s1", "ts": 0.0}, "session-log"),
    ],
    ids=["gemini-init", "gemini-tool-use", "gemini-tool-result", "claude", "codex", "opencode-run", "pi", "log"],
)
def test_gemini_stream_json_is_told_apart_from_other_json_lines(
    tmp_path: Path, line: dict[str, Any], format: str
) -> None:
    """Gemini CLI's headless events (``--output-format stream-json``) are
    told by what names them: an ``init``'s ``session_id``, a call's
    ``tool_id``; other JSON Lines formats with the same ``type`` names
    (Claude Code's ``init`` is a ``system`` message, OpenCode's ``run``
    events hold a ``part``) stay theirs."""
    assert detect_format(write_lines(tmp_path / "out.jsonl", [line, {"type": "result", "status": "success"}])) == format


def test_a_document_of_bare_chat_messages_is_no_known_format(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    with pytest.raises(UnknownFormatError, match="mini-swe-agent: not a document with trajectory_format"):
        detect_format(path)


def test_unknown_format_names_every_format_tried(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "notes.jsonl", [{"hello": "world"}, {"n": 2}])
    with pytest.raises(UnknownFormatError) as caught:
        detect_format(path)
    assert [name for name, _ in caught.value.tried] == list(FORMATS)
    message = str(caught.value)
    assert "notes.jsonl" in message
    assert "is not a transcript format this tool knows" in message
    assert "codex: no line is a {type, payload} rollout item" in message


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "is empty"),
        ("\n\n", "is neither JSON Lines nor a JSON document"),
        ('{\n  "messages": [', "is neither JSON Lines nor a JSON document"),
        ("not json at all\n", "is neither JSON Lines nor a JSON document"),
        (
            "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1),
            f"nests arrays or objects deeper than {MAX_NESTING} levels",
        ),
    ],
)
def test_unreadable_content_is_a_clear_error(tmp_path: Path, content: str, reason: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TranscriptError, match=reason):
        detect_format(path)


def test_missing_file_and_directory_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="no such file"):
        list(open_sessions(tmp_path / "absent.jsonl"))
    with pytest.raises(TranscriptError, match="is a directory"):
        detect_format(tmp_path)


def test_an_unreadable_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "loop"
    path.symlink_to(path)
    with pytest.raises(TranscriptError, match="cannot read"):
        detect_format(path)


def test_a_pretty_printed_document_after_blank_lines_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "run.traj"
    path.write_text("\n" + json.dumps({"history": [{"role": "user", "content": "go"}]}, indent=2))
    assert detect_format(path) == "swe-agent"


def test_a_forced_format_is_checked(tmp_path: Path) -> None:
    transcript = ClaudeCodeSession("s")
    transcript.prompt("x")
    session = transcript.write(tmp_path / "s.jsonl")
    with pytest.raises(TranscriptError, match=r"is not codex: no line is a \{type, payload\} rollout item"):
        open_sessions(session, "codex")
    with pytest.raises(TranscriptError, match="unknown format 'cursor' \\(known: claude-code, codex"):
        open_sessions(session, "cursor")


def test_a_forced_format_that_matches_imports(tmp_path: Path) -> None:
    s = ClaudeCodeSession("s")
    s.prompt("hi")
    path = s.write(tmp_path / "s.jsonl")
    (session,) = open_sessions(path, "claude-code")
    assert session.format == "claude-code"


def test_writer_numbers_events_and_stamps_the_header_with_the_first_event(tmp_path: Path) -> None:
    s = ClaudeCodeSession("w1")
    s.prompt("go")
    s.call("Bash", {"command": "ls"}, "a")
    (session,) = open_sessions(s.write(tmp_path / "w1.jsonl", torn="{"))
    out = tmp_path / "w1.log.jsonl"
    summary = write_log(session, out)
    assert (summary.events, summary.calls, summary.agents, summary.skipped) == (4, 1, 1, {"torn": 1})
    lines = out.read_bytes().splitlines()
    assert json.loads(lines[0]) == {"type": "session/start", "v": 1, "session": "w1", "ts": 1767225600.0}
    assert json.loads(lines[1]) == {
        "type": "agent/status",
        "seq": 1,
        "ts": 1767225600.0,
        "agent": "main",
        "status": "started",
        "parent": None,
        "reason": None,
    }
    events = list(read_log(out))
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert type(events[0]) is AgentStatus
    assert type(events[2]) is ToolCall
    with pytest.raises(FileExistsError):
        write_log(session, out)


def test_writer_of_an_empty_session_writes_only_the_header(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(json.dumps({"sessionId": "e", "projectHash": "h"}) + "\n")
    (session,) = open_sessions(path)
    summary = write_log(session, tmp_path / "out.jsonl")
    assert (summary.events, summary.calls) == (0, 0)
    assert json.loads((tmp_path / "out.jsonl").read_text())["ts"] == 0.0


def test_a_lone_surrogate_escape_is_read_as_the_log_writes_it_not_skipped(tmp_path: Path) -> None:
    from bus import UserMessage

    path = tmp_path / "s.jsonl"
    line = '{"type": "user", "sessionId": "s", "message": {"content": "cut mid-emoji \\ud83d"}}\n'
    path.write_text(line * 2 + '{"type": "user", "sessionId": "s", "message": {"content": NaN}}\n')
    (session,) = open_sessions(path)
    texts = [e.text for e in session.events() if isinstance(e, UserMessage)]
    assert texts == ["cut mid-emoji \\ud83d"] * 2, "as JavaScript writes a string cut mid-character"
    assert session.report.skipped == {"invalid-json": 1}, "NaN is no JSON still"


def test_non_object_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"type": "user", "sessionId": "s", "message": {"content": "hi"}}\n[1, 2]\n\n{bad\n')
    (session,) = open_sessions(path)
    list(session.events())
    assert session.report.skipped == {"not-an-object": 1, "invalid-json": 1}
    assert session.report.summary() == "2 skipped (invalid-json 1, not-an-object 1)"
    assert ImportReport().summary() == "nothing skipped"


def test_helpers_tolerate_odd_values() -> None:
    assert parse_time(True) is None
    assert parse_time("yesterday") is None
    assert parse_time(None) is None
    assert parse_time(12) == 12.0
    assert parse_time(10**400) is None  # a timestamp no float holds
    assert parse_time(float("nan")) is None
    assert parse_time(float("inf")) is None
    assert text_of(None) == ""
    assert text_of({"a": 1}) == '{"a":1}'
    assert text_of(["a", {"content": "b"}, 3]) == "a\nb\n3"


def test_the_real_transcripts_ship_with_the_repository() -> None:
    """Every format's real transcript is in the checkout, so a clone runs
    these tests in full, with nothing beside it."""
    root = Path(__file__).resolve().parents[3]
    assert root / "tests" / "data" / "transcripts" == CORPUS
    listed = (CORPUS / "DATA.md").read_text(encoding="utf-8")
    shipped = [p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file()]
    unlisted = [p for p in shipped if p not in ("DATA.md", "trim.py") and f"`{p}`" not in listed]
    assert unlisted == [], "every shipped transcript names its source and licence in DATA.md"


def test_writer_keeps_what_an_importer_made_before_it_failed(tmp_path: Path) -> None:
    class Failing(ImportedSession):
        def events(self) -> Iterator[AnyEvent]:
            agent = Agent("main")
            for n in range(300):
                yield UserMessage(agent=agent, ts=float(n), text=f"m{n}")
            raise TranscriptError("the transcript ends in the middle of a record")

    session = Failing(format="test", session="s", path=tmp_path / "t", label="t", produce=lambda builder: iter(()))
    out = tmp_path / "out.jsonl"
    with pytest.raises(TranscriptError, match="in the middle"):
        write_log(session, out)
    reader = LogReader(out)
    assert [e.seq for e in reader] == list(range(1, 301))
    assert reader.report.skipped == 0


_RECORD = b'{"type":"user","sessionId":"s","message":{"content":"hi"}}'
_jsonl_lines = st.lists(
    st.one_of(
        st.sampled_from(
            [
                _RECORD,
                b"",
                b"  ",
                b"\r",
                b"[1, 2]",
                b"7",
                b"{bad",
                _RECORD + _RECORD,  # two objects on one line
                _RECORD + b" [1]",
                _RECORD[:20] + b"\n" + _RECORD[20:],  # one object over two lines
                b'{"a":' + b"[" * 120 + b"]" * 120 + b"}",  # too deep
                b'{"a":"' + b"[{" * 80 + b'"}',  # brackets in a string only
                b"\xef\xbb\xbf" + _RECORD,
            ]
        ),
        st.integers(0, 9).map(lambda n: b'{"n":%d}' % n),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(lines=_jsonl_lines, torn=st.sampled_from([b"", b'{"n":', _RECORD]), block=st.sampled_from([1, 53, 1 << 16]))
@example(lines=[_RECORD, _RECORD + _RECORD, b""], torn=b"", block=1 << 16)  # as many values as lines
@example(lines=[_RECORD, _RECORD + _RECORD, _RECORD[:20] + b"\n" + _RECORD[20:]], torn=b"", block=1 << 16)
def test_reading_jsonl_in_blocks_gives_what_reading_each_line_gives(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], torn: bytes, block: int
) -> None:
    path = tmp_path_factory.mktemp("jsonl") / "t.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines) + torn)

    def read() -> tuple[object, ...]:
        report = ImportReport()
        records = [(obj, report._at) for obj in read_jsonl(path, report)]
        return records, dict(report.skipped)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(guard.importers._source, "_BLOCK", block)
        in_blocks = read()
        patch.setattr(guard.importers._source, "_objects", lambda data: None)
        line_by_line = read()
    assert in_blocks == line_by_line


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("opencode/session__neon-river__ses_39b623ce7ffeILPe9UgDcyGicH.json", "messages"),
        ("gemini-cli/gemini-cli-pomodoro-timer.json", "messages"),
        ("mini-swe-agent/django__django-11951.traj.json", "messages"),
        ("swe-agent/pydicom__pydicom-1458.traj", "history"),
    ],
)
@pytest.mark.parametrize("junk", [None, 42, "x"], ids=["null", "number", "string"])
def test_a_documents_message_that_is_no_object_is_counted_not_lost_silently(
    tmp_path: Path, name: str, key: str, junk: object
) -> None:
    document = json.loads(corpus_file(name).read_text())
    whole = len(calls(list(next(open_sessions(corpus_file(name))).events())))
    document[key].insert(1, junk)
    path = tmp_path / Path(name).name
    path.write_text(json.dumps(document))
    (session,) = open_sessions(path)
    assert len(calls(list(session.events()))) == whole
    assert session.report.skipped["not-an-object"] == 1


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("gemini-cli/gemini-cli-pomodoro-timer.json", "messages"),
        ("mini-swe-agent/django__django-11951.traj.json", "messages"),
    ],
)
def test_a_list_where_a_message_belongs_is_passed_over(tmp_path: Path, name: str, key: str) -> None:
    document = json.loads(corpus_file(name).read_text())
    whole = len(calls(list(next(open_sessions(corpus_file(name))).events())))
    document[key].insert(1, [])
    path = tmp_path / Path(name).name
    path.write_text(json.dumps(document))
    assert len(calls(list(next(open_sessions(path)).events()))) == whole


class _NoWholeRead(io.BufferedReader):
    """A transcript file that fails a read of all that is left in it."""

    def read(self, size: int | None = -1) -> bytes:
        assert size is not None, "the whole file was read into memory"
        assert size >= 0, "the whole file was read into memory"
        return super().read(size)


def _rollout(first: bytes, outputs: int, size: int) -> bytes:
    """A Codex rollout opening with ``first``, then ``outputs`` shell calls
    whose outputs are ``size`` bytes each."""
    lines = [{"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "r1"}}]
    for n in range(outputs):
        call = {"type": "function_call", "name": "shell", "arguments": '{"command": ["ls"]}', "call_id": f"c{n}"}
        output = {"type": "function_call_output", "call_id": f"c{n}", "output": "x" * size}
        lines += [{"timestamp": "2025-01-01T00:00:01Z", "type": "response_item", "payload": p} for p in (call, output)]
    return first + b"".join(json.dumps(line).encode() + b"\n" for line in lines)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16-le"])
@pytest.mark.parametrize(
    ("first", "skipped"),
    [
        (b'{"timestamp": "2025-01-01T00:0\n', {"invalid-json": 1}),
        (b"\n", {}),
        (b"[1, 2]\n", {"not-an-object": 1}),
    ],
    ids=["torn", "blank", "array"],
)
def test_damaged_first_line_streams_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: bytes, skipped: dict[str, int], encoding: str
) -> None:
    """A file larger than the sample whose first line is no object is told
    by its next lines, and streamed: never read whole into memory."""
    path = tmp_path / "rollout.jsonl"
    data = _rollout(first, 12, 100_000)
    path.write_bytes(data if encoding == "utf-8" else _encoded(data.decode(), encoding))
    assert path.stat().st_size > guard.importers._source._SAMPLE_BYTES
    monkeypatch.setattr(guard.importers._source, "read_regular", lambda p, what: _NoWholeRead(io.FileIO(p)))
    (session,) = open_sessions(path)
    assert (session.format, session.session) == ("codex", "r1")
    assert len(calls(list(session.events()))) == 12
    assert session.report.skipped == skipped


def test_a_large_pretty_printed_document_is_still_read_whole(tmp_path: Path) -> None:
    """An object alone on a line of a pretty-printed document is an empty
    one (``{}``, an item of a list): no sign of JSON Lines."""
    document = json.loads(corpus_file("mini-swe-agent/django__django-11951.traj.json").read_text())
    whole = len(calls(only(corpus_file("mini-swe-agent/django__django-11951.traj.json"))))
    path = tmp_path / "big.traj.json"
    path.write_text(json.dumps({"aaa": [{}], **document, "padding": "x" * (1 << 20)}, indent=2))
    assert b"\n    {}\n" in path.read_bytes()[:200]
    assert len(calls(only(path))) == whole


def _encoded(text: str, encoding: str) -> bytes:
    """``text`` in ``encoding`` (``utf-16-le``, ...) after its byte order mark."""
    mark = {"utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE}
    mark |= {"utf-32-le": codecs.BOM_UTF32_LE, "utf-32-be": codecs.BOM_UTF32_BE}
    return mark[encoding] + text.encode(encoding)


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_a_utf16_or_utf32_transcript_is_read_as_utf8(tmp_path: Path, encoding: str) -> None:
    """As Windows PowerShell's ``>`` writes a transcript: UTF-16 with its
    byte order mark. Read as its text, a line at a time."""
    text = _rollout(b"", 3, 10).decode()
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(_encoded(text, encoding))
    (session,) = open_sessions(path)
    assert (session.format, session.session) == ("codex", "r1")
    assert len(calls(list(session.events()))) == 3
    assert not session.report.skipped
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(path.read_bytes()[:-1])  # within the last character: the last line is torn
    (session,) = open_sessions(cut)
    assert len(calls(list(session.events()))) == 3
    assert session.report.skipped == {"torn": 1}
    document = tmp_path / "t.traj.json"
    document.write_bytes(_encoded(corpus_file("mini-swe-agent/django__django-11951.traj.json").read_text(), encoding))
    assert len(calls(only(document))) == 31


def test_a_line_in_another_encoding_is_invalid_not_guessed(tmp_path: Path) -> None:
    """A line is UTF-8: one in UTF-16 (without a byte order mark, it begins
    with a NUL byte) is no JSON, not decoded by a guess at its encoding."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(_RECORD + b"\n" + (_RECORD.decode() + "\n").encode("utf-16-be") + _RECORD + b"\n")
    (session,) = open_sessions(path)
    assert len(of(list(session.events()), UserMessage)) == 2
    assert session.report.skipped == {"invalid-json": 1}


@pytest.mark.parametrize(
    "name",
    [
        "mini-swe-agent/django__django-15563.traj.json",
        "swe-agent/pydicom__pydicom-1458.traj",
        "openhands/basic.json",
    ],
)
def test_python_nan_or_infinity_in_a_document_is_read_as_null(tmp_path: Path, name: str) -> None:
    """Python's ``json.dump`` writes ``NaN`` and ``Infinity`` for such floats
    (a cost that came out NaN); they cost a trajectory nothing."""
    document = json.loads(corpus_file(name).read_text())
    whole = len(calls(only(corpus_file(name))))
    (document[0] if isinstance(document, list) else document)["cost"] = [math.nan, math.inf, -math.inf]
    path = tmp_path / Path(name).name
    path.write_text(json.dumps(document, indent=2))
    assert "NaN" in path.read_text()
    assert len(calls(only(path))) == whole
    event = tmp_path / "event-00000-a.json"
    event.write_text('{"cost": NaN, "times": [Infinity, -Infinity]}')
    assert read_document(event) == {"cost": None, "times": [None, None]}


def test_a_file_that_fails_to_be_read_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Some files open and then refuse to be read (``/proc/self/mem``): the
    error is the read's, naming the file, and the file is not left open."""

    class Unreadable(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            raise OSError(errno.EIO, "Input/output error", "t.jsonl")

    opened = Unreadable()
    monkeypatch.setattr(guard.importers._source, "read_regular", lambda p, what: opened)
    with pytest.raises(OSError, match=r"Input/output error: 't\.jsonl'"):
        detect_format("t.jsonl")
    assert opened.closed


def test_a_document_nested_too_deep_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "event-00000-a.json"
    path.write_text("[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1))
    with pytest.raises(TranscriptError, match=f"nests arrays or objects deeper than {MAX_NESTING} levels"):
        read_document(path)


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (b'{\n  "messages": [1,,2]\n}', "line 2 column 18"),
        (b'{\n  "messages": ["\xff"]\n}', "not UTF-8: line 2 column 17"),
    ],
)
def test_a_document_that_does_not_decode_is_named_by_line_and_column(
    tmp_path: Path, content: bytes, where: str
) -> None:
    path = tmp_path / "t.traj"
    path.write_bytes(content)
    with pytest.raises(TranscriptError, match=f"is neither JSON Lines nor a JSON document .*{where}"):
        detect_format(path)
    with pytest.raises(TranscriptError, match=f"is not a JSON document .*{where}"):
        read_document(path)
