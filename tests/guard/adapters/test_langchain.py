"""LangChain: the real ``create_agent`` loop with a fake chat model that calls tools."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain", reason="langchain is not installed: pip install 'repeat-tool-guard[langchain]'")

from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from bus import AgentStatus, ToolCall, ToolResult, UserMessage
from bus.testing import Capture
from guard import GENTLE_REMINDER
from guard.adapters import GuardLink
from guard.adapters.langchain import REMINDER_KEY, RepeatToolGuard
from tests.guard.adapters.conftest import DENIAL, DenyRepeats, HaltAfter

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


def grep_call(n: int, tool: str = "grep") -> AIMessage:
    return AIMessage("", tool_calls=[{"name": tool, "args": {"pattern": "load_config"}, "id": f"{tool}-{n}"}])


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


async def test_denied_call_never_runs_and_the_model_reads_the_denial(link: GuardLink, events: Capture) -> None:
    DenyRepeats(limit=2).attach(link.bus)
    runs: list[str] = []
    model = chat(*loop(3))
    agent = create_agent(model, [make_grep(runs)], middleware=[RepeatToolGuard(link)])
    await agent.ainvoke({"messages": [HumanMessage("find the config loader")]})

    assert len(runs) == 2
    denial = model.requests[3][-2]
    assert isinstance(denial, ToolMessage)
    assert (denial.content, denial.status) == (DENIAL.format(count=2), "error")
    assert [r.denied_by for r in events.of(ToolResult)] == [None, None, "deny-repeats"]


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


async def test_halt_request_ends_the_run_before_the_next_model_call(link: GuardLink) -> None:
    HaltAfter(results=2).attach(link.bus)
    runs: list[str] = []
    model = chat(*loop(5))
    agent = create_agent(model, [make_grep(runs)], middleware=[RepeatToolGuard(link)])
    result = await agent.ainvoke({"messages": [HumanMessage("find the config loader")]})
    assert (len(runs), len(model.requests)) == (2, 2)
    assert isinstance(result["messages"][-1], ToolMessage)


async def test_tool_errors_and_commands_are_published(link: GuardLink, events: Capture) -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise ValueError("disk on fire")

    @tool
    def remember(note: str, runtime: ToolRuntime) -> Command[Any]:
        """Store a note."""
        message = ToolMessage("noted", tool_call_id=runtime.tool_call_id or "")
        return Command(update={"messages": [message]})

    calls = [
        AIMessage("", tool_calls=[{"name": "remember", "args": {"note": "x"}, "id": "r1"}]),
        AIMessage("", tool_calls=[{"name": "broken", "args": {}, "id": "b1"}]),
    ]
    agent = create_agent(chat(*calls, AIMessage("unreached")), [broken, remember], middleware=[RepeatToolGuard(link)])
    with pytest.raises(ValueError, match="disk on fire"):
        await agent.ainvoke({"messages": [HumanMessage("go")]})
    results = events.of(ToolResult)
    assert [(r.tool, r.is_error) for r in results] == [("remember", False), ("broken", True)]
    assert "noted" in results[0].content
    assert results[1].content == "disk on fire"
