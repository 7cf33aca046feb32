"""Fixtures for the guard tests: a scripted session on a real bus, guard and log."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bus import ToolCall, ToolResult
from bus.testing import Capture
from guard import Action, ActionKind, Config, FingerprintCache, LoopsConfig, Policy, RemindConfig
from tests.scenarios._script import Script


class CapturedScript(Script):
    """A ``Script`` whose published events are also kept in ``capture``."""

    def __init__(self, path: Path, config: Config | None = None) -> None:
        super().__init__(path, config)
        self.capture = Capture().attach(self.bus)


class OnCallPolicy(Policy[list[int]]):
    """Answers every call of an agent with one action of ``kind`` from its second call on."""

    def __init__(self, name: str, kind: ActionKind) -> None:
        self.name = name
        self.plugin = f"{name}-plugin"
        self.kind = kind

    def new_state(self) -> list[int]:
        return [0]

    async def on_call(self, state: list[int], call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        state[0] += 1
        if state[0] < 2:
            return None
        return Action(
            policy=self.name,
            action=self.kind,
            agent=call.agent.id if call.agent else None,
            tool=call.tool,
            count=state[0],
            text=f"{self.name} says no",
            call_id=call.call_id,
        )


MakeScript = Callable[..., CapturedScript]


@pytest.fixture
def make_script(tmp_path: Path) -> Iterator[MakeScript]:
    """``make_script(config=None)``: a fresh scripted session writing
    ``session-N.jsonl`` under ``tmp_path``; closed at teardown."""
    made: list[Script] = []

    def make(config: Config | None = None) -> CapturedScript:
        script = CapturedScript(tmp_path / f"session-{len(made) + 1}.jsonl", config)
        made.append(script)
        return script

    yield make
    for script in made:
        script.close()


class Run(Script):
    """A scripted runtime with only ``loops`` on; ``actions`` lists
    ``(call number, kind)`` as the guard acted."""

    def __init__(self, path: Path, config: Config) -> None:
        super().__init__(path, config)
        self.actions: list[tuple[int, str]] = []
        self.texts: list[str] = []
        self.numbers: dict[str, int] = {}
        self.guard.add_listener(self._heard)

    def _heard(self, action: Action, trigger: object) -> None:
        self.actions.append((self.numbers.get(action.call_id, len(self.numbers) + 1), action.action))
        self.texts.append(action.text)

    async def do(self, tool: str, args: Any, content: str = "ok", **kw: Any) -> ToolResult:
        self.numbers[f"c{len(self.numbers) + 1}"] = len(self.numbers) + 1
        return await self.call("main", tool, args, content, **kw)

    async def hinted(self, tool: str, args: Any, content: str, hints: dict[str, bool]) -> None:
        """A call of a tool with MCP annotations (``hints``), answered by
        ``content`` when allowed and by its denial when not."""
        number = len(self.numbers) + 1
        self.numbers[f"h{number}"] = number
        call = ToolCall(agent=self.agent("main"), call_id=f"h{number}", step=number, tool=tool, args=args, hints=hints)
        decision = await self.bus.decide(call)
        content = content if decision.allowed else decision.reason or ""
        await self.bus.publish(ToolResult.answering(call, content, denied_by=decision.by))


Make = Callable[..., Run]


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Make]:
    made: list[Run] = []

    def build(**loops: Any) -> Run:
        config = Config(remind=RemindConfig(enabled=False), loops=LoopsConfig(**loops))
        made.append(Run(tmp_path / f"s{len(list(tmp_path.iterdir()))}.jsonl", config))
        return made[-1]

    yield build
    for run in made:  # each holds its session log open
        run.close()
