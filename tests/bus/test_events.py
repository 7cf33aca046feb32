"""Event structs: immutable, and a result answers its call."""

from __future__ import annotations

import msgspec
import pytest

from bus import EVENT_TYPES, Agent, AgentStatus, ContextMessage, Decision, ToolCall, ToolResult, UserMessage


def test_result_answering_a_call_carries_its_identity() -> None:
    agent = Agent("main")
    call = ToolCall(agent=agent, call_id="c7", step=3, tool="grep", args={"q": "x"})
    result = ToolResult.answering(call, "denied: loop", is_error=True, denied_by="guard")
    assert (result.agent, result.call_id, result.step, result.tool, result.args) == (agent, "c7", 3, "grep", {"q": "x"})
    assert (result.content, result.is_error, result.denied_by) == ("denied: loop", True, "guard")
    plain = ToolResult.answering(call, "ok")
    assert (plain.is_error, plain.denied_by) == (False, None)


def test_a_denied_call_is_answered_by_its_denial() -> None:
    call = ToolCall(agent=Agent("main"), call_id="c7", step=3, tool="grep", args={"q": "x"})
    result = ToolResult.denial(call, Decision.deny("loop: denied", "loop-detector", advice="read src/a.py"))
    assert (result.call_id, result.tool, result.args) == ("c7", "grep", {"q": "x"})
    assert (result.content, result.is_error, result.denied_by, result.advice) == (
        "loop: denied",
        True,
        "loop-detector",
        "read src/a.py",
    )
    assert ToolResult.denial(call, Decision(allowed=False, by="x")).content == ""
    assert ToolResult.denial(call, Decision.deny("no", "x")).advice is msgspec.UNSET
    with pytest.raises(ValueError, match="tool call 'c7' was allowed"):
        ToolResult.denial(call, Decision())


def test_events_are_frozen() -> None:
    event = UserMessage(agent=None, text="hi")
    with pytest.raises(AttributeError):
        event.text = "changed"  # type: ignore[misc]


def test_event_types_map_every_tag_to_its_class() -> None:
    assert {tag: cls.__struct_config__.tag for tag, cls in EVENT_TYPES.items()} == {tag: tag for tag in EVENT_TYPES}
    assert EVENT_TYPES["agent/status"] is AgentStatus
    assert EVENT_TYPES["context/message"] is ContextMessage


def test_halt_request_carries_a_reason() -> None:
    status = AgentStatus(agent=Agent("main"), status="halt-requested", reason="same grep 8 times")
    assert msgspec.structs.asdict(status)["reason"] == "same grep 8 times"


def test_deny_decision_names_reason_and_interceptor() -> None:
    assert Decision.deny("stop", "guard") == Decision(allowed=False, reason="stop", by="guard")
    assert Decision().allowed


def test_a_results_delivery_holds_its_content_length_not_its_content() -> None:
    call = ToolCall(agent=None, call_id="c1", step=2, tool="grep", args={})
    assert ToolResult.answering(call, "x" * 10).delivery() == (2, "grep", False, None, 10)
    odd = ToolResult(agent=None, call_id="c1", step=2, tool="grep", content=7)  # type: ignore[arg-type]
    assert odd.delivery() == (2, "grep", False, None, -1)  # content with no length: never raises
