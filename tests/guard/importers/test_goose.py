"""goose sessions: the JSON Lines session files of goose up to 1.9 and
JSON exports, synthetic (shaped like the session goose users attach to
their bug reports, see DATA.md)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from bus import ToolResult, UserMessage
from guard.cli import main
from guard.importers import TranscriptError, UnknownFormatError, detect_format, open_sessions
from tests.guard.importers._transcripts import calls, longest_run, of, write_lines

METADATA = {
    "working_dir": "/home/me/project",
    "description": "Debugging Celery Redis connectivity",
    "message_count": 12,
    "total_tokens": 36145,
    "input_tokens": 36098,
    "output_tokens": 47,
    "accumulated_total_tokens": 1342347,
}


def _message(role: str, created: int, *content: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"role": role, "created": created, "content": list(content), **fields}


def _request(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"status": "success", "value": {"name": name, "arguments": arguments}}
    return {"type": "toolRequest", "id": call_id, "toolCall": call}


def _response(call_id: str, result: Any) -> dict[str, Any]:
    return {"type": "toolResponse", "id": call_id, "toolResult": result}


def _ok(text: str) -> dict[str, Any]:
    return {"status": "success", "value": [{"type": "text", "text": text, "annotations": {"audience": ["assistant"]}}]}


def _messages() -> list[dict[str, Any]]:
    shell = "developer__shell"
    ps = {"command": "docker compose ps"}
    return [
        _message("user", 1750104807, {"type": "text", "text": "Why are the Celery tasks not processed?"}),
        _message(
            "assistant",
            1750104810,
            {"type": "text", "text": "Let me check the containers."},
            _request("toolu_01", shell, ps),
            _request("toolu_02", "developer__text_editor", {"command": "view", "path": "/home/me/project/compose.yml"}),
        ),
        _message(
            "user", 1750104812, _response("toolu_01", _ok("worker  Exit 1")), _response("toolu_02", _ok("services:"))
        ),
        _message("assistant", 1750104815, _request("toolu_03", shell, ps)),
        _message("user", 1750104816, _response("toolu_03", _ok("worker  Exit 1"))),
        _message("assistant", 1750104818, _request("toolu_04", shell, {"command": "docker logs worker"})),
        _message("user", 1750104819, _response("toolu_04", {"status": "error", "error": "Execution failed: timeout"})),
        _message(
            "assistant",
            1750104820,
            {"type": "thinking", "thinking": "..."},
            {"type": "toolRequest", "id": "toolu_05", "toolCall": {"status": "error", "error": "Invalid JSON"}},
        ),
        _message("user", 1750104821, _response("toolu_05", {"status": "error", "error": "Invalid JSON"})),
        _message(
            "assistant",
            1750104822,
            _request("toolu_06", shell, {"command": "docker compose down -v"}),
            {"type": "toolConfirmationRequest", "id": "toolu_06", "toolName": shell, "arguments": {}},
        ),
        _message("user", 1750104830, _response("toolu_06", _ok("The user has declined to run this tool. DO NOT ..."))),
        _message(
            "assistant",
            1750104831,
            {"type": "frontendToolRequest", "id": "toolu_07", "toolCall": _request("", "x", {})["toolCall"]},
        ),
        _message(
            "user",
            1750104832,
            _response(
                "toolu_07",
                {"status": "success", "value": {"content": [{"type": "text", "text": "no"}], "isError": True}},
            ),
        ),
        _message(
            "user", 1750104840, {"type": "text", "text": "summary of earlier turns"}, metadata={"userVisible": False}
        ),
        _message("user", 1750104841, {"type": "text", "text": "restart redis"}, metadata={"userVisible": True}),
    ]


def test_session_file(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "20250616_142005.jsonl", [METADATA, *_messages()], torn='{"role": "assi')
    assert detect_format(path) == "goose"
    (session,) = open_sessions(path)
    assert session.session == "20250616_142005"
    evts = list(session.events())
    assert [(c.call_id, c.tool, c.step) for c in calls(evts)] == [
        ("toolu_01", "developer__shell", 1),
        ("toolu_02", "developer__text_editor", 1),
        ("toolu_03", "developer__shell", 2),
        ("toolu_04", "developer__shell", 3),
        ("toolu_06", "developer__shell", 5),  # toolu_05 could not be parsed: goose ran nothing
        ("toolu_07", "x", 6),
    ]
    assert calls(evts)[0].args == {"command": "docker compose ps"}
    assert calls(evts)[0].ts == 1750104810.0
    results = of(evts, ToolResult)
    assert [(r.call_id, r.content, r.is_error, r.denied_by) for r in results] == [
        ("toolu_01", "worker  Exit 1", False, None),
        ("toolu_02", "services:", False, None),
        ("toolu_03", "worker  Exit 1", False, None),
        ("toolu_04", "Execution failed: timeout", True, None),
        ("toolu_06", "The user has declined to run this tool. DO NOT ...", True, "user"),
        ("toolu_07", "no", True, None),
    ]
    assert [m.text for m in of(evts, UserMessage)] == ["Why are the Celery tasks not processed?", "restart redis"]
    assert session.report.skipped == {"torn": 1}


def test_export(tmp_path: Path) -> None:
    """``goose session export --format json``: the session's metadata with
    its messages under ``conversation``."""
    export = {
        "id": "20260105_3",
        "name": "celery",
        **METADATA,
        "conversation": [*_messages(), "junk", {"role": "user"}],
    }
    path = tmp_path / "celery.json"
    path.write_text(json.dumps(export, indent=2))
    (session,) = open_sessions(path)
    assert session.session == "20260105_3"
    evts = list(session.events())
    assert len(calls(evts)) == 6
    assert longest_run(evts) == 1  # the same `docker compose ps` twice, with a view between
    assert session.report.skipped == {"not-an-object": 1}  # "junk"; {"role": "user"} alone is a message without parts


def test_odd_tool_blocks(tmp_path: Path) -> None:
    lines = [
        METADATA,
        _message("assistant", 1, "junk", {"type": "toolRequest", "id": "a"}),  # type: ignore[arg-type]
        _message("user", 2, _response("a", None), {"type": "text"}),
        _message("assistant", 3, _request("b", "shell", {})),
        _message("user", 4, _response("b", _ok("")), {"type": "toolRequest", "id": "c"}),
    ]
    path = write_lines(tmp_path / "odd.jsonl", lines)
    (session,) = open_sessions(path)
    evts = list(session.events())
    assert [c.call_id for c in calls(evts)] == ["b"]
    assert not session.report.skipped


def test_a_new_session_file_holds_only_its_metadata(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "new.jsonl", [METADATA])
    (session,) = open_sessions(path)
    assert list(session.events()) == []


def test_not_goose(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "x.jsonl", [{"working_dir": "/w"}, {"role": "user", "content": "no created"}])
    with pytest.raises(UnknownFormatError, match="goose: neither JSON Lines opening with"):
        detect_format(path)


_SCHEMA = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', description TEXT NOT NULL DEFAULT '',
    user_set_name BOOLEAN DEFAULT FALSE, session_type TEXT NOT NULL DEFAULT 'user', working_dir TEXT NOT NULL,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    extension_data TEXT DEFAULT '{}', total_tokens INTEGER, input_tokens INTEGER, output_tokens INTEGER,
    accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER,
    schedule_id TEXT, recipe_json TEXT, user_recipe_values_json TEXT
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL,
    content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL, timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    tokens INTEGER, metadata_json TEXT
);
"""


def _database(path: Path, sessions: dict[str, list[dict[str, Any]]], *, metadata: bool = True) -> Path:
    """A sessions.db as goose 1.10+ creates it (its own CREATE TABLE statements)."""
    schema = _SCHEMA if metadata else _SCHEMA.replace(",\n    tokens INTEGER, metadata_json TEXT", ", tokens INTEGER")
    with closing(sqlite3.connect(path)) as db:
        db.executescript(schema)
        rows = []
        for session, messages in sessions.items():
            db.execute("INSERT INTO sessions (id, working_dir) VALUES (?, ?)", (session, "/w"))
            for m in messages:
                row = [session, m["role"], json.dumps(m["content"]), m["created"]]
                rows.append([*row, json.dumps(m["metadata"]) if "metadata" in m else None] if metadata else row)
        columns = "session_id, role, content_json, created_timestamp" + (", metadata_json" if metadata else "")
        marks = ", ".join("?" * (5 if metadata else 4))
        db.executemany(f"INSERT INTO messages ({columns}) VALUES ({marks})", rows)
        db.commit()
    return path


def test_session_database_holds_every_session(tmp_path: Path) -> None:
    """goose 1.10 and later keep every session in ``sessions.db``."""
    other = [_message("user", 1, {"type": "text", "text": "hi"}), _message("assistant", 2, _request("x1", "shell", {}))]
    path = _database(tmp_path / "sessions.db", {"20260105_1": _messages(), "20260105_2": other})
    with closing(sqlite3.connect(path)) as db:
        db.execute("UPDATE messages SET content_json = '[' WHERE id = 2")  # a message that does not decode
        db.commit()
    assert detect_format(path) == "goose"
    sessions = list(open_sessions(path))
    assert [(s.session, s.label) for s in sessions] == [
        ("20260105_1", f"{path}#20260105_1"),
        ("20260105_2", f"{path}#20260105_2"),
    ]
    evts = list(sessions[0].events())
    assert [c.call_id for c in calls(evts)] == ["toolu_03", "toolu_04", "toolu_06", "toolu_07"]
    assert [m.text for m in of(evts, UserMessage)] == ["Why are the Celery tasks not processed?", "restart redis"]
    assert sessions[0].report.skipped == {"invalid-json": 1, "orphan-result": 2}  # the lost request's answers
    assert [c.call_id for c in calls(list(sessions[1].events()))] == ["x1"]


def test_a_database_without_messages_is_said_to_hold_nothing_to_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """goose made the session, the user never sent a message: importing it
    says so and writes nothing, instead of ending in silence."""
    path = _database(tmp_path / "sessions.db", {"20260130_1": []})
    assert main(["import", str(path), "-o", str(tmp_path / "out.jsonl")]) == 2
    assert "holds no session with anything to import; nothing written" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()


def test_database_of_an_older_schema_and_other_databases(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    old = _database(tmp_path / "old" / "sessions.db", {"s": _messages()}, metadata=False)
    evts = list(next(open_sessions(old)).events())
    assert len(of(evts, UserMessage)) == 3  # without metadata, the summary counts as a prompt
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    with pytest.raises(UnknownFormatError, match="goose: an SQLite database without goose's messages table"):
        detect_format(other)
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    with pytest.raises(UnknownFormatError):
        detect_format(broken)


def test_a_database_that_goes_away_is_a_transcript_error(tmp_path: Path) -> None:
    path = _database(tmp_path / "sessions.db", {"s": _messages()})
    (session,) = open_sessions(path)
    with closing(sqlite3.connect(path)) as db:
        db.execute("DROP TABLE messages")
    with pytest.raises(TranscriptError, match="cannot be read as goose's session database"):
        list(session.events())
    _database(path.with_name("again.db"), {"s": _messages()})
    sessions = open_sessions(path.with_name("again.db"), "goose")  # detected now, read when iterated
    with closing(sqlite3.connect(path.with_name("again.db"))) as db:
        db.execute("DROP TABLE messages")
    with pytest.raises(TranscriptError, match="cannot be read as goose's session database"):
        list(sessions)


def test_a_bad_row_of_the_database_costs_that_row(tmp_path: Path) -> None:
    """A row whose content has types goose never writes, or nests too deeply
    to decode, is skipped and counted; the rows around it are imported."""
    path = _database(tmp_path / "sessions.db", {"s": _messages()})
    with closing(sqlite3.connect(path)) as db:
        db.execute("""UPDATE messages SET content_json = '[{"type": {"not": "a type"}}]' WHERE id = 3""")
        db.execute("UPDATE messages SET content_json = ? WHERE id = 5", ("[" * 5000 + "]" * 5000,))
        db.commit()
    (session,) = open_sessions(path)
    whole = calls(list(next(open_sessions(_database(tmp_path / "whole.db", {"s": _messages()}))).events()))
    evts = list(session.events())
    assert session.report.skipped["bad-record"] == 1
    assert session.report.skipped["too-deep"] == 1
    assert session.report.problems[0].startswith(f"{path}#messages[3]: TypeError")
    assert [c.call_id for c in calls(evts)] == [c.call_id for c in whole]  # rows 3 and 5 hold no call


def test_cells_stored_as_blobs_or_numbers_cost_no_other_row(tmp_path: Path) -> None:
    """SQLite keeps whatever a writer gave it: JSON stored as a BLOB is still
    the message, a number where JSON belongs costs that row alone, and a
    session whose id is a BLOB is read under its text."""
    whole = calls(list(next(open_sessions(_database(tmp_path / "whole.db", {"s": _messages()}))).events()))
    path = _database(tmp_path / "sessions.db", {"s": _messages(), "t": _messages()})
    with closing(sqlite3.connect(path)) as db:
        db.execute("UPDATE messages SET content_json = CAST(content_json AS BLOB) WHERE id = 2")
        db.execute("UPDATE messages SET content_json = 42 WHERE id = 3")
        db.execute("UPDATE messages SET session_id = CAST('t' AS BLOB) WHERE session_id = 't'")
        db.commit()
    s, t = open_sessions(path)
    assert (s.session, t.session) == ("s", "t")
    assert [c.call_id for c in calls(list(s.events()))] == [c.call_id for c in whole]  # row 3 holds no call
    assert s.report.skipped == {"not-a-message": 1}
    assert [c.call_id for c in calls(list(t.events()))] == [c.call_id for c in whole]


def test_a_database_without_column_types_holds_numbers_where_text_belongs(tmp_path: Path) -> None:
    """A table created without types keeps a number as a number: a numeric
    session id is read as its text, and a number where a message's JSON
    belongs costs that row alone."""
    path = tmp_path / "sessions.db"
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id, role, content_json, created_timestamp)")
        rows: list[tuple[object, ...]] = [(7, m["role"], json.dumps(m["content"]), m["created"]) for m in _messages()]
        rows.insert(2, (7, "assistant", 42, 1767600000))
        db.executemany(
            "INSERT INTO messages (session_id, role, content_json, created_timestamp) VALUES (?, ?, ?, ?)", rows
        )
        db.commit()
    whole = calls(list(next(open_sessions(_database(tmp_path / "whole.db", {"s": _messages()}))).events()))
    (session,) = open_sessions(path)
    assert session.session == "7"
    assert [c.call_id for c in calls(list(session.events()))] == [c.call_id for c in whole]
    assert session.report.skipped == {"not-a-message": 1}


@pytest.mark.parametrize("ids", [True, False], ids=["message-ids", "no-ids"])
def test_a_call_id_reused_after_its_call_was_answered_is_a_new_call(tmp_path: Path, ids: bool) -> None:
    """A model server that names every call ``call_0``: each answered
    request is its own call, so the loop shows (a message without an id is
    told by its line); a message written again with its ``id`` is a copy,
    not one more call."""
    ps = {"command": "docker compose ps"}
    lines: list[dict[str, Any]] = [METADATA]
    for n in range(3):
        named = {"id": f"msg_{n}"} if ids else {}
        lines.append(_message("assistant", 10, _request("call_0", "developer__shell", ps), **named))
        lines.append(_message("user", 10, _response("call_0", _ok("worker  Exit 1"))))
    if ids:
        lines.append(lines[-2])
    (session,) = open_sessions(write_lines(tmp_path / "20250616_142005.jsonl", lines))
    evts = list(session.events())
    assert [(c.call_id, c.step) for c in calls(evts)] == [("call_0", 1), ("call_0@2", 2), ("call_0@3", 3)]
    assert [r.call_id for r in of(evts, ToolResult)] == ["call_0", "call_0@2", "call_0@3"]
    assert longest_run(evts) == 3
    assert session.report.skipped == ({"duplicate-call": 1} if ids else {})
