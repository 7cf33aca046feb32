"""SWE-agent trajectories, real and synthetic."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from bus import ToolCall, ToolResult, UserMessage
from guard import load_config
from guard.audit import audit
from guard.importers import open_sessions, swe_agent
from tests.guard.importers._transcripts import calls, corpus_file, longest_run, of, only


def test_text_interface_run_with_a_repeated_rejected_edit() -> None:
    evts = only(corpus_file("swe-agent/pydicom__pydicom-1458.traj"))
    assert len(calls(evts)) == 12
    assert longest_run(evts) == 2
    first = calls(evts)[0]
    assert first == ToolCall(
        agent=first.agent,
        ts=0.0,
        call_id="step-1",
        step=1,
        tool="create",
        args={"command": "create reproduce_bug.py\n"},
    )
    rejected = [r for r in of(evts, ToolResult) if r.is_error]
    assert len(rejected) == 3
    assert all(r.content.startswith("Your proposed edit has introduced new syntax error(s)") for r in rejected)
    repeated = [c for c in calls(evts) if c.tool == "edit" and c.args["command"].startswith("edit 287:295")]
    assert repeated[1].args == repeated[2].args
    (task,) = of(evts, UserMessage)
    assert task.text.startswith("We're currently solving the following issue within our repository.")
    results = of(evts, ToolResult)
    assert len(results) == 12  # the history ends before the final submit's observation; the trajectory has it
    assert (results[-1].tool, results[-1].content.startswith("\ndiff --git a/pydicom/")) == ("submit", True)


@pytest.mark.parametrize(
    ("name", "count", "last"),
    [
        ("6e44b9__sweagenttestrepo-1c2844.traj", 5, "\r\ndiff --git a/tests/missing_colon.py"),
    ],
)
def test_a_real_runs_final_submit_is_imported_with_its_answer(name: str, count: int, last: str) -> None:
    evts = only(corpus_file(f"swe-agent/{name}"))
    results = of(evts, ToolResult)
    assert (len(calls(evts)), len(results), calls(evts)[-1].tool) == (count, count, "submit")
    assert results[-1].content.startswith(last)


def test_function_calling_run() -> None:
    evts = only(corpus_file("swe-agent/function_calling_simple.traj"))
    assert [c.tool for c in calls(evts)] == ["find_file", "open", "edit", "bash", "submit"]
    assert longest_run(evts) == 1
    first = calls(evts)[0]
    assert (first.call_id, first.args, first.step) == (
        "call_PbWErNIge3YTrli3fiVvmIid",
        {"file_name": "missing_colon.py"},
        1,
    )
    result = of(evts, ToolResult)[0]
    assert result.content.startswith('Found 1 matches for "missing_colon.py"')
    assert len(of(evts, UserMessage)) == 1


def test_synthetic_history_with_demo_parallel_calls_and_blocklist(tmp_path: Path) -> None:
    history = [
        {"role": "system", "content": "setting"},
        {"role": "user", "content": "demo", "is_demo": True},
        {"role": "assistant", "content": "demo action", "action": "ls", "is_demo": True},
        {"role": "user", "content": ""},
        {"role": "user", "content": "solve the issue"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "a", "function": {"name": "bash", "arguments": {"command": "ls"}}},
                {"function": {"name": "bash", "arguments": '{"command": "pwd"}'}},
                "junk",
            ],
        },
        {"role": "tool", "content": "x", "tool_call_ids": ["a"]},
        {"role": "tool", "content": "y", "tool_call_id": "call-1"},
        {"role": "assistant", "content": "", "action": "vim file.py"},
        {"role": "user", "content": "Interactive operation 'vim' is not supported by this environment."},
        {"role": "user", "content": "a stray message"},
        {"role": "assistant", "content": "thinking only", "action": "  "},
        "junk",
    ]
    path = tmp_path / "run.traj"
    path.write_text(json.dumps({"history": history}))
    evts = only(path)
    assert [(c.call_id, c.tool, c.step) for c in calls(evts)] == [
        ("a", "bash", 1),
        ("call-1", "bash", 1),
        ("step-2", "vim", 2),
    ]
    blocked = of(evts, ToolResult)[-1]
    assert (blocked.is_error, blocked.denied_by) == (True, "blocklist")
    assert [m.text for m in of(evts, UserMessage)] == ["solve the issue"]


def _run(tmp_path: Path, history: Sequence[object], trajectory: Sequence[object]) -> Path:
    path = tmp_path / "run.traj"
    path.write_text(json.dumps({"history": history, "trajectory": trajectory}))
    return path


def test_steps_the_history_ends_before_come_from_the_trajectory(tmp_path: Path) -> None:
    history = [
        {"role": "user", "content": "fix it"},
        {
            "role": "assistant",
            "content": "",
            "action": "python repro.py",
            "tool_calls": [
                {"id": "c1", "function": {"name": "bash", "arguments": '{"command": "python repro.py"}'}},
            ],
        },
        {"role": "tool", "content": "ok", "tool_call_ids": ["c1"]},
    ]
    trajectory = [
        {"action": "python repro.py\n", "observation": "ok"},
        {"action": "submit\n", "observation": "diff --git a/x b/x"},
        {"observation": "an entry without an action"},
        {"action": "echo bye", "observation": None},  # killed before it answered
    ]
    evts = only(_run(tmp_path, history, trajectory))
    assert [(c.call_id, c.tool, c.args) for c in calls(evts)] == [
        ("c1", "bash", {"command": "python repro.py"}),
        ("step-2", "submit", {"command": "submit"}),
        ("step-3", "echo", {"command": "echo bye"}),
    ]
    assert [r.content for r in of(evts, ToolResult)] == ["ok", "diff --git a/x b/x"]


def test_the_last_action_left_unanswered_by_the_history_is_answered_from_the_trajectory(tmp_path: Path) -> None:
    history = [
        {"role": "user", "content": "find the flag"},
        {"role": "assistant", "content": "", "action": "submit 'flag{a}'"},
        {"role": "user", "content": "Wrong flag!"},
        {"role": "assistant", "content": "", "action": "submit 'flag{b}'"},
    ]
    # a step the history skipped, before the last: the last action is found where it is, nothing added
    trajectory = [
        {"action": "submit 'flag{a}'\n", "observation": "Wrong flag!"},
        {"action": "cat notes.txt", "observation": "b"},
        {"action": "submit 'flag{b}'\n", "observation": "flag{b}"},
    ]
    evts = only(_run(tmp_path, history, trajectory))
    assert [c.args["command"] for c in calls(evts)] == ["submit 'flag{a}'", "submit 'flag{b}'"]
    assert [r.content for r in of(evts, ToolResult)] == ["Wrong flag!", "flag{b}"]
    unmatched = only(_run(tmp_path, history, [{"action": "ls", "observation": "x"}]))
    assert [r.content for r in of(unmatched, ToolResult)] == ["Wrong flag!"]  # nothing in it to trust
    silent = only(_run(tmp_path, history, [{"action": "submit 'flag{b}'", "observation": None}]))
    assert [r.content for r in of(silent, ToolResult)] == ["Wrong flag!"]


def test_a_step_after_the_history_the_importer_cannot_use_costs_that_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text_call = swe_agent._text_call

    def refusing(action: str) -> tuple[str, object]:
        if action == "cat b":
            raise ValueError("cannot use this step")
        return text_call(action)

    monkeypatch.setattr(swe_agent, "_text_call", refusing)
    history = [{"role": "user", "content": "fix it"}, {"role": "assistant", "content": "", "action": "ls"}]
    steps = ["ls", "cat a", "cat b", None, "cat c", "submit"]
    trajectory = [{"action": a, "observation": f"{a}!"} if a else None for a in steps]
    path = _run(tmp_path, history, trajectory)
    (session,) = open_sessions(path)
    evts = list(session.events())
    assert [c.args["command"] for c in calls(evts)] == ["ls", "cat a", "cat c", "submit"]
    assert [r.content for r in of(evts, ToolResult)] == ["ls!", "cat a!", "cat c!", "submit!"]
    assert session.report.skipped == {"bad-record": 1, "not-an-object": 1}
    assert session.report.problems == [f"{path}#trajectory[2]: ValueError: cannot use this step"]


def test_a_step_after_the_history_that_is_a_list_costs_that_step(tmp_path: Path) -> None:
    history = [{"role": "user", "content": "fix it"}, {"role": "assistant", "content": "", "action": "ls"}]
    trajectory = [{"action": "ls", "observation": "ls!"}, ["no", "step"], {"action": "submit", "observation": "ok"}]
    (session,) = open_sessions(_run(tmp_path, history, trajectory))
    assert [c.args["command"] for c in calls(list(session.events()))] == ["ls", "submit"]
    assert session.report.skipped == {"not-an-object": 1}


def test_an_editor_line_number_too_long_for_an_integer_leaves_the_command(tmp_path: Path) -> None:
    view = "str_replace_editor view /testbed/a.py --view_range 1 " + "9" * 5000
    (call,) = calls(only(_text_run(tmp_path, [(view, "x")])))
    assert call.args == {"command": view}


def test_a_tool_call_id_reused_in_a_later_turn_is_a_new_call(tmp_path: Path) -> None:
    # SWE-agent's replayed demonstrations (and some providers) give a call
    # the id an earlier turn's call had; each turn is still a new call.
    def turn(call_id: str, command: str) -> dict[str, object]:
        arguments = json.dumps({"command": command})
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": call_id, "function": {"name": "bash", "arguments": arguments}}],
        }

    history = [
        {"role": "user", "content": "fix it"},
        turn("call_run", "python repro.py"),
        {"role": "tool", "content": "344", "tool_call_ids": ["call_run"]},
        turn("call_run", "ls"),
        {"role": "tool", "content": "setup.py", "tool_call_ids": ["call_run"]},
        turn("call_run", "python repro.py"),
        {"role": "tool", "content": "345", "tool_call_ids": ["call_run"]},
    ]
    path = tmp_path / "replay.traj"
    path.write_text(json.dumps({"history": history}))
    session = next(open_sessions(path))
    evts = list(session.events())
    assert [(c.call_id, c.args["command"]) for c in calls(evts)] == [
        ("call_run", "python repro.py"),
        ("call_run@2", "ls"),
        ("call_run@3", "python repro.py"),
    ]
    assert [(r.call_id, r.content) for r in of(evts, ToolResult)] == [
        ("call_run", "344"),
        ("call_run@2", "setup.py"),
        ("call_run@3", "345"),
    ]
    assert not session.report.skipped


def test_str_replace_editor_refusals_are_errors(tmp_path: Path) -> None:
    """SWE-agent keeps no exit code: its ``str_replace_editor`` refusing an
    edit is told by the refusal it prints."""

    def turn(call_id: str, args: Mapping[str, object]) -> dict[str, object]:
        function = {"name": "str_replace_editor", "arguments": json.dumps(args)}
        return {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "function": function}]}

    edit = {"command": "str_replace", "path": "/repo/a.py", "old_str": "x = 1", "new_str": "x = 2"}
    history = [
        {"role": "user", "content": "fix it"},
        turn("e1", edit),
        {
            "role": "tool",
            "content": "No replacement was performed, old_str `x = 1` did not appear verbatim in /repo/a.py.",
            "tool_call_ids": ["e1"],
        },
        turn("e2", {"command": "view", "path": "/repo/a.py", "view_range": [1, 90]}),
        {
            "role": "tool",
            "content": "Invalid `view_range`: [1, 90]. Its second element `90` should be smaller than"
            " the number of lines in the file: `12`",
            "tool_call_ids": ["e2"],
        },
        turn("e3", {**edit, "old_str": "x = 0"}),
        {
            "role": "tool",
            "content": "The file /repo/a.py has been edited. No replacement was performed before.",
            "tool_call_ids": ["e3"],
        },
        {"role": "assistant", "content": "", "action": "str_replace_editor undo_edit /repo/b.py"},
        {"role": "user", "content": "No edit history found for /repo/b.py."},
    ]
    path = tmp_path / "editor.traj"
    path.write_text(json.dumps({"history": history}))
    results = of(only(path), ToolResult)
    assert [(r.call_id, r.is_error, r.denied_by) for r in results] == [
        ("e1", True, None),
        ("e2", True, None),
        ("e3", False, None),
        ("step-4", True, None),
    ]


def _text_run(tmp_path: Path, steps: Sequence[tuple[str, str]]) -> Path:
    """A text-interface run: each step an ``action`` and the observation the
    next user message carries."""
    history: list[dict[str, object]] = [{"role": "user", "content": "fix it"}]
    for action, observation in steps:
        history.append({"role": "assistant", "content": "", "action": action})
        history.append({"role": "user", "content": observation})
    return _run(tmp_path, history, [])


def test_text_interface_editor_actions_get_the_editors_own_arguments(tmp_path: Path) -> None:
    new = 'def f():\n    return "it\'s"\n'
    path = _text_run(
        tmp_path,
        [
            ("str_replace_editor view /testbed/a.py  --view_range 919 -1", "     919\tx = 1"),
            (f"str_replace_editor create /testbed/b.py --file_text {shlex.quote(new)}", "File created"),
            ("str_replace_editor str_replace /testbed/a.py   --old_str 'x = 1' --new_str 'x = 2'", "edited"),
            ("str_replace_editor insert /testbed/a.py --insert_line 3 --new_str pass", "edited"),
            ("str_replace_editor undo_edit /testbed/a.py", "undone"),
            ("str_replace_editor view /testbed/a.py --view_range 1", "one number is no range"),
            ("str_replace_editor view /testbed/a.py --color red", "an option the editor has not"),
            ("str_replace_editor str_replace /testbed/a.py --old_str 'x = 1", "an unclosed quote"),
            ("str_replace_editor frobnicate /testbed/a.py", "no such sub-command"),
        ],
    )
    assert [c.args for c in calls(only(path))] == [
        {"command": "view", "path": "/testbed/a.py", "view_range": [919, -1]},
        {"command": "create", "path": "/testbed/b.py", "file_text": new},
        {"command": "str_replace", "path": "/testbed/a.py", "old_str": "x = 1", "new_str": "x = 2"},
        {"command": "insert", "path": "/testbed/a.py", "insert_line": 3, "new_str": "pass"},
        {"command": "undo_edit", "path": "/testbed/a.py"},
        {"command": "str_replace_editor view /testbed/a.py --view_range 1"},
        {"command": "str_replace_editor view /testbed/a.py --color red"},
        {"command": "str_replace_editor str_replace /testbed/a.py --old_str 'x = 1"},
        {"command": "str_replace_editor frobnicate /testbed/a.py"},
    ]


def test_a_cycle_of_editor_views_is_a_loop_and_an_edit_between_them_is_progress(tmp_path: Path) -> None:
    """Views read as views: going round the same views with no edit is
    caught, while viewing again after each edit is work."""
    views = [f"str_replace_editor view /testbed/q.py --view_range {n} {n + 9}" for n in (10, 40, 70)]
    looping = _text_run(tmp_path, [(v, f"lines of {v[-5:]}") for v in views * 4])
    (session,) = audit([looping], load_config("recommended")).sessions
    assert session.actions.get("loops:deny", 0) >= 1
    edit = "str_replace_editor str_replace /testbed/q.py --old_str 'a = {0}' --new_str 'a = {1}'"
    steps = [
        step
        for n in range(4)
        for at, view in enumerate(views)
        for step in ((view, f"lines after edit {n}"), (edit.format(f"{n}{at}", f"{n}{at}+1"), "ok"))
    ]
    (working,) = audit([_text_run(tmp_path, steps)], load_config("recommended")).sessions
    assert working.actions == {}


def test_a_refusal_after_an_observation_header_is_an_error(tmp_path: Path) -> None:
    edit = "str_replace_editor str_replace /testbed/a.py --old_str 'x = 1' --new_str 'x = 2'"
    path = _text_run(
        tmp_path,
        [
            (
                edit,
                "OBSERVATION:\nNo replacement was performed, old_str `x = 1` did not appear verbatim in /testbed/a.py.",
            ),
            ("ls", "OBSERVATION:\na.py"),
        ],
    )
    assert [r.is_error for r in of(only(path), ToolResult)] == [True, False]
