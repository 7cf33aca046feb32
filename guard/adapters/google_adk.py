"""The guard as a Google ADK plugin.

``Runner(..., plugins=[RepeatToolGuard(link)])``. Seams: ``on_user_message_callback``
(a user turn), ``before_model_callback`` (one step per model call; the guard's
pending messages are appended to the request as their own text content; a
halt request answers in place of the model, ending the turn),
``before_tool_callback`` (decide; a deny returns ``{"error": denial}`` so the
tool never runs and the model reads the denial as the function response),
``after_tool_callback`` / ``on_tool_error_callback`` (publish the result).
Each agent of a session is one live agent; its ``parent_agent`` in the ADK
agent tree is its parent.
"""

from __future__ import annotations

from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from guard.adapters._link import AgentLink, GuardLink, as_text
from guard.config import Config

__all__ = ["REMINDER_PREFIX", "RepeatToolGuard"]

REMINDER_PREFIX = "[repeat-tool-guard] "
"""Starts each reminder text the model is shown, marking it as the guard's note."""


class RepeatToolGuard(BasePlugin):
    def __init__(self, link: GuardLink | None = None, *, config: Config | None = None) -> None:
        super().__init__(name="repeat_tool_guard")
        self.link = link if link is not None else GuardLink(config=config)
        self._agents: dict[tuple[str, str], AgentLink] = {}

    async def _agent(self, session_id: str, agent: Any) -> AgentLink:
        key = (session_id, agent.name)
        known = self._agents.get(key)
        if known is not None:
            return known
        parent_agent = getattr(agent, "parent_agent", None)
        parent = await self._agent(session_id, parent_agent) if parent_agent is not None else None
        link = self._agents[key] = self.link.agent(f"{session_id}/{agent.name}", parent=parent)
        await link.start()
        return link

    async def _from(self, context: CallbackContext) -> AgentLink:
        invocation = context._invocation_context
        return await self._agent(invocation.session.id, invocation.agent)

    async def on_user_message_callback(
        self, *, invocation_context: InvocationContext, user_message: types.Content
    ) -> types.Content | None:
        agent = await self._agent(invocation_context.session.id, invocation_context.agent)
        text = " ".join(part.text for part in user_message.parts or [] if part.text)
        await agent.user_message(text)
        return None

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        agent = await self._from(callback_context)
        if agent.halt_reason is not None:
            text = REMINDER_PREFIX + agent.halt_reason
            return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
        agent.begin_step()
        for text in agent.take_context():
            llm_request.contents.append(types.Content(role="user", parts=[types.Part(text=REMINDER_PREFIX + text)]))
        return None

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        agent = await self._from(tool_context)
        call_id = tool_context.function_call_id or ""
        decision = await agent.call(call_id, tool.name, tool_args)
        if decision.allowed:
            return None
        await agent.denied(call_id, decision)
        return {"error": decision.reason or ""}

    async def after_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, result: dict[str, Any]
    ) -> dict[str, Any] | None:
        agent = await self._from(tool_context)
        call_id = tool_context.function_call_id or ""
        if agent.has_call(call_id):
            await agent.result(call_id, as_text(result))
        return None

    async def on_tool_error_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, error: Exception
    ) -> dict[str, Any] | None:
        agent = await self._from(tool_context)
        await agent.result(tool_context.function_call_id or "", str(error) or type(error).__name__, is_error=True)
        return None
