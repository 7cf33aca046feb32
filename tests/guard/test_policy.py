"""The ``Policy`` base: every hook but ``new_state`` is a no-op, so a policy overrides only what it needs."""

from __future__ import annotations

import pytest

from bus import Agent, AgentStatus, ToolCall, ToolResult, UserMessage
from guard import FingerprintCache, Policy


class _Counts(Policy[list[int]]):
    name = "counts"
    plugin = "counts-plugin"

    def new_state(self) -> list[int]:
        return [0]

    def on_result(self, state: list[int], result: ToolResult, fingerprints: FingerprintCache) -> None:
        state[0] += 1


@pytest.mark.anyio
async def test_base_policy_hooks_do_nothing(agent: Agent) -> None:
    policy = _Counts()
    cache = FingerprintCache()
    call = ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args={})
    state = policy.new_state()
    assert await policy.on_call(state, call, cache) is None
    policy.on_user_message(state, UserMessage(agent=agent, text="hi"))
    policy.on_status(state, AgentStatus(agent=agent, status="idle"))
    assert state == [0]
    assert not policy.intercepts


def test_a_policy_without_new_state_cannot_be_built() -> None:
    class Stateless(Policy[None]):
        name = "stateless"

    with pytest.raises(TypeError, match="new_state"):
        Stateless()  # type: ignore[abstract]


@pytest.mark.anyio
async def test_each_watch_binds_its_own_state(agent: Agent) -> None:
    policy = _Counts()
    cache = FingerprintCache()
    first, second = policy.watch(), policy.watch()
    result = ToolResult(agent=agent, call_id="c1", step=1, tool="grep", args={}, content="ok")
    first.on_result(result, cache)
    first.on_result(result, cache)
    second.on_result(result, cache)
    assert (first.state, second.state) == ([2], [1])
    assert first.policy is policy
