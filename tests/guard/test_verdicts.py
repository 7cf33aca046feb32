"""Replaying a session log as verdicts, and checking the recorded guard messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from guard import Config, RemindConfig, Verdict, load_config, replay_log
from tests.guard.conftest import MakeScript, OnCallPolicy

GREP = {"pattern": "x"}
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _write_log(path: Path, events: list[dict[str, Any]]) -> Path:
    lines = [{"type": "session/start", "v": 1, "session": "t", "ts": 0.0}]
    lines += [{"seq": i, "ts": float(i), **event} for i, event in enumerate(events, start=1)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _call(call_id: str, step: int, tool: str = "grep", agent: str | None = "main") -> dict[str, Any]:
    return {"type": "tool/call", "agent": agent, "call_id": call_id, "step": step, "tool": tool, "args": GREP}


def _result(call_id: str, step: int, tool: str = "grep", agent: str | None = "main") -> dict[str, Any]:
    return {**_call(call_id, step, tool, agent), "type": "tool/result", "content": "ok"}


@pytest.mark.anyio
async def test_call_number_is_the_triggering_calls_ordinal_even_for_parallel_calls(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    for step in range(1, 4):  # each response asks for grep and read in parallel
        grep, read = f"g{step}", f"r{step}"
        events += [_call(grep, step), _call(read, step, "read"), _result(grep, step), _result(read, step, "read")]
    log = _write_log(tmp_path / "parallel.jsonl", events)
    outcome = await replay_log(log, Config(remind=RemindConfig(exclude=("read",))))
    [verdict] = outcome.verdicts
    assert (verdict.seq, verdict.call_number, verdict.tool, verdict.count) == (11, 5, "grep", 3)


@pytest.mark.anyio
async def test_a_log_of_results_alone_numbers_the_synthesized_calls(tmp_path: Path) -> None:
    events = [_result("a", 1, agent="sub"), _result("b", 1, "read", agent=None)]
    events += [_result(f"c{i}", i) for i in range(1, 4)]
    log = _write_log(tmp_path / "results.jsonl", events)
    outcome = await replay_log(log)
    assert [(v.seq, v.call_number, v.agent) for v in outcome.verdicts] == [(5, 5, "main")]
    assert outcome.differences != []  # the reminder was never recorded in this log


@pytest.mark.anyio
async def test_verdicts_are_reported_as_they_happen_and_counted(make_script: MakeScript) -> None:
    s = make_script()
    for _ in range(5):
        await s.call("main", "grep", GREP)
    await s.context("main", "c5", "hook-bridge", "lint: 0 problems")  # not the guard's: replayed as recorded
    s.close()
    heard: list[Verdict] = []
    outcome = await replay_log(s.log.path, on_verdict=heard.append)
    assert heard == outcome.verdicts
    assert [(v.call_number, v.count) for v in heard] == [(3, 3), (5, 5)]
    assert outcome.counts() == {"remind": 2}
    assert outcome.differences == []
    assert outcome.report.events == 13


@pytest.mark.anyio
async def test_check_finds_a_tampered_a_missing_and_an_extra_message(make_script: MakeScript, tmp_path: Path) -> None:
    s = make_script()
    for _ in range(5):
        await s.call("main", "grep", GREP)
    s.close()
    lines = s.log.path.read_text(encoding="utf-8").splitlines(keepends=True)
    reminders = [i for i, line in enumerate(lines) if '"repeat-tool-reminder"' in line]
    assert len(reminders) == 2

    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("".join(lines).replace("Carefully analyze", "Please analyze"), encoding="utf-8")
    [diff] = (await replay_log(tampered)).differences
    assert diff.index == 0
    assert diff.recorded is not None
    assert "Please analyze" in diff.recorded
    assert diff.regenerated is not None
    assert "Carefully analyze" in diff.regenerated

    missing = tmp_path / "missing.jsonl"
    missing.write_text("".join(line for i, line in enumerate(lines) if i != reminders[1]), encoding="utf-8")
    [diff] = (await replay_log(missing)).differences
    assert (diff.index, diff.recorded) == (1, None)
    assert diff.regenerated is not None
    assert "consecutive_calls: 5" in diff.regenerated

    # replayed with thresholds the recording did not use: the second message is not regenerated
    [diff] = (await replay_log(s.log.path, Config(remind=RemindConfig(thresholds=(3,))))).differences
    assert diff.index == 1
    assert diff.regenerated is None


@pytest.mark.anyio
async def test_an_action_on_a_call_is_placed_at_that_call(tmp_path: Path) -> None:
    events = [_call("a1", 1), _call("a2", 1), _result("a1", 1), _result("a2", 1)]
    log = _write_log(tmp_path / "calls.jsonl", events)
    outcome = await replay_log(log, policies=[OnCallPolicy("gate", "deny")])
    assert [(v.seq, v.call_number, v.action) for v in outcome.verdicts] == [(2, 2, "deny")]


@pytest.mark.anyio
async def test_recorded_halt_requests_are_regenerated_not_republished(tmp_path: Path) -> None:
    """A halt request is guard output like a reminder: replay withholds the
    recorded one, regenerates it, and ``--check`` compares the two."""
    ladder = SCENARIOS / "turns" / "ladder.jsonl"
    config = load_config(ladder.with_suffix(".toml"))
    intact = await replay_log(ladder, config)
    assert [v.action for v in intact.verdicts].count("halt") == 1
    assert intact.differences == []

    text = ladder.read_text(encoding="utf-8")
    assert text.count('"status":"halt-requested"') == 1
    tampered = tmp_path / "ladder.jsonl"
    tampered.write_text(
        text.replace(
            '"status":"halt-requested","parent":null,"reason":"',
            '"status":"halt-requested","parent":null,"reason":"EDITED ',
        ),
        encoding="utf-8",
    )
    [diff] = (await replay_log(tampered, config)).differences
    assert "EDITED" in (diff.recorded or "")
    assert "halt-requested" in (diff.regenerated or "")
