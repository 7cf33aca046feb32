"""What a policy decided to do, as data: logged, replayed and compared."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from bus import ToolCall, ToolResult

__all__ = ["DENYING", "SHADOW_FORM", "Action", "ActionKind", "action_for"]

ActionKind = Literal["remind", "deny", "rescue", "escalation-failed", "halt"]

DENYING: frozenset[str] = frozenset({"deny", "rescue", "escalation-failed"})
"""The kinds that deny the call that triggered them."""

SHADOW_FORM = "shadow"
"""The ``source.form`` of the context message that records a shadow action
in the session log: the guard's record of what it would have done. Adapters,
the hooks and the server never show it to the model; ``replay --check``
compares it like any other guard output."""


class Action(msgspec.Struct, frozen=True, kw_only=True):
    """One guard action. ``text`` is exactly what the model (or runtime) gets:
    a reminder, a denial, or a halt reason. ``count`` is the repeat count the
    policy saw and ``threshold`` the configured value it crossed. ``advice``
    is what an escalation bought (``text`` quotes it), kept apart so a
    session log records it as its own field and a replay answers from it.
    ``shadow`` marks an action of a policy in shadow mode: computed and
    recorded, never delivered."""

    policy: str
    action: ActionKind
    agent: str | None
    tool: str
    count: int
    text: str
    call_id: str
    threshold: int | None = None
    advice: str | None = None
    shadow: bool = False

    def reported(self) -> dict[str, Any]:
        """The fields every report of an action carries (``replay --json``,
        the fleet's ``watch``): agent, policy, action, tool, count, text,
        and ``shadow`` (only when true)."""
        fields: dict[str, Any] = {
            "agent": self.agent,
            "policy": self.policy,
            "action": self.action,
            "tool": self.tool,
            "count": self.count,
            "text": self.text,
        }
        if self.shadow:
            fields["shadow"] = True
        return fields


def action_for(
    event: ToolCall | ToolResult,
    *,
    policy: str,
    kind: ActionKind,
    count: int,
    text: str,
    threshold: int | None = None,
    advice: str | None = None,
) -> Action:
    """The action ``policy`` takes on ``event`` (the call it denies, or the
    result its message or halt follows): agent, tool and call id are the
    event's. Every policy builds its actions here."""
    return Action(
        policy=policy,
        action=kind,
        agent=event.agent.id if event.agent is not None else None,
        tool=event.tool,
        count=count,
        text=text,
        call_id=event.call_id,
        threshold=threshold,
        advice=advice,
    )
