"""A session's guard for a process that answers one hook event and exits:
what it records when the CLI stops waiting for the answer."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bus import LogReader, ToolCall, ToolResult
from guard.adapters.claude_hooks import answer_hook
from guard.sessions.hook_state import HookAbandoned

REPO = Path(__file__).resolve().parents[3]


def _pre(n: int) -> dict[str, Any]:
    return {
        "session_id": "s",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_use_id": f"toolu_{n}",
        "tool_input": {"command": "ls"},
    }


def _calls(state: Path) -> list[str]:
    log = state / "s.jsonl"
    return [e.call_id for e in LogReader(log) if isinstance(e, ToolCall)] if log.exists() else []


def test_an_event_its_cli_stopped_waiting_for_records_nothing(tmp_path: Path) -> None:
    answer_hook(_pre(1), tmp_path, log_actions=False)
    snapshots = sorted(tmp_path.glob("*.snapshot"))
    before = [path.read_bytes() for path in snapshots]
    with pytest.raises(HookAbandoned, match="stopped waiting for this hook"):
        answer_hook(_pre(2), tmp_path, log_actions=False, abandoned=lambda: True)
    assert _calls(tmp_path) == ["toolu_1"]
    assert [path.read_bytes() for path in snapshots] == before, "no state of the abandoned event is kept"
    answer_hook(_pre(3), tmp_path, log_actions=False, abandoned=lambda: False)
    assert _calls(tmp_path) == ["toolu_1", "toolu_3"]


def test_a_hook_waiting_for_its_session_leaves_once_its_cli_stopped_waiting(tmp_path: Path) -> None:
    answer_hook(_pre(1), tmp_path, log_actions=False)
    asked = 0

    def abandoned() -> bool:
        nonlocal asked
        asked += 1
        return asked > 2

    lock = os.open(tmp_path / "s.lock", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another hook process of the session holds it
        with pytest.raises(HookAbandoned):
            answer_hook(_pre(2), tmp_path, log_actions=False, abandoned=abandoned)
    finally:
        os.close(lock)
    assert asked == 3
    assert _calls(tmp_path) == ["toolu_1"]


def _hook_whose_shell_is_killed(state: Path, event: dict[str, Any]) -> tuple[bytes, str]:
    """Run the hook as Gemini CLI's settings start it, for ``event``, while
    another hook of the session holds its lock; kill the shell as Gemini
    CLI does at its hook timeout, then let go of the lock: what the hook
    answered and said."""
    lock = os.open(state / "s.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    with contextlib.ExitStack() as held:
        held.callback(fcntl.flock, lock, fcntl.LOCK_UN)
        hook = f"{sys.executable} -m guard hook --agent gemini-cli --state-dir {state} || printf '{{}}'"
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        with subprocess.Popen(["bash", "-c", hook], cwd=REPO, **pipes) as shell:  # type: ignore[call-overload]
            shell.stdin.write(json.dumps(event).encode())
            shell.stdin.close()
            time.sleep(1)  # the hook waits for the lock
            shell.send_signal(signal.SIGTERM)
            shell.wait(10)
            time.sleep(1)
            held.close()  # a hook still waiting gets the lock now
            answered = shell.stdout.read()  # its end: the hook, holding it too, has left
            said = shell.stderr.read().decode()
    os.close(lock)
    return answered, said


_GEMINI = {"session_id": "s", "tool_name": "run_shell_command", "tool_input": {"command": "ls"}}


def test_a_hook_whose_shell_the_cli_killed_at_its_timeout_records_nothing(tmp_path: Path) -> None:
    """Gemini CLI, at its hook timeout, signals only the shell it started
    (``repeat-tool-guard hook ... || printf ...``), which leaves the hook
    running: it leaves at once, recording nothing of the call it was asked
    about, however long the session's lock would have kept it."""
    answered, said = _hook_whose_shell_is_killed(tmp_path, {**_GEMINI, "hook_event_name": "BeforeTool"})
    assert answered == b""
    assert "the agent CLI stopped waiting for this hook" in said
    assert _calls(tmp_path) == []


def test_a_result_whose_hook_the_cli_gave_up_on_is_still_recorded(tmp_path: Path) -> None:
    """A result happened whatever the hook answers: it is recorded, so the
    call is not left open."""
    run = subprocess.run(
        [sys.executable, "-m", "guard", "hook", "--agent", "gemini-cli", "--state-dir", str(tmp_path)],
        input=json.dumps({**_GEMINI, "hook_event_name": "BeforeTool"}).encode(),
        capture_output=True,
        cwd=REPO,
        check=True,
    )
    assert run.returncode == 0
    result = {**_GEMINI, "hook_event_name": "AfterTool", "tool_response": {"llmContent": "Output: a.py"}}
    _hook_whose_shell_is_killed(tmp_path, result)
    results = [e for e in LogReader(tmp_path / "s.jsonl") if isinstance(e, ToolResult)]
    assert [r.content for r in results] == ["Output: a.py"]
