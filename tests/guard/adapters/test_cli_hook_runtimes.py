"""The Codex and Gemini CLI hook runtimes on the shared hook core, fed the
payloads those CLIs send (shapes recorded from Codex CLI 0.171 and Gemini
CLI 0.61), and the Claude Code runtime's additions: cosmetic arguments left
out at the edge, compaction recorded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bus import AgentStatus, ContextMessage, ToolCall, ToolResult, UserMessage, read_log
from bus.testing import Capture
from guard import GENTLE_REMINDER, RECOMMENDED, SHADOW_FORM, Config, RemindConfig, TurnsConfig, shadowed
from guard.adapters.claude_hooks import CLAUDE_CODE, HALTED_BY, ClaudeHooks, answer_hook
from guard.adapters.codex_hooks import CODEX
from guard.adapters.gemini_hooks import GEMINI_CLI
from guard.adapters.hook_runtimes import RUNTIMES, runtime_named
from guard.sessions.link import GuardLink
from tests.guard.adapters.conftest import TURNS_DENIED

pytestmark = pytest.mark.anyio

SESSION = "01a23210-2f69-7141-9454-d3db68144069"


def payload(event: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": SESSION, "hook_event_name": event, "cwd": "/w", **fields}


def codex_call(n: int, command: str = "ls src", output: str = "cfg.py\n") -> Iterator[dict[str, Any]]:
    tool = {"tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": f"call_{n:02d}", "turn_id": "t1"}
    yield payload("PreToolUse", **tool)
    yield payload("PostToolUse", tool_response=output, **tool)


def gemini_before(command: str = "ls src", description: str = "List src") -> dict[str, Any]:
    return payload(
        "BeforeTool", tool_name="run_shell_command", tool_input={"command": command, "description": description}
    )


def gemini_after(command: str = "ls src", pgid: int = 4242, **response: Any) -> dict[str, Any]:
    content = f"<untrusted_context>\nOutput: cfg.py\nProcess Group PGID: {pgid}\n</untrusted_context>"
    return payload(
        "AfterTool",
        tool_name="run_shell_command",
        tool_input={"command": command, "description": "reworded"},
        tool_response={"llmContent": content, "returnDisplay": "cfg.py", **response},
    )


async def test_codex_gets_the_reminder_as_additional_context_after_the_third_result(
    link: GuardLink, events: Capture
) -> None:
    hooks = ClaudeHooks(link, runtime=CODEX)
    assert await hooks.handle(payload("UserPromptSubmit", prompt="list src")) == {}
    answers = [await hooks.handle(p) for n in range(3) for p in codex_call(n)]
    assert answers[:5] == [{}] * 5
    assert answers[5] == {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": GENTLE_REMINDER}}
    assert [r.content for r in events.of(ToolResult)] == ["cfg.py\n"] * 3
    assert await hooks.handle(payload("Stop", stop_hook_active=False)) == {}
    assert events.of(AgentStatus)[-1].status == "idle"


async def test_codex_contains_a_halt_by_denying_every_further_call_until_the_next_prompt(turns_link: GuardLink) -> None:
    hooks = ClaudeHooks(turns_link, runtime=CODEX)
    events = Capture().attach(turns_link.bus)
    answers = []
    for n in range(4):
        pre, post = codex_call(n)
        answers.append(await hooks.handle(pre))
        if "hookSpecificOutput" not in answers[-1]:  # a denied call runs no post hook
            answers.append(await hooks.handle(post))
    halt = turns_link.links()[0].halt_reason
    assert halt is not None
    denial = answers[-1]["hookSpecificOutput"]
    assert denial["permissionDecision"] == "deny"
    assert TURNS_DENIED in denial["permissionDecisionReason"]
    assert halt.removesuffix(".") in denial["permissionDecisionReason"]
    assert not denial["permissionDecisionReason"].endswith("."), "Codex adds '. Command: ...' itself"
    assert CODEX.denial("PreToolUse", ".")["hookSpecificOutput"]["permissionDecisionReason"] == "."
    assert "continue" not in answers[-1], "Codex does not honour continue: false from a tool hook"

    other = await hooks.handle(next(codex_call(9, "git status")))
    assert other["hookSpecificOutput"]["permissionDecisionReason"] == halt.removesuffix(".")
    contained = [e for e in events.of(ToolResult) if e.denied_by == HALTED_BY]
    assert [e.call_id for e in contained] == ["call_09"]

    await hooks.handle(payload("UserPromptSubmit", prompt="try something else"))
    assert await hooks.handle(next(codex_call(10, "git log"))) == {}


async def test_the_next_prompt_lifts_a_halted_subagents_halt_too(turns_link: GuardLink) -> None:
    """Codex keeps a subagent for more work after its turn: once the user
    has moved on, the main agent may send it new work."""
    hooks = ClaudeHooks(turns_link, runtime=CODEX)
    events = Capture().attach(turns_link.bus)
    child = {"agent_id": "child-1", "agent_type": "worker"}
    for n in range(5):
        for p in codex_call(n):
            await hooks.handle({**p, **child})
    (sub,) = [a for a in turns_link.links() if a.agent.id == "child-1"]
    assert sub.halt_reason is not None
    await hooks.handle(payload("SubagentStop", stop_hook_active=False, **child))
    for p in codex_call(7, "ls docs"):
        await hooks.handle({**p, "agent_id": "child-2", "agent_type": "worker"})  # not halted: nothing to lift
    await hooks.handle(payload("UserPromptSubmit", prompt="now look at the tests"))
    pre, _ = codex_call(9, "ls tests")
    assert await hooks.handle({**pre, **child}) == {}
    assert [(m.agent and m.agent.id, m.text) for m in events.of(UserMessage)] == [
        (SESSION, "now look at the tests"),
        ("child-1", "now look at the tests"),
    ]


async def test_codex_subagents_are_children_and_their_stop_ends_a_turn_not_the_agent(
    link: GuardLink, events: Capture
) -> None:
    hooks = ClaudeHooks(link, runtime=CODEX)
    await hooks.handle(payload("SubagentStart", agent_id="child-1", agent_type="explorer"))
    for p in codex_call(1):
        await hooks.handle({**p, "agent_id": "child-1", "agent_type": "explorer"})
    await hooks.handle(payload("SubagentStop", agent_id="child-1", agent_type="explorer", stop_hook_active=False))
    started = [e for e in events.of(AgentStatus) if e.status == "started"]
    assert [(e.agent and e.agent.id, e.parent) for e in started] == [(SESSION, None), ("child-1", SESSION)]
    assert [e.agent and e.agent.id for e in events.of(ToolCall)] == ["child-1"]
    last = events.of(AgentStatus)[-1]
    assert (last.agent and last.agent.id, last.status) == ("child-1", "idle")
    assert {a.agent.id for a in link.links()} == {SESSION, "child-1"}
    await hooks.handle(payload("SessionEnd", reason="other"))
    assert link.links() == []


@pytest.mark.parametrize(("runtime", "event"), [(CODEX, "PostCompact"), (CLAUDE_CODE, "PreCompact")])
async def test_a_compaction_is_recorded_as_compacted(
    link: GuardLink, events: Capture, runtime: Any, event: str
) -> None:
    hooks = ClaudeHooks(link, runtime=runtime)
    assert await hooks.handle(payload(event, trigger="auto")) == {}
    assert events.of(AgentStatus)[-1].status == "compacted"


async def test_gemini_pairs_after_tool_with_the_newest_open_call_alike(link: GuardLink, events: Capture) -> None:
    hooks = ClaudeHooks(link, runtime=GEMINI_CLI)
    await hooks.handle(payload("BeforeAgent", prompt="look around"))
    # a response with three parallel calls, two alike; their AfterTools arrive out of order
    for command in ("ls src", "git status", "ls src"):
        assert await hooks.handle(gemini_before(command)) == {}
    calls = events.of(ToolCall)
    assert len({c.call_id for c in calls}) == 3
    assert {c.step for c in calls} == {1}
    assert all("description" not in c.args for c in calls), "the reworded description is left out"
    await hooks.handle(gemini_after("git status"))
    await hooks.handle(gemini_after("ls src", pgid=1))
    await hooks.handle(gemini_after("ls src", pgid=2))
    paired = [(r.call_id, r.tool, r.args["command"]) for r in events.of(ToolResult)]
    assert paired == [
        (calls[1].call_id, "run_shell_command", "git status"),
        (calls[2].call_id, "run_shell_command", "ls src"),
        (calls[0].call_id, "run_shell_command", "ls src"),
    ]
    assert events.of(ToolResult)[1].content.startswith("<untrusted_context>\nOutput: cfg.py")


async def test_gemini_gets_the_reminder_after_the_third_result_and_a_halt_ends_the_run(
    link: GuardLink, turns_link: GuardLink
) -> None:
    hooks = ClaudeHooks(link, runtime=GEMINI_CLI)
    answers = []
    for n in range(3):
        answers += [
            await hooks.handle(gemini_before(description=f"take {n}")),
            await hooks.handle(gemini_after(pgid=n)),
        ]
    assert answers[:5] == [{}] * 5
    assert answers[5] == {"hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": GENTLE_REMINDER}}
    assert await hooks.handle(payload("AfterAgent", prompt="x", prompt_response="done")) == {}

    halting = ClaudeHooks(turns_link, runtime=GEMINI_CLI)
    answers = []
    for n in range(4):
        answers.append(await halting.handle(gemini_before()))
        if "decision" not in answers[-1]:
            answers.append(await halting.handle(gemini_after(pgid=n)))
    last = answers[-1]
    assert last["decision"] == "deny"
    assert TURNS_DENIED in last["reason"]
    assert last["continue"] is False
    assert last["stopReason"] == turns_link.links()[0].halt_reason


async def test_gemini_counts_an_after_tool_whose_before_tool_it_never_saw(link: GuardLink, events: Capture) -> None:
    hooks = ClaudeHooks(link, runtime=GEMINI_CLI)
    await hooks.handle(gemini_after(error={"message": "exit 1"}))
    await hooks.handle(payload("AfterTool", tool_name="read_file", tool_input={"file_path": "a"}, tool_response="text"))
    (failed, plain) = events.of(ToolResult)
    assert failed.is_error
    assert failed.content.startswith("<untrusted_context>")
    assert (plain.content, plain.is_error) == ("text", False)
    await hooks.handle(payload("AfterTool", tool_name="x", tool_input={}, tool_response={"error": "boom"}))
    assert (events.of(ToolResult)[-1].content, events.of(ToolResult)[-1].is_error) == ("boom", True)


@pytest.mark.parametrize(
    ("tool", "args", "label"),
    [
        ("Bash", {"command": "ls src"}, "description"),
        ("SendMessage", {"to": "worker-1", "message": "What is your status?"}, "summary"),
        ("ScheduleWakeup", {"delaySeconds": 300}, "reason"),
    ],
)
async def test_a_reworded_label_does_not_defeat_remind_in_claude_code(
    link: GuardLink, tool: str, args: dict[str, Any], label: str
) -> None:
    """What the model writes for the user or the transcript only (a Bash
    description, a message's summary, a wake-up's reason) is worded anew
    each call."""
    hooks = ClaudeHooks(link)
    answers = []
    for n in range(3):
        tool_call = {"tool_name": tool, "tool_input": {**args, label: f"look {n}"}, "tool_use_id": f"t{n}"}
        answers += [
            await hooks.handle(payload("PreToolUse", **tool_call)),
            await hooks.handle(payload("PostToolUse", tool_response="x", **tool_call)),
        ]
    assert answers[-1]["hookSpecificOutput"]["additionalContext"] == GENTLE_REMINDER


async def test_events_a_runtime_does_not_follow_are_answered_with_nothing(link: GuardLink, events: Capture) -> None:
    for runtime, event in (
        (GEMINI_CLI, "PreCompress"),
        (GEMINI_CLI, "BeforeModel"),
        (CODEX, "SessionStart"),
        (CODEX, "PermissionRequest"),
    ):
        assert await ClaudeHooks(link, runtime=runtime).handle(payload(event)) == {}
    assert await ClaudeHooks(link, runtime=CODEX).handle({"session_id": SESSION}) == {}
    assert events.of(AgentStatus) == []


def test_runtimes_are_found_by_name() -> None:
    assert list(RUNTIMES) == ["claude-code", "codex", "gemini-cli"]
    assert runtime_named("codex") is CODEX
    with pytest.raises(ValueError, match="unknown agent CLI 'aider'; one of claude-code, codex, gemini-cli"):
        runtime_named("aider")
    with pytest.raises(ValueError, match=r"unknown agent CLI \['codex'\]; one of"):
        runtime_named(["codex"])  # type: ignore[arg-type]


def test_the_command_hook_keeps_gemini_calls_open_across_processes(tmp_path: Path) -> None:
    config = Config(remind=RemindConfig(thresholds=(3,)))
    answers = []
    for n in range(3):
        answers.append(answer_hook(gemini_before(description=f"d{n}"), tmp_path, config, runtime=GEMINI_CLI))
        answers.append(answer_hook(gemini_after(pgid=n), tmp_path, config, runtime=GEMINI_CLI))
    assert answers[-1]["hookSpecificOutput"]["additionalContext"] == GENTLE_REMINDER
    results = [e for e in read_log(tmp_path / f"{SESSION}.jsonl") if isinstance(e, ToolResult)]
    assert len(results) == 3
    assert len({r.call_id for r in results}) == 3


@pytest.mark.parametrize("shadow", [False, True])
def test_a_shadow_command_hook_answers_codex_and_gemini_nothing_and_records_every_action(
    tmp_path: Path, shadow: bool
) -> None:
    config = shadowed(RECOMMENDED) if shadow else RECOMMENDED
    codex: list[dict[str, Any]] = []
    gemini: list[dict[str, Any]] = []
    for n in range(6):  # a denied call does not run, so no post hook follows it
        pre, post = codex_call(n)
        codex.append(answer_hook(pre, tmp_path / "codex", config, runtime=CODEX))
        if "deny" not in str(codex[-1]):
            codex.append(answer_hook(post, tmp_path / "codex", config, runtime=CODEX))
        gemini.append(answer_hook(gemini_before(description=f"d{n}"), tmp_path / "gemini", config, runtime=GEMINI_CLI))
        if gemini[-1].get("decision") != "deny":
            gemini.append(answer_hook(gemini_after(pgid=n), tmp_path / "gemini", config, runtime=GEMINI_CLI))
    for answers, state in ((codex, "codex"), (gemini, "gemini")):
        assert (answers == [{}] * len(answers)) is shadow, state
        recorded = [e for e in read_log(tmp_path / state / f"{SESSION}.jsonl") if isinstance(e, ContextMessage)]
        assert recorded or not shadow, state  # enforced, the denials are the recorded results
        assert all((m.source.form == SHADOW_FORM) is shadow for m in recorded), state
        denied = [
            e for e in read_log(tmp_path / state / f"{SESSION}.jsonl") if isinstance(e, ToolResult) and e.denied_by
        ]
        assert bool(denied) is not shadow, state


async def test_gemini_call_ids_stay_unique_when_the_clock_repeats(
    link: GuardLink, events: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("guard.adapters.gemini_hooks.time.time_ns", lambda: 1_000)
    hooks = ClaudeHooks(link, runtime=GEMINI_CLI)
    await hooks.handle(gemini_before("ls a"))
    await hooks.handle(gemini_before("ls b"))
    assert [c.call_id for c in events.of(ToolCall)] == ["gemini-3e8", "gemini-3e9"]


async def test_a_subagent_stop_without_a_subagent_leaves_the_main_agent_live(link: GuardLink) -> None:
    hooks = ClaudeHooks(link)
    assert await hooks.handle(payload("SubagentStop", stop_hook_active=False)) == {}
    assert [a.agent.id for a in link.links()] == [SESSION]


async def test_codex_patches_are_closed_as_they_are_allowed_and_a_copy_is_answered_alike(
    link: GuardLink, events: Capture
) -> None:
    hooks = ClaudeHooks(link, runtime=CODEX)
    patches = [
        {"tool_name": "Bash", "tool_input": {"command": "apply_patch <<'EOF'\n*** Begin Patch\n"}},
        {"tool_name": "Bash", "tool_input": {"command": "cd src && apply_patch <<'EOF'\n*** Begin Patch\n"}},
        {"tool_name": "apply_patch", "tool_input": {"input": "*** Begin Patch\n"}},
        {"tool_name": "Bash", "tool_input": {"command": "applypatch <<'EOF'\n*** Begin Patch\n"}},
        {"tool_name": "Bash", "tool_input": {"command": "cd 'my dir' && apply_patch <<'EOF'\n*** Begin Patch\n"}},
        {"tool_name": "Bash", "tool_input": {"command": 'cd "my dir" && apply_patch "*** Begin Patch\n"'}},
    ]
    for n, patch in enumerate(patches):
        pre = payload("PreToolUse", tool_use_id=f"p{n}", **patch)
        assert await hooks.handle(pre) == {}
        assert await hooks.handle(pre) == {}, "a copy of the pre hook"
    await hooks.handle(payload("PreToolUse", tool_use_id="m1", tool_name="mcp__fs__read", tool_input={"path": "a"}))
    assert [c.call_id for c in events.of(ToolCall)] == ["p0", "p1", "p2", "p3", "p4", "p5", "m1"]
    assert [(r.call_id, r.content, r.is_error) for r in events.of(ToolResult)] == [
        (f"p{n}", "", False) for n in range(6)
    ]


@pytest.mark.parametrize("command", ["apply_patch.sh fix.diff", "apply_patch --help", "apply_patch < x.diff && make"])
def test_a_codex_command_named_like_the_patch_tool_is_an_ordinary_command(command: str) -> None:
    assert not CODEX.reports_no_result("Bash", {"command": command})


def test_codex_shell_calls_carry_the_directory_they_run_in() -> None:
    shell = payload("PreToolUse", tool_name="Bash", tool_input={"command": "make"}, cwd="/w/svc-a")
    assert CODEX.tool_input(shell) == {"command": "make", "workdir": "/w/svc-a"}
    assert CODEX.tool_input({**shell, "tool_input": {"command": "make", "workdir": "/w"}})["workdir"] == "/w"
    assert CODEX.tool_input({**shell, "cwd": None}) == {"command": "make"}
    assert CODEX.tool_input({**shell, "tool_name": "mcp__fs__read", "tool_input": {"path": "a"}}) == {"path": "a"}
    assert CLAUDE_CODE.tool_input(shell) == {"command": "make"}


def test_a_gemini_shell_command_with_a_non_zero_exit_code_failed() -> None:
    def after(exit_code: str, tool: str = "run_shell_command") -> dict[str, Any]:
        content = f"Output: fatal: early EOF\nExit Code: {exit_code}\nProcess Group PGID: 4242"
        return payload("AfterTool", tool_name=tool, tool_input={}, tool_response={"llmContent": content})

    assert GEMINI_CLI.result(after("128"), "post")[1] is True
    assert GEMINI_CLI.result(after("0"), "post")[1] is False
    assert GEMINI_CLI.result(after("(none)"), "post")[1] is False
    assert GEMINI_CLI.result(after("1", tool="read_file"), "post")[1] is False, "only a shell command's exit code"


def test_gemini_clis_own_retry_prompt_is_no_user_turn() -> None:
    assert GEMINI_CLI.prompt(payload("BeforeAgent", prompt="System: Please continue.")) is None
    assert GEMINI_CLI.prompt(payload("BeforeAgent", prompt="Please continue.")) == "Please continue."
    notice = "User has manually exited Plan Mode. Switching to Default mode (edits need confirmation)."
    assert GEMINI_CLI.prompt(payload("BeforeAgent", prompt=notice)) is None, "read as a recording reads it"


def test_a_gemini_shell_command_cancelled_before_it_completed_failed() -> None:
    def after(content: str) -> dict[str, Any]:
        return payload("AfterTool", tool_name="run_shell_command", tool_input={}, tool_response={"llmContent": content})

    timeout = "Command was automatically cancelled because it exceeded the timeout of 5.0 minutes without output."
    assert GEMINI_CLI.result(after(timeout + " There was no output before it was cancelled."), "post")[1] is True
    by_user = "Command was cancelled by user before it could complete. Below is the output before it was cancelled:\n"
    assert GEMINI_CLI.result(after(by_user + "x"), "post")[1] is True
    assert GEMINI_CLI.result(after(f"<untrusted_context>\n{timeout}\n</untrusted_context>"), "post")[1] is True


@pytest.mark.parametrize(("exit_code", "failed"), [("1", True), ("0", False)])
def test_a_gemini_shell_commands_exit_code_is_read_inside_its_untrusted_context_wrapper(
    exit_code: str, failed: bool
) -> None:
    output = "x\n" * 2000
    content = (
        f"<untrusted_context>\nOutput: {output}Exit Code: {exit_code}\nProcess Group PGID: 7\n</untrusted_context>"
    )
    after = payload("AfterTool", tool_name="run_shell_command", tool_input={}, tool_response={"llmContent": content})
    assert GEMINI_CLI.result(after, "post")[1] is failed


def test_a_gemini_shell_commands_exit_code_is_read_from_its_trailer_only() -> None:
    def after(output: str, exit_code: str) -> dict[str, Any]:
        content = (
            f"Command: npm ci\nDirectory: (root)\nOutput: {output}\nError: (none)\nExit Code: {exit_code}\n"
            "Signal: (none)\nBackground PIDs: (none)\nProcess Group PGID: 4242"
        )
        return payload("AfterTool", tool_name="run_shell_command", tool_input={}, tool_response={"llmContent": content})

    long_log = "npm http fetch GET 200 https://registry.npmjs.org/x\n" * 2000
    assert GEMINI_CLI.result(after(long_log + "npm ERR! code ECONNRESET", "1"), "post")[1] is True
    assert GEMINI_CLI.result(after("step 2 log:\nExit Code: 1\nretried, fine", "(none)"), "post")[1] is False
    assert GEMINI_CLI.result(after("ok", "9" * 4400), "post")[1] is False  # no crash on a 4,400-digit code


@pytest.mark.parametrize("rebuilt", [False, True], ids=["live", "rebuilt-from-log"])
def test_a_copy_of_a_codex_patchs_pre_hook_is_recorded_once(tmp_path: Path, rebuilt: bool) -> None:
    """The patch is closed at its first pre hook; a copy of that hook (hooks
    installed twice) is answered alike and records nothing, also once the
    session was rebuilt from its log (no snapshot, a restart, another replica)."""
    from guard.sessions.snapshot import snapshot_path

    state = tmp_path / "state"
    patch = payload(
        "PreToolUse",
        tool_name="Bash",
        tool_input={"command": "apply_patch <<'EOF'\n*** Begin Patch\n"},
        tool_use_id="p1",
    )
    first = answer_hook(patch, state, RECOMMENDED, runtime=CODEX)
    if rebuilt:
        snapshot_path(state / f"{SESSION}.jsonl", RECOMMENDED).unlink()
    assert answer_hook(patch, state, RECOMMENDED, runtime=CODEX) == first
    calls = [e.call_id for e in read_log(state / f"{SESSION}.jsonl") if isinstance(e, ToolCall)]
    assert calls == ["p1"]


def _refused_then_repeated(runtime: Any) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """A call Codex or Gemini CLI never ran (another hook or the user
    refused it after the guard's pre hook: no post hook follows), then
    five model responses each making one call, the same one: each as its
    pre hook and the post hook that follows it if the call runs."""
    responses: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    if runtime is CODEX:
        responses.append((next(codex_call(99, "make test")), None))
        for n in range(5):
            pre, post = codex_call(n, "make test", "FAIL\n")
            responses.append((pre, post))
        return responses
    responses.append((gemini_before("make test"), None))
    return responses + [(gemini_before("make test"), gemini_after("make test", pgid=n)) for n in range(5)]


@pytest.mark.parametrize("runtime", [CODEX, GEMINI_CLI], ids=["codex", "gemini-cli"])
@pytest.mark.parametrize("snapshots", [True, False], ids=["from-snapshots", "replayed"])
def test_a_call_the_cli_never_ran_does_not_hold_every_later_call_in_its_step(
    tmp_path: Path, runtime: Any, snapshots: bool
) -> None:
    """Each response is a step of its own once the one before it is over,
    an older call left open or not, so ``turns`` counts them; the process
    that rebuilds the session from its log (no snapshot) infers the same
    steps, and the log replays as it was recorded."""
    import anyio

    from guard.sessions.snapshot import snapshot_path
    from guard.verdicts import replay_log

    config = Config(remind=RemindConfig(enabled=False), turns=TurnsConfig(threshold=3))
    log = tmp_path / f"{SESSION}.jsonl"
    denials = 0
    for pre, post in _refused_then_repeated(runtime):
        events = [pre] if post is None else [pre, post]
        for event in events:
            if not snapshots:
                snapshot_path(log, config).unlink(missing_ok=True)
            answer = answer_hook(event, tmp_path, config, runtime=runtime)
            if TURNS_DENIED in json.dumps(answer):
                denials += 1
                break  # a denied call does not run: no post hook
    assert [e.step for e in read_log(log) if isinstance(e, ToolCall)] == [1, 1, 2, 3, 4, 5]
    assert denials == 1, "turns saw one response after another: the fifth in a row is denied"
    assert anyio.run(replay_log, log, config).differences == []
