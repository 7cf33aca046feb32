"""The importers' shared guarantee: a record an importer cannot use costs
that record (counted as ``bad-record``, with where and why), never the
session, and nothing but ``TranscriptError`` leaves an import."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bus import Agent, AnyEvent, LogReader, ToolCall, ToolResult, UserMessage
from guard.audit import find_transcripts
from guard.importers import ImportedSession, TranscriptError, UnknownFormatError, open_sessions, write_log
from guard.importers._session import Builder, ImportReport
from guard.importers._source import Format, Sample
from guard.importers.detect import _guarded
from tests.guard.importers._transcripts import write_lines


def _rollout(*payload_types: Any) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [
        {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "s"}}
    ]
    for n, kind in enumerate(payload_types):
        call = {"type": kind, "name": "shell", "arguments": "{}", "call_id": f"c{n}"}
        lines.append({"timestamp": "2026-01-01T00:00:01Z", "type": "response_item", "payload": call})
        result = {"type": "function_call_output", "call_id": f"c{n}", "output": "ok"}
        lines.append({"timestamp": "2026-01-01T00:00:02Z", "type": "response_item", "payload": result})
    return lines


def _described(event: AnyEvent) -> tuple[str, str | None, float]:
    return type(event).__name__, getattr(event, "call_id", None), event.ts


def _import(path: Path, format: str | None = None) -> tuple[list[AnyEvent], ImportedSession]:
    [session] = open_sessions(path, format)
    return list(session.events()), session


def test_a_record_of_wrong_types_costs_that_record_only(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", _rollout("function_call", {"not": "a type"}, "function_call"))
    events, session = _import(path)
    assert [e.call_id for e in events if isinstance(e, ToolCall)] == ["c0", "c2"]
    assert [e.call_id for e in events if isinstance(e, ToolResult)] == ["c0", "c2"]
    assert session.report.skipped == {"bad-record": 1, "orphan-result": 1}
    assert session.report.problems == [f"{path}:4: TypeError: unhashable type: 'dict'"]


def test_a_session_imported_again_gives_the_same_events_and_counts_nothing_twice(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", _rollout("function_call", {"not": "a type"}, "function_call"))
    first, session = _import(path)
    again, half = list(session.events()), session.events()
    assert [_described(e) for e in again] == [_described(e) for e in first]
    next(half)  # an import left part way, then started over
    assert len(list(session.events())) == len(first)
    assert session.report.skipped == {"bad-record": 1, "orphan-result": 1}
    assert session.report.problems == [f"{path}:4: TypeError: unhashable type: 'dict'"]


def test_events_handed_out_before_a_bad_record_keep_one_agent_handle(tmp_path: Path) -> None:
    kinds = ["function_call", ["bad"], "function_call", {"bad": 1}, "function_call"]
    events, session = _import(write_lines(tmp_path / "r.jsonl", _rollout(*kinds)))
    assert [e.call_id for e in events if isinstance(e, ToolCall)] == ["c0", "c2", "c4"]
    assert len({id(e.agent) for e in events}) == 1
    assert session.report.skipped["bad-record"] == 2


def test_after_twenty_bad_records_the_session_ends_there_and_says_so(tmp_path: Path) -> None:
    kinds = ["function_call"] + [{"bad": n} for n in range(25)] + ["function_call"]
    events, session = _import(write_lines(tmp_path / "r.jsonl", _rollout(*kinds)))
    assert [e.call_id for e in events if isinstance(e, ToolCall)] == ["c0"]
    assert session.report.skipped["bad-record"] == 21
    assert session.report.skipped["stopped-early"] == 1
    assert len(session.report.problems) == 21
    assert session.report.problems[-1] == (
        "the import stopped after 21 records it could not use: the rest of the session is not read"
    )


def test_a_bad_item_of_a_document_costs_that_item(tmp_path: Path) -> None:
    history: list[Any] = [{"role": "user", "content": "fix"}]
    for n in range(3):
        call = {"id": f"c{n}", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
        history.append({"role": "assistant", "content": "", "tool_calls": [call]})
        history.append({"role": "tool", "content": "a", "tool_call_ids": [f"c{n}"]})
    history[4]["tool_call_ids"] = 5
    path = tmp_path / "t.traj"
    path.write_text(json.dumps({"history": history}))
    events, session = _import(path)
    assert session.report.skipped["bad-record"] == 1, session.report.problems
    assert session.report.problems == [f"{path}#history[4]: TypeError: 'int' object is not iterable"]
    assert [e.call_id for e in events if isinstance(e, ToolCall)] == ["c0", "c1", "c2"]
    assert [e.call_id for e in events if isinstance(e, ToolResult)] == ["c0", "c2"]


def test_a_failure_outside_any_record_ends_the_session_with_what_it_had(tmp_path: Path) -> None:
    def produce(b: Builder) -> Iterator[AnyEvent]:
        yield from b.user("main", "hello", 1.0)
        raise KeyError("no such field")

    session = ImportedSession(format="x", session="s", path=tmp_path, label="x", produce=produce)
    assert [type(e).__name__ for e in session.events()] == ["AgentStatus", "UserMessage"]
    assert session.report.problems == [
        "a record: KeyError: 'no such field'",
        "the import stopped at a failure outside any record: the rest of the session is not read",
    ]
    assert session.report.skipped == {"bad-record": 1, "stopped-early": 1}


def test_a_transcript_error_inside_an_import_is_passed_on(tmp_path: Path) -> None:
    def produce(b: Builder) -> Iterator[AnyEvent]:
        raise TranscriptError("gone")
        yield  # pragma: no cover

    session = ImportedSession(format="x", session="s", path=tmp_path, label="x", produce=produce)
    with pytest.raises(TranscriptError, match="gone"):
        list(session.events())


def test_a_first_line_of_odd_types_is_simply_not_that_format(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "x.jsonl", [{"type": {"a": 1}, "payload": {}, "kind": ["b"], "source": "c"}])
    with pytest.raises(UnknownFormatError, match=r"codex: fields of unexpected types \(TypeError"):
        list(open_sessions(path))
    with pytest.raises(TranscriptError, match="is not codex: fields of unexpected types"):
        list(open_sessions(path, "codex"))


def test_reading_a_transcript_s_sessions_raises_only_transcript_error(tmp_path: Path) -> None:
    def sessions(sample: Sample) -> Iterator[ImportedSession]:
        raise AttributeError("'int' object has no attribute 'get'")
        yield  # pragma: no cover

    fmt = Format("odd", lambda sample: None, sessions)
    with pytest.raises(TranscriptError, match="cannot be imported as odd: AttributeError: 'int' object has no"):
        list(_guarded(fmt, Sample(tmp_path / "t.json", [], {})))


@pytest.mark.parametrize("damage", [b'{"timestamp": "2026-01-01T0', b"\x00\xff garbage", b"[" * 5000, b"]"])
def test_damage_in_line_1_costs_line_1_only(damage: bytes, tmp_path: Path) -> None:
    good = _rollout("function_call", "function_call")
    path = tmp_path / "r.jsonl"
    path.write_bytes(damage + b"\n" + b"".join(json.dumps(line).encode() + b"\n" for line in good))
    events, session = _import(path)
    assert [e.call_id for e in events if isinstance(e, ToolCall)] == ["c0", "c1"]
    assert sum(session.report.skipped.values()) == 1


def test_a_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + b"".join(json.dumps(line).encode() + b"\n" for line in _rollout("function_call"))
    )
    events, session = _import(path)
    assert [e.call_id for e in events if isinstance(e, ToolCall)] == ["c0"]
    assert not session.report.skipped


def test_a_damaged_document_that_is_not_json_lines_either_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{\n  "history": [\n    {"role": "user",\n')
    with pytest.raises(TranscriptError, match="is neither JSON Lines nor a JSON document"):
        list(open_sessions(path))


def test_agent_handles_are_never_shared_between_imports(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", _rollout("function_call", ["bad"], "function_call"))
    first, _ = _import(path)
    second, _ = _import(path)
    agents = {id(e.agent) for e in first} | {id(e.agent) for e in second}
    assert len(agents) == 2
    assert all(isinstance(e.agent, Agent) for e in first)


def test_a_bad_event_file_of_a_v1_conversation_costs_that_file(tmp_path: Path) -> None:
    from tests.guard.importers.test_openhands import _v1_conversation

    def conversation(name: str, stream: list[dict[str, Any]]) -> list[str]:
        folder = tmp_path / name / "events"
        folder.mkdir(parents=True)
        for index, event in enumerate(stream):
            (folder / f"event-{index:05d}-{event['id'][:8]}-aaaa.json").write_text(json.dumps(event))
        events, session = _import(folder / "event-00000-00000000-aaaa.json")
        assert session.report.problems == ([] if name == "good" else [session.report.problems[0]])
        return [e.call_id for e in events if isinstance(e, ToolCall)]

    stream = _v1_conversation()
    calls = conversation("good", stream)
    bad = next(event for event in stream if event.get("tool_call_id") == calls[1])
    bad["tool_name"] = {"not": "a name"}
    assert conversation("bad", stream) == [calls[0], *calls[2:]]


def test_a_session_log_s_agentless_events_import_as_they_are(tmp_path: Path) -> None:
    from bus import SessionLog

    path = tmp_path / "s.jsonl"
    with SessionLog(path) as log:
        log.write(UserMessage(agent=None, seq=1, text="no agent"))
    events, _ = _import(path)
    assert [(e.agent, e.text) for e in events if isinstance(e, UserMessage)] == [(None, "no agent")]


def test_records_nobody_follows_are_a_plain_list() -> None:
    from guard.importers._source import Records

    records = Records([{"a": 1}, 2], "t.json#messages")
    assert (list(records), records[1:], len(records)) == ([{"a": 1}, 2], [2], 2)


def test_arguments_nested_too_deeply_stay_the_string_the_model_wrote(tmp_path: Path) -> None:
    arguments = "[" * 5000 + "]" * 5000
    lines = _rollout("function_call")
    lines[1]["payload"]["arguments"] = arguments
    events, session = _import(write_lines(tmp_path / "r.jsonl", lines))
    assert [e.args for e in events if isinstance(e, ToolCall)] == [arguments]
    assert not session.report.skipped


@pytest.mark.parametrize("depth", [98, 99, 100])
def test_arguments_too_deep_for_their_log_line_stay_the_string_the_model_wrote(depth: int, tmp_path: Path) -> None:
    """The log holds the event the importer made: arguments whose line would
    nest deeper than the log allows are kept as written, not decoded (the
    log would swap their depths for a stand-in)."""
    arguments = json.dumps({"command": "ls", "x": json.loads("[" * depth + "]" * depth)})
    lines = _rollout("function_call")
    lines[1]["payload"]["arguments"] = arguments
    events, session = _import(write_lines(tmp_path / "r.jsonl", lines))
    write_log(session, tmp_path / "r.log.jsonl")
    logged = [e.args for e in LogReader(tmp_path / "r.log.jsonl") if isinstance(e, ToolCall)]
    assert logged == [e.args for e in events if isinstance(e, ToolCall)]
    assert logged == [arguments if depth > 98 else json.loads(arguments)]


def test_a_model_is_counted_only_when_named() -> None:
    models: Counter[str] = Counter()
    builder = Builder(ImportReport(), models)
    for name in ("gpt-5", None, "", "  ", 7, " gpt-5 "):
        builder.model(name)
    assert models == Counter({"gpt-5": 2})


_ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    "path",
    [
        *(path for path, _ in find_transcripts([_ROOT / "tests" / "data" / "transcripts"])),
        *sorted(p for p in (_ROOT / "scenarios").rglob("*.jsonl") if not p.name.endswith(".expected.jsonl")),
    ],
    ids=lambda path: str(path.relative_to(_ROOT)),
)
def test_every_importer_hands_on_a_sessions_events_as_it_reads_them(path: Path) -> None:
    """An audit or import of a session of any length holds a record's
    events, not the session's: the first event comes out before the
    importer has produced the last one."""
    for session in open_sessions(path):
        produce = session._produce
        produced: list[AnyEvent] = []

        def counted(
            builder: Builder, produce: Any = produce, produced: list[AnyEvent] = produced
        ) -> Iterator[AnyEvent]:
            for event in produce(builder):
                produced.append(event)
                yield event

        session._produce = counted
        total = sum(1 for _ in session.events())
        if total < 3:
            continue
        produced.clear()
        assert next(session.events(), None) is not None
        assert len(produced) < total
