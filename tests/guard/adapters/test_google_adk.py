"""Google ADK: the real ``InMemoryRunner`` loop with a scripted ``BaseLlm``."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="google-adk is not installed: pip install 'repeat-tool-guard[google-adk]'")

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.plugins.multimodal_tool_results_plugin import MultimodalToolResultsPlugin
from google.adk.runners import InMemoryRunner
from google.adk.tools.agent_tool import AgentTool
from google.genai import types
from pydantic import Field
from structlog.testing import capture_logs

from bus import AgentStatus, ToolCall, ToolResult, UserMessage
from bus.testing import Capture
from guard import GENTLE_REMINDER, RECOMMENDED, TURNS_ADVISORY, TURNS_HALT_REASON
from guard.adapters import CANCELLED, GuardLink
from guard.adapters.google_adk import REMINDER_PREFIX, RepeatToolGuard
from guard.policies.rescue import advice_in
from tests.guard.adapters.conftest import ADVICE, GUARD_SAID, RESCUE_DENIED, TURNS_DENIED

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # ADK runs on asyncio only.


class LoopingLlm(BaseLlm):
    """Calls ``grep`` (``copies`` times in parallel) again and again until the
    latest function responses or notes carry one of the phrases ``until`` (by
    default anything the guard says; ``()`` never gives up), or ``per_turn``
    calls since the latest user text, then answers."""

    requests: list[list[types.Content]] = Field(default_factory=list)
    per_turn: int | None = None
    until: tuple[str, ...] = GUARD_SAID
    copies: int = 1
    same_id: str | None = None
    """One id for every call, as some model servers give (ADK keeps a model's ids)."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = list(llm_request.contents)
        self.requests.append(contents)
        text = " ".join(_texts(contents[-2:]) + [json.dumps(r) for r in _responses(contents[-2:])])
        since = 0
        for content in reversed(contents):
            parts = content.parts or []
            if content.role == "user" and any(p.text and not p.text.startswith(REMINDER_PREFIX) for p in parts):
                break
            since += sum(1 for p in parts if p.function_call)
        if any(phrase in text for phrase in self.until) or (self.per_turn and since >= self.per_turn):
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="I will stop.")]))
            return
        calls = [
            types.FunctionCall(
                name="grep", args={"pattern": "load_config"}, id=self.same_id or f"call-{len(self.requests)}-{n}"
            )
            for n in range(self.copies)
        ]
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=c) for c in calls]))


async def converse(
    link: GuardLink,
    runs: list[str],
    *prompts: str,
    replies: list[str] | None = None,
    before: tuple[BasePlugin, ...] = (),
    **model: Any,
) -> LoopingLlm:
    """Runs the prompts as user turns of one session with a ``LoopingLlm(**model)``
    and the guard after the plugins ``before``; the texts of the events the
    runner yields go to ``replies``."""

    def grep(pattern: str) -> dict[str, Any]:
        """Search the code."""
        runs.append(pattern)
        return {"hits": ["src/cfg.py:12: def load_config():"]}

    llm = LoopingLlm(model="looping", requests=[], **model)
    agent = LlmAgent(name="main", model=llm, tools=[grep])
    runner = InMemoryRunner(app=App(name="app", root_agent=agent, plugins=[*before, RepeatToolGuard(link)]))
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    for prompt in prompts:
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        async for event in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            if replies is not None and event.content is not None:
                replies.extend(_texts([event.content]))
    return llm


def _texts(contents: list[types.Content]) -> list[str]:
    return [p.text for c in contents for p in c.parts or [] if p.text]


def _responses(contents: list[types.Content]) -> list[dict[str, Any]]:
    """The function responses the model was sent, oldest first."""
    return [
        p.function_response.response or {} for c in contents for p in c.parts or [] if p.function_response is not None
    ]


async def test_reminder_reaches_the_next_model_request(link: GuardLink, events: Capture) -> None:
    runs: list[str] = []
    replies: list[str] = []
    model = await converse(link, runs, "find the config loader", replies=replies)
    assert len(runs) == 3
    assert replies == ["I will stop."], "the reminder is in the request only, not in the session's events"
    assert _texts(model.requests[3])[-1] == REMINDER_PREFIX + GENTLE_REMINDER
    response = model.requests[3][-2].parts[0].function_response  # type: ignore[index]
    assert response is not None
    assert response.response == {"hits": ["src/cfg.py:12: def load_config():"]}, "the tool result is not rewritten"
    assert events.of(ToolResult)[0].content == '{"hits":["src/cfg.py:12: def load_config():"]}', "published as JSON"
    assert [c.step for c in events.of(ToolCall)] == [1, 2, 3]
    assert [m.text for m in events.of(UserMessage)] == ["find the config loader"]


async def test_rescue_denies_the_third_call_before_it_runs_and_the_model_reads_why(rescue_link: GuardLink) -> None:
    events = Capture().attach(rescue_link.bus)
    runs: list[str] = []
    model = await converse(rescue_link, runs, "find the config loader")

    assert len(runs) == 2, "the third grep never ran"
    assert [r.denied_by for r in events.of(ToolResult)] == [None, None, "loop-rescue"]
    denied = events.of(ToolResult)[-1].content
    assert denied.startswith(f"{RESCUE_DENIED}\nYou have made this exact call 3 times in your last 3")
    assert advice_in(denied) is None, "the ask command is missing: the free local denial"
    assert _responses(model.requests[3])[-1] == {"error": denied}, "the model reads the denial as the response"


async def test_rescue_escalation_brings_the_ask_commands_advice_to_the_model(
    advice_link: GuardLink, asked: Path
) -> None:
    events = Capture().attach(advice_link.bus)
    runs: list[str] = []
    model = await converse(advice_link, runs, "find the config loader", until=(ADVICE,))

    assert runs == ["load_config"], "the 2nd call is denied, the 3rd escalated and denied with advice"
    denials = [r.content for r in events.of(ToolResult) if r.denied_by == "loop-rescue"]
    assert [advice_in(d) for d in denials] == [None, ADVICE]
    assert _responses(model.requests[3])[1:] == [{"error": d} for d in denials]
    question = asked.read_text()
    assert "## The agent's task\nfind the config loader\n" in question, "the user turn reached the guard"
    assert "src/cfg.py:12: def load_config():" in question, "so did the output the agent already had"


async def test_new_user_turn_resets_the_count(link: GuardLink, events: Capture) -> None:
    runs: list[str] = []
    model = await converse(link, runs, "find the config loader", "and once more", per_turn=2)
    assert len(runs) == 4
    assert not any(REMINDER_PREFIX in t for r in model.requests for t in _texts(r))
    assert [m.text for m in events.of(UserMessage)] == ["find the config loader", "and once more"]
    assert len([s for s in events.of(AgentStatus) if s.status == "started"]) == 1


async def test_turns_advises_then_denies_then_its_halt_request_answers_in_place_of_the_model(
    turns_link: GuardLink,
) -> None:
    events = Capture().attach(turns_link.bus)
    runs: list[str] = []
    replies: list[str] = []
    model = await converse(turns_link, runs, "find the config loader", "try again", replies=replies, until=())

    assert [c.step for c in events.of(ToolCall)][:4] == [1, 2, 3, 4], "one step per model call"
    assert not any(REMINDER_PREFIX in t for t in _texts(model.requests[1]))
    advisory = _texts(model.requests[2])[-1]
    assert advisory.startswith(REMINDER_PREFIX + TURNS_ADVISORY.split("{tool}")[0] + "grep with identical arguments")
    assert _responses(model.requests[3])[-1]["error"].startswith(TURNS_DENIED)
    assert len(model.requests) == 8, "each turn: the halt request answered in place of a 5th model call"
    halt = TURNS_HALT_REASON.format(tool="grep", count=4, denials=" and 2 denied calls")
    assert replies == [REMINDER_PREFIX + halt] * 2, "the user's next message ended the halt and the run started over"
    assert len(runs) == 4, "in each turn 2 calls ran and 2 were denied"


async def test_parallel_calls_of_one_response_are_one_turn(turns_link: GuardLink) -> None:
    events = Capture().attach(turns_link.bus)
    runs: list[str] = []
    model = await converse(turns_link, runs, "find the config loader", until=(TURNS_DENIED,), copies=2)

    assert [c.step for c in events.of(ToolCall)] == [1, 1, 2, 2, 3, 3]
    assert len(runs) == 4, "both copies of the 3rd response were denied"
    notes = [t for t in _texts(model.requests[2]) if t.startswith(REMINDER_PREFIX)]
    assert len(notes) == 1, "the 2nd response is the 2nd turn: one advisory, not one per copy"
    assert [r["error"][: len(TURNS_DENIED)] for r in _responses(model.requests[3])[-2:]] == [TURNS_DENIED] * 2


class ScriptedLlm(BaseLlm):
    """Answers with the next of ``script``: a ``(tool, args)`` call, or text."""

    script: list[tuple[str, dict[str, Any]] | str] = Field(default_factory=list)
    requests: list[list[types.Content]] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(list(llm_request.contents))
        step = self.script.pop(0)
        if isinstance(step, str):
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=step)]))
            return
        call = types.FunctionCall(name=step[0], args=step[1], id=f"lead-{len(self.requests)}")
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


def search(runs: list[str]) -> Any:
    def grep(pattern: str) -> dict[str, Any]:
        """Search the code."""
        runs.append(pattern)
        return {"hits": ["src/cfg.py:12: def load_config():"]}

    return grep


async def run_lead(link: GuardLink, lead: LlmAgent, prompt: str = "find the config loader") -> None:
    runner = InMemoryRunner(app=App(name="app", root_agent=lead, plugins=[RepeatToolGuard(link)]))
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text=prompt)])
    async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
        pass


GREP = ("grep", {"pattern": "load_config"})


async def test_transfer_target_is_a_subagent_of_its_parent_in_the_agent_tree(link: GuardLink, events: Capture) -> None:
    runs: list[str] = []
    helper_model = LoopingLlm(model="looping", requests=[], per_turn=2)
    helper = LlmAgent(name="helper", model=helper_model, tools=[search(runs)], description="Searches too.")
    script: list[tuple[str, dict[str, Any]] | str] = [GREP, GREP, ("transfer_to_agent", {"agent_name": "helper"})]
    lead = LlmAgent(name="lead", model=ScriptedLlm(model="s", script=script), tools=[search(runs)], sub_agents=[helper])
    await run_lead(link, lead)

    assert len(runs) == 4
    assert not any(REMINDER_PREFIX in t for r in helper_model.requests for t in _texts(r)), "2 + 2 calls, not 4"
    started = {s.agent.id.split("/")[1]: s.parent for s in events.of(AgentStatus) if s.agent and s.status == "started"}
    assert {k: v.split("/")[1] if v else None for k, v in started.items()} == {"lead": None, "helper": "lead"}


@pytest.mark.filterwarnings("ignore:The `plugins` argument is deprecated:DeprecationWarning")  # AgentTool's own Runner
async def test_agent_tool_runs_a_subagent_of_the_agent_calling_it_disposed_after_its_run(
    link: GuardLink, events: Capture
) -> None:
    runs: list[str] = []
    helper_model = LoopingLlm(model="looping", requests=[], per_turn=2)
    helper = LlmAgent(name="delegate", model=helper_model, tools=[search(runs)], description="Searches too.")
    script: list[tuple[str, dict[str, Any]] | str] = [GREP, GREP, ("delegate", {"request": "look too"}), GREP, "done"]
    lead_model = ScriptedLlm(model="s", script=script)
    await run_lead(link, LlmAgent(name="lead", model=lead_model, tools=[search(runs), AgentTool(helper)]))

    assert len(runs) == 5
    assert not any(REMINDER_PREFIX in t for r in helper_model.requests for t in _texts(r))
    (reminded,) = [r for r in lead_model.requests if REMINDER_PREFIX in " ".join(_texts(r[-1:]))]
    assert reminded is lead_model.requests[4], "the lead's own 3rd grep; the delegate tool is excluded from remind"
    statuses = [(s.agent.id.split("/")[1], s.status, s.parent) for s in events.of(AgentStatus) if s.agent]
    lead_id = next(s.agent.id for s in events.of(AgentStatus) if s.agent and s.agent.id.endswith("/lead"))
    assert statuses == [("lead", "started", None), ("delegate", "started", lead_id), ("delegate", "disposed", None)]
    assert [m.text for m in events.of(UserMessage)] == ["find the config loader"], "a delegated task is no user turn"


async def test_tool_error_is_an_error_result(link: GuardLink, events: Capture) -> None:
    def grep(pattern: str) -> dict[str, Any]:
        """Search the code."""
        raise RuntimeError("disk on fire")

    agent = LlmAgent(name="main", model=LoopingLlm(model="looping", requests=[]), tools=[grep])
    runner = InMemoryRunner(app=App(name="app", root_agent=agent, plugins=[RepeatToolGuard(link)]))
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="go")])
    with pytest.raises(RuntimeError, match="disk on fire"):
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass
    assert [(r.is_error, r.content) for r in events.of(ToolResult)] == [(True, "disk on fire")]


async def test_a_run_cancelled_while_its_tool_runs_answers_the_call_as_cancelled(
    link: GuardLink, events: Capture
) -> None:
    started = asyncio.Event()

    async def grep(pattern: str) -> dict[str, Any]:
        """Search the code."""
        started.set()
        await asyncio.sleep(30)
        return {"found": "never"}

    agent = LlmAgent(name="main", model=LoopingLlm(model="looping", requests=[]), tools=[grep])
    runner = InMemoryRunner(app=App(name="app", root_agent=agent, plugins=[RepeatToolGuard(link)]))
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="go")])

    async def run() -> None:
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass

    task = asyncio.create_task(run())
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [(r.is_error, r.content) for r in events.of(ToolResult)] == [(True, CANCELLED)]


async def test_sessions_beyond_max_sessions_are_disposed_least_recent_first(link: GuardLink, events: Capture) -> None:
    with pytest.raises(ValueError, match="max_sessions = 0: must be an integer >= 1"):
        RepeatToolGuard(link, max_sessions=0)
    llm = LoopingLlm(model="looping", requests=[], per_turn=1)
    agent = LlmAgent(name="main", model=llm, tools=[])
    runner = InMemoryRunner(app=App(name="app", root_agent=agent, plugins=[RepeatToolGuard(link, max_sessions=2)]))
    sessions = [(await runner.session_service.create_session(app_name="app", user_id="u")).id for _ in range(3)]
    for session in (sessions[0], sessions[1], sessions[0], sessions[2]):
        message = types.Content(role="user", parts=[types.Part(text="hello")])
        async for _event in runner.run_async(user_id="u", session_id=session, new_message=message):
            pass

    disposed = [s.agent.id for s in events.of(AgentStatus) if s.status == "disposed" and s.agent]
    assert disposed == [f"{sessions[1]}/main"], "the first session ran again after the second"
    assert sorted(a.agent.id for a in link.links()) == sorted(f"{s}/main" for s in (sessions[0], sessions[2]))


@pytest.mark.filterwarnings("ignore:SequentialAgent is deprecated:DeprecationWarning")  # still what pipelines use
async def test_each_user_turn_reaches_the_worker_of_a_pipeline() -> None:
    """The user's message goes to the root agent; the pipeline's worker, which
    makes the calls, works for it too: one lookup a turn is never a repeat."""
    from google.adk.agents import SequentialAgent

    link = GuardLink(config=RECOMMENDED)
    events = Capture().attach(link.bus)
    runs: list[str] = []
    worker = LlmAgent(name="worker", model=LoopingLlm(model="looping", requests=[], per_turn=1), tools=[search(runs)])
    pipeline = SequentialAgent(name="pipeline", sub_agents=[worker])
    runner = InMemoryRunner(app=App(name="app", root_agent=pipeline, plugins=[RepeatToolGuard(link)]))
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    for prompt in ("check it", "check it again", "run it again", "once more"):
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass
    assert len(runs) == 4
    assert not [r for r in events.of(ToolResult) if r.denied_by]
    said = [(m.agent.id.split("/")[1] if m.agent else "", m.text) for m in events.of(UserMessage)]
    assert said[-2:] == [("pipeline", "once more"), ("worker", "once more")]


def _mailer(
    link: GuardLink, sent: list[str], script: list[tuple[str, dict[str, Any]] | str], *before: BasePlugin
) -> InMemoryRunner:
    """A runner whose agent sends emails only once the user confirms each, the guard after ``before``."""
    from google.adk.tools.function_tool import FunctionTool

    def send_email(to: str) -> dict[str, str]:
        """Send an email."""
        sent.append(to)
        return {"status": "sent"}

    tool = FunctionTool(send_email, require_confirmation=True)
    agent = LlmAgent(name="main", model=ScriptedLlm(model="s", script=script), tools=[tool])
    return InMemoryRunner(app=App(name="app", root_agent=agent, plugins=[*before, RepeatToolGuard(link)]))


async def _confirming(runner: InMemoryRunner, prompt: str, *answers: bool | str) -> None:
    """Runs ``prompt`` in a new session, then answers each confirmation a run
    asks for with the next of ``answers``: ``True`` or ``False`` confirms or
    rejects it; text is the user saying something else instead."""
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text=prompt)])
    for answer in (*answers, None):
        asked = None
        async for event in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            for part in event.content.parts or [] if event.content else []:
                if part.function_call and part.function_call.name == "adk_request_confirmation":
                    asked = part.function_call
        if isinstance(answer, str):
            message = types.Content(role="user", parts=[types.Part(text=answer)])
        elif answer is not None:
            assert asked is not None
            reply = types.FunctionResponse(name="adk_request_confirmation", id=asked.id, response={"confirmed": answer})
            message = types.Content(role="user", parts=[types.Part(function_response=reply)])


async def test_a_tool_confirmation_the_client_sends_is_no_user_turn(link: GuardLink, events: Capture) -> None:
    sent: list[str] = []
    await _confirming(_mailer(link, sent, [("send_email", {"to": "alice"}), "done"]), "email alice", True)
    assert sent == ["alice"]
    assert [m.text for m in events.of(UserMessage)] == ["email alice"]


async def test_a_call_held_for_confirmation_is_one_call_and_a_rejected_one_is_cancelled(
    rescue_link: GuardLink,
) -> None:
    """The call the user is asked to confirm is decided when it is made (a
    denied one is never put to the user) and stays open while the user
    decides: the confirmed run is that call, answered once with what the tool
    returned; a rejected one never ran and is answered ``CANCELLED``. A call
    still waiting when the user moves on stays open: its pause is no result."""
    events = Capture().attach(rescue_link.bus)
    sent: list[str] = []
    script: list[tuple[str, dict[str, Any]] | str] = [
        ("send_email", {"to": "alice"}),
        ("send_email", {"to": "alice"}),
        ("send_email", {"to": "bob"}),
        "done",
    ]
    await _confirming(_mailer(rescue_link, sent, script), "email alice twice, then bob", True, False, "never mind")

    assert sent == ["alice"]
    assert [(c.call_id, c.args) for c in events.of(ToolCall)] == [
        ("lead-1", {"to": "alice"}),
        ("lead-2", {"to": "alice"}),
        ("lead-3", {"to": "bob"}),
    ], "the 2nd email to alice is its 2nd occurrence, not its 4th: rescue lets the user decide"
    answered = [(r.call_id, r.is_error, r.denied_by, r.content) for r in events.of(ToolResult)]
    assert answered == [("lead-1", False, None, '{"status":"sent"}'), ("lead-2", True, None, CANCELLED)]
    assert [c.call_id for agent in rescue_link.links() for c in agent.calls_in_flight()] == ["lead-3"]


async def test_a_confirmed_call_is_answered_once_behind_a_plugin_listed_first(link: GuardLink, events: Capture) -> None:
    """The guard never hears the pause or the confirmed run from its after-tool
    callback: the call stays open through the pause, and the model's next
    request answers it with the confirmed run's response, not the pause's;
    a call answered so is not answered again by a later request."""
    sent: list[str] = []
    script: list[tuple[str, dict[str, Any]] | str] = [
        ("send_email", {"to": "alice"}),
        ("send_email", {"to": "bob"}),
        "done",
    ]
    runner = _mailer(link, sent, script, MultimodalToolResultsPlugin())
    await _confirming(runner, "email alice, then bob", True, True)

    assert sent == ["alice", "bob"]
    assert [c.call_id for c in events.of(ToolCall)] == ["lead-1", "lead-2"]
    answered = [(r.call_id, r.content) for r in events.of(ToolResult)]
    assert answered == [("lead-1", '{"status":"sent"}'), ("lead-2", '{"status":"sent"}')]


async def test_a_plugin_listed_before_the_guard_hides_no_result_from_it(link: GuardLink, events: Capture) -> None:
    """ADK stops at the first plugin whose after-tool callback returns a value
    (its own ``MultimodalToolResultsPlugin`` returns every result), so the
    guard answers its open calls from the function responses the model is
    about to read: every call, also calls made under one id, gets its own
    result in time for the reminder. The order is warned about once."""
    runs: list[str] = []
    with capture_logs() as logs:
        model = await converse(
            link,
            runs,
            "find the config loader",
            "once more",
            before=(MultimodalToolResultsPlugin(),),
            copies=2,
            same_id="call_0",
        )

    assert len(runs) == 8, "in each turn the reminder after the 3rd call ends the loop at the next request"
    assert [_texts(model.requests[n])[-1] for n in (2, 5)] == [REMINDER_PREFIX + GENTLE_REMINDER] * 2
    assert [r.call_id for r in events.of(ToolResult)] == ["call_0", "call_0@1"] * 4
    assert not any(agent.open_calls() for agent in link.links())
    warned = [(log["first"], log["log_level"]) for log in logs if log["event"] == "guard.plugin_not_first"]
    assert warned == [("multimodal_tool_results_plugin", "warning")]


async def test_a_session_pushed_out_while_its_tool_runs_keeps_its_agent_until_the_tool_is_done(
    link: GuardLink, events: Capture
) -> None:
    """Past ``max_sessions`` the least recently active session goes, but not
    one whose tool is running: the tool's failure is recorded on its agent
    and reaches the agent's own error handler, and the session goes once the
    run that kept it is over, if it is still the oldest."""
    started, go = asyncio.Event(), asyncio.Event()

    async def deploy(env: str) -> dict[str, Any]:
        """Deploy."""
        started.set()
        await go.wait()
        raise ConnectionError("network down")

    def handle(tool: Any, args: dict[str, Any], tool_context: Any, error: Exception) -> dict[str, Any]:
        return {"error": f"deploy failed: {error}"}

    script: list[tuple[str, dict[str, Any]] | str] = [("deploy", {"env": "prod"}), GREP, "searched", "answered"]
    agent = LlmAgent(
        name="main",
        model=ScriptedLlm(model="s", script=script),
        tools=[deploy, search([])],
        on_tool_error_callback=handle,
    )
    runner = InMemoryRunner(app=App(name="app", root_agent=agent, plugins=[RepeatToolGuard(link, max_sessions=1)]))
    first, second = [(await runner.session_service.create_session(app_name="app", user_id="u")).id for _ in "ab"]

    async def run(session: str, prompt: str) -> list[str]:
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        said = [e async for e in runner.run_async(user_id="u", session_id=session, new_message=message)]
        return _texts([e.content for e in said if e.content])

    deploying = asyncio.create_task(run(first, "deploy"))
    await started.wait()
    await run(second, "search")
    go.set()
    assert await deploying == ["answered"]
    assert [(r.tool, r.is_error, r.content) for r in events.of(ToolResult)][-1] == ("deploy", True, "network down")
    disposed = [s.agent.id for s in events.of(AgentStatus) if s.status == "disposed" and s.agent]
    assert disposed == [f"{second}/main"]


async def _run_workflow(link: GuardLink, node: Any, *prompts: str) -> None:
    """Runs ``prompts`` as user turns of one session of an app whose root is a
    workflow with the one ``node``."""
    from google.adk.workflow import START, Workflow

    workflow = Workflow(name="flow", edges=[(START, node)])
    runner = InMemoryRunner(app=App(name="app", root_agent=workflow, plugins=[RepeatToolGuard(link)]))
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    for prompt in prompts:
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass


async def test_a_workflow_runs_guarded_its_agent_nodes_working_for_each_user_turn() -> None:
    """A workflow has no agent of its own: the user's turn reaches the agent
    node when it works, so one lookup a turn is no repeat, and a node's loop
    within a turn is still caught."""
    link = GuardLink(config=RECOMMENDED)
    events = Capture().attach(link.bus)
    runs: list[str] = []
    worker = LlmAgent(name="worker", model=LoopingLlm(model="looping", requests=[], per_turn=1), tools=[search(runs)])
    await _run_workflow(link, worker, "check it", "check it again", "run it again", "once more")
    assert len(runs) == 4
    assert not [r for r in events.of(ToolResult) if r.denied_by]
    assert [(m.agent.id.split("/")[1] if m.agent else "", m.text) for m in events.of(UserMessage)][-1] == (
        "worker",
        "once more",
    )

    looping = LlmAgent(name="worker", model=LoopingLlm(model="looping", requests=[], until=()), tools=[search(runs)])
    await _run_workflow(link, looping, "find the config loader")
    assert [r.denied_by for r in events.of(ToolResult)][-1] == "loop-detector"


async def test_a_workflows_tool_node_is_recorded_as_the_workflows_and_never_denied(
    link: GuardLink, events: Capture
) -> None:
    """A tool node runs with no agent, chosen by the workflow's code, not a
    model: its calls are the workflow's, recorded once they ran; a graph
    polling a job in a loop is never handed a denial as the node's output."""
    from google.adk.tools.function_tool import FunctionTool
    from google.adk.workflow import START, FunctionNode, Workflow

    checks: list[str] = []

    def check_job(job_id: str) -> dict[str, Any]:
        """Get the state of a batch job."""
        checks.append(job_id)
        return {"job_id": job_id, "state": "running" if len(checks) <= 15 else "succeeded"}

    def route(ctx: Any, node_input: Any = None) -> dict[str, str]:
        ctx.route = "again" if node_input["state"] == "running" else "done"
        return {"job_id": "job-42"}

    check, router = FunctionTool(check_job), FunctionNode(func=route, name="route")
    done = FunctionNode(func=lambda node_input=None: "ok", name="done")
    first = FunctionNode(func=lambda node_input=None: {"job_id": "job-42"}, name="first")
    workflow = Workflow(
        name="poller", edges=[(START, first), (first, check), (check, router), (router, {"again": check, "done": done})]
    )
    runner = InMemoryRunner(app=App(name="app", root_agent=workflow, plugins=[RepeatToolGuard(link)]))
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    started = types.Part(inline_data=types.Blob(mime_type="application/json", data=b'{"job": 42}'))  # no text
    message = types.Content(role="user", parts=[started])
    async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
        pass
    assert len(checks) == 16
    calls = events.of(ToolCall)
    assert [(c.agent.id.split("/")[1] if c.agent else "", c.tool, c.late) for c in calls] == [
        ("poller", "check_job", True)
    ] * 16
    assert not [r for r in events.of(ToolResult) if r.denied_by]


async def test_a_confirmed_tool_node_is_one_call_and_a_rejected_or_failing_one_is_recorded_as_such(
    link: GuardLink, events: Capture
) -> None:
    """ADK runs a tool node the user confirmed again under a new id: the
    call is recorded once, when it ran, and none is left open; one the user
    rejected never ran; one that raised is a failed call."""
    from google.adk.tools.function_tool import FunctionTool
    from google.adk.workflow import START, Workflow

    sent: list[str] = []

    def send_email(to: str) -> dict[str, str]:
        """Send an email."""
        sent.append(to)
        if to == "nobody":
            raise ValueError("no such mailbox")
        return {"status": "sent"}

    workflow = Workflow(name="flow", edges=[(START, FunctionTool(send_email, require_confirmation=True))])
    runner = InMemoryRunner(app=App(name="app", root_agent=workflow, plugins=[RepeatToolGuard(link)]))
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    for to, confirmed in (("alice", True), ("alice", True), ("bob", False), ("nobody", True)):
        message = types.Content(role="user", parts=[types.Part(text=json.dumps({"to": to}))])
        for _ in range(2):
            asked = None
            with contextlib.suppress(ValueError):  # the node raising ends the run with its error
                async for event in runner.run_async(user_id="u", session_id=session.id, new_message=message):
                    for part in event.content.parts or [] if event.content else []:
                        asked = part.function_call or asked
            if asked is None:
                break
            reply = types.FunctionResponse(name=asked.name, id=asked.id, response={"confirmed": confirmed})
            message = types.Content(role="user", parts=[types.Part(function_response=reply)])
    assert sent == ["alice", "alice", "nobody"]
    assert [json.loads(c.args)["to"] if isinstance(c.args, str) else c.args["to"] for c in events.of(ToolCall)] == [
        "alice",
        "alice",
        "nobody",
    ]
    assert [(r.content, r.is_error) for r in events.of(ToolResult)] == [('{"status":"sent"}', False)] * 2 + [
        ("no such mailbox", True)
    ]
