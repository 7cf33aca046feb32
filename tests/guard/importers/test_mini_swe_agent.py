"""mini-swe-agent trajectories, real and synthetic."""

from __future__ import annotations

import json
from pathlib import Path

from bus import ToolCall, ToolResult, UserMessage
from guard.importers import detect_format, open_sessions
from tests.guard.importers._transcripts import calls, corpus_file, longest_run, of, only

SHORT = "mini-swe-agent/django__django-11951.traj.json"


def test_format_error_turns_are_steps_without_calls() -> None:
    (session,) = open_sessions(corpus_file(SHORT))
    assert session.session == "django__django-11951"
    evts = list(session.events())
    assert len(calls(evts)) == 31
    assert longest_run(evts) == 2
    steps = [c.step for c in calls(evts)]
    assert steps[-1] == 35  # 35 responses, 4 of them rejected for their format
    assert len(set(range(1, 36)) - set(steps)) == 4
    repeated = [c for c in calls(evts) if c.args == {"command": "python3 reproduce_issue.py"}]
    assert len(repeated) == 6


def test_first_call_is_imported_exactly() -> None:
    evts = only(corpus_file(SHORT))
    first = calls(evts)[0]
    assert first == ToolCall(
        agent=first.agent, ts=1763509410.0, call_id="step-1", step=1, tool="bash", args={"command": "ls -la"}
    )
    result = of(evts, ToolResult)[0]
    assert result.content.startswith("<returncode>0</returncode>\n<output>\ntotal 176")
    assert not result.is_error
    (task,) = of(evts, UserMessage)
    assert task.text.startswith("<pr_description>")


def test_long_run() -> None:
    evts = only(corpus_file("mini-swe-agent/django__django-15563.traj.json"))
    assert len(calls(evts)) == 85
    assert longest_run(evts) == 2
    sed = {"command": "sed -n '1830,1870p' django/db/models/sql/compiler.py"}
    assert sum(c.args == sed for c in calls(evts)) == 3


def test_synthetic_errors_timeouts_and_tool_messages(tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "you are"},
        {"role": "user", "content": " "},
        {"role": "user", "content": "fix"},
        {"role": "assistant", "content": "```bash\nfalse\n```"},
        {"role": "user", "content": "<returncode>1</returncode>\n<output></output>"},
        {"role": "assistant", "content": "```bash\nsleep 999\n```"},
        {"role": "user", "content": "The last command <command>sleep 999</command> timed out and has been killed."},
        {"role": "assistant", "content": "no block here"},
        {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, found 0 actions."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "t", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}],
        },
        {"role": "tool", "tool_call_id": "t", "content": "<returncode>0</returncode>"},
        {"role": "exit", "content": "Submitted"},
        "junk",
    ]
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps({"info": {}, "messages": messages}))
    assert detect_format(path) == "mini-swe-agent"
    evts = only(path)
    assert [(c.call_id, c.step) for c in calls(evts)] == [("step-1", 1), ("step-2", 2), ("t", 4)]
    assert [r.is_error for r in of(evts, ToolResult)] == [True, True, False]
    assert [m.text for m in of(evts, UserMessage)] == ["fix"]


def _v2(messages: list[object]) -> dict[str, object]:
    return {"info": {"mini_version": "2.0.0"}, "messages": messages, "trajectory_format": "mini-swe-agent-1.1"}


def test_version_2_tool_calls_use_the_recorded_actions_and_return_codes(tmp_path: Path) -> None:
    # mini-swe-agent 2 (litellm tool calling): the actions it ran sit in
    # extra.actions, each output's return code in extra.returncode, and every
    # message has extra.timestamp.
    def response(at: float, *commands: tuple[str, str]) -> dict[str, object]:
        return {
            "role": "assistant",
            "content": "thinking",
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": c})}}
                for i, c in commands
            ],
            "extra": {"actions": [{"command": c, "tool_call_id": i} for i, c in commands], "timestamp": at},
        }

    def output(at: float, call_id: str, code: int, text: str) -> dict[str, object]:
        extra = {"raw_output": text, "returncode": code, "timestamp": at}
        return {"role": "tool", "tool_call_id": call_id, "content": text, "extra": extra}

    messages = [
        {"role": "system", "content": "you are"},
        {"role": "user", "content": "fix the bug"},
        response(1000.0, ("c1", "pytest -x"), ("c2", "git status")),
        output(1001.0, "c1", 1, "1 failed"),
        output(1002.0, "c2", 0, "clean"),
        response(1010.0, ("c1", "pytest -x")),
        output(1011.0, "c1", -1, ""),
        {"role": "exit", "content": "Submitted", "extra": {"exit_status": "Submitted"}},
    ]
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps(_v2(messages)))
    evts = only(path)
    assert [(c.call_id, c.step, c.args, c.ts) for c in calls(evts)] == [
        ("c1", 1, {"command": "pytest -x"}, 1000.0),
        ("c2", 1, {"command": "git status"}, 1000.0),
        ("c1@2", 2, {"command": "pytest -x"}, 1010.0),
    ]
    assert [(r.call_id, r.is_error, r.ts) for r in of(evts, ToolResult)] == [
        ("c1", True, 1001.0),
        ("c2", False, 1002.0),
        ("c1@2", True, 1011.0),
    ]


def test_version_2_format_complaints_are_steps_without_calls_not_user_messages(tmp_path: Path) -> None:
    """mini-swe-agent 2 keeps no assistant message for a response it rejects
    for its format, only the complaint: that is a model turn without a call
    (a gap in the steps), before the first call too, and never the task."""

    def rejected(**extra: object) -> dict[str, object]:
        content = "No tool calls found in the response. Every response MUST include at least one tool call."
        return {"role": "user", "content": content, "extra": {"interrupt_type": "FormatError", **extra}}

    def response(call_id: str) -> dict[str, object]:
        call = {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
        extra = {"actions": [{"command": "ls", "tool_call_id": call_id}]}
        return {"role": "assistant", "content": None, "tool_calls": [call], "extra": extra}

    messages = [
        {"role": "system", "content": "you are"},
        {"role": "user", "content": "<pr_description>fix the bug</pr_description>"},
        rejected(),  # 2.2: the complaint alone
        response("c1"),
        {"role": "tool", "tool_call_id": "c1", "content": "a.py", "extra": {"returncode": 0}},
        rejected(cost=0.001, response={"model": "gpt-5-mini", "created": 1773533180}),  # later 2.x keep the response
        response("c2"),
    ]
    doc = {**_v2(messages), "info": {"config": {"model": {"model_name": "gpt-5-mini"}}}}
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps(doc))
    (session,) = open_sessions(path)
    evts = list(session.events())
    assert [m.text for m in of(evts, UserMessage)] == ["<pr_description>fix the bug</pr_description>"]
    assert [(c.call_id, c.step) for c in calls(evts)] == [("c1", 2), ("c2", 4)]
    assert session.models == {"gpt-5-mini": 4}  # every response, rejected or not


def test_every_call_of_a_chat_is_new_however_often_its_id_recurs(tmp_path: Path) -> None:
    """A model server that names every call ``call_0``, in parallel calls
    too: every assistant message is a new response, so no call is taken
    for a copy of another."""

    def response(calls: int) -> dict[str, object]:
        call = {"id": "call_0", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
        return {"role": "assistant", "content": "", "tool_calls": [call] * calls}

    messages = [{"role": "user", "content": "fix the bug"}, response(3), response(1)]
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps(_v2(messages)))
    (session,) = open_sessions(path)
    assert [(c.call_id, c.step) for c in calls(list(session.events()))] == [
        ("call_0", 1),
        ("call_0@1", 1),
        ("call_0@1.2", 1),
        ("call_0@2", 2),
    ]
    assert not session.report.skipped


def test_version_2_text_actions_follow_the_configured_regex(tmp_path: Path) -> None:
    # A text-based config may use its own action regex: the recorded action
    # is the call even when the block is not ```bash.
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "<cmd>ls -la</cmd>", "extra": {"actions": [{"command": "ls -la"}, "junk"]}},
        {"role": "user", "content": "listing", "extra": {"returncode": 0}},
    ]
    path = tmp_path / "text.traj.json"
    path.write_text(json.dumps(_v2(messages)))
    evts = only(path)
    assert [(c.call_id, c.args) for c in calls(evts)] == [("step-1", {"command": "ls -la"})]
    assert [(r.content, r.is_error) for r in of(evts, ToolResult)] == [("listing", False)]


def test_version_2_responses_api_items(tmp_path: Path) -> None:
    # The *_response models store the Responses API object itself and answer
    # with function_call_output items.
    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000000,
        "output": [
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": "fc1", "name": "bash", "arguments": '{"command": "cat a.py"}'},
        ],
    }
    no_actions = {
        "id": "resp_2",
        "object": "response",
        "output": [{"type": "function_call", "call_id": "fc2", "name": "bash", "arguments": "{}"}],
    }
    messages = [
        {"role": "user", "content": "task"},
        response,
        {"type": "function_call_output", "call_id": "fc1", "output": "print(1)", "extra": {"returncode": 0}},
        no_actions,
        {"type": "function_call_output", "call_id": "fc2", "output": "boom", "extra": {"returncode": 2}},
    ]
    path = tmp_path / "resp.traj.json"
    path.write_text(json.dumps(_v2(messages)))
    evts = only(path)
    assert [(c.call_id, c.step, c.args, c.ts) for c in calls(evts)] == [
        ("fc1", 1, {"command": "cat a.py"}, 1700000000.0),
        ("fc2", 2, {}, 1700000000.0),
    ]
    assert [(r.content, r.is_error) for r in of(evts, ToolResult)] == [("print(1)", False), ("boom", True)]


def test_a_bare_message_list_is_a_trajectory(tmp_path: Path) -> None:
    # mini-swe-agent's own test data keeps just the message list.
    messages = [
        {"role": "system", "content": "you are"},
        {"role": "user", "content": "Please solve this issue: x"},
        {"role": "assistant", "content": "Run it:\n\n```mswea_bash_command\necho hi\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\nhi\n</output>"},
    ]
    path = tmp_path / "local.traj.json"
    path.write_text(json.dumps(messages))
    assert detect_format(path) == "mini-swe-agent"
    session = next(open_sessions(path))
    assert session.session == "local"
    evts = list(session.events())
    assert [c.args for c in calls(evts)] == [{"command": "echo hi"}]
    assert [m.text for m in of(evts, UserMessage)] == ["Please solve this issue: x"]


def test_a_message_that_is_a_pair_of_objects_is_counted(tmp_path: Path) -> None:
    """Only OpenHands histories hold ``[action, observation]`` pairs."""
    messages = [
        {"role": "system", "content": "you are an agent"},
        {"role": "user", "content": "fix it"},
        [{"action": "run", "args": {}}, {"observation": "run", "content": ""}],
    ]
    path = tmp_path / "x.traj.json"
    path.write_text(json.dumps({"info": {}, "messages": messages}))
    (session,) = open_sessions(path)
    list(session.events())
    assert session.report.skipped == {"not-an-object": 1}
