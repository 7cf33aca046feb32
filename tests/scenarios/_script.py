"""A scripted agent session that writes a real session log: the tool that
builds the logs under ``scenarios/``. Not a test module.

A script drives a real ``Bus`` with a real ``Guard`` and ``SessionLog``, so
the logs it writes hold the guard's messages as a runtime would record them.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from bus import Agent, AgentStatus, Bus, ContextMessage, ContextSource, SessionLog, ToolCall, ToolResult, UserMessage
from bus.testing import FakeClock
from guard import Config, Guard


class Script:
    """One scripted session. ``await script.call(...)`` runs a tool call the
    way a runtime does: decide, then publish the result (the denial text if
    denied)."""

    def __init__(self, path: Path, config: Config | None = None, *, session: str | None = None) -> None:
        self.clock = FakeClock()
        self.bus = Bus(clock=self.clock)
        self.log = SessionLog(path, session=session or path.stem, clock=self.clock).attach(self.bus)
        self.guard = Guard(config).attach(self.bus)
        self.agents: dict[str, Agent] = {}
        self._ids = itertools.count(1)
        self._steps: dict[str, int] = {}

    def agent(self, agent_id: str, parent: str | None = None) -> Agent:
        if agent_id not in self.agents:
            self.agents[agent_id] = Agent(agent_id, parent_id=parent)
        return self.agents[agent_id]

    async def start(self, agent_id: str, parent: str | None = None) -> Agent:
        agent = self.agent(agent_id, parent)
        await self.bus.publish(AgentStatus(agent=agent, status="started", parent=parent))
        return agent

    async def dispose(self, agent_id: str) -> None:
        await self.bus.publish(AgentStatus(agent=self.agents[agent_id], status="disposed"))

    async def user(self, agent_id: str, text: str) -> None:
        await self.bus.publish(UserMessage(agent=self.agent(agent_id), text=text))

    async def context(self, agent_id: str, call_id: str, plugin: str, text: str) -> None:
        source = ContextSource(plugin=plugin, summary=text[:40])
        await self.bus.publish(ContextMessage(agent=self.agent(agent_id), call_id=call_id, source=source, text=text))

    def next_step(self, agent_id: str | None) -> int:
        key = agent_id or ""
        self._steps[key] = self._steps.get(key, 0) + 1
        return self._steps[key]

    async def call(
        self,
        agent_id: str | None,
        tool: str,
        args: Any,
        content: str = "ok",
        *,
        step: int | None = None,
        is_error: bool = False,
        seconds: float = 1.0,
    ) -> ToolResult:
        """One tool call; ``step`` defaults to a new model response."""
        self.clock.advance(seconds)
        agent = self.agent(agent_id) if agent_id is not None else None
        call = ToolCall(
            agent=agent,
            call_id=f"c{next(self._ids)}",
            step=step if step is not None else self.next_step(agent_id),
            tool=tool,
            args=args,
        )
        decision = await self.bus.decide(call)
        if decision.allowed:
            result = ToolResult.answering(call, content, is_error=is_error)
        else:
            result = ToolResult.answering(
                call, decision.reason or "", is_error=True, denied_by=decision.by, advice=decision.advice
            )
        await self.bus.publish(result)
        return result

    def close(self) -> None:
        self.log.close()
