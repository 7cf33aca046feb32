"""Shadow mode: every action computed and recorded, none delivered."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from bus import Agent, ContextMessage, ToolCall, read_log
from guard import Config, ConfigError, RemindConfig, parse_config, replay_log
from guard.actions import SHADOW_FORM, action_for
from guard.adapters import GuardLink
from guard.config import RECOMMENDED, SHADOW_ENV, apply_environment, shadowed
from guard.server.metrics import Metrics

pytestmark = pytest.mark.anyio


async def run_link(
    tmp_path: Path, config: Config, calls: int = 5, *, late: bool = False
) -> tuple[GuardLink, list[str], list[bool]]:
    """``calls`` identical grep calls through an adapter's link (each
    reported only with its result when ``late``); what the agent was owed
    (context texts) and which calls were allowed."""
    link = GuardLink(config=config, log=tmp_path / "s.jsonl")
    agent = link.agent("main")
    await agent.start()
    owed: list[str] = []
    allowed: list[bool] = []
    for n in range(calls):
        agent.begin_step()
        decision = await agent.call(f"c{n}", "Grep", {"pattern": "x"}, late=late)
        allowed.append(decision.allowed)
        if decision.allowed:
            await agent.result(f"c{n}", "No matches found")
        else:
            await agent.denied(f"c{n}", decision)
        owed += agent.take_context()
        if agent.halt_reason is not None:
            owed.append(agent.halt_reason)
    link.close()
    return link, owed, allowed


async def test_a_shadow_policy_denies_nothing_and_shows_nothing(tmp_path: Path, anyio_backend: str) -> None:
    _, owed, allowed = await run_link(tmp_path, shadowed(RECOMMENDED))
    assert owed == []
    assert allowed == [True] * 5
    with read_log(tmp_path / "s.jsonl") as reader:
        recorded = [e for e in reader if isinstance(e, ContextMessage)]
    assert [m.source.form for m in recorded] == [SHADOW_FORM] * len(recorded)
    assert [m.source.summary for m in recorded][:2] == ["deny: Grep × 3", "deny: Grep × 3"]
    outcome = await replay_log(tmp_path / "s.jsonl", shadowed(RECOMMENDED))
    assert outcome.differences == []
    assert [(v.action, v.shadow) for v in outcome.verdicts] == [("deny", True)] * 3 + [("halt", True)]
    assert '"shadow": true' in outcome.verdicts[0].json_line()


async def test_a_late_call_is_never_denied_and_what_would_have_denied_it_is_recorded_as_shadow(
    tmp_path: Path, anyio_backend: str
) -> None:
    _, owed, allowed = await run_link(tmp_path, RECOMMENDED, late=True)
    assert allowed == [True] * 5, "each tool had run before the guard saw its call"
    (reminder,) = owed
    assert "will be denied" in reminder, "the model still gets the reminder a result earns"
    with read_log(tmp_path / "s.jsonl") as reader:
        events = list(reader)
    assert [c.late for c in events if isinstance(c, ToolCall)] == [True] * 5
    forms = [m.source.form for m in events if isinstance(m, ContextMessage)]
    assert forms == [SHADOW_FORM, "notice", SHADOW_FORM, SHADOW_FORM], "the denials recorded, the reminder shown"
    outcome = await replay_log(tmp_path / "s.jsonl", RECOMMENDED)
    assert outcome.differences == []
    assert [(v.action, v.shadow) for v in outcome.verdicts] == [("deny", True), ("remind", False)] + [
        ("deny", True)
    ] * 2


async def test_late_calls_count_as_calls_but_never_as_denials_toward_the_halt(
    tmp_path: Path, anyio_backend: str
) -> None:
    link = GuardLink(config=RECOMMENDED, log=tmp_path / "s.jsonl")
    agent = link.agent("main")
    await agent.start()
    halted: list[bool] = []
    for n in range(8):  # two calls, three reported only with their results, then three retried
        agent.begin_step()
        decision = await agent.call(f"c{n}", "Grep", {"pattern": "x"}, late=2 <= n < 5)
        if decision.allowed:
            await agent.result(f"c{n}", "No matches found")
        else:
            await agent.denied(f"c{n}", decision)
        halted.append(agent.halt_reason is not None)
    link.close()
    assert halted == [False] * 7 + [True], "the halt comes with the third denial that happened"
    assert (await replay_log(tmp_path / "s.jsonl", RECOMMENDED)).differences == []


async def test_the_same_log_enforced_differs_only_in_delivery(tmp_path: Path, anyio_backend: str) -> None:
    _, owed, allowed = await run_link(tmp_path, RECOMMENDED)
    assert allowed == [True, True, False, False, False]
    assert owed == [
        "loop-detector: Grep with the same arguments was denied 3 times and the agent kept retrying it; "
        "the run should end."
    ]
    outcome = await replay_log(tmp_path / "s.jsonl", RECOMMENDED)
    assert [v.action for v in outcome.verdicts] == ["deny", "deny", "deny", "halt"]
    assert "shadow" not in outcome.verdicts[0].json_line()


async def test_a_seed_policy_runs_in_shadow_too(tmp_path: Path, anyio_backend: str) -> None:
    config = Config(remind=RemindConfig(mode="shadow"))
    _, owed, allowed = await run_link(tmp_path, config)
    assert (owed, allowed) == ([], [True] * 5)
    outcome = await replay_log(tmp_path / "s.jsonl", config)
    assert outcome.differences == []
    assert [(v.policy, v.action, v.shadow) for v in outcome.verdicts] == [("remind", "remind", True)] * 2
    # replayed without shadow mode, the recorded shadow messages are not what it makes
    assert (await replay_log(tmp_path / "s.jsonl", Config())).differences


def test_shadow_actions_are_counted_apart_in_metrics() -> None:
    metrics = Metrics()
    call = ToolCall(agent=Agent("main"), call_id="c1", step=1, tool="Grep", args={})
    for shadow in (True, True, False):
        action = action_for(call, policy="loops", kind="deny", count=3, text="no")
        metrics.on_action(msgspec.structs.replace(action, shadow=shadow), call)
    text = metrics.render().decode()
    assert 'repeat_tool_guard_shadow_actions_total{action="deny",policy="loops"} 2.0' in text
    assert 'repeat_tool_guard_actions_total{action="deny",policy="loops"} 1.0' in text


def test_mode_is_checked_and_shadowed_sets_every_section() -> None:
    with pytest.raises(ConfigError, match=r"loops.mode"):
        parse_config({"loops": {"mode": "dry-run"}})
    config = shadowed(Config())
    assert {config.remind.mode, config.turns.mode, config.rescue.mode, config.loops.mode} == {"shadow"}


def test_the_environment_switches_live_guards_to_shadow() -> None:
    assert apply_environment(RECOMMENDED, {SHADOW_ENV: "1"}).loops.mode == "shadow"
    assert apply_environment(RECOMMENDED, {SHADOW_ENV: "off"}).loops.mode == "enforce"
    with pytest.raises(ConfigError, match=SHADOW_ENV):
        apply_environment(RECOMMENDED, {SHADOW_ENV: "maybe"})
