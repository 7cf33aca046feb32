"""The ``Policy`` base: every hook is a no-op, so a policy overrides only what it needs."""

from __future__ import annotations

import pytest

from bus import Agent, ToolCall, ToolResult, UserMessage
from guard import FingerprintCache, Policy


@pytest.mark.anyio
async def test_base_policy_hooks_do_nothing(agent: Agent) -> None:
    policy = Policy()
    cache = FingerprintCache()
    call = ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args={})
    assert policy.new_state() is None
    assert await policy.on_call(None, call, cache) is None
    assert policy.on_result(None, ToolResult.answering(call, "ok"), cache) is None
    policy.on_user_message(None, UserMessage(agent=agent, text="hi"))
