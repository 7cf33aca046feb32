"""The live page's feed on its own: what it keeps of each session, its
bounds, and its streams to open pages (slow ones dropped, all ended at close)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import anyio
import pytest

import guard.server.live as live_module
from bus import Agent, AgentStatus, ToolCall, ToolResult
from guard import Action, ActionKind
from guard.server import scope
from guard.server.live import LiveFeed


class ShadowAction(Action, frozen=True, kw_only=True):
    shadow: bool = True


@pytest.fixture
def in_request() -> Iterator[None]:
    """A request of the events route about session ``s1``."""
    token = scope.enter("events")
    scope.note(session="s1", project="/home/dev/shop")
    yield
    scope.leave(token)


def _call(n: int, tool: str = "grep") -> ToolCall:
    return ToolCall(agent=Agent("a"), call_id=f"c{n}", step=n, tool=tool, args={"q": 1})


def _action(kind: ActionKind, call_id: str) -> Action:
    return Action(policy="loops", action=kind, agent="a", tool="grep", count=3, text="stop", call_id=call_id)


async def _opened(page: AsyncGenerator[bytes, None]) -> dict[str, Any]:
    """The snapshot a page's stream opens with, read whole (it comes in slices)."""
    parts = [await anext(page)]
    while parts[-1] != b"\n\n":
        parts.append(await anext(page))
    message = b"".join(parts)
    assert message.startswith(b"retry: 1000\nevent: snapshot\ndata: ")
    snapshot: dict[str, Any] = json.loads(message.split(b"data: ", 1)[1])
    return snapshot


def test_outside_a_request_nothing_is_kept() -> None:
    feed = LiveFeed()
    feed.on_event(_call(1))
    feed.on_action(_action("deny", "c1"), _call(1))
    scope.note(session="ignored")
    assert len(feed) == 0


@pytest.mark.usefixtures("in_request")
def test_a_session_keeps_its_calls_actions_and_savings() -> None:
    feed = LiveFeed()
    feed.on_event(AgentStatus(agent=Agent("a"), status="started"))
    feed.on_event(_call(1))
    feed.on_event(ToolResult.answering(_call(1), "out"))
    feed.on_event(_call(2))
    feed.on_action(_action("deny", "c2"), _call(2))
    feed.on_event(ToolResult.answering(_call(2), "denied", is_error=True, denied_by="loop-detector"))
    feed.on_action(ShadowAction(**_action("halt", "c2").reported(), call_id="c2"), _call(2))
    feed.on_action(_action("remind", "gone"), AgentStatus(agent=Agent("a"), status="idle"))
    feed.on_event(_call(3, "ls"))
    feed.on_event(ToolResult.answering(_call(3, "ls"), "out"))
    feed.on_action(_action("deny", "c3"), _call(3, "ls"))  # heard after the call's result
    (session,) = feed.snapshot()["sessions"]
    assert (session["runtime"], session["project"], session["calls"], session["repeats"]) == ("events", "shop", 3, 1)
    assert session["actions"] == {"deny": 2, "shadow halt": 1, "remind": 1}
    assert [(m[0], m[2], m[7]) for m in session["marks"]] == [
        (1, "deny", False),
        (1, "halt", True),
        (1, "remind", False),
        (2, "deny", False),
    ]
    assert (session["saved_calls"], session["wasted_calls"]) == (2, 2)
    assert session["cells"][1][2] == 1  # the denial is an error result


@pytest.mark.usefixtures("in_request")
def test_a_call_after_a_reminder_whose_result_changed_is_not_wasted() -> None:
    feed = LiveFeed()
    answers = ["2 failed in 0.51s", "2 failed in 0.48s", "2 failed in 0.50s", "1 failed in 0.49s"]
    for n, answer in enumerate(answers, 1):
        feed.on_event(_call(n))
        feed.on_event(ToolResult.answering(_call(n), answer))
        if n == 2:
            feed.on_action(_action("remind", "c2"), _call(2))
    (session,) = feed.snapshot()["sessions"]
    # the 3rd run answered as the 2nd (its timing aside); the 4th changed
    assert (session["wasted_calls"], session["wasted_tokens"]) == (1, -(-len('{"q":1}2 failed in 0.50s') // 4))


@pytest.mark.usefixtures("in_request")
def test_an_action_on_a_call_the_feed_never_saw_draws_that_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_module, "_CELLS_DRAWN", 2)
    monkeypatch.setattr(live_module, "_ANSWERED_KEPT", 1)
    feed = LiveFeed()
    feed.on_action(_action("deny", "c9"), _call(9))
    for n in range(3):
        feed.on_event(_call(n))
        feed.on_event(ToolResult.answering(_call(n), "x"))
    (session,) = feed.snapshot()["sessions"]
    assert (session["calls"], len(session["cells"])) == (4, 2)


@pytest.mark.usefixtures("in_request")
def test_a_long_session_keeps_its_counts_in_bounded_memory() -> None:
    feed = LiveFeed()
    for n in range(5000):  # ever new calls, none answered, each acted on
        call = ToolCall(agent=Agent("a"), call_id=f"c{n}", step=n, tool="grep", args={"q": n})
        feed.on_event(call)
        feed.on_action(_action("remind", f"c{n}"), call)
    (session,) = feed.snapshot()["sessions"]
    assert (session["calls"], session["actions"]) == (5000, {"remind": 5000})  # every one counted
    assert (len(session["signatures"]), len(session["cells"]), len(session["marks"])) == (2000, 2000, 1000)
    assert session["marks"][-1][0] == 4999  # the latest actions are the ones kept
    (kept,) = feed._sessions.values()
    assert len(kept.open) == 1024


def test_only_the_most_recent_sessions_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_module, "_SESSIONS_KEPT", 2)
    feed = LiveFeed()
    for name in ("s1", "s2", "s1", "s3"):
        token = scope.enter("claude-code")
        scope.note(session=name)
        feed.on_event(_call(1))
        scope.leave(token)
    assert [s["id"] for s in feed.snapshot()["sessions"]] == ["s1", "s3"]


@pytest.mark.anyio
async def test_pages_get_changes_a_slow_one_is_dropped_and_close_ends_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_module, "_QUEUE", 1)
    monkeypatch.setattr(live_module, "FLUSH_SECONDS", 0)
    feed = LiveFeed()
    fast, slow = feed.stream(), feed.stream()
    assert await _opened(fast) == await _opened(slow) == {"sessions": []}
    received: list[bytes] = []
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(feed.run)
        for n in range(3):
            token = scope.enter("events")
            scope.note(session=f"s{n}")
            feed.on_event(_call(n))
            scope.leave(token)
            with anyio.fail_after(5):
                received.append(await anext(fast))
        tasks.cancel_scope.cancel()
    assert [json.loads(m.split(b"data: ", 1)[1])["id"] for m in received] == ["s0", "s1", "s2"]
    feed.close()
    with pytest.raises(StopAsyncIteration):
        await anext(fast)
    late = [message async for message in slow]  # dropped when its queue was full: what it held, then the end
    assert len(late) == 1
    with pytest.raises(StopAsyncIteration):
        await anext(feed.stream())  # a closed feed opens no stream


@pytest.mark.anyio
async def test_a_session_gone_before_the_flush_is_not_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_module, "_SESSIONS_KEPT", 1)
    monkeypatch.setattr(live_module, "FLUSH_SECONDS", 0)
    feed = LiveFeed()
    page = feed.stream()
    await _opened(page)
    for name in ("s1", "s2"):
        token = scope.enter("events")
        scope.note(session=name)
        feed.on_event(_call(1))
        scope.leave(token)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(feed.run)
        with anyio.fail_after(5):
            message = await anext(page)
        tasks.cancel_scope.cancel()
    assert json.loads(message.split(b"data: ", 1)[1])["id"] == "s2"
    await page.aclose()


@pytest.mark.anyio
async def test_pages_opened_while_nothing_changed_share_one_encoded_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_module, "_SLICE", 100)
    feed = LiveFeed()
    for n in range(20):
        token = scope.enter("events")
        scope.note(session=f"s{n}")
        feed.on_event(_call(n))
        scope.leave(token)
    encoded = feed.encoded()
    assert len(encoded) > 1000
    assert feed.encoded() is encoded  # one encoding, for every page that opens now
    page = feed.stream()
    assert await anext(page) == b"retry: 1000\nevent: snapshot\ndata: "
    slices = [await anext(page) for _ in range(-(-len(encoded) // 100))]
    assert {len(part) for part in slices[:-1]} == {100}  # a page that does not read holds a slice, never a copy
    assert b"".join(slices) == encoded
    assert await anext(page) == b"\n\n"
    assert json.loads(encoded) == feed.snapshot()
    token = scope.enter("events")
    scope.note(session="s0")
    feed.on_event(ToolResult.answering(_call(0), "out"))
    scope.leave(token)
    changed = feed.encoded()
    assert changed is not encoded
    assert json.loads(changed)["sessions"][-1]["cells"][0][3] == 3
    await page.aclose()


def test_long_tool_names_agent_ids_and_projects_are_cut_as_the_preview_is() -> None:
    feed = LiveFeed()
    token = scope.enter("claude-code")
    scope.note(session="s1", project="/home/dev/" + "p" * 1000)
    agent, tool = Agent("a" * 1000), "t" * 1000
    call = ToolCall(agent=agent, call_id="c1", step=1, tool=tool, args={"q": "x" * 5000})
    feed.on_event(AgentStatus(agent=agent, status="started"))
    feed.on_event(call)
    feed.on_action(
        Action(policy="loops", action="deny", agent=agent.id, tool=tool, count=3, text="stop", call_id="c1"), call
    )
    scope.leave(token)
    (session,) = feed.snapshot()["sessions"]
    cut = "… (+880 more chars)"
    assert session["project"] == "p" * 120 + cut
    assert session["agents"] == ["a" * 120 + cut]
    assert session["signatures"][0][:2] == ["t" * 120 + cut, session["signatures"][0][1]]
    assert len(session["signatures"][0][1]) < 200
    assert session["marks"][0][4:6] == ["a" * 120 + cut, "t" * 120 + cut]
    assert len(feed.encoded()) < 2000


def test_a_name_longer_than_the_redaction_slack_is_not_shown_in_part() -> None:
    """The rules see a cap plus ``REDACT_SLACK`` characters; a word running
    on past that was never seen whole, so none of it is shown."""
    feed = LiveFeed()
    token = scope.enter("claude-code")
    scope.note(session="s1", project="/home/dev/p")
    agent = Agent("a" * 5000)
    feed.on_event(AgentStatus(agent=agent, status="started"))
    feed.on_event(ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args={"q": "x"}))
    scope.leave(token)
    (session,) = feed.snapshot()["sessions"]
    assert session["agents"] == ["… (+5000 more chars)"]
