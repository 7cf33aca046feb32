"""The guard in the OpenAI Agents SDK.

``guard = RepeatToolGuard(link)`` then ``await guard.run(agent, "prompt")``
instead of ``Runner.run`` (``await guard.run_streamed(...)`` instead of
``Runner.run_streamed``). Seams: a tool input guardrail on every function
tool of the agent and its handoff targets (decide; a deny is
``reject_content``, so the tool never runs and the model reads the denial as
its output). The tools the SDK runs here without that guardrail, a
``CustomTool``, a ``ShellTool`` or ``LocalShellTool`` with a local executor,
an ``ApplyPatchTool``'s editor, and a function tool the SDK makes during the
run (a ``SandboxAgent``'s capability tools, an MCP server's tools), are
decided in what runs them (``on_invoke_tool``, the executor, the editor,
wrapped once): a deny is the tool's output and the tool never runs. Run
hooks: ``on_llm_start`` numbers steps, ``on_tool_start`` wraps a tool first
seen there and notes the agent whose tool starts in a run context (an
executor or editor is told the run context, not the agent), ``on_tool_end``
publishes results, ``on_handoff`` starts the target agent.
``RunConfig.call_model_input_filter`` appends the guard's messages to the
next model input as developer messages. A halt request raises
``HaltRequested`` from that filter, before the next model call. Hosted tools
(web search, file search, code interpreter, hosted MCP, a hosted shell) and
computer use are not guarded.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import fields, replace
from itertools import count
from typing import Any

from agents import (
    Agent,
    ApplyPatchResult,
    ApplyPatchTool,
    CustomTool,
    FunctionTool,
    LocalShellTool,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Runner,
    RunResult,
    RunResultStreaming,
    ShellCallOutcome,
    ShellCommandOutput,
    ShellResult,
    ShellTool,
    StreamEvent,
    Tool,
    ToolCallOutputItem,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
)
from agents.run_config import CallModelData, ModelInputData
from agents.tool import default_tool_error_function, default_tool_timeout_error_message
from agents.tool_context import ToolContext
from openai.types.responses import EasyInputMessageParam

from bus import Decision
from guard.config import Config
from guard.sessions.link import AgentLink, GuardLink, HaltRequested, UserTurns, adapter_link, as_text, parse_args
from guard.sessions.live import LiveTable

__all__ = ["TOOL_GUARDRAIL", "RepeatToolGuard", "guard_tools"]

_SDK_FAILURE = default_tool_error_function(RunContextWrapper(None), RuntimeError()).split(".")[0]
"""How the SDK's default ``failure_error_function`` answers a tool that raised
("An error occurred while running the tool")."""

_Allowed = list[tuple[AgentLink, str]]

_active: ContextVar[tuple[RepeatToolGuard, _Run] | None] = ContextVar("repeat_tool_guard_openai_agents", default=None)
"""The guard of the run going on here (``run``, ``run_streamed``), and that run."""
_calling: ContextVar[AgentLink | None] = ContextVar("repeat_tool_guard_openai_calling", default=None)
"""The agent whose allowed tool call runs in this task."""


class _Scope:
    """The live agents of a run that keeps agents of its own, by SDK agent:
    an agent-as-tool invocation (``as_tool``), or a run started while another
    run of the same guard goes on; and the user turns that reach them
    (``None`` in an invocation, whose task comes from its caller)."""

    __slots__ = ("links", "suffix", "turns")

    def __init__(self, turns: UserTurns | None, suffix: str = "") -> None:
        self.links: dict[int, AgentLink] = {}
        self.turns = turns
        self.suffix = suffix
        """Added to each agent's name: ``/run-<n>`` for a run's, telling it from the conversation's."""

    async def dispose(self) -> None:
        for link in self.links.values():
            await link.dispose()


_scope: ContextVar[_Scope | None] = ContextVar("repeat_tool_guard_openai_scope", default=None)
"""The agents of the run or invocation running here, if it keeps its own (``_Scope``)."""


class _Run:
    """A ``run`` or ``run_streamed`` of a guard, while it goes on; ``scope``
    its own agents, if it started while another run went on."""

    __slots__ = ("allowed", "ran", "scope", "started", "streamed", "working")

    def __init__(self, scope: _Scope | None) -> None:
        self.scope = scope
        self.streamed: RunResultStreaming | None = None
        self.allowed: _Allowed = []
        """The calls the guard allowed: one the run ends without answering (stopped by a
        sibling's exception, or by the run's cancellation) gets its outcome published."""
        self.working: dict[int, tuple[RunContextWrapper[Any], Agent[Any]]] = {}
        """By the id of a run context (kept alive here): the agent whose tool ``on_tool_start``
        saw start in it last. An executor or editor is told the run context, not the agent; the
        tools that run at once in one run context are those of one model response, of one agent."""
        self.ran: dict[tuple[int, type[Tool]], str] = {}
        """By run context id and kind of shell tool: the call a shell executor answered, until
        ``on_tool_end`` publishes the output the model reads (its hook is told no call id)."""
        self.started: set[str] = set()
        """The calls of tools decided where they run (a ``CustomTool``, a function tool made
        during the run) that ``on_tool_start`` saw start: those of this run, not of a run
        without the guard's hooks that one of its tools started."""


async def _guardrail(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    active = _active.get()
    if active is None:
        return ToolGuardrailFunctionOutput.allow()
    guard, run = active
    context = data.context
    args = parse_args(context.tool_arguments)
    link, decision = await guard._decide(data.agent, context.tool_call_id, context.tool_name, args, run)
    if decision.allowed:
        _calling.set(link)  # the SDK runs the tool next, in this task: a run it starts is a subagent of this agent
        return ToolGuardrailFunctionOutput.allow()
    return ToolGuardrailFunctionOutput.reject_content(decision.reason or "", output_info=decision.by)


TOOL_GUARDRAIL: ToolInputGuardrail[Any] = ToolInputGuardrail(guardrail_function=_guardrail, name="repeat-tool-guard")
"""The guardrail ``guard_tools`` adds; it acts only inside ``RepeatToolGuard.run``."""


def guard_tools(*agents: Agent[Any]) -> None:
    """Add ``TOOL_GUARDRAIL`` to every function tool of ``agents`` and of the
    agents they hand off to, and have the guard decide each call of the tools
    the SDK runs here without guardrails (``_guard_tool``); once (shared tools
    are fine). Each tool answers the guard with its own exception when it raises one."""
    seen: set[int] = set()
    pending = list(agents)
    while pending:
        agent = pending.pop()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        for tool in agent.tools:
            if isinstance(tool, FunctionTool):
                guardrails = list(tool.tool_input_guardrails or [])
                if not guardrails or guardrails[-1] is not TOOL_GUARDRAIL:  # last, after any added since
                    tool.tool_input_guardrails = [*(g for g in guardrails if g is not TOOL_GUARDRAIL), TOOL_GUARDRAIL]
            _guard_tool(tool)
        for handoff in agent.handoffs:
            target = handoff if isinstance(handoff, Agent) else _handoff_agent(handoff)
            if target is not None:
                pending.append(target)


_GUARDED = "__repeat_tool_guard__"
"""Marks what runs a tool (its ``on_invoke_tool``, its executor) once ``_guard_tool`` wrapped it."""


def _guard_tool(tool: Tool) -> None:
    """Wrap what runs ``tool`` here so that the guard decides each call before
    it runs, and a tool that raises answers its call with its own exception
    (once): a function tool's or ``CustomTool``'s ``on_invoke_tool``, a
    ``ShellTool``'s or ``LocalShellTool``'s executor, an ``ApplyPatchTool``'s
    editor. A function tool carrying ``TOOL_GUARDRAIL`` is decided by it; a
    hosted tool (and a ``ShellTool`` without a local executor) is left as it is.
    So is what runs a function tool that asks for approval: the SDK reads
    the arguments of each call it is to approve through that very object
    (and a person approves each call); one declared on the agent still has
    the guardrail."""
    if isinstance(tool, FunctionTool | CustomTool):
        approved = isinstance(tool, FunctionTool) and tool.needs_approval is not False
        if not approved and not getattr(tool.on_invoke_tool, _GUARDED, False):
            tool.on_invoke_tool = _invoking(tool, tool.on_invoke_tool)
    elif isinstance(tool, ShellTool):
        if tool.executor is not None and not getattr(tool.executor, _GUARDED, False):
            tool.executor = _executing(ShellTool, tool.name, tool.executor, _shell_arguments)
    elif isinstance(tool, LocalShellTool):
        if not getattr(tool.executor, _GUARDED, False):
            tool.executor = _executing(
                LocalShellTool, tool.name, tool.executor, lambda action: action.model_dump(exclude_none=True)
            )
    elif isinstance(tool, ApplyPatchTool) and not isinstance(tool.editor, _GuardedEditor):
        tool.editor = _GuardedEditor(tool.name, tool.editor)


def _invoking(tool: FunctionTool | CustomTool, invoke: Callable[[ToolContext[Any], str], Any]) -> Any:
    """``invoke`` (``tool.on_invoke_tool``) decided by the guard: a function
    tool's arguments are JSON, a ``CustomTool``'s its raw text input. A call
    the tool's guardrail decided is not decided again: a tool of the agents
    ``guard_tools`` reached has it, one the SDK added during the run does not.
    A tool that raises answers its call: the SDK ends the run with a function
    tool's exception (``failure_error_function=None``) and cancels the tool's
    siblings, whose calls the run then answers ``CANCELLED``."""

    async def on_invoke_tool(context: ToolContext[Any], arguments: str) -> Any:
        call_id = context.tool_call_id
        if _has_guardrail(tool):
            return await _running(_calling.get(), call_id, lambda: invoke(context, arguments))
        active = _active.get()
        if active is None or call_id not in active[1].started:  # a run without the guard's hooks started it
            return await _running(None, call_id, lambda: invoke(context, arguments))
        active[1].started.discard(call_id)
        args = parse_args(arguments) if isinstance(tool, FunctionTool) else arguments
        decided = await _decided(context.agent, call_id, context.tool_name, args)
        if decided is not None and not decided[2].allowed:
            return decided[2].reason or ""
        return await _running(decided[1] if decided else None, call_id, lambda: invoke(context, arguments))

    setattr(on_invoke_tool, _GUARDED, True)
    return on_invoke_tool


def _has_guardrail(tool: FunctionTool | CustomTool) -> bool:
    """Whether ``TOOL_GUARDRAIL`` decides ``tool``'s calls, before they run."""
    return isinstance(tool, FunctionTool) and TOOL_GUARDRAIL in (tool.tool_input_guardrails or [])


def _decides_itself(tool: FunctionTool | CustomTool) -> bool:
    """Whether ``tool``'s own ``on_invoke_tool`` decides its calls: wrapped
    (not one asking approval) and without the guardrail."""
    return getattr(tool.on_invoke_tool, _GUARDED, False) and not _has_guardrail(tool)


def _executing(
    kind: type[Tool], name: str, execute: Callable[[Any], Any], arguments: Callable[[Any], dict[str, Any]]
) -> Callable[[Any], Awaitable[Any]]:
    """A shell executor (a ``ShellTool``'s or ``LocalShellTool``'s, ``kind``,
    named ``name``) decided by the guard: its arguments are the model's action read with
    ``arguments``; a deny is what the model reads as the command's output (a
    ``ShellTool``'s on stderr, with exit code 1). The output is published by
    ``on_tool_end``, as the SDK renders it."""

    async def executor(request: Any) -> Any:
        call_id = request.data.call_id
        decided = await _decided(_working_in(request.ctx_wrapper), call_id, name, arguments(request.data.action))
        if decided is None:
            return await _running(None, call_id, lambda: execute(request))
        run, link, decision = decided
        if not decision.allowed:
            if kind is ShellTool:
                failed = ShellCallOutcome(type="exit", exit_code=1)
                return ShellResult(output=[ShellCommandOutput(stderr=decision.reason or "", outcome=failed)])
            return decision.reason or ""
        output = await _running(link, call_id, lambda: execute(request))
        run.ran[(id(request.ctx_wrapper), kind)] = call_id
        return output

    setattr(executor, _GUARDED, True)
    return executor


class _GuardedEditor:
    """An ``ApplyPatchTool``'s editor whose every operation the guard decides
    before it runs: the SDK tells the editor no call id, so each operation is
    one call under an id of the guard's (``apply_patch-<n>``), its arguments
    the operation (type, path, diff), its result what the editor answered (an
    error when its status is ``failed``). A deny is a ``failed`` result whose
    output is the denial, which the model reads. Any other attribute is the
    wrapped editor's (an application, or a tool's ``custom_data_extractor``,
    reads its own editor through the tool)."""

    def __init__(self, name: str, editor: Any) -> None:
        self._name = name
        self._editor = editor
        self._numbers = count(1)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._editor, name)

    def create_file(self, operation: Any) -> Awaitable[Any]:
        return self._edit(self._editor.create_file, operation)

    def update_file(self, operation: Any) -> Awaitable[Any]:
        return self._edit(self._editor.update_file, operation)

    def delete_file(self, operation: Any) -> Awaitable[Any]:
        return self._edit(self._editor.delete_file, operation)

    async def _edit(self, edit: Callable[[Any], Any], operation: Any) -> Any:
        call_id = f"{self._name}-{next(self._numbers)}"
        decided = await _decided(_working_in(operation.ctx_wrapper), call_id, self._name, _fields_set(operation))
        if decided is None:
            return await _running(None, call_id, lambda: edit(operation))
        _, link, decision = decided
        if not decision.allowed:
            return ApplyPatchResult(status="failed", output=decision.reason or "")
        result = await _running(link, call_id, lambda: edit(operation))
        if isinstance(result, ApplyPatchResult):
            await link.result(call_id, result.output or "", is_error=result.status == "failed")
        else:
            await link.result(call_id, "" if result is None else as_text(result))
        return result


def _shell_arguments(action: Any) -> dict[str, Any]:
    """A ``ShellTool`` call's arguments: its commands as one script, a line
    each, under ``command`` (where the policies read a shell call's command:
    a write is progress, a poll is told from a loop), and its limits when set."""
    limits = _fields_set(action)
    return {"command": "\n".join(limits.pop("commands")), **limits}


def _fields_set(action: Any) -> dict[str, Any]:
    """The fields of ``action`` (a dataclass the SDK hands a tool) that are set, but its run context."""
    values = {field.name: getattr(action, field.name) for field in fields(action) if field.name != "ctx_wrapper"}
    return {name: value for name, value in values.items() if value is not None}


def _working_in(context: object) -> Agent[Any] | None:
    """The agent whose tool starts in the run context ``context``, as
    ``on_tool_start`` saw it: a shell executor or an editor is told the run's
    context, not the agent (nor is an agent named by it: the run context of an
    agent used as a tool is a ``ToolContext`` naming the agent calling it)."""
    active = _active.get()
    working = active[1].working.get(id(context)) if active is not None else None
    return working[1] if working is not None else None


async def _decided(agent: object, call_id: str, tool: str, args: Any) -> tuple[_Run, AgentLink, Decision] | None:
    """The guard's decision on ``agent``'s call of a tool the SDK runs here, by
    the guard of the run going on; ``None`` outside a guarded run, or where the
    agent is not known (a run without the guard's hooks)."""
    active = _active.get()
    if active is None or not isinstance(agent, Agent):
        return None
    guard, run = active
    link, decision = await guard._decide(agent, call_id, tool, args, run)
    return run, link, decision


async def _running(link: AgentLink | None, call_id: str, run: Callable[[], Any]) -> Any:
    """What ``run()`` returns (awaited, if it is awaitable), as the call
    ``call_id`` of the agent ``link`` allowed: a run the tool starts is a
    subagent of it, and the exception the tool raises answers the call."""
    token = _calling.set(link)
    try:
        output = run()
        return await output if inspect.isawaitable(output) else output
    except Exception as exc:
        if _active.get() is not None and link is not None and link.has_call(call_id):
            await link.failed(call_id, exc)
        raise
    finally:
        _calling.reset(token)


def _handoff_agent(handoff: Any) -> Agent[Any] | None:
    """The agent a ``handoff(agent, ...)`` object hands off to: the SDK keeps
    a weak reference to it (``_agent_ref``) and names it nowhere public."""
    reference = getattr(handoff, "_agent_ref", None)
    target = reference() if callable(reference) else None
    return target if isinstance(target, Agent) else None


class RepeatToolGuard(RunHooks[Any]):
    """One conversation's guard: each SDK ``Agent`` object seen in it is one
    live agent, kept across ``run`` calls; beyond ``max_sessions`` (or ``max_agents``) the least
    recently active one is disposed (and the guard lets go of the object).
    A run started while another run of the guard goes on (runs in parallel)
    shares nothing with it: its agents are its own, disposed when it ends.
    A handoff target is a child of the agent that handed off; an agent first
    seen while another runs a tool (an agent used as a tool, see ``as_tool``)
    is a child of that agent. Each user turn (a ``run`` whose input ends
    with a user message) reaches every agent that works in it: the entry
    agent, and a handoff target when it takes over. Your own ``hooks=`` run
    after the guard's."""

    def __init__(
        self,
        link: GuardLink | None = None,
        *,
        config: Config | None = None,
        max_sessions: int = 256,
        max_agents: int | None = None,
    ) -> None:
        bound = max_agents if max_agents is not None else max_sessions  # max_agents: this runtime's word for it
        self._agents: LiveTable[int, tuple[Agent[Any], AgentLink]] = LiveTable(bound)
        self.link = adapter_link(link, config, "openai-agents")
        self._turns = UserTurns()
        self._going: list[_Run] = []
        self._parallel = 0

    def agent_link(self, agent: Agent[Any]) -> AgentLink | None:
        scoped = _scope.get()
        if scoped is not None and id(agent) in scoped.links:
            return scoped.links[id(agent)]
        entry = self._agents.peek(id(agent))
        return entry[1] if entry is not None else None

    async def _link_for(self, agent: Agent[Any], parent: AgentLink | None = None) -> AgentLink:
        scoped = _scope.get()
        if scoped is not None:
            link = scoped.links.get(id(agent))
            if link is None:
                name = (agent.name or "agent") + scoped.suffix
                link = scoped.links[id(agent)] = self.link.agent(name, parent=parent or self._busy())
                await link.start()
            return link
        entry = self._agents.get(id(agent))
        if entry is not None:
            return entry[1]
        link = self.link.agent(agent.name or "agent", parent=parent or self._busy())
        evicted = self._agents.add(id(agent), (agent, link))
        await link.start()
        for _, oldest in evicted:
            await oldest.dispose()
        return link

    def _busy(self) -> AgentLink | None:
        """The agent whose tool runs here, in this task (the parent of an agent first seen in it), if any."""
        return _calling.get()

    def _turns_here(self) -> UserTurns | None:
        """The user turns of the run going on here (``None`` inside an agent used as a tool)."""
        scoped = _scope.get()
        return self._turns if scoped is None else scoped.turns

    async def _start(self) -> _Run:
        """A run begins: agents of its own if another one still goes on."""
        for ended in [run for run in self._going if run.streamed is not None and run.streamed.is_complete]:
            await self._end(ended)
        scope = None
        if self._going:
            self._parallel += 1
            scope = _Scope(UserTurns(), f"/run-{self._parallel}")
        run = _Run(scope)
        self._going.append(run)
        return run

    async def _end(self, run: _Run) -> None:
        if run in self._going:
            self._going.remove(run)
            if run.scope is not None:
                await run.scope.dispose()

    def run_config(self, base: RunConfig | None = None) -> RunConfig:
        """``base`` (or a default ``RunConfig``) with the guard's model input filter,
        run after any filter ``base`` already has."""
        base = base if base is not None else RunConfig()
        inner = base.call_model_input_filter

        async def model_input_filter(data: CallModelData[Any]) -> ModelInputData:
            if inner is not None:
                result = inner(data)
                data = replace(data, model_data=await result if not isinstance(result, ModelInputData) else result)
            return self._filter(data)

        return replace(base, call_model_input_filter=model_input_filter)

    async def run(self, agent: Agent[Any], input: Any, **kwargs: Any) -> RunResult:
        """``Runner.run`` with the guard: a string input, or a list that ends
        with a user item, is a new user turn. Other arguments go to
        ``Runner.run`` (``hooks`` and ``run_config`` composed with the guard's)."""
        run = await self._start()
        token = _active.set((self, run))
        own = _scope.set(run.scope) if run.scope is not None else None
        try:
            await self._begin(agent, input)
            result = await Runner.run(agent, input, **self._guarded(kwargs))
            await _answer_unanswered(run.allowed, result)
            return result
        except BaseException:
            await _answer_unanswered(run.allowed)
            raise
        finally:
            if own is not None:
                _scope.reset(own)
            _active.reset(token)
            await self._end(run)

    async def run_streamed(self, agent: Agent[Any], input: Any, **kwargs: Any) -> RunResultStreaming:
        """``Runner.run_streamed`` with the guard, as ``run``; awaited (the user
        turn is published first), then consumed as usual with ``stream_events()``.
        A halt request raises ``HaltRequested`` from the stream."""
        run = await self._start()
        token = _active.set((self, run))
        own = _scope.set(run.scope) if run.scope is not None else None
        try:
            await self._begin(agent, input)
            result = Runner.run_streamed(agent, input, **self._guarded(kwargs))  # its task copies both
        except BaseException:
            await self._end(run)
            raise
        finally:
            if own is not None:
                _scope.reset(own)
            _active.reset(token)
        run.streamed = result
        stream = result.stream_events

        async def stream_events() -> AsyncIterator[StreamEvent]:
            try:
                async for event in stream():
                    yield event
            except Exception:  # the run failed; a reader that stops or is cancelled may leave it going on
                await _answer_unanswered(run.allowed)
                raise
            else:
                await _answer_unanswered(run.allowed, result)
            finally:
                if result.is_complete:  # else the next run to start ends it, once it is complete
                    await self._end(run)

        result.stream_events = stream_events  # type: ignore[method-assign]
        return result

    async def _begin(self, agent: Agent[Any], input: Any) -> None:
        guard_tools(agent)
        link = await self._link_for(agent)
        text = _user_text(input)
        turns = self._turns_here()
        if text is not None and turns is not None:
            await turns.begin(text, link)

    def _guarded(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` with the guard's hooks (then the caller's) and model input filter."""
        hooks = kwargs.pop("hooks", None)
        run_config = self.run_config(kwargs.pop("run_config", None))
        return {**kwargs, "hooks": self if hooks is None else _ChainedHooks(self, hooks), "run_config": run_config}

    def as_tool(self, agent: Agent[Any], **kwargs: Any) -> FunctionTool:
        """``agent.as_tool(...)`` whose inner runs are guarded too: each
        invocation is a subagent of its own (of the agent calling the tool),
        disposed when it returns, so invocations in parallel or in later
        turns share no repeats and no halt."""
        guard_tools(agent)
        tool = agent.as_tool(**self._guarded(kwargs))
        invoke = tool.on_invoke_tool

        async def on_invoke_tool(context: ToolContext[Any], arguments: str) -> Any:
            scope = _Scope(None)
            token = _scope.set(scope)
            try:
                return await invoke(context, arguments)
            finally:
                _scope.reset(token)
                await scope.dispose()

        tool.on_invoke_tool = on_invoke_tool
        return tool

    async def _decide(
        self, agent: Agent[Any], call_id: str, tool: str, args: Any, run: _Run
    ) -> tuple[AgentLink, Decision]:
        """Publish the call of ``agent`` and return the guard's decision on it,
        the one way every seam decides a call: one allowed joins the calls
        ``run`` allowed, one denied is answered with the denial."""
        link = await self._link_for(agent)
        decision = await link.call(call_id, tool, args)
        if decision.allowed:
            run.allowed.append((link, call_id))
        else:
            await link.denied(call_id, decision)
        return link, decision

    def _filter(self, data: CallModelData[Any]) -> ModelInputData:
        link = self.agent_link(data.agent)
        if link is None:
            return data.model_data
        if link.halt_reason is not None:
            raise HaltRequested(link.agent.id, link.halt_reason)
        texts = link.take_context()
        if not texts:
            return data.model_data
        notes = [EasyInputMessageParam(role="developer", content=text) for text in texts]
        return replace(data.model_data, input=[*data.model_data.input, *notes])

    async def on_llm_start(
        self, context: RunContextWrapper[Any], agent: Agent[Any], system_prompt: str | None, input_items: Any
    ) -> None:
        (await self._link_for(agent)).begin_step()

    async def on_handoff(self, context: RunContextWrapper[Any], from_agent: Agent[Any], to_agent: Agent[Any]) -> None:
        target = await self._link_for(to_agent, parent=await self._link_for(from_agent))
        turns = self._turns_here()
        if turns is not None:  # inside an agent used as a tool, the task comes from its caller, not the user
            await turns.reach(target)

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool) -> None:
        active = _active.get()
        if active is None:
            return
        # a tool the SDK made during the run (a sandbox's, an MCP server's): the SDK reads what runs it after this hook
        _guard_tool(tool)
        if not isinstance(tool, FunctionTool | CustomTool):  # told the run's context, not the call's
            active[1].working[id(context)] = (context, agent)
        elif _decides_itself(tool):  # starts in its call's own context
            active[1].started.add(getattr(context, "tool_call_id", ""))

    async def on_tool_end(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object) -> None:
        link = self.agent_link(agent)
        active = _active.get()
        call_id = None
        if isinstance(tool, FunctionTool | CustomTool) and isinstance(context, ToolContext):
            call_id = context.tool_call_id
            if active is not None:  # one its wrapper never ran for (a failure before it) is forgotten too
                active[1].started.discard(call_id)
        elif isinstance(tool, ShellTool | LocalShellTool) and active is not None:  # told the run's context
            kind = ShellTool if isinstance(tool, ShellTool) else LocalShellTool
            call_id = active[1].ran.pop((id(context), kind), None)  # the call its executor answered last there
        if link is not None and call_id is not None and link.has_call(call_id):
            # a tool that raised or timed out answers the SDK's own text for it: a failure, which may be retried
            failed = isinstance(result, str) and (result.startswith(_SDK_FAILURE) or _timed_out(tool, result))
            await link.result(call_id, as_text(result), is_error=failed)


def _timed_out(tool: Tool, result: str) -> bool:
    """Whether ``result`` is the SDK's own answer for ``tool`` timing out
    (``timeout_seconds``, ``timeout_behavior="error_as_result"``)."""
    seconds = tool.timeout_seconds if isinstance(tool, FunctionTool) else None
    return seconds is not None and result == default_tool_timeout_error_message(
        tool_name=tool.name, timeout_seconds=seconds
    )


async def _answer_unanswered(allowed: _Allowed, ended: RunResult | RunResultStreaming | None = None) -> None:
    """Answer each call a run allowed and ended before answering: ``CANCELLED``
    (``AgentLink.cancelled``) where the run failed or was cancelled (a tool
    that raised was answered with its own exception as it raised,
    ``guard_tools``: a call still open was stopped). A run that ``ended`` on
    its own with a call still open never ran its tool (a tool input
    guardrail after the guard's rejected it): the call is answered with what
    the model read for it, a failure. A run that stopped for approvals may
    run its calls when it resumes: they stay open."""
    read: dict[str | None, Any] = {}
    if ended is not None:
        if ended.interruptions:
            return
        read = {item.call_id: item.output for item in ended.new_items if isinstance(item, ToolCallOutputItem)}
    for link, call_id in allowed:
        if link.has_call(call_id):
            if call_id in read:
                await link.result(call_id, as_text(read[call_id]), is_error=True)
            else:
                await link.cancelled(call_id)


class _ChainedHooks(RunHooks[Any]):
    """Run hooks that call each of ``hooks`` in turn (the guard's first)."""

    def __init__(self, *hooks: RunHooks[Any]) -> None:
        self._hooks = hooks

    async def on_llm_start(self, *args: Any, **kwargs: Any) -> None:
        for hooks in self._hooks:
            await hooks.on_llm_start(*args, **kwargs)

    async def on_llm_end(self, *args: Any, **kwargs: Any) -> None:
        for hooks in self._hooks:
            await hooks.on_llm_end(*args, **kwargs)

    async def on_agent_start(self, *args: Any, **kwargs: Any) -> None:
        for hooks in self._hooks:
            await hooks.on_agent_start(*args, **kwargs)

    async def on_agent_end(self, *args: Any, **kwargs: Any) -> None:
        for hooks in self._hooks:
            await hooks.on_agent_end(*args, **kwargs)

    async def on_handoff(self, *args: Any, **kwargs: Any) -> None:
        for hooks in self._hooks:
            await hooks.on_handoff(*args, **kwargs)

    async def on_tool_start(self, *args: Any, **kwargs: Any) -> None:
        for hooks in self._hooks:
            await hooks.on_tool_start(*args, **kwargs)

    async def on_tool_end(self, *args: Any, **kwargs: Any) -> None:
        for hooks in self._hooks:
            await hooks.on_tool_end(*args, **kwargs)


def _user_text(input: Any) -> str | None:
    """The user's message a run's ``input`` ends with; ``None`` for input that
    brings none (a ``RunState`` resuming an approval, tool outputs)."""
    if isinstance(input, str):
        return input
    if not isinstance(input, list):
        return None
    last = input[-1] if input else None
    if isinstance(last, dict) and last.get("role") == "user":
        return as_text(last.get("content"))
    return None
