"""Claude Agent SDK / Claude Code hooks, fed recorded hook payloads.

The Claude Code CLI needs the Anthropic API, so its agent loop does not run
here; the callbacks get the payloads the CLI sends (shapes as in
``claude_agent_sdk.types``), and ``repeat-tool-guard hook`` runs as a real
subprocess with the payload on stdin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bus import AgentStatus, ContextMessage, ContextSource, ToolCall, ToolResult, UserMessage, read_log
from bus.testing import Capture
from guard import DETAILED_REMINDER, GENTLE_REMINDER
from guard.adapters import GuardLink
from guard.adapters.claude_hooks import ClaudeHooks, HookInputError, default_state_dir, parse_payload
from tests.guard.adapters.conftest import DENIAL, HALT, DenyRepeats, HaltAfter

pytestmark = pytest.mark.anyio

SESSION = "5b7c1f0e-claude-session"
REPO = Path(__file__).resolve().parents[3]


def payload(event: str, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "transcript_path": f"/home/dev/.claude/projects/app/{SESSION}.jsonl",
        "cwd": "/home/dev/app",
        "permission_mode": "default",
        "hook_event_name": event,
        **fields,
    }


def ls_call(n: int, **extra: Any) -> Iterator[dict[str, Any]]:
    tool = {"tool_name": "Bash", "tool_input": {"command": "ls src", "description": "List src"}, **extra}
    yield payload("PreToolUse", tool_use_id=f"toolu_{n:02d}", **tool)
    response = {"stdout": "cfg.py\nmain.py", "stderr": "", "interrupted": False, "isImage": False}
    yield payload("PostToolUse", tool_use_id=f"toolu_{n:02d}", tool_response=response, duration_ms=12, **tool)


async def feed(hooks: ClaudeHooks, payloads: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [await hooks.handle(p) for p in payloads]


async def test_reminder_comes_back_as_additional_context_of_the_third_post_hook(
    link: GuardLink, events: Capture
) -> None:
    hooks = ClaudeHooks(link)
    assert await hooks.handle(payload("UserPromptSubmit", prompt="what is in src?")) == {}
    answers = [a for n in range(3) for a in await feed(hooks, ls_call(n))]
    assert answers[:5] == [{}] * 5
    assert answers[5] == {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": GENTLE_REMINDER}}
    (result, *_) = events.of(ToolResult)
    assert result.content == '{"stdout":"cfg.py\\nmain.py","stderr":"","interrupted":false,"isImage":false}'
    assert [c.step for c in events.of(ToolCall)] == [1, 2, 3]


async def test_user_prompt_resets_the_count(link: GuardLink) -> None:
    hooks = ClaudeHooks(link)
    answers = [a for n in range(2) for a in await feed(hooks, ls_call(n))]
    await hooks.handle(payload("UserPromptSubmit", prompt="try again"))
    answers += [a for n in range(2, 4) for a in await feed(hooks, ls_call(n))]
    assert answers == [{}] * 8


async def test_deny_answers_permission_decision_and_publishes_the_denied_result(
    link: GuardLink, events: Capture
) -> None:
    DenyRepeats(limit=2).attach(link.bus)
    hooks = ClaudeHooks(link)
    for n in range(2):
        await feed(hooks, ls_call(n))
    pre, _ = ls_call(2)
    answer = await hooks.handle(pre)
    specific = answer["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny"
    assert specific["permissionDecisionReason"] == DENIAL.format(count=2)
    assert specific["additionalContext"] == GENTLE_REMINDER, "the denied call is the third identical call"
    denied = events.of(ToolResult)[-1]
    assert (denied.call_id, denied.denied_by, denied.is_error) == ("toolu_02", "deny-repeats", True)


async def test_parallel_calls_share_a_step_and_sequential_calls_do_not(link: GuardLink, events: Capture) -> None:
    hooks = ClaudeHooks(link)
    first_pre, first_post = ls_call(0)
    second_pre, second_post = ls_call(1, tool_input={"command": "ls docs"})
    for p in (first_pre, second_pre, first_post, second_post, *ls_call(2)):
        await hooks.handle(p)
    assert [c.step for c in events.of(ToolCall)] == [1, 1, 2]


async def test_subagent_is_its_own_agent_under_the_main_one(link: GuardLink, events: Capture) -> None:
    hooks = ClaudeHooks(link)
    sub = {"agent_id": "a7f3", "agent_type": "general-purpose"}
    await hooks.handle(payload("SubagentStart", **sub))
    answers: list[dict[str, Any]] = []
    for n in range(2):
        answers += await feed(hooks, ls_call(n))
        answers += await feed(hooks, ls_call(10 + n, **sub))
    assert answers == [{}] * 8, "two calls each: neither agent reaches three"
    await hooks.handle(payload("SubagentStop", agent_transcript_path="/t.jsonl", **sub))
    statuses = [(s.agent.id if s.agent else "", s.status, s.parent) for s in events.of(AgentStatus)]
    assert statuses == [(SESSION, "started", None), ("a7f3", "started", SESSION), ("a7f3", "disposed", None)]
    assert {c.agent.parent_id for c in events.of(ToolCall) if c.agent and c.agent.id == "a7f3"} == {SESSION}


async def test_halt_request_answers_continue_false(link: GuardLink) -> None:
    HaltAfter(results=2).attach(link.bus)
    hooks = ClaudeHooks(link)
    answers = [a for n in range(2) for a in await feed(hooks, ls_call(n))]
    assert answers[-1] == {"continue": False, "stopReason": HALT}
    assert await hooks.handle(payload("UserPromptSubmit", prompt="go on")) == {}


async def test_failure_is_an_error_result_and_a_post_without_pre_still_counts(link: GuardLink, events: Capture) -> None:
    hooks = ClaudeHooks(link)
    tool = {"tool_name": "Bash", "tool_input": {"command": "make"}}
    answers = [
        await hooks.handle(payload("PostToolUseFailure", tool_use_id=f"t{n}", error="exit 2", **tool)) for n in range(3)
    ]
    assert answers[2] == {
        "hookSpecificOutput": {"hookEventName": "PostToolUseFailure", "additionalContext": GENTLE_REMINDER}
    }
    assert [(r.is_error, r.content) for r in events.of(ToolResult)] == [(True, "exit 2")] * 3


async def test_session_end_disposes_every_agent_and_other_events_are_ignored(link: GuardLink) -> None:
    hooks = ClaudeHooks(link)
    await feed(hooks, ls_call(0, agent_id="a1"))
    assert await hooks.handle(payload("Stop", stop_hook_active=False)) == {}
    assert await hooks.handle(payload("SessionEnd", reason="exit")) == {}
    assert link.links() == []


async def test_sdk_callbacks_are_registered_for_every_hook_event(link: GuardLink) -> None:
    pytest.importorskip("claude_agent_sdk", reason="claude-agent-sdk is not installed")
    from claude_agent_sdk import ClaudeAgentOptions

    from guard.adapters.claude_agent_sdk import guard_hooks

    options = ClaudeAgentOptions(hooks=guard_hooks(link))
    assert options.hooks is not None
    assert [len(m.hooks) for m in options.hooks["PostToolUse"]] == [1]
    answers = []
    for p in (p for n in range(3) for p in ls_call(n)):
        callback = options.hooks[p["hook_event_name"]][0].hooks[0]
        answers.append(await callback(p, p["tool_use_id"], {"signal": None}))  # type: ignore[arg-type]
    assert answers[-1] == {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": GENTLE_REMINDER}}
    assert len(guard_hooks()) == 7


# --- the `repeat-tool-guard hook` command, as Claude Code runs it ------------------------------


def run_hook(state: Path, hook_payload: Any, *extra: str) -> subprocess.CompletedProcess[str]:
    data = hook_payload if isinstance(hook_payload, str) else json.dumps(hook_payload)
    return subprocess.run(
        [sys.executable, "-m", "guard", "hook", "--state-dir", str(state), *extra],
        input=data,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )


def test_hook_command_keeps_state_between_invocations_and_its_log_replays(tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = tmp_path / "guard.toml"
    config.write_text("[remind]\nthresholds = [3, 4]\n")
    outputs = [run_hook(state, payload("UserPromptSubmit", prompt="list src"), "--config", str(config))]
    outputs += [run_hook(state, p, "--config", str(config)) for n in range(4) for p in ls_call(n)]
    assert [o.returncode for o in outputs] == [0] * 9, [o.stderr for o in outputs]
    answers = [json.loads(o.stdout) if o.stdout else {} for o in outputs]
    assert answers[6]["hookSpecificOutput"]["additionalContext"] == GENTLE_REMINDER
    detailed = answers[8]["hookSpecificOutput"]["additionalContext"]
    assert detailed.startswith(DETAILED_REMINDER.split("{tool}")[0])
    assert "consecutive_calls: 4" in detailed
    assert [a for i, a in enumerate(answers) if i not in (6, 8)] == [{}] * 7

    log = state / f"{SESSION}.jsonl"
    events = list(read_log(log))
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "seq continues across invocations"
    assert len([e for e in events if isinstance(e, ContextMessage)]) == 2
    check = subprocess.run(
        [sys.executable, "-m", "guard", "replay", str(log), "--check", "--config", str(config)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert check.returncode == 0, check.stderr


def test_concurrent_hooks_of_one_session_all_land_in_order(tmp_path: Path) -> None:
    state = tmp_path / "state"
    pres = [next(ls_call(n, tool_input={"command": f"cat f{n}"})) for n in range(6)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "guard", "hook", "--state-dir", str(state)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
        )
        for _ in pres
    ]
    for proc, pre in zip(procs, pres, strict=True):
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(pre).encode())
        proc.stdin.close()
    codes = []
    for proc in procs:
        codes.append(proc.wait(timeout=60))
        for pipe in (proc.stdout, proc.stderr):
            assert pipe is not None
            pipe.close()
    assert codes == [0] * 6
    events = list(read_log(state / f"{SESSION}.jsonl"))
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert sorted(c.call_id for c in calls) == [f"toolu_{n:02d}" for n in range(6)]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {c.step for c in calls} == {1}, "none had finished: one parallel step"


def test_hook_command_exits_1_never_2_on_bad_input(tmp_path: Path) -> None:
    bad_json = run_hook(tmp_path, "{not json")
    assert (bad_json.returncode, bad_json.stdout) == (1, "")
    assert "hook input is not JSON" in bad_json.stderr
    bad_session = run_hook(tmp_path, payload("PreToolUse", session_id="../../etc/passwd"))
    assert bad_session.returncode == 1
    assert "session_id = '../../etc/passwd'" in bad_session.stderr
    missing_config = run_hook(tmp_path, payload("UserPromptSubmit", prompt="x"), "--config", str(tmp_path / "no.toml"))
    assert missing_config.returncode == 1


async def test_unreadable_state_is_set_aside_not_lost(tmp_path: Path) -> None:
    from guard.adapters.claude_hooks import run_hook as run_hook_in_process

    (tmp_path / f"{SESSION}.jsonl").write_text("this is not a session log\n")
    assert await run_hook_in_process(payload("UserPromptSubmit", prompt="x"), tmp_path) == {}
    (kept,) = tmp_path.glob(f"{SESSION}.jsonl.unreadable-*")
    assert kept.read_text() == "this is not a session log\n"
    assert [type(e).__name__ for e in read_log(tmp_path / f"{SESSION}.jsonl")] == ["AgentStatus", "UserMessage"]


def test_parse_payload_names_what_is_wrong() -> None:
    with pytest.raises(HookInputError, match="must be a JSON object, got list"):
        parse_payload(b"[]")
    with pytest.raises(HookInputError, match="hook input is not JSON"):
        parse_payload(b"{")
    with pytest.raises(HookInputError, match="session_id = None: must be 1-128 letters"):
        parse_payload(b"{}")
    assert parse_payload(json.dumps(payload("Stop")).encode())["session_id"] == SESSION


def test_state_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REPEAT_TOOL_GUARD_STATE", str(tmp_path / "explicit"))
    assert default_state_dir() == tmp_path / "explicit"
    monkeypatch.delenv("REPEAT_TOOL_GUARD_STATE")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_state_dir() == tmp_path / "xdg" / "repeat-tool-guard"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_state_dir() == tmp_path / ".local" / "state" / "repeat-tool-guard"
    assert os.environ["HOME"] == str(tmp_path)


# --- the same command in process, for what only a session log on disk can show ------------------


async def test_resumed_hook_restores_steps_open_calls_halts_and_drops_disposed_agents(tmp_path: Path) -> None:
    from guard.adapters.claude_hooks import run_hook as run_hook_in_process

    path = tmp_path / f"{SESSION}.jsonl"
    recorded = GuardLink(log=path)
    hooks = ClaudeHooks(recorded)
    await hooks.handle(payload("UserPromptSubmit", prompt="list src"))
    await recorded.bus.publish(UserMessage(agent=None, text="no agent: ignored"))
    note = ContextMessage(agent=recorded.links()[0].agent, call_id="-", source=ContextSource(plugin="other"), text="n")
    await recorded.bus.publish(note)
    HaltAfter(results=1).attach(recorded.bus)
    await feed(hooks, ls_call(0, agent_id="helper"))
    await hooks.handle(payload("SubagentStop", agent_id="helper", agent_type="x", agent_transcript_path="/t"))
    await feed(hooks, ls_call(1))
    pre, post = ls_call(2, agent_id="late")
    await hooks.handle(pre)
    await hooks.handle(payload("SubagentStop", agent_id="late", agent_type="x", agent_transcript_path="/t"))
    await hooks.handle(pre | {"tool_use_id": "toolu_03"})

    answer = await run_hook_in_process(post | {"tool_use_id": "toolu_03"}, tmp_path)
    assert answer == {}, "'late' came back after its stop: live again, its open call answered"
    answer = await run_hook_in_process(payload("PostToolUseFailure", tool_use_id="x9", error="boom"), tmp_path)
    assert answer == {"continue": False, "stopReason": HALT}, "the main agent's halt request outlives the process"
    events = list(read_log(path))
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [(r.call_id, r.step) for r in results[-2:]] == [("toolu_03", 1), ("x9", 2)]
    assert "helper" not in {e.agent.id for e in events[-4:] if e.agent}


def test_cli_hook_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    import io

    import structlog

    from guard.cli import main

    request.addfinalizer(structlog.reset_defaults)  # main() configures logging for the whole process

    def call(data: str, *args: str) -> int:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data.encode())))
        return main(["hook", *args])

    monkeypatch.setenv("REPEAT_TOOL_GUARD_STATE", str(tmp_path))
    codes = [call(json.dumps(p)) for n in range(3) for p in ls_call(n)]
    assert codes == [0] * 6
    out = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["hookSpecificOutput"]["additionalContext"] for line in out] == [GENTLE_REMINDER]
    assert call("[]", "--state-dir", str(tmp_path)) == 1
    assert "must be a JSON object" in capsys.readouterr().err


def test_hook_rebuilding_its_state_never_reruns_an_escalation(tmp_path: Path) -> None:
    """Each hook invocation replays the session so far; an escalation bought
    in an earlier invocation is answered from the log, not asked again."""
    asked = tmp_path / "asked"
    ask = tmp_path / "ask"
    ask.write_text(f"#!/bin/sh\necho x >> {asked}\necho 'Read main.py instead.'\n")
    ask.chmod(0o755)
    state = tmp_path / "state"
    config = tmp_path / "guard.toml"
    config.write_text(f'[remind]\nenabled = false\n\n[rescue]\nask_command = "{ask}"\nnudge_at = 2\nrescue_at = 3\n')
    denials = []
    for n in range(6):
        pre, post = ls_call(n)
        done = run_hook(state, pre, "--config", str(config))
        assert done.returncode == 0, done.stderr
        if done.stdout:  # denied: Claude Code sends no PostToolUse for it
            denials.append(json.loads(done.stdout)["hookSpecificOutput"]["permissionDecisionReason"])
        else:
            assert run_hook(state, post, "--config", str(config)).returncode == 0
    assert len(denials) == 5
    assert ["Read main.py instead." in d for d in denials] == [False, True, True, True, True]
    assert asked.read_text().count("x") == 1
