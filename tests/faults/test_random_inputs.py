"""Seeded random logs through ``replay`` with every policy on, and seeded
random hook payloads through the hook: no traceback, the documented exit
codes, every line accounted for (an event or a counted skip), and the
hook's own log reading back whole."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from bus import LogReader
from guard.adapters.claude_hooks import HOOK_EVENTS
from tests.faults.conftest import CLI

_SCALARS: list[Any] = [None, True, 0, -1, 10**50, 1.5, 1e308, "", "x", "\u0000", "é", "a" * 3000]
_EXTRA_LINES = [
    '{"type":"agent/status","seq":99,"ts":1,"agent":"a","status":"halt-requested","parent":null,"reason":"x"}',
    '{"type":"user/message","seq":5,"ts":1,"agent":"a","text":"hi"}',
    "1e999",
    '{"type":"tool/call","seq":1e400}',
    '{"type":"context/message","seq":3,"ts":1,"agent":"a","call_id":"c1",'
    '"source":{"kind":"plugin","plugin":"repeat-tool-reminder","form":"notice","summary":"x"},"text":"t"}',
    "\ufeff{}",
]


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 4 or roll < 0.3:
        return rng.choice(_SCALARS)
    if roll < 0.6:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {
        rng.choice(["command", "path", "a", "description", ""]): _value(rng, depth + 1)
        for _ in range(rng.randint(0, 3))
    }


def _random_log(rng: random.Random, path: Path) -> int:
    lines = ['{"type":"session/start","v":1,"session":"s","ts":0}']
    for i in range(12):
        call = {
            "type": "tool/call",
            "seq": 2 * i + 1,
            "ts": float(i),
            "agent": rng.choice(["a", "b", None]),
            "call_id": rng.choice(["c1", "c2", f"c{i}"]),
            "step": rng.choice([i, 0, -5]),
            "tool": rng.choice(["Bash", "edit", "t", "mcp__claude__x", ""]),
            "args": _value(rng),
        }
        result = dict(call, type="tool/result", seq=2 * i + 2, content=rng.choice(["ok", "", "x" * 100]))
        lines += [json.dumps(call), json.dumps(result)]
        if rng.random() < 0.2:
            lines.append(rng.choice(_EXTRA_LINES))
    path.write_text("\n".join(lines) + "\n")
    return len(lines)


@pytest.fixture
def every_policy(tmp_path: Path) -> Path:
    config = tmp_path / "all.toml"
    config.write_text("[remind]\n[turns]\n[rescue]\nask_command = '/bin/false'\n")
    return config


@pytest.mark.parametrize("seed", range(40))
def test_a_random_log_replays_with_every_line_accounted_for(
    seed: int, tmp_path: Path, every_policy: Path, cli: CLI
) -> None:
    log = tmp_path / "s.jsonl"
    lines = _random_log(random.Random(seed), log)
    run = cli("replay", log, "--config", every_policy, "--check")
    assert run.code in (0, 1), run.err
    with LogReader(log) as reader:
        events = sum(1 for _ in reader)
        assert reader.report.lines == lines
        assert events + reader.report.skipped + 1 == lines  # the header is the one line neither


_EVENTS: list[Any] = [*HOOK_EVENTS, "Stop", None, 5]


@pytest.mark.parametrize("seed", range(4))
def test_random_hook_payloads_answer_or_fail_in_one_line_and_the_log_reads_back(
    seed: int, tmp_path: Path, cli: CLI
) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        payload: dict[str, Any] = {"session_id": rng.choice(["s1", "s2"]), "hook_event_name": rng.choice(_EVENTS)}
        for key in ("tool_name", "tool_use_id", "tool_input", "tool_response", "error", "prompt", "agent_id"):
            if rng.random() < 0.7:
                payload[key] = _value(rng) if rng.random() < 0.5 else rng.choice(["Bash", "toolu_1", {"command": "ls"}])
        run = cli("hook", "--state-dir", tmp_path, stdin=json.dumps(payload).encode())
        assert run.code in (0, 1)
        if run.code:
            run.clean_error(1)
    for log in tmp_path.glob("*.jsonl"):
        with LogReader(log) as reader:
            assert sum(1 for _ in reader) > 0
            assert reader.report.skipped == 0
        assert cli("replay", log, "--check").code == 0
