"""Text built to make a lazy pattern retry at every position (thousands of
opening tags or fences that never close) is imported in bounded time, with
the same calls as a well-formed transcript."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bus import ToolCall
from guard.importers import open_sessions

OPENERS = 20_000


def _calls(path: Path) -> list[ToolCall]:
    [session] = open_sessions(path)
    return [e for e in session.events() if isinstance(e, ToolCall)]


def test_unclosed_fences_in_a_mini_swe_agent_turn(tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "x"},
        {"role": "user", "content": "fix"},
        {"role": "assistant", "content": "```bash\nls\n```"},
        {"role": "user", "content": "<returncode>0</returncode>"},
        {"role": "assistant", "content": "```bash\na" * OPENERS},
        {"role": "user", "content": "<returncode>0</returncode>"},
    ]
    path = tmp_path / "t.traj.json"
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "info": {}, "messages": messages}))
    assert [c.args for c in _calls(path)] == [{"command": "ls"}]


@pytest.mark.parametrize("opener", ["<execute_command>a", "<command>a", "<task>a"])
def test_unclosed_tags_in_a_cline_conversation(opener: str, tmp_path: Path) -> None:
    call = "<execute_command>\n<command>ls</command>\n</execute_command>"
    history = [
        {"role": "user", "content": [{"type": "text", "text": "<task>\nfix it\n</task>" + opener * OPENERS}]},
        {"role": "assistant", "content": [{"type": "text", "text": opener * OPENERS + call}], "ts": 1769053680585},
    ]
    path = tmp_path / "api_conversation_history.json"
    path.write_text(json.dumps(history))
    assert [c.args for c in _calls(path)] == [{"command": "ls"}]
