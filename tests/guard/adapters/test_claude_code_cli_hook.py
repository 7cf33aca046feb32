"""Plain Claude Code with ``repeat-tool-guard hook`` as its command hook, end
to end: the CLI bundled in ``claude-agent-sdk`` runs offline against the
scripted fake Anthropic API, starts the hook as a process for every hook
event from the settings ``hook-settings`` prints, and what the model reads
next is recorded. Each hook process restores the guard from the snapshot the
previous one left, so nothing is replayed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bus import AgentStatus, read_log
from guard import GENTLE_REMINDER, TURNS_HALT_REASON
from tests.claude_cli import LEAVES_A_TRACE, FakeAnthropic, text, tool_use
from tests.guard.adapters.conftest import RESCUE_DENIED, TURNS_DENIED


def bash(command: str) -> dict[str, Any]:
    return tool_use("Bash", {"command": command})


def settings(state: Path, config: Path | None = None) -> dict[str, Any]:
    options = ["--state-dir", str(state), *(["--config", str(config)] if config else [])]
    done = subprocess.run(
        [sys.executable, "-m", "guard", "hook-settings", *options], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    printed: dict[str, Any] = json.loads(done.stdout)
    return printed


def one_session_log(state: Path) -> Path:
    (log,) = state.glob("*.jsonl")
    assert list(state.glob(f"{log.stem}.*.snapshot")), "a snapshot beside the log"
    headers = [line for line in log.read_bytes().splitlines() if b'"session/start"' in line]
    assert len(headers) == 1, "one header, however many hook processes wrote to the log"
    return log


def test_a_reminder_from_the_hook_process_reaches_the_model(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    state = tmp_path / "state"
    fake_anthropic.script(*[[bash("ls src")]] * 3, [text("Found it.")])
    done = fake_anthropic.run_cli("find the config loader", settings=settings(state))

    assert done.returncode == 0, done.stderr
    assert GENTLE_REMINDER not in fake_anthropic.texts_after_tool_results(2)
    assert GENTLE_REMINDER in fake_anthropic.texts_after_tool_results(3)
    assert isinstance(next(iter(read_log(one_session_log(state)))), AgentStatus)


def test_a_denial_from_the_hook_process_stops_the_tool(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    state, config = tmp_path / "state", tmp_path / "guard.toml"
    config.write_text(f'[remind]\nenabled = false\n\n[rescue]\nask_command = "{tmp_path / "no-ask"}"\n')
    fake_anthropic.script(*[[bash(LEAVES_A_TRACE)]] * 3, [text("Giving up.")])
    done = fake_anthropic.run_cli("record a run", settings=settings(state, config))

    assert done.returncode == 0, done.stderr
    assert (fake_anthropic.work / "ran.txt").read_text() == "ran\nran\n", "the third call did not run"
    (denied,) = fake_anthropic.tool_results(3)
    assert denied["is_error"] is True
    assert RESCUE_DENIED in fake_anthropic.texts_after_tool_results(3)
    one_session_log(state)


def test_a_halt_from_the_hook_process_ends_the_session(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    state, config = tmp_path / "state", tmp_path / "guard.toml"
    config.write_text("[remind]\nenabled = false\n\n[turns]\nthreshold = 2\ndeny_after = 1\nhalt_after = 1\n")
    fake_anthropic.script(*[[bash("ls src")]] * 5, [text("never asked")])
    done = fake_anthropic.run_cli("find the config loader", settings=settings(state, config))

    assert done.returncode == 0, done.stderr
    assert TURNS_DENIED in fake_anthropic.texts_after_tool_results(3)
    assert len(fake_anthropic.requests) == 4, "no model request after the halt"
    log = one_session_log(state)
    halts = [e for e in read_log(log) if isinstance(e, AgentStatus) and e.status == "halt-requested"]
    assert [h.reason for h in halts] == [TURNS_HALT_REASON.format(tool="Bash", count=4, denials=" and 2 denied calls")]
    replay = subprocess.run(
        [sys.executable, "-m", "guard", "replay", str(log), "--check", "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert replay.returncode == 0, replay.stderr


def test_an_output_too_large_to_show_read_again_is_the_same_result(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """Past about 30,000 characters Claude Code saves a command's output to
    a new file each time and tells the hook that file's path: the same
    output read again is still the same result, denied at the third."""
    state, config = tmp_path / "state", tmp_path / "guard.toml"
    config.write_text("[remind]\nenabled = false\n\n[loops]\n")
    fake_anthropic.script([bash("seq 100000 140000 > big.txt")], *[[bash("cat big.txt")]] * 3, [text("Done.")])
    done = fake_anthropic.run_cli("show the log", settings=settings(state, config))

    assert done.returncode == 0, done.stderr
    assert "Full output saved to" in fake_anthropic.texts_after_tool_results(2), "the output was too large to show"
    assert [r.get("is_error") is True for n in (2, 3, 4) for r in fake_anthropic.tool_results(n)] == [
        False,
        False,
        True,
    ]


def test_install_puts_the_hooks_where_claude_code_reads_them(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    """``CLAUDE_CONFIG_DIR`` moves Claude Code's user settings out of
    ``~/.claude``: ``install`` follows it, so the hooks run."""
    state, config_dir = tmp_path / "state", fake_anthropic.home / "elsewhere"
    env = {**fake_anthropic.env(), "PATH": os.environ.get("PATH", ""), "CLAUDE_CONFIG_DIR": str(config_dir)}
    done = subprocess.run(
        [sys.executable, "-m", "guard", "install", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (config_dir / "settings.json").exists()
    fake_anthropic.script(*[[bash("ls src")]] * 3, [text("Found it.")])
    ran = fake_anthropic.run_cli("find the loader", env={"CLAUDE_CONFIG_DIR": str(config_dir)}, setting_sources="user")

    assert ran.returncode == 0, ran.stderr
    assert GENTLE_REMINDER in fake_anthropic.texts_after_tool_results(3)
