"""The guard as LangChain agent middleware.

``create_agent(model, tools, middleware=[RepeatToolGuard(link)])`` and run it
with ``ainvoke``/``astream``. Seams: ``abefore_agent`` (agent identity; a
top-level run whose last message is a human message is a user turn),
``abefore_model`` (one step per model call; the guard's pending messages go
into the conversation before the call as human messages marked with
``REMINDER_PREFIX``, right after the tool results they follow: providers
accept a single leading system message only; a halt request jumps to the
end and records its reason under ``HALT_KEY``), ``awrap_tool_call``
(decide; a deny answers an error ``ToolMessage`` carrying the denial, and the
tool never runs; the result is published as the tool returned it). A
middleware listed before the guard that runs a call again after its tool
raised (``ToolRetryMiddleware``) is the runtime retrying, not the model
calling again: the retry (in the same run of the tool node) runs
undecided and unrecorded, and a warning says to list the guard first.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from bus._logging import LazyLogger
from guard.config import Config
from guard.sessions.link import PAUSED_KEPT, REMINDER_PREFIX, AgentLink, GuardLink, adapter_link, as_text
from guard.sessions.live import LiveTable

__all__ = ["AGENT_KEY", "HALT_KEY", "REMINDER_KEY", "GuardState", "RepeatToolGuard", "halt_reason", "is_reminder"]

AGENT_KEY = "repeat_tool_guard_agent"
"""State key holding the id of the live agent a run belongs to."""

HALT_KEY = "repeat_tool_guard_halt"
"""State key holding why the guard ended the run (``None`` when it did not)."""

REMINDER_KEY = "repeat_tool_guard"
"""Key in a reminder message's ``additional_kwargs``: the call id it follows."""

_running: ContextVar[tuple[AgentLink, list[AgentLink]] | None] = ContextVar("repeat_tool_guard_langchain", default=None)
"""The agent whose guarded tool is running here, and the subagents started inside that tool call."""

_log = LazyLogger("guard")


class GuardState(AgentState[Any]):
    repeat_tool_guard_agent: NotRequired[str]
    repeat_tool_guard_halt: NotRequired[str | None]


def halt_reason(result: Mapping[str, Any]) -> str | None:
    """Why the guard ended the run whose final state is ``result`` (what
    ``ainvoke`` returned), or ``None`` when the run finished on its own."""
    reason = result.get(HALT_KEY)
    return reason if isinstance(reason, str) else None


def is_reminder(message: BaseMessage) -> bool:
    """Whether ``message`` is a guard message the middleware added, not the user's."""
    return REMINDER_KEY in message.additional_kwargs


class RepeatToolGuard(AgentMiddleware[GuardState, Any, Any]):
    """One middleware may serve many agents and runs. A top-level run is the
    agent of its ``thread_id`` (one live agent per thread, kept across its
    runs); a run without one (no conversation to go on) is an agent of its
    own, ``run-<n>``, disposed when it ends, so runs at once never share a
    count. Beyond ``max_sessions`` (or ``max_threads``) live threads and runs
    the least recently run one is disposed. A run started while a guarded
    tool executes is a subagent of the agent running the tool, disposed when
    that run ends (or the tool call does). Async only: LangChain calls these
    hooks from ``ainvoke``/``astream``."""

    state_schema = GuardState

    def __init__(
        self,
        link: GuardLink | None = None,
        *,
        config: Config | None = None,
        max_sessions: int = 256,
        max_threads: int | None = None,
    ) -> None:
        super().__init__()
        bound = max_threads if max_threads is not None else max_sessions  # max_threads: this runtime's word for it
        self._threads: LiveTable[str, AgentLink] = LiveTable(bound)
        self.link = adapter_link(link, config, "langchain")
        self._live: dict[str, AgentLink] = {}
        self._paused: LiveTable[tuple[str, str], bool] = LiveTable(PAUSED_KEPT)
        # by agent, call id and the run of the graph's tool node, the step in which the call's tool raised,
        # once per attempt that raised: a retry middleware runs the call again in that run (a resume from a
        # checkpoint, in a run of its own)
        self._raised: LiveTable[tuple[str, str, str], tuple[int, ...]] = LiveTable(PAUSED_KEPT)
        self._retry_warned = False
        self._subagents = 0
        self._runs = 0

    @property
    def name(self) -> str:
        return "repeat-tool-guard"

    async def abefore_agent(self, state: GuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        running = _running.get()
        if running is not None:
            parent, children = running
            self._subagents += 1
            agent = self.link.agent(f"{parent.agent.id}/sub-{self._subagents}", parent=parent)
            await agent.start()
            children.append(agent)
        else:
            thread = _thread_id()
            if thread is None:
                self._runs += 1
                thread = f"run-{self._runs}"
            agent = await self._thread(thread)
            messages = state["messages"]
            if messages and isinstance(messages[-1], HumanMessage) and not is_reminder(messages[-1]):
                await agent.user_message(messages[-1].text)
        self._live[agent.agent.id] = agent
        return {AGENT_KEY: agent.agent.id, HALT_KEY: None}

    async def _agent_of(self, state: Mapping[str, Any]) -> AgentLink:
        """The live agent of the run in ``state``. A run whose agent the
        middleware no longer holds (its thread was disposed for newer ones
        while it ran, or it resumes in a process that did not start it) gets
        its agent started again, under the same id."""
        agent_id = str(state[AGENT_KEY])
        agent = self._live.get(agent_id)
        if agent is None:
            agent = self._live[agent_id] = await self._thread(agent_id)
        elif agent.agent.parent_id is None:
            self._threads.get(agent_id)  # a thread still running is the most recently used
        return agent

    async def _thread(self, thread: str) -> AgentLink:
        agent = self._threads.get(thread)
        if agent is not None:
            return agent
        agent = self.link.agent(thread)
        evicted = self._threads.add(thread, agent)
        await agent.start()
        for oldest in evicted:
            self._live.pop(oldest.agent.id, None)
            await oldest.dispose()
        return agent

    async def aafter_agent(self, state: GuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        agent = self._live.get(state["repeat_tool_guard_agent"])
        if agent is not None and (agent.agent.parent_id is not None or _thread_id() is None):
            await self._end_run(agent)
        return None

    async def _end_run(self, agent: AgentLink) -> None:
        """The run of an agent that lives as long as its run (a subagent, a run without a thread) is over."""
        del self._live[agent.agent.id]
        if agent.agent.parent_id is None:
            self._threads.pop(agent.agent.id)
        await agent.dispose()

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: GuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        agent = await self._agent_of(state)
        if agent.halt_reason is not None:
            return {"jump_to": "end", HALT_KEY: agent.halt_reason}
        agent.begin_step()
        pending = agent.take_messages()
        if not pending:
            return None
        notes = [HumanMessage(REMINDER_PREFIX + m.text, additional_kwargs={REMINDER_KEY: m.call_id}) for m in pending]
        return {"messages": notes}

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        agent = await self._agent_of(request.state)
        call = request.tool_call
        call_id = str(call.get("id") or "")
        paused = (agent.agent.id, call_id)
        attempt = (*paused, _node_run())
        raised = self._raised.pop(attempt) or ()
        if raised and raised[0] == agent.step:
            self._raised.add(attempt, raised[1:])  # parallel calls given one id, each raised: each may be retried
            return await self._retried(attempt, agent.step, request, handler)
        # a tool resumed after its interrupt is the call decided when it first ran
        resumed = self._paused.pop(paused) is not None and agent.running(call_id) is not None
        if not resumed:
            with _traced():
                decision = await agent.call(call_id, call["name"], call["args"])
                if not decision.allowed:
                    await agent.denied(call_id, decision)
            if not decision.allowed:
                return ToolMessage(decision.reason or "", tool_call_id=call_id, name=call["name"], status="error")
        children: list[AgentLink] = []
        token = _running.set((agent, children))
        try:
            answer = await handler(request)
        except GraphInterrupt:  # the tool waits for a human: no result yet, and its resume is the same call
            self._paused.add(paused, True)
            raise
        except GraphBubbleUp as exc:  # the tool hands control to a parent graph (a Command): no failure
            with _traced():
                await agent.result(call_id, str(exc) or type(exc).__name__)
            raise
        except BaseException as exc:
            with _traced():
                await agent.failed(call_id, exc)
            if isinstance(exc, Exception):
                self._raise(attempt, agent.step)
            raise
        finally:
            _running.reset(token)
            for child in children:  # a subagent run that raised never reached aafter_agent
                if child.agent.id in self._live:
                    await self._end_run(child)
        with _traced():
            if isinstance(answer, ToolMessage):
                await agent.result(call_id, as_text(answer.content), is_error=answer.status == "error")
            else:
                await agent.result(call_id, as_text(answer.update))
        return answer

    async def _retried(
        self,
        key: tuple[str, str, str],
        step: int,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """The same call run again, in the step its tool raised in, by a
        middleware listed before the guard: the model asked once, so it
        runs as the call already decided, unrecorded (its first failure is
        the call's result in the log)."""
        if not self._retry_warned:
            self._retry_warned = True
            _log.warning(
                "guard.retried_inside",
                runtime="langchain",
                tool=request.tool_call["name"],
                reason="a middleware listed before the guard ran a call again after its tool raised (a retry):"
                " the guard lets retries run unrecorded; list it before retry middleware to record the outcome",
            )
        try:
            return await handler(request)
        except Exception:
            self._raise(key, step)
            raise

    def _raise(self, key: tuple[str, str, str], step: int) -> None:
        """One more attempt of the call ``key`` raised in ``step``: it may be run again."""
        earlier = tuple(s for s in self._raised.peek(key) or () if s == step)
        self._raised.add(key, (*earlier, step))


@contextlib.contextmanager
def _traced() -> Iterator[None]:
    """Where OpenInference's LangChain instrumentation traces the run (as
    Phoenix sets it up), its span of the tool step made OpenTelemetry's
    current span while the guard decides a call or hears its result: the
    instrumentation keeps its spans out of OpenTelemetry's context, so the
    guard's actions would each start a trace of their own instead of
    landing in the run's. Nothing is imported for it: without the
    instrumentation loaded, nothing happens."""
    instrumented = sys.modules.get("openinference.instrumentation.langchain")
    if instrumented is None:
        yield
        return
    from opentelemetry import trace

    span = instrumented.get_current_span() if not trace.get_current_span().is_recording() else None
    if span is None or not span.is_recording():
        yield
        return
    with trace.use_span(span, end_on_exit=False):
        yield


def _node_run() -> str:
    """The run of the graph node going on here (the tool node's): the same
    for every attempt a retry middleware makes, another for a resume."""
    return str(getattr(get_config().get("callbacks"), "parent_run_id", None))


def _thread_id() -> str | None:
    """The ``thread_id`` of the run going on here: ``None`` for a run without
    one (no conversation to go on)."""
    thread = get_config().get("configurable", {}).get("thread_id")
    return str(thread) if thread else None
