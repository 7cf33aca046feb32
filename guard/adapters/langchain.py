"""The guard as LangChain agent middleware.

``create_agent(model, tools, middleware=[RepeatToolGuard(link)])`` and run it
with ``ainvoke``/``astream``. Seams: ``abefore_agent`` (agent identity; a
top-level run whose last message is a human message is a user turn),
``abefore_model`` (one step per model call; the guard's pending messages go
into the conversation as their own ``SystemMessage``s before the call; a
halt request jumps to the end), ``awrap_tool_call`` (decide; a deny answers
an error ``ToolMessage`` carrying the denial, and the tool never runs; the
result is published as the tool returned it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from guard.adapters._link import AgentLink, GuardLink, as_text
from guard.config import Config

__all__ = ["AGENT_KEY", "REMINDER_KEY", "GuardState", "RepeatToolGuard"]

AGENT_KEY = "repeat_tool_guard_agent"
"""State key holding the id of the live agent a run belongs to."""

REMINDER_KEY = "repeat_tool_guard"
"""Key in a reminder ``SystemMessage.additional_kwargs``: the call id it follows."""

_current: ContextVar[AgentLink | None] = ContextVar("repeat_tool_guard_langchain", default=None)


class GuardState(AgentState[Any]):
    repeat_tool_guard_agent: NotRequired[str]


class RepeatToolGuard(AgentMiddleware[GuardState, Any, Any]):
    """One middleware may serve many agents and runs. A top-level run is the
    agent of its ``thread_id`` (one live agent per thread, kept across its
    runs; ``"main"`` without a thread). A run started while a guarded tool
    executes is a subagent of the agent running the tool, disposed when that
    run ends. Async only: LangChain calls these hooks from ``ainvoke``/``astream``."""

    state_schema = GuardState

    def __init__(self, link: GuardLink | None = None, *, config: Config | None = None) -> None:
        super().__init__()
        self.link = link if link is not None else GuardLink(config=config)
        self._threads: dict[str, AgentLink] = {}
        self._live: dict[str, AgentLink] = {}
        self._subagents = 0

    @property
    def name(self) -> str:
        return "repeat-tool-guard"

    async def abefore_agent(self, state: GuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        parent = _current.get()
        if parent is not None:
            self._subagents += 1
            agent = self.link.agent(f"{parent.agent.id}/sub-{self._subagents}", parent=parent)
            await agent.start()
        else:
            thread = str(get_config().get("configurable", {}).get("thread_id") or "main")
            known = self._threads.get(thread)
            if known is None:
                known = self._threads[thread] = self.link.agent(thread)
                await known.start()
            agent = known
            messages = state["messages"]
            if messages and isinstance(messages[-1], HumanMessage):
                await agent.user_message(messages[-1].text)
        self._live[agent.agent.id] = agent
        return {AGENT_KEY: agent.agent.id}

    async def aafter_agent(self, state: GuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        agent = self._live[state["repeat_tool_guard_agent"]]
        if agent.agent.parent_id is not None:
            del self._live[agent.agent.id]
            await agent.dispose()
        return None

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: GuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        agent = self._live[state["repeat_tool_guard_agent"]]
        if agent.halt_reason is not None:
            return {"jump_to": "end"}
        agent.begin_step()
        pending = agent.take_messages()
        if not pending:
            return None
        return {"messages": [SystemMessage(m.text, additional_kwargs={REMINDER_KEY: m.call_id}) for m in pending]}

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        agent = self._live[request.state["repeat_tool_guard_agent"]]
        call = request.tool_call
        call_id = str(call.get("id") or "")
        decision = await agent.call(call_id, call["name"], call["args"])
        if not decision.allowed:
            await agent.denied(call_id, decision)
            return ToolMessage(decision.reason or "", tool_call_id=call_id, name=call["name"], status="error")
        token = _current.set(agent)
        try:
            answer = await handler(request)
        except Exception as exc:
            await agent.result(call_id, str(exc) or type(exc).__name__, is_error=True)
            raise
        finally:
            _current.reset(token)
        if isinstance(answer, ToolMessage):
            await agent.result(call_id, as_text(answer.content), is_error=answer.status == "error")
        else:
            await agent.result(call_id, as_text(answer.update))
        return answer
