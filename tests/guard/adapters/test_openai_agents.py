"""OpenAI Agents SDK: the real ``Runner`` loop with the SDK's own ``ScriptedModel``."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("agents", reason="openai-agents is not installed: pip install 'repeat-tool-guard[openai-agents]'")

from agents import Agent, RunConfig, Runner, WebSearchTool, function_tool, set_tracing_disabled
from agents.run_config import CallModelData, ModelInputData
from agents.testing.model import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from bus import AgentStatus, ToolCall, ToolResult, UserMessage
from bus.testing import Capture
from guard import GENTLE_REMINDER
from guard.adapters import GuardLink, HaltRequested
from guard.adapters.openai_agents import TOOL_GUARDRAIL, RepeatToolGuard, guard_tools
from tests.guard.adapters.conftest import DENIAL, DenyRepeats, HaltAfter

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """The Agents SDK runs on asyncio only."""
    return "asyncio"


@pytest.fixture(autouse=True)
def no_trace_export() -> Iterator[None]:
    """Offline: the SDK would try to export traces to OpenAI."""
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


def _texts(call: ModelCall) -> list[str]:
    items = call.input if isinstance(call.input, list) else [call.input]
    return [json.dumps(item, default=str) if not isinstance(item, str) else item for item in items]


def looping(calls: list[ModelCall], *, per_turn: int | None = None, tool: str = "grep") -> ScriptedModel:
    """Calls ``tool(pattern="load_config")`` until its input carries a guard
    message (or ``per_turn`` calls since the latest user item), then answers."""
    counter = Counter[str]()

    def respond(call: ModelCall) -> Any:
        calls.append(call)
        text = "\n".join(_texts(call))
        if "repeat-tool-guard test" in text or "repeating the exact same tool call" in text:
            return [assistant_message("I will stop repeating myself.")]
        items = call.input if isinstance(call.input, list) else []
        last_user = max((i for i, item in enumerate(items) if isinstance(item, dict) and item.get("role") == "user"))
        since = sum(1 for item in items[last_user:] if isinstance(item, dict) and item.get("type") == "function_call")
        if per_turn is not None and since >= per_turn:
            return [assistant_message("enough for this turn")]
        counter["n"] += 1
        return [function_call(tool, {"pattern": "load_config"}, call_id=f"{tool}-{counter['n']}")]

    return ScriptedModel([ModelStep.respond(respond)] * 50)


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


async def test_denied_call_never_runs_and_the_model_reads_the_denial(link: GuardLink, events: Capture) -> None:
    DenyRepeats(limit=2).attach(link.bus)
    calls: list[ModelCall] = []
    runs: list[str] = []
    await RepeatToolGuard(link).run(grep_agent(looping(calls), runs), "find the config loader")

    assert len(runs) == 2
    output = calls[3].input[-2]
    assert output["type"] == "function_call_output"
    assert output["output"] == DENIAL.format(count=2)
    denied = [r for r in events.of(ToolResult) if r.denied_by]
    assert [(r.call_id, r.denied_by) for r in denied] == [("grep-3", "deny-repeats")]
    assert len(events.of(ToolResult)) == 3, "the denied call's result is published once"


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


async def test_halt_request_ends_the_run_before_the_next_model_call(link: GuardLink) -> None:
    HaltAfter(results=2).attach(link.bus)
    calls: list[ModelCall] = []
    runs: list[str] = []
    with pytest.raises(HaltRequested, match="too many repeats"):
        await RepeatToolGuard(link).run(grep_agent(looping(calls), runs), "find the config loader")
    assert (len(runs), len(calls)) == (2, 2)


async def test_guardrail_outside_a_guarded_run_allows(events: Capture) -> None:
    runs: list[str] = []
    script = [[function_call("grep", {"pattern": "x"}, call_id="c1")], [assistant_message("ok")]]
    agent = grep_agent(ScriptedModel(script), runs)
    agent.tools.append(WebSearchTool())
    guard_tools(agent, agent)
    result = await Runner.run(agent, "plain run")
    assert (result.final_output, runs, events.events) == ("ok", ["x"], [])


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
