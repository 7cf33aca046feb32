"""The guard as a Google ADK plugin.

``Runner(..., plugins=[RepeatToolGuard(link)])``. Seams: ``on_user_message_callback``
(a user turn), ``before_model_callback`` (one step per model call; the guard's
pending messages are appended to the request as their own text content; a
halt request answers in place of the model, ending the turn),
``before_tool_callback`` (decide; a deny returns ``{"error": denial}`` so the
tool never runs and the model reads the denial as the function response),
``after_tool_callback`` / ``on_tool_error_callback`` (publish the result;
a call ADK holds back for the user's confirmation stays open, and its
confirmed run is the same call, decided once). ADK stops at the first plugin
whose callback returns a value, so the guard should be listed first; a call
whose result a plugin before it kept from the guard is answered from the
function response the model reads next. Each agent of a session is one live
agent; its ``parent_agent`` in the ADK agent tree is its parent, and a
user's message reaches each agent of the tree when it first works after it
(a pipeline's worker, a transfer's target). A run started while a guarded
tool executes (an ``AgentTool`` runs its agent in a fresh session of its
own) is a subagent of the agent running the tool: its task is no user turn,
and its agents are disposed in ``after_run_callback``. A ``Workflow`` root has
no agent: the user turn reaches its nodes' agents as they work, and a tool
node, which the workflow's code calls rather than a model, is recorded once
it ran as a call of an agent named after the workflow, never denied.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from bus._logging import LazyLogger
from guard.config import Config
from guard.sessions.link import PAUSED_KEPT, REMINDER_PREFIX, AgentLink, GuardLink, UserTurns, adapter_link, as_text
from guard.sessions.live import LiveTable

__all__ = ["REMINDER_PREFIX", "RepeatToolGuard"]

_log = LazyLogger("guard")

_running: ContextVar[AgentLink | None] = ContextVar("repeat_tool_guard_google_adk", default=None)


class RepeatToolGuard(BasePlugin):
    """One plugin may serve many sessions. Each agent of a session is one
    live agent, kept across the session's turns; beyond ``max_sessions``
    sessions the agents of the least recently active one are disposed (one
    whose tool is running stays until that tool is done). List it first
    among the runner's plugins: the first run with another plugin before it
    logs a warning."""

    def __init__(self, link: GuardLink | None = None, *, config: Config | None = None, max_sessions: int = 256) -> None:
        super().__init__(name="repeat_tool_guard")
        self._sessions: LiveTable[str, str] = LiveTable(max_sessions)
        self.link = adapter_link(link, config, "google-adk")
        self._agents: dict[tuple[str, str], AgentLink] = {}
        self._nested: dict[str, AgentLink] = {}
        self._outer: dict[tuple[str, str, str, str], AgentLink | None] = {}
        """The tools running, by session, invocation, agent and call id: what ``_running`` was before each."""
        self._paused: LiveTable[tuple[str, str], bool] = LiveTable(PAUSED_KEPT)
        self._turns: dict[str, UserTurns] = {}
        self._order_checked = False

    async def _agent(self, session_id: str, agent: Any) -> AgentLink:
        if self._sessions.get(session_id) is None:
            for oldest in self._sessions.add(session_id, session_id, in_use=self._busy):
                await self._dispose_agents(oldest)
        key = (session_id, agent.name)
        known = self._agents.get(key)
        if known is not None:
            return known
        parent_agent = getattr(agent, "parent_agent", None)
        if parent_agent is not None:
            parent: AgentLink | None = await self._agent(session_id, parent_agent)
        else:  # a session's root agent: nested when a guarded tool is running here
            running = _running.get()
            parent = running if running is not None and running.open_calls() else None
            if parent is not None:
                self._nested[session_id] = parent
        link = self._agents[key] = self.link.agent(f"{session_id}/{agent.name}", parent=parent)
        await link.start()
        return link

    def _unanswered(self, agent: AgentLink) -> bool:
        """Whether ``agent`` has an open call not held for the user's
        confirmation, whose result a plugin before the guard may have kept:
        only then is the model's request read for results (a call the user
        left waiting costs no later request that read)."""
        paused = self._paused
        return any((agent.agent.id, call.call_id) not in paused for call in agent.calls_in_flight())

    def _busy(self, session_id: str) -> bool:
        """Whether a tool of the session is running: its agents stay live until it is done."""
        return any(key[0] == session_id for key in self._outer)

    async def _dispose_session(self, session_id: str) -> None:
        self._sessions.pop(session_id)
        await self._dispose_agents(session_id)

    async def _dispose_agents(self, session_id: str) -> None:
        self._turns.pop(session_id, None)
        for key in [key for key in self._agents if key[0] == session_id]:
            await self._agents.pop(key).dispose()

    async def _from(self, context: CallbackContext) -> AgentLink:
        invocation = context.get_invocation_context()
        if invocation.agent is not None:
            return await self._agent(invocation.session.id, invocation.agent)
        # a workflow's tool node: no agent owns it, the workflow's own agent calls it
        agent = await self._agent(invocation.session.id, _Workflow(_workflow_name(context)))
        turns = self._turns.get(invocation.session.id)
        if turns is not None:
            await turns.reach(agent)
        return agent

    async def before_run_callback(self, *, invocation_context: InvocationContext) -> types.Content | None:
        if not self._order_checked:
            self._order_checked = True
            first = invocation_context.plugin_manager.plugins[0]
            if first is not self:
                _log.warning(
                    "guard.plugin_not_first",
                    runtime="google-adk",
                    first=first.name,
                    reason="ADK stops at the first plugin whose callback returns a value, so one listed before"
                    " the guard can keep tool results, user turns and model calls from it: list it first",
                )
        return None

    async def on_user_message_callback(
        self, *, invocation_context: InvocationContext, user_message: types.Content
    ) -> types.Content | None:
        session_id = invocation_context.session.id
        root = invocation_context.agent  # None under a workflow: its nodes' agents get the turn as they work
        agent = None if root is None else await self._agent(session_id, root)
        text = " ".join(part.text for part in user_message.parts or [] if part.text)
        # a delegated task is no user turn, nor a message without text (a tool confirmation the client sent)
        if session_id not in self._nested and text.strip():
            await self._turns.setdefault(session_id, UserTurns()).begin(text, agent)
        return None

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        session_id = invocation_context.session.id
        ended = invocation_context.invocation_id
        for key in [key for key in self._outer if key[1] == ended]:  # no tool of a run over still runs
            del self._outer[key]
        if self._nested.pop(session_id, None) is not None and session_id in self._sessions:
            await self._dispose_session(session_id)
        for oldest in self._sessions.trim(in_use=self._busy):  # a session an add passed over while its tool ran
            await self._dispose_agents(oldest)

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        agent = await self._from(callback_context)
        if self._unanswered(agent):
            await self._answer_from(callback_context, agent, llm_request.contents)
        turns = self._turns.get(callback_context.get_invocation_context().session.id)
        if turns is not None:  # every agent of the tree works for the user's message, not only the root
            await turns.reach(agent)
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
        if _node(tool_context):  # the workflow's code chose the call, not a model: recorded once it ran
            return None
        agent = await self._from(tool_context)
        call_id = _call_id(tool_context)
        self._paused.pop((agent.agent.id, call_id))
        # a call the user answered (confirmed or not) is the call decided when it was first asked
        resumed = tool_context.tool_confirmation is not None and agent.running(call_id) is not None
        if not resumed:
            decision = await agent.call(call_id, tool.name, tool_args)
            if not decision.allowed:
                await agent.denied(call_id, decision)
                return {"error": decision.reason or ""}
        # ADK runs the tool in this context: a run it starts sees its agent.
        self._outer[_tool_key(tool_context, agent, call_id)] = _running.get()
        _running.set(agent)
        return None

    async def after_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, result: dict[str, Any]
    ) -> dict[str, Any] | None:
        if _node(tool_context):  # (a node held for confirmation comes here only once the user answered)
            confirmation = tool_context.tool_confirmation
            if confirmation is None or confirmation.confirmed:  # else the user said no: it never ran
                agent, call_id = await self._node_call(tool_context, tool, tool_args)
                await agent.result(call_id, as_text(result))
                agent.take_context()
            return None
        agent = await self._from(tool_context)
        call_id = _call_id(tool_context)
        self._tool_done(tool_context, agent, call_id)
        if not agent.has_call(call_id):
            return None
        if call_id in (tool_context.actions.requested_tool_confirmations or {}):
            # held back for the user's confirmation: no result yet, and its confirmed run is this call
            self._paused.add((agent.agent.id, call_id), True)
        elif tool_context.tool_confirmation is not None and not tool_context.tool_confirmation.confirmed:
            await agent.cancelled(call_id)  # the user said no: it never ran
        else:
            await agent.result(call_id, as_text(result))
        return None

    async def on_tool_error_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, error: Exception
    ) -> dict[str, Any] | None:
        if _node(tool_context):
            agent, call_id = await self._node_call(tool_context, tool, tool_args)
            await agent.failed(call_id, error)
            agent.take_context()
            return None
        agent = await self._from(tool_context)
        call_id = _call_id(tool_context)
        self._tool_done(tool_context, agent, call_id)
        await agent.failed(call_id, error)  # a cancelled run's tool comes here too, as its CancelledError
        return None

    async def _node_call(self, context: ToolContext, tool: BaseTool, args: dict[str, Any]) -> tuple[AgentLink, str]:
        """Publish the call a workflow's tool node made, once it ran, as the
        workflow's agent: a call reported with its outcome (``late``), never
        denied, for no model would read the denial and the graph would take
        it for the node's output; what would have denied it is recorded as
        in shadow mode, and the reminders meant for a model are dropped."""
        agent = await self._from(context)
        call_id = _call_id(context)
        await agent.call(call_id, tool.name, args, late=True)
        return agent, call_id

    def _tool_done(self, context: CallbackContext, agent: AgentLink, call_id: str) -> None:
        key = _tool_key(context, agent, call_id)
        if key in self._outer:
            _running.set(self._outer.pop(key))

    async def _answer_from(self, context: CallbackContext, agent: AgentLink, contents: list[types.Content]) -> None:
        """Publish the results of ``agent``'s open calls that ``contents``
        (what the model is about to read) answers: calls whose after-tool
        callback a plugin before the guard kept from it. A call held back
        for the user's confirmation is not answered by its pause."""
        for call_id, responses in _latest_responses(contents).items():
            open_calls = len(agent.running_namesakes(call_id))
            if not open_calls or (agent.agent.id, call_id) in self._paused:
                continue
            self._outer.pop(_tool_key(context, agent, call_id), None)
            for response in responses[-open_calls:]:
                await agent.result(call_id, as_text(response.response))


def _tool_key(context: CallbackContext, agent: AgentLink, call_id: str) -> tuple[str, str, str, str]:
    """Where a tool runs: its session, invocation, agent and call id."""
    invocation = context.get_invocation_context()
    return (invocation.session.id, invocation.invocation_id, agent.agent.id, call_id)


def _latest_responses(contents: list[types.Content]) -> dict[str, list[types.FunctionResponse]]:
    """The function responses in ``contents`` to the latest calls made under
    each id, in order: calls a response made under one id each get theirs,
    and a call answered again (its confirmed run after its pause) its latest."""
    made: dict[str, int] = {}
    answered: dict[str, list[types.FunctionResponse]] = {}
    for content in contents:
        for part in content.parts or ():
            call, response = part.function_call, part.function_response
            if call is not None and call.id:
                if answered.pop(call.id, None) is not None:  # the id names a new call
                    made[call.id] = 0
                made[call.id] = made.get(call.id, 0) + 1
            elif response is not None and response.id and response.id in made:
                answered.setdefault(response.id, []).append(response)
    return {call_id: responses[-made[call_id] :] for call_id, responses in answered.items()}


class _Workflow:
    """The agent a workflow's tool nodes are called by: a root of the session's tree."""

    parent_agent = None

    def __init__(self, name: str) -> None:
        self.name = name


def _node(context: CallbackContext) -> bool:
    """Whether a tool runs as a workflow's node, which no agent owns."""
    return context.get_invocation_context().agent is None


def _call_id(context: ToolContext) -> str:
    """A tool call's id, as the runtime gives it (``""`` for none)."""
    return context.function_call_id or ""


def _workflow_name(context: CallbackContext) -> str:
    """The workflow a tool node belongs to: the first part of its node path, without its run (``flow@1``)."""
    path = getattr(context, "node_path", None)
    return path.partition("/")[0].partition("@")[0] if isinstance(path, str) and path else "workflow"
