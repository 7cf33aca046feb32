"""The one restore path: what it withholds, and the seam policies learn of
recorded history through."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from bus import Agent, AgentStatus, ContextMessage, ContextSource, ToolCall, ToolResult
from guard import Config, Guard, History, Policy, RemindConfig
from guard.policy import Watch
from guard.sessions.restore import regenerated, replaying


class _Recording(Policy[None]):
    name = "recording"
    plugin = "recording-plugin"

    def __init__(self) -> None:
        self.histories: list[list[str]] = []

    def new_state(self) -> None:
        return None

    @contextlib.contextmanager
    def replaying(self, history: History) -> Iterator[None]:
        self.histories.append([type(e).__name__ for e in history.events()])
        yield


class _Bare:
    """A policy by the protocol alone: no ``replaying`` seam."""

    name = "bare"
    plugin = "bare-plugin"
    intercepts = False
    shadow = False

    def watch(self) -> Watch[None]:
        return Watch(_Recording())


def test_the_guard_output_a_restore_regenerates() -> None:
    guard = Guard(Config(remind=RemindConfig()))
    agent = Agent("main")
    mine = ContextMessage(agent=agent, call_id="c1", source=ContextSource(plugin="repeat-tool-reminder"), text="x")
    other = ContextMessage(agent=agent, call_id="c1", source=ContextSource(plugin="other"), text="x")
    named = AgentStatus(agent=agent, status="halt-requested", reason="r", by="repeat-tool-reminder")
    unnamed = AgentStatus(agent=agent, status="halt-requested", reason="r")
    call = ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args={})
    denied = ToolResult.answering(call, "no", is_error=True, denied_by="repeat-tool-reminder")
    assert [regenerated(guard, e) for e in (mine, other, named, unnamed, call, denied)] == [
        True,
        False,
        True,
        False,
        False,
        False,
    ]


def test_every_policy_with_the_seam_hears_of_the_history_and_others_are_left_alone() -> None:
    recording = _Recording()
    guard = Guard(policies=[recording, _Bare()])
    agent = Agent("main")
    events = [AgentStatus(agent=agent, status="started")]
    with replaying(guard, events):
        pass
    with replaying(guard, events, answered=False):
        pass
    assert recording.histories == [["AgentStatus"], ["AgentStatus"]]
