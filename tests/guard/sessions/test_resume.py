"""Resuming a session from its log, when the file there is no session log."""

from __future__ import annotations

from pathlib import Path

import pytest

from bus import LogError, LogReader, ToolCall
from guard import Config
from guard.sessions.resume import resume_link

pytestmark = pytest.mark.anyio

NOT_A_LOG = "this is not a session log\n"


async def test_a_file_that_is_no_session_log_is_an_error_left_where_it_is(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(NOT_A_LOG)
    with pytest.raises(LogError, match="is not a session log"):
        await resume_link(path, "s", Config())
    assert [p.name for p in tmp_path.iterdir()] == ["s.jsonl"]
    assert path.read_text() == NOT_A_LOG


async def test_on_unreadable_the_file_is_set_aside_and_the_session_begins_anew(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(NOT_A_LOG)
    told: list[str] = []
    link, log = await resume_link(path, "s", Config(), on_unreadable=told.append)
    with log:
        await link.agent("main").call("c1", "Bash", {"command": "ls"})
    (aside,) = tmp_path.glob("s.jsonl.unreadable-*")
    assert aside.read_text() == NOT_A_LOG
    [why] = told
    assert why.startswith(f"{str(path)!r} is not a session log: line 1 is not a session/start header")
    assert why.endswith(f"; moved to {str(aside)!r} and a new log begun")
    assert [e.tool for e in LogReader(path) if isinstance(e, ToolCall)] == ["Bash"]
