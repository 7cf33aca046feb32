"""LangChain: the real ``create_agent`` loop with a fake chat model that calls tools."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain", reason="langchain is not installed: pip install 'repeat-tool-guard[langchain]'")

from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from bus import AgentStatus, ToolCall, ToolResult, UserMessage
from bus.testing import Capture
from guard import GENTLE_REMINDER, TURNS_ADVISORY, TURNS_HALT_REASON
from guard.adapters import GuardLink
from guard.adapters.langchain import REMINDER_KEY, RepeatToolGuard
from guard.rescue import advice_in
from tests.guard.adapters.conftest import ADVICE, RESCUE_DENIED, TURNS_DENIED

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """LangGraph's async runner is asyncio-based."""
    return "asyncio"


class ScriptedChat(GenericFakeChatModel):
    """LangChain's fake chat model, recording each request and accepting tools."""

    requests: list[list[BaseMessage]]

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.requests.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def grep_call(n: int, tool: str = "grep", copies: int = 1) -> AIMessage:
    """One model response calling ``tool`` ``copies`` times in parallel (ids ``grep-<n>``, ``grep-<n>.1``, ...)."""
    ids = [f"{tool}-{n}" + (f".{c}" if c else "") for c in range(copies)]
    return AIMessage("", tool_calls=[{"name": tool, "args": {"pattern": "load_config"}, "id": i} for i in ids])


def chat(*replies: AIMessage) -> ScriptedChat:
    return ScriptedChat(messages=iter(replies), requests=[])


def make_grep(runs: list[str]) -> Any:
    @tool
    def grep(pattern: str) -> str:
        """Search the code."""
        runs.append(pattern)
        return "src/cfg.py:12: def load_config():"

    return grep


def loop(n: int, then: str = "done") -> Iterator[AIMessage]:
    yield from (grep_call(i) for i in range(n))
    yield AIMessage(then)


async def test_reminder_is_a_system_message_before_the_next_model_call(link: GuardLink, events: Capture) -> None:
    runs: list[str] = []
    model = chat(*loop(3))
    agent = create_agent(model, [make_grep(runs)], middleware=[RepeatToolGuard(link)])
    result = await agent.ainvoke({"messages": [HumanMessage("find the config loader")]})

    assert len(runs) == 3
    fourth = model.requests[3]
    assert isinstance(fourth[-2], ToolMessage)
    assert fourth[-2].content == "src/cfg.py:12: def load_config():", "the tool result is not rewritten"
    assert isinstance(fourth[-1], SystemMessage)
    assert fourth[-1].content == GENTLE_REMINDER
    assert fourth[-1].additional_kwargs == {REMINDER_KEY: "grep-2"}
    assert not any(isinstance(m, SystemMessage) for r in model.requests[:3] for m in r)
    assert any(isinstance(m, SystemMessage) for m in result["messages"]), "kept in the conversation"
    assert [c.step for c in events.of(ToolCall)] == [1, 2, 3]
    assert [m.text for m in events.of(UserMessage)] == ["find the config loader"]


async def test_rescue_denies_the_third_call_before_it_runs_and_the_model_reads_why(rescue_link: GuardLink) -> None:
    events = Capture().attach(rescue_link.bus)
    runs: list[str] = []
    model = chat(*loop(3))
    agent = create_agent(model, [make_grep(runs)], middleware=[RepeatToolGuard(rescue_link)])
    await agent.ainvoke({"messages": [HumanMessage("find the config loader")]})

    assert len(runs) == 2, "the third grep never ran"
    denied = events.of(ToolResult)[-1]
    assert [r.denied_by for r in events.of(ToolResult)] == [None, None, "loop-rescue"]
    assert denied.content.startswith(f"{RESCUE_DENIED}\nYou have made this exact call 3 times in your last 3")
    assert advice_in(denied.content) is None, "the ask command is missing: the free local denial"
    shown = model.requests[3][-1]
    assert isinstance(shown, ToolMessage)
    assert (shown.content, shown.status) == (denied.content, "error")


async def test_rescue_escalation_brings_the_ask_commands_advice_to_the_model(
    advice_link: GuardLink, asked: Path
) -> None:
    events = Capture().attach(advice_link.bus)
    runs: list[str] = []
    model = chat(*loop(3))
    agent = create_agent(model, [make_grep(runs)], middleware=[RepeatToolGuard(advice_link)])
    await agent.ainvoke({"messages": [HumanMessage("find the config loader")]})

    assert runs == ["load_config"], "the 2nd call is denied, the 3rd escalated and denied with advice"
    denials = [r.content for r in events.of(ToolResult) if r.denied_by == "loop-rescue"]
    assert [advice_in(d) for d in denials] == [None, ADVICE]
    assert [m.content for m in model.requests[3] if isinstance(m, ToolMessage)][1:] == denials
    question = asked.read_text()
    assert "## The agent's task\nfind the config loader\n" in question, "the user turn reached the guard"
    assert "src/cfg.py:12: def load_config():" in question, "so did the output the agent already had"


async def test_new_user_turn_on_a_thread_resets_the_count(link: GuardLink, events: Capture) -> None:
    runs: list[str] = []
    model = chat(*loop(2, "first"), *loop(2, "second"), AIMessage("third"))
    agent = create_agent(model, [make_grep(runs)], middleware=[RepeatToolGuard(link)], checkpointer=InMemorySaver())
    thread: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    await agent.ainvoke({"messages": [HumanMessage("find the config loader")]}, thread)
    await agent.ainvoke({"messages": [HumanMessage("and once more")]}, thread)
    await agent.ainvoke({"messages": []}, thread)  # a resumed run without a new human message

    assert len(runs) == 4
    assert not any(isinstance(m, SystemMessage) for r in model.requests for m in r)
    assert [m.text for m in events.of(UserMessage)] == ["find the config loader", "and once more"]
    assert [(s.agent.id if s.agent else "", s.status) for s in events.of(AgentStatus)] == [("t1", "started")]


async def test_subagent_run_inside_a_tool_is_isolated(link: GuardLink, events: Capture) -> None:
    guard = RepeatToolGuard(link)
    runs: list[str] = []
    child_model = chat(*loop(2, "child done"))
    child = create_agent(child_model, [make_grep(runs)], middleware=[guard])

    @tool
    async def delegate(task: str) -> str:
        """Hand a task to a helper agent."""
        result = await child.ainvoke({"messages": [HumanMessage(task)]})
        return str(result["messages"][-1].content)

    hand_off = AIMessage("", tool_calls=[{"name": "delegate", "args": {"task": "look too"}, "id": "d1"}])
    parent_model = chat(grep_call(0), grep_call(1), hand_off, grep_call(3), AIMessage("lead done"))
    lead = create_agent(parent_model, [make_grep(runs), delegate], middleware=[guard])
    await lead.ainvoke({"messages": [HumanMessage("find the config loader")]})

    assert not any(isinstance(m, SystemMessage) for r in child_model.requests for m in r)
    reminded = [r for r in parent_model.requests if isinstance(r[-1], SystemMessage)]
    assert len(reminded) == 1, "the lead's 3rd grep, not the child's calls, triggers it"
    statuses = [(s.agent.id if s.agent else "", s.status, s.parent) for s in events.of(AgentStatus)]
    assert statuses == [("main", "started", None), ("main/sub-1", "started", "main"), ("main/sub-1", "disposed", None)]
    assert [m.text for m in events.of(UserMessage)] == ["find the config loader"], "a delegated task is no user turn"


async def test_turns_advises_then_denies_then_its_halt_request_ends_the_run(turns_link: GuardLink) -> None:
    events = Capture().attach(turns_link.bus)
    runs: list[str] = []
    model = chat(*loop(6))
    agent = create_agent(model, [make_grep(runs)], middleware=[RepeatToolGuard(turns_link)])
    result = await agent.ainvoke({"messages": [HumanMessage("find the config loader")]})

    assert len(runs) == 2, "turns 3 and 4 were denied"
    assert [c.step for c in events.of(ToolCall)] == [1, 2, 3, 4], "one step per model call"
    assert not any(isinstance(m, SystemMessage) for m in model.requests[1])
    advisory = model.requests[2][-1]
    assert isinstance(advisory, SystemMessage)
    assert advisory.text.startswith(TURNS_ADVISORY.split("{tool}")[0] + "grep with identical arguments in 2")
    assert model.requests[3][-1].text.startswith(TURNS_DENIED)
    assert len(model.requests) == 4, "the run ended before a 5th model call"
    last = result["messages"][-1]
    assert isinstance(last, ToolMessage)
    assert last.text.startswith(TURNS_DENIED), "the 4th call's denial, which carried the halt request"
    (main,) = turns_link.links()
    assert main.halt_reason == TURNS_HALT_REASON.format(tool="grep", count=4, denials=" and 2 denied calls")


async def test_parallel_calls_of_one_response_are_one_turn(turns_link: GuardLink) -> None:
    events = Capture().attach(turns_link.bus)
    runs: list[str] = []
    model = chat(*(grep_call(i, copies=2) for i in range(3)), AIMessage("done"))
    agent = create_agent(model, [make_grep(runs)], middleware=[RepeatToolGuard(turns_link)])
    await agent.ainvoke({"messages": [HumanMessage("find the config loader")]})

    assert [c.step for c in events.of(ToolCall)] == [1, 1, 2, 2, 3, 3]
    assert len(runs) == 4, "both copies of the 3rd response were denied"
    notes = [m.text for m in model.requests[2] if isinstance(m, SystemMessage)]
    assert len(notes) == 1, "the 2nd response is the 2nd turn: one advisory, not one per copy"
    assert notes[0].startswith(TURNS_ADVISORY.split("{tool}")[0])
    denials = [m for m in model.requests[3] if isinstance(m, ToolMessage) and m.text.startswith(TURNS_DENIED)]
    assert len(denials) == 2


async def test_tool_errors_and_commands_are_published(link: GuardLink, events: Capture) -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise ValueError("disk on fire")

    @tool
    def flaky() -> str:
        """Fails in a way the tool node turns into an error message."""
        raise ToolException("upstream timed out")

    flaky.handle_tool_error = True

    @tool
    def remember(note: str, runtime: ToolRuntime) -> Command[Any]:
        """Store a note."""
        message = ToolMessage("noted", tool_call_id=runtime.tool_call_id or "")
        return Command(update={"messages": [message]})

    calls = [
        AIMessage("", tool_calls=[{"name": "remember", "args": {"note": "x"}, "id": "r1"}]),
        AIMessage("", tool_calls=[{"name": "flaky", "args": {}, "id": "f1"}]),
        AIMessage("", tool_calls=[{"name": "broken", "args": {}, "id": "b1"}]),
    ]
    model = chat(*calls, AIMessage("unreached"))
    agent = create_agent(model, [broken, flaky, remember], middleware=[RepeatToolGuard(link)])
    with pytest.raises(ValueError, match="disk on fire"):
        await agent.ainvoke({"messages": [HumanMessage("go")]})
    results = events.of(ToolResult)
    assert [(r.tool, r.is_error) for r in results] == [("remember", False), ("flaky", True), ("broken", True)]
    assert "noted" in results[0].content
    assert [r.content for r in results[1:]] == ["upstream timed out", "disk on fire"]


def test_the_sync_invoke_path_is_refused_by_langchain(link: GuardLink) -> None:
    agent = create_agent(chat(*loop(1)), [make_grep([])], middleware=[RepeatToolGuard(link)])
    with pytest.raises(TypeError, match='No synchronous function provided to "abefore_agent"'):
        agent.invoke({"messages": [HumanMessage("find the config loader")]})
