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
