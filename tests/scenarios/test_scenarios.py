"""Every scenario under ``scenarios/`` replays to exactly its expected verdicts.

A scenario is ``NAME.jsonl`` (a session log), ``NAME.expected.jsonl`` (one
verdict per line, as ``replay --json`` prints them) and optionally
``NAME.toml`` (the config; without it the default config). Every guard
action recorded in the log (messages, denials, halt requests) must also be
regenerated exactly (``--check``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import msgspec
import pytest

from guard import Verdict, load_config, replay_log
from guard.actions import DENYING

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _logs() -> list[Path]:
    return sorted(p for p in SCENARIOS.rglob("*.jsonl") if not p.name.endswith(".expected.jsonl"))


def test_every_scenario_states_its_expected_verdicts() -> None:
    logs = _logs()
    assert logs, f"no scenarios under {SCENARIOS}"
    missing = [str(p) for p in logs if not p.with_suffix(".expected.jsonl").exists()]
    assert not missing


@pytest.mark.anyio
@pytest.mark.parametrize("log", _logs(), ids=lambda p: str(p.relative_to(SCENARIOS).with_suffix("")))
async def test_scenario_replays_to_expected_verdicts(log: Path) -> None:
    config_path = log.with_suffix(".toml")
    config = load_config(config_path) if config_path.exists() else None
    expected_lines = log.with_suffix(".expected.jsonl").read_bytes().splitlines()
    expected = [msgspec.json.decode(line, type=Verdict) for line in expected_lines if line.strip()]

    outcome = await replay_log(log, config)

    assert outcome.verdicts == expected
    assert outcome.differences == []
    kinds = outcome.counts()
    denying = sum(kinds[k] for k in DENYING)
    # every guard action the log records was compared, denials included
    assert (
        outcome.checked
        == Counter({"context message": kinds["remind"], "denial": denying, "halt request": kinds["halt"]}) - Counter()
    )
    assert outcome.report.skipped == 0
