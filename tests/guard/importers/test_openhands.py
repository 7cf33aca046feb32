"""OpenHands event trajectories and evaluation output, real and synthetic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bus import ToolCall, ToolResult, UserMessage
from guard import canonical_json
from guard.importers import belongs_to_session, open_sessions
from tests.guard.importers._transcripts import (
    calls,
    compactions,
    corpus_file,
    iso,
    longest_run,
    of,
    only,
    openhands_runs,
    write_lines,
)


def test_each_evaluation_instance_is_a_session() -> None:
    sessions = list(open_sessions(corpus_file("openhands/output.jsonl")))
    assert [s.session for s in sessions] == ["ponylang__ponyc-4595", "ponylang__ponyc-4593", "ponylang__ponyc-4588"]
    assert sessions[1].label.endswith("openhands/output.jsonl#ponylang__ponyc-4593")
    evts = {s.session: list(s.events()) for s in sessions}
    assert {k: len(calls(v)) for k, v in evts.items()} == {
        "ponylang__ponyc-4595": 21,
        "ponylang__ponyc-4593": 32,
        "ponylang__ponyc-4588": 48,
    }
    assert {k: longest_run(v) for k, v in evts.items()} == {
        "ponylang__ponyc-4595": 1,
        "ponylang__ponyc-4593": 2,
        "ponylang__ponyc-4588": 1,
    }
    views = [c for c in calls(evts["ponylang__ponyc-4593"]) if c.args.get("command") == "view"]
    cli = [canonical_json(c.args) for c in views if c.args["path"].endswith("/packages/cli/cli.pony")]
    plain = b'{"command":"view","path":"/workspace/ponylang__ponyc__0.1/packages/cli/cli.pony"}'
    assert cli.count(plain) == 2
    index = cli.index(plain)
    assert cli[index + 1] == plain  # the run of two SOURCES.md reports
    assert all(len(of(v, UserMessage)) == 1 for v in evts.values())


def test_trajectory_edit_is_imported_with_the_models_own_arguments() -> None:
    evts = only(corpus_file("openhands/basic.json"))
    (call,) = calls(evts)
    assert call.call_id == "toolu_017nBp7UfiGqyrA7j77HgtFP"
    assert (call.tool, call.step, call.ts) == ("str_replace_editor", 1, iso("2025-01-27T22:45:13.764487"))
    assert call.args["command"] == "create"
    assert call.args["path"] == "/workspace/game_2048.py"
    assert call.args["file_text"].startswith("import random\nimport keyboard\n\nclass Game2048:")
    (result,) = of(evts, ToolResult)
    assert result.content.startswith("--- /workspace/game_2048.py\n+++ /workspace/game_2048.py")
    assert (result.is_error, result.denied_by) == (False, None)
    (prompt,) = of(evts, UserMessage)
    assert prompt.text.startswith("Please create a simple 2048 game.")


def _response(rid: str, *calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    tool_calls = [{"id": i, "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls]
    return {"id": rid, "choices": [{"message": {"tool_calls": tool_calls}}]}


def _action(eid: int, action: str, tcm: dict[str, Any] | None, **args: Any) -> dict[str, Any]:
    event = {"id": eid, "timestamp": f"2025-01-01T00:00:{eid:02d}", "source": "agent", "action": action, "args": args}
    if tcm is not None:
        event["tool_call_metadata"] = tcm
    return event


def _observation(eid: int, cause: int, kind: str, content: str, **extras: Any) -> dict[str, Any]:
    return {
        "id": eid,
        "timestamp": f"2025-01-01T00:00:{eid:02d}",
        "source": "agent",
        "observation": kind,
        "cause": cause,
        "content": content,
        "extras": extras,
    }


def _edit(eid: int, call_id: str, old: str) -> dict[str, Any]:
    args = {"command": "str_replace", "path": "/workspace/src/match.c", "old_str": old, "new_str": "x"}
    response = _response(f"r{eid}", (call_id, "str_replace_editor", args))
    tcm = {"function_name": "str_replace_editor", "tool_call_id": call_id, "model_response": response}
    return _action(eid, "edit", tcm, **args, impl_source="oh_aci")


def _editor_answer(eid: int, cause: int, kind: str, content: str) -> dict[str, Any]:
    return _observation(eid, cause, kind, content, path="/workspace/src/match.c", impl_source="oh_aci", diff=None)


def test_editor_error_text_marks_the_result_failed(tmp_path: Path) -> None:
    """The editor reports a failed edit as an ``edit`` observation whose text
    starts with ``ERROR:``; no error flag or exit code is recorded."""
    not_found = (
        "ERROR:\nNo replacement was performed, old_str `case X:` did not appear verbatim in /workspace/src/match.c."
    )
    history = [
        {"id": 1, "source": "user", "action": "message", "args": {"content": "fix match.c"}},
        _edit(2, "t1", "case X:"),
        _editor_answer(3, 2, "edit", not_found),
        _edit(4, "t2", "case Y:"),
        _editor_answer(5, 4, "edit", "The file /workspace/src/match.c has been edited. ERROR: is now handled"),
        _action(6, "read", {"function_name": "str_replace_editor", "tool_call_id": "t3"}, path="/a"),
        _editor_answer(7, 6, "read", "ERROR:\nInvalid `view_range` parameter: [100, 150]."),
        _action(8, "run", {"function_name": "execute_bash", "tool_call_id": "t4"}, command="cat log"),
        _observation(9, 8, "run", "ERROR: from the log file", metadata={"exit_code": 0}),
    ]
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(history))
    results = of(only(path), ToolResult)
    assert [(r.call_id, r.is_error) for r in results] == [("t1", True), ("t2", False), ("t3", True), ("t4", False)]
    assert results[0].content == not_found


def test_a_command_still_running_at_its_soft_timeout_has_not_failed(tmp_path: Path) -> None:
    """OpenHands answers a command that has printed nothing new for a while
    with exit code -1: it is still running, and the agent waits on it by
    sending an empty command. Neither answer is a failure; a real exit code
    is."""
    waiting = (
        "\n[The command has no new output after 30 seconds. You may wait longer to see additional output by"
        " sending empty command '']"
    )
    history = [
        _action(1, "run", {"function_name": "execute_bash", "tool_call_id": "t1"}, command="pytest -q"),
        _observation(2, 1, "run", "...." + waiting, metadata={"exit_code": -1}),
        _action(3, "run", {"function_name": "execute_bash", "tool_call_id": "t2"}, command=""),
        _observation(4, 3, "run", waiting, metadata={"exit_code": -1}),
        _action(5, "run", {"function_name": "execute_bash", "tool_call_id": "t3"}, command=""),
        _observation(6, 5, "run", "F.\n1 failed, 40 passed", metadata={"exit_code": 1}),
    ]
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(history))
    assert [(r.call_id, r.is_error) for r in of(only(path), ToolResult)] == [
        ("t1", False),
        ("t2", False),
        ("t3", True),
    ]
    v1 = [event for event in _late_2025_conversation() if event.get("tool_call_id") in (None, "k1", "k4")]
    v1[2]["observation"]["metadata"]["exit_code"] = -1  # the first pytest still running
    session = next(open_sessions(write_lines(tmp_path / "events.jsonl", v1)))
    assert [r.is_error for r in of(list(session.events()), ToolResult)] == [False, False]


def test_real_failed_str_replace_streak_is_errors() -> None:
    (session,) = [s for s in open_sessions(corpus_file("openhands/output.jsonl")) if s.session.endswith("4593")]
    failed = [r for r in of(list(session.events()), ToolResult) if r.is_error]
    edits = [r for r in failed if r.tool == "str_replace_editor" and r.args.get("command") == "str_replace"]
    assert len(edits) == 10  # 7 of them in a row: a streak of failed edits, not progress
    assert all(r.content.startswith("ERROR:\n") for r in edits)
    assert len(failed) == 13  # and an invalid view_range, and two commands that exited non-zero


def _history() -> list[Any]:
    both = _response("r1", ("t1", "execute_bash", {"command": "ls"}), ("t2", "execute_bash", {"command": "pwd"}))
    return [
        {"id": 0, "source": "agent", "action": "system", "args": {"content": "you are"}},
        {"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}},
        {"id": 2, "source": "user", "action": "recall", "args": {}},
        _action(
            3,
            "run",
            {"function_name": "execute_bash", "tool_call_id": "t1", "model_response": both},
            command="ls",
            thought="look",
        ),
        _action(
            4, "run", {"function_name": "execute_bash", "tool_call_id": "t2", "model_response": both}, command="pwd"
        ),
        _observation(5, 3, "run", "a b", metadata={"exit_code": 0}),
        _observation(6, 4, "run", "nope", metadata={"exit_code": 1}),
        _action(7, "run", None, command="rm -rf /", thought="oops", is_input=False),
        _observation(8, 7, "user_rejected", "rejected"),
        _action(9, "think", {"model_response": {"id": "r3"}}, thought="hmm"),
        _observation(10, 9, "think", "logged"),
        {"id": 11, "source": "agent", "observation": "error", "content": "bad parameter"},
        _action(
            12,
            "edit",
            {
                "function_name": "str_replace_editor",
                "tool_call_id": "t5",
                "model_response": {"id": "r4", "choices": ["junk", {"message": None}]},
            },
            path="x",
        ),
        _observation(13, 12, "error", "failed"),
        "junk",
        {"id": 15, "source": "agent"},
        {"id": 14, "source": "environment", "action": "message", "args": {}},
    ]


def test_synthetic_history_steps_errors_and_denials(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(_history()))
    evts = only(path)
    assert [m.text for m in of(evts, UserMessage)] == ["fix it"]
    by_id = {c.call_id: c for c in calls(evts)}
    assert [(k, by_id[k].step) for k in by_id] == [("t1", 1), ("t2", 1), ("event-7", 2), ("t5", 4)]
    assert by_id["t1"].args == {"command": "ls"}
    assert by_id["event-7"].args == {"command": "rm -rf /"}  # no model response: bookkeeping stripped
    assert by_id["t5"].args == {"path": "x"}
    results = {r.call_id: r for r in of(evts, ToolResult)}
    assert [(k, r.is_error, r.denied_by) for k, r in results.items()] == [
        ("t1", False, None),
        ("t2", True, None),
        ("event-7", True, "user"),
        ("t5", True, None),
    ]
    assert isinstance(by_id["t1"], ToolCall)


def test_history_document_and_torn_evaluation_output(tmp_path: Path) -> None:
    doc = tmp_path / "state.json"
    doc.write_text(json.dumps({"history": _history()}))
    assert len(calls(only(doc))) == 4
    lines = [{"instance_id": "i1", "history": _history()}, {"history": _history()}, {"instance_id": "x"}]
    path = write_lines(tmp_path / "output.jsonl", lines, torn='{"instance_id": "i4", "hist')
    sessions = list(open_sessions(path))
    assert [s.session for s in sessions] == ["i1", "line-2"]
    assert sessions[-1].report.skipped == {"torn": 1}
    assert len(calls(list(sessions[1].events()))) == 4


def test_an_instance_without_an_id_is_named_by_its_line(tmp_path: Path) -> None:
    path = tmp_path / "output.jsonl"
    named, unnamed = {"instance_id": "i1", "history": openhands_runs(1)}, {"history": openhands_runs(1)}
    path.write_text(f"{json.dumps(named)}\n\n{json.dumps(unnamed)}\n")
    assert [s.session for s in open_sessions(path)] == ["i1", "line-3"]


def test_a_bad_event_of_an_evaluation_instance_costs_that_event(tmp_path: Path) -> None:
    lines = [{"instance_id": "a", "history": openhands_runs(5, 2)}, {"instance_id": "a", "history": openhands_runs(5)}]
    other_runs = {"instance_id": "b", "history": [*openhands_runs(5, 4), "junk", ["no", "pair"]]}
    path = write_lines(tmp_path / "output.jsonl", [*lines, other_runs])
    first, again, other = open_sessions(path)
    assert [c.call_id for c in calls(list(first.events()))] == ["t1", "t3", "t4", "t5"]
    assert [c.call_id for c in calls(list(again.events()))] == ["t1", "t2", "t3", "t4", "t5"]  # another line
    assert [c.call_id for c in calls(list(other.events()))] == ["t1", "t2", "t3", "t5"]
    # the sessions of a file share one report; "junk" and a list that is no pair are no event
    assert other.report.skipped == {"bad-record": 2, "not-an-object": 2}
    assert other.report.problems == [
        f"{path}:1#history[3]: TypeError: 'int' object is not iterable",
        f"{path}:3#history[7]: TypeError: 'int' object is not iterable",
    ]


def _v1_conversation() -> list[dict[str, Any]]:
    """A V1 (software-agent-sdk) event stream, written the way the SDK
    serialises its events: a kind tag on each, the model's tool call beside
    the parsed action, observations naming the tool call they answer."""
    clock = iter(range(100))

    def event(kind: str, source: str, **fields: Any) -> dict[str, Any]:
        second = next(clock)
        eid = f"{second:08x}-0000-4000-8000-000000000000"
        return {
            "id": eid,
            "timestamp": f"2026-06-16T05:39:{second:02d}.000001",
            "source": source,
            "kind": kind,
            **fields,
        }

    def action(response: str, call_id: str, command: str) -> dict[str, Any]:
        arguments = json.dumps({"command": command, "security_risk": "LOW"})
        return event(
            "ActionEvent",
            "agent",
            thought=[{"type": "text", "text": "let me look"}],
            action={"command": command, "is_input": False, "kind": "TerminalAction"},
            tool_name="terminal",
            tool_call_id=call_id,
            tool_call={"id": call_id, "name": "terminal", "arguments": arguments},
            llm_response_id=response,
        )

    def observation(call_id: str, text: str, exit_code: int) -> dict[str, Any]:
        body = {
            "content": [{"type": "text", "text": text}],
            "is_error": False,
            "exit_code": exit_code,
            "kind": "TerminalObservation",
        }
        return event(
            "ObservationEvent",
            "environment",
            tool_name="terminal",
            tool_call_id=call_id,
            observation=body,
            action_id="a",
        )

    return [
        event("SystemPromptEvent", "agent", system_prompt={"type": "text", "text": "You are OpenHands"}, tools=[]),
        event("ConversationStateUpdateEvent", "environment", key="execution_status", value="running"),
        event(
            "MessageEvent", "user", llm_message={"role": "user", "content": [{"type": "text", "text": "fix the test"}]}
        ),
        action("r1", "c1", "pytest -x"),
        action("r1", "c2", "git status"),
        observation("c1", "1 failed", 1),
        observation("c2", "clean", 0),
        event(
            "MessageEvent",
            "agent",
            llm_message={"role": "assistant", "content": [{"type": "text", "text": "hmm"}]},
            llm_response_id="r2",
        ),
        action("r3", "c3", "rm -rf build"),
        event(
            "UserRejectObservation",
            "user",
            tool_name="terminal",
            tool_call_id="c3",
            rejection_reason="no",
            rejection_source="hook",
            action_id="b",
        ),
        event("AgentErrorEvent", "agent", tool_name="terminal", tool_call_id="c9", error="unknown tool"),
        action("r4", "c4", "pytest -x"),
        event("AgentErrorEvent", "agent", tool_name="terminal", tool_call_id="c4", error="sandbox died"),
        event("MessageEvent", "user", llm_message={"role": "user", "content": []}),
        event(
            "ActionEvent",
            "agent",
            action={"command": "ls", "kind": "TerminalAction"},
            tool_name="terminal",
            tool_call_id="c5",
        ),
        event(
            "ActionEvent", "agent", tool_call={"id": "c6", "name": "finish"}, tool_call_id="c6", llm_response_id="r6"
        ),
        event("ActionEvent", "agent", tool_call={"id": "c7", "name": "grep", "arguments": "{}"}, tool_call_id="c7"),
        {"id": "z", "kind": "SomeFutureEvent", "source": "agent"},
    ]


def test_v1_events_as_json_lines(tmp_path: Path) -> None:
    session = next(open_sessions(write_lines(tmp_path / "events.jsonl", _v1_conversation())))
    assert session.format == "openhands"
    evts = list(session.events())
    assert [m.text for m in of(evts, UserMessage)] == ["fix the test"]
    assert [(c.call_id, c.step, c.tool, c.args) for c in calls(evts)] == [
        ("c1", 1, "terminal", {"command": "pytest -x", "security_risk": "LOW"}),
        ("c2", 1, "terminal", {"command": "git status", "security_risk": "LOW"}),
        ("c3", 3, "terminal", {"command": "rm -rf build", "security_risk": "LOW"}),
        ("c4", 4, "terminal", {"command": "pytest -x", "security_risk": "LOW"}),
        ("c5", 5, "terminal", {"command": "ls"}),  # no recorded tool call: the action, minus its kind
        ("c7", 7, "grep", {}),  # finish (c6) is a response, not a call
    ]
    assert [(r.call_id, r.content, r.is_error, r.denied_by) for r in of(evts, ToolResult)] == [
        ("c1", "1 failed", True, None),
        ("c2", "clean", False, None),
        ("c3", "no", True, "hook"),
        ("c4", "sandbox died", True, None),
    ]
    assert calls(evts)[0].ts == iso("2026-06-16T05:39:03.000001")
    assert not session.report.skipped  # the error for a call never made is not an orphan


def test_v1_conversation_folder_is_one_session_from_its_first_event(tmp_path: Path) -> None:
    conversation = tmp_path / "conversations" / "7c1f0e9a2b3d4c5e"
    folder = conversation / "events"
    folder.mkdir(parents=True)
    (conversation / "base_state.json").write_text(json.dumps({"id": "7c1f0e9a2b3d4c5e", "agent": {}}))
    stream = _v1_conversation()
    for index, event in enumerate(stream):
        (folder / f"event-{index:05d}-{event['id'][:8]}-aaaa.json").write_text(json.dumps(event))
    (folder / "event-00099-deadbeef-bad.json").write_text('{"kind": "ActionEv')
    (folder / "notes.json").write_text("{}")
    first = folder / "event-00000-00000000-aaaa.json"
    assert not belongs_to_session(first)
    assert belongs_to_session(folder / "event-00003-00000003-aaaa.json")
    assert belongs_to_session(conversation / "base_state.json")
    assert not belongs_to_session(tmp_path / "base_state.json")
    (session,) = open_sessions(folder / "event-00004-00000004-aaaa.json")
    assert (session.session, session.label) == ("7c1f0e9a2b3d4c5e", str(conversation))
    assert len(calls(list(session.events()))) == 6
    assert session.report.skipped == {"invalid-json": 1}


@pytest.mark.parametrize(
    ("state", "model"),
    [
        ({"id": "7c1f", "agent": {"llm": {"model": "openai/gpt-4o-mini", "api_key": "**"}}}, "openai/gpt-4o-mini"),
        ({"id": "7c1f", "agent": {"llm": {}}}, None),
        ('{"id": "7c1f", "agent": {"ll', None),
        (None, None),
    ],
    ids=["named", "none-named", "cut-off", "missing"],
)
def test_a_v1_conversation_names_its_model_from_its_base_state(
    tmp_path: Path, state: dict[str, Any] | str | None, model: str | None
) -> None:
    """The events never name the model; ``base_state.json`` does. A state
    file that is gone or cut off costs the model, never an event."""
    conversation = tmp_path / "7c1f" / "event_service"
    folder = conversation / "events"
    folder.mkdir(parents=True)
    if state is not None:
        (conversation / "base_state.json").write_text(state if isinstance(state, str) else json.dumps(state))
    for index, event in enumerate(_v1_conversation()):
        (folder / f"event-{index:05d}-{event['id'][:8]}-aaaa.json").write_text(json.dumps(event))
    (session,) = open_sessions(folder / "event-00000-00000000-aaaa.json")
    assert len(calls(list(session.events()))) == 6
    assert session.model == model
    assert not session.report.skipped


def test_a_conversation_whose_first_events_are_gone_is_walked_from_its_earliest(tmp_path: Path) -> None:
    """A conversation folder copied or pruned from event 70 on: a directory
    walk imports it once, from the earliest event left, and leaves out none."""
    from guard.audit import find_transcripts

    folder = tmp_path / "conversations" / "16caf190" / "events"
    folder.mkdir(parents=True)
    stream = _v1_conversation()
    for index, event in enumerate(stream, 70):
        (folder / f"event-{index:05d}-{index:08x}-aaaa.json").write_text(json.dumps(event))
    found = [path.name for path, _ in find_transcripts([tmp_path])]
    assert found == ["event-00070-00000046-aaaa.json"]
    (session,) = open_sessions(folder / found[0])
    assert len(calls(list(session.events()))) == 6


@pytest.mark.parametrize("first", ["", '{"kind": "SystemPromptEv', '{"hello": 1}'])
def test_a_conversation_whose_first_event_file_is_unreadable_is_walked_from_the_next(
    tmp_path: Path, first: str
) -> None:
    """An empty, cut-off or foreign first event file (a writer killed
    mid-write) hides none of the conversation's other events."""
    from guard.audit import find_transcripts

    folder = tmp_path / "conversations" / "abc123" / "events"
    folder.mkdir(parents=True)
    for index, event in enumerate(_v1_conversation()):
        (folder / f"event-{index:05d}-{index:08x}-aaaa.json").write_text(first if index == 0 else json.dumps(event))
    found = [path.name for path, _ in find_transcripts([tmp_path])]
    assert found == ["event-00001-00000001-aaaa.json"]
    (session,) = open_sessions(folder / found[0])
    assert len(calls(list(session.events()))) == 6
    assert sum(session.report.skipped.values()) == 1


def test_agent_server_conversation_is_named_for_the_conversation(tmp_path: Path) -> None:
    """The agent server keeps events under ``<conversation>/event_service/events/``:
    the session is the conversation, not its ``event_service`` folder."""
    conversation = tmp_path / "conversations" / "5b0d7e2c9f4a4e1b"
    folder = conversation / "event_service" / "events"
    folder.mkdir(parents=True)
    (conversation / "event_service" / "base_state.json").write_text(json.dumps({"id": "5b0d7e2c9f4a4e1b"}))
    for index, event in enumerate(_v1_conversation()):
        (folder / f"event-{index:05d}-{event['id'][:8]}-aaaa.json").write_text(json.dumps(event))
    first = folder / "event-00000-00000000-aaaa.json"
    assert not belongs_to_session(first)
    assert belongs_to_session(conversation / "event_service" / "base_state.json")
    (session,) = open_sessions(first)
    assert (session.session, session.label) == ("5b0d7e2c9f4a4e1b", str(conversation))
    assert len(calls(list(session.events()))) == 6


@pytest.mark.parametrize("store", ["", "event_service"], ids=["agent-server", "event-service"])
def test_the_agent_servers_meta_json_is_part_of_its_conversation(tmp_path: Path, store: str) -> None:
    """The agent server keeps its record of a conversation, ``meta.json``,
    beside ``base_state.json`` and ``events/``: a walk passes over it with
    the conversation, as no transcript left out. A ``meta.json`` with no
    events beside it is none of a conversation's."""
    from guard.audit import audit, find_transcripts

    conversation = tmp_path / "conversations" / "3749ed60" / store
    folder = conversation / "events"
    folder.mkdir(parents=True)
    for companion in ("base_state.json", "meta.json"):
        (conversation / companion).write_text(json.dumps({"id": "3749ed60", "agent": {}}))
    for index, event in enumerate(_v1_conversation()):
        (folder / f"event-{index:05d}-{index:08x}-aaaa.json").write_text(json.dumps(event))
    assert belongs_to_session(conversation / "meta.json")
    assert not belongs_to_session(write_lines(tmp_path / "elsewhere" / "meta.json", []))
    assert [path.name for path, _ in find_transcripts([tmp_path / "conversations"])] == [
        "event-00000-00000000-aaaa.json"
    ]
    report = audit([tmp_path / "conversations"])
    assert ([s.session for s in report.sessions], report.not_transcripts) == (["3749ed60"], [])


def test_v1_events_as_a_json_list(tmp_path: Path) -> None:
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(_v1_conversation()[2:]))
    evts = only(path)
    assert [c.call_id for c in calls(evts)] == ["c1", "c2", "c3", "c4", "c5", "c7"]
    one = tmp_path / "event.json"  # a lone event outside an events/ folder
    one.write_text(json.dumps(_v1_conversation()[3]))
    assert [c.call_id for c in calls(only(one))] == ["c1"]


def test_v1_evaluation_output_is_one_session_per_instance(tmp_path: Path) -> None:
    """V1 evaluation output (the benchmarks' ``EvalOutput``): each line is
    an instance whose ``history`` is the SDK's events, whose ``action`` is a
    dict (V0 reads it as a string)."""
    record = {
        "instance_id": "django__django-11099",
        "attempt": 1,
        "test_result": {"git_patch": "diff --git a/x b/x"},
        "instruction": "fix the test",
        "metadata": {"llm": {"model": "m"}, "dataset": "princeton-nlp/SWE-bench_Verified", "max_iterations": 100},
        "history": _v1_conversation(),
        "metrics": {"accumulated_cost": 0.1},
        "error": None,
    }
    path = write_lines(tmp_path / "output.jsonl", [record, record | {"instance_id": "astropy__astropy-12907"}])
    sessions = list(open_sessions(path))
    assert [s.session for s in sessions] == ["django__django-11099", "astropy__astropy-12907"]
    evts = list(sessions[0].events())
    assert [c.call_id for c in calls(evts)] == ["c1", "c2", "c3", "c4", "c5", "c7"]
    assert [r.is_error for r in of(evts, ToolResult)] == [True, False, True, True]
    assert not sessions[0].report.skipped


def test_v1_evaluation_output_of_one_instance_is_that_session(tmp_path: Path) -> None:
    """One instance run (or a file split per instance): the line is the whole
    file, so it also parses as one JSON document."""
    record = {"instance_id": "safety-it-onboarding", "history": _v1_conversation(), "error": None}
    path = write_lines(tmp_path / "output.jsonl", [record])
    (session,) = open_sessions(path)
    assert session.session == "safety-it-onboarding"
    assert [c.call_id for c in calls(list(session.events()))] == ["c1", "c2", "c3", "c4", "c5", "c7"]


def _late_2025_conversation() -> list[dict[str, Any]]:
    """V1 events as SDK releases of late 2025 wrote them: an observation's
    text in ``output``, a failure in ``error`` (a message for the editor,
    ``true`` for a command) and the exit code in ``metadata``."""

    def event(n: int, kind: str, source: str, **fields: Any) -> dict[str, Any]:
        eid = f"{n:08x}-1111-4000-8000-000000000000"
        return {"id": eid, "timestamp": f"2025-11-02T10:00:{n:02d}.5", "source": source, "kind": kind, **fields}

    def action(n: int, call_id: str, tool: str, **args: Any) -> dict[str, Any]:
        call = {"id": call_id, "name": tool, "arguments": json.dumps(args)}
        action_kind = "ExecuteBashAction" if tool == "execute_bash" else "StrReplaceEditorAction"
        return event(
            n,
            "ActionEvent",
            "agent",
            thought=[],
            action={"kind": action_kind, **args},
            tool_name=tool,
            tool_call_id=call_id,
            tool_call=call,
            llm_response_id=f"resp-{n}",
        )

    def bash(n: int, call_id: str, output: str, exit_code: int, *, error: bool = False) -> dict[str, Any]:
        metadata = {"exit_code": exit_code, "pid": -1, "working_dir": "/workspace", "prefix": "", "suffix": ""}
        body = {
            "kind": "ExecuteBashObservation",
            "output": output,
            "command": "pytest -q",
            "exit_code": None,
            "error": error,
            "timeout": False,
            "metadata": metadata,
        }
        return event(
            n,
            "ObservationEvent",
            "environment",
            tool_name="execute_bash",
            tool_call_id=call_id,
            observation=body,
            action_id="x",
        )

    def editor(n: int, call_id: str, output: str, error: str | None) -> dict[str, Any]:
        body = {
            "kind": "StrReplaceEditorObservation",
            "command": "str_replace",
            "output": output,
            "path": "/workspace/a.py",
            "prev_exist": True,
            "old_content": None,
            "new_content": None,
            "error": error,
        }
        return event(
            n,
            "ObservationEvent",
            "environment",
            tool_name="str_replace_editor",
            tool_call_id=call_id,
            observation=body,
            action_id="y",
        )

    def answer(n: int, call_id: str, tool: str, body: dict[str, Any]) -> dict[str, Any]:
        return event(n, "ObservationEvent", "environment", tool_name=tool, tool_call_id=call_id, observation=body)

    missing = "No replacement was performed, old_str `x = 1` did not appear verbatim in /workspace/a.py."
    return [
        event(0, "MessageEvent", "user", llm_message={"role": "user", "content": [{"type": "text", "text": "go"}]}),
        action(1, "k1", "execute_bash", command="pytest -q"),
        bash(2, "k1", "1 failed", 1),
        action(3, "k2", "str_replace_editor", command="str_replace", path="/workspace/a.py", old_str="x = 1"),
        editor(4, "k2", "", missing),
        action(5, "k3", "str_replace_editor", command="str_replace", path="/workspace/a.py", old_str="x = 2"),
        editor(6, "k3", "The file /workspace/a.py has been edited.", None),
        action(7, "k4", "execute_bash", command="pytest -q"),
        bash(8, "k4", "3 passed", 0),
        action(9, "k5", "execute_bash", command="make"),
        bash(10, "k5", "bash: make: command not found", 0, error=True),
        action(11, "k6", "think", thought="hmm"),
        answer(12, "k6", "think", {"kind": "ThinkObservation", "content": "Your thought has been logged."}),
        action(13, "k7", "finish", message="done"),
        answer(14, "k7", "finish", {"kind": "FinishObservation", "message": "done"}),
    ]


def test_late_2025_v1_output_error_and_exit_code_in_metadata(tmp_path: Path) -> None:
    session = next(open_sessions(write_lines(tmp_path / "events.jsonl", _late_2025_conversation())))
    evts = list(session.events())
    assert [c.tool for c in calls(evts)] == ["execute_bash", "str_replace_editor", "str_replace_editor"] + [
        "execute_bash"
    ] * 2
    assert [(r.call_id, r.content, r.is_error) for r in of(evts, ToolResult)] == [
        ("k1", "1 failed", True),
        ("k2", "No replacement was performed, old_str `x = 1` did not appear verbatim in /workspace/a.py.", True),
        ("k3", "The file /workspace/a.py has been edited.", False),
        ("k4", "3 passed", False),
        ("k5", "bash: make: command not found", True),
    ]
    assert not session.report.skipped  # the think and finish observations answer no tool call: no orphans


def _event_file_name(index: int, event: dict[str, Any]) -> str:
    return f"event-{index:05d}-{event['id']}.json"


def test_flat_v1_event_folder_is_one_session(tmp_path: Path) -> None:
    """Event files straight in a conversation folder, with no ``events/``."""
    conversation = tmp_path / "3f2a9c1e"
    conversation.mkdir()
    stream = _late_2025_conversation()
    for index, event in enumerate(stream):
        (conversation / _event_file_name(index, event)).write_text(json.dumps(event, indent=2))
    (conversation / "base_state.json").write_text(json.dumps({"id": "3f2a9c1e"}))
    files = sorted(conversation.glob("event-*.json"))
    assert [belongs_to_session(f) for f in files] == [False] + [True] * (len(files) - 1)
    assert belongs_to_session(conversation / "base_state.json")
    (session,) = open_sessions(files[0])
    assert (session.session, session.label) == ("3f2a9c1e", str(conversation))
    assert len(calls(list(session.events()))) == 5
    assert not session.report.skipped


def test_2024_evaluation_output_with_action_observation_pairs(tmp_path: Path) -> None:
    """2024 (OpenDevin) evaluation output keeps ``history`` as
    ``[action, observation]`` pairs; a message or finish is paired with a
    ``null`` observation, and the exit code sits in ``extras``."""

    def pair(n: int, action: str, args: dict[str, Any], observation: str, content: str, **extras: Any) -> list[Any]:
        ts = f"2024-06-11T08:00:{n:02d}.000000"
        act = {
            "id": n,
            "timestamp": ts,
            "source": "agent",
            "message": f"Running {action}",
            "action": action,
            "args": args | {"thought": "", "keep_prompt": True, "is_confirmed": "confirmed"},
        }
        obs = {
            "id": n + 1,
            "timestamp": ts,
            "source": "agent",
            "message": "",
            "cause": n,
            "observation": observation,
            "content": content,
            "extras": extras,
        }
        return [act, obs]

    null = {"message": "No observation", "observation": "null", "content": "", "extras": {}}
    prompt = {
        "id": 0,
        "timestamp": "2024-06-11T08:00:00",
        "source": "user",
        "message": "fix",
        "action": "message",
        "args": {"content": "Fix the failing test", "wait_for_response": False},
    }
    history = [
        [prompt, null],
        pair(2, "run", {"command": "pytest"}, "run", "1 failed", command_id=-1, command="pytest", exit_code=1),
        pair(4, "run", {"command": "pytest"}, "run", "1 failed", command_id=-1, command="pytest", exit_code=1),
        pair(6, "run_ipython", {"code": "print(1)", "kernel_init_code": ""}, "run_ipython", "1", code="print(1)"),
        pair(8, "run", {"command": "pytest"}, "run", "2 passed", command_id=-1, command="pytest", exit_code=0),
        [{"id": 10, "source": "agent", "action": "finish", "args": {"outputs": {}, "thought": ""}}, null],
    ]
    record = {"instance_id": "sympy__sympy-20590", "instruction": "fix", "history": history, "error": None}
    path = write_lines(tmp_path / "output.jsonl", [record, {"task_id": "gaia-7", "history": history}])
    sessions = list(open_sessions(path))
    assert [s.session for s in sessions] == ["sympy__sympy-20590", "gaia-7"]
    evts = list(sessions[0].events())
    assert [m.text for m in of(evts, UserMessage)] == ["Fix the failing test"]
    assert [(c.call_id, c.tool, c.args, c.step) for c in calls(evts)] == [
        ("event-2", "run", {"command": "pytest"}, 1),
        ("event-4", "run", {"command": "pytest"}, 2),
        ("event-6", "run_ipython", {"code": "print(1)"}, 3),
        ("event-8", "run", {"command": "pytest"}, 4),
    ]
    assert [r.is_error for r in of(evts, ToolResult)] == [True, True, False, False]
    assert longest_run(evts) == 2
    assert not sessions[0].report.skipped


def test_pairs_without_ids_are_linked_by_position(tmp_path: Path) -> None:
    act = {"source": "agent", "action": "run", "args": {"command": "ls"}}
    obs = {"source": "agent", "observation": "run", "content": "a", "extras": {"exit_code": 0}}
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps([[act, obs], [act, obs | {"extras": {"exit_code": 2}}]]))
    evts = only(path)
    assert [(r.call_id, r.is_error) for r in of(evts, ToolResult)] == [("position-0", False), ("position-1", True)]


def test_a_v1_condensation_is_imported_as_a_compaction(tmp_path: Path) -> None:
    events = _v1_conversation()
    condensation = {"kind": "Condensation", "source": "environment", "id": "cond-1", "forgotten_event_ids": []}
    middle = len(events) // 2
    path = tmp_path / "events.json"
    path.write_text(json.dumps([*events[:middle], condensation, *events[middle:]]))
    kinds = compactions(only(path))
    assert kinds.count("compacted") == 1
    assert len(kinds) == len(calls(only(path))) + 1
