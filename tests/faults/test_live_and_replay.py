"""Seeded random sessions run live through a bus, a guard and a session log,
then replayed from that log: the replay must make every reminder, denial,
escalation and halt the live guard made, and no other (``replay --check``).

The sessions are what a careless runtime publishes: values JSON cannot
carry, call ids and steps used again (while the call is open, too), results
delivered twice, results of calls never made, user messages, compactions
and disposals, a second run appended to the same log, and loops enough for
every policy to act."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from bus import Agent, AgentStatus, Bus, SessionLog, ToolCall, ToolResult, UserMessage
from guard import Guard
from guard.config import Config, load_config
from guard.verdicts import replay_log
from tests.conftest import AskScript


@dataclasses.dataclass
class _Task:
    id: int
    name: str


class _Opaque:
    def __init__(self) -> None:
        self.x = 1


_TOOLS = ("Read", "Bash", "grep", "Edit", "mcp__fs__read", "", "x" * 200, "WebFetch", "sleep")
_ARGS: list[Any] = [
    {"path": "a.py"},
    {"command": "ls"},
    {"command": "pytest"},
    {"pattern": "x"},
    {"command": "sleep 2"},
    {"file_path": "a.py", "old_string": "a", "new_string": "b"},
]
_CONTENTS = ["same", "same", "same", "ok", "Error: boom", "", "2026-12-01T10:00:05Z done", "x" * 3000, "\x00\ud800"]
_MESSAGES = ["again", "do it again", "continue", "stop looping", "", "run it 5 times", "keep polling"]


def _value(rng: random.Random, depth: int = 0) -> Any:
    makers: list[Callable[[], Any]] = [
        lambda: rng.randrange(-5, 5),
        lambda: rng.choice(["a", "", "x" * 300, "é", "\u0000", "\ud800", "\x1b[31mred\x1b[0m"]),
        lambda: float("nan"),
        lambda: 2**70,
        lambda: b"bytes\xff",
        lambda: ("t", 1),
        lambda: frozenset({1, 2}),
        lambda: _Task(1, "x"),
        lambda: _Opaque(),
    ]
    if depth < 3:
        makers += [
            lambda: {rng.choice(["k", "path", "command", "offset", 1, None, (1, 2)]): _value(rng, depth + 1)},
            lambda: [_value(rng, depth + 1) for _ in range(rng.randrange(3))],
        ]
    return rng.choice(makers)()


async def _run(rng: random.Random, config: Config, path: Path, append: bool) -> None:
    clock = [1_700_000_000.0]

    def now() -> float:
        clock[0] += rng.choice([0.001, 0.5, 3.0, 700.0])
        return clock[0]

    bus = Bus(clock=now)
    Guard(config).attach(bus)
    agents = [Agent("main"), Agent("sub", parent_id="main") if rng.random() < 0.5 else Agent("w2")]
    pool: list[tuple[str, Any]] = []
    open_calls: list[ToolCall] = []
    with SessionLog(path, session="fuzz", append=append).attach(bus):
        for step in range(rng.randrange(5, 120)):
            roll = rng.random()
            agent = rng.choice(agents)
            if roll < 0.5 or not open_calls:
                if pool and rng.random() < 0.6:
                    tool, args = rng.choice(pool)
                else:
                    tool = rng.choice(_TOOLS)
                    args = _value(rng) if rng.random() < 0.4 else rng.choice(_ARGS)
                    if len(pool) < 4:
                        pool.append((tool, args))
                call_id = rng.choice([f"c{step}", f"c{step}", "call_0", "c1", str(rng.randrange(3))])
                call = ToolCall(agent=agent, call_id=call_id, step=rng.choice([step, step, 1, 0]), tool=tool, args=args)
                decision = await bus.decide(call)
                if decision.allowed:
                    open_calls.append(call)
                else:
                    await bus.publish(ToolResult.denial(call, decision))
            elif roll < 0.9:
                call = open_calls.pop(rng.randrange(len(open_calls)))
                result = ToolResult.answering(call, rng.choice(_CONTENTS))
                if rng.random() < 0.2:
                    result = msgspec.structs.replace(result, is_error=True)
                await bus.publish(result)
                if rng.random() < 0.1:
                    await bus.publish(msgspec.structs.replace(result))  # delivered again
            elif roll < 0.95:
                await bus.publish(UserMessage(agent=agent, text=rng.choice(_MESSAGES)))
            else:
                status = rng.choice(["compacted", "started", "idle", "disposed"])
                await bus.publish(AgentStatus(agent=agent, status=status))


def _every_policy(ask: Path) -> Config:
    base = msgspec.to_builtins(Config())
    on = {name: {**base[name], "enabled": True} for name in ("remind", "turns", "loops", "rescue")}
    on["rescue"]["ask_command"] = str(ask)
    return msgspec.convert({**base, **on}, Config)


@pytest.mark.parametrize("preset", ["default", "recommended", "every-policy"])
def test_a_replay_of_what_the_live_guard_logged_makes_what_it_made(
    tmp_path: Path, ask_script: AskScript, preset: str
) -> None:
    # an ask that fails for some calls: escalations answered and failed alike
    ask = ask_script('case "$1" in *Read*) exit 3;; esac\necho "Try something else."')
    config = {"default": Config(), "recommended": load_config("recommended")}.get(preset) or _every_policy(ask)
    acted: Counter[str] = Counter()
    for seed in range(30):
        rng = random.Random(seed)
        path = tmp_path / f"{preset}-{seed}.jsonl"
        anyio.run(_run, rng, config, path, False)
        if rng.random() < 0.3:  # the program run again on its log
            anyio.run(_run, rng, config, path, True)
        outcome = anyio.run(replay_log, path, config)
        assert outcome.report.skipped == 0, (seed, outcome.report.summary())
        assert outcome.differences == [], (seed, outcome.differences[:3])
        acted.update(outcome.counts())
    assert sum(acted.values()) >= 5, acted  # the sessions loop enough for the policies to act
