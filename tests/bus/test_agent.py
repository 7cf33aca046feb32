"""The agent handle: identity, weak references, ids."""

from __future__ import annotations

import gc
import weakref

import pytest

from bus import Agent


def test_two_handles_with_one_id_are_two_agents() -> None:
    first, second = Agent("main"), Agent("main")
    state = {first: "a", second: "b"}
    assert first != second
    assert len(state) == 2


def test_state_keyed_weakly_disappears_with_the_agent() -> None:
    state: weakref.WeakKeyDictionary[Agent, int] = weakref.WeakKeyDictionary()
    agent = Agent("main")
    state[agent] = 3
    assert len(state) == 1
    del agent
    gc.collect()
    assert len(state) == 0


def test_repr_shows_id_and_parent() -> None:
    assert repr(Agent("main")) == "Agent('main')"
    assert repr(Agent("sub", parent_id="main")) == "Agent('sub', parent_id='main')"
    assert Agent("sub", parent_id="main").parent_id == "main"


@pytest.mark.parametrize("bad", ["", None, 7])
def test_agent_id_must_be_a_non_empty_string(bad: object) -> None:
    with pytest.raises(ValueError, match="Agent id must be a non-empty string, got"):
        Agent(bad)  # type: ignore[arg-type]
