"""LangChain: the real ``create_agent`` loop with a fake chat model that calls tools."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain", reason="langchain is not installed: pip install 'repeat-tool-guard[langchain]'")

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ToolRetryMiddleware
from langchain.tools import ToolRuntime
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt
from structlog.testing import capture_logs

from bus import AgentStatus, Bus, ToolCall, ToolResult, UserMessage
from bus.testing import Capture
from guard import GENTLE_REMINDER, TURNS_ADVISORY, TURNS_HALT_REASON, Config, Guard, RemindConfig
from guard.adapters import CANCELLED, REMINDER_PREFIX, GuardLink
from guard.adapters.langchain import REMINDER_KEY, RepeatToolGuard, halt_reason, is_reminder
from guard.policies.rescue import advice_in
from guard.telemetry import GuardTelemetry
from tests.claude_cli import text, tool_use
from tests.fake_providers import DIALECTS, FakeChatAPI
from tests.guard.adapters.conftest import ADVICE, RESCUE_DENIED, TURNS_DENIED

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # LangGraph's async runner is asyncio-based.


class ScriptedChat(GenericFakeChatModel):
    """LangChain's fake chat model, recording each request and accepting tools."""

    requests: list[list[BaseMessage]]

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.requests.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


class TwiceThenDone(ScriptedChat):
    """Calls ``grep`` until the conversation holds two tool results, then
    answers: whoever runs it, and however runs interleave, twice per run."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.requests.append(list(messages))
        if sum(isinstance(m, ToolMessage) for m in messages) >= 2:
            return ChatResult(generations=[ChatGeneration(message=AIMessage("done"))])
        reply = grep_call(len(self.requests))
        return ChatResult(generations=[ChatGeneration(message=reply)])


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


def _stack(*middleware: AgentMiddleware[Any, Any, Any]) -> list[AgentMiddleware[Any, Any, Any]]:
    """Middleware of different state types in one list, outermost first."""
    return list(middleware)


def guard_notes(messages: list[BaseMessage]) -> list[str]:
    return [m.text for m in messages if is_reminder(m)]


async def test_reminder_follows_the_tool_result_before_the_next_model_call(link: GuardLink, events: Capture) -> None:
    runs: list[str] = []
    model = chat(*loop(3))
    agent = create_agent(model, [make_grep(runs)], middleware=[RepeatToolGuard(link)])
    result = await agent.ainvoke({"messages": [HumanMessage("find the config loader")]})

    assert len(runs) == 3
    fourth = model.requests[3]
    assert isinstance(fourth[-2], ToolMessage)
    assert fourth[-2].content == "src/cfg.py:12: def load_config():", "the tool result is not rewritten"
    assert isinstance(fourth[-1], HumanMessage)
    assert fourth[-1].content == REMINDER_PREFIX + GENTLE_REMINDER
    assert fourth[-1].additional_kwargs == {REMINDER_KEY: "grep-2"}
    assert not any(guard_notes(r) for r in model.requests[:3])
    assert guard_notes(result["messages"]) == [REMINDER_PREFIX + GENTLE_REMINDER], "kept in the conversation"
    assert halt_reason(result) is None, "the run finished on its own"
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
    assert not any(guard_notes(r) for r in model.requests)
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

    assert not any(guard_notes(r) for r in child_model.requests)
    reminded = [r for r in parent_model.requests if is_reminder(r[-1])]
    assert len(reminded) == 1, "the lead's 3rd grep, not the child's calls, triggers it"
    statuses = [(s.agent.id if s.agent else "", s.status, s.parent) for s in events.of(AgentStatus)]
    assert statuses == [
        ("run-1", "started", None),
        ("run-1/sub-1", "started", "run-1"),
        ("run-1/sub-1", "disposed", None),
        ("run-1", "disposed", None),
    ]
    assert [m.text for m in events.of(UserMessage)] == ["find the config loader"], "a delegated task is no user turn"


async def test_runs_without_a_thread_at_once_share_no_agent(rescue_link: GuardLink) -> None:
    """One agent graph serving two users at once with no checkpointer or
    ``thread_id`` (no conversation to go on): each run is an agent of its
    own, gone when it ends, so neither run's calls count toward the other's
    and neither's prompt resets the other."""
    events = Capture().attach(rescue_link.bus)

    @tool
    async def grep(pattern: str) -> str:
        """Search the code."""
        await asyncio.sleep(0.01)
        return "src/cfg.py:12: def load_config():"

    model = TwiceThenDone(messages=iter([]), requests=[])
    agent = create_agent(model, [grep], middleware=[RepeatToolGuard(rescue_link)])
    prompts = ("user A: find the config loader", "user B: find the config loader")
    results = await asyncio.gather(*(agent.ainvoke({"messages": [HumanMessage(p)]}) for p in prompts))

    assert [r["messages"][-1].text for r in results] == ["done", "done"]
    assert not [r for r in events.of(ToolResult) if r.denied_by], "each user's 2nd call is their 2nd, not the 3rd"
    assert sorted((m.agent.id if m.agent else "", m.text) for m in events.of(UserMessage)) == [
        ("run-1", prompts[0]),
        ("run-2", prompts[1]),
    ]
    assert Counter(s.status for s in events.of(AgentStatus)) == Counter({"started": 2, "disposed": 2})
    assert rescue_link.links() == []


async def test_turns_advises_then_denies_then_its_halt_request_ends_the_run(turns_link: GuardLink) -> None:
    events = Capture().attach(turns_link.bus)
    runs: list[str] = []
    model = chat(*loop(6))
    agent = create_agent(model, [make_grep(runs)], middleware=[RepeatToolGuard(turns_link)])
    result = await agent.ainvoke({"messages": [HumanMessage("find the config loader")]})

    assert len(runs) == 2, "turns 3 and 4 were denied"
    assert [c.step for c in events.of(ToolCall)] == [1, 2, 3, 4], "one step per model call"
    assert not guard_notes(model.requests[1])
    (advisory,) = guard_notes(model.requests[2])
    advised = TURNS_ADVISORY.split("{tool}")[0] + "grep with identical arguments in 2"
    assert advisory.startswith(REMINDER_PREFIX + advised)
    assert model.requests[3][-1].text.startswith(TURNS_DENIED)
    assert len(model.requests) == 4, "the run ended before a 5th model call"
    last = result["messages"][-1]
    assert isinstance(last, ToolMessage)
    assert last.text.startswith(TURNS_DENIED), "the 4th call's denial, which carried the halt request"
    halt = TURNS_HALT_REASON.format(tool="grep", count=4, denials=" and 2 denied calls")
    assert [s.reason for s in events.of(AgentStatus) if s.status == "halt-requested"] == [halt]
    assert halt_reason(result) == halt, "the caller can tell the halt from a normal finish"


async def test_parallel_calls_of_one_response_are_one_turn(turns_link: GuardLink) -> None:
    events = Capture().attach(turns_link.bus)
    runs: list[str] = []
    model = chat(*(grep_call(i, copies=2) for i in range(3)), AIMessage("done"))
    agent = create_agent(model, [make_grep(runs)], middleware=[RepeatToolGuard(turns_link)])
    await agent.ainvoke({"messages": [HumanMessage("find the config loader")]})

    assert [c.step for c in events.of(ToolCall)] == [1, 1, 2, 2, 3, 3]
    assert len(runs) == 4, "both copies of the 3rd response were denied"
    notes = guard_notes(model.requests[2])
    assert len(notes) == 1, "the 2nd response is the 2nd turn: one advisory, not one per copy"
    assert notes[0].startswith(REMINDER_PREFIX + TURNS_ADVISORY.split("{tool}")[0])
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


PROVIDER_PACKAGES = {
    "anthropic": "langchain_anthropic",
    "openai": "langchain_openai",
    "gemini": "langchain_google_genai",
}


@pytest.fixture(params=DIALECTS)
def provider(request: pytest.FixtureRequest) -> Iterator[FakeChatAPI]:
    """A provider's real LangChain chat model class sending real HTTP to a scripted local API."""
    pytest.importorskip(PROVIDER_PACKAGES[request.param], reason="pip install 'repeat-tool-guard[langchain]'")
    api = FakeChatAPI(request.param)
    try:
        yield api
    finally:
        api.close()


def said_after_the_last_tool_result(api: FakeChatAPI, index: int) -> list[str]:
    """The texts of request ``index`` after its last tool result, in each provider's own wire format."""
    body = api.requests[index]
    if api.dialect == "anthropic":
        last = body["messages"][-1]
        assert last["role"] == "user"
        blocks = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
        results = [i for i, b in enumerate(blocks) if b["type"] == "tool_result"]
        return [b["text"] for b in blocks[results[-1] + 1 :] if b["type"] == "text"]
    if api.dialect == "openai":
        messages = body["messages"]
        tool = max(i for i, m in enumerate(messages) if m["role"] == "tool")
        assert all(m["role"] == "user" for m in messages[tool + 1 :])
        return [m["content"] for m in messages[tool + 1 :]]
    contents = body["contents"]
    response = max(i for i, c in enumerate(contents) if any("functionResponse" in p for p in c["parts"]))
    assert all(c["role"] == "user" for c in contents[response + 1 :])
    return [p["text"] for c in contents[response + 1 :] for p in c["parts"] if "text" in p]


async def test_reminder_reaches_the_model_on_every_provider_beside_a_system_prompt(
    provider: FakeChatAPI, link: GuardLink
) -> None:
    """Providers take one leading system message: a reminder in the middle
    of the conversation must be something each request builder accepts and
    keeps (Anthropic refused a second system message; Gemini folded it into
    the system instruction, away from the result it is about)."""
    provider.script(*[[tool_use("grep", {"pattern": "load_config"})]] * 3, [text("Found it.")])
    runs: list[str] = []
    agent = create_agent(
        provider.chat_model(), [make_grep(runs)], system_prompt="You are terse.", middleware=[RepeatToolGuard(link)]
    )
    result = await agent.ainvoke({"messages": [HumanMessage("find the config loader")]})

    assert result["messages"][-1].text == "Found it."
    assert len(provider.requests) == 4
    assert [said_after_the_last_tool_result(provider, n) for n in (1, 2)] == [[], []]
    assert said_after_the_last_tool_result(provider, 3) == [REMINDER_PREFIX + GENTLE_REMINDER]
    assert json.dumps(provider.requests[3]).count("You are terse.") == 1, "the system prompt is untouched"


async def test_threads_beyond_max_sessions_are_disposed_oldest_first(link: GuardLink, events: Capture) -> None:
    with pytest.raises(ValueError, match="max_sessions = 0: must be an integer >= 1"):
        RepeatToolGuard(link, max_sessions=0)
    guard = RepeatToolGuard(link, max_threads=2)  # the runtime-specific name of max_sessions
    model = chat(*(AIMessage(f"reply {n}") for n in range(4)))
    agent = create_agent(model, [make_grep([])], middleware=[guard], checkpointer=InMemorySaver())
    for thread in ("t1", "t2", "t1", "t3"):
        await agent.ainvoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": thread}})

    disposed = [s.agent.id for s in events.of(AgentStatus) if s.status == "disposed" and s.agent]
    assert disposed == ["t2"], "t1 ran again after t2, so t2 was the least recently run"
    assert sorted(a.agent.id for a in link.links()) == ["t1", "t3"]


async def test_a_halted_thread_runs_again_after_a_user_turn_and_finishes_normally(turns_link: GuardLink) -> None:
    model = chat(*(grep_call(i) for i in range(4)), AIMessage("fresh start"))
    agent = create_agent(model, [make_grep([])], middleware=[RepeatToolGuard(turns_link)], checkpointer=InMemorySaver())
    thread: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    halted = await agent.ainvoke({"messages": [HumanMessage("find the config loader")]}, thread)
    again = await agent.ainvoke({"messages": [HumanMessage("try something else")]}, thread)

    assert halt_reason(halted) is not None
    assert again["messages"][-1].text == "fresh start"
    assert halt_reason(again) is None


async def test_a_subagent_whose_run_raises_is_disposed_with_the_tool_call(link: GuardLink, events: Capture) -> None:
    guard = RepeatToolGuard(link)

    @tool
    def explode() -> str:
        """Fails."""
        raise RuntimeError("child failed")

    child = create_agent(
        chat(AIMessage("", tool_calls=[{"name": "explode", "args": {}, "id": "e1"}])), [explode], middleware=[guard]
    )

    @tool
    async def delegate(task: str) -> str:
        """Hand a task to a helper agent."""
        try:
            await child.ainvoke({"messages": [HumanMessage(task)]})
        except RuntimeError as exc:
            return f"helper failed: {exc}"
        return "unreached"

    hand_off = AIMessage("", tool_calls=[{"name": "delegate", "args": {"task": "go"}, "id": "d1"}])
    lead = create_agent(chat(hand_off, AIMessage("lead done")), [delegate], middleware=[guard])
    result = await lead.ainvoke({"messages": [HumanMessage("start")]})

    assert result["messages"][-1].text == "lead done"
    statuses = [(s.agent.id if s.agent else "", s.status) for s in events.of(AgentStatus)]
    assert statuses == [
        ("run-1", "started"),
        ("run-1/sub-1", "started"),
        ("run-1/sub-1", "disposed"),
        ("run-1", "disposed"),
    ]
    assert link.links() == []


async def test_a_tool_waiting_on_interrupts_is_one_call_that_never_failed(link: GuardLink, events: Capture) -> None:
    """A tool that asks a human with ``interrupt()`` pauses the run and runs
    again from its start on each resume: the same call, decided once, with
    one result when it finishes."""
    questions = ["date?", "hotel?", "seat?", "meal?", "insurance?", "confirm?"]

    @tool
    def book_trip(city: str) -> str:
        """Book a trip, asking the user for each detail."""
        return f"booked {city}: {[interrupt(q) for q in questions]}"

    model = chat(
        AIMessage("", tool_calls=[{"name": "book_trip", "args": {"city": "Rome"}, "id": "b1"}]), AIMessage("ok")
    )
    agent = create_agent(model, [book_trip], middleware=[RepeatToolGuard(link)], checkpointer=InMemorySaver())
    thread: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    result = await agent.ainvoke({"messages": [HumanMessage("book me a trip to Rome")]}, thread)
    asked = 0
    while "__interrupt__" in result:
        asked += 1
        result = await agent.ainvoke(Command(resume=f"answer {asked}"), thread)
    assert asked == len(questions)
    assert result["messages"][-1].text == "ok"
    assert [c.call_id for c in events.of(ToolCall)] == ["b1"]
    (booked,) = events.of(ToolResult)
    assert (booked.is_error, booked.content.startswith("booked Rome:")) == (False, True)


async def test_a_run_whose_thread_was_disposed_meanwhile_goes_on_with_its_agent_started_again(
    link: GuardLink, events: Capture
) -> None:
    """More threads start than ``max_sessions`` while one still runs (a
    human-in-the-loop pause here), or the run resumes in a middleware that
    never started it (a restart with a persistent checkpointer)."""

    @tool
    def deploy(target: str) -> str:
        """Deploy after a human says yes."""
        return f"deployed {target}: {interrupt('go?')}"

    call = AIMessage("", tool_calls=[{"name": "deploy", "args": {"target": "prod"}, "id": "d1"}])
    checkpoints = InMemorySaver()
    first = RepeatToolGuard(link, max_sessions=1)
    agent = create_agent(
        chat(call, AIMessage("hi"), AIMessage("ok"), call), [deploy], middleware=[first], checkpointer=checkpoints
    )
    t1: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    assert "__interrupt__" in await agent.ainvoke({"messages": [HumanMessage("deploy prod")]}, t1)
    await agent.ainvoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t2"}})  # t1 disposed
    resumed = await agent.ainvoke(Command(resume="yes"), t1)
    assert resumed["messages"][-1].text == "ok"

    restarted = create_agent(
        chat(AIMessage("ok")), [deploy], middleware=[RepeatToolGuard(link)], checkpointer=checkpoints
    )
    t3: RunnableConfig = {"configurable": {"thread_id": "t3"}}
    await agent.ainvoke({"messages": [HumanMessage("deploy prod")]}, t3)
    assert (await restarted.ainvoke(Command(resume="yes"), t3))["messages"][-1].text == "ok"
    statuses = [(s.agent.id if s.agent else "", s.status) for s in events.of(AgentStatus)]
    assert ("t1", "disposed") in statuses
    assert statuses.count(("t1", "started")) == 2
    assert [r.content for r in events.of(ToolResult)] == ["deployed prod: yes", "deployed prod: yes"]


async def test_parallel_calls_sharing_one_id_each_get_their_result(link: GuardLink, events: Capture) -> None:
    """Some OpenAI-compatible servers give every call of a response one id.
    Each tool waits for the other to start, so both calls are open at once
    (a call made after its namesake's result is a new call under the same id),
    and the second made ends first: each result is recorded on its own call."""
    runs: list[str] = []
    both_started = asyncio.Event()

    @tool
    async def grep(pattern: str) -> str:
        """Search the code."""
        runs.append(pattern)
        if len(runs) == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), 10)
        await asyncio.sleep(0.05 if pattern == "load_config" else 0)
        return f"found {pattern}"

    same_id = AIMessage(
        "",
        tool_calls=[{"name": "grep", "args": {"pattern": p}, "id": "call_0"} for p in ("load_config", "save_config")],
    )
    agent = create_agent(chat(same_id, AIMessage("done")), [grep], middleware=[RepeatToolGuard(link)])
    result = await agent.ainvoke({"messages": [HumanMessage("find both")]})
    assert result["messages"][-1].text == "done"
    assert sorted(runs) == ["load_config", "save_config"]
    assert sorted(c.call_id for c in events.of(ToolCall)) == ["call_0", "call_0@1"]
    assert sorted(r.call_id for r in events.of(ToolResult)) == ["call_0", "call_0@1"]
    assert [(r.args["pattern"], r.content) for r in events.of(ToolResult)] == [
        ("save_config", "found save_config"),
        ("load_config", "found load_config"),
    ]


async def test_a_run_cancelled_while_its_tool_runs_leaves_no_call_open_to_take_a_later_result(
    link: GuardLink, events: Capture
) -> None:
    """The cancelled call is answered as cancelled; the thread's next run,
    whose model reuses the call id, pairs each result with its own call."""
    started = asyncio.Event()
    slow = [True]

    @tool
    async def grep(pattern: str) -> str:
        """Search the code."""
        started.set()
        if slow[0]:
            await asyncio.sleep(30)
        return f"found {pattern}"

    def calling(pattern: str) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": "grep", "args": {"pattern": pattern}, "id": "call_0"}])

    guard = RepeatToolGuard(link)
    thread: RunnableConfig = {"configurable": {"thread_id": "th"}}
    first = create_agent(chat(calling("a"), AIMessage("done")), [grep], middleware=[guard])
    run = asyncio.create_task(first.ainvoke({"messages": [HumanMessage("go")]}, thread))
    await asyncio.wait_for(started.wait(), 10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    slow[0] = False
    second = create_agent(chat(calling("b"), calling("c"), AIMessage("done")), [grep], middleware=[guard])
    await second.ainvoke({"messages": [HumanMessage("again")]}, thread)
    calls, results = events.of(ToolCall), events.of(ToolResult)
    assert [r.seq for r in results] == [c.seq + 1 for c in calls], "each result follows its own call"
    assert [(c.args["pattern"], r.content, r.is_error) for c, r in zip(calls, results, strict=True)] == [
        ("a", CANCELLED, True),
        ("b", "found b", False),
        ("c", "found c", False),
    ]
    assert [r.args["pattern"] for r in results] == ["a", "b", "c"], "the log pairs them alike"
    assert [agent.open_calls() for agent in link.links()] == [0]


async def test_a_tool_handing_control_to_a_parent_graph_did_not_fail(link: GuardLink, events: Capture) -> None:
    from langgraph.errors import ParentCommand

    @tool
    def hand_over(team: str) -> str:
        """Hand the task to another team of the parent graph."""
        raise ParentCommand(Command(graph=Command.PARENT, goto=team))

    call = AIMessage("", tool_calls=[{"name": "hand_over", "args": {"team": "billing"}, "id": "h1"}])
    agent = create_agent(chat(call, AIMessage("done")), [hand_over], middleware=[RepeatToolGuard(link)])
    with pytest.raises(ParentCommand):  # no parent graph here: it reaches the caller, as LangGraph raises it
        await agent.ainvoke({"messages": [HumanMessage("route it")]})
    (handed,) = events.of(ToolResult)
    assert (handed.call_id, handed.is_error) == ("h1", False)


async def test_tools_waiting_on_interrupts_are_remembered_up_to_a_bound(
    link: GuardLink, events: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import guard.adapters.langchain as middleware

    monkeypatch.setattr(middleware, "PAUSED_KEPT", 1)

    @tool
    def confirm(what: str) -> str:
        """Ask the user to confirm."""
        return f"{what}: {interrupt('sure?')}"

    def asking(n: int) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": "confirm", "args": {"what": "deploy"}, "id": f"c{n}"}])

    model = chat(asking(1), asking(2), AIMessage("ok"), AIMessage("ok"))
    agent = create_agent(model, [confirm], middleware=[RepeatToolGuard(link)], checkpointer=InMemorySaver())
    t1: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    t2: RunnableConfig = {"configurable": {"thread_id": "t2"}}
    await agent.ainvoke({"messages": [HumanMessage("deploy")]}, t1)
    await agent.ainvoke({"messages": [HumanMessage("deploy")]}, t2)  # t1's pause is forgotten
    await agent.ainvoke(Command(resume="yes"), t1)
    await agent.ainvoke(Command(resume="yes"), t2)
    assert [c.call_id for c in events.of(ToolCall)] == ["c1", "c2", "c1@1"], "t1's resume is decided as a call again"


def flaky_fetch(attempts: list[str]) -> tuple[Any, ToolRetryMiddleware, AIMessage]:
    """A ``fetch`` tool whose first two attempts raise a connection error,
    LangChain's retry middleware for it, and one model call of it."""

    @tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        attempts.append(url)
        if len(attempts) <= 2:
            raise ConnectionError("connection reset by peer")
        return "<html>the page</html>"

    retry = ToolRetryMiddleware(max_retries=3, initial_delay=0.001, jitter=False, retry_on=(ConnectionError,))
    call = AIMessage("", tool_calls=[{"name": "fetch", "args": {"url": "https://example.org"}, "id": "call-1"}])
    return fetch, retry, call


async def test_a_retry_middleware_listed_before_the_guard_retries_one_call_the_model_made_once(
    rescue_link: GuardLink,
) -> None:
    events = Capture().attach(rescue_link.bus)
    attempts: list[str] = []

    fetch, retry, call = flaky_fetch(attempts)
    agent = create_agent(chat(call, AIMessage("done")), [fetch], middleware=_stack(retry, RepeatToolGuard(rescue_link)))
    with capture_logs() as logs:
        result = await agent.ainvoke({"messages": [HumanMessage("get the page")]})

    assert len(attempts) == 3, "the third attempt ran: no retry is denied as a repeat"
    assert [m.content for m in result["messages"] if isinstance(m, ToolMessage)] == ["<html>the page</html>"]
    assert [c.call_id for c in events.of(ToolCall)] == ["call-1"], "the model's one call"
    assert [(r.call_id, r.is_error) for r in events.of(ToolResult)] == [("call-1", True)], "its first outcome"
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["guard.retried_inside"]


async def test_a_guard_listed_before_retry_middleware_records_the_calls_final_outcome(link: GuardLink) -> None:
    events = Capture().attach(link.bus)
    attempts: list[str] = []

    fetch, retry, call = flaky_fetch(attempts)
    agent = create_agent(chat(call, AIMessage("done")), [fetch], middleware=_stack(RepeatToolGuard(link), retry))
    with capture_logs() as logs:
        await agent.ainvoke({"messages": [HumanMessage("get the page")]})

    assert len(attempts) == 3
    assert [(r.call_id, r.content) for r in events.of(ToolResult)] == [("call-1", "<html>the page</html>")]
    assert not [e for e in logs if e["log_level"] == "warning"]


@pytest.fixture
def openinference_spans() -> Iterator[tuple[Any, Any]]:
    """LangChain traced by OpenInference's instrumentation (Phoenix's own
    setup) into an in-memory exporter: the provider and what it exported."""
    instrumentation = pytest.importorskip("openinference.instrumentation.langchain")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    instrumentor = instrumentation.LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    yield provider, spans
    instrumentor.uninstrument()


async def test_under_openinference_tracing_the_guards_actions_land_in_the_runs_trace(
    openinference_spans: tuple[Any, Any],
) -> None:
    provider, spans = openinference_spans
    telemetry = GuardTelemetry(tracer_provider=provider, runtime="langchain")
    bus = Bus()
    Guard(Config(remind=RemindConfig(thresholds=(2, 3))), on_action=telemetry.on_action).attach(bus)
    agent = create_agent(chat(*loop(3)), [make_grep([])], middleware=[RepeatToolGuard(GuardLink(bus))])
    await agent.ainvoke({"messages": [HumanMessage("find the config loader")]})

    finished = spans.get_finished_spans()
    assert len({span.context.trace_id for span in finished}) == 1, "one trace: the run's"
    events = [(span.name, event.name) for span in finished for event in span.events]
    assert events == [("tools", "repeat_tool_guard.remind"), ("tools", "repeat_tool_guard.remind")]


async def test_parallel_calls_sharing_an_id_retried_by_a_middleware_are_each_one_call(link: GuardLink) -> None:
    events = Capture().attach(link.bus)
    attempts: list[str] = []

    both_tried = asyncio.Event()

    @tool
    async def fetch(url: str) -> str:
        """Fetch a page."""
        attempts.append(url)
        if attempts.count(url) == 1:  # both first attempts fail together, before either is retried
            if len(attempts) == 2:
                both_tried.set()
            await both_tried.wait()
            raise ConnectionError("connection reset by peer")
        return f"page {url}"

    calls = AIMessage("", tool_calls=[{"name": "fetch", "args": {"url": u}, "id": "call_0"} for u in ("a", "b")])
    retry = ToolRetryMiddleware(max_retries=2, initial_delay=0.001, jitter=False, retry_on=(ConnectionError,))
    agent = create_agent(chat(calls, AIMessage("done")), [fetch], middleware=_stack(retry, RepeatToolGuard(link)))
    result = await agent.ainvoke({"messages": [HumanMessage("get both pages")]})

    assert sorted(m.text for m in result["messages"] if isinstance(m, ToolMessage)) == ["page a", "page b"]
    assert sorted((c.call_id, c.args["url"]) for c in events.of(ToolCall)) == [("call_0", "a"), ("call_0@1", "b")]


async def test_a_call_run_again_by_a_resume_after_its_run_crashed_is_decided_again(link: GuardLink) -> None:
    """No retry middleware: the application resumes the thread from its
    checkpoint (``ainvoke(None, ...)``), and the call runs again in a run of its own."""
    events = Capture().attach(link.bus)
    attempts: list[str] = []

    @tool
    async def deploy(env: str) -> str:
        """Deploy."""
        attempts.append(env)
        if len(attempts) < 3:
            raise RuntimeError("registry unavailable")
        return "deployed"

    call = AIMessage("", tool_calls=[{"name": "deploy", "args": {"env": "prod"}, "id": "d1"}])
    agent = create_agent(
        chat(call, AIMessage("done")), [deploy], middleware=[RepeatToolGuard(link)], checkpointer=InMemorySaver()
    )
    thread: RunnableConfig = {"configurable": {"thread_id": "t"}}
    given: Any = {"messages": [HumanMessage("deploy")]}
    with capture_logs() as logs:
        for _ in range(3):
            with contextlib.suppress(RuntimeError):
                await agent.ainvoke(given, thread)
            given = None
    assert [(r.call_id, r.content) for r in events.of(ToolResult)] == [
        ("d1", "registry unavailable"),
        ("d1", "registry unavailable"),
        ("d1", "deployed"),
    ], "each run recorded, as it ran"
    assert "guard.retried_inside" not in [e["event"] for e in logs]
