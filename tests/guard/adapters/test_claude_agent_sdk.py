"""Claude Agent SDK / Claude Code hooks, fed recorded hook payloads.

The Claude Code CLI needs the Anthropic API, so its agent loop does not run
here; the callbacks get the payloads the CLI sends (shapes as in
``claude_agent_sdk.types``), and ``repeat-tool-guard hook`` runs as a real
subprocess with the payload on stdin.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bus import AgentStatus, ContextMessage, ContextSource, ToolCall, ToolResult, UserMessage, read_log
from bus.testing import Capture
from guard import (
    DETAILED_REMINDER,
    GENTLE_REMINDER,
    TURNS_ADVISORY,
    TURNS_HALT_REASON,
    TURNS_THRESHOLD_ENV,
    Config,
    RemindConfig,
    TurnsConfig,
    replay_log,
)
from guard.adapters import GuardLink
from guard.adapters.claude_hooks import HOOK_EVENTS, ClaudeHooks, HookInputError, default_state_dir, parse_payload
from guard.policies.rescue import advice_in
from guard.sessions.snapshot import snapshot_path
from tests.conftest import AskScript
from tests.guard.adapters.conftest import ADVICE, RESCUE_DENIED, TURNS_DENIED

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


async def test_a_copy_of_a_result_hook_is_answered_from_the_last_results_kept(link: GuardLink, events: Capture) -> None:
    from guard.sessions.link import ANSWERS_KEPT

    hooks = ClaudeHooks(link)
    calls = ANSWERS_KEPT + 10  # more results than are kept
    answers = [a for n in range(calls) for a in await feed(hooks, ls_call(n))]
    _, last_post = list(ls_call(calls - 1))
    assert await hooks.handle(last_post) == answers[-1]
    assert len(events.of(ToolCall)) == calls, "the copy recorded nothing"
    _, first_post = list(ls_call(0))
    await hooks.handle(first_post)  # answered too long ago to be told from a call whose pre hook was lost
    assert len(events.of(ToolCall)) == calls + 1
    unnamed = payload("PreToolUse", tool_name="Bash", tool_input={"command": "date"})  # no tool_use_id to match on
    await hooks.handle(unnamed)
    await hooks.handle(unnamed)
    assert len(events.of(ToolCall)) == calls + 3
    unnamed_result = payload("PostToolUse", tool_name="Bash", tool_input={"command": "date"}, tool_response="Tue")
    await hooks.handle(unnamed_result)
    await hooks.handle(unnamed_result)  # answers the second call without an id, in the order they were made
    assert len(events.of(ToolCall)) == calls + 3
    assert [r.call_id for r in events.of(ToolResult)[-2:]] == ["", "@1"]
    await hooks.handle(unnamed_result)  # nothing tells it from a result whose pre hook was lost
    assert len(events.of(ToolCall)) == calls + 4


async def test_a_call_id_used_again_for_a_new_call_is_a_new_call(link: GuardLink, events: Capture) -> None:
    hooks = ClaudeHooks(link)  # some model endpoints number tool calls afresh in every response
    for _ in range(3):
        await feed(hooks, ls_call(0))
    assert [c.call_id for c in events.of(ToolCall)] == ["toolu_00"] * 3
    _, post = list(ls_call(0))
    other = {**post, "tool_response": {"stdout": "changed", "stderr": "", "interrupted": False, "isImage": False}}
    await hooks.handle(other)  # a result that is not a copy: it counts (as a call whose pre hook was lost)
    assert len(events.of(ToolCall)) == 4
    first = payload("PreToolUse", tool_use_id="call_0", tool_name="Read", tool_input={"file_path": "a.py"})
    second = payload("PreToolUse", tool_use_id="call_0", tool_name="Read", tool_input={"file_path": "b.py"})
    await hooks.handle(first)
    await hooks.handle(second)  # the same id for another call of the same response: not a copy
    assert [c.args for c in events.of(ToolCall)[-2:]] == [{"file_path": "a.py"}, {"file_path": "b.py"}]


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


async def test_rescue_deny_answers_permission_decision_and_publishes_the_denied_result(rescue_link: GuardLink) -> None:
    events = Capture().attach(rescue_link.bus)
    hooks = ClaudeHooks(rescue_link)
    for n in range(2):
        assert await feed(hooks, ls_call(n)) == [{}, {}]
    pre, _ = ls_call(2)
    answer = await hooks.handle(pre)
    denied = events.of(ToolResult)[-1]
    assert (denied.call_id, denied.denied_by, denied.is_error) == ("toolu_02", "loop-rescue", True)
    assert denied.content.startswith(f"{RESCUE_DENIED}\nYou have made this exact call 3 times in your last 3")
    assert advice_in(denied.content) is None, "the ask command is missing: the free local denial"
    assert answer == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": denied.content,
        }
    }, "Claude reads the reason; the tool does not run, so no PostToolUse follows"


async def test_rescue_escalation_advice_is_the_deny_reason(advice_link: GuardLink, asked: Path) -> None:
    hooks = ClaudeHooks(advice_link)
    await hooks.handle(payload("UserPromptSubmit", prompt="what is in src?"))
    await feed(hooks, ls_call(0))
    reasons = [(await hooks.handle(next(ls_call(n))))["hookSpecificOutput"]["permissionDecisionReason"] for n in (1, 2)]
    assert [advice_in(r) for r in reasons] == [None, ADVICE]
    question = asked.read_text()
    assert "## The agent's task\nwhat is in src?\n" in question
    assert "cfg.py\\nmain.py" in question, "the tool_response the agent already had, as JSON"


async def test_parallel_calls_share_a_step_and_sequential_calls_do_not(link: GuardLink, events: Capture) -> None:
    hooks = ClaudeHooks(link)
    first_pre, first_post = ls_call(0)
    second_pre, second_post = ls_call(1, tool_input={"command": "ls docs"})
    for p in (first_pre, second_pre, first_post, second_post, *ls_call(2)):
        await hooks.handle(p)
    assert [c.step for c in events.of(ToolCall)] == [1, 1, 2]


async def test_a_call_arriving_after_a_denied_one_starts_a_new_step(rescue_link: GuardLink) -> None:
    """The documented limit of inferred steps: a denied call is over at once,
    so a parallel call of the same response arriving after it is a new step."""
    events = Capture().attach(rescue_link.bus)
    hooks = ClaudeHooks(rescue_link)
    for n in range(2):
        await feed(hooks, ls_call(n))
    denied_pre, _ = ls_call(2)
    other_pre, other_post = ls_call(3, tool_input={"command": "cat src/cfg.py"})
    assert (await hooks.handle(denied_pre))["hookSpecificOutput"]["permissionDecision"] == "deny"
    await hooks.handle(other_pre)
    await hooks.handle(other_post)
    assert [c.step for c in events.of(ToolCall)] == [1, 2, 3, 4]


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


async def test_turns_advises_then_denies_then_its_halt_request_answers_continue_false(turns_link: GuardLink) -> None:
    events = Capture().attach(turns_link.bus)
    hooks = ClaudeHooks(turns_link)
    await hooks.handle(payload("UserPromptSubmit", prompt="what is in src?"))
    answers = [a for n in range(2) for a in await feed(hooks, ls_call(n))]
    answers += [await hooks.handle(next(ls_call(n))) for n in (2, 3)]  # denied: no PostToolUse follows

    assert answers[:3] == [{}] * 3
    advisory = answers[3]["hookSpecificOutput"]["additionalContext"]
    assert advisory.startswith(TURNS_ADVISORY.split("{tool}")[0] + "Bash with identical arguments in 2")
    assert [a["hookSpecificOutput"]["permissionDecision"] for a in answers[4:]] == ["deny", "deny"]
    assert answers[4]["hookSpecificOutput"]["permissionDecisionReason"].startswith(TURNS_DENIED)
    assert "continue" not in answers[4]
    halt = TURNS_HALT_REASON.format(tool="Bash", count=4, denials=" and 2 denied calls")
    assert (answers[5]["continue"], answers[5]["stopReason"]) == (False, halt)
    assert [c.step for c in events.of(ToolCall)] == [1, 2, 3, 4], "each call arrived after the last had finished"
    assert await hooks.handle(payload("UserPromptSubmit", prompt="go on")) == {}, "a user turn ends the halt"
    assert await feed(hooks, ls_call(4)) == [{}, {}], "and the run starts over"


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


async def test_session_end_disposes_every_agent_and_other_events_are_ignored(link: GuardLink, events: Capture) -> None:
    hooks = ClaudeHooks(link)
    await feed(hooks, ls_call(0, agent_id="a1"))
    assert await hooks.handle(payload("Notification", message="hi", notification_type="x")) == {}
    assert await hooks.handle(payload("Stop", stop_hook_active=False)) == {}
    assert await hooks.handle(payload("SessionEnd", reason="exit")) == {}
    assert await hooks.handle(payload("SessionEnd", session_id="never-seen", reason="exit")) == {}
    assert link.links() == []
    statuses = [(s.agent.id if s.agent else "", s.status) for s in events.of(AgentStatus)]
    assert statuses[-3:] == [(SESSION, "idle"), ("a1", "disposed"), (SESSION, "disposed")]


def batch(*calls: tuple[str, Any], **fields: Any) -> dict[str, Any]:
    entries = [
        {"tool_name": "Bash", "tool_input": {"command": "ls src"}, "tool_use_id": call_id, "tool_response": response}
        for call_id, response in calls
    ]
    return payload("PostToolBatch", tool_calls=entries, **fields)


async def test_post_tool_batch_ends_the_response_and_answers_calls_no_post_hook_reported(
    link: GuardLink, events: Capture
) -> None:
    hooks = ClaudeHooks(link)
    pre, _ = ls_call(0)
    await hooks.handle(pre)
    refused = "Permission to use Bash has been denied."
    assert await hooks.handle(batch(("toolu_00", refused))) == {}, "no post hook: the call never ran"
    (result,) = events.of(ToolResult)
    assert (result.call_id, result.content, result.is_error) == ("toolu_00", refused, True)
    for n in (1, 2):  # serial calls of one response: pre, post, pre, post
        await feed(hooks, ls_call(n, tool_input={"command": f"cat f{n}"}))
    reported_twice = batch(("toolu_01", "x"), ("toolu_02", "y"))
    assert await hooks.handle(reported_twice | {"tool_calls": [*reported_twice["tool_calls"], 7]}) == {}
    assert len(events.of(ToolResult)) == 3, "calls their post hooks answered are not answered again"
    assert [c.step for c in events.of(ToolCall)] == [1, 2, 2], "after the first batch, a response is a step"
    assert await hooks.handle(payload("PostToolBatch", tool_calls=None)) == {}
    await feed(hooks, ls_call(3))
    assert [c.step for c in events.of(ToolCall)][-1] == 3
    assert [s.status for s in events.of(AgentStatus)].count("step-done") == 3
    await hooks.handle(next(ls_call(9)) | {"tool_use_id": ""})  # a pre hook without an id leaves call "" open
    assert await hooks.handle(payload("PostToolBatch", tool_calls=[1, "x", None])) == {}  # entries naming no call
    assert len(events.of(ToolResult)) == 4


async def test_a_reminder_for_the_batch_goes_back_on_it_and_a_halt_stops_there(turns_link: GuardLink) -> None:
    hooks = ClaudeHooks(turns_link, steps_reported=True)
    answers = []
    for n in range(4):
        pre, _ = ls_call(n)
        answers.append(await hooks.handle(pre))
        answers.append(await hooks.handle(batch((f"toolu_{n:02d}", "cfg.py"))))
    assert "Tool-call loop detected" in answers[3]["hookSpecificOutput"]["additionalContext"]
    assert answers[3]["hookSpecificOutput"]["hookEventName"] == "PostToolBatch"
    assert answers[-2]["continue"] is False
    assert await hooks.handle(payload("Stop", stop_hook_active=False)) == {
        "continue": False,
        "stopReason": answers[-2]["stopReason"],
    }


async def test_sessions_beyond_max_sessions_are_disposed_with_their_subagents(link: GuardLink, events: Capture) -> None:
    with pytest.raises(ValueError, match="max_sessions = 0: must be an integer >= 1"):
        ClaudeHooks(link, max_sessions=0)
    hooks = ClaudeHooks(link, max_sessions=2)
    for session in ("s1", "s2"):
        await hooks.handle(payload("UserPromptSubmit", session_id=session, prompt="x"))
    await feed(hooks, ls_call(0, session_id="s1", agent_id="s1-helper"))
    await hooks.handle(payload("UserPromptSubmit", session_id="s1", prompt="y"))  # s1 is the most recent now
    await hooks.handle(payload("UserPromptSubmit", session_id="s3", prompt="z"))
    disposed = [s.agent.id for s in events.of(AgentStatus) if s.status == "disposed" and s.agent]
    assert disposed == ["s2"]
    await hooks.handle(payload("UserPromptSubmit", session_id="s4", prompt="z"))
    disposed = [s.agent.id for s in events.of(AgentStatus) if s.status == "disposed" and s.agent]
    assert disposed == ["s2", "s1-helper", "s1"]
    assert sorted(a.agent.id for a in link.links()) == ["s3", "s4"]


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
    assert tuple(guard_hooks()) == HOOK_EVENTS


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


@pytest.mark.slow  # a hook process per payload
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


@pytest.mark.slow  # a hook process per payload
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
    for relative in ("state", "~/state"):  # not the agent's working directory: ignored, as XDG says
        monkeypatch.setenv("XDG_STATE_HOME", relative)
        assert default_state_dir() == tmp_path / ".local" / "state" / "repeat-tool-guard"
    monkeypatch.delenv("XDG_STATE_HOME")
    for home in ("", "rel"):  # not the filesystem's root, nor the working directory
        monkeypatch.setenv("HOME", home)
        with pytest.raises(ValueError, match="no absolute path to keep state under"):
            default_state_dir()


def test_a_hook_whose_state_dir_is_a_file_says_it_is_not_a_directory(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from guard.cli import main

    taken = tmp_path / "taken"
    taken.write_text("")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload("Stop")).encode())))
    assert main(["hook", "--state-dir", str(taken)]) == 1
    assert capsys.readouterr().err == f"repeat-tool-guard hook: [Errno 20] not a directory: {str(taken)!r}\n"


@pytest.mark.parametrize("option", ["--state-dir", "--config"])
def test_a_hook_given_an_empty_path_exits_1_with_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    from guard.cli import main

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload("Stop")).encode())))
    assert main(["hook", option, ""]) == 1
    assert capsys.readouterr().err == f"repeat-tool-guard hook: {option} '': an empty value names nothing\n"


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

    async def another_plugin_halts(result: ToolResult) -> None:
        """A halt no policy regenerates on replay: the log alone must carry it."""
        await recorded.bus.publish(AgentStatus(agent=result.agent, status="halt-requested", reason="stop"))

    recorded.bus.subscribe(ToolResult, another_plugin_halts)
    await feed(hooks, ls_call(0, agent_id="helper"))
    await hooks.handle(payload("SubagentStop", agent_id="helper", agent_type="x", agent_transcript_path="/t"))
    await feed(hooks, ls_call(1))
    pre, post = ls_call(2, agent_id="late")
    await hooks.handle(pre)
    await hooks.handle(payload("SubagentStop", agent_id="late", agent_type="x", agent_transcript_path="/t"))
    await hooks.handle(pre | {"tool_use_id": "toolu_03"})
    recorded.close()  # the hook continues the log: one writer at a time

    answer = await run_hook_in_process(post | {"tool_use_id": "toolu_03"}, tmp_path)
    assert answer == {}, "'late' came back after its stop: live again, its open call answered"
    answer = await run_hook_in_process(payload("PostToolUseFailure", tool_use_id="x9", error="boom"), tmp_path)
    assert answer == {"continue": False, "stopReason": "stop"}, "the main agent's halt request outlives the process"
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


@pytest.mark.slow  # a hook process per payload
def test_hook_rebuilding_its_state_never_reruns_an_escalation(tmp_path: Path, ask_script: AskScript) -> None:
    """Each hook invocation replays the session so far; an escalation bought
    in an earlier invocation is answered from the log, not asked again."""
    asked = tmp_path / "asked"
    ask = ask_script(f"echo x >> {asked}\necho 'Read main.py instead.'")
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
    assert [advice_in(d) for d in denials] == [None] + ["Read main.py instead."] * 4
    assert asked.read_text().count("x") == 1
    log = state / f"{SESSION}.jsonl"
    recorded = [e for e in read_log(log) if isinstance(e, ToolResult) and e.denied_by == "loop-rescue"]
    assert [e.advice for e in recorded] == [msgspec.UNSET] + ["Read main.py instead."] * 4, "advice is its own field"
    assert run_hook(state, payload("SessionEnd"), "--config", str(config)).returncode == 0
    checked = subprocess.run(
        [sys.executable, "-m", "guard", "replay", str(log), "--config", str(config), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr.endswith("check: every guard action matches the log (5 denials)\n")


@pytest.mark.slow  # a hook process per payload
def test_hook_command_carries_the_turns_ladder_and_its_halt_across_invocations(tmp_path: Path) -> None:
    """Each invocation is a new process: the run length, the ladder and the
    halt request live only in the session log it replays."""
    state = tmp_path / "state"
    config = tmp_path / "guard.toml"
    config.write_text("[remind]\nenabled = false\n\n[turns]\nthreshold = 2\ndeny_after = 1\nhalt_after = 1\n")

    def hook(hook_payload: dict[str, Any]) -> dict[str, Any]:
        done = run_hook(state, hook_payload, "--config", str(config))
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout else {}

    answers = [hook(p) for n in range(2) for p in ls_call(n)]
    answers += [hook(next(ls_call(n))) for n in (2, 3)]
    assert answers[:3] == [{}] * 3
    assert answers[3]["hookSpecificOutput"]["additionalContext"].startswith(TURNS_ADVISORY.split("{tool}")[0])
    assert [a["hookSpecificOutput"]["permissionDecision"] for a in answers[4:]] == ["deny", "deny"]
    halt = TURNS_HALT_REASON.format(tool="Bash", count=4, denials=" and 2 denied calls")
    assert (answers[4].get("continue"), answers[5].get("stopReason")) == (None, halt)
    assert hook(payload("PostToolUseFailure", tool_use_id="x1", tool_name="Read", error="gone")) == {
        "continue": False,
        "stopReason": halt,
    }, "the halt request outlives the process until a user turn"
    assert hook(payload("UserPromptSubmit", prompt="go on")) == {}
    assert hook(next(ls_call(4))) == {}


@pytest.mark.parametrize("snapshots", [True, False], ids=["from-snapshots", "replayed"])
async def test_hook_command_keeps_response_boundaries_across_invocations(tmp_path: Path, snapshots: bool) -> None:
    """Each invocation is a new process: that the runtime reports where a
    response ends, and whether the last one ended, live in its snapshot and
    in the log, which rebuilds them when there is no snapshot."""
    from guard.adapters.claude_hooks import run_hook as run_hook_in_process

    def serial(n: int) -> list[dict[str, Any]]:
        return [*ls_call(n, tool_input={"command": f"cat f{n}"})]

    script = [*serial(0), *serial(1), batch(), *serial(2), *serial(3), batch()]
    script += [payload("Stop", stop_hook_active=False), *serial(4), *serial(5)]
    for hook_payload in script:
        if not snapshots:  # each invocation rebuilds the agents from the log alone
            snapshot_path(tmp_path / f"{SESSION}.jsonl", Config()).unlink(missing_ok=True)
        await run_hook_in_process(hook_payload, tmp_path)
    calls = [e for e in read_log(tmp_path / f"{SESSION}.jsonl") if isinstance(e, ToolCall)]
    assert [c.step for c in calls] == [1, 2, 3, 3, 4, 4], "inferred until the first PostToolBatch, then responses"


def test_hook_settings_name_this_installation_and_every_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    import shlex

    import structlog

    from guard.cli import main

    request.addfinalizer(structlog.reset_defaults)
    config = tmp_path / "guard.toml"
    config.write_text("[rescue]\nenabled = true\n")
    monkeypatch.chdir(tmp_path)
    assert main(["hook-settings", "--config", "guard.toml", "--state-dir", "state"]) == 0
    hooks = json.loads(capsys.readouterr().out)["hooks"]
    assert tuple(hooks) == HOOK_EVENTS
    assert [m.get("matcher") for m in hooks["PreToolUse"]] == ["*"]
    assert "matcher" not in hooks["PostToolBatch"][0]
    command = hooks["Stop"][0]["hooks"][0]["command"]
    run, fallback = command.split(" || ")
    script = Path(sys.executable).parent / "repeat-tool-guard"
    assert shlex.split(run) == [str(script), "hook", "--config", str(config), "--state-dir", str(tmp_path / "state")]
    assert fallback.startswith("printf ")

    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))  # an interpreter without the script beside it
    assert main(["hook-settings"]) == 0
    command = json.loads(capsys.readouterr().out)["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert shlex.split(command.split(" || ")[0]) == [str(tmp_path / "python3"), "-P", "-m", "guard", "hook"]
    assert main(["hook-settings", "--config", "missing.toml"]) == 2
    assert "missing.toml" in capsys.readouterr().err


def test_the_interpreter_fallback_never_imports_the_projects_own_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    """Without the console script beside the interpreter the hook runs as
    ``python -P -m guard``: the CLIs run hooks in the project, and a
    project's own ``bus.py`` first on the path would run instead of the guard."""
    import shlex

    import structlog

    from guard.cli import main

    request.addfinalizer(structlog.reset_defaults)
    python = sys.executable
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))
    assert main(["hook-settings"]) == 0
    run = shlex.split(json.loads(capsys.readouterr().out)["hooks"]["PreToolUse"][0]["hooks"][0]["command"])
    argv = [python if word == str(tmp_path / "python3") else word for word in run[: run.index("||")]]
    project = tmp_path / "project"
    project.mkdir()
    (project / "bus.py").write_text("print('the project ran')\n")
    payload = {
        "session_id": "s1",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "tool_use_id": "t1",
        "cwd": str(project),
    }
    done = subprocess.run(
        [*argv, "--state-dir", str(tmp_path / "state")],
        cwd=project,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


async def test_the_hook_applies_the_environment_and_its_log_replays_with_the_config_that_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook is a live edge: ``REPEAT_TOOL_GUARD_TURNS_THRESHOLD`` wins
    over the file there. Its log then replays, and checks, with the config
    that actually ran, whatever the environment of the replay."""
    from guard.adapters.claude_hooks import run_hook as run_hook_in_process

    monkeypatch.setenv(TURNS_THRESHOLD_ENV, "2")
    config = Config(remind=RemindConfig(enabled=False), turns=TurnsConfig(threshold=9))
    answers = [await run_hook_in_process(p, tmp_path, config) for n in range(2) for p in ls_call(n)]
    assert answers[3]["hookSpecificOutput"]["additionalContext"].startswith(TURNS_ADVISORY.split("{tool}")[0])
    log = tmp_path / f"{SESSION}.jsonl"
    ran = msgspec.structs.replace(config, turns=TurnsConfig(threshold=2))
    for environment in ("2", "0"):
        monkeypatch.setenv(TURNS_THRESHOLD_ENV, environment)
        assert (await replay_log(log, ran)).differences == []
        assert [d.kind for d in (await replay_log(log, config)).differences] == ["extra"]
