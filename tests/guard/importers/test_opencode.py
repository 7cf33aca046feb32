"""OpenCode sessions: exports, ``run --format json`` output and storage
folders, synthetic (shaped like the real exports of DATA.md) and real."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from bus import ToolResult, UserMessage
from guard.importers import TranscriptError, UnknownFormatError, belongs_to_session, detect_format, open_sessions
from tests.guard.importers._transcripts import (
    calls,
    compactions,
    corpus_file,
    counts,
    longest_run,
    of,
    only,
    write_lines,
)

SESSION = "ses_39b2e52e8ffeokU5mBDCeUvc8t"
_T0 = 1771217988887


class Export:
    """An ``opencode export`` document, built a message at a time."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._clock = itertools.count(_T0, 1000)
        self.messages: list[dict[str, Any]] = []

    def _id(self, prefix: str) -> str:
        return f"{prefix}_c64d1ad1a{next(self._ids):03d}"

    def _part(self, message: dict[str, Any], **fields: Any) -> dict[str, Any]:
        part = {**fields, "id": self._id("prt"), "sessionID": SESSION, "messageID": message["info"]["id"]}
        message["parts"].append(part)
        return part

    def user(self, text: str, *, synthetic: str = "") -> None:
        info = {"role": "user", "time": {"created": next(self._clock)}, "agent": "build", "id": self._id("msg")}
        message: dict[str, Any] = {"info": info | {"sessionID": SESSION}, "parts": []}
        self._part(message, type="text", text=text)
        if synthetic:
            self._part(message, type="text", text=synthetic, synthetic=True)
        self._part(message, type="file", mime="text/plain", filename="a.ts", url="file:///w/a.ts")
        self.messages.append(message)

    def assistant(self, *steps: list[tuple[str, dict[str, Any]]]) -> None:
        """One assistant message; each step a list of tool states."""
        created = next(self._clock)
        info = {
            "role": "assistant",
            "time": {"created": created, "completed": created + 900},
            "modelID": "gpt-5.3-codex",
            "providerID": "openai",
            "finish": "tool-calls",
            "id": self._id("msg"),
            "sessionID": SESSION,
        }
        message: dict[str, Any] = {"info": info, "parts": []}
        for states in steps:
            self._part(message, type="step-start", snapshot="76a77821bfc8")
            self._part(message, type="reasoning", text="**Planning**")
            for tool, state in states:
                call = f"call_{next(self._ids):04d}"
                self._part(message, type="tool", callID=call, tool=tool, state=state)
            self._part(message, type="step-finish", reason="tool-calls", cost=0)
        self.messages.append(message)

    def document(self) -> dict[str, Any]:
        info = {
            "id": SESSION,
            "slug": "silent-nebula",
            "projectID": "51ce91990cdb80fb62489f7028ffc023d69077fd",
            "directory": "/w",
            "title": "t",
            "version": "1.2.5",
            "time": {"created": _T0, "updated": _T0 + 60000},
        }
        return {"info": info, "messages": self.messages}


def _done(tool_input: dict[str, Any], output: str, start: int, **metadata: Any) -> dict[str, Any]:
    return {
        "status": "completed",
        "input": tool_input,
        "output": output,
        "title": "t",
        "metadata": metadata,
        "time": {"start": start, "end": start + 50},
    }


def _failed(tool_input: dict[str, Any], error: str, start: int) -> dict[str, Any]:
    return {"status": "error", "input": tool_input, "error": error, "time": {"start": start, "end": start + 5}}


def _session() -> Export:
    e = Export()
    e.user("make the tests pass", synthetic="Called the Read tool with the following input: {}")
    read = {"filePath": "/w/a.ts"}
    e.assistant(
        [
            ("read", _done(read, "<content>1: a</content>", _T0 + 2000)),
            ("glob", _done({"pattern": "*.ts"}, "a.ts", _T0 + 2001)),
        ],
        [("bash", _done({"command": "bun test", "description": "Run tests"}, "1 fail", _T0 + 3000, exit=1))],
    )
    e.assistant(
        [("bash", _done({"command": "bun test", "description": "Run tests again"}, "1 fail", _T0 + 4000, exit=1))]
    )
    e.assistant(
        [
            (
                "apply_patch",
                _failed({"patchText": "*** Begin Patch"}, "Error: apply_patch verification failed", _T0 + 5000),
            )
        ]
    )
    e.assistant(
        [
            (
                "bash",
                _failed(
                    {"command": "rm -rf /"}, "The user rejected permission to use this specific tool call.", _T0 + 6000
                ),
            )
        ]
    )
    e.assistant([("bash", _done({"command": "bun test"}, "3 pass", _T0 + 7000, exit=0))])
    e.assistant([("bash", {"status": "running", "input": {"command": "bun dev"}, "time": {"start": _T0 + 8000}})])
    e.user("thanks")
    return e


def test_export_calls_steps_and_outcomes(tmp_path: Path) -> None:
    path = tmp_path / "session.json"
    path.write_text(json.dumps(_session().document(), indent=2))
    assert detect_format(path) == "opencode"
    (session,) = open_sessions(path)
    assert session.session == SESSION
    evts = list(session.events())
    assert [(c.tool, c.step) for c in calls(evts)] == [
        ("read", 1),
        ("glob", 1),
        ("bash", 2),
        ("bash", 3),
        ("apply_patch", 4),
        ("bash", 5),
        ("bash", 6),
        ("bash", 7),  # still running when exported: a call without a result
    ]
    assert calls(evts)[2].args == {"command": "bun test", "description": "Run tests"}
    assert calls(evts)[0].ts == (_T0 + 2000) / 1000
    results = of(evts, ToolResult)
    assert [(r.tool, r.is_error, r.denied_by) for r in results] == [
        ("read", False, None),
        ("glob", False, None),
        ("bash", True, None),  # exit code 1
        ("bash", True, None),
        ("apply_patch", True, None),
        ("bash", True, "user"),
        ("bash", False, None),
    ]
    assert results[4].content == "Error: apply_patch verification failed"
    assert [m.text for m in of(evts, UserMessage)] == ["make the tests pass", "thanks"]
    assert not session.report.skipped


@pytest.mark.parametrize("indent", [2, None])
def test_an_export_saved_with_the_line_opencode_prints_before_it_reads_as_the_export(
    tmp_path: Path, indent: int | None
) -> None:
    """``opencode export ses_... > session.json`` keeps the line OpenCode
    prints first (``Exporting session: ses_...``): the export reads as if
    the line were not there."""
    document = json.dumps(_session().document(), indent=indent)
    plain, saved = tmp_path / "plain.json", tmp_path / "saved.json"
    plain.write_text(document)
    saved.write_text(f"Exporting session: {SESSION}\n{document}")
    assert detect_format(saved) == "opencode"
    (session,) = open_sessions(saved)
    (expected,) = open_sessions(plain)
    assert [repr(e) for e in session.events()] == [repr(e) for e in expected.events()]
    assert not session.report.skipped


def test_text_before_what_is_no_json_document_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text("Exporting session: ses_x\n{ this is not JSON\n")
    with pytest.raises(TranscriptError, match="neither JSON Lines nor a JSON document"):
        detect_format(path)
    path.write_text("Exporting session: ses_x\n" + "[" * 200 + "]" * 200)
    with pytest.raises(TranscriptError, match="nests arrays or objects deeper than 100 levels"):
        detect_format(path)


def test_run_format_json_events(tmp_path: Path) -> None:
    """``opencode run --format json`` prints one event per line."""
    states = [
        ("bash", _done({"command": "echo hi"}, "hi\n", _T0, exit=0)),
        ("bash", _done({"command": "echo hi"}, "hi\n", _T0 + 10, exit=0)),
    ]
    lines: list[dict[str, Any]] = []
    for n, (tool, state) in enumerate(states):
        step = {"type": "step-start", "id": f"prt_s{n}", "sessionID": SESSION, "messageID": f"msg_{n}"}
        lines.append({"type": "step_start", "timestamp": _T0 + n, "sessionID": SESSION, "part": step})
        part = {"id": f"prt_{n}", "sessionID": SESSION, "messageID": f"msg_{n}", "type": "tool", "callID": f"call_{n}"}
        lines.append(
            {
                "type": "tool_use",
                "timestamp": _T0 + n,
                "sessionID": SESSION,
                "part": part | {"tool": tool, "state": state},
            }
        )
    lines.append(
        {"type": "text", "timestamp": _T0 + 99, "sessionID": SESSION, "part": {"type": "text", "text": "done"}}
    )
    lines.append({"type": "error", "timestamp": _T0 + 99, "sessionID": SESSION, "error": {"name": "x"}})
    path = write_lines(tmp_path / "run.jsonl", lines)
    (session,) = open_sessions(path)
    evts = list(session.events())
    assert session.session == SESSION
    assert [(c.call_id, c.step) for c in calls(evts)] == [("call_0", 1), ("call_1", 2)]
    assert longest_run(evts) == 2
    assert [r.content for r in of(evts, ToolResult)] == ["hi\n", "hi\n"]


def test_storage_session_reads_its_messages_and_parts(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    document = _session().document()
    session_file = storage / "session" / document["info"]["projectID"] / f"{SESSION}.json"
    session_file.parent.mkdir(parents=True)
    session_file.write_text(json.dumps(document["info"]))
    for message in document["messages"]:
        info = message["info"]
        (storage / "message" / SESSION).mkdir(parents=True, exist_ok=True)
        (storage / "message" / SESSION / f"{info['id']}.json").write_text(json.dumps(info))
        for part in message["parts"]:
            folder = storage / "part" / info["id"]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{part['id']}.json").write_text(json.dumps(part))
    broken = storage / "message" / SESSION / "msg_zzz.json"
    broken.write_text("{")
    (storage / "message" / SESSION / "msg_zzzz.json").write_text("[]")
    some_part = next((storage / "part").glob("*/*.json"))
    assert belongs_to_session(broken)
    assert belongs_to_session(some_part)
    assert not belongs_to_session(session_file)
    (session,) = open_sessions(session_file)
    evts = list(session.events())
    assert session.session == SESSION
    assert len(calls(evts)) == 8
    assert [r.is_error for r in of(evts, ToolResult)] == [False, False, True, True, True, True, False]
    assert session.report.skipped == {"invalid-json": 1}


def test_odd_messages_and_parts_are_passed_over(tmp_path: Path) -> None:
    document = _session().document()
    document["messages"][1:1] = [
        "junk",
        {"info": {"role": "system"}, "parts": []},
        {"info": {"role": "user", "time": None}, "parts": [{"type": "file", "url": "file:///w/a.ts"}]},
        {"info": {"role": "assistant"}, "parts": ["junk", {"type": "tool", "callID": "c9", "tool": "x"}]},
    ]
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(document))
    evts = only(path)
    assert calls(evts)[0].call_id == "c9"
    assert calls(evts)[0].args is None
    assert len(calls(evts)) == 9


def test_not_opencode(tmp_path: Path) -> None:
    path = tmp_path / "info.json"
    path.write_text(json.dumps({"info": {}, "messages": [{"text": "hi"}]}))
    with pytest.raises(UnknownFormatError, match="opencode: neither an export"):
        detect_format(path)


# calls, errors (failed parts and commands that exited non-zero), longest identical run
REAL = {
    "ses_39b5bd57fffeoHgocdtybSVa3d": (16, 1),
    "ses_39bc72f63ffeQb8egYBpyTrCNr": (39, 2),
    "ses_39b5d713cffeRgAoxPIwS3Plus": (2, 0),
    "ses_39b623ce7ffeILPe9UgDcyGicH": (15, 0),
    "ses_39b4c1891ffezxPVc5OPmcqF33": (4, 0),
    "ses_39b569d9bffepYd1SOgyi0Fp1f": (24, 2),
    "ses_39c0a3da8ffeFQWvKTGUJWivpv": (37, 3),
    "ses_39b2e52e8ffeokU5mBDCeUvc8t": (25, 0),
}


def test_real_exports() -> None:
    folder = corpus_file("opencode/session__jolly-eagle__ses_39b5d713cffeRgAoxPIwS3Plus.json").parent
    found = {}
    for path in sorted(folder.glob("*.json")):
        (session,) = open_sessions(path)
        calls_made, errors, run = counts(list(session.events()))
        assert run == 1
        assert not session.report.skipped
        found[session.session] = (calls_made, errors)
    assert found == REAL


def test_a_compaction_part_is_imported_as_a_compaction(tmp_path: Path) -> None:
    e = Export()
    e.user("fix it")
    read = {"filePath": "/w/a.ts"}
    for n in range(3):
        if n == 2:
            e.user("/compact")
            e._part(e.messages[-1], type="compaction", auto=False)
        e.assistant([("read", _done(read, "<content>1: a</content>", _T0 + 1000 * n))])
    path = tmp_path / "export.json"
    path.write_text(json.dumps(e.document()))
    assert compactions(only(path)) == ["read", "read", "compacted", "read"]


def test_a_call_id_reused_after_its_call_was_answered_is_a_new_call(tmp_path: Path) -> None:
    """A model server that names every call ``call_0``: each tool part is
    its own call, so the loop shows. ``run --format json`` prints a
    completed part again when it changes (pruning marks its output
    compacted): the same part, a copy, not one more call."""

    def tool_use(part_id: str, n: int, **time: int) -> dict[str, Any]:
        state = _done({"command": "ls"}, "a.ts", _T0 + n)
        state["time"] |= time
        part = {"id": part_id, "sessionID": SESSION, "messageID": "msg_1", "type": "tool", "callID": "call_0"}
        return {
            "type": "tool_use",
            "timestamp": _T0 + n,
            "sessionID": SESSION,
            "part": part | {"tool": "bash", "state": state},
        }

    def step_start(n: int) -> dict[str, Any]:
        part = {"type": "step-start", "id": f"prt_s{n}", "sessionID": SESSION, "messageID": "msg_1"}
        return {"type": "step_start", "timestamp": _T0 + n, "sessionID": SESSION, "part": part}

    lines = [
        step_start(1),
        tool_use("prt_1", 1),
        step_start(2),
        tool_use("prt_2", 2),
        tool_use("prt_1", 1, compacted=9),
    ]
    lines += [step_start(3), tool_use("prt_3", 3), tool_use("prt_4", 4)]  # one response, the same id twice
    (session,) = open_sessions(write_lines(tmp_path / "run.jsonl", lines))
    evts = list(session.events())
    issued = ["call_0", "call_0@2", "call_0@3", "call_0@3.2"]
    assert [(c.call_id, c.step) for c in calls(evts)] == list(zip(issued, [1, 2, 3, 3], strict=True))
    assert [r.call_id for r in of(evts, ToolResult)] == issued
    assert longest_run(evts) == 4
    assert session.report.skipped == {"duplicate-call": 1, "orphan-result": 1}
