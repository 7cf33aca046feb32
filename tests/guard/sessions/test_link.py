"""The runtime-neutral part of the adapters: GuardLink and AgentLink."""

from __future__ import annotations

import contextvars
import math
import sys
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from bus import AgentStatus, Bus, ContextMessage, ContextSource, Decision, ToolCall, ToolResult, read_log
from bus.testing import Capture
from guard import Config, Guard, replay_log
from guard.adapters import GuardLink, HaltRequested, as_text, parse_args
from guard.sessions.link import LinkState

pytestmark = pytest.mark.anyio


async def test_link_builds_a_guarded_bus_with_a_session_log(tmp_path: Path) -> None:
    link = GuardLink(config=Config(), log=tmp_path / "s.jsonl")
    agent = link.agent("main")
    await agent.start()
    for n in range(3):
        agent.begin_step()
        assert (await agent.call(f"c{n}", "grep", {"p": 1})).allowed
        await agent.result(f"c{n}", "hit")
    reader = read_log(tmp_path / "s.jsonl")
    kinds = [type(e).__name__ for e in reader]
    assert kinds == ["AgentStatus"] + ["ToolCall", "ToolResult"] * 3 + ["ContextMessage"]
    assert len(agent.take_context("c2")) == 1


async def test_two_live_agents_under_one_id_are_named_apart_in_the_log(tmp_path: Path) -> None:
    """Two MCP proxies on one link both call their agent ``mcp-client``:
    the guard keeps them apart live, so the log must too, or its replay
    counts their calls together. Once an agent is gone its id is free."""
    link = GuardLink(config=Config(), log=tmp_path / "s.jsonl")
    first, second = link.agent("mcp-client"), link.agent("mcp-client")
    assert (first.agent.id, second.agent.id) == ("mcp-client", "mcp-client-2")
    for agent in (first, second):
        await agent.start()
        for n in range(3):
            agent.begin_step()
            await agent.call(f"{agent.agent.id}-{n}", "grep", {"p": 1})
            await agent.result(f"{agent.agent.id}-{n}", "hit")
    await second.dispose()
    assert link.agent("mcp-client").agent.id == "mcp-client-2"
    link.close()
    outcome = await replay_log(tmp_path / "s.jsonl", Config())
    assert outcome.differences == []
    assert len(outcome.verdicts) == 2, "each agent reminded once, at its own third call"


async def test_a_bus_that_cannot_publish_is_logged_and_never_breaks_the_tool_call(tmp_path: Path) -> None:
    """A clock that fails (a reading of ``nan``, or an exception) makes the
    bus refuse the event; the agent's calls are allowed and its results
    published as far as the bus takes them, and each failure is logged."""
    readings = iter([1.0, math.nan, 3.0])

    def clock() -> float:
        reading = next(readings, None)
        if reading is None:
            raise OSError("clock source unavailable")
        return reading

    bus = Bus(clock=clock)
    Guard(Config()).attach(bus)
    agent = GuardLink(bus).agent("main")
    with capture_logs() as logs:
        await agent.start()
        assert (await agent.call("c1", "grep", {})).allowed, "the call the bus refused is allowed"
        await agent.result("c1", "hit")
        await agent.dispose()
    failed = [(log["event_type"], log["log_level"]) for log in logs if log["event"] == "guard.publish_failed"]
    assert failed == [("ToolCall", "error"), ("AgentStatus", "error")], "the result had a reading, the end none"


async def test_a_link_built_on_what_is_no_bus_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match=r"GuardLink\(bus\) takes a bus.Bus, got Config \(pass a Config as config="):
        GuardLink(Config())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"GuardLink\(bus\) takes a bus.Bus, got dict$"):
        GuardLink({})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("module", "make"),
    [
        ("pydantic_ai", "RepeatToolGuard"),
        ("langchain", "RepeatToolGuard"),
        ("openai_agents", "RepeatToolGuard"),
        ("google_adk", "RepeatToolGuard"),
        ("claude_agent_sdk", "guard_hooks"),
        ("mcp", "guard_proxy"),
    ],
)
async def test_every_adapter_refuses_what_is_no_link_where_the_link_goes(module: str, make: str) -> None:
    """A ``Config`` or a ``Bus`` passed where the link goes is refused when the
    adapter is built, naming what to do, not when its first run fails."""
    adapter = getattr(pytest.importorskip(f"guard.adapters.{module}"), make)
    leading = (None,) if module == "mcp" else ()  # guard_proxy(upstream, link)
    with pytest.raises(TypeError, match=r"link must be a guard.adapters.GuardLink, got Config \(pass a Config as"):
        adapter(*leading, Config())
    with pytest.raises(TypeError, match=r"got Bus \(wrap it: GuardLink\(bus\)\)"):
        adapter(*leading, Bus())
    with pytest.raises(ValueError, match="pass either a GuardLink or config/bus, not both"):
        adapter(*leading, GuardLink(), config=Config())


async def test_your_own_bus_is_used_as_it_is(bus: Bus, capture: Capture) -> None:
    link = GuardLink(bus)
    agent = link.agent("main")
    assert await agent.call("c1", "grep", {}) == Decision()
    assert agent.step == 1, "a call before any step marks the first step"
    await agent.result("c1", "x")
    assert agent.pending == [], "no guard attached: nothing reminds"
    assert [type(e) for e in capture.events] == [ToolCall, ToolResult]


def test_link_refuses_a_bus_together_with_config(bus: Bus) -> None:
    with pytest.raises(ValueError, match="either your own bus"):
        GuardLink(bus, config=Config())


def test_closing_a_link_without_a_log_is_harmless(bus: Bus) -> None:
    link = GuardLink(bus)
    link.close()
    assert link.log is None


async def test_messages_and_halts_reach_only_the_agent_they_name(bus: Bus) -> None:
    link = GuardLink(bus)
    lead, helper = link.agent("lead"), link.agent("helper", parent=link.agent("x"))
    assert helper.agent.parent_id == "x"
    source = ContextSource(plugin="p")
    await bus.publish(ContextMessage(agent=lead.agent, call_id="a", source=source, text="for a"))
    await bus.publish(ContextMessage(agent=lead.agent, call_id="b", source=source, text="for b"))
    await bus.publish(ContextMessage(agent=None, call_id="b", source=source, text="nobody"))
    await bus.publish(AgentStatus(agent=helper.agent, status="halt-requested"))
    await bus.publish(AgentStatus(agent=lead.agent, status="idle"))
    assert lead.take_context("b") == ["for b"]
    assert lead.take_context() == ["for a"]
    assert (lead.halt_reason, helper.halt_reason) == (None, "the guard requested a halt")
    await helper.user_message("go on")
    assert helper.halt_reason is None
    await bus.publish(ContextMessage(agent=helper.agent, call_id="c", source=source, text="about the last run"))
    await helper.user_message("something else now")
    assert helper.take_context() == [], "a message left over from before the user's turn is dropped"


async def test_calls_open_under_one_id_are_answered_in_order_and_a_denial_answers_the_latest(
    bus: Bus, capture: Capture
) -> None:
    agent = GuardLink(bus).agent("main")
    for pattern in ("a", "b", "c"):
        await agent.call("call_0", "grep", {"p": pattern})
    assert [call.call_id for call in agent.calls_in_flight()] == ["call_0", "call_0@1", "call_0@2"]
    await agent.result("call_0", "first")
    await agent.result("call_0", "second")
    assert agent.has_call("call_0")
    await agent.call("call_0", "grep", {"p": "d"})  # answered after call_0@2, still open
    await agent.call("call_0", "grep", {"p": "e"})  # call_0@2 is taken: the next free number
    await agent.denied("call_0", Decision.deny("no", "me"))
    await agent.result("call_0", "third")
    await agent.result("call_0", "fourth")
    assert not agent.has_call("call_0")
    answered = [(r.call_id, r.args, r.content) for r in capture.of(ToolResult)]
    assert answered == [
        ("call_0", {"p": "a"}, "first"),
        ("call_0@1", {"p": "b"}, "second"),
        ("call_0@3", {"p": "e"}, "no"),
        ("call_0@2", {"p": "c"}, "third"),
        ("call_0", {"p": "d"}, "fourth"),
    ]


async def test_calls_under_one_id_run_in_tasks_of_their_own_are_answered_each_in_its_task(
    bus: Bus, capture: Capture
) -> None:
    """A runtime running a response's calls concurrently gives each its
    result (or denial) in the task that made it, in whatever order they end,
    also when the task that starts them made calls of its own before."""
    agent = GuardLink(bus).agent("main")
    await agent.call("first", "read", {"p": "first"})
    await agent.result("first", "read first")
    made = [anyio.Event() for _ in range(3)]

    async def run(n: int, pattern: str, outcome: str) -> None:
        await agent.call("call_0", "grep", {"p": pattern})
        made[n].set()
        await made[-1].wait()  # all three open at once
        await made[2 - n].wait()
        await anyio.sleep(0.01 * (2 - n))  # the last made ends first
        if outcome == "denied":
            await agent.denied("call_0", Decision.deny("no", "me"))
        else:
            await agent.result("call_0", outcome)

    async with anyio.create_task_group() as tasks:
        for n, (pattern, outcome) in enumerate([("a", "found a"), ("b", "denied"), ("c", "found c")]):
            tasks.start_soon(run, n, pattern, outcome)
            await made[n].wait()
    answered = sorted((r.call_id, r.args["p"], r.content) for r in capture.of(ToolResult) if r.call_id != "first")
    assert answered == [("call_0", "a", "found a"), ("call_0@1", "b", "no"), ("call_0@2", "c", "found c")]
    assert not agent.has_call("call_0")


async def test_a_tool_run_in_a_task_of_its_own_that_guards_a_subagent_still_answers_its_own_call(
    bus: Bus, capture: Capture
) -> None:
    """Each call's tool runs in a task the task that made the call starts
    (as the OpenAI Agents SDK runs a tool), and the tool is itself an agent
    whose calls the guard sees: its result still answers the call it ran for."""
    link = GuardLink(bus)
    outer, sub = link.agent("main"), link.agent("sub")
    made, first_done = [anyio.Event(), anyio.Event()], anyio.Event()

    async def tool(k: int) -> None:
        if k == 0:
            await first_done.wait()  # the first call's tool ends last
        await sub.call(f"x{k}", "read", {"k": k})
        await sub.result(f"x{k}", "ok")
        await outer.result("c", f"output of tool {k}")
        if k == 1:
            first_done.set()

    async def run(k: int) -> None:
        if k == 1:
            await made[0].wait()
        await outer.call("c", "bash", {"cmd": f"tool {k}"})
        made[k].set()
        async with anyio.create_task_group() as tools:
            tools.start_soon(tool, k)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run, 0)
        tasks.start_soon(run, 1)
    answered = sorted((r.call_id, r.args["cmd"], r.content) for r in capture.of(ToolResult) if r.tool == "bash")
    assert answered == [("c", "tool 0", "output of tool 0"), ("c@1", "tool 1", "output of tool 1")]


async def test_one_task_answers_its_calls_under_one_id_in_order_however_many_calls_came_between(
    bus: Bus, capture: Capture
) -> None:
    """A runtime running its calls one after another in one task: whatever
    else it called meanwhile, results under a shared id answer its calls in
    the order made, and the task keeps nothing per agent once they are done."""
    before = len(contextvars.copy_context())
    link = GuardLink(bus)
    for n in range(3):
        agent = link.agent(f"agent-{n}")
        await agent.call("c", "sleep", {"s": 1})
        for i in range(70):
            await agent.call(f"x{i}", "read", {"i": i})
            await agent.result(f"x{i}", "ok")
        await agent.call("c", "sleep", {"s": 2})
        await agent.result("c", "first")
        await agent.result("c", "second")
        await agent.dispose()
    answered = [
        (r.agent.id if r.agent else None, r.call_id, r.content)
        for r in capture.of(ToolResult)
        if r.call_id.startswith("c")
    ]
    assert answered == [(f"agent-{n}", c, text) for n in range(3) for c, text in (("c", "first"), ("c@1", "second"))]
    assert len(contextvars.copy_context()) <= before + 1  # one token of this task, however many agents


async def test_calls_open_under_one_id_are_answered_in_order_after_a_restore(bus: Bus, capture: Capture) -> None:
    """A hook process restores the agent from its snapshot before each hook:
    results for a shared id still answer its open calls in the order made."""
    agent = GuardLink(bus).agent("main")
    for pattern in ("a", "b", "c"):
        await agent.call("call_0", "grep", {"p": pattern})
    await agent.call("call@7", "grep", {"p": "an id of its own"})
    await agent.result("call_0", "first")
    restored = GuardLink(bus).agent("main")
    restored.restore(agent.state())
    await restored.result("call_0", "second")
    await restored.result("call_0", "third")
    await restored.result("call@7", "own")
    assert not restored.has_call("call_0")
    answered = [(r.call_id, r.content) for r in capture.of(ToolResult)]
    assert answered == [("call_0", "first"), ("call_0@1", "second"), ("call_0@2", "third"), ("call@7", "own")]


async def test_a_state_read_from_a_log_pairs_only_twins_whose_first_call_is_open(bus: Bus, capture: Capture) -> None:
    """A session log does not record which open calls share an id: ``<id>@<n>``
    is taken for a twin only beside an open ``<id>``; a runtime's own
    ``read@2`` stands alone."""
    agent = GuardLink(bus).agent("main")
    await agent.call("call_0", "grep", {"p": "a"})
    await agent.call("call_0", "grep", {"p": "b"})
    await agent.call("read@2", "read", {})
    state = agent.state()
    restored = GuardLink(bus).agent("main")
    restored.restore(LinkState(state.agent, calls=state.calls))
    assert not restored.has_call("read")
    await restored.result("call_0", "first")
    await restored.result("call_0", "second")
    await restored.result("read@2", "own")
    answered = [(r.call_id, r.content) for r in capture.of(ToolResult)]
    assert answered == [("call_0", "first"), ("call_0@1", "second"), ("read@2", "own")]


async def test_dispose_forgets_the_agent(bus: Bus) -> None:
    link = GuardLink(bus)
    agent = link.agent("main")
    await agent.dispose()
    assert link.links() == []
    await bus.publish(AgentStatus(agent=agent.agent, status="halt-requested", reason="late"))
    assert agent.halt_reason is None


async def test_an_outcome_without_its_call_is_dropped_and_logged_once_naming_it(bus: Bus, capture: Capture) -> None:
    """A result, failure or denial for a call the link does not hold (never
    published, answered already, forgotten) never raises into the runtime:
    nothing is published, and the first one of the agent is logged."""
    agent = GuardLink(bus).agent("main")
    with capture_logs() as logs:
        await agent.result("c9", "x")
        await agent.failed("c8", RuntimeError("boom"))
        await agent.denied("c7", Decision.deny("no", "me"))
    dropped = [(log["agent"], log["call_id"], log["log_level"]) for log in logs if log["event"] == "guard.unknown_call"]
    assert dropped == [("main", "c9", "error")]
    assert capture.events == []
    await agent.call("c1", "grep", {})
    assert agent.open_calls() == 1
    await agent.denied("c1", Decision.deny("no", "me"))
    assert agent.open_calls() == 0


async def test_calls_whose_results_never_come_are_forgotten_oldest_first(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    import guard.sessions.link

    monkeypatch.setattr(guard.sessions.link, "OPEN_CALLS_KEPT", 3)
    agent = GuardLink(bus).agent("main")
    for n in range(5):  # a runtime that reports no results
        await agent.call(f"c{n}", "grep", {"n": n})
    assert [call.call_id for call in agent.calls_in_flight()] == ["c2", "c3", "c4"]


async def test_a_reused_id_whose_results_never_come_keeps_only_the_open_calls(
    bus: Bus, capture: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runtime that names every call ``call_0`` and reports no results: the
    calls forgotten past ``OPEN_CALLS_KEPT`` leave the names of its id's twins
    too, so they hold no more names than there are open calls, and a late
    result answers the oldest call still open under the id, never a newer one
    (nor one forgotten)."""
    import guard.sessions.link

    monkeypatch.setattr(guard.sessions.link, "OPEN_CALLS_KEPT", 3)
    agent = GuardLink(bus).agent("main")
    for n in range(50):
        await agent.call("call_0", "poll", {"n": n})
        names = [name for twins in agent._twins.values() for name in twins]
        assert len(names) <= 3
        if n:  # a single call under the id has no twins
            assert names == [call.call_id for call in agent.calls_in_flight()], "the twins are the open calls, in order"
    assert [call.args for call in agent.calls_in_flight()] == [{"n": 47}, {"n": 48}, {"n": 49}]
    await agent.call("c1", "read", {})  # another id's call: call_0's oldest goes
    await agent.call("call_0", "poll", {"n": 50})  # its plain name is free again: made after the others
    await agent.result("call_0", "late")
    assert [(r.args, r.content) for r in capture.of(ToolResult)] == [({"n": 49}, "late")]
    await agent.result("call_0", "later")
    assert not agent.has_call("call_0")
    assert [r.args for r in capture.of(ToolResult)] == [{"n": 49}, {"n": 50}]
    assert agent._twins == {}


async def test_calls_of_their_own_ids_forgotten_past_the_bound_leave_no_twins(
    bus: Bus, capture: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import guard.sessions.link

    monkeypatch.setattr(guard.sessions.link, "OPEN_CALLS_KEPT", 3)
    agent = GuardLink(bus).agent("main")
    for n in range(6):
        await agent.call(f"c{n}", "poll", {"n": n})
    assert [call.call_id for call in agent.calls_in_flight()] == ["c3", "c4", "c5"]
    assert agent._twins == {}
    await agent.call("a", "read", {"n": 0})
    await agent.call("a", "read", {"n": 1})  # a@1
    await agent.result("a", "zero")
    await agent.call("b", "read", {})
    await agent.call("c", "read", {})
    assert [call.call_id for call in agent.calls_in_flight()] == ["a@1", "b", "c"]
    await agent.call("d", "read", {})  # a@1, the last of a's twins, goes
    assert [call.call_id for call in agent.calls_in_flight()] == ["b", "c", "d"]
    assert agent._twins == {}


async def test_a_twin_name_the_runtime_uses_itself_is_passed_over(bus: Bus, capture: Capture) -> None:
    """A runtime's own id may look like a twin's name (``a@1``): the next
    twin of ``a`` takes the next name free, and each result answers its own
    call."""
    agent = GuardLink(bus).agent("main")
    await agent.call("a", "read", {"n": 0})
    await agent.call("a@1", "read", {"n": 1})
    await agent.call("a", "read", {"n": 2})
    assert [call.call_id for call in agent.calls_in_flight()] == ["a", "a@1", "a@2"]
    await agent.result("a@1", "one")
    await agent.result("a", "zero")
    await agent.result("a", "two")
    assert [(r.args, r.content) for r in capture.of(ToolResult)] == [
        ({"n": 1}, "one"),
        ({"n": 0}, "zero"),
        ({"n": 2}, "two"),
    ]


async def test_a_failure_whose_text_cannot_be_read_still_closes_the_call(bus: Bus, capture: Capture) -> None:
    """A tool's exception whose ``__str__`` raises (its message built from an
    attribute never set) never raises out of ``failed``: the call is closed
    with an error naming the exception's type, as one with no message is."""

    class LazyError(Exception):
        detail: str

        def __str__(self) -> str:
            return f"request failed: {self.detail}"

    agent = GuardLink(bus).agent("main")
    await agent.call("c1", "fetch", {"url": "x"})
    await agent.failed("c1", LazyError())
    await agent.call("c2", "fetch", {"url": "y"})
    await agent.failed("c2", ValueError())
    assert agent.open_calls() == 0
    failures = [(r.call_id, r.content, r.is_error) for r in capture.of(ToolResult)]
    assert failures == [("c1", "LazyError (its message could not be read)", True), ("c2", "ValueError", True)]


def test_halt_requested_names_agent_and_reason() -> None:
    error = HaltRequested("main", "looping")
    assert str(error) == "repeat-tool-guard halted agent 'main': looping"
    assert (error.agent_id, error.reason) == ("main", "looping")


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ('{"a": 1}', {"a": 1}),
        (b"[1]", [1]),
        ('{"a": ', '{"a": '),
        (b"\xff{", "\ufffd{"),
        ({"a": 1}, {"a": 1}),
        ("[" * 5000 + "]" * 5000, "[" * 5000 + "]" * 5000),  # nested too deep to parse
        ("[" * 5000, "[" * 5000),
    ],
)
def test_parse_args_keeps_malformed_json_as_the_raw_string(raw: object, parsed: object) -> None:
    assert parse_args(raw) == parsed


def test_as_text_encodes_non_strings_as_json_or_repr() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    class Unprintable:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert as_text("plain") == "plain"
    assert as_text({"a": [1]}) == '{"a":[1]}'
    assert as_text(Opaque()) == "<opaque>"
    assert as_text(Unprintable()).endswith('.Unprintable>"'), "a tool's output never breaks its call"
    assert as_text(10**5000).startswith('"0x'), "longer than Python writes in decimal: the log's hex"


def test_a_process_running_no_event_loop_has_no_running_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command hook imports neither asyncio nor trio, and runs no loop:
    its calls are answered in the order made."""
    from guard.sessions.link import _running_task

    assert _running_task() is None
    monkeypatch.delitem(sys.modules, "asyncio")
    monkeypatch.delitem(sys.modules, "trio", raising=False)
    assert _running_task() is None
