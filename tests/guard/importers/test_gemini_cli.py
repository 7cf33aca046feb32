"""gemini-cli recordings: the legacy JSON document (real) and JSON Lines (synthetic)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bus import AgentStatus, ToolCall, ToolResult, UserMessage
from guard.importers import belongs_to_session, detect_format, open_sessions
from tests.guard.importers._transcripts import calls, corpus_file, iso, longest_run, of, only, write_lines

POMODORO = "gemini-cli/gemini-cli-pomodoro-timer.json"


def test_single_json_recording() -> None:
    path = corpus_file(POMODORO)
    assert detect_format(path) == "gemini-cli"
    (session,) = open_sessions(path)
    assert session.session == "0b23371a-ce2e-4b1c-81a0-44af5d94d9ce"
    evts = list(session.events())
    assert len(calls(evts)) == 11
    assert longest_run(evts) == 1
    assert len(of(evts, UserMessage)) == 5


def test_calls_of_later_responses_in_one_message_get_their_own_steps() -> None:
    evts = only(corpus_file(POMODORO))
    # One "gemini" message holds three write_file calls, each made after the
    # previous one finished: three model responses, not one.
    assert [c.step for c in calls(evts)][:4] == [1, 2, 3, 5]


def test_failed_replace_is_imported_exactly() -> None:
    evts = only(corpus_file(POMODORO))
    (failed,) = [r for r in of(evts, ToolResult) if r.is_error]
    assert failed.call_id == "replace-1761077322005-e180d6d44397f"
    assert failed.tool == "replace"
    assert failed.ts == iso("2025-10-21T20:08:46.604Z")
    assert failed.content.startswith("A secondary check by an LLM determined that no changes were necessary")
    assert failed.denied_by is None
    call = next(c for c in calls(evts) if c.call_id == failed.call_id)
    assert call.ts == 1761077322.005
    assert call.args["file_path"] == "/Users/yoavfarhi/dev/pomodoro/gemini/script.js"


def _call(call_id: str, status: str, result: Any, **extra: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "name": "run_shell_command",
        "args": {"command": "ls"},
        "status": status,
        "result": result,
        "timestamp": "2025-01-01T00:00:05Z",
        **extra,
    }


@pytest.mark.parametrize(
    ("output", "failed"),
    [
        ("Output: python: command not found\nExit Code: 127\nProcess Group PGID: 654250", True),
        ("Command: make\nDirectory: (root)\nOutput: ok\nError: (none)\nExit Code: 2\nSignal: (none)", True),
        ("Output: (empty)\nExit Code: 0\nProcess Group PGID: 4242", False),
        ("Output: the test printed Exit Code: 1\nand went on\nExit Code: 0\nProcess Group PGID: 1", False),
        (
            "Command was automatically cancelled because it exceeded the timeout of 5.0 minutes without output."
            " There was no output before it was cancelled.",
            True,
        ),
        (
            "Command was cancelled by user before it could complete. Below is the output before it was cancelled:\nok",
            True,
        ),
        ("Output: Command was cancelled by user before it could complete.\nExit Code: 0", False),  # a command's output
    ],
)
def test_a_shell_command_recorded_as_a_success_fails_by_its_exit_code(
    tmp_path: Path, output: str, failed: bool
) -> None:
    """The recording marks a shell command that ran as a success whatever its
    exit code, which only the output's trailer tells; the live hook reads the
    same trailer, so a replay sees the failures the guard saw."""
    message = {
        "id": "m2",
        "type": "gemini",
        "timestamp": "2025-01-01T00:00:02Z",
        "content": "",
        "toolCalls": [_call("run_shell_command_1735689602000_0", "success", [_response(output)])],
    }
    meta = {"sessionId": "abcdef12-0000-0000-0000-000000000000", "projectHash": "h"}
    path = write_lines(tmp_path / "chats" / "session-2025-01-01T00-00-abcdef12.jsonl", [meta, message])
    (result,) = of(only(path), ToolResult)
    assert result.is_error is failed


def _response(output: str) -> dict[str, Any]:
    return {"functionResponse": {"name": "run_shell_command", "response": {"output": output}}}


def test_jsonl_recording_with_updates_parallel_calls_and_a_subagent(tmp_path: Path) -> None:
    chats = tmp_path / "chats"
    parent_id = "abcdef12-0000-0000-0000-000000000000"
    first = {
        "id": "m2",
        "type": "gemini",
        "timestamp": "2025-01-01T00:00:02Z",
        "content": "",
        "toolCalls": [_call("run_shell_command-1735689602000-aa", "executing", None)],
    }
    final = dict(
        first,
        toolCalls=[
            _call(
                "run_shell_command-1735689602000-aa",
                "success",
                [{"functionResponse": {"response": {"output": "a.txt"}}}],
            ),
            _call("run_shell_command-1735689602001-bb", "error", [{"functionResponse": {"response": {"error": "x"}}}]),
            _call("run_shell_command-1735689602002-cc", "cancelled", [], resultDisplay="cancelled by user"),
            _call("no-time-in-this-id", "scheduled", None),
            "junk",
        ],
    )
    main = [
        {"sessionId": parent_id, "projectHash": "h", "startTime": "2025-01-01T00:00:00Z"},
        {"id": "m1", "type": "user", "timestamp": "2025-01-01T00:00:01Z", "content": [{"text": "list files"}]},
        first,
        {"$set": {"lastUpdated": "2025-01-01T00:00:03Z"}},
        final,
        {"id": "m3", "type": "info", "timestamp": "2025-01-01T00:00:06Z", "content": "note"},
        {"id": "m4", "type": "gemini", "timestamp": "2025-01-01T00:00:07Z", "content": "done"},
        {"$rewindTo": "m4"},
    ]
    path = write_lines(chats / "session-2025-01-01T00-00-abcdef12.jsonl", main, torn='{"id": "m5"')
    sub = write_lines(
        chats / parent_id / "sub1.jsonl",
        [
            {"sessionId": "sub1", "projectHash": "h", "kind": "subagent"},
            {"id": "s1", "type": "user", "timestamp": "2025-01-01T00:00:03Z", "content": "look around"},
            {
                "id": "s2",
                "type": "gemini",
                "timestamp": "2025-01-01T00:00:04Z",
                "toolCalls": [
                    {
                        "id": "glob-1735689604000-dd",
                        "name": "glob",
                        "args": {},
                        "status": "success",
                        "result": [{"text": "plain part"}],
                        "timestamp": "2025-01-01T00:00:04Z",
                    }
                ],
            },
        ],
    )
    assert detect_format(path) == "gemini-cli"
    assert belongs_to_session(sub)
    assert not belongs_to_session(path)
    assert not belongs_to_session(write_lines(tmp_path / "x" / "y.jsonl", []))
    (session,) = open_sessions(path)
    evts = list(session.events())
    assert session.report.skipped == {"torn": 1}
    assert [(s.agent.id, s.parent) for s in of(evts, AgentStatus)] == [("main", None), ("sub1", "main")]
    main_calls = calls(evts, "main")
    assert [c.step for c in main_calls] == [1, 1, 1, 1]  # created together, before any finished
    results = {r.call_id: r for r in of(evts, ToolResult)}
    assert results["run_shell_command-1735689602000-aa"].content == "a.txt"
    assert (
        results["run_shell_command-1735689602001-bb"].content,
        results["run_shell_command-1735689602001-bb"].is_error,
    ) == ("x", True)
    cancelled = results["run_shell_command-1735689602002-cc"]
    assert (cancelled.content, cancelled.denied_by) == ("cancelled by user", "user")
    assert "no-time-in-this-id" not in results  # still scheduled: a call without a result
    assert results["glob-1735689604000-dd"].content == "plain part"
    assert [(m.agent.id, m.text) for m in of(evts, UserMessage)] == [("main", "list files"), ("sub1", "look around")]
    assert [type(e).__name__ for e in evts].count("ToolCall") == 5


_HEAD = {"sessionId": "abcdef12-0000-0000-0000-000000000000", "projectHash": "h"}


def _answered(n: int, calls: Any) -> dict[str, Any]:
    """A ``gemini`` message at second ``n``; ``calls`` its ``toolCalls``."""
    return {"id": f"m{n}", "type": "gemini", "timestamp": f"2025-01-01T00:00:{n:02d}Z", "toolCalls": calls}


def _shell(call_id: str) -> dict[str, Any]:
    return _call(call_id, "success", [{"functionResponse": {"response": {"output": "ok"}}}])


def test_a_record_the_importer_cannot_use_costs_that_record_and_names_its_line(tmp_path: Path) -> None:
    lines = [_HEAD, _answered(1, [_shell("c1")]), _answered(2, 5), _answered(3, [_shell("c3")])]
    lines += [_answered(4, [_shell("c4")]), _answered(5, True)]
    path = write_lines(tmp_path / "chats" / "session-2025-01-01T00-00-abcdef12.jsonl", lines)
    (session,) = open_sessions(path)
    assert [c.call_id for c in calls(list(session.events()))] == ["c1", "c3", "c4"]
    assert session.report.skipped == {"bad-record": 2}
    assert session.report.problems == [
        f"{path}:3: TypeError: 'int' object is not iterable",
        f"{path}:6: TypeError: 'bool' object is not iterable",
    ]


def test_tool_calls_that_are_no_list_are_named_and_a_result_of_one_part_is_read(tmp_path: Path) -> None:
    one_part = _call("c2", "success", {"functionResponse": {"response": {"output": "one part"}}})
    lines = [
        _HEAD,
        _answered(1, {"c1": _shell("c1")}),
        _answered(2, [one_part, _call("c3", "success", "a text"), _call("c4", "success", ["text", {"text": "part"}])]),
        _answered(3, [_call("c5", "success", 7)]),
    ]
    path = write_lines(tmp_path / "chats" / "session-2025-01-01T00-00-abcdef12.jsonl", lines)
    (session,) = open_sessions(path)
    evts = list(session.events())
    assert [(r.call_id, r.content) for r in of(evts, ToolResult)] == [
        ("c2", "one part"),
        ("c3", "a text"),
        ("c4", "text\npart"),
    ]
    assert session.report.problems == [
        f"{path}:2: TypeError: toolCalls is dict, not a list",
        f"{path}:4: TypeError: 'int' object is not iterable",
    ]


def test_an_unreadable_subagent_recording_costs_only_itself(tmp_path: Path) -> None:
    chats = tmp_path / "chats"
    path = write_lines(chats / "session-2025-01-01T00-00-abcdef12.jsonl", [_HEAD, _answered(1, [_shell("c1")])])
    write_lines(chats / _HEAD["sessionId"] / "sub1.jsonl", [{"sessionId": "sub1"}, _answered(2, [_shell("s1")])])
    (chats / _HEAD["sessionId"] / "sub2.jsonl").symlink_to("gone.jsonl")
    (session,) = open_sessions(path)
    assert [(c.agent.id, c.call_id) for c in calls(list(session.events()))] == [("main", "c1"), ("sub1", "s1")]
    assert session.report.skipped == {"unreadable-subagent": 1}
    assert session.report.problems == [
        f"subagent not read: no such file: '{chats / _HEAD['sessionId'] / 'sub2.jsonl'}'"
    ]


def test_single_line_metadata_only_recording_has_no_events(tmp_path: Path) -> None:
    path = tmp_path / "session-x.jsonl"
    path.write_text(json.dumps({"sessionId": "only", "projectHash": "h"}) + "\n")
    (session,) = open_sessions(path)
    assert session.session == "only"
    assert list(session.events()) == []


def test_document_with_odd_entries(tmp_path: Path) -> None:
    doc = {
        "sessionId": "d",
        "messages": [
            "junk",
            {"type": "user", "content": "  "},
            {
                "type": "gemini",
                "timestamp": "2025-01-01T00:00:01Z",
                "toolCalls": [
                    {"name": "a", "status": "success", "result": [{"functionResponse": {"response": "raw"}}]},
                    {"name": "b", "status": "success", "result": [{"functionResponse": {"response": {"other": 1}}}]},
                ],
            },
        ],
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc, indent=2))
    evts = only(path)
    assert [(r.call_id, r.content) for r in of(evts, ToolResult)] == [("1:0", "raw"), ("1:1", '{"other":1}')]
    assert not of(evts, UserMessage)
    assert isinstance(calls(evts)[0], ToolCall)


def test_a_recording_followed_by_other_lines_is_still_read_and_the_lines_counted(tmp_path: Path) -> None:
    """A whole document recording on its first line, then anything (the
    same document again, a stray object): its messages are read, the other
    lines counted, never a session of nothing."""
    document = corpus_file(POMODORO).read_text().replace("\n", " ")
    path = tmp_path / "twice.json"
    path.write_text(document + "\n" + document + "\n" + '{"note": 1}\n')
    (session,) = open_sessions(path)
    assert len(calls(list(session.events()))) == 11
    assert session.report.skipped == {"bad-record": 2}


def test_a_message_record_without_an_id_or_a_type_is_counted(tmp_path: Path) -> None:
    header = {"sessionId": "s", "projectHash": "p"}
    message = {"id": "m1", "type": "gemini", "toolCalls": [{"id": "c1", "name": "ls", "status": "success"}]}
    path = write_lines(
        tmp_path / "session-1.jsonl",
        [header, {**message, "id": 12345}, {k: v for k, v in message.items() if k != "type"}, {"$set": {}}, message],
    )
    (session,) = open_sessions(path)
    assert len(calls(list(session.events()))) == 1
    assert session.report.skipped == {"bad-record": 2}


@pytest.mark.parametrize(
    "wrapped",
    [["item"], [{"type": "user"}], [1, 2, 3], [{"action": "run"}, {"observation": "run"}]],
    ids=["one", "object", "three", "pair"],
)
def test_a_message_that_is_a_list_is_counted_not_dropped(tmp_path: Path, wrapped: list[Any]) -> None:
    doc = json.loads(corpus_file(POMODORO).read_text())
    doc["messages"][1] = wrapped
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    (session,) = open_sessions(path)
    list(session.events())
    assert session.report.skipped == {"not-an-object": 1}


def test_an_exported_session_keeps_only_the_users_own_words_as_user_turns(tmp_path: Path) -> None:
    """``/export-session`` writes the recording with every tool result also
    as a user turn of ``functionResponse`` parts, beside gemini-cli's own
    context and notices: none of them is the user's, and each would end
    the loop counts as a new user message would."""

    def user(*parts: dict[str, Any]) -> dict[str, Any]:
        return {"type": "user", "timestamp": "2026-06-14T10:00:00Z", "content": list(parts)}

    def write(n: int) -> dict[str, Any]:
        call = {
            "id": f"write_file__write_file_178143862{n}000_0",
            "name": "write_file",
            "args": {"file_path": "plan.md"},
            "status": "error",
            "result": [{"functionResponse": {"name": "write_file", "response": {"error": "denied by policy"}}}],
        }
        return {"type": "gemini", "timestamp": "2026-06-14T10:00:01Z", "toolCalls": [call]}

    responded = {"functionResponse": {"id": "x", "name": "write_file", "response": {"error": "denied by policy"}}}
    editor = "Here is the user's editor context as a JSON object. This is for your information only.\n```json\n{}\n```"
    messages = [
        user({"text": "<session_context>\nThis is the Gemini CLI."}),
        user({"text": "write the plan"}),
        *[m for n in range(5) for m in (write(n), user(responded))],
        user({"text": "User has manually exited Plan Mode. Switching to Default mode (edits need confirmation)."}),
        user({"text": editor}),
        user({"text": "System: Please continue."}),  # sent by gemini-cli after a malformed answer
        user({"text": "now build it"}),
        {"type": "bob-shell", "timestamp": "2026-06-14T10:00:09Z", "toolCalls": [{"id": "tool-1", "name": "ls"}]},
    ]
    doc = {"sessionId": "e", "projectHash": "p", "kind": "main", "messageCount": len(messages), "messages": messages}
    path = tmp_path / "gemini_session.json"
    path.write_text(json.dumps(doc))
    evts = only(path)
    assert [m.text for m in of(evts, UserMessage)] == ["write the plan", "now build it"]
    assert [c.tool for c in calls(evts)] == ["write_file"] * 5 + ["ls"]


@pytest.mark.parametrize(
    "call_id",
    ["write_file-{made}-{n:012x}", "write_file_{made}_{n}", "write_file__write_file_{made}_{n}"],
    ids=["older", "current", "recorded-2026"],
)
def test_calls_made_after_the_previous_one_finished_are_later_responses(tmp_path: Path, call_id: str) -> None:
    """gemini-cli keeps all the calls of one turn in one message; a call id
    names the moment the model made it, so a call made after the previous
    call finished came from a later model response."""
    start = 1760000000000

    def call(n: int, made: int, finished: int) -> dict[str, Any]:
        stamp = datetime.fromtimestamp(finished / 1000, UTC).isoformat()
        return {
            "id": call_id.format(made=made, n=n),
            "name": "write_file",
            "args": {"file_path": f"f{n}.ts"},
            "status": "success",
            "timestamp": stamp,
            "result": [{"functionResponse": {"response": {"output": "ok"}}}],
        }

    calls_made = [call(0, start, start + 500), call(1, start + 100, start + 600), call(2, start + 900, start + 1200)]
    doc = {
        "sessionId": "s",
        "messages": [{"type": "gemini", "timestamp": "2025-10-09T09:33:20Z", "toolCalls": calls_made}],
    }
    path = tmp_path / "session.json"
    path.write_text(json.dumps(doc, indent=2))
    assert [c.step for c in calls(only(path))] == [1, 1, 2]  # the first two ran in parallel


CHECKPOINT = "gemini-cli/checkpoint-trajectory.json"


def test_a_real_chat_save_checkpoint() -> None:
    path = corpus_file(CHECKPOINT)
    assert detect_format(path) == "gemini-cli"
    (session,) = open_sessions(path)
    evts = list(session.events())
    # 5 errors the recording marks, and 3 shell commands whose only sign of failure is a non-zero exit code
    assert (len(calls(evts)), sum(r.is_error for r in of(evts, ToolResult)), longest_run(evts)) == (45, 8, 1)
    texts = [m.text for m in of(evts, UserMessage)]
    assert texts[0] == "agent teams shouldn't persist, I want it to ask me every boot"
    assert not [t for t in texts if t.startswith(("<session_context>", "<state_snapshot>"))]


def test_a_checkpoint_in_either_form_is_one_session_of_calls_and_their_responses(tmp_path: Path) -> None:
    history = [
        {"role": "user", "parts": [{"text": "<session_context>\nThis is the Gemini CLI."}]},
        {"role": "user", "parts": [{"text": "find the config loader"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Looking.", "thought": True},
                {"functionCall": {"name": "search_file_content", "args": {"pattern": "load"}, "id": "a1"}},
                {"functionCall": {"name": "read_file", "args": {"file_path": "cfg.py"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "read_file", "response": {"output": "def load(): ..."}}},
                {"functionResponse": {"id": "a1", "name": "search_file_content", "response": {"error": "bad regex"}}},
            ],
        },
        {"role": "model", "parts": [{"text": "It is in cfg.py."}]},
        "not a content",
        {"role": "user", "parts": "not a list"},
        {"role": "user", "parts": [{"text": "  "}, {"inlineData": {"mimeType": "image/png"}}]},
    ]
    for name, document in (
        ("checkpoint-a.json", {"history": history, "authType": "gemini-api-key"}),
        ("b.json", history),
    ):
        path = tmp_path / name
        path.write_text(json.dumps(document))
        assert detect_format(path) == "gemini-cli"
        evts = only(path)
        assert [(c.call_id, c.tool, c.step) for c in calls(evts)] == [
            ("a1", "search_file_content", 1),
            ("1:2", "read_file", 1),
        ]
        assert [(r.call_id, r.content, r.is_error) for r in of(evts, ToolResult)] == [
            ("1:2", "def load(): ...", False),
            ("a1", "bad regex", True),
        ]
        assert [m.text for m in of(evts, UserMessage)] == ["find the config loader"]


STREAM = "gemini-cli/stream-json-two-runs.jsonl"
FIRST_RUN = "ff6a4993-88ec-46d0-8dbd-a0513f91873c"
SECOND_RUN = "25a5d239-3906-447e-b312-c639ba39ecd0"


def test_headless_stream_json_output_is_imported() -> None:
    """``gemini -p ... --output-format stream-json``, as the real CLI prints it
    (``tests/data/transcripts/DATA.md``): the session is the first run's ``session_id``."""
    path = corpus_file(STREAM)
    assert detect_format(path) == "gemini-cli"
    (session,) = open_sessions(path)
    evts = list(session.events())
    assert session.session == FIRST_RUN
    assert (len(calls(evts)), sum(r.is_error for r in of(evts, ToolResult)), longest_run(evts)) == (12, 6, 5)
    assert session.report.summary() == "nothing skipped"
    assert session.model == "gemini-2.5-flash"
    assert [(m.agent.id, m.text) for m in of(evts, UserMessage)] == [
        ("main", "count the betas in notes.txt"),
        (SECOND_RUN, "count the betas again"),
    ]
    first = calls(evts)[0]
    assert (first.call_id, first.tool, first.args) == (
        "run_shell_command__run_shell_command_1796428406393_0",
        "run_shell_command",
        {"command": "ls"},
    )
    assert first.ts == iso("2026-12-04T23:53:26.501Z")


def test_stream_json_results_are_matched_by_tool_id_and_failures_are_errors() -> None:
    """A result names its call by ``tool_id``; a failure is ``status: "error"``
    with what the model read in ``error.message``; a call the guard's own
    ``BeforeTool`` hook denied (``policy_violation``) never ran; a shell
    command that printed nothing shows its exit code."""
    results = [(r.content[:30], r.is_error, r.denied_by) for r in of(only(corpus_file(STREAM)), ToolResult)]
    assert results == [
        ("notes.txt", False, None),
        ("", False, None),  # read_file shows nothing of what it read
        ("File not found: /tmp/gstream-8", True, None),
        ("Command exited with code: 3", True, None),
        ("boom", False, None),  # exited 2 after printing: the output does not say
        ("1", False, None),
        ("1", False, None),
        ("Tool execution blocked: loop-d", True, "policy"),
        ("Tool execution blocked: loop-d", True, "policy"),
        ("Agent execution stopped by hoo", True, None),
        ("", False, None),
        ('Tool "run_shell_command" not f', True, None),
    ]


def test_stream_json_steps_are_model_responses_and_each_run_is_an_agent() -> None:
    """The calls of one response (two reads asked for together, a call after
    the response's text) share a step. A second run appended to the file is
    a fresh conversation: an agent of its own, its steps counted anew."""
    evts = only(corpus_file(STREAM))
    assert [(c.agent.id, c.step, c.tool) for c in calls(evts)][:3] == [
        ("main", 1, "run_shell_command"),
        ("main", 2, "read_file"),
        ("main", 2, "read_file"),
    ]
    assert [(c.agent.id, c.step) for c in calls(evts)][-2:] == [(SECOND_RUN, 1), (SECOND_RUN, 2)]
    assert [(s.agent.id, s.parent) for s in of(evts, AgentStatus)] == [("main", None), (SECOND_RUN, None)]


def test_stream_json_of_a_harness_and_of_a_resumed_session(tmp_path: Path) -> None:
    """A harness's own note (a prompt without the CLI's ``timestamp``) is no
    user message; a run that resumes the first run's session goes on as
    ``main``; a tool_id used again is a new call, a result without a call is
    counted, and ``error`` and ``result`` events are no events of the log."""

    def event(kind: str, second: int, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "timestamp": f"2026-01-30T06:10:{second:02d}.000Z", **fields}

    def use(second: int, tool_id: str) -> dict[str, Any]:
        return event("tool_use", second, tool_name="glob", tool_id=tool_id, parameters={"pattern": "*"})

    def done(second: int, tool_id: str) -> dict[str, Any]:
        return event("tool_result", second, tool_id=tool_id, status="success", output="a.txt")

    init = event("init", 1, session_id="s1", model="gemini-3-pro-preview")
    lines = [
        {"type": "message", "role": "user", "content": "Figma URL: x", "ts": "2026-01-30T06:09:46.992778"},
        init,
        event("message", 2, role="user", content="build it"),
        event("message", 3, role="assistant", content="Look", delta=True),
        event("message", 3, role="assistant", content="ing.", delta=True),
        use(4, "t1"),
        done(5, "t1"),
        dict(init, timestamp="2026-01-30T06:10:06.000Z"),
        use(7, "t1"),
        done(8, "t1"),
        done(9, "t9"),
        event("error", 9, severity="warning", message="Loop detected, stopping execution"),
        event("result", 10, status="success", stats={}),
    ]
    (session,) = open_sessions(write_lines(tmp_path / "transcript.jsonl", lines))
    evts = list(session.events())
    assert [(m.ts, m.text) for m in of(evts, UserMessage)] == [(iso("2026-01-30T06:10:02"), "build it")]
    assert [(c.agent.id, c.call_id, c.step) for c in calls(evts)] == [("main", "t1", 1), ("main", "t1@2", 2)]
    assert session.report.skipped == {"orphan-result": 1}
    assert [type(e).__name__ for e in evts] == [
        "AgentStatus",
        "UserMessage",
        *("ToolCall", "ToolResult") * 2,
    ]
