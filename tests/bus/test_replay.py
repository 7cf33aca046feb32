"""Replay: a recorded session re-published in order, calls synthesized when absent."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import msgspec
import pytest

from bus import (
    ALLOW,
    Agent,
    AgentStatus,
    AnyEvent,
    Bus,
    ContextMessage,
    ContextSource,
    Decision,
    Event,
    LogError,
    LogReader,
    Replay,
    SessionLog,
    ToolCall,
    ToolResult,
    UserMessage,
)
from bus.testing import Capture, FakeClock
from tests.bus.conftest import RawLog

pytestmark = pytest.mark.anyio


def _result(seq: int, ts: float, call_id: str, agent: str = "main", tool: str = "grep") -> bytes:
    return (
        b'{"type":"tool/result","seq":%d,"ts":%r,"agent":"%s","call_id":"%s","step":%d,"tool":"%s",'
        b'"args":{"q":"x"},"content":"hit","is_error":false,"denied_by":null}'
        % (seq, ts, agent.encode(), call_id.encode(), seq, tool.encode())
    )


def _call(seq: int, ts: float, call_id: str, agent: str = "main") -> bytes:
    return (
        b'{"type":"tool/call","seq":%d,"ts":%r,"agent":"%s","call_id":"%s","step":%d,"tool":"grep",'
        b'"args":{"q":"x"}}' % (seq, ts, agent.encode(), call_id.encode(), seq)
    )


def _context(seq: int, ts: float, call_id: str, plugin: str) -> bytes:
    return (
        b'{"type":"context/message","seq":%d,"ts":%r,"agent":"main","call_id":"%s",'
        b'"source":{"kind":"plugin","plugin":"%s","form":"notice","summary":"grep \xc3\x97 3"},"text":"note"}'
        % (seq, ts, call_id.encode(), plugin.encode())
    )


async def test_results_without_recorded_calls_get_calls_synthesized_and_decided(raw_log: RawLog) -> None:
    replay = Replay(raw_log(_result(1, 10.0, "c1"), _result(2, 11.0, "c2", tool="ls")))
    seen: list[tuple[str, str, int, int]] = []

    async def on_call(call: ToolCall) -> None:
        seen.append(("subscriber", call.call_id, replay.seq, replay.call_number))

    async def interceptor(call: ToolCall) -> Decision | None:
        seen.append(("interceptor", call.call_id, replay.seq, replay.call_number))
        return None

    async def on_result(result: ToolResult) -> None:
        seen.append(("result", result.call_id, replay.seq, replay.call_number))

    replay.bus.subscribe(ToolCall, on_call)
    replay.bus.intercept("probe", interceptor)
    replay.bus.subscribe(ToolResult, on_result)
    capture = Capture().attach(replay.bus)
    report = await replay.run()
    assert seen == [
        ("subscriber", "c1", 1, 1),
        ("interceptor", "c1", 1, 1),
        ("result", "c1", 1, 1),
        ("subscriber", "c2", 2, 2),
        ("interceptor", "c2", 2, 2),
        ("result", "c2", 2, 2),
    ]
    synthesized = capture.of(ToolCall)
    assert [(c.call_id, c.tool, c.step, c.args, c.ts) for c in synthesized] == [
        ("c1", "grep", 1, {"q": "x"}, 10.0),
        ("c2", "ls", 2, {"q": "x"}, 11.0),
    ]
    assert replay.reader is not None
    assert synthesized[0].agent is replay.reader.agents["main"]
    assert replay.call_number == 2
    assert report.events == 2


async def test_recorded_calls_are_decided_once_and_not_synthesized_again(raw_log: RawLog) -> None:
    replay = Replay(
        raw_log(
            _call(1, 1.0, "c1"),
            _call(2, 1.0, "c2"),  # a parallel call in the same response
            _result(3, 2.0, "c1"),
            _result(4, 2.0, "c2"),
            _result(5, 3.0, "c1", agent="sub"),  # same call id, another agent: no recorded call
        )
    )
    decided: list[tuple[str | None, str, int]] = []

    async def interceptor(call: ToolCall) -> Decision | None:
        decided.append((call.agent.id if call.agent else None, call.call_id, replay.call_number))
        return None

    replay.bus.intercept("probe", interceptor)
    await replay.run()
    assert decided == [("main", "c1", 1), ("main", "c2", 2), ("sub", "c1", 3)]
    assert replay.call_number == 3


async def test_calls_and_results_without_an_agent_replay(raw_log: RawLog) -> None:
    call = b'{"type":"tool/call","seq":1,"ts":1.0,"agent":null,"call_id":"c1","step":1,"tool":"t","args":null}'
    result = (
        b'{"type":"tool/result","seq":2,"ts":1.0,"agent":null,"call_id":"c1","step":1,"tool":"t","args":null,'
        b'"content":"","is_error":false,"denied_by":null}'
    )
    orphan = result.replace(b'"seq":2', b'"seq":3').replace(b'"c1"', b'"c2"')
    replay = Replay(raw_log(call, result, orphan))
    capture = Capture().attach(replay.bus)
    await replay.run()
    assert [(type(e).__name__, e.agent) for e in capture.events] == [
        ("ToolCall", None),
        ("ToolResult", None),
        ("ToolCall", None),
        ("ToolResult", None),
    ]
    assert replay.call_number == 2


async def test_withheld_events_are_counted_not_republished(raw_log: RawLog) -> None:
    seen: list[AnyEvent] = []

    def withhold(event: AnyEvent) -> bool:
        seen.append(event)
        return isinstance(event, ContextMessage) and event.source.plugin == "mine"

    replay = Replay(
        raw_log(_result(1, 1.0, "c1"), _context(2, 1.0, "c1", "mine"), _context(3, 1.0, "c1", "theirs")),
        withhold=withhold,
    )
    capture = Capture().attach(replay.bus)
    await replay.run()
    assert replay.withheld == 1
    seen_as = [(type(e).__name__, getattr(getattr(e, "source", None), "plugin", None)) for e in seen]
    assert seen_as == [("ToolResult", None), ("ContextMessage", "mine"), ("ContextMessage", "theirs")]
    assert [m.source.plugin for m in capture.of(ContextMessage)] == ["theirs"]


async def test_withheld_call_is_synthesized_again_from_its_result(raw_log: RawLog) -> None:
    replay = Replay(raw_log(_call(1, 1.0, "c1"), _result(2, 2.0, "c1")), withhold=lambda e: type(e) is ToolCall)
    capture = Capture().attach(replay.bus)
    await replay.run()
    assert replay.withheld == 1
    assert [type(e) for e in capture.events] == [ToolCall, ToolResult]
    assert replay.call_number == 1


async def test_bus_clock_reads_each_events_recorded_time(raw_log: RawLog) -> None:
    replay = Replay(
        raw_log(
            b'{"type":"user/message","seq":1,"ts":100.25,"agent":"main","text":"go"}',
            _result(2, 130.5, "c1"),
        )
    )
    bus = replay.bus
    clock_at: list[tuple[str, float]] = []

    async def on_user(event: UserMessage) -> None:
        clock_at.append(("user", event.ts))

    async def answer(result: ToolResult) -> None:
        # What a subscriber publishes during replay carries the trigger's time.
        source = ContextSource(plugin="probe", summary="s")
        await bus.publish(ContextMessage(agent=result.agent, call_id=result.call_id, source=source, text="t"))

    async def on_context(message: ContextMessage) -> None:
        clock_at.append(("context", message.ts))

    bus.subscribe(UserMessage, on_user)
    bus.subscribe(ToolResult, answer)
    bus.subscribe(ContextMessage, on_context)
    await replay.run()
    assert clock_at == [("user", 100.25), ("context", 130.5)]


async def test_replay_seq_is_the_log_seq_while_the_bus_restamps(raw_log: RawLog) -> None:
    replay = Replay(
        raw_log(
            b'{"type":"user/message","seq":10,"ts":1.0,"agent":"main","text":"a"}',
            b"garbage",
            _result(12, 2.0, "c1"),
            b'{"type":"agent/status","seq":13,"ts":3.0,"agent":"main","status":"idle","parent":null,"reason":null}',
        )
    )
    during: list[tuple[str, int, int, int]] = []

    def recorder(event: Event) -> None:
        during.append((type(event).__name__, replay.seq, replay.call_number, event.seq))

    replay.bus.record(recorder)
    report = await replay.run()
    assert during == [
        ("UserMessage", 10, 0, 1),
        ("ToolCall", 12, 1, 2),
        ("ToolResult", 12, 1, 3),
        ("AgentStatus", 13, 1, 4),
    ]
    assert report is replay.report
    # the log begins at seq 10; the garbage line stood for seq 11
    assert report.summary() == "3 events, 1 lines skipped (invalid-json 1); 9 missing (numbers their seq skips)"


async def test_a_live_session_replays_to_the_same_events(log_path: Path) -> None:
    clock = FakeClock()
    live = Bus(clock=clock)
    recorded = Capture().attach(live)
    with SessionLog(log_path, session="s", clock=clock).attach(live):
        main, sub = Agent("main"), Agent("sub", parent_id="main")
        await live.publish(AgentStatus(agent=main, status="started"))
        await live.publish(AgentStatus(agent=sub, status="started", parent="main"))
        for i in range(3):
            clock.advance(1)
            call = ToolCall(agent=sub, call_id=f"c{i}", step=i + 1, tool="grep", args={"q": ["x", i]})
            await live.decide(call)
            await live.publish(ToolResult.answering(call, f"hit {i}", is_error=i == 2))
        await live.publish(AgentStatus(agent=sub, status="halt-requested", reason="looping"))

    replay = Replay(log_path)
    replayed = Capture().attach(replay.bus)
    await replay.run()

    def plain(event: Event) -> tuple[object, ...]:
        fields = tuple(getattr(event, f) for f in event.__struct_fields__ if f != "agent")
        return (type(event), event.agent.id if event.agent else None, *fields)

    assert [plain(e) for e in replayed.events] == [plain(e) for e in recorded.events]
    assert replay.reader is not None
    assert replay.reader.agents["sub"].parent_id == "main"
    assert replay.call_number == 3


async def test_replay_of_a_missing_log_is_a_log_error(tmp_path: Path) -> None:
    with pytest.raises(LogError, match="no session log at"):
        Replay(tmp_path / "missing.jsonl")


async def test_events_fed_one_at_a_time_replay_as_the_whole_log_does(
    log_path: Path, agent: Agent, anyio_backend: str
) -> None:
    call = ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args={}, seq=1, ts=5.0)
    result = ToolResult.answering(call, "x")
    fed = Replay()
    seen = Capture().attach(fed.bus)
    assert await fed.apply(call) == ALLOW
    assert await fed.apply(msgspec.structs.replace(result, seq=2, ts=6.0)) is None
    assert await fed.apply(UserMessage(agent=agent, text="go", seq=3, ts=7.0)) is None
    assert [type(e) for e in seen.events] == [ToolCall, ToolResult, UserMessage]
    assert (fed.seq, fed.call_number, fed.report.events) == (3, 1, 0)
    with pytest.raises(ValueError, match="no log to run"):
        await fed.run()


async def test_an_expected_call_is_answered_by_its_result_not_synthesized_again() -> None:
    agent = Agent("main")
    replay = Replay()
    capture = Capture().attach(replay.bus)
    call = ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args={"q": "x"})
    replay.expect(call)  # published live, before the replay took over
    await replay.apply(msgspec.structs.replace(ToolResult.answering(call, "hit"), seq=7))
    assert [type(e) for e in capture.events] == [ToolResult]
    assert replay.call_number == 1


async def test_a_fed_call_returns_what_the_interceptors_decided(agent: Agent) -> None:
    replay = Replay()

    async def deny(call: ToolCall) -> Decision:
        return Decision.deny("not again", "guard")

    replay.bus.intercept("guard", deny)
    call = ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args={}, seq=1, ts=5.0)
    assert await replay.apply(call) == Decision(allowed=False, reason="not again", by="guard")


async def test_a_log_continued_by_a_new_run_starts_the_replay_afresh_there(raw_log: RawLog) -> None:
    header = b'{"type":"session/start","v":1,"session":"s2","ts":1764489700.0}'
    restarts: list[int] = []
    replay = Replay(
        raw_log(
            _call(1, 1.0, "c1"),
            _result(2, 2.0, "c1"),
            _call(3, 3.0, "c2"),  # the first run ended before its result
            header,  # the program ran again: a new bus numbers from 1
            _result(1, 4.0, "c2"),  # the new run's c2: no call of its own was recorded
            _call(2, 5.0, "c3"),
        ),
        on_restart=lambda: restarts.append(replay.seq),
    )
    capture = Capture().attach(replay.bus)
    await replay.run()
    assert [(type(e).__name__, e.call_id) for e in capture.events] == [  # type: ignore[attr-defined]
        ("ToolCall", "c1"),
        ("ToolResult", "c1"),
        ("ToolCall", "c2"),
        ("ToolCall", "c2"),  # synthesized: the earlier run's open c2 is not this result's call
        ("ToolResult", "c2"),
        ("ToolCall", "c3"),
    ]
    assert restarts == [3]  # told before the new run's first event is applied
    assert (replay.restarts, replay.call_number) == (1, 4)


async def test_events_never_published_start_no_new_run(agent: Agent) -> None:
    replay = Replay(on_restart=lambda: pytest.fail("no new run"))
    call = ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args={})
    await replay.apply(call)
    await replay.apply(ToolResult.answering(call, "x"))
    assert replay.restarts == 0


async def test_a_result_delivered_again_answers_its_call_and_no_call_is_synthesized(raw_log: RawLog) -> None:
    replay = Replay(
        raw_log(
            _call(1, 1.0, "c1"),
            _result(2, 2.0, "c1"),
            _result(3, 2.1, "c1").replace(b'"step":3', b'"step":2'),  # delivered again
            _call(4, 3.0, "c2"),
            _result(5, 4.0, "c2"),
            _result(6, 5.0, "c1"),  # c1 again, from a later response (step 6)
        )
    )
    numbers: list[int] = []

    async def on_result(result: ToolResult) -> None:
        numbers.append(replay.call_number)

    replay.bus.subscribe(ToolResult, on_result)
    capture = Capture().attach(replay.bus)
    await replay.run()
    assert [(type(e).__name__, e.call_id) for e in capture.events] == [  # type: ignore[attr-defined]
        ("ToolCall", "c1"),
        ("ToolResult", "c1"),
        ("ToolResult", "c1"),
        ("ToolCall", "c2"),
        ("ToolResult", "c2"),
        ("ToolCall", "c1"),  # a new result of c1: its call is synthesized
        ("ToolResult", "c1"),
    ]
    assert numbers == [1, 1, 2, 3]


async def test_calls_open_under_one_id_are_each_answered_by_a_result_of_it(raw_log: RawLog) -> None:
    replay = Replay(
        raw_log(
            _call(1, 1.0, "c1"),
            _call(2, 2.0, "c1"),  # the runtime reused the id before the first call was answered
            _result(3, 3.0, "c1"),
            _result(4, 4.0, "c1"),
            _result(5, 5.0, "c1"),  # a third result: no call of its own was recorded
        )
    )
    numbers: list[int] = []

    async def on_result(result: ToolResult) -> None:
        numbers.append(replay.call_number)

    replay.bus.subscribe(ToolResult, on_result)
    capture = Capture().attach(replay.bus)
    await replay.run()
    assert [type(e).__name__ for e in capture.events] == [
        "ToolCall",
        "ToolCall",
        "ToolResult",
        "ToolResult",
        "ToolCall",  # synthesized for the third
        "ToolResult",
    ]
    assert numbers == [1, 2, 3]


async def test_calls_never_answered_are_forgotten_oldest_first(
    raw_log: RawLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bus.replay

    monkeypatch.setattr(bus.replay, "_OPEN_IDS", 2)
    monkeypatch.setattr(bus.replay, "_OPEN_PER_ID", 2)
    replay = Replay(
        raw_log(
            *(_call(seq, float(seq), "a") for seq in (1, 2, 3)),  # a runtime that reports no results
            _call(4, 4.0, "b"),
            _call(5, 5.0, "c"),  # a third id: the oldest, a, goes
            _result(6, 6.0, "b"),
            _result(7, 7.0, "a"),
        )
    )
    capture = Capture().attach(replay.bus)
    await replay.run()
    assert [(type(e).__name__, e.call_id) for e in capture.events][5:] == [  # type: ignore[attr-defined]
        ("ToolResult", "b"),
        ("ToolCall", "a"),  # synthesized: a's calls were forgotten
        ("ToolResult", "a"),
    ]


async def test_a_result_like_the_last_is_new_when_a_call_came_between(raw_log: RawLog) -> None:
    same_step = b'"step":1,'
    replay = Replay(
        raw_log(
            _call(1, 1.0, "x"),
            _result(2, 2.0, "x").replace(b'"step":2,', same_step),
            _call(3, 3.0, "x").replace(b'"step":3,', same_step),  # the same id and step: a loop of one's own
            _result(4, 4.0, "x").replace(b'"step":4,', same_step),
        )
    )
    capture = Capture().attach(replay.bus)
    await replay.run()
    assert [type(e).__name__ for e in capture.events] == ["ToolCall", "ToolResult", "ToolCall", "ToolResult"]
    assert replay.call_number == 2  # the second result answers the second call, not the first again


async def test_a_replay_without_on_restart_still_counts_the_runs(raw_log: RawLog) -> None:
    replay = Replay(raw_log(_call(1, 1.0, "c1"), _call(2, 2.0, "c2"), _call(1, 3.0, "c1")))
    await replay.run()
    assert (replay.restarts, replay.call_number) == (1, 3)


async def test_a_long_replay_gives_the_other_tasks_a_turn_every_few_hundred_events(raw_log: RawLog) -> None:
    """A server restoring one long session from its log goes on answering its other requests meanwhile."""
    lines = [line for n in range(1000) for line in (_call(2 * n + 1, 1.0, f"c{n}"), _result(2 * n + 2, 1.0, f"c{n}"))]
    path = raw_log(*lines)
    turns = 0

    async def meanwhile() -> None:
        nonlocal turns
        while True:
            turns += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(meanwhile)
        await Replay(path).run()
        during_run, turns = turns, 0
        fed = Replay()
        for event in LogReader(path):
            await fed.apply(event)
        during_apply = turns
        tasks.cancel_scope.cancel()
    assert during_run >= 6  # 2,000 events: a turn after every 256
    assert during_apply >= 6
