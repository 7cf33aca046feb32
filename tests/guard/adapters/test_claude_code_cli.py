"""The Claude Agent SDK adapter in the real Claude Code agent loop: the CLI
bundled in ``claude-agent-sdk`` runs offline against the scripted fake
Anthropic API (``tests/claude_cli.py``), and the guard's hook callbacks are
dispatched by the CLI itself over the SDK's control protocol."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bus import AgentStatus, ToolCall, ToolResult, UserMessage, read_log
from bus.testing import Capture
from guard import GENTLE_REMINDER, TURNS_HALT_REASON
from guard.adapters import GuardLink
from guard.adapters.claude_hooks import hook_settings
from guard.importers import open_sessions
from tests.claude_cli import LEAVES_A_TRACE, FakeAnthropic, text, tool_use
from tests.guard.adapters.conftest import RESCUE_DENIED, TURNS_DENIED

pytestmark = pytest.mark.anyio


async def run(api: FakeAnthropic, link: GuardLink, prompt: str = "find the config loader", **options: Any) -> list[Any]:
    from claude_agent_sdk import query

    from guard.adapters.claude_agent_sdk import guard_hooks

    hooks = guard_hooks(link, **options)
    return [m async for m in query(prompt=prompt, options=api.options(hooks=hooks))]


def bash(command: str) -> dict[str, Any]:
    return tool_use("Bash", {"command": command})


async def test_reminder_reaches_the_models_next_request(fake_anthropic: FakeAnthropic, link: GuardLink) -> None:
    fake_anthropic.script(*[[bash("ls src")]] * 3, [text("Found it.")])
    await run(fake_anthropic, link)

    assert len(fake_anthropic.requests) == 4
    assert GENTLE_REMINDER not in fake_anthropic.texts_after_tool_results(2)
    assert GENTLE_REMINDER in fake_anthropic.texts_after_tool_results(3), "the third call's result carried it"


async def test_denied_call_never_runs_and_the_model_reads_the_denial(
    fake_anthropic: FakeAnthropic, rescue_link: GuardLink
) -> None:
    fake_anthropic.script(*[[bash(LEAVES_A_TRACE)]] * 3, [text("Giving up.")])
    await run(fake_anthropic, rescue_link)

    assert (fake_anthropic.work / "ran.txt").read_text() == "ran\nran\n", "the third call did not run"
    (denied,) = fake_anthropic.tool_results(3)
    assert denied["is_error"] is True
    assert RESCUE_DENIED in fake_anthropic.texts_after_tool_results(3)


async def test_halt_ends_the_session_before_another_model_request(
    fake_anthropic: FakeAnthropic, turns_link: GuardLink
) -> None:
    from claude_agent_sdk import ResultMessage

    events = Capture().attach(turns_link.bus)
    fake_anthropic.script(*[[bash("ls src")]] * 5, [text("never asked")])
    messages = await run(fake_anthropic, turns_link)

    assert TURNS_DENIED in fake_anthropic.texts_after_tool_results(3)
    (halt,) = [s for s in events.of(AgentStatus) if s.status == "halt-requested"]
    assert halt.reason == TURNS_HALT_REASON.format(tool="Bash", count=4, denials=" and 2 denied calls")
    assert len(fake_anthropic.requests) == 4, "no model request after the halt"
    assert fake_anthropic.remaining == 2
    assert isinstance(messages[-1], ResultMessage)


async def test_post_tool_batch_makes_each_model_response_one_step(
    fake_anthropic: FakeAnthropic, turns_link: GuardLink
) -> None:
    """Claude Code runs writing commands one after another; the hooks of one
    response's calls interleave as pre, post, pre, post. Only PostToolBatch
    says where the response ends."""
    events = Capture().attach(turns_link.bus)
    fake_anthropic.script(
        [bash("echo 1 >> a.txt"), bash("echo 2 >> b.txt")],
        [bash("echo 1 >> a.txt"), bash("echo 3 >> c.txt")],
        [text("Done.")],
    )
    await run(fake_anthropic, turns_link)

    assert [c.step for c in events.of(ToolCall)] == [1, 1, 2, 2]
    statuses = [s.status for s in events.of(AgentStatus)]
    assert statuses == ["started", "step-done", "step-done", "idle"], "Stop: the last response called no tool"
    assert "Tool-call loop detected" in fake_anthropic.texts_after_tool_results(2), "2 consecutive turns, not 3"


async def test_a_call_the_cli_refuses_before_any_tool_hook_is_recorded_and_counted(
    fake_anthropic: FakeAnthropic, link: GuardLink
) -> None:
    """An Edit whose ``old_string`` is not in the file never reaches a tool
    hook: Claude Code refuses it itself. Only PostToolBatch lists it; the
    guard records it from there, and the model retrying it is told."""
    events = Capture().attach(link.bus)
    target = fake_anthropic.work / "mod.py"
    target.write_text("x = 1\n")
    edit = {"file_path": str(target), "old_string": "x = 2", "new_string": "x = 3"}
    fake_anthropic.script(*[[tool_use("Edit", edit)]] * 3, [text("Giving up.")])
    await run(fake_anthropic, link)

    calls = events.of(ToolCall)
    assert [(c.tool, c.late, c.step) for c in calls] == [("Edit", True, 1), ("Edit", True, 2), ("Edit", True, 3)]
    assert all(r.is_error and "String to replace not found" in r.content for r in events.of(ToolResult))
    assert GENTLE_REMINDER in fake_anthropic.texts_after_tool_results(3)
    assert target.read_text() == "x = 1\n"


async def test_sessions_beyond_the_bound_are_disposed_since_session_end_never_comes(
    fake_anthropic: FakeAnthropic, link: GuardLink
) -> None:
    events = Capture().attach(link.bus)
    for n in range(3):
        fake_anthropic.script([bash(f"echo {n}")], [text("ok")])
        await run(fake_anthropic, link, prompt=f"task {n}", max_sessions=2)

    started = [s.agent.id for s in events.of(AgentStatus) if s.status == "started" and s.agent]
    disposed = [s.agent.id for s in events.of(AgentStatus) if s.status == "disposed" and s.agent]
    assert len(set(started)) == 3
    assert disposed == started[:1], "the oldest session made room"
    assert [a.agent.id for a in link.links()] == started[1:]


# --- plain Claude Code with the `repeat-tool-guard hook` command -------------------------------


def printed_settings(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "guard", "hook-settings", *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    settings: dict[str, Any] = json.loads(done.stdout)
    return settings


def shown_to_the_user(done: subprocess.CompletedProcess[str]) -> list[str]:
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return [m["content"] for m in lines if m.get("type") == "system" and m.get("subtype") == "informational"]


def test_printed_settings_run_the_hook_by_absolute_path_without_it_on_path(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    settings = printed_settings("--state-dir", str(state))
    fake_anthropic.script(*[[bash("ls")]] * 3, [text("Found it.")])
    done = fake_anthropic.run_cli("list the files", settings=settings, env={"PATH": "/usr/bin:/bin"})

    assert done.returncode == 0, done.stderr
    assert shown_to_the_user(done) == []
    assert GENTLE_REMINDER in fake_anthropic.texts_after_tool_results(3)
    (log,) = state.glob("*.jsonl")
    statuses = [e.status for e in read_log(log) if isinstance(e, AgentStatus)]
    assert statuses == ["started", "step-done", "step-done", "step-done", "idle", "disposed"], "SessionEnd came too"


def test_a_slash_command_is_the_same_user_message_live_and_imported(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """The hook reads the command as typed; the transcript records it as
    ``<command-…>`` tags and its expansion: both make it what the user typed."""
    commands = fake_anthropic.work / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "deploy-check.md").write_text("Check the deploy to $ARGUMENTS and report.\n")
    state = tmp_path / "state"
    fake_anthropic.script([bash("ls")], [text("Healthy.")])
    done = fake_anthropic.run_cli(
        "/deploy-check staging", settings=printed_settings("--state-dir", str(state)), setting_sources="project"
    )

    assert done.returncode == 0, done.stderr
    assert "Check the deploy to staging" in fake_anthropic.texts_after_tool_results(0), "the command expanded"
    (log,) = state.glob("*.jsonl")
    (transcript,) = (fake_anthropic.home / ".claude" / "projects").rglob("*.jsonl")
    (session,) = open_sessions(transcript)
    live = [e.text for e in read_log(log) if isinstance(e, UserMessage)]
    imported = [e.text for e in session.events() if isinstance(e, UserMessage)]
    assert live == imported == ["/deploy-check staging"]


def test_a_hook_that_cannot_run_tells_the_user_the_guard_is_off(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    settings = hook_settings([str(tmp_path / "uninstalled" / "repeat-tool-guard"), "hook"])
    fake_anthropic.script([bash("ls")], [text("Done.")])
    done = fake_anthropic.run_cli("list the files", settings=settings)

    assert done.returncode == 0, done.stderr
    said = shown_to_the_user(done)
    assert said, "Claude Code showed the user nothing"
    assert all("repeat-tool-guard hook failed (exit 127): the loop guard is off" in s for s in said)
    assert {s.split(" says:")[0] for s in said} >= {"UserPromptSubmit", "PreToolUse:Bash", "PostToolUse:Bash"}
    assert json.loads(done.stdout.splitlines()[-1])["result"] == "Done.", "and the session went on"


async def test_a_background_subagents_report_is_no_user_turn(
    fake_anthropic: FakeAnthropic, rescue_link: GuardLink
) -> None:
    """Claude Code reports a finished background subagent through
    UserPromptSubmit (a ``<task-notification>`` prompt). Taken for the user
    taking control, it would reset the guard: here, rescue's count."""
    events = Capture().attach(rescue_link.bus)
    task = {"description": "look around", "prompt": "SUBTASK: list the files", "subagent_type": "general-purpose"}
    fake_anthropic.script([bash("ls src")], [tool_use("Task", task)], [text("Waiting for the helper.")])
    fake_anthropic.script([bash("ls src")], [bash("ls src")], [text("Done.")])
    # The helper works a while: its report must come after the main agent's turn
    # ended (it is then a turn of its own), not ride along with that turn's request.
    fake_anthropic.script_subagent("SUBTASK", [bash("sleep 2")], [text("The files are listed.")])
    await run(fake_anthropic, rescue_link)

    assert fake_anthropic.subagent_requests, "the subagent ran"
    assert [m.text for m in events.of(UserMessage)] == ["find the config loader"]
    denied = [r for r in events.of(ToolResult) if r.denied_by]
    assert [r.tool for r in denied] == ["Bash"], "the 3rd ls was denied: the report reset nothing"
