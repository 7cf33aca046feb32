"""Policy ``turns`` on a real bus with a real Guard, under asyncio and trio.

A "turn" is one model response: ``respond`` decides every call of a step,
then publishes every result, as a runtime running calls concurrently does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from bus import Agent, AgentStatus, Bus, ContextMessage, Decision, ToolCall, ToolResult, UserMessage
from bus.testing import Capture
from guard import (
    TURNS_THRESHOLD_ENV,
    Action,
    Config,
    FingerprintCache,
    Guard,
    RemindConfig,
    TurnsConfig,
    TurnsPolicy,
    load_config,
    replay_log,
)
from guard.policies.turns import summarize_result

pytestmark = pytest.mark.anyio

GREP = {"pattern": "load_config", "path": "src"}
READ = {"path": "README.md"}
SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios" / "turns"

Call = tuple[str, Any]
Respond = Callable[..., Awaitable[list[Decision]]]


@pytest.fixture
def actions() -> list[Action]:
    return []


@pytest.fixture
def make_guard(bus: Bus, actions: list[Action]) -> Callable[..., Guard]:
    """Attach a guard running ``turns`` alone, with these turns settings."""

    def make(**settings: Any) -> Guard:
        config = Config(remind=RemindConfig(enabled=False), turns=TurnsConfig(**settings))
        return Guard(config, on_action=lambda action, _: actions.append(action)).attach(bus)

    return make


@pytest.fixture
def respond(bus: Bus, agent: Agent) -> Respond:
    """One model response at ``step``: decide every call, then publish every
    result (the denial text for a denied call)."""

    async def respond(step: int, *calls: Call, content: str = "no matches", who: Agent | None = None) -> list[Decision]:
        owner = who or agent
        decided = []
        for index, (tool, args) in enumerate(calls, 1):
            call = ToolCall(agent=owner, call_id=f"{owner.id}-{step}.{index}", step=step, tool=tool, args=args)
            decided.append((call, await bus.decide(call)))
        for call, decision in decided:
            if decision.allowed:
                await bus.publish(ToolResult.answering(call, content))
            else:
                result = ToolResult.answering(
                    call, decision.reason or "", is_error=True, denied_by=decision.by, advice=decision.advice
                )
                await bus.publish(result)
        return [decision for _, decision in decided]

    return respond


def _kinds(actions: list[Action]) -> list[tuple[str, int]]:
    return [(a.action, a.count) for a in actions]


async def test_one_advisory_after_the_result_of_the_nth_consecutive_turn(
    make_guard: Callable[..., Guard], respond: Respond, capture: Capture, actions: list[Action]
) -> None:
    make_guard(threshold=3)
    await respond(1, ("grep", GREP))
    await respond(2, ("grep", GREP))
    assert actions == []
    await respond(3, ("grep", GREP), content="no matches in src/\n\n  (searched 41 files)")

    assert _kinds(actions) == [("remind", 3)]
    result, message = capture.events[-2:]
    assert isinstance(result, ToolResult)
    assert isinstance(message, ContextMessage)
    assert message.call_id == result.call_id
    assert message.source.plugin == TurnsPolicy.plugin == "tool-loop-guard"
    assert message.source.summary == "grep × 3"
    assert "called grep with identical arguments in 3 consecutive turns" in message.text
    assert "no matches in src/ (searched 41 files)" in message.text
    assert "If this call repeats in 2 more consecutive turns, it will be denied." in message.text


async def test_silent_at_n_minus_one_turns(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=5)
    for step in range(1, 5):
        await respond(step, ("grep", GREP))
    await respond(5, ("read", READ))
    for step in range(6, 10):
        await respond(step, ("grep", GREP))
    assert actions == []


async def test_arguments_one_byte_apart_are_different_calls(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=3)
    await respond(1, ("grep", GREP))
    await respond(2, ("grep", {**GREP, "pattern": "load_confiG"}))
    await respond(3, ("grep", GREP))
    await respond(4, ("grep", GREP))
    assert actions == []


async def test_key_order_and_nesting_order_do_not_make_a_new_call(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=3)
    await respond(1, ("grep", {"pattern": "x", "opts": {"a": 1, "b": 2}}))
    await respond(2, ("grep", {"opts": {"b": 2, "a": 1}, "pattern": "x"}))
    await respond(3, ("grep", {"opts": {"a": 1, "b": 2}, "pattern": "x"}))
    assert _kinds(actions) == [("remind", 3)]


async def test_the_same_arguments_to_another_tool_are_another_call(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=2)
    await respond(1, ("grep", GREP))
    await respond(2, ("rg", GREP))
    assert actions == []


async def test_alternating_calls_never_fire(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=2)
    for step in range(1, 21):
        await respond(step, ("edit", {"path": "a.py"}) if step % 2 else ("bash", {"command": "make"}))
    assert actions == []


async def test_exempt_calls_neither_count_nor_end_a_run(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=3, exempt=["poll_*"])
    await respond(1, ("grep", GREP))
    await respond(2, ("poll_build", {"job": 1}))  # a turn of exempt calls only: skipped
    await respond(3, ("grep", GREP), ("poll_build", {"job": 1}))
    assert actions == []
    await respond(4, ("grep", GREP))
    assert _kinds(actions) == [("remind", 3)]
    for step in range(5, 15):
        await respond(step, ("poll_build", {"job": 1}))
    assert len(actions) == 1


async def test_polling_through_a_shell_is_exempted_by_command_not_by_tool(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    """A CI poll every turn would otherwise be advised, denied and halted; an
    ``exempt_commands`` regex frees it while every other shell loop is still
    watched (exempting the whole ``bash`` tool would not)."""
    make_guard(threshold=3, exempt_commands=[r"^gh run (view|watch)\b"])
    for step in range(1, 11):
        await respond(step, ("bash", {"command": "gh run view 4242 --json status"}))
    assert actions == []
    for step in range(11, 14):
        await respond(step, ("bash", {"command": "make test"}))
    assert _kinds(actions) == [("remind", 3)]


async def test_after_an_advisory_the_next_needs_n_more_turns(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=3, deny_after=0, halt_after=0)
    fired_at = []
    for step in range(1, 11):
        before = len(actions)
        await respond(step, ("grep", GREP))
        if len(actions) > before:
            fired_at.append(step)
    assert fired_at == [3, 6, 9]
    assert _kinds(actions) == [("remind", 3), ("remind", 6), ("remind", 9)]
    assert all("will be" not in a.text for a in actions)  # no rung ahead to warn of


async def test_parallel_calls_in_one_turn_count_once(
    make_guard: Callable[..., Guard], respond: Respond, capture: Capture, actions: list[Action]
) -> None:
    make_guard(threshold=3)
    for step in (1, 2):
        await respond(step, ("grep", GREP), ("grep", GREP), ("grep", GREP))
    assert actions == []
    await respond(3, ("grep", GREP), ("grep", GREP), ("read", READ))
    assert _kinds(actions) == [("remind", 3)]
    assert [m.call_id for m in capture.of(ContextMessage)] == ["main-3.1"]


async def test_every_parallel_copy_of_a_denied_call_is_denied(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=2, deny_after=1, halt_after=0)
    await respond(1, ("grep", GREP))
    await respond(2, ("grep", GREP))
    decisions = await respond(3, ("grep", GREP), ("read", READ), ("grep", GREP))
    assert [d.allowed for d in decisions] == [False, True, False]
    assert {d.by for d in decisions if not d.allowed} == {"tool-loop-guard"}
    assert _kinds(actions) == [("remind", 2), ("deny", 3), ("deny", 3)]


async def test_the_ladder_advises_then_denies_then_requests_a_halt(
    make_guard: Callable[..., Guard], respond: Respond, capture: Capture, actions: list[Action]
) -> None:
    make_guard(threshold=3, deny_after=2, halt_after=2)
    allowed = {}
    for step in range(1, 10):
        [decision] = await respond(step, ("grep", GREP), content=f"no matches (try {step})")
        allowed[step] = decision.allowed
    assert [s for s, ok in allowed.items() if not ok] == [5, 6, 7, 8, 9]
    assert _kinds(actions) == [
        ("remind", 3),
        ("deny", 5),
        ("deny", 6),
        ("deny", 7),
        ("halt", 7),
        ("deny", 8),
        ("deny", 9),
    ]
    deny = actions[1]
    assert deny.call_id == "main-5.1"
    assert "called in 5 consecutive turns" in deny.text
    assert "no matches (try 4)" in deny.text  # the last result that ran, not a denial
    assert "If this call repeats in 2 more consecutive turns, the run will be stopped." in deny.text
    assert "in 1 more consecutive turn, the run" in actions[2].text

    [halt] = [e for e in capture.of(AgentStatus) if e.status == "halt-requested"]
    assert halt.reason == actions[4].text
    assert "grep was called with identical arguments in 7 consecutive turns" in halt.reason
    assert "and 3 denied calls" in halt.reason
    denied = [r for r in capture.of(ToolResult) if r.denied_by]
    assert [r.step for r in denied] == [5, 6, 7, 8, 9]
    assert capture.events.index(halt) == capture.events.index(denied[2]) + 1  # after the result it follows
    assert len(capture.of(ContextMessage)) == 1  # denials replace advisories


async def test_with_denial_off_the_halt_follows_the_advisory_and_advisories_go_on(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=3, deny_after=0, halt_after=2)
    for step in range(1, 10):
        [decision] = await respond(step, ("grep", GREP))
        assert decision.allowed
    assert _kinds(actions) == [("remind", 3), ("halt", 5), ("remind", 6), ("remind", 9)]
    assert "the run will be stopped" in actions[0].text
    assert "denied" not in actions[1].text
    assert "will be" not in actions[2].text


async def test_with_halt_off_denials_go_on_without_a_halt(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=2, deny_after=1, halt_after=0)
    for step in range(1, 8):
        await respond(step, ("grep", GREP))
    assert _kinds(actions) == [("remind", 2)] + [("deny", n) for n in range(3, 8)]
    assert all("stopped" not in a.text for a in actions)


async def test_a_late_denial_lets_advisories_repeat_until_it_comes(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=2, deny_after=3, halt_after=0)
    for step in range(1, 7):
        await respond(step, ("grep", GREP))
    assert _kinds(actions) == [("remind", 2), ("remind", 4), ("deny", 5), ("deny", 6)]
    assert "repeats in 3 more consecutive turns, it will be denied" in actions[0].text
    assert "repeats in 1 more consecutive turn, it will be denied" in actions[1].text


async def test_a_halt_due_on_an_advisory_turn_wins(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=2, deny_after=0, halt_after=2)
    for step in range(1, 6):
        await respond(step, ("grep", GREP))
    assert _kinds(actions) == [("remind", 2), ("halt", 4)]


async def test_a_user_message_resets_the_run_and_the_ladder(
    make_guard: Callable[..., Guard], respond: Respond, bus: Bus, agent: Agent, actions: list[Action]
) -> None:
    make_guard(threshold=3, deny_after=1, halt_after=0)
    for step in range(1, 5):
        await respond(step, ("grep", GREP))
    assert _kinds(actions) == [("remind", 3), ("deny", 4)]
    await bus.publish(UserMessage(agent=agent, text="it exists now, grep again"))
    for step in range(5, 7):
        [decision] = await respond(step, ("grep", GREP))
        assert decision.allowed
    await respond(7, ("grep", GREP))
    assert _kinds(actions)[2:] == [("remind", 3)]


async def test_a_turn_without_the_call_ends_its_ladder(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=2, deny_after=1, halt_after=0)
    for step in range(1, 4):
        await respond(step, ("grep", GREP))
    assert _kinds(actions) == [("remind", 2), ("deny", 3)]
    await respond(4, ("read", READ))
    [decision] = await respond(5, ("grep", GREP))
    assert decision.allowed
    await respond(6, ("grep", GREP))
    assert _kinds(actions)[2:] == [("remind", 2)]


async def test_a_step_gap_is_a_turn_without_tool_calls_and_ends_every_run(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=3)
    await respond(1, ("grep", GREP))
    await respond(2, ("grep", GREP))
    await respond(4, ("grep", GREP))  # step 3 answered in text only
    await respond(5, ("grep", GREP))
    assert actions == []
    await respond(6, ("grep", GREP))
    assert _kinds(actions) == [("remind", 3)]


async def test_a_step_that_goes_back_ends_every_run(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=3)
    for step in (1, 2, 1, 2):  # the runtime restarted its count
        await respond(step, ("grep", GREP))
    assert actions == []


async def test_an_idle_status_ends_every_run(
    make_guard: Callable[..., Guard], respond: Respond, bus: Bus, agent: Agent, actions: list[Action]
) -> None:
    make_guard(threshold=3)
    await respond(1, ("grep", GREP))
    await respond(2, ("grep", GREP))
    await bus.publish(AgentStatus(agent=agent, status="idle"))
    await respond(3, ("grep", GREP))
    await respond(4, ("grep", GREP))
    assert actions == []


async def test_other_statuses_do_not_end_a_run(
    make_guard: Callable[..., Guard], respond: Respond, bus: Bus, agent: Agent, actions: list[Action]
) -> None:
    make_guard(threshold=3)
    await respond(1, ("grep", GREP))
    await bus.publish(AgentStatus(agent=agent, status="started"))
    await respond(2, ("grep", GREP))
    await bus.publish(AgentStatus(agent=None, status="idle"))
    await bus.publish(AgentStatus(agent=Agent("other"), status="idle"))
    await respond(3, ("grep", GREP))
    assert _kinds(actions) == [("remind", 3)]


async def test_disposing_an_agent_drops_its_state(
    make_guard: Callable[..., Guard], respond: Respond, bus: Bus, agent: Agent
) -> None:
    guard = make_guard(threshold=3)
    await respond(1, ("grep", GREP))
    assert guard.agent_count() == 1
    await bus.publish(AgentStatus(agent=agent, status="disposed"))
    assert guard.agent_count() == 0


async def test_runs_are_counted_per_agent(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=3)
    main, sub = Agent("main"), Agent("sub", parent_id="main")
    for step in (1, 2):
        await respond(step, ("grep", GREP), who=main)
        await respond(step, ("grep", GREP), who=sub)
    assert actions == []
    await respond(3, ("grep", GREP), who=sub)
    assert [(a.agent, a.action) for a in actions] == [("sub", "remind")]


async def test_results_published_without_a_decision_still_count(
    make_guard: Callable[..., Guard], bus: Bus, agent: Agent, capture: Capture, actions: list[Action]
) -> None:
    make_guard(threshold=2, deny_after=0, halt_after=1)
    for step in (1, 2, 3):  # a runtime that never calls decide
        call = ToolCall(agent=agent, call_id=f"r{step}", step=step, tool="grep", args=GREP)
        await bus.publish(ToolResult.answering(call, "no matches"))
    assert _kinds(actions) == [("remind", 2), ("halt", 3)]
    assert len(capture.of(ContextMessage)) == 1


async def test_a_call_denied_by_an_earlier_interceptor_is_counted_from_its_result(
    make_guard: Callable[..., Guard], respond: Respond, bus: Bus, actions: list[Action]
) -> None:
    async def sandbox(call: ToolCall) -> Decision:
        return Decision.deny("grep is not allowed here", "sandbox")

    bus.intercept("sandbox", sandbox)
    make_guard(threshold=2)
    await respond(1, ("grep", GREP))
    await respond(2, ("grep", GREP))
    assert _kinds(actions) == [("remind", 2)]
    assert "grep is not allowed here" in actions[0].text


async def test_a_late_result_of_a_finished_turn_is_ignored(
    make_guard: Callable[..., Guard], respond: Respond, bus: Bus, agent: Agent, actions: list[Action]
) -> None:
    make_guard(threshold=2)
    await respond(1, ("read", READ))
    await respond(2, ("read", {"path": "b"}))
    late = ToolCall(agent=agent, call_id="late", step=1, tool="grep", args=GREP)
    await bus.publish(ToolResult.answering(late, "no matches"))
    await respond(3, ("grep", GREP))
    assert actions == []


async def test_an_exempt_result_without_a_decision_is_ignored(
    make_guard: Callable[..., Guard], bus: Bus, agent: Agent, actions: list[Action]
) -> None:
    make_guard(threshold=2, exempt=["poll"])
    for step in (1, 2, 3):
        call = ToolCall(agent=agent, call_id=f"p{step}", step=step, tool="poll", args={})
        await bus.publish(ToolResult.answering(call, "running"))
    assert actions == []


async def test_a_user_message_between_a_call_and_its_result_cancels_the_advisory(
    make_guard: Callable[..., Guard], respond: Respond, bus: Bus, agent: Agent, actions: list[Action]
) -> None:
    make_guard(threshold=2)
    await respond(1, ("grep", GREP))
    call = ToolCall(agent=agent, call_id="c2", step=2, tool="grep", args=GREP)
    await bus.decide(call)
    await bus.publish(UserMessage(agent=agent, text="stop"))
    await bus.publish(ToolResult.answering(call, "no matches"))
    assert actions == []


async def test_a_denial_quotes_the_last_result_that_ran(
    make_guard: Callable[..., Guard], respond: Respond, actions: list[Action]
) -> None:
    make_guard(threshold=2, deny_after=1, halt_after=0, summary_chars=30)
    await respond(1, ("bash", {"command": "make"}), content="first")
    await respond(2, ("bash", {"command": "make"}), content="error: " + "x" * 100)
    await respond(3, ("bash", {"command": "make"}))
    await respond(4, ("bash", {"command": "make"}))
    advisory, first_denial, second_denial = actions
    quoted = "error: " + "x" * 23 + "… (107 chars in all)"
    assert quoted in advisory.text
    assert quoted in first_denial.text
    assert quoted in second_denial.text


async def test_each_action_is_a_structlog_event(make_guard: Callable[..., Guard], respond: Respond) -> None:
    make_guard(threshold=2, deny_after=1, halt_after=1)
    with capture_logs() as logs:
        for step in range(1, 5):
            await respond(step, ("grep", GREP))
    events = [(e["event"], e["count"]) for e in logs if e.get("policy") == "turns"]
    assert events == [("guard.remind", 2), ("guard.deny", 3), ("guard.deny", 4), ("guard.halt", 4)]
    assert all(e["tool"] == "grep" and e["agent"] == "main" for e in logs if e.get("policy") == "turns")


async def test_a_policy_built_at_threshold_zero_never_acts() -> None:
    policy = TurnsPolicy(TurnsConfig(threshold=0))
    state = policy.new_state()
    fingerprints = FingerprintCache()
    agent = Agent("main")
    for step in range(1, 20):
        call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool="grep", args=GREP)
        assert await policy.on_call(state, call, fingerprints) is None
        assert policy.on_result(state, ToolResult.answering(call, "x"), fingerprints) is None


@pytest.mark.parametrize("value", ["0", "3"])
async def test_the_environment_variable_never_changes_a_replay(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """The override is for live guards: a replay's verdicts and check depend
    on the log and the config alone."""
    log = SCENARIOS / "fires_at_threshold.jsonl"
    config = load_config(log.with_suffix(".toml"))
    unset = await replay_log(log, config)
    assert [v.action for v in unset.verdicts] == ["remind"]
    monkeypatch.setenv(TURNS_THRESHOLD_ENV, value)
    changed = await replay_log(log, config)
    assert changed.verdicts == unset.verdicts
    assert changed.differences == []


def test_summary_collapses_whitespace_and_marks_a_cut() -> None:
    assert summarize_result("a\n\n  b\tc", 10) == "a b c"
    assert summarize_result("", 10) == "(empty)"
    assert summarize_result(" \n ", 10) == "(empty)"
    assert summarize_result("abcdefghijkl", 5) == "abcde… (12 chars in all)"
    assert summarize_result("x" * 1_000_000, 8) == "xxxxxxxx… (1000000 chars in all)"
    assert summarize_result(" " * 50 + "tail", 4) == "… (54 chars in all)"
