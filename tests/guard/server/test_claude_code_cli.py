"""Claude Code's HTTP hooks end to end: the real Claude Code CLI (bundled in
``claude-agent-sdk``) runs offline against the scripted fake Anthropic API
and posts its hooks to a real ``repeat-tool-guard serve`` process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from bus import AgentStatus, read_log
from guard import GENTLE_REMINDER, TURNS_HALT_REASON
from guard.adapters.claude_hooks import http_hook_settings
from tests.claude_cli import LEAVES_A_TRACE, FakeAnthropic, text, tool_use
from tests.guard.adapters.conftest import RESCUE_DENIED, TURNS_DENIED
from tests.guard.server.conftest import ServerProcess, StartServer


def bash(command: str) -> dict[str, Any]:
    return tool_use("Bash", {"command": command})


def serve(start_server: StartServer, tmp_path: Path, toml: str = "", *args: str) -> ServerProcess:
    config = tmp_path / "guard.toml"
    config.write_text(toml)
    return start_server("--config", str(config), *args)


def claude(api: FakeAnthropic, server: ServerProcess, **settings: Any) -> subprocess.CompletedProcess[str]:
    hooks = http_hook_settings(f"{server.url}/hooks/claude-code", **settings)
    done = api.run_cli("find the config loader", settings=hooks)
    assert done.returncode == 0, done.stderr
    return done


def shown_to_the_user(done: subprocess.CompletedProcess[str]) -> list[str]:
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return [m["content"] for m in lines if m.get("type") == "system" and m.get("subtype") == "informational"]


def session_log(server: ServerProcess) -> Path:
    (log,) = server.state_dir.glob("*.jsonl")
    return log


def test_the_reminder_reaches_the_model(
    fake_anthropic: FakeAnthropic, start_server: StartServer, tmp_path: Path
) -> None:
    server = serve(start_server, tmp_path)
    fake_anthropic.script(*[[bash("ls src")]] * 3, [text("Found it.")])
    done = claude(fake_anthropic, server)

    assert len(fake_anthropic.requests) == 4
    assert GENTLE_REMINDER not in fake_anthropic.texts_after_tool_results(2)
    assert GENTLE_REMINDER in fake_anthropic.texts_after_tool_results(3), "the third call's result carried it"
    assert shown_to_the_user(done) == []
    assert server.stop() == 0
    with read_log(session_log(server)) as reader:
        statuses = [e.status for e in reader if isinstance(e, AgentStatus)]
    assert statuses == ["started", "step-done", "step-done", "step-done", "idle", "disposed"], "SessionEnd came too"


def test_a_denied_call_never_runs_and_the_model_reads_the_denial(
    fake_anthropic: FakeAnthropic, start_server: StartServer, tmp_path: Path
) -> None:
    server = serve(start_server, tmp_path, '[remind]\nenabled = false\n[rescue]\nask_command = "/nonexistent/ask"\n')
    fake_anthropic.script(*[[bash(LEAVES_A_TRACE)]] * 3, [text("Giving up.")])
    claude(fake_anthropic, server)

    assert (fake_anthropic.work / "ran.txt").read_text() == "ran\nran\n", "the third call did not run"
    (denied,) = fake_anthropic.tool_results(3)
    assert denied["is_error"] is True
    assert RESCUE_DENIED in fake_anthropic.texts_after_tool_results(3)


def test_a_halt_ends_the_session_before_another_model_request(
    fake_anthropic: FakeAnthropic, start_server: StartServer, tmp_path: Path
) -> None:
    turns = "[remind]\nenabled = false\n[turns]\nthreshold = 2\ndeny_after = 1\nhalt_after = 1\n"
    server = serve(start_server, tmp_path, turns)
    fake_anthropic.script(*[[bash("ls src")]] * 5, [text("never asked")])
    done = claude(fake_anthropic, server)

    assert TURNS_DENIED in fake_anthropic.texts_after_tool_results(3)
    assert len(fake_anthropic.requests) == 4, "no model request after the halt"
    assert fake_anthropic.remaining == 2
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["type"] == "result"
    assert server.stop() == 0
    with read_log(session_log(server)) as reader:
        (halt,) = [e for e in reader if isinstance(e, AgentStatus) and e.status == "halt-requested"]
    assert halt.reason == TURNS_HALT_REASON.format(tool="Bash", count=4, denials=" and 2 denied calls")


def test_with_a_token_claude_code_sends_it_from_its_environment(
    fake_anthropic: FakeAnthropic, start_server: StartServer, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("t0k3n-for-the-guard")
    token.chmod(0o600)
    server = serve(start_server, tmp_path, "", "--token-file", str(token))
    fake_anthropic.script(*[[bash("ls src")]] * 3, [text("Found it.")])
    hooks = http_hook_settings(f"{server.url}/hooks/claude-code", token_env="GUARD_TOKEN")
    done = fake_anthropic.run_cli("find it", settings=hooks, env={"GUARD_TOKEN": "t0k3n-for-the-guard"})
    assert done.returncode == 0, done.stderr
    assert GENTLE_REMINDER in fake_anthropic.texts_after_tool_results(3)


def test_when_the_server_is_down_the_session_goes_on_unguarded(
    fake_anthropic: FakeAnthropic, start_server: StartServer, tmp_path: Path
) -> None:
    server = serve(start_server, tmp_path)
    assert server.stop() == 0  # nothing listens at its address any more
    fake_anthropic.script(*[[bash(LEAVES_A_TRACE)]] * 3, [text("Done.")])
    done = claude(fake_anthropic, server)

    assert (fake_anthropic.work / "ran.txt").read_text() == "ran\n" * 3, "every call ran"
    assert GENTLE_REMINDER not in fake_anthropic.texts_after_tool_results(3)
    assert json.loads(done.stdout.splitlines()[-1])["result"] == "Done."
    # what Claude Code shows the user (once, at the first unanswered
    # PreToolUse), and a connection error on stderr for SessionEnd
    assert shown_to_the_user(done) == ["A hook gave no usable answer, so it didn't check this action."]
    assert f"SessionEnd hook [{server.url}/hooks/claude-code] failed: connect ECONNREFUSED" in done.stderr
