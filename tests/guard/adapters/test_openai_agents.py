"""OpenAI Agents SDK: the real ``Runner`` loop with the SDK's own ``ScriptedModel``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Iterator
from itertools import count
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import pytest

pytest.importorskip("agents", reason="openai-agents is not installed: pip install 'repeat-tool-guard[openai-agents]'")

from agents import (
    Agent,
    ApplyPatchOperation,
    ApplyPatchResult,
    ApplyPatchTool,
    CustomTool,
    FunctionTool,
    LocalShellTool,
    RunConfig,
    RunHooks,
    Runner,
    ShellCommandRequest,
    ShellTool,
    Tool,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    WebSearchTool,
    function_tool,
    set_tracing_disabled,
)
from agents.exceptions import ToolTimeoutError
from agents.run_config import CallModelData, ModelInputData
from agents.testing.model import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext
from openai.types.responses import ResponseApplyPatchToolCall, ResponseCustomToolCall, ResponseFunctionShellToolCall
from openai.types.responses.response_function_shell_tool_call import Action
from openai.types.responses.response_output_item import LocalShellCall, LocalShellCallAction

from bus import AgentStatus, ContextMessage, ToolCall, ToolResult, UserMessage
from bus.testing import Capture
from guard import GENTLE_REMINDER, TURNS_ADVISORY, TURNS_HALT_REASON
from guard.adapters import CANCELLED, GuardLink, HaltRequested
from guard.adapters.openai_agents import TOOL_GUARDRAIL, RepeatToolGuard, guard_tools
from guard.policies.rescue import advice_in
from tests.guard.adapters.conftest import ADVICE, GUARD_SAID, RESCUE_DENIED, TURNS_DENIED

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # The Agents SDK runs on asyncio only.


@pytest.fixture(autouse=True)
def no_trace_export() -> Iterator[None]:
    """Offline: the SDK would try to export traces to OpenAI."""
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


def _texts(call: ModelCall) -> list[str]:
    items = call.input if isinstance(call.input, list) else [call.input]
    return [json.dumps(item, default=str) if not isinstance(item, str) else item for item in items]


def looping(
    calls: list[ModelCall],
    *,
    per_turn: int | None = None,
    tool: str = "grep",
    until: tuple[str, ...] = GUARD_SAID,
    copies: int = 1,
) -> ScriptedModel:
    """Calls ``tool(pattern="load_config")`` (``copies`` times in parallel)
    until its input carries one of the phrases ``until`` (by default anything
    the guard says; ``()`` never gives up), or ``per_turn`` calls since the
    latest user item, then answers."""
    counter = Counter[str]()

    def respond(call: ModelCall) -> Any:
        calls.append(call)
        text = "\n".join(_texts(call))
        if any(phrase in text for phrase in until):
            return [assistant_message("I will stop repeating myself.")]
        items = call.input if isinstance(call.input, list) else []
        last_user = max((i for i, item in enumerate(items) if isinstance(item, dict) and item.get("role") == "user"))
        since = sum(1 for item in items[last_user:] if isinstance(item, dict) and item.get("type") == "function_call")
        if per_turn is not None and since >= per_turn:
            return [assistant_message("enough for this turn")]
        response = []
        for _ in range(copies):
            counter["n"] += 1
            response.append(function_call(tool, {"pattern": "load_config"}, call_id=f"{tool}-{counter['n']}"))
        return response

    return ScriptedModel([ModelStep.respond(respond)] * 50)


def outputs(call: ModelCall) -> list[str]:
    """The tool outputs in a model call's input, oldest first."""
    items = call.input if isinstance(call.input, list) else []
    return [item["output"] for item in items if isinstance(item, dict) and item.get("type") == "function_call_output"]


def developer_notes(call: ModelCall) -> list[str]:
    items = call.input if isinstance(call.input, list) else []
    return [item["content"] for item in items if isinstance(item, dict) and item.get("role") == "developer"]


def grep_agent(model: ScriptedModel, runs: list[str], name: str = "main") -> Agent[Any]:
    @function_tool
    def grep(pattern: str) -> str:
        """Search the code."""
        runs.append(pattern)
        return "src/cfg.py:12: def load_config():"

    return Agent(name=name, model=model, tools=[grep])


async def test_reminder_is_a_developer_message_in_the_next_model_input(link: GuardLink, events: Capture) -> None:
    calls: list[ModelCall] = []
    runs: list[str] = []
    result = await RepeatToolGuard(link).run(grep_agent(looping(calls), runs), "find the config loader")

    assert result.final_output == "I will stop repeating myself."
    assert len(runs) == 3
    fourth = calls[3].input
    assert fourth[-1] == {"role": "developer", "content": GENTLE_REMINDER}
    assert fourth[-2]["type"] == "function_call_output"
    assert fourth[-2]["output"] == "src/cfg.py:12: def load_config():", "the tool output is not rewritten"
    assert all("developer" not in json.dumps(c.input) for c in calls[:3])
    assert [c.step for c in events.of(ToolCall)] == [1, 2, 3]
    assert [e.text for e in events.of(UserMessage)] == ["find the config loader"]


async def test_reminder_is_in_the_next_model_input_only_not_in_the_run_items(link: GuardLink) -> None:
    calls: list[ModelCall] = []
    agent = grep_agent(looping(calls, per_turn=5, until=()), [])
    result = await RepeatToolGuard(link).run(agent, "find the config loader")

    assert [len(developer_notes(c)) for c in calls] == [0, 0, 0, 1, 0, 0], "shown once, in the 4th model call"
    assert "developer" not in json.dumps(result.to_input_list())


async def test_a_tool_that_raises_is_published_as_the_failure_text_the_model_reads(
    link: GuardLink, events: Capture
) -> None:
    @function_tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    calls: list[ModelCall] = []

    def respond(call: ModelCall) -> Any:
        calls.append(call)
        return [assistant_message("gave up")] if len(calls) > 1 else [function_call("broken", {}, call_id="b1")]

    model = ScriptedModel([ModelStep.respond(respond)] * 2)
    await RepeatToolGuard(link).run(Agent(name="main", model=model, tools=[broken]), "go")
    (result,) = events.of(ToolResult)
    assert outputs(calls[1]) == [result.content]
    assert result.is_error is True, "the SDK's own failure text: a failure, retried as one"


async def test_a_tool_that_raises_without_a_failure_function_ends_the_run_with_its_call_answered(
    link: GuardLink, events: Capture
) -> None:
    """With ``failure_error_function=None`` the SDK ends the run with the
    tool's exception and calls no ``on_tool_end``: the call is still answered."""

    @function_tool(failure_error_function=None)
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    model = ScriptedModel([[function_call("broken", {}, call_id="b1")]])
    with pytest.raises(Exception, match="disk on fire"):
        await RepeatToolGuard(link).run(Agent(name="main", model=model, tools=[broken]), "go")
    (result,) = events.of(ToolResult)
    assert (result.call_id, result.is_error) == ("b1", True)
    assert "disk on fire" in result.content
    assert [agent.open_calls() for agent in link.links()] == [0]


async def test_a_sibling_cancelled_because_a_tool_raised_is_answered_as_cancelled(
    link: GuardLink, events: Capture
) -> None:
    """The SDK cancels a call's siblings when its tool raises (with
    ``failure_error_function=None``): the raising call is answered with its
    own exception, each sibling ``CANCELLED``, not with another tool's error."""
    stopped: list[str] = []

    @function_tool(failure_error_function=None)
    async def broken() -> str:
        """Fails."""
        await asyncio.sleep(0.05)
        raise RuntimeError("disk on fire")

    @function_tool
    async def slow() -> str:
        """Takes its time."""
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            stopped.append("slow")
            raise
        return "slow done"

    model = ScriptedModel([[function_call("broken", {}, call_id="b1"), function_call("slow", {}, call_id="s1")]])
    with pytest.raises(Exception, match="disk on fire"):
        await RepeatToolGuard(link).run(Agent(name="main", model=model, tools=[broken, slow]), "go")
    assert stopped == ["slow"]
    answered = {r.call_id: (r.is_error, r.content) for r in events.of(ToolResult)}
    assert answered == {"b1": (True, "disk on fire"), "s1": (True, CANCELLED)}


async def test_a_run_cancelled_while_its_tool_runs_answers_the_call_as_cancelled(
    link: GuardLink, events: Capture
) -> None:
    started = asyncio.Event()

    @function_tool
    async def slow(seconds: int) -> str:
        """Takes its time."""
        if seconds:
            started.set()
            await asyncio.sleep(seconds)
        return "done"

    model = ScriptedModel(
        [[function_call("slow", {"seconds": 0}, call_id="s1")], [function_call("slow", {"seconds": 30}, call_id="s2")]]
    )
    run = asyncio.create_task(RepeatToolGuard(link).run(Agent(name="main", model=model, tools=[slow]), "go"))
    await asyncio.wait_for(started.wait(), 10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    answered = [(r.call_id, r.is_error, r.content) for r in events.of(ToolResult)]
    assert answered == [("s1", False, "done"), ("s2", True, CANCELLED)], "the answered call is not answered again"


def _deploying_until_deployed() -> ScriptedModel:
    """Calls ``deploy`` (a new call id each time) until its latest output is ``deployed``, then answers."""

    def respond(call: ModelCall) -> Any:
        done = outputs(call)
        if done and done[-1] == "deployed":
            return [assistant_message("done")]
        return [function_call("deploy", {}, call_id=f"d{len(done)}")]

    return ScriptedModel([ModelStep.respond(respond)] * 6)


async def test_a_tool_failing_then_working_is_retried_not_denied() -> None:
    """Two failures answered with the SDK's one failure text, then success:
    the same result twice is a failure retried, not a repeat denied."""
    from guard import RECOMMENDED

    attempts: list[int] = []

    @function_tool
    def deploy() -> str:
        """Deploy; the network drops twice."""
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionResetError("Connection reset by peer")
        return "deployed"

    guard = RepeatToolGuard(GuardLink(config=RECOMMENDED))
    agent = Agent(name="main", model=_deploying_until_deployed(), tools=[deploy])
    assert (await guard.run(agent, "deploy it")).final_output == "done"
    assert len(attempts) == 3


async def test_a_tool_timing_out_then_working_is_retried_not_denied() -> None:
    """The SDK answers a tool past its ``timeout_seconds`` with its own text
    (``timeout_behavior="error_as_result"``): a failure, retried as one."""
    from guard import RECOMMENDED

    attempts: list[int] = []

    @function_tool(timeout=0.05)
    async def deploy() -> str:
        """Deploy; the first two attempts hang."""
        attempts.append(1)
        if len(attempts) < 3:
            await asyncio.sleep(10)
        return "deployed"

    link = GuardLink(config=RECOMMENDED)
    events = Capture().attach(link.bus)
    agent = Agent(name="main", model=_deploying_until_deployed(), tools=[deploy])
    assert (await RepeatToolGuard(link).run(agent, "go")).final_output == "done"
    answered = [(r.is_error, r.denied_by, r.content) for r in events.of(ToolResult)]
    timed_out = (True, None, "Tool 'deploy' timed out after 0.05 seconds.")
    assert answered == [timed_out, timed_out, (False, None, "deployed")]


async def test_failure_texts_of_the_callers_own_are_outputs_and_a_raised_timeout_is_cancelled(
    link: GuardLink, events: Capture
) -> None:
    """A ``failure_error_function`` or ``timeout_error_function`` of the
    caller's answers text the guard cannot tell from an output;
    ``timeout_behavior="raise_exception"`` ends the run, and the call it
    stopped is answered ``CANCELLED``."""

    async def hang() -> str:
        await asyncio.sleep(10)
        return "deployed"

    def broken() -> str:
        raise RuntimeError("disk on fire")

    failing = function_tool(broken, name_override="deploy", failure_error_function=lambda *_: "sorry")
    slow = function_tool(hang, name_override="deploy", timeout=0.05, timeout_error_function=lambda *_: "slow")
    raising = function_tool(hang, name_override="deploy", timeout=0.05, timeout_behavior="raise_exception")
    guard = RepeatToolGuard(link)
    for n, tool in enumerate((failing, slow)):
        model = ScriptedModel([[function_call("deploy", {}, call_id=f"d{n}")], [assistant_message("done")]])
        assert (await guard.run(Agent(name=f"a{n}", model=model, tools=[tool]), "go")).final_output == "done"
    model = ScriptedModel([[function_call("deploy", {}, call_id="d2")]])
    with pytest.raises(ToolTimeoutError):
        await guard.run(Agent(name="b", model=model, tools=[raising]), "go")
    answered = [(r.call_id, r.is_error, r.content) for r in events.of(ToolResult)]
    assert answered == [("d0", False, "sorry"), ("d1", False, "slow"), ("d2", True, CANCELLED)]


async def test_rescue_denies_the_third_call_before_it_runs_and_the_model_reads_why(rescue_link: GuardLink) -> None:
    events = Capture().attach(rescue_link.bus)
    calls: list[ModelCall] = []
    runs: list[str] = []
    result = await RepeatToolGuard(rescue_link).run(grep_agent(looping(calls), runs), "find the config loader")

    assert len(runs) == 2, "the third grep never ran"
    (denied,) = [r for r in events.of(ToolResult) if r.denied_by]
    assert (denied.call_id, denied.denied_by, denied.is_error) == ("grep-3", "loop-rescue", True)
    assert denied.content.startswith(f"{RESCUE_DENIED}\nYou have made this exact call 3 times in your last 3")
    assert advice_in(denied.content) is None, "the ask command is missing: the free local denial"
    assert outputs(calls[3])[-1] == denied.content, "the model reads the denial as the tool output"
    assert len(events.of(ToolResult)) == 3, "the denied call's result is published once"
    assert result.final_output == "I will stop repeating myself."


async def test_rescue_escalation_brings_the_ask_commands_advice_to_the_model(
    advice_link: GuardLink, asked: Path
) -> None:
    events = Capture().attach(advice_link.bus)
    calls: list[ModelCall] = []
    runs: list[str] = []
    agent = grep_agent(looping(calls, until=(ADVICE,)), runs)
    result = await RepeatToolGuard(advice_link).run(agent, "find the config loader")

    assert runs == ["load_config"], "the 2nd call is denied, the 3rd escalated and denied with advice"
    denials = [r.content for r in events.of(ToolResult) if r.denied_by == "loop-rescue"]
    assert [advice_in(d) for d in denials] == [None, ADVICE]
    assert outputs(calls[3])[1:] == denials
    assert result.final_output == "I will stop repeating myself."
    question = asked.read_text()
    assert "## The agent's task\nfind the config loader\n" in question, "the user turn reached the guard"
    assert "src/cfg.py:12: def load_config():" in question, "so did the output the agent already had"


async def test_new_user_turn_resets_the_count(link: GuardLink, events: Capture) -> None:
    calls: list[ModelCall] = []
    runs: list[str] = []
    guard = RepeatToolGuard(link)
    agent = grep_agent(looping(calls, per_turn=2), runs)
    first = await guard.run(agent, "find the config loader")
    await guard.run(agent, [*first.to_input_list(), {"role": "user", "content": "and once more"}])

    assert len(runs) == 4
    assert all("developer" not in json.dumps(c.input) for c in calls)
    assert [e.text for e in events.of(UserMessage)] == ["find the config loader", "and once more"]
    assert [s.status for s in events.of(AgentStatus)] == ["started"]


async def test_agent_used_as_a_tool_is_an_isolated_subagent(link: GuardLink, events: Capture) -> None:
    guard = RepeatToolGuard(link)
    runs: list[str] = []
    child_calls: list[ModelCall] = []
    child = grep_agent(looping(child_calls, per_turn=2), runs, name="helper")
    script = iter(["grep", "grep", "delegate", "grep", "grep"])
    lead_calls: list[ModelCall] = []

    def lead(call: ModelCall) -> Any:
        lead_calls.append(call)
        if "repeating the exact same tool call" in json.dumps(call.input):
            return [assistant_message("lead done")]
        tool = next(script)
        args = {"pattern": "load_config"} if tool == "grep" else {"input": "look too"}
        return [function_call(tool, args, call_id=f"lead-{len(lead_calls)}")]

    @function_tool
    def grep(pattern: str) -> str:
        """Search the code."""
        runs.append(pattern)
        return "src/cfg.py:12"

    agent = Agent(
        name="lead",
        model=ScriptedModel([ModelStep.respond(lead)] * 10),
        tools=[grep, guard.as_tool(child, tool_name="delegate", tool_description="Ask the helper.")],
    )
    result = await guard.run(agent, "find the config loader")

    assert result.final_output == "lead done"
    assert all("developer" not in json.dumps(c.input) for c in child_calls)
    assert sum("developer" in json.dumps(c.input) for c in lead_calls) == 1
    started = {s.agent.id: s.parent for s in events.of(AgentStatus) if s.agent and s.status == "started"}
    assert started == {"lead": None, "helper": "lead"}


async def test_handoff_target_is_its_own_agent(link: GuardLink, events: Capture) -> None:
    runs: list[str] = []
    calls: list[ModelCall] = []
    specialist = grep_agent(looping(calls, per_turn=2), runs, name="specialist")
    triage = Agent(
        name="triage",
        model=ScriptedModel([[function_call("transfer_to_specialist", {}, call_id="h1")]]),
        handoffs=[specialist],
    )
    await RepeatToolGuard(link).run(triage, "find the config loader")
    assert TOOL_GUARDRAIL in (specialist.tools[0].tool_input_guardrails or [])  # type: ignore[union-attr]
    started = {s.agent.id: s.parent for s in events.of(AgentStatus) if s.agent and s.status == "started"}
    assert started == {"triage": None, "specialist": "triage"}
    assert {c.agent.id for c in events.of(ToolCall) if c.agent} == {"specialist"}


async def test_turns_advises_then_denies_then_its_halt_request_ends_the_run(turns_link: GuardLink) -> None:
    events = Capture().attach(turns_link.bus)
    calls: list[ModelCall] = []
    runs: list[str] = []
    halt = TURNS_HALT_REASON.format(tool="grep", count=4, denials=" and 2 denied calls")
    with pytest.raises(HaltRequested) as raised:
        await RepeatToolGuard(turns_link).run(grep_agent(looping(calls, until=()), runs), "find the config loader")

    assert raised.value.reason == halt
    assert len(runs) == 2, "turns 3 and 4 were denied"
    assert [c.step for c in events.of(ToolCall)] == [1, 2, 3, 4], "one step per model call"
    assert developer_notes(calls[1]) == []
    (advisory,) = developer_notes(calls[2])
    assert advisory.startswith(TURNS_ADVISORY.split("{tool}")[0] + "grep with identical arguments in 2")
    assert outputs(calls[3])[-1].startswith(TURNS_DENIED)
    assert len(calls) == 4, "no model call after the halt request"


async def test_parallel_calls_of_one_response_are_one_turn(turns_link: GuardLink) -> None:
    events = Capture().attach(turns_link.bus)
    calls: list[ModelCall] = []
    runs: list[str] = []
    agent = grep_agent(looping(calls, until=(TURNS_DENIED,), copies=2), runs)
    await RepeatToolGuard(turns_link).run(agent, "find the config loader")

    assert [c.step for c in events.of(ToolCall)] == [1, 1, 2, 2, 3, 3]
    assert len(runs) == 4, "both copies of the 3rd response were denied"
    assert len(developer_notes(calls[2])) == 1, "the 2nd response is the 2nd turn: one advisory, not one per copy"
    assert [o.startswith(TURNS_DENIED) for o in outputs(calls[3])] == [False] * 4 + [True] * 2


async def test_guardrail_outside_a_guarded_run_allows(events: Capture) -> None:
    runs: list[str] = []
    script = [[function_call("grep", {"pattern": "x"}, call_id="c1")], [assistant_message("ok")]]
    agent = grep_agent(ScriptedModel(script), runs)
    agent.tools.append(WebSearchTool())
    guard_tools(agent, agent)
    assert getattr(agent.tools[-1], "tool_input_guardrails", None) is None, "a hosted tool gets no guardrail"
    result = await Runner.run(agent, "plain run")
    assert (result.final_output, runs, events.events) == ("ok", ["x"], [])


async def test_a_guarded_tool_raising_outside_a_guarded_run_is_left_to_the_sdk(events: Capture) -> None:
    @function_tool(failure_error_function=None)
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    agent = Agent(name="main", model=ScriptedModel([[function_call("broken", {}, call_id="b1")]]), tools=[broken])
    guard_tools(agent)
    with pytest.raises(Exception, match="disk on fire"):
        await Runner.run(agent, "plain run")
    assert events.events == []


async def test_tools_without_the_guardrail_are_not_counted(link: GuardLink, events: Capture) -> None:
    script = [[function_call("grep", {"pattern": "x"}, call_id="c1")], [assistant_message("ok")]]
    agent = grep_agent(ScriptedModel(script), [])
    await Runner.run(agent, "hooks only", hooks=RepeatToolGuard(link))
    assert events.of(ToolResult) == []


async def test_your_model_input_filter_runs_before_the_guards(link: GuardLink) -> None:
    calls: list[ModelCall] = []
    seen: list[int] = []

    async def count_items(data: CallModelData[Any]) -> ModelInputData:
        seen.append(len(data.model_data.input))
        return data.model_data

    def plain(data: CallModelData[Any]) -> ModelInputData:
        return data.model_data

    guard = RepeatToolGuard(link)
    agent = grep_agent(looping(calls), [])
    await guard.run(agent, "find it", run_config=RunConfig(call_model_input_filter=count_items))
    assert seen == [1, 3, 5, 7]
    assert calls[3].input[-1] == {"role": "developer", "content": GENTLE_REMINDER}
    more = await guard.run(
        agent, [{"role": "user", "content": "again"}], run_config=RunConfig(call_model_input_filter=plain)
    )
    assert more.final_output == "I will stop repeating myself."
    turns = Capture().attach(link.bus)
    quiet = grep_agent(ScriptedModel([[assistant_message("fine")]]), [])
    await guard.run(quiet, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    assert turns.of(UserMessage) == [], "a list that does not end with a user item is no new turn"


class RecordingHooks(RunHooks[Any]):
    """The caller's own run hooks: they must still be called under the guard."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def on_agent_start(self, context: Any, agent: Agent[Any]) -> None:
        self.seen.append(f"agent_start {agent.name}")

    async def on_llm_start(self, context: Any, agent: Agent[Any], system_prompt: Any, input_items: Any) -> None:
        self.seen.append("llm_start")

    async def on_llm_end(self, context: Any, agent: Agent[Any], response: Any) -> None:
        self.seen.append("llm_end")

    async def on_tool_start(self, context: Any, agent: Agent[Any], tool: Any) -> None:
        self.seen.append(f"tool_start {tool.name}")

    async def on_tool_end(self, context: Any, agent: Agent[Any], tool: Any, result: object) -> None:
        self.seen.append(f"tool_end {tool.name}")

    async def on_handoff(self, context: Any, from_agent: Agent[Any], to_agent: Agent[Any]) -> None:
        self.seen.append(f"handoff {from_agent.name}->{to_agent.name}")

    async def on_agent_end(self, context: Any, agent: Agent[Any], output: Any) -> None:
        self.seen.append(f"agent_end {agent.name}")


async def test_your_own_run_hooks_run_beside_the_guards(link: GuardLink, events: Capture) -> None:
    runs: list[str] = []
    calls: list[ModelCall] = []
    specialist = grep_agent(looping(calls), runs, name="specialist")
    triage = Agent(
        name="triage",
        model=ScriptedModel([[function_call("transfer_to_specialist", {}, call_id="h1")]]),
        handoffs=[specialist],
    )
    mine = RecordingHooks()
    result = await RepeatToolGuard(link).run(triage, "find the config loader", hooks=mine, max_turns=8)

    assert result.final_output == "I will stop repeating myself."
    assert mine.seen[:3] == ["agent_start triage", "llm_start", "llm_end"]
    assert "handoff triage->specialist" in mine.seen
    assert mine.seen.count("tool_end grep") == 3
    assert mine.seen[-1] == "agent_end specialist"
    assert len(events.of(ContextMessage)) == 1, "and the guard still reminded"
    assert [c.step for c in events.of(ToolCall)] == [1, 2, 3], "its own hooks numbered the steps"


async def test_run_streamed_is_guarded_and_streams_its_events(link: GuardLink, events: Capture) -> None:
    calls: list[ModelCall] = []
    runs: list[str] = []
    mine = RecordingHooks()
    streamed = await RepeatToolGuard(link).run_streamed(grep_agent(looping(calls), runs), "find it", hooks=mine)
    kinds = [event.type async for event in streamed.stream_events()]

    assert streamed.final_output == "I will stop repeating myself."
    assert "run_item_stream_event" in kinds
    assert len(runs) == 3
    assert developer_notes(calls[3]) == [GENTLE_REMINDER]
    assert [e.text for e in events.of(UserMessage)] == ["find it"]
    assert mine.seen.count("tool_end grep") == 3


async def test_a_streamed_run_ends_with_halt_requested(turns_link: GuardLink) -> None:
    calls: list[ModelCall] = []
    runs: list[str] = []
    streamed = await RepeatToolGuard(turns_link).run_streamed(grep_agent(looping(calls, until=()), runs), "find it")
    with pytest.raises(HaltRequested, match="consecutive turns"):
        async for _event in streamed.stream_events():
            pass
    assert len(runs) == 2, "turns 3 and 4 were denied"
    assert len(calls) == 4, "no model call after the halt request"


async def test_a_streamed_run_ended_by_its_tools_exception_answers_the_call(link: GuardLink, events: Capture) -> None:
    @function_tool(failure_error_function=None)
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    model = ScriptedModel([[function_call("broken", {}, call_id="b1")]])
    streamed = await RepeatToolGuard(link).run_streamed(Agent(name="main", model=model, tools=[broken]), "go")
    with pytest.raises(Exception, match="disk on fire"):
        async for _event in streamed.stream_events():
            pass
    (result,) = events.of(ToolResult)
    assert (result.call_id, result.is_error) == ("b1", True)
    assert "disk on fire" in result.content


async def test_a_reader_that_stops_reading_a_stream_leaves_the_run_its_calls(link: GuardLink, events: Capture) -> None:
    """Closing the event stream early is no end of the run: the call still
    running is answered by its own result, not as cancelled."""
    started, finish = asyncio.Event(), asyncio.Event()

    @function_tool
    async def slow() -> str:
        """Takes its time."""
        started.set()
        await finish.wait()
        return "done"

    model = ScriptedModel([[function_call("slow", {}, call_id="s1")], [assistant_message("fine")]])
    streamed = await RepeatToolGuard(link).run_streamed(Agent(name="main", model=model, tools=[slow]), "go")
    reading = streamed.stream_events()
    assert isinstance(reading, AsyncGenerator)
    while getattr(await anext(reading), "name", None) != "tool_called":
        pass
    await asyncio.wait_for(started.wait(), 10)  # the run goes on in its own task
    await reading.aclose()
    assert events.of(ToolResult) == [], "the tool still runs"
    finish.set()
    with anyio.fail_after(10):
        while not events.of(ToolResult):
            await asyncio.sleep(0.01)
    assert [(r.call_id, r.content) for r in events.of(ToolResult)] == [("s1", "done")]


def _twice_then_done(runs: list[str]) -> Agent[Any]:
    """An agent that greps (taking a moment, so runs interleave) until it
    has two results, then answers: twice per run, never a loop."""
    ids = count()

    @function_tool
    async def grep(pattern: str) -> str:
        """Search the code."""
        runs.append(pattern)
        await asyncio.sleep(0.01)
        return "src/cfg.py:12: def load_config():"

    def respond(call: ModelCall) -> Any:
        if len(outputs(call)) >= 2:
            return [assistant_message("found it")]
        return [function_call("grep", {"pattern": "load_config"}, call_id=f"g{next(ids)}")]

    return Agent(name="main", model=ScriptedModel([ModelStep.respond(respond)] * 30), tools=[grep])


def _lives(events: Capture) -> list[tuple[str, str]]:
    return [(s.agent.id, s.status) for s in events.of(AgentStatus) if s.agent]


async def test_runs_going_at_once_share_no_agent_and_a_later_run_goes_on_with_the_conversations(
    rescue_link: GuardLink,
) -> None:
    """One guard and one ``Agent`` serving two runs at once (users of a server
    that built them once, or one conversation's fan-out): each run's calls
    count apart, and the user turn of one neither resets nor ends the other.
    The run started while the other went on has agents of its own
    (``<name>/run-<n>``), disposed when it ends; a run after both goes on
    with the conversation's."""
    events = Capture().attach(rescue_link.bus)
    runs: list[str] = []
    agent = _twice_then_done(runs)
    guard = RepeatToolGuard(rescue_link)
    both = await asyncio.gather(guard.run(agent, "user A: find the loader"), guard.run(agent, "user B: find it"))
    assert [result.final_output for result in both] == ["found it"] * 2
    assert (await guard.run(agent, "and once more")).final_output == "found it"

    assert len(runs) == 6
    assert not [r for r in events.of(ToolResult) if r.denied_by], "the 2nd call of each run is its 2nd, not its 4th"
    said = [(m.agent.id if m.agent else "", m.text) for m in events.of(UserMessage)]
    assert said == [("main", "user A: find the loader"), ("main/run-1", "user B: find it"), ("main", "and once more")]
    assert _lives(events) == [("main", "started"), ("main/run-1", "started"), ("main/run-1", "disposed")]


async def test_a_streamed_run_is_going_until_it_is_complete_read_or_not(link: GuardLink, events: Capture) -> None:
    """A run started while a streamed run goes on has agents of its own; a
    streamed run that completed is over whether its events were read or
    not, and one that could not start never was going."""
    agent = _twice_then_done([])
    guard = RepeatToolGuard(link)
    with pytest.raises(TypeError, match="no_such_option"):
        await guard.run_streamed(agent, "never started", no_such_option=1)
    streamed = await guard.run_streamed(agent, "first")
    meanwhile = await guard.run_streamed(agent, "meanwhile")
    for result in (meanwhile, streamed):
        assert [event.type async for event in result.stream_events()]
    unread = await guard.run_streamed(agent, "second")
    with anyio.fail_after(10):
        while not unread.is_complete:
            await asyncio.sleep(0.01)
    await guard.run(agent, "after it")
    assert [event.type async for event in unread.stream_events()], "read late: the run it was is over already"
    await guard.run(agent, "last")

    assert _lives(events) == [("main", "started"), ("main/run-1", "started"), ("main/run-1", "disposed")]
    said = [m.agent.id for m in events.of(UserMessage) if m.agent]
    assert said == ["main", "main", "main/run-1", "main", "main", "main"]


async def test_agents_beyond_max_sessions_are_disposed_least_recent_first(link: GuardLink, events: Capture) -> None:
    with pytest.raises(ValueError, match="max_sessions = 0: must be an integer >= 1"):
        RepeatToolGuard(link, max_sessions=0)
    guard = RepeatToolGuard(link, max_agents=2)  # the runtime-specific name of max_sessions
    agents = [Agent(name=f"a{n}", model=ScriptedModel([[assistant_message("hi")]] * 2)) for n in range(3)]
    for agent in (agents[0], agents[1], agents[0], agents[2]):
        await guard.run(agent, "hello")

    disposed = [s.agent.id for s in events.of(AgentStatus) if s.status == "disposed" and s.agent]
    assert disposed == ["a1"], "a0 ran again after a1"
    assert guard.agent_link(agents[1]) is None
    assert sorted(a.agent.id for a in link.links()) == ["a0", "a2"]


def _billing(runs: list[str]) -> Agent[Any]:
    """A handoff target that looks the invoice up once per turn."""

    @function_tool
    def lookup(invoice: str) -> str:
        """Look an invoice up."""
        runs.append(invoice)
        return "invoice 42: paid"

    def respond(call: ModelCall) -> Any:
        items = call.input if isinstance(call.input, list) else []
        last = items[-1] if items else {}
        if isinstance(last, dict) and str(last.get("call_id", "")).startswith("l"):  # the lookup's output
            return [assistant_message("it is paid")]
        return [function_call("lookup", {"invoice": "42"}, call_id=f"l{len(runs)}")]

    return Agent(name="billing", model=ScriptedModel([ModelStep.respond(respond)] * 20), tools=[lookup])


@pytest.mark.parametrize("declared", ["agent", "handoff()"])
async def test_each_user_turn_reaches_the_handoff_target_that_works_in_it(turns_link: GuardLink, declared: str) -> None:
    from agents import handoff

    events = Capture().attach(turns_link.bus)
    runs: list[str] = []
    billing = _billing(runs)
    triage = Agent(
        name="triage",
        model=ScriptedModel([[function_call("transfer_to_billing", {}, call_id=f"h{n}")] for n in range(4)]),
        handoffs=[billing if declared == "agent" else handoff(billing)],
    )
    guard = RepeatToolGuard(turns_link)
    for prompt in ("check my invoice", "check it again", "run it again", "once more please"):
        result = await guard.run(triage, prompt)
        assert result.final_output == "it is paid"
    assert runs == ["42"] * 4, "the user asked each time: no turn's only lookup is denied"
    users = [(m.agent.id if m.agent else "", m.text) for m in events.of(UserMessage)]
    assert ("billing", "run it again") in users
    assert {c.agent.id for c in events.of(ToolCall) if c.agent} == {"billing"}, "handoff() targets are guarded too"


def test_a_handoff_whose_agent_is_gone_is_passed_over_and_the_next_one_guarded() -> None:
    from agents import handoff

    gone = handoff(Agent(name="gone"))
    gone._agent_ref = None
    live = grep_agent(looping([]), [], name="live")
    guard_tools(Agent(name="triage", handoffs=[gone, handoff(live)]))
    assert TOOL_GUARDRAIL in (live.tools[0].tool_input_guardrails or [])  # type: ignore[union-attr]


async def test_each_invocation_of_an_agent_used_as_a_tool_is_a_subagent_of_its_own(
    link: GuardLink, events: Capture
) -> None:
    guard = RepeatToolGuard(link)
    runs: list[str] = []
    helper = grep_agent(looping([], per_turn=1), runs, name="helper")
    lead_calls: list[ModelCall] = []

    def lead(call: ModelCall) -> Any:
        lead_calls.append(call)
        if outputs(call) and len(outputs(call)) >= 3:
            return [assistant_message("lead done")]
        return [function_call("delegate", {"input": f"topic {n}"}, call_id=f"d{n}") for n in range(3)]

    agent = Agent(
        name="lead",
        model=ScriptedModel([ModelStep.respond(lead)] * 10),
        tools=[guard.as_tool(helper, tool_name="delegate", tool_description="Ask the helper.")],
    )
    for prompt in ("research it", "do that again"):
        assert (await guard.run(agent, prompt)).final_output == "lead done"
    assert len(runs) == 6, "no invocation's one grep is a repeat of another's"
    assert not events.of(ContextMessage)
    helpers = [s for s in events.of(AgentStatus) if s.agent and s.agent.id.startswith("helper")]
    assert Counter(s.status for s in helpers) >= Counter({"started": 6, "disposed": 6})
    # the three invocations of one turn run at once: the log names them apart, as the guard keeps them
    assert {s.agent.id for s in helpers if s.agent} == {"helper", "helper-2", "helper-3"}


async def test_a_run_resuming_an_approval_is_no_user_turn(link: GuardLink, events: Capture) -> None:
    @function_tool(needs_approval=True)
    def send_email(to: str) -> str:
        """Send an email."""
        return "sent"

    model = ScriptedModel(
        [[function_call("send_email", {"to": "a@b.c"}, call_id="e1")], [assistant_message("email: sent")]]
    )
    agent = Agent(name="mailer", model=model, tools=[send_email])
    guard = RepeatToolGuard(link)
    first = await guard.run(agent, "email a@b.c")
    state = first.to_state()
    for interruption in first.interruptions:
        state.approve(interruption)
    assert (await guard.run(agent, state)).final_output == "email: sent"
    assert [m.text for m in events.of(UserMessage)] == ["email a@b.c"]


async def test_a_run_after_one_cancelled_mid_tool_is_no_child_of_it(link: GuardLink, events: Capture) -> None:
    import asyncio

    running = asyncio.Event()

    @function_tool
    async def deploy(env: str) -> str:
        """Deploy."""
        running.set()
        await asyncio.Event().wait()  # until cancelled
        return "ok"

    def respond(call: ModelCall) -> Any:
        return (
            [assistant_message("done")] if outputs(call) else [function_call("deploy", {"env": "prod"}, call_id="c1")]
        )

    guard = RepeatToolGuard(link)
    model = ScriptedModel([ModelStep.respond(respond)] * 4)
    first = asyncio.ensure_future(guard.run(Agent(name="main", model=model, tools=[deploy]), "deploy"))
    await running.wait()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await guard.run(Agent(name="reporter", model=ScriptedModel([[assistant_message("report")]])), "write the report")
    started = {s.agent.id: s.parent for s in events.of(AgentStatus) if s.agent and s.status == "started"}
    assert started == {"main": None, "reporter": None}


async def test_a_handoff_inside_an_agent_used_as_a_tool_is_no_user_turn(link: GuardLink, events: Capture) -> None:
    runs: list[str] = []
    specialist = grep_agent(looping([], per_turn=2), runs, name="specialist")  # the transfer, then one grep
    router = Agent(
        name="router",
        model=ScriptedModel([[function_call("transfer_to_specialist", {}, call_id="h1")]]),
        handoffs=[specialist],
    )
    guard = RepeatToolGuard(link)

    def lead(call: ModelCall) -> Any:
        return (
            [assistant_message("lead done")] if outputs(call) else [function_call("ask", {"input": "x"}, call_id="a1")]
        )

    agent = Agent(
        name="lead",
        model=ScriptedModel([ModelStep.respond(lead)] * 3),
        tools=[guard.as_tool(router, tool_name="ask", tool_description="Ask the router.")],
    )
    assert (await guard.run(agent, "find the config loader")).final_output == "lead done"
    assert runs == ["load_config"]
    assert [(m.agent.id if m.agent else "", m.text) for m in events.of(UserMessage)] == [
        ("lead", "find the config loader")
    ]


async def test_a_handoff_back_to_an_agent_already_working_in_the_turn_is_no_new_turn(
    link: GuardLink, events: Capture
) -> None:
    triage = Agent(
        name="triage",
        model=ScriptedModel([[function_call("transfer_to_billing", {}, call_id="h1")], [assistant_message("done")]]),
    )
    billing = Agent(
        name="billing",
        model=ScriptedModel([[function_call("transfer_to_triage", {}, call_id="h2")]]),
        handoffs=[triage],
    )
    triage.handoffs = [billing]
    assert (await RepeatToolGuard(link).run(triage, "check my invoice")).final_output == "done"
    said = [(m.agent.id if m.agent else "", m.text) for m in events.of(UserMessage)]
    assert said == [("triage", "check my invoice"), ("billing", "check my invoice")]


# The tools the SDK runs itself (no guardrails): a shell executor, a custom tool,
# an apply_patch editor, and the function tools a SandboxAgent adds during the run.

FOUND = "src/cfg.py:12: def load_config():"


def shell_call(call_id: str, command: str = "grep -rn load_config .") -> ResponseFunctionShellToolCall:
    return ResponseFunctionShellToolCall(
        id=f"item-{call_id}", call_id=call_id, type="shell_call", status="completed", action=Action(commands=[command])
    )


def custom_call(call_id: str, text: str = "load_config") -> ResponseCustomToolCall:
    return ResponseCustomToolCall(
        id=f"item-{call_id}", call_id=call_id, type="custom_tool_call", name="search", input=text
    )


def local_shell_call(call_id: str) -> LocalShellCall:
    action = LocalShellCallAction(command=["grep", "-rn", "load_config", "."], env={}, type="exec")
    return LocalShellCall(
        id=f"item-{call_id}", call_id=call_id, type="local_shell_call", status="completed", action=action
    )


def patch_call(call_id: str, kind: str, diff: str | None = "+x = 1\n") -> ResponseApplyPatchToolCall:
    operation: dict[str, Any] = {"type": kind, "path": "cfg.py"}
    if diff is not None:
        operation["diff"] = diff
    return ResponseApplyPatchToolCall.model_validate(
        {
            "id": f"item-{call_id}",
            "call_id": call_id,
            "type": "apply_patch_call",
            "status": "completed",
            "operation": operation,
        }
    )


def repeating(
    calls: list[ModelCall], items: Callable[[int], list[Any]], until: tuple[str, ...] = GUARD_SAID
) -> ScriptedModel:
    """Answers ``items(n)`` at its ``n``-th call (from 1) until its input
    carries one of the phrases ``until``, or ``items`` gives nothing, then answers."""

    def respond(call: ModelCall) -> Any:
        calls.append(call)
        response = [] if any(phrase in "\n".join(_texts(call)) for phrase in until) else items(len(calls))
        return response or [assistant_message("I will stop repeating myself.")]

    return ScriptedModel([ModelStep.respond(respond)] * 20)


def read(call: ModelCall, kind: str) -> list[Any]:
    """The outputs of ``kind`` (``shell_call_output``, ...) in a model call's input, oldest first."""
    items = call.input if isinstance(call.input, list) else []
    return [item["output"] for item in items if isinstance(item, dict) and item.get("type") == kind]


def _noting(ran: list[Any], what: Callable[[Any], Any]) -> Callable[..., str]:
    """A tool body (an executor, or ``on_invoke_tool``) noting ``what`` of its last argument, answering ``FOUND``."""

    def run(*args: Any) -> str:
        ran.append(what(args[-1]))
        return FOUND

    return run


def _failed_command(output: list[dict[str, Any]], denied: str) -> bool:
    (command,) = output
    return (command["stderr"], command["outcome"]) == (denied, {"type": "exit", "exit_code": 1})


class _Native(NamedTuple):
    """A tool the SDK runs itself, as the test below makes and calls it."""

    tool: Callable[[list[Any]], Tool]
    """The tool, noting in the list what each run got."""
    call: Callable[[str], Any]
    name: str
    ran_with: Any
    args: Any
    """The call's arguments as the guard publishes them."""
    output: str
    """The input item the model reads the tool's output in."""
    reads_denial: Callable[[Any, str], bool]


_NATIVE = {
    "shell": _Native(
        lambda ran: ShellTool(executor=_noting(ran, lambda request: request.data.action.commands)),
        shell_call,
        "shell",
        ["grep -rn load_config ."],
        {"command": "grep -rn load_config ."},
        "shell_call_output",
        _failed_command,  # a failed command: the denial on stderr, exit code 1
    ),
    "custom": _Native(
        lambda ran: CustomTool(name="search", description="Search the code.", on_invoke_tool=_noting(ran, str)),
        custom_call,
        "search",
        "load_config",
        "load_config",
        "custom_tool_call_output",
        lambda output, denied: output == denied,
    ),
    "local-shell": _Native(
        lambda ran: LocalShellTool(_noting(ran, lambda request: request.data.action.command)),
        local_shell_call,
        "local_shell",
        ["grep", "-rn", "load_config", "."],
        {"command": ["grep", "-rn", "load_config", "."], "env": {}, "type": "exec"},
        "local_shell_call_output",
        lambda output, denied: output == denied,
    ),
}


@pytest.mark.parametrize("kind", _NATIVE)
async def test_a_native_tool_call_repeated_is_denied_before_it_runs_and_the_model_reads_why(
    rescue_link: GuardLink, kind: str
) -> None:
    """A shell, custom or local shell call the SDK runs itself, made a third
    time: decided before it runs, and the model reads the denial as that
    tool's output."""
    native = _NATIVE[kind]
    events = Capture().attach(rescue_link.bus)
    calls: list[ModelCall] = []
    ran: list[Any] = []
    agent = Agent(name="main", model=repeating(calls, lambda n: [native.call(f"{kind}-{n}")]), tools=[native.tool(ran)])
    result = await RepeatToolGuard(rescue_link).run(agent, "find the config loader")

    assert ran == [native.ran_with] * 2, "the third call never ran"
    published = [(c.call_id, c.tool, c.args) for c in events.of(ToolCall)]
    assert published == [(f"{kind}-{n}", native.name, native.args) for n in (1, 2, 3)]
    answered = [(r.call_id, r.denied_by, r.is_error) for r in events.of(ToolResult)]
    assert answered == [(f"{kind}-1", None, False), (f"{kind}-2", None, False), (f"{kind}-3", "loop-rescue", True)]
    assert [r.content for r in events.of(ToolResult)][:2] == [FOUND, FOUND], "the output the model read"
    denied = events.of(ToolResult)[2].content
    assert denied.startswith(RESCUE_DENIED)
    assert native.reads_denial(read(calls[3], native.output)[-1], denied)
    assert result.final_output == "I will stop repeating myself."


class Editor:
    """An apply_patch editor that notes each operation: creating answers a
    result, updating text, deleting nothing."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        self.ran.append(f"create {operation.path}")
        return ApplyPatchResult(output=f"created {operation.path}")

    async def update_file(self, operation: ApplyPatchOperation) -> str:
        self.ran.append(f"update {operation.path}")
        return f"updated {operation.path}"

    def delete_file(self, operation: ApplyPatchOperation) -> None:
        self.ran.append(f"delete {operation.path}")


async def test_an_apply_patch_operation_repeated_is_denied_before_it_runs_and_the_model_reads_why(
    rescue_link: GuardLink,
) -> None:
    """Creates the file, makes one update until the guard says something, then
    deletes the file: the update the guard denied never ran."""
    events = Capture().attach(rescue_link.bus)
    calls: list[ModelCall] = []
    update = "-x = 1\n+x = 2\n"

    def patches(n: int) -> list[Any]:
        if n == 1:
            return [patch_call("p-1", "create_file", "+x = 1\n")]
        if not any(phrase in "\n".join(_texts(calls[-1])) for phrase in GUARD_SAID):
            return [patch_call(f"p-{n}", "update_file", update)]
        return [patch_call(f"p-{n}", "delete_file", None)] if "delete_file" not in json.dumps(calls[-1].input) else []

    editor = Editor()
    agent = Agent(name="main", model=repeating(calls, patches, until=()), tools=[ApplyPatchTool(editor=editor)])
    result = await RepeatToolGuard(rescue_link).run(agent, "make x 2, then remove the file")

    published = [(c.call_id, c.tool, c.args) for c in events.of(ToolCall)]
    assert published[:2] == [
        ("apply_patch-1", "apply_patch", {"type": "create_file", "path": "cfg.py", "diff": "+x = 1\n"}),
        ("apply_patch-2", "apply_patch", {"type": "update_file", "path": "cfg.py", "diff": update}),
    ], "the SDK tells the editor no call id: each operation is a call of the guard's numbering"
    updates = len(published) - 2
    assert updates >= 3, "the same update made again and again"
    assert editor.ran == ["create cfg.py", *["update cfg.py"] * (updates - 1), "delete cfg.py"], (
        "the denied one never ran"
    )
    answered = [(r.content if not r.denied_by else "denied", r.is_error) for r in events.of(ToolResult)]
    assert answered == [
        ("created cfg.py", False),
        *[("updated cfg.py", False)] * (updates - 1),
        ("denied", True),
        ("", False),
    ]
    (denied,) = [r.content for r in events.of(ToolResult) if r.denied_by]
    assert denied.startswith(RESCUE_DENIED)
    assert read(calls[updates + 1], "apply_patch_call_output")[-1] == denied, "the model reads the denial as the output"
    assert result.final_output == "I will stop repeating myself."


async def test_a_sandbox_agents_shell_added_during_the_run_is_denied_before_it_runs(rescue_link: GuardLink) -> None:
    """A ``SandboxAgent``'s ``exec_command`` is a function tool the SDK adds
    while the run goes on, after ``guard.run`` guarded the agent's tools."""
    from agents.sandbox import SandboxAgent, SandboxRunConfig
    from agents.sandbox.capabilities import Shell
    from agents.sandbox.sandboxes.unix_local import UnixLocalSandboxClient

    events = Capture().attach(rescue_link.bus)
    calls: list[ModelCall] = []
    command = {"cmd": "echo load_config"}
    model = repeating(calls, lambda n: [function_call("exec_command", command, call_id=f"x-{n}")])
    agent = SandboxAgent(name="main", model=model, capabilities=[Shell()])
    sandbox = RunConfig(sandbox=SandboxRunConfig(client=UnixLocalSandboxClient()))
    result = await RepeatToolGuard(rescue_link).run(agent, "find the config loader", run_config=sandbox)

    assert [(c.call_id, c.tool, c.args) for c in events.of(ToolCall)] == [
        (f"x-{n}", "exec_command", command) for n in (1, 2, 3)
    ]
    assert [c.agent.id for c in events.of(ToolCall) if c.agent] == ["main"] * 3
    (denied,) = [r for r in events.of(ToolResult) if r.denied_by]
    assert outputs(calls[3]) == [r.content for r in events.of(ToolResult)], "the outputs the model read, published"
    assert [o.startswith("Chunk ID") for o in outputs(calls[3])] == [True, True, False], "the third never ran"
    assert (denied.call_id, denied.is_error) == ("x-3", True)
    assert result.final_output == "I will stop repeating myself."


async def test_a_shell_executor_that_raises_answers_its_call_with_its_exception(
    link: GuardLink, events: Capture
) -> None:
    def execute(request: ShellCommandRequest) -> str:
        raise RuntimeError("disk on fire")

    calls: list[ModelCall] = []
    model = repeating(calls, lambda n: [shell_call("sh-1")] if n == 1 else [])
    await RepeatToolGuard(link).run(Agent(name="main", model=model, tools=[ShellTool(executor=execute)]), "go")
    assert [(r.call_id, r.is_error, r.content) for r in events.of(ToolResult)] == [("sh-1", True, "disk on fire")]
    assert "disk on fire" in read(calls[1], "shell_call_output")[0][0]["stdout"], "the SDK's own text for it"
    assert [agent.open_calls() for agent in link.links()] == [0]


async def test_a_shell_command_that_writes_is_progress_not_a_repeat(rescue_link: GuardLink) -> None:
    """The policies read a shell call's command: the same append made again
    and again changes the file each time."""
    events = Capture().attach(rescue_link.bus)
    ran: list[str] = []

    def execute(request: ShellCommandRequest) -> str:
        ran.extend(request.data.action.commands)
        return ""

    model = repeating([], lambda n: [shell_call(f"sh-{n}", "echo step >> notes.txt")] if n <= 5 else [])
    await RepeatToolGuard(rescue_link).run(Agent(name="main", model=model, tools=[ShellTool(executor=execute)]), "go")
    assert ran == ["echo step >> notes.txt"] * 5
    assert [r.denied_by for r in events.of(ToolResult)] == [None] * 5


async def test_the_native_calls_of_one_response_are_each_decided_and_answered(link: GuardLink, events: Capture) -> None:
    """Shell, custom, local shell, apply_patch and function calls of one
    response run at once: each is published in the response's step and
    answered under its own id."""
    editor = Editor()
    calls: list[ModelCall] = []
    response = [
        shell_call("s1"),
        custom_call("c1"),
        local_shell_call("l1"),
        patch_call("p1", "create_file"),
        function_call("grep", {"pattern": "load_config"}, call_id="g1"),
    ]
    agent = grep_agent(repeating(calls, lambda n: response if n == 1 else []), [])
    agent.tools += [
        ShellTool(executor=lambda request: "shell output"),
        CustomTool(name="search", description="Search.", on_invoke_tool=lambda context, text: "custom output"),
        LocalShellTool(executor=lambda request: "local output"),
        ApplyPatchTool(editor=editor),
    ]
    await RepeatToolGuard(link).run(agent, "go")

    published = {(c.call_id, c.tool, c.step) for c in events.of(ToolCall)}
    assert published == {
        ("s1", "shell", 1),
        ("c1", "search", 1),
        ("l1", "local_shell", 1),
        ("apply_patch-1", "apply_patch", 1),
        ("g1", "grep", 1),
    }
    answered = {r.call_id: r.content for r in events.of(ToolResult)}
    assert answered == {
        "s1": "shell output",
        "c1": "custom output",
        "l1": "local output",
        "apply_patch-1": "created cfg.py",
        "g1": FOUND,
    }
    assert [agent.open_calls() for agent in link.links()] == [0]


async def test_shell_calls_are_the_agents_that_make_them_across_handoffs_and_agents_used_as_tools(
    link: GuardLink, events: Capture
) -> None:
    """One shell tool shared by three agents: the lead runs it beside the
    helper it called as a tool (the helper's run context names the lead), then
    hands off to the specialist."""
    shell = ShellTool(executor=lambda request: f"ran {request.data.call_id}")
    guard = RepeatToolGuard(link)
    helper = Agent(
        name="helper", model=repeating([], lambda n: [shell_call("helper-s")] if n == 1 else []), tools=[shell]
    )
    specialist = Agent(
        name="specialist", model=repeating([], lambda n: [shell_call("specialist-s")] if n == 1 else []), tools=[shell]
    )
    lead_script = [
        [shell_call("lead-s"), function_call("delegate", {"input": "look"}, call_id="d1")],
        [function_call("transfer_to_specialist", {}, call_id="h1")],
    ]
    lead = Agent(
        name="lead",
        model=repeating([], lambda n: lead_script[n - 1] if n <= 2 else []),
        tools=[shell, guard.as_tool(helper, tool_name="delegate", tool_description="Ask the helper.")],
        handoffs=[specialist],
    )
    await guard.run(lead, "find the config loader")

    made = {c.call_id: c.agent.id for c in events.of(ToolCall) if c.agent}
    assert made == {"lead-s": "lead", "d1": "lead", "helper-s": "helper", "specialist-s": "specialist"}
    answered = {r.call_id: r.content for r in events.of(ToolResult) if r.call_id.endswith("-s")}
    assert answered == {name: f"ran {name}" for name in ("lead-s", "helper-s", "specialist-s")}


async def test_native_tools_run_by_the_guards_hooks_alone_or_outside_a_guarded_run_are_not_counted(
    link: GuardLink, events: Capture
) -> None:
    editor = Editor()
    hosted = ShellTool(environment={"type": "container_auto"})
    tools: list[Tool] = [
        ShellTool(executor=lambda request: "shell output"),
        CustomTool(name="search", description="Search.", on_invoke_tool=lambda context, text: "custom output"),
        LocalShellTool(executor=lambda request: "local output"),
        ApplyPatchTool(editor=editor),
        hosted,
    ]
    response = [shell_call("s1"), custom_call("c1"), local_shell_call("l1"), patch_call("p1", "create_file")]
    for runs, hooks in enumerate((RepeatToolGuard(link), None), start=1):
        agent = Agent(name="main", model=repeating([], lambda n: response if n == 1 else []), tools=tools)
        guard_tools(agent)
        result = await Runner.run(agent, "plain run", hooks=hooks)
        assert result.final_output == "I will stop repeating myself."
        assert editor.ran == ["create cfg.py"] * runs
    assert hosted.executor is None, "a hosted shell runs nowhere here: nothing to guard"
    assert events.of(ToolCall) == []
    assert events.of(ToolResult) == []


async def test_a_native_tool_of_a_run_without_the_guards_hooks_inside_a_guarded_run_is_not_counted(
    link: GuardLink, events: Capture
) -> None:
    """A tool that runs an agent with ``Runner.run`` itself (not ``guard.as_tool``):
    its shell calls are not guarded, even with a shell tool the guard wrapped."""
    shell = ShellTool(executor=lambda request: "shell output")
    inner = Agent(name="inner", model=repeating([], lambda n: [shell_call("inner-s")] if n == 1 else []), tools=[shell])

    @function_tool
    async def ask_inner() -> str:
        """Ask the inner agent."""
        return str((await Runner.run(inner, "look")).final_output)

    script: list[list[Any]] = [[shell_call("lead-s")], [function_call("ask_inner", {}, call_id="a1")]]
    lead = Agent(name="lead", model=repeating([], lambda n: script[n - 1] if n <= 2 else []), tools=[shell, ask_inner])
    assert (await RepeatToolGuard(link).run(lead, "go")).final_output == "I will stop repeating myself."
    assert [c.call_id for c in events.of(ToolCall)] == ["lead-s", "a1"]
    assert [r.call_id for r in events.of(ToolResult)] == ["lead-s", "a1"]


async def test_an_mcp_servers_tool_made_during_the_run_is_denied_before_it_runs(rescue_link: GuardLink) -> None:
    """The SDK makes a function tool of each tool an agent's MCP server lists,
    anew as the run goes on: none of them is in ``agent.tools`` for ``guard.run``."""
    from agents.mcp import MCPServer
    from mcp.types import CallToolResult, TextContent
    from mcp.types import Tool as MCPTool

    ran: list[Any] = []

    class Server(MCPServer):
        name = "code"

        async def connect(self) -> None:
            pass

        async def cleanup(self) -> None:
            pass

        async def list_tools(self, run_context: Any = None, agent: Any = None) -> list[MCPTool]:
            schema = {"type": "object", "properties": {"pattern": {"type": "string"}}}
            return [MCPTool.model_validate({"name": "grep", "description": "Search the code.", "inputSchema": schema})]

        async def call_tool(self, tool_name: str, arguments: Any, meta: Any = None) -> CallToolResult:
            ran.append(arguments)
            return CallToolResult(content=[TextContent(type="text", text=FOUND)])

        async def list_prompts(self) -> Any:
            raise NotImplementedError

        async def get_prompt(self, name: str, arguments: Any = None) -> Any:
            raise NotImplementedError

    events = Capture().attach(rescue_link.bus)
    calls: list[ModelCall] = []
    agent = Agent(name="main", model=looping(calls), mcp_servers=[Server()])
    result = await RepeatToolGuard(rescue_link).run(agent, "find the config loader")

    assert ran == [{"pattern": "load_config"}] * 2, "the third call never ran"
    assert [(c.call_id, c.tool) for c in events.of(ToolCall)] == [(f"grep-{n}", "grep") for n in (1, 2, 3)]
    (denied,) = [r for r in events.of(ToolResult) if r.denied_by]
    assert outputs(calls[3])[-1] == denied.content, "the model reads the denial as the tool output"
    assert result.final_output == "I will stop repeating myself."


async def test_a_function_tool_asking_approval_keeps_the_sdks_own_check_of_its_arguments(link: GuardLink) -> None:
    """The SDK holds a call for approval when validating its arguments would
    change them (``"5000"`` for an ``int``), whatever the policy says of the
    raw ones: it reads them through the tool's own invoker, which the guard
    leaves in place for a tool that asks for approval."""
    from agents import function_tool

    ran: list[int] = []

    async def policy(context: Any, params: dict[str, Any], call_id: str) -> bool:
        count = params.get("count")
        return isinstance(count, int) and count > 100

    @function_tool(needs_approval=policy)
    def delete_rows(count: int) -> str:
        """Delete rows."""
        ran.append(count)
        return f"deleted {count}"

    steps = [function_call("delete_rows", '{"count": "5000"}', call_id="d1")]
    agent = Agent(name="main", model=repeating([], lambda n: steps if n == 1 else []), tools=[delete_rows])
    result = await RepeatToolGuard(link).run(agent, "go")
    assert (len(result.interruptions), ran) == (1, [])


async def test_a_custom_tool_shared_with_a_run_without_the_guard_is_decided_only_in_the_guarded_run(
    rescue_link: GuardLink,
) -> None:
    """A tool that starts ``Runner.run`` itself runs an agent the guard does
    not hear of: that agent's calls of a tool the lead shares are not
    decided (or left open), so none is denied; not either under the id of a
    call of the lead's (a provider numbering each response's calls from
    ``call_0``)."""
    from agents import function_tool

    events = Capture().attach(rescue_link.bus)
    ran: list[str] = []

    def look(context: ToolContext[Any], text: str) -> str:
        ran.append(context.tool_call_id)
        return "custom output"

    search = CustomTool(name="search", description="Search.", on_invoke_tool=look)
    inner_ids = ["call_0", "inner-2", "inner-3", "inner-4"]
    inner_model = repeating([], lambda n: [custom_call(inner_ids[n - 1])] if n <= 4 else [], until=())
    inner = Agent(name="inner", model=inner_model, tools=[search])

    @function_tool
    async def ask_inner() -> str:
        """Ask the inner agent."""
        return str((await Runner.run(inner, "look")).final_output)

    lead_model = repeating([], lambda n: [function_call("ask_inner", {}, call_id="call_0")] if n == 1 else [])
    lead = Agent(name="lead", model=lead_model, tools=[ask_inner, search])
    await RepeatToolGuard(rescue_link).run(lead, "go")
    assert ran == inner_ids
    assert [(c.call_id, c.tool) for c in events.of(ToolCall)] == [("call_0", "ask_inner")]
    assert [agent.open_calls() for agent in rescue_link.links()] == [0]


async def test_a_wrapped_editor_reads_through_and_a_renamed_shell_keeps_its_results(
    link: GuardLink, events: Capture
) -> None:
    """The guard's editor answers what it does not wrap from the application's
    editor; a shell tool copied under another name after a run wrapped it
    still has each of its calls answered."""
    editor = Editor()
    editor.root = "/tmp/ws"  # type: ignore[attr-defined]
    patch = ApplyPatchTool(editor=editor)
    shell = ShellTool(executor=lambda request: f"out {request.data.call_id}")
    await RepeatToolGuard(link).run(Agent(name="warmup", model=repeating([], lambda n: []), tools=[patch, shell]), "hi")
    wrapped: Any = patch.editor
    assert (wrapped.root, wrapped.ran) == ("/tmp/ws", [])

    bash = dataclasses.replace(shell, name="bash")
    model = repeating([], lambda n: [shell_call(f"s{n}", f"echo {n}")] if n <= 3 else [])
    await RepeatToolGuard(link).run(Agent(name="main", model=model, tools=[bash]), "go")
    assert [(r.call_id, r.content) for r in events.of(ToolResult)] == [(f"s{n}", f"out s{n}") for n in (1, 2, 3)]
    assert [agent.open_calls() for agent in link.links()] == [0, 0]


_FREEZE: ToolInputGuardrail[Any] = ToolInputGuardrail(
    guardrail_function=lambda data: ToolGuardrailFunctionOutput.reject_content("change freeze: no deploys"),
    name="freeze",
)


class Freezing(RunHooks[Any]):
    """The caller's hooks switching a change freeze on while the run goes on."""

    def __init__(self, tool: FunctionTool) -> None:
        self.tool = tool

    async def on_llm_start(self, context: Any, agent: Agent[Any], system_prompt: Any, input_items: Any) -> None:
        if _FREEZE not in (self.tool.tool_input_guardrails or []):
            self.tool.tool_input_guardrails = [*(self.tool.tool_input_guardrails or []), _FREEZE]


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_guardrail_of_yours_added_later_runs_before_the_guards_and_leaves_no_call_open(
    link: GuardLink, events: Capture, streamed: bool
) -> None:
    ran: list[str] = []

    @function_tool
    def deploy(env: str) -> str:
        """Deploy."""
        ran.append(env)
        return "deployed"

    def deploying(n: int) -> ScriptedModel:
        return ScriptedModel([[function_call("deploy", {"env": "prod"}, call_id=f"d{n}")], [assistant_message("ok")]])

    async def run(agent: Agent[Any], **kwargs: Any) -> Any:
        guard = RepeatToolGuard(link)
        if not streamed:
            return await guard.run(agent, "ship it", **kwargs)
        result = await guard.run_streamed(agent, "ship it", **kwargs)
        async for _ in result.stream_events():
            pass
        return result

    agent = Agent(name="main", model=deploying(1), tools=[deploy])
    await run(agent)
    deploy.tool_input_guardrails = [*(deploy.tool_input_guardrails or []), _FREEZE]  # added between runs
    await run(agent.clone(model=deploying(2)))
    assert deploy.tool_input_guardrails[-1] is TOOL_GUARDRAIL, "the guard's is last again: yours decide first"
    assert [c.call_id for c in events.of(ToolCall)] == ["d1"], "a call your guardrail rejected never reached it"

    deploy.tool_input_guardrails = [TOOL_GUARDRAIL]
    await run(agent.clone(model=deploying(3)), hooks=Freezing(deploy))  # added while the run goes on: after it
    assert ran == ["prod"]
    answered = [(r.call_id, r.content, r.is_error) for r in events.of(ToolResult)]
    assert answered == [("d1", "deployed", False), ("d3", "change freeze: no deploys", True)], "what the model read"
