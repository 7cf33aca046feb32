"""The session log reader: bad lines are skipped and counted, never fatal."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bus.reader
from bus import AgentStatus, LogError, LogReader, SkippedLine, ToolCall, ToolResult, UserMessage, read_log
from tests.bus.conftest import HEADER, RawLog

GOOD_USER = b'{"type":"user/message","seq":1,"ts":1.0,"agent":"main","text":"hello"}'
GOOD_CALL = b'{"type":"tool/call","seq":2,"ts":2.0,"agent":"main","call_id":"c1","step":1,"tool":"grep","args":{}}'


def test_every_kind_of_bad_line_is_skipped_with_its_line_number(raw_log: RawLog) -> None:
    path = raw_log(
        GOOD_USER,
        b'{"type":"user/message",,}',
        b'{"type":"telemetry/ping","seq":3,"ts":3.0,"agent":"main"}',
        b'{"type":"tool/call","seq":4,"ts":4.0,"agent":"main","call_id":"c","step":"one","tool":"grep"}',
        GOOD_CALL,
        torn=b'{"type":"tool/result","seq":6,"ts":6.0,"agent":"ma',
    )
    reader = read_log(path)
    events = list(reader)
    assert [type(e) for e in events] == [UserMessage, ToolCall]
    report = reader.report
    assert [(s.line, s.reason) for s in report.samples] == [
        (3, "invalid-json"),
        (4, "unknown-type"),
        (5, "schema"),
        (7, "torn"),
    ]
    assert "$.step" in report.samples[2].detail
    assert report.lines == 7
    assert report.events == 2
    assert report.skipped == 4
    assert report.summary() == "2 events, 4 lines skipped (invalid-json 1, schema 1, torn 1, unknown-type 1)"


def test_summary_of_a_clean_log(raw_log: RawLog) -> None:
    reader = read_log(raw_log(GOOD_USER, GOOD_CALL))
    list(reader)
    assert reader.report.summary() == "2 events, 0 lines skipped"
    assert reader.report.samples == []


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        pytest.param(b"", "invalid-json", id="blank-line"),
        pytest.param(b"\xff\xfe garbage", "invalid-json", id="binary-garbage"),
        pytest.param(GOOD_USER + b" trailing", "invalid-json", id="trailing-characters"),
        pytest.param(b"[1, 2]", "schema", id="not-an-object"),
        pytest.param(b'{"seq":1,"ts":1.0,"agent":"a","text":"x"}', "schema", id="no-type"),
        pytest.param(b'{"type":5,"agent":"a"}', "unknown-type", id="type-not-a-string"),
        pytest.param(b'{"type":"user/message","seq":1,"ts":1.0,"text":"x"}', "schema", id="agent-key-missing"),
        pytest.param(b'{"type":"user/message","seq":1,"ts":1.0,"agent":"","text":"x"}', "schema", id="empty-agent-id"),
        pytest.param(
            b'{"type":"context/message","seq":1,"ts":1.0,"agent":"a","call_id":"c",'
            b'"source":{"kind":"user","plugin":"p"},"text":"x"}',
            "schema",
            id="context-not-from-a-plugin",
        ),
    ],
)
def test_bad_line_is_skipped_and_reading_continues(raw_log: RawLog, line: bytes, reason: str) -> None:
    reader = read_log(raw_log(line, GOOD_USER))
    events = list(reader)
    assert len(events) == 1
    assert reader.report.samples[0].line == 2
    assert reader.report.samples[0].reason == reason


def test_fields_of_the_wrong_json_type_are_read_as_the_schema_has_them(raw_log: RawLog) -> None:
    reader = read_log(
        raw_log(
            b'{"type":"user/message","seq":1,"ts":1.0,"agent":7,"text":12}',
            b'{"type":"tool/call","seq":2,"ts":2.0,"agent":"main","call_id":7,"step":"3","tool":"grep","args":{}}',
            b'{"type":"tool/result","seq":3,"ts":3.0,"agent":"main","call_id":7,"step":3,"tool":"grep",'
            b'"content":{"hits":[1,2]},"is_error":false,"denied_by":null}',
            GOOD_CALL,
        )
    )
    user, call, result, good = list(reader)
    assert isinstance(user, UserMessage)
    assert isinstance(call, ToolCall)
    assert isinstance(result, ToolResult)
    assert isinstance(good, ToolCall)
    assert (user.agent, user.text) == (reader.agents["7"], "12")
    assert (call.call_id, call.step) == ("7", 3)
    assert (result.call_id, result.content) == ("7", '{"hits":[1,2]}')
    assert good.call_id == "c1"
    report = reader.report
    assert (report.events, report.skipped, report.mistyped) == (4, 0, 3)
    assert report.summary() == "4 events, 0 lines skipped; 3 read with fields of the wrong type"


def test_last_line_that_is_bad_but_complete_is_not_called_torn(raw_log: RawLog) -> None:
    reader = read_log(raw_log(GOOD_USER, b'{"type":'))
    list(reader)
    assert [(s.line, s.reason) for s in reader.report.samples] == [(3, "invalid-json")]


def test_complete_last_line_without_newline_is_read(raw_log: RawLog) -> None:
    reader = read_log(raw_log(GOOD_USER, torn=GOOD_CALL))
    assert [type(e) for e in reader] == [UserMessage, ToolCall]
    assert reader.report.skipped == 0


def test_unknown_fields_from_a_newer_writer_are_ignored(raw_log: RawLog) -> None:
    line = b'{"type":"user/message","seq":1,"ts":1.0,"agent":"main","text":"hi","lang":"en"}'
    reader = read_log(raw_log(line))
    [event] = list(reader)
    assert event == UserMessage(seq=1, ts=1.0, agent=reader.agents["main"], text="hi")


def test_resume_header_written_with_spaces_is_still_a_resume_marker(raw_log: RawLog) -> None:
    resume = b'{"type": "session/start", "v": 1, "session": "s2", "ts": 1764489700.0}'
    reader = read_log(raw_log(GOOD_USER, resume, GOOD_CALL))
    assert len(list(reader)) == 2
    assert reader.report.skipped == 0


def test_a_garbage_file_keeps_a_bounded_sample_but_counts_everything(raw_log: RawLog) -> None:
    reader = read_log(raw_log(*[b"not json %d" % i for i in range(500)]))
    assert list(reader) == []
    assert reader.report.skipped == 500
    assert len(reader.report.samples) == 100
    assert reader.report.samples[-1] == SkippedLine(101, "invalid-json", reader.report.samples[-1].detail)


def _peak_bytes_while_streaming(path: Path) -> int:
    tracemalloc.start()
    try:
        reader = read_log(path)
        tracemalloc.reset_peak()
        count = sum(1 for _ in reader)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count > 0
    return peak


def test_reading_streams_with_memory_independent_of_log_length(tmp_path: Path) -> None:
    def write(name: str, events: int) -> Path:
        path = tmp_path / name
        template = (
            b'{"type":"tool/result","seq":%d,"ts":1.0,"agent":"main","call_id":"c%d","step":1,'
            b'"tool":"grep","args":{"q":"x"},"content":"' + b"r" * 200 + b'","is_error":false,"denied_by":null}\n'
        )
        path.write_bytes(HEADER + b"".join(template % (i, i) for i in range(1, events + 1)))
        return path

    small = _peak_bytes_while_streaming(write("small.jsonl", 1_000))
    large = _peak_bytes_while_streaming(write("large.jsonl", 20_000))
    # 20x the events (about 6 MB on disk) may not cost 20x the memory: the
    # reader holds one line and one event at a time.
    assert large < small * 2 + 64 * 1024


def test_agent_handles_are_one_per_id_with_parents_from_started(raw_log: RawLog) -> None:
    path = raw_log(
        b'{"type":"user/message","seq":1,"ts":1.0,"agent":"sub","text":"early"}',
        b'{"type":"agent/status","seq":2,"ts":2.0,"agent":"main","status":"started","parent":null}',
        b'{"type":"agent/status","seq":3,"ts":3.0,"agent":"sub","status":"started","parent":"main"}',
        b'{"type":"user/message","seq":4,"ts":4.0,"agent":"main","text":"hi"}',
        b'{"type":"user/message","seq":5,"ts":5.0,"agent":"sub","text":"late"}',
        b'{"type":"tool/call","seq":6,"ts":6.0,"agent":null,"call_id":"c","step":1,"tool":"t","args":null}',
    )
    reader = read_log(path)
    events = list(reader)
    main, sub = reader.agents["main"], reader.agents["sub"]
    assert sorted(reader.agents) == ["main", "sub"]
    assert [e.agent for e in events] == [sub, main, sub, main, sub, None]
    assert events[0].agent is events[4].agent  # the same handle, not an equal one
    assert (main.id, main.parent_id) == ("main", None)
    assert (sub.id, sub.parent_id) == ("sub", "main")
    assert isinstance(events[2], AgentStatus)
    assert events[2].parent == "main"


def test_a_later_status_does_not_reparent_an_agent(raw_log: RawLog) -> None:
    reader = read_log(
        raw_log(
            b'{"type":"agent/status","seq":1,"ts":1.0,"agent":"sub","status":"started","parent":"main"}',
            b'{"type":"agent/status","seq":2,"ts":2.0,"agent":"sub","status":"idle","parent":"other"}',
        )
    )
    list(reader)
    assert reader.agents["sub"].parent_id == "main"


def test_missing_file_is_a_log_error_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nope.jsonl"
    with pytest.raises(LogError, match="no session log at") as info:
        read_log(path)
    assert str(path) in str(info.value)


def test_directory_is_a_log_error(tmp_path: Path) -> None:
    with pytest.raises(LogError, match="is a directory, not a regular file"):
        read_log(tmp_path)


@pytest.mark.parametrize(
    "header",
    [
        pytest.param(b"", id="empty-file"),
        pytest.param(GOOD_USER + b"\n", id="starts-with-an-event"),
        pytest.param(b"hello world\n", id="plain-text"),
        pytest.param(b'{"type":"session/start","v":1,"session":"s1"', id="torn-header"),
        pytest.param(b'{"type":"session/start","v":"1","session":"s1","ts":1.0}\n', id="version-not-an-int"),
    ],
)
def test_file_without_a_header_is_a_log_error(raw_log: RawLog, header: bytes) -> None:
    path = raw_log(GOOD_USER, header=header)
    with pytest.raises(LogError, match="line 1 is not a session/start header") as info:
        read_log(path)
    assert str(path) in str(info.value)


def test_unknown_version_is_a_log_error_naming_both_versions(raw_log: RawLog) -> None:
    path = raw_log(GOOD_USER, header=b'{"type":"session/start","v":2,"session":"s1","ts":1.0}\n')
    with pytest.raises(LogError, match="has session log version 2; this reader knows version 1"):
        read_log(path)


def test_header_is_read_on_open_and_the_reader_closes(raw_log: RawLog) -> None:
    with LogReader(raw_log(GOOD_USER)) as reader:
        assert reader.report.session == "s1"
        assert reader.report.lines == 1
    with pytest.raises(ValueError, match="is closed; a LogReader streams its file once"):
        iter(reader)


def test_a_reader_streams_its_file_once(raw_log: RawLog) -> None:
    reader = read_log(raw_log(GOOD_USER))
    assert len(list(reader)) == 1
    with pytest.raises(ValueError, match="streams its file once"):
        list(reader)


_HOSTILE = [
    b"[" * 5000,
    b'{"a":' * 150 + b"1" + b"}" * 150,
    b'{"type":"user/message","seq":1,"ts":1,"agent":{"id":"' + b"a" * 5000 + b'"},"text":"x"}',
    b'{"type":"tool/call","seq":' + b"9" * 5000 + b',"ts":1,"agent":"a","call_id":"c","step":1,"tool":"t","args":1}',
    b'{"type":"tool/call","seq":1,"ts":1e999,"agent":"a","call_id":"c","step":1,"tool":"t","args":'
    + b"[" * 99
    + b"]" * 99
    + b"}",
    b"\xef\xbb\xbf" + GOOD_USER,
    b"\x00" * 10,
]

_lines = st.lists(
    st.one_of(
        st.binary(max_size=80).map(lambda b: b.replace(b"\n", b"")),
        st.sampled_from([GOOD_USER, GOOD_CALL, HEADER.rstrip(), b"{}", b"null", b'{"type":"tool/result"}']),
        st.sampled_from(_HOSTILE),
        st.text(max_size=40).map(lambda t: t.replace("\n", "").encode("utf-8", "surrogatepass")),
    ),
    max_size=20,
)


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=_lines, torn=st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")))
def test_arbitrary_lines_never_raise_and_every_line_is_accounted_for(
    raw_log: RawLog, lines: list[bytes], torn: bytes
) -> None:
    reader = read_log(raw_log(*lines, torn=torn))
    events = list(reader)
    report = reader.report
    resumes = sum(1 for line in [*lines, torn] if line == HEADER.rstrip())
    assert report.lines == 1 + len(lines) + (1 if torn else 0)
    assert report.events == len(events)
    assert report.events + report.skipped + resumes == report.lines - 1


def test_a_header_nested_too_deeply_is_not_a_session_log(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text('{"type":"session/start","v":1,"session":' + "[" * 5000 + "]" * 5000 + "}\n")
    with pytest.raises(
        LogError, match=r"is not a session log: line 1 is not a session/start header \(nested deeper than 100 levels\)"
    ):
        read_log(path)


_DEEP_ARGS = b"[" * 101 + b"]" * 101
_ROUND_BRACKETS_IN_A_STRING = b'"' + b"[{" * 120 + b'"'

_block_lines = st.lists(
    st.one_of(
        st.sampled_from([GOOD_USER, GOOD_CALL, HEADER.rstrip(), b"", b"  ", b"\r", b"{}", b'{"type":']),
        st.sampled_from(
            [
                GOOD_USER + GOOD_CALL,  # two values on one line
                GOOD_USER + b" \t" + GOOD_CALL,
                GOOD_CALL[:40] + b"\n" + GOOD_CALL[40:],  # one value over two lines
                GOOD_CALL.replace(b'"args":{}', b'"args":' + _DEEP_ARGS),
                GOOD_CALL.replace(b'"args":{}', b'"args":' + _ROUND_BRACKETS_IN_A_STRING),
                GOOD_USER.replace(b'"text":"hello"', b'"text":"hello","extra":' + _DEEP_ARGS),
                b'{"type":"user/message","seq":1,"ts":1.0,"agent":"new","text":' + b"[" * 150,
                b'{"type":"agent/status","seq":1,"ts":1.0,"agent":"sub","status":"started","parent":"main"}',
            ]
        ),
        st.integers(0, 30).map(lambda n: GOOD_USER.replace(b'"main"', b'"agent-%d"' % n)),
    ),
    max_size=40,
)


@settings(
    max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=_block_lines, torn=st.sampled_from([b"", GOOD_USER[:30], GOOD_USER]), block=st.sampled_from([1, 97, 1 << 16])
)
def test_reading_in_blocks_gives_what_decoding_each_line_alone_gives(
    raw_log: RawLog, lines: list[bytes], torn: bytes, block: int
) -> None:
    path = raw_log(*lines, torn=torn)

    def read() -> tuple[object, ...]:
        reader = read_log(path)
        events = [(msgspec.structs.replace(e, agent=None), e.agent and (e.agent.id, e.agent.parent_id)) for e in reader]
        report = reader.report
        return events, list(reader.agents), (report.lines, report.events, report.skipped_by_reason, report.samples)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bus.reader, "_BLOCK", block)
        in_blocks = read()
        patch.setattr(LogReader, "_decode_block", lambda self, data: None)
        line_by_line = read()
    assert in_blocks == line_by_line


@settings(
    max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=_block_lines,
    torn=st.sampled_from([b"", GOOD_USER[:30], GOOD_USER]),
    block=st.sampled_from([1, 97, 1 << 16]),
    containing=st.sampled_from([b"main", b"tool/call", b"agent-1", b"not in any line"]),
)
def test_a_reader_of_the_lines_containing_some_bytes_reads_them_as_a_log_of_those_lines(
    raw_log: RawLog,
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[bytes],
    torn: bytes,
    block: int,
    containing: bytes,
) -> None:
    path = raw_log(*lines, torn=torn)
    kept = [line for line in b"".join(line + b"\n" for line in lines).splitlines(keepends=True) if containing in line]
    alone = tmp_path_factory.mktemp("alone") / "log.jsonl"
    alone.write_bytes(HEADER + b"".join(kept) + (torn if containing in torn else b""))

    def read(reader: LogReader) -> tuple[object, ...]:
        events = [(msgspec.structs.replace(e, agent=None), e.agent and e.agent.id) for e in reader]
        report = reader.report
        return events, report.events, report.skipped_by_reason

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bus.reader, "_BLOCK", block)
        filtered = LogReader(path, containing=containing)
        assert read(filtered) == read(LogReader(alone))
    assert filtered.report.lines == 1 + b"".join(line + b"\n" for line in lines).count(b"\n") + bool(torn)


def test_events_whose_lines_are_gone_are_counted_missing(raw_log: RawLog) -> None:
    def user(seq: int) -> bytes:
        return b'{"type":"user/message","seq":%d,"ts":1.0,"agent":"main","text":"x"}' % seq

    resume = b'{"type":"session/start","v":1,"session":"s2","ts":2.0}'
    reader = read_log(
        raw_log(
            user(1),
            user(2),
            user(5),  # 3 and 4 were never written (a full disk)
            b"not json",  # a line that was 6
            user(7),
            resume,
            user(1),  # a new run numbers from 1 again: nothing missing
            user(2),
            b'{"type":"user/message","ts":1.0,"agent":"main","text":"no seq"}',
            user(3),
        )
    )
    assert len(list(reader)) == 8
    assert (reader.report.missing, reader.report.skipped) == (2, 1)
    assert reader.report.summary() == (
        "8 events, 1 lines skipped (invalid-json 1); 2 missing (numbers their seq skips)"
    )


def test_a_negative_seq_is_read_as_no_seq_and_misses_nothing(raw_log: RawLog) -> None:
    line = b'{"type":"user/message","seq":%d,"ts":1.0,"agent":"main","text":"x"}'
    reader = read_log(raw_log(line % 1, line % -5, line % 2))
    assert [e.seq for e in reader] == [1, -5, 2]
    assert (reader.report.missing, reader.report.summary()) == (0, "3 events, 0 lines skipped")


def test_a_reader_of_some_lines_counts_nothing_missing(raw_log: RawLog) -> None:
    path = raw_log(GOOD_USER, GOOD_CALL.replace(b'"seq":2', b'"seq":9'))
    reader = LogReader(path, containing=b"grep")
    assert len(list(reader)) == 1
    assert reader.report.missing == 0
