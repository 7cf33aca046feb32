"""The events the bus carries, one frozen msgspec Struct per type.

The classes form a tagged union on the field ``type`` so that a session log
line decodes straight into the right class. ``seq`` and ``ts`` are stamped by
the bus when an event is published; construct events without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec

from bus.agent import Agent

if TYPE_CHECKING:
    from bus.bus import Decision

__all__ = [
    "DELIVERIES_KEPT",
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
    "trimmed",
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


DELIVERIES_KEPT = 16
"""How many of the latest results (every agent's) the guard, and a replay,
keep the delivery of (``ToolResult.delivery``), to pass over one delivered
again: at least these, at most twice as many (``trimmed``)."""

_K = TypeVar("_K")
_V = TypeVar("_V")


def trimmed(latest: dict[_K, _V]) -> dict[_K, _V]:
    """The ``DELIVERIES_KEPT`` newest entries of ``latest`` (in the order
    they were kept). Trimming once the dict holds twice as many,
    rather than dropping the oldest at every result, keeps the per-result
    cost to a lookup and a store."""
    return dict(list(latest.items())[-DELIVERIES_KEPT:])


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

    def delivery(self) -> tuple[object, ...]:
        """What tells this result, delivered again, from a new one: two
        results of one agent with one call id are the same result delivered
        twice (a runtime that published it again) when their deliveries are
        equal and no call under that id came between them.
        Of the content only its length takes part: a result of the same
        call in the same step that differs in nothing else (a runtime
        retrying the tool under one call id) is not the model asking again,
        and what a caller keeps of a result stays a few bytes."""
        try:
            size = len(self.content)
        except TypeError:  # not text: a runtime that put something else there
            size = -1
        return (self.step, self.tool, self.is_error, self.denied_by, size)

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
