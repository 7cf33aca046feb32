"""Google ADK: the real ``InMemoryRunner`` loop with a scripted ``BaseLlm``."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="google-adk is not installed: pip install 'repeat-tool-guard[google-adk]'")

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types
from pydantic import Field

from bus import AgentStatus, ToolCall, ToolResult, UserMessage
from bus.testing import Capture
from guard import GENTLE_REMINDER
from guard.adapters import GuardLink
from guard.adapters.google_adk import REMINDER_PREFIX, RepeatToolGuard
from tests.guard.adapters.conftest import DENIAL, HALT, DenyRepeats, HaltAfter

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """ADK runs on asyncio only."""
    return "asyncio"


class LoopingLlm(BaseLlm):
    """Calls ``grep`` again and again until its request carries a guard note
    (or ``per_turn`` calls since the latest user text), then answers."""

    requests: list[list[types.Content]] = Field(default_factory=list)
    per_turn: int | None = None

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = list(llm_request.contents)
        self.requests.append(contents)
        text = " ".join(p.text or "" for c in contents[-2:] for p in c.parts or [])
        since = 0
        for content in reversed(contents):
            parts = content.parts or []
            if content.role == "user" and any(p.text and not p.text.startswith(REMINDER_PREFIX) for p in parts):
                break
            since += sum(1 for p in parts if p.function_call)
        if REMINDER_PREFIX in text or "repeat-tool-guard test" in text or (self.per_turn and since >= self.per_turn):
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="I will stop.")]))
            return
        call = types.FunctionCall(name="grep", args={"pattern": "load_config"}, id=f"call-{len(self.requests)}")
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


async def converse(link: GuardLink, runs: list[str], *prompts: str, per_turn: int | None = None) -> LoopingLlm:
    def grep(pattern: str) -> dict[str, Any]:
        """Search the code."""
        runs.append(pattern)
        return {"hits": ["src/cfg.py:12: def load_config():"]}

    model = LoopingLlm(model="looping", requests=[], per_turn=per_turn)
    agent = LlmAgent(name="main", model=model, tools=[grep])
    runner = InMemoryRunner(app=App(name="app", root_agent=agent, plugins=[RepeatToolGuard(link)]))
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    for prompt in prompts:
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass
    return model


def _texts(contents: list[types.Content]) -> list[str]:
    return [p.text for c in contents for p in c.parts or [] if p.text]


async def test_reminder_reaches_the_next_model_request(link: GuardLink, events: Capture) -> None:
    runs: list[str] = []
    model = await converse(link, runs, "find the config loader")
    assert len(runs) == 3
    assert _texts(model.requests[3])[-1] == REMINDER_PREFIX + GENTLE_REMINDER
    response = model.requests[3][-2].parts[0].function_response  # type: ignore[index]
    assert response is not None
    assert response.response == {"hits": ["src/cfg.py:12: def load_config():"]}, "the tool result is not rewritten"
    assert [c.step for c in events.of(ToolCall)] == [1, 2, 3]
    assert [m.text for m in events.of(UserMessage)] == ["find the config loader"]


async def test_denied_call_never_runs_and_the_model_reads_the_denial(link: GuardLink, events: Capture) -> None:
    DenyRepeats(limit=2).attach(link.bus)
    runs: list[str] = []
    model = await converse(link, runs, "find the config loader")
    assert len(runs) == 2
    response = model.requests[3][-2].parts[0].function_response  # type: ignore[index]
    assert response is not None
    assert response.response == {"error": DENIAL.format(count=2)}
    assert [r.denied_by for r in events.of(ToolResult)] == [None, None, "deny-repeats"]


async def test_new_user_turn_resets_the_count(link: GuardLink, events: Capture) -> None:
    runs: list[str] = []
    model = await converse(link, runs, "find the config loader", "and once more", per_turn=2)
    assert len(runs) == 4
    assert not any(REMINDER_PREFIX in t for r in model.requests for t in _texts(r))
    assert [m.text for m in events.of(UserMessage)] == ["find the config loader", "and once more"]
    assert len([s for s in events.of(AgentStatus) if s.status == "started"]) == 1


async def test_halt_request_answers_in_place_of_the_model(link: GuardLink) -> None:
    HaltAfter(results=2).attach(link.bus)
    runs: list[str] = []
    model = await converse(link, runs, "find the config loader")
    assert (len(runs), len(model.requests)) == (2, 2)
    assert HALT


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
