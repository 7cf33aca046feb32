"""The hook command's fault behaviour: exit 1 (never 2, which would block
the tool) with exactly one line on stderr and nothing on stdout when the
guard cannot record; its own log lines one per line, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bus import LogReader, ToolCall
from tests.conftest import AskScript
from tests.faults.conftest import CLI, REPO, subprocess_run

Limit = Callable[[int], None]


def _pre(n: int, command: str = "ls") -> bytes:
    payload = {
        "session_id": "s",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_use_id": f"toolu_{n}",
        "tool_input": {"command": command},
    }
    return json.dumps(payload).encode()


def _post(n: int, command: str = "ls") -> bytes:
    payload = json.loads(_pre(n, command))
    payload.update(hook_event_name="PostToolUse", tool_response="same output")
    return json.dumps(payload).encode()


def test_a_log_that_cannot_take_the_event_exits_1_with_one_line(
    tmp_path: Path, cli: CLI, file_size_limit: Limit
) -> None:
    assert cli("hook", "--state-dir", tmp_path, stdin=_pre(1)).code == 0
    file_size_limit((tmp_path / "s.jsonl").stat().st_size + 120)  # the resume header fits, the call does not
    run = cli("hook", "--state-dir", tmp_path, stdin=_pre(2, "x" * 300))
    file_size_limit(1 << 30)
    line = run.clean_error(1)
    assert line.startswith("repeat-tool-guard hook: 1 event(s) not recorded: session log ")
    assert line.endswith(": event not written (File too large)")
    assert run.out == ""
    assert cli("hook", "--state-dir", tmp_path, stdin=_pre(3)).code == 0
    reader = LogReader(tmp_path / "s.jsonl")
    assert [e.call_id for e in reader if isinstance(e, ToolCall)] == ["toolu_1", "toolu_3"]
    assert reader.report.skipped == 0


def test_the_guard_s_log_lines_are_one_line_each(tmp_path: Path, cli: CLI) -> None:
    runs = []
    for n in range(3):
        runs.append(cli("-v", "hook", "--state-dir", tmp_path, stdin=_pre(n)))
        runs.append(cli("-v", "hook", "--state-dir", tmp_path, stdin=_post(n)))
    assert [r.code for r in runs] == [0] * 6
    assert runs[-1].err.startswith("info: guard.remind ")
    assert len(runs[-1].err.splitlines()) == 1
    assert "count=3" in runs[-1].err


def test_an_exception_in_the_guard_s_log_becomes_one_error_field() -> None:
    from guard.cli import _error_text

    try:
        raise OSError(28, "No space left on device")
    except OSError as exc:
        held = _error_text(None, "error", {"event": "recorder failed", "exc_info": True})
        given = _error_text(None, "error", {"event": "x", "exc_info": exc})
    assert held == {"event": "recorder failed", "error": "OSError: [Errno 28] No space left on device"}
    assert given["error"] == held["error"]
    assert _error_text(None, "info", {"event": "y"}) == {"event": "y"}


def test_a_payload_past_the_limit_is_not_read_on_either_path(tmp_path: Path, cli: CLI) -> None:
    huge = _pre(1, "x" * (8 * 1024 * 1024))  # as /dev/zero would be, but for ever
    for forwarding in ((), ("--serve", f"unix:{tmp_path / 'nobody.sock'}")):
        run = cli("hook", *forwarding, "--state-dir", tmp_path, stdin=huge)
        assert run.clean_error(1) == "repeat-tool-guard hook: the hook payload on stdin is over 8 MiB: not read"
        assert run.out == ""
    assert not (tmp_path / "s.jsonl").exists()


def test_a_hook_killed_while_it_escalates_records_nothing_and_the_tool_it_let_run_replays_clean(
    tmp_path: Path, ask_script: AskScript
) -> None:
    asked = tmp_path / "asked"
    ask = ask_script(f"touch {asked}\nsleep 30")
    config = tmp_path / "rescue.toml"
    config.write_text(f'[remind]\nenabled = false\n[rescue]\nask_command = "{ask}"\n')
    hook = ("hook", "--config", str(config), "--state-dir", str(tmp_path))
    for n in range(1, 5):
        if '"permissionDecision":"deny"' not in subprocess_run(*hook, stdin=_pre(n)).out:
            assert subprocess_run(*hook, stdin=_post(n)).code == 0
    killed = subprocess.Popen([sys.executable, "-m", "guard", *hook], stdin=subprocess.PIPE, cwd=REPO)
    assert killed.stdin is not None
    killed.stdin.write(_pre(5))
    killed.stdin.close()
    for _ in range(400):  # as the CLI kills a hook past its timeout, while the ask runs
        if asked.exists():
            break
        time.sleep(0.05)
    killed.kill()
    killed.wait()
    log = tmp_path / "s.jsonl"
    assert [e.call_id for e in LogReader(log) if isinstance(e, ToolCall)] == [f"toolu_{n}" for n in range(1, 5)]
    assert subprocess_run(*hook, stdin=_post(5)).code == 0  # the CLI ran the tool all the same
    calls = [e for e in LogReader(log) if isinstance(e, ToolCall)]
    assert (calls[-1].call_id, calls[-1].late) == ("toolu_5", True)
    check = subprocess_run("replay", str(log), "--config", str(config), "--check")
    assert check.code == 0, check.err


def test_another_clis_hook_event_is_a_fault_that_names_the_cli(tmp_path: Path, cli: CLI) -> None:
    """A Gemini CLI payload given to the hook set up for Claude Code (no
    ``--agent``) was answered with nothing, forever: the guard silently
    off. It is a fault the CLI shows, naming the ``--agent`` to use."""
    gemini = {"session_id": "s", "hook_event_name": "BeforeTool", "tool_name": "read_file", "tool_input": {}}
    run = cli("hook", "--state-dir", tmp_path / "state", stdin=json.dumps(gemini).encode())
    line = run.clean_error(1)
    assert line == (
        "repeat-tool-guard hook: hook event 'BeforeTool' is one gemini-cli sends, not claude-code: "
        "run the hook with --agent gemini-cli (hook-settings --agent gemini-cli prints it)"
    )
    assert run.out == ""
    assert not (tmp_path / "state").exists(), "no session state made"
    claude = {"session_id": "s", "hook_event_name": "Notification", "message": "waiting"}
    ignored = cli("hook", "--state-dir", tmp_path / "state", stdin=json.dumps(claude).encode())
    assert (ignored.code, ignored.out) == (0, "")  # an event of its own CLI the guard does not follow
    assert not (tmp_path / "state").exists()
