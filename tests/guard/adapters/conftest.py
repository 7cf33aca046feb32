"""Fixtures shared by the adapter integration tests.

Until the ``rescue`` and ``turns`` policies land, the deny and halt paths are
driven by a real bus interceptor and a real subscriber defined here: the
adapters only see the generic bus contract (a deny ``Decision``, an
``agent/status`` ``halt-requested``), whoever produces it.
"""

from __future__ import annotations

from collections import Counter

import pytest

from bus import AgentStatus, Bus, Decision, ToolCall, ToolResult
from bus.testing import Capture
from guard import Config, RemindConfig, canonical_json
from guard.adapters import GuardLink

DENIAL = "repeat-tool-guard test: this exact call already ran {count} times; use its result."
HALT = "repeat-tool-guard test: too many repeats, stopping the run."


class DenyRepeats:
    """Denies an agent's call once the same tool and arguments already ran
    ``limit`` times for that agent (a stand-in for ``rescue``)."""

    name = "deny-repeats"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: Counter[tuple[str, str, bytes]] = Counter()

    def attach(self, bus: Bus) -> DenyRepeats:
        bus.intercept(self.name, self)
        return self

    async def __call__(self, call: ToolCall) -> Decision | None:
        assert call.agent is not None
        key = (call.agent.id, call.tool, canonical_json(call.args))
        self.seen[key] += 1
        if self.seen[key] > self.limit:
            return Decision.deny(DENIAL.format(count=self.limit), self.name)
        return None


class HaltAfter:
    """Requests a halt of an agent after its ``results``-th tool result (a
    stand-in for ``turns``)."""

    def __init__(self, results: int) -> None:
        self.results = results
        self.counts: Counter[str] = Counter()
        self._bus: Bus | None = None

    def attach(self, bus: Bus) -> HaltAfter:
        bus.subscribe(ToolResult, self.on_result)
        self._bus = bus
        return self

    async def on_result(self, result: ToolResult) -> None:
        assert result.agent is not None
        assert self._bus is not None
        self.counts[result.agent.id] += 1
        if self.counts[result.agent.id] == self.results:
            await self._bus.publish(AgentStatus(agent=result.agent, status="halt-requested", reason=HALT))


@pytest.fixture
def remind_at_3() -> Config:
    return Config(remind=RemindConfig(thresholds=(3,), exclude=("delegate", "transfer_*")))


@pytest.fixture
def link(remind_at_3: Config) -> GuardLink:
    return GuardLink(config=remind_at_3)


@pytest.fixture
def events(link: GuardLink) -> Capture:
    return Capture().attach(link.bus)
