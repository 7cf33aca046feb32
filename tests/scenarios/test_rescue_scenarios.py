"""The rescue scenarios say what issue 3 states, checked from the log itself.

``test_scenarios.py`` pins every verdict; these tests state the properties
the snapshot was checked against by hand, so a rebuilt log that drifted from
the incident it models fails here with a readable reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from guard import ReplayOutcome, load_config, replay_log
from guard.cli import main

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios" / "rescue"

pytestmark = pytest.mark.anyio


def _calls(name: str) -> list[dict[str, Any]]:
    lines = (SCENARIOS / f"{name}.jsonl").read_bytes().splitlines()
    return [event for event in map(msgspec.json.decode, lines) if event["type"] == "tool/call"]


def _results(name: str) -> dict[str, dict[str, Any]]:
    lines = (SCENARIOS / f"{name}.jsonl").read_bytes().splitlines()
    return {e["call_id"]: e for e in map(msgspec.json.decode, lines) if e["type"] == "tool/result"}


async def _replay(name: str) -> ReplayOutcome:
    return await replay_log(SCENARIOS / f"{name}.jsonl", load_config(SCENARIOS / f"{name}.toml"))


async def test_incident_is_caught_within_three_calls_and_escalated_by_the_fifth(anyio_backend: str) -> None:
    calls = _calls("incident_192")
    grep_x, read_y = calls[59]["args"], calls[58]["args"]
    cycle = calls[59:170]
    assert len(calls) == 192
    assert all(c["args"] == (read_y if n % 6 == 5 else grep_x) for n, c in enumerate(cycle))
    assert sum(c["tool"] == "grep" for c in cycle) == 93

    outcome = await _replay("incident_192")
    verdicts = outcome.verdicts

    assert (verdicts[0].call_number, verdicts[0].action) == (62, "deny")  # the cycle's third call
    escalations = [v for v in verdicts if v.action in ("rescue", "escalation-failed")]
    assert (escalations[0].call_number, escalations[0].count) == (64, 5)
    assert {v.tool for v in verdicts} == {"grep"}  # the read that breaks the chain is never denied
    advice = {v.text.split("advises:\n\n", 1)[1] for v in escalations}
    assert len(advice) == 1  # bought once, reused free on every later attempt
    assert all(v.action == "rescue" for v in escalations)
    assert max(v.call_number for v in verdicts) <= 170


async def test_incident_tail_draws_no_denial(anyio_backend: str) -> None:
    tail = _calls("incident_192")[170:]
    assert len(tail) == 22
    assert sum(c["tool"] == "edit" for c in tail) == 2
    assert sum(c["tool"] == "bash" and c["args"]["command"].startswith("cargo ") for c in tail) == 9
    assert sum(c["tool"] == "bash" and c["args"]["command"].startswith("cargo clippy") for c in tail) == 4

    outcome = await _replay("incident_192")

    assert [v for v in outcome.verdicts if v.call_number > 170] == []


@pytest.mark.parametrize("name", ["incident_192", "numbered_descriptions", "polling", "ask_unavailable"])
async def test_recorded_denials_are_what_replay_regenerates(name: str, anyio_backend: str) -> None:
    calls = _calls(name)
    results = _results(name)
    outcome = await _replay(name)

    denied = {c["call_id"]: results[c["call_id"]] for c in calls if results[c["call_id"]]["denied_by"]}
    regenerated = {calls[v.call_number - 1]["call_id"]: v.text for v in outcome.verdicts}
    assert {k: r["content"] for k, r in denied.items()} == regenerated
    assert {r["denied_by"] for r in denied.values()} <= {"loop-rescue"}


async def test_numbered_descriptions_are_one_signature(anyio_backend: str) -> None:
    calls = _calls("numbered_descriptions")
    assert len({c["args"]["description"] for c in calls}) == 6
    assert len({c["args"]["command"] for c in calls}) == 1

    outcome = await _replay("numbered_descriptions")

    assert [(v.call_number, v.count) for v in outcome.verdicts] == [(3, 3), (4, 4), (5, 5), (6, 6)]


async def test_polling_blocks_only_the_repeated_signature(anyio_backend: str) -> None:
    calls = _calls("polling")
    results = _results("polling")
    outcome = await _replay("polling")

    by_command: dict[str, list[str | None]] = {}
    for call in calls:
        by_command.setdefault(call["args"]["command"], []).append(results[call["call_id"]]["denied_by"])
    assert by_command["docker ps"] == [None, None, "loop-rescue"]
    assert by_command["sleep 10 && docker ps"] == [None, None]
    assert by_command["curl -fsS http://localhost:8080/health"] == [None] * 8
    assert [(v.call_number, v.count) for v in outcome.verdicts] == [(4, 3)]


def test_replay_json_prints_the_trips_as_verdicts(capsys: pytest.CaptureFixture[str]) -> None:
    log = SCENARIOS / "polling.jsonl"

    code = main(["replay", str(log), "--config", str(log.with_suffix(".toml")), "--json"])

    assert code == 0
    printed = [msgspec.json.decode(line) for line in capsys.readouterr().out.splitlines()]
    expected = [msgspec.json.decode(line) for line in log.with_suffix(".expected.jsonl").read_bytes().splitlines()]
    assert printed == expected
    assert [(v["call_number"], v["policy"], v["action"], v["tool"], v["count"]) for v in printed] == [
        (4, "rescue", "deny", "bash", 3)
    ]
