"""The contract between the guard and its policies.

A policy is plain logic over one agent's state: the ``Guard`` owns the bus
wiring, the per-agent state table and the delivery of actions, so a policy
never publishes or awaits the bus itself.
"""

from __future__ import annotations

from typing import Any

from bus import AgentStatus, ToolCall, ToolResult, UserMessage
from guard.actions import Action
from guard.fingerprint import FingerprintCache

__all__ = ["Policy"]


class Policy:
    """Base class of the policies: every hook is a no-op by default.

    ``name`` is the config section and the ``policy`` of its actions;
    ``plugin`` labels its context messages and denials. The guard consults
    ``on_call`` only for policies that override it.
    """

    name: str = ""
    plugin: str = ""

    def new_state(self) -> Any:
        """Fresh per-agent state, created on the agent's first event."""
        return None

    async def on_call(self, state: Any, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        """Before the tool runs. A denying action stops the call."""
        return None

    def on_result(self, state: Any, result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        """After the tool ran or was denied. A ``remind`` action becomes a
        context message for this result, a ``halt`` action a halt request."""
        return None

    def on_user_message(self, state: Any, message: UserMessage) -> None:
        """A genuine user message reached the agent."""

    def on_status(self, state: Any, status: AgentStatus) -> None:
        """The agent's lifecycle changed (``idle``, ``halt-requested``, ...);
        called for agents that have state, before ``disposed`` drops it."""
