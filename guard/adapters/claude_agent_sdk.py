"""The guard as Claude Agent SDK hook callbacks.

``ClaudeAgentOptions(hooks=guard_hooks(link))`` registers one callback for
each event in ``HOOK_EVENTS``; the mapping is ``ClaudeHooks``, the same one
the ``repeat-tool-guard hook`` command uses for plain Claude Code. In
process the guard stays live, so no state file is involved.
"""

from __future__ import annotations

from typing import Any, cast

from claude_agent_sdk import HookContext, HookInput, HookJSONOutput, HookMatcher
from claude_agent_sdk.types import HookEvent

from guard.adapters.claude_hooks import HOOK_EVENTS, MAX_SESSIONS, ClaudeHooks
from guard.config import Config
from guard.sessions.link import GuardLink, adapter_link

__all__ = ["guard_hooks"]


def guard_hooks(
    link: GuardLink | None = None, *, config: Config | None = None, max_sessions: int = MAX_SESSIONS
) -> dict[HookEvent, list[HookMatcher]]:
    """The ``hooks`` option for ``ClaudeAgentOptions``; merge it with your own
    hooks by extending the lists of the same event. Reuse one for many
    sessions (each ``query`` is one): the SDK never sends ``SessionEnd``, so
    beyond ``max_sessions`` live sessions the least recently active one's
    agents are disposed. Its bundled Claude Code sends ``PostToolBatch``
    after each model response, so each response is one step from the first."""
    link = adapter_link(link, config, "claude-agent-sdk")
    hooks = ClaudeHooks(link, max_sessions=max_sessions, steps_reported=True)

    async def callback(payload: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        return cast(HookJSONOutput, await hooks.handle(cast(dict[str, Any], payload)))

    return {cast(HookEvent, event): [HookMatcher(hooks=[callback])] for event in HOOK_EVENTS}
