"""The events the bus carries, one frozen msgspec Struct per type.

The classes form a tagged union on the field ``type`` so that a session log
line decodes straight into the right class. ``seq`` and ``ts`` are stamped by
the bus when an event is published; construct events without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import msgspec

from bus.agent import Agent

if TYPE_CHECKING:
    from bus.bus import Decision

__all__ = [
    "EVENT_TYPES",
    "AgentStatus",
    "AnyEvent",
    "ContextMessage",
    "ContextSource",
    "Event",
    "SessionStart",
    "ToolCall",
    "ToolResult",
    "UserMessage",
]


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Fields every event has: its place in the session and its agent.

    ``agent`` is the live handle in memory and the agent's id on disk; ``None``
    marks an event that belongs to no agent (a direct tool call from a test,
    say), which guards ignore.
    """

    seq: int = 0
    ts: float = 0.0
    agent: Agent | None


class UserMessage(Event, kw_only=True, frozen=True, tag="user/message"):
    """A genuine user prompt or interjection reached the agent."""

    text: str


class ToolCall(Event, kw_only=True, frozen=True, tag="tool/call"):
    """The model asked for a tool; published before the tool runs.

    ``step`` numbers the model responses of one agent, so parallel calls from
    one response share it. ``args`` is the parsed JSON arguments, or the raw
    string when the model's JSON was malformed. ``hints`` are the tool's
    annotations where the runtime declares them (MCP's ``readOnlyHint``,
    ``destructiveHint``, ``idempotentHint``, ``openWorldHint``): ``UNSET``
    (and left out of the log line) when it declares none.

    ``late`` is true for a call the runtime reported only with its result
    (a post hook whose pre hook never came): the tool had run, so no
    decision can stop it, and a guard records what it would have denied
    instead of denying. ``UNSET`` (left out of the log line) otherwise.
    """

    call_id: str
    step: int
    tool: str
    args: Any = None
    hints: dict[str, bool] | msgspec.UnsetType = msgspec.UNSET
    late: bool | msgspec.UnsetType = msgspec.UNSET


class ToolResult(Event, kw_only=True, frozen=True, tag="tool/result"):
    """A tool ran, or was denied; published either way.

    ``denied_by`` names the interceptor that denied the call, and then
    ``content`` is the denial text the model saw. ``advice`` is what the
    denier's escalation bought (``content`` quotes it): recorded apart so a
    replay answers the escalation from the log instead of asking again. It
    is ``UNSET`` (and left out of the log line) when there was none.
    """

    call_id: str
    step: int
    tool: str
    args: Any = None
    content: str = ""
    is_error: bool = False
    denied_by: str | None = None
    advice: str | msgspec.UnsetType = msgspec.UNSET

    @classmethod
    def answering(
        cls,
        call: ToolCall,
        content: str,
        *,
        is_error: bool = False,
        denied_by: str | None = None,
        advice: str | None = None,
    ) -> ToolResult:
        """The result of ``call``: same agent, call id, step, tool and args."""
        return cls(
            agent=call.agent,
            call_id=call.call_id,
            step=call.step,
            tool=call.tool,
            args=call.args,
            content=content,
            is_error=is_error,
            denied_by=denied_by,
            advice=msgspec.UNSET if advice is None else advice,
        )

    @classmethod
    def denial(cls, call: ToolCall, decision: Decision) -> ToolResult:
        """What a runtime publishes for ``call`` when ``decision`` denied it,
        instead of running the tool: the reason as the content the model
        reads, flagged as an error, with who denied it and any advice an
        escalation bought (a replay compares and answers from these)."""
        if decision.allowed:
            raise ValueError(f"tool call {call.call_id!r} was allowed: publish the tool's own result")
        return cls.answering(call, decision.reason or "", is_error=True, denied_by=decision.by, advice=decision.advice)


class AgentStatus(Event, kw_only=True, frozen=True, tag="agent/status"):
    """Lifecycle of an agent.

    ``status`` is ``started`` (``parent`` names the parent agent's id for a
    subagent), ``idle``, ``disposed`` or ``halt-requested`` (a guard asks the
    runtime to end the run; ``reason`` says why and ``by`` names the plugin
    that asked, ``UNSET`` and left out of the log line when none is named).
    """

    status: str
    parent: str | None = None
    reason: str | None = None
    by: str | msgspec.UnsetType = msgspec.UNSET


class ContextSource(msgspec.Struct, frozen=True, kw_only=True):
    """Who added a context message. Without it a reminder reads as a user
    prompt on replay, so the label is load-bearing."""

    kind: Literal["plugin"] = "plugin"
    plugin: str
    form: str = "notice"
    summary: str = ""


class ContextMessage(Event, kw_only=True, frozen=True, tag="context/message"):
    """Model-visible text a plugin adds after a tool result; never replaces it."""

    call_id: str
    source: ContextSource
    text: str


class SessionStart(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="session/start"):
    """The header line of a session log."""

    v: int
    session: str
    ts: float


AnyEvent = UserMessage | ToolCall | ToolResult | AgentStatus | ContextMessage

EVENT_TYPES: dict[str, type[Event]] = {
    "user/message": UserMessage,
    "tool/call": ToolCall,
    "tool/result": ToolResult,
    "agent/status": AgentStatus,
    "context/message": ContextMessage,
}
