"""Cline and Roo Code task histories, synthetic: shaped like the real task
folders DATA.md names, which carry no licence and so are not shipped; and
Cline 4's session files, real (from Cline's own fixtures) and synthetic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bus import ToolResult, UserMessage
from guard.importers import TranscriptError, UnknownFormatError, belongs_to_session, detect_format, open_sessions
from tests.guard.importers._transcripts import calls, corpus_file, longest_run, of, only

TASK = "1777073160794"
ENV = "<environment_details>\n# Visual Studio Code Visible Files\n(No visible files)\n</environment_details>"
TODO = "\n\n\t\t\t\t# TODO LIST UPDATE REQUIRED - You MUST include the task_progress parameter in your NEXT tool call."


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _user(*texts: str, ts: int | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user", "content": [_text(t) for t in texts]}
    if ts is not None:
        message["ts"] = ts
    return message


def _uses(*uses: tuple[str, str, dict[str, Any]], ts: int | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "thinking", "thinking": "...", "signature": "x"}]
    content += [{"type": "tool_use", "id": i, "name": n, "input": a, "call_id": i} for i, n, a in uses]
    message: dict[str, Any] = {"role": "assistant", "content": content, "modelInfo": {"modelId": "m"}}
    if ts is not None:
        message["ts"] = ts
    return message


def _native_task() -> list[dict[str, Any]]:
    """Cline with native tool calls: the results come back as text blocks
    opening ``[<tool> for '<what>'] Result:``, one per call, in order."""
    t = 1777073160794
    read = {"path": "src/a.ts", "task_progress": "- [ ] read"}
    return [
        _user("<task>\nMake the tests pass\n</task>", "\n# task_progress RECOMMENDED\n", ENV, ts=t),
        _uses(("toolu_1", "read_file", read), ("toolu_2", "list_files", {"path": "src"}), ts=t + 1000),
        _user(
            "[read_file for 'src/a.ts'] Result:\n1 | export const a = 1",
            "[list_files for 'src'] Result:\na.ts",
            TODO,
            ENV,
        ),
        _uses(("toolu_3", "execute_command", {"command": "npm test", "requires_approval": False}), ts=t + 3000),
        _user("[execute_command for 'npm test'] Result:\nCommand failed with exit code 1.\nOutput:\n1 failing", ENV),
        _uses(("toolu_4", "execute_command", {"command": "npm test", "requires_approval": False})),
        _user("[execute_command for 'npm test'] Result:\nCommand executed.\nOutput:\nExit code: 0\n3 passing", ENV),
        _uses(("toolu_5", "replace_in_file", {"path": ".env", "diff": "..."})),
        _user("[replace_in_file for '.env'] Result:\nThe user denied this operation. The file was not updated.", ENV),
        _uses(("toolu_6", "read_file", {"path": "missing.ts"})),
        _user(
            "[read_file for 'missing.ts'] Result:\n"
            "The tool execution failed with the following error:\n<error>\nENOENT\n</error>",
            ENV,
        ),
        {"role": "assistant", "content": [_text("I am done.")]},
        _user("[ERROR] You did not use a tool in your previous response! Please retry with a tool use.", ENV),
        _uses(("toolu_7", "attempt_completion", {"result": "Done"})),
        _user(
            "[attempt_completion] Result:\nDone",
            "The user has provided feedback on the results.\n<feedback>\nalso update the docs\n</feedback>",
            ENV,
        ),
        _uses(("toolu_8", "read_file", {"path": "README.md"})),  # the task ends before the result
    ]


def _write(folder: Path, history: list[Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "api_conversation_history.json"
    path.write_text(json.dumps(history))
    (folder / "ui_messages.json").write_text(json.dumps([{"ts": 1, "type": "say", "say": "text", "text": "x"}]))
    (folder / "task_metadata.json").write_text(json.dumps({"files_in_context": []}))
    return path


def test_native_tool_calls_answered_by_result_text(tmp_path: Path) -> None:
    path = _write(tmp_path / "tasks" / TASK, _native_task())
    assert detect_format(path) == "cline"
    assert belongs_to_session(path.parent / "ui_messages.json")
    assert belongs_to_session(path.parent / "task_metadata.json")
    assert not belongs_to_session(path)
    (session,) = open_sessions(path)
    assert session.session == TASK
    evts = list(session.events())
    assert [(c.call_id, c.tool, c.step) for c in calls(evts)] == [
        ("toolu_1", "read_file", 1),
        ("toolu_2", "list_files", 1),
        ("toolu_3", "execute_command", 2),
        ("toolu_4", "execute_command", 3),
        ("toolu_5", "replace_in_file", 4),
        ("toolu_6", "read_file", 5),
        ("toolu_7", "attempt_completion", 7),
        ("toolu_8", "read_file", 8),
    ]
    assert calls(evts)[0].args == {"path": "src/a.ts", "task_progress": "- [ ] read"}
    assert calls(evts)[0].ts == 1777073161.794
    assert calls(evts)[-1].ts == 1777073163.794  # a message without ts keeps the last time
    results = of(evts, ToolResult)
    assert [(r.call_id, r.is_error, r.denied_by) for r in results] == [
        ("toolu_1", False, None),
        ("toolu_2", False, None),
        ("toolu_3", True, None),
        ("toolu_4", False, None),
        ("toolu_5", True, "user"),
        ("toolu_6", True, None),
        ("toolu_7", False, None),
    ]
    assert results[0].content == "1 | export const a = 1"
    assert [m.text for m in of(evts, UserMessage)] == ["Make the tests pass", "also update the docs"]
    assert longest_run(evts) == 2
    assert session.model == "m"  # each response's modelInfo
    assert not session.report.skipped


def test_xml_tool_blocks_of_older_versions(tmp_path: Path) -> None:
    """Before native tool calling the call is an XML block in the text; only
    the first one in a response runs."""
    history = [
        _user("<task>\nfind the bug\n</task>", ENV),
        {
            "role": "assistant",
            "content": [
                _text("<thinking>look first</thinking>\n<read_file>\n<path>src/a.ts</path>\n</read_file>"),
                _text("<read_file>\n<path>src/b.ts</path>\n</read_file>"),
            ],
        },
        _user("[read_file for 'src/a.ts'] Result:\nexport const a = 1", ENV),
        {"role": "assistant", "content": "<execute_command>\n<command>npm test</command>\n</execute_command>"},
        _user("[execute_command for 'npm test'] Result:", "Command executed.\nOutput:\nok", ENV),
        {"role": "assistant", "content": [_text("<unknown_tool><x>1</x></unknown_tool> no call here")]},
        _user("[ERROR] You did not use a tool in your previous response!"),
    ]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(history))
    (session,) = open_sessions(path)
    assert session.session == "export"
    evts = list(session.events())
    assert [(c.call_id, c.tool, c.args) for c in calls(evts)] == [
        ("xml-1", "read_file", {"path": "src/a.ts"}),
        ("xml-3", "execute_command", {"command": "npm test"}),
    ]
    assert [r.content for r in of(evts, ToolResult)] == ["export const a = 1", ""]


def test_tool_result_blocks_of_roo_code(tmp_path: Path) -> None:
    """Roo Code's native protocol answers each ``tool_use`` with a
    ``tool_result`` block."""
    history: list[Any] = [
        _user("<task>\nrun it\n</task>", ENV, ts=1764052609358),
        _uses(("toolu_a", "execute_command", {"command": "make"}), ("toolu_b", "read_file", {"path": "x"})),
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_a",
                    "content": "Command executed in terminal 1. Exit code: 2",
                },
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": [_text("x")], "is_error": True},
                {"type": "tool_result", "tool_use_id": "never", "content": "?"},
                _text(ENV),
            ],
            "ts": 1764052619358,
        },
        "junk",
        [],  # no message either: counted
    ]
    path = _write(tmp_path / "tasks" / "8c0c1f9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b", history)
    (session,) = open_sessions(path)
    evts = list(session.events())
    assert [(r.call_id, r.is_error) for r in of(evts, ToolResult)] == [("toolu_a", True), ("toolu_b", True)]
    assert of(evts, ToolResult)[0].ts == 1764052619.358
    assert session.report.skipped == {"orphan-result": 1, "not-an-object": 2}  # "junk" and [] are no message


def test_an_openhands_pair_past_what_detection_reads_is_no_message(tmp_path: Path) -> None:
    """Only OpenHands histories hold ``[action, observation]`` pairs; one
    past the first twenty items (which detection reads) is counted."""
    history: list[Any] = [_user("<task>\nrun it\n</task>", ENV, ts=1764052609358)]
    history += [_user(f"note {n}", ts=1764052609358 + n) for n in range(21)]
    history.append([{"action": "run", "args": {}}, {"observation": "run", "content": ""}])
    (session,) = open_sessions(_write(tmp_path / "tasks" / "8c0c1f9e-5b7d-4e8f-9a0b-1c2d3e4f5a6c", history))
    list(session.events())
    assert session.report.skipped == {"not-an-object": 1}


@pytest.mark.parametrize("shape", ["native", "xml", "tool_result"])
def test_a_typed_answer_is_a_user_message_after_the_result_it_is(tmp_path: Path, shape: str) -> None:
    """The user's reply to ``ask_followup_question`` comes back as the call's
    result; what they typed is a user message too, at that entry's time, but
    not the files they attached after it."""
    attached = '<file_content path="notes.md">\n<answer>\nold\n</answer>\n</file_content>'
    reply = f"<answer>\nCancel - review first\n</answer>\n\n{attached}"
    asked = _uses(("tooluse_1", "ask_followup_question", {"question": "Delete the state files?"}))
    answered = _user(f"[ask_followup_question for 'Delete the state files?'] Result:\n{reply}", ENV, ts=1777000002000)
    if shape == "xml":
        xml = "<ask_followup_question>\n<question>Delete the state files?</question>\n</ask_followup_question>"
        asked = {"role": "assistant", "content": [_text(xml)]}
    elif shape == "tool_result":  # Roo Code's native protocol
        answered["content"] = [{"type": "tool_result", "tool_use_id": "tooluse_1", "content": reply}, _text(ENV)]
    path = _write(tmp_path / "tasks" / TASK, [_user("<task>\nDeploy the app\n</task>", ENV), asked, answered])
    evts = only(path)
    result, typed = evts[-2:]
    assert isinstance(result, ToolResult)
    assert (result.tool, result.content) == ("ask_followup_question", reply)
    assert typed == UserMessage(agent=typed.agent, ts=1777000002.0, text="Cancel - review first")
    assert [m.text for m in of(evts, UserMessage)] == ["Deploy the app", "Cancel - review first"]


def test_a_plan_mode_reply_is_a_user_message_and_tags_in_other_results_are_not(tmp_path: Path) -> None:
    history = [
        _user("<task>\nplan it\n</task>", ENV),
        _uses(("t1", "read_file", {"path": "prompts.md"})),
        _user("[read_file for 'prompts.md'] Result:\n<answer>\nnot typed\n</answer>", ENV),
        _uses(("t2", "plan_mode_respond", {"response": "Plan: ..."})),
        _user("[plan_mode_respond] Result:\n<user_message>\nuse sqlite\n</user_message>", ENV),
        _uses(("t3", "plan_mode_respond", {"response": "Plan: sqlite"})),
        _user(
            "[plan_mode_respond] Result:\n[The user has switched to ACT MODE, so you may now proceed with the task.]"
        ),
    ]
    path = _write(tmp_path / "tasks" / TASK, history)
    evts = only(path)
    assert len(of(evts, ToolResult)) == 3
    assert [m.text for m in of(evts, UserMessage)] == ["plan it", "use sqlite"]


def test_other_message_lists_are_not_cline(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]))
    with pytest.raises(TranscriptError, match=r"is not cline: not a task history \(api_conversation_history.json"):
        open_sessions(path, "cline")


def test_the_panels_record_alone_is_refused_naming_the_file_to_import(tmp_path: Path) -> None:
    """``ui_messages.json`` is what Cline's panel shows; the refusal says
    which file of the task folder to import instead."""
    path = tmp_path / "ui_messages.json"
    path.write_text(json.dumps([{"ts": 1, "type": "say", "say": "text", "text": "fix it"}]))
    with pytest.raises(UnknownFormatError, match=r"import api_conversation_history\.json beside it"):
        detect_format(path)


SESSION = "1784094124598_rruoq"


def test_a_cline_4_session_file_is_read_with_what_the_user_typed() -> None:
    """Cline 4's CLI writes ``<id>.messages.json`` (a real one, from Cline's
    own fixtures): its user text is what the user typed, as it is."""
    path = corpus_file(f"cline/{SESSION}.messages.json")
    assert detect_format(path) == "cline"
    (session,) = open_sessions(path)
    assert session.session == SESSION
    events = list(session.events())
    assert len(calls(events)) == 11
    assert [c.tool for c in calls(events)][:3] == ["editor", "read_files", "editor"]
    said = [m.text for m in of(events, UserMessage)]
    assert len(said) == 5
    assert said[0].startswith("can you update @apps/examples/desktop-app/webview/components/agent-sidebar.tsx")
    assert said[-1] == "hello"
    assert session.model == "anthropic/claude-opus-4.8-fast"
    assert session.report.problems == []


def _session_file(tmp_path: Path, messages: list[dict[str, Any]], **fields: Any) -> Path:
    document = {"version": 1, "agent": "lead", "sessionId": SESSION, "messages": messages, **fields}
    path = tmp_path / SESSION / f"{SESSION}.messages.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def test_a_session_files_failures_are_its_error_flag_and_attached_files_are_no_words(tmp_path: Path) -> None:
    use = {"type": "tool_use", "id": "t1", "name": "run_commands", "input": {"commands": ["npm test"]}}
    path = _session_file(
        tmp_path,
        [
            {"role": "user", "content": [_text("fix the tests"), {"type": "file", "path": "a.ts", "content": "x"}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}, use], "ts": 1784094125000},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1 failed", "is_error": True}],
            },
            {"role": "user", "content": [_text(ENV)]},
            {"role": "user", "content": '<user_input mode="act">\nnow the lint\n</user_input>'},
            {"role": "user", "content": [_text("the parser drops <user_input>hi</user_input> from prompts")]},
        ],
    )
    (session,) = open_sessions(path)
    events = list(session.events())
    assert [m.text for m in of(events, UserMessage)] == [
        "fix the tests",
        "now the lint",
        "the parser drops <user_input>hi</user_input> from prompts",  # a tag quoted, not the whole text wrapped
    ]
    assert [(r.content, r.is_error) for r in of(events, ToolResult)] == [("1 failed", True)]
    (call,) = calls(events)
    assert call.ts == 1784094125.0


def test_a_sessions_own_records_are_imported_with_it_and_alone_refused(tmp_path: Path) -> None:
    path = _session_file(tmp_path, [{"role": "user", "content": [_text("hi")]}])
    sidecar = path.parent / f"{SESSION}.compaction.json"
    sidecar.write_text(json.dumps({"source_prefix_hash": "ab", "messages": [{"role": "user", "content": []}]}))
    hooks = path.parent / "hooks.jsonl"
    hooks.write_text("{}\n")
    assert belongs_to_session(sidecar)
    assert belongs_to_session(hooks)
    manifest = path.parent / f"{SESSION}.json"
    manifest.write_text(json.dumps({"session_id": SESSION, "messages_path": str(path)}))
    assert belongs_to_session(manifest)
    assert not belongs_to_session(path)
    with pytest.raises(UnknownFormatError, match="a Cline session's compacted context, not the conversation"):
        detect_format(sidecar)
    renamed = tmp_path / "context.json"  # a compacted context is known by its keys too, as Cline writes it
    renamed.write_text(json.dumps({"version": 1, "source_message_count": 3, "messages": []}))
    with pytest.raises(UnknownFormatError, match="compacted context"):
        detect_format(renamed)
    path.unlink()
    assert not belongs_to_session(sidecar), "alone, it is refused rather than passed over"
    assert not belongs_to_session(manifest)


def test_a_session_file_is_no_gemini_cli_session(tmp_path: Path) -> None:
    """Both keep ``{sessionId, messages}``; gemini-cli's messages each have
    a type, and a message without one is counted, never dropped unseen."""
    untyped = tmp_path / "untyped.json"
    untyped.write_text(json.dumps({"sessionId": "x", "messages": [{"id": "m1", "role": "user", "content": []}]}))
    with pytest.raises(UnknownFormatError, match="whose messages have no type"):
        detect_format(untyped)
    mixed = tmp_path / "mixed.json"
    messages = [{"id": "m1", "type": "user", "content": "hi"}, {"id": "m2", "role": "assistant", "content": []}]
    mixed.write_text(json.dumps({"sessionId": "x", "messages": messages}))
    (session,) = open_sessions(mixed)
    assert [m.text for m in of(list(session.events()), UserMessage)] == ["hi"]
    assert session.report.skipped == {"bad-record": 1}
