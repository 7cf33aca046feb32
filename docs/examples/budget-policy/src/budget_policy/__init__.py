"""A repeat-tool-guard policy from another package: denies a tool's calls
past a per-agent budget. Configured by the ``[budget]`` section of a guard
config, whose keys are the class's keyword arguments."""

from __future__ import annotations

from bus import ToolCall
from guard import Action, FingerprintCache, Policy, action_for

__all__ = ["Budget"]


class Budget(Policy[dict[str, int]]):
    """Denies a tool's calls past ``limit`` per agent (``tools``: only these
    tools, every tool when empty)."""

    name = "budget"
    plugin = "budget"

    def __init__(self, limit: int = 20, tools: list[str] | None = None) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be an integer >= 1, got {limit!r}")
        self.limit = limit
        self.tools = frozenset(tools or ())

    def new_state(self) -> dict[str, int]:
        return {}  # calls so far, per tool

    async def on_call(self, state: dict[str, int], call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        if self.tools and call.tool not in self.tools:
            return None
        state[call.tool] = count = state.get(call.tool, 0) + 1
        if count <= self.limit:
            return None
        text = f"{call.tool} is over its budget of {self.limit} calls; use what you have."
        return action_for(call, policy=self.name, kind="deny", count=count, text=text, threshold=self.limit)
