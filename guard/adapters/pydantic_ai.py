"""The guard as a pydantic-ai capability.

``Agent(model, capabilities=[RepeatToolGuard()])``. Seams: ``before_run``
(agent identity; a new top-level run's prompt is a user turn),
``before_model_request`` (one step per model request), ``wrap_tool_execute``
(decide before the tool function runs; publish its result; enqueue the
guard's reminders as capability parts of their own after the tool return),
and ``RunContext.cancel`` for a halt request (the run ends with
``RunCancelled``). An agent run started inside a guarded tool is a subagent
of the agent that ran the tool.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability, WrapRunHandler, WrapToolExecuteHandler
from pydantic_ai.exceptions import ToolFailed, UserError
from pydantic_ai.messages import (
    DataCapabilityPart,
    InstructionCapabilityPart,
    OperatorSource,
    OperatorText,
    ToolCallPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import ToolDefinition

from bus import Bus
from guard.config import Config
from guard.sessions.link import AgentLink, GuardLink, HaltRequested, adapter_link, as_text, parse_args
from guard.sessions.live import LiveTable

__all__ = ["REMINDER_METADATA_KEY", "QuotedReminderPart", "ReminderPart", "RepeatToolGuard"]

REMINDER_METADATA_KEY = "repeat_tool_guard"
"""Key in a reminder part's ``metadata``: the call id it follows."""


@dataclass(kw_only=True)
class ReminderPart(InstructionCapabilityPart, namespace="repeat_tool_guard", name="reminder"):
    """A guard reminder, in the application's voice (a mid-conversation
    system message), found again by its type."""


@dataclass(kw_only=True)
class QuotedReminderPart(
    DataCapabilityPart[str],
    namespace="repeat_tool_guard",
    name="quoted_reminder",
    tag="repeat_tool_guard_reminder",
    note="The {frame} is the loop guard's reminder about your last tool call; it quotes that call.",
):
    """A reminder whose text quotes arguments that look like a framework
    frame (a ``<system>`` tag): pydantic-ai refuses those in the
    application's voice, so it reaches the model as framed data instead of
    being lost."""


_current: ContextVar[AgentLink | None] = ContextVar("repeat_tool_guard_pydantic_ai_agent", default=None)


class RepeatToolGuard(AbstractCapability[Any]):
    """Runs every tool call of the agent through a guard.

    One capability may serve many agents and runs: each conversation
    (``RunContext.conversation_id``) of a top-level run is one live agent,
    kept across its turns so cross-turn policies see them; the oldest is
    disposed once more than ``max_sessions`` (or ``max_conversations``) are live. A run started
    while a guarded tool executes is a subagent, disposed when its run ends.
    """

    def __init__(
        self,
        link: GuardLink | None = None,
        *,
        config: Config | None = None,
        bus: Bus | None = None,
        max_sessions: int = 256,
        max_conversations: int | None = None,
    ) -> None:
        link = adapter_link(link, config, "pydantic-ai", bus)
        bound = max_conversations if max_conversations is not None else max_sessions  # this runtime's word for it
        self._conversations: LiveTable[str, AgentLink] = LiveTable(bound)
        self.link = link
        self._runs: dict[str, AgentLink] = {}

    def agent_for(self, ctx: RunContext[Any]) -> AgentLink:
        """The live agent of the run ``ctx`` belongs to (``wrap_run`` starts it)."""
        return self._runs[ctx.run_id or ""]

    async def wrap_run(self, ctx: RunContext[Any], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        parent = _current.get()
        run_id = ctx.run_id or ""
        if parent is None:
            agent = await self._conversation(ctx)
            prompt = _prompt_text(ctx.prompt)
            if prompt is not None:
                await agent.user_message(prompt)
        else:
            agent = self.link.agent(f"{_name(ctx)}/{run_id}", parent=parent)
            await agent.start()
        self._runs[run_id] = agent
        try:
            return await handler()
        finally:
            del self._runs[run_id]
            if parent is not None:
                await agent.dispose()
            else:  # a conversation an add passed over while this run went on goes now
                for oldest in self._conversations.trim(in_use=self._running):
                    await oldest.dispose()

    async def _conversation(self, ctx: RunContext[Any]) -> AgentLink:
        key = ctx.conversation_id or ctx.run_id or ""
        agent = self._conversations.get(key)
        if agent is not None:
            return agent
        agent = self.link.agent(f"{_name(ctx)}/{key}")
        evicted = self._conversations.add(key, agent, in_use=self._running)  # one whose run goes on stays
        await agent.start()
        for oldest in evicted:
            await oldest.dispose()
        return agent

    def _running(self, agent: AgentLink) -> bool:
        return agent in self._runs.values()

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        agent = self.agent_for(ctx)
        if agent.halt_reason is not None:
            ctx.cancel()
            raise HaltRequested(agent.agent.id, agent.halt_reason)
        agent.begin_step()
        return request_context

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        agent = self.agent_for(ctx)
        call_id = call.tool_call_id
        decision = await agent.call(call_id, call.tool_name, parse_args(call.args))
        if not decision.allowed:
            await agent.denied(call_id, decision)
            self._deliver(ctx, agent, call_id)
            raise ToolFailed(decision.reason or "")
        token = _current.set(agent)
        try:
            result = await handler(args)
        except BaseException as exc:
            await agent.failed(call_id, exc)
            if isinstance(exc, Exception):
                self._deliver(ctx, agent, call_id)
            raise
        finally:
            _current.reset(token)
        await agent.result(call_id, as_text(result))
        self._deliver(ctx, agent, call_id)
        return result

    def _deliver(self, ctx: RunContext[Any], agent: AgentLink, call_id: str) -> None:
        for text in agent.take_context(call_id):
            metadata = {REMINDER_METADATA_KEY: call_id}
            try:
                ctx.enqueue(ReminderPart(content=OperatorText(text), source=OperatorSource(), metadata=metadata))
            except UserError:
                ctx.enqueue(QuotedReminderPart(content=text, source=OperatorSource(), metadata=metadata))
        if agent.halt_reason is not None:
            ctx.cancel()


def _name(ctx: RunContext[Any]) -> str:
    return (ctx.agent.name if ctx.agent is not None else None) or "agent"


def _prompt_text(prompt: str | Sequence[Any] | None) -> str | None:
    if prompt is None or isinstance(prompt, str):
        return prompt
    return " ".join(part for part in prompt if isinstance(part, str))
