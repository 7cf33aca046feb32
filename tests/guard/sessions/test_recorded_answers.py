"""Replays never run the ask command: escalations are answered from the log."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from bus import Agent, Bus, SessionLog, ToolCall, ToolResult, UserMessage
from guard import Config, Guard, RemindConfig, RescueConfig, Verdict, load_config, replay_log
from guard.policies.rescue import RecordedAnswers, advice_in
from tests.conftest import AskScript
from tests.scenarios._script import Script

pytestmark = pytest.mark.anyio

INCIDENT = Path(__file__).resolve().parents[3] / "scenarios" / "rescue" / "incident_192.jsonl"
GREP = {"pattern": "load_config", "path": "src"}


def _expected(log: Path) -> list[Verdict]:
    lines = log.with_suffix(".expected.jsonl").read_bytes().splitlines()
    return [msgspec.json.decode(line, type=Verdict) for line in lines if line.strip()]


async def test_replay_reproduces_escalations_without_the_ask_command(
    missing_ask_command: str, anyio_backend: str
) -> None:
    recorded = load_config(INCIDENT.with_suffix(".toml"))
    config = msgspec.structs.replace(
        recorded, rescue=msgspec.structs.replace(recorded.rescue, ask_command=missing_ask_command)
    )
    outcome = await replay_log(INCIDENT, config)
    assert "rescue" in {v.action for v in outcome.verdicts}
    assert outcome.verdicts == _expected(INCIDENT)


async def test_live_asks_run_the_command_instead(missing_ask_command: str, anyio_backend: str) -> None:
    recorded = load_config(INCIDENT.with_suffix(".toml"))
    config = msgspec.structs.replace(
        recorded, rescue=msgspec.structs.replace(recorded.rescue, ask_command=missing_ask_command)
    )
    outcome = await replay_log(INCIDENT, config, live_asks=True)
    actions = {v.action for v in outcome.verdicts}
    assert "rescue" not in actions
    assert "escalation-failed" in actions


async def test_replay_of_a_live_session_asks_nobody(tmp_path: Path, ask_script: AskScript, anyio_backend: str) -> None:
    asked = tmp_path / "asked"
    command = ask_script(f"echo x >> {asked}\necho 'Read src/cfg.py instead.'")
    config = Config(
        remind=RemindConfig(enabled=False),
        rescue=RescueConfig(ask_command=str(command), nudge_at=2, rescue_at=3, window=3),
    )
    s = Script(tmp_path / "live.jsonl", config)
    await s.user("main", "find the loader")
    results = [await s.call("main", "grep", GREP, "no matches") for _ in range(4)]
    s.close()
    assert asked.read_text().count("x") == 1
    assert "Read src/cfg.py instead." in results[2].content

    outcome = await replay_log(tmp_path / "live.jsonl", config)
    assert asked.read_text().count("x") == 1, "the replay ran the ask command"
    assert [v.action for v in outcome.verdicts] == ["deny", "rescue", "rescue"]
    assert all("Read src/cfg.py instead." in v.text for v in outcome.verdicts[1:])


async def test_a_runtime_naming_every_call_alike_gets_each_escalations_own_advice_back(
    tmp_path: Path, ask_script: AskScript, anyio_backend: str
) -> None:
    count = tmp_path / "count"
    command = ask_script(f'n=$(($(cat {count} 2>/dev/null || echo 0) + 1)); echo $n > {count}; echo "Advice $n."')
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(command), cooldown_ms=0))
    log, bus, agent = tmp_path / "live.jsonl", Bus(), Agent("main")
    with SessionLog(log).attach(bus):
        Guard(config).attach(bus)
        for pattern in ("a", "b"):  # one loop, then the user steers, then another
            for _ in range(6):
                call = ToolCall(agent=agent, call_id="call_0", step=0, tool="grep", args={"pattern": pattern})
                decision = await bus.decide(call)
                await bus.publish(
                    ToolResult.answering(call, "same") if decision.allowed else ToolResult.denial(call, decision)
                )
            await bus.publish(UserMessage(agent=agent, text="try something else"))
    assert count.read_text() == "2\n"

    outcome = await replay_log(log, config)
    assert outcome.differences == []
    assert [v.text.count("Advice 1.") for v in outcome.verdicts if v.action == "rescue"] == [1, 1, 0, 0]


def test_advice_is_read_back_from_a_rescue_denial_only() -> None:
    answers = RecordedAnswers.from_log(INCIDENT)
    assert answers.answers, "the incident log records escalations"
    for advice in answers.answers.values():
        assert advice.strip()
    assert advice_in("loop-rescue denied this call; it did not run.\nRepeating it would return ...") is None


async def test_an_unrecorded_escalation_fails_as_unavailable(anyio_backend: str) -> None:
    call = ToolCall(agent=Agent("main"), call_id="c9", step=1, tool="grep", args=GREP)
    outcome = await RecordedAnswers({("main", "c1"): "advice"}).ask("question", call)
    assert (outcome.advice, outcome.ok) == (None, False)
    assert "no answer" in outcome.reason
    assert (await RecordedAnswers({("main", "c9"): "advice"}).ask("question", call)).advice == "advice"
