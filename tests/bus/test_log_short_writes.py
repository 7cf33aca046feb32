"""The session log finishes a line the kernel accepted only part of."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bus import Agent, SessionLog, ToolCall, read_log


def test_a_short_write_still_lands_the_whole_line(log_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    sizes: list[int] = []

    def dribble(fd: int, data: bytes | memoryview) -> int:
        written = real_write(fd, bytes(data[:7]))  # as a pipe or a signal might
        sizes.append(written)
        return written

    monkeypatch.setattr(os, "write", dribble)
    agent = Agent("main")
    with SessionLog(log_path) as log:
        log.write(ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args={"pattern": "x" * 40}))
    monkeypatch.undo()
    events = list(read_log(log_path))
    assert [(e.call_id, e.args) for e in events if isinstance(e, ToolCall)] == [("c1", {"pattern": "x" * 40})]
    assert len(sizes) > 10
