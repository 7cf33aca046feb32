"""Bus delivery: order, awaited nested publishes, stamping, isolation, decide."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from structlog.testing import capture_logs

from bus import (
    ALLOW,
    Agent,
    AgentStatus,
    Bus,
    ContextMessage,
    ContextSource,
    Decision,
    Event,
    SessionLog,
    ToolCall,
    ToolResult,
    UserMessage,
    read_log,
)
from bus.testing import Capture, FakeClock

pytestmark = pytest.mark.anyio


def _call(agent: Agent | None, call_id: str = "c1", tool: str = "grep", args: Any = None) -> ToolCall:
    return ToolCall(agent=agent, call_id=call_id, step=1, tool=tool, args=args if args is not None else {"q": "x"})


def _reminder(result: ToolResult, text: str = "you repeated yourself") -> ContextMessage:
    return ContextMessage(
        agent=result.agent,
        call_id=result.call_id,
        source=ContextSource(plugin="test-plugin", summary=f"{result.tool} × 3"),
        text=text,
    )


class _Boom(Exception):
    pass


async def test_subscribers_run_in_subscription_order(bus: Bus, agent: Agent) -> None:
    seen: list[str] = []

    def make(name: str) -> Any:
        async def handler(event: UserMessage) -> None:
            seen.append(name)

        return handler

    for name in ("first", "second", "third"):
        bus.subscribe(UserMessage, make(name))
    await bus.publish(UserMessage(agent=agent, text="hi"))
    assert seen == ["first", "second", "third"]


async def test_subscribers_only_see_their_exact_event_type(bus: Bus, agent: Agent) -> None:
    seen: list[Event] = []

    async def on_any(event: Event) -> None:
        seen.append(event)

    async def on_user(event: UserMessage) -> None:
        seen.append(event)

    bus.subscribe(Event, on_any)
    bus.subscribe(UserMessage, on_user)
    message = UserMessage(agent=agent, text="hi")
    await bus.publish(message)
    await bus.publish(AgentStatus(agent=agent, status="idle"))
    assert seen == [message]


async def test_publish_returns_after_every_subscriber_finished_even_across_awaits(bus: Bus, agent: Agent) -> None:
    finished: list[str] = []

    async def slow(event: UserMessage) -> None:
        for _ in range(5):
            await anyio.sleep(0)
        finished.append("slow")

    async def fast(event: UserMessage) -> None:
        finished.append("fast")

    bus.subscribe(UserMessage, slow)
    bus.subscribe(UserMessage, fast)
    await bus.publish(UserMessage(agent=agent, text="hi"))
    assert finished == ["slow", "fast"]


async def test_reminder_for_a_result_is_published_and_logged_before_publish_returns(
    clock: FakeClock, agent: Agent, log_path: Path
) -> None:
    bus = Bus(clock=clock)
    capture = Capture().attach(bus)
    log = SessionLog(log_path, session="s").attach(bus)
    order: list[str] = []

    async def remind(result: ToolResult) -> None:
        order.append("remind:start")
        await bus.publish(_reminder(result))
        order.append("remind:end")

    async def later(result: ToolResult) -> None:
        order.append("later")

    async def on_context(message: ContextMessage) -> None:
        order.append("context")

    bus.subscribe(ToolResult, remind)
    bus.subscribe(ToolResult, later)
    bus.subscribe(ContextMessage, on_context)

    result = ToolResult.answering(_call(agent), "hit")
    await bus.publish(result)

    # Depth first: the nested publish is fully delivered before the next
    # subscriber of the outer event runs, and all of it before publish returns.
    assert order == ["remind:start", "context", "remind:end", "later"]
    assert [type(e) for e in capture.events] == [ToolResult, ContextMessage]
    assert [e.seq for e in capture.events] == [1, 2]
    log.close()
    logged = list(read_log(log_path))
    assert [(type(e), e.seq) for e in logged] == [(ToolResult, 1), (ContextMessage, 2)]
    assert isinstance(logged[1], ContextMessage)
    assert logged[1].call_id == result.call_id


async def test_seq_counts_publishes_and_ts_reads_the_injected_clock(bus: Bus, clock: FakeClock, agent: Agent) -> None:
    assert bus.seq == 0
    events = [UserMessage(agent=agent, text=str(i)) for i in range(3)]
    stamps = []
    for event in events:
        await bus.publish(event)
        stamps.append((event.seq, event.ts, bus.seq))
        clock.advance(0.5)
    assert stamps == [
        (1, clock.now - 1.5, 1),
        (2, clock.now - 1.0, 2),
        (3, clock.now - 0.5, 3),
    ]


async def test_bus_without_a_clock_stamps_wall_time(agent: Agent) -> None:
    import time

    bus = Bus()
    before = time.time()
    event = UserMessage(agent=agent, text="hi")
    await bus.publish(event)
    assert before <= event.ts <= time.time()


async def test_recorders_see_events_before_subscribers_and_in_seq_order(bus: Bus, agent: Agent) -> None:
    order: list[str] = []

    async def publishes_more(event: UserMessage) -> None:
        order.append(f"subscriber:{event.seq}")
        if event.text == "outer":
            await bus.publish(UserMessage(agent=agent, text="inner"))

    bus.subscribe(UserMessage, publishes_more)
    bus.record(lambda event: order.append(f"recorder:{event.seq}"))
    await bus.publish(UserMessage(agent=agent, text="outer"))
    assert order == ["recorder:1", "subscriber:1", "recorder:2", "subscriber:2"]


async def test_subscriber_that_always_raises_is_isolated_and_logged(bus: Bus, agent: Agent) -> None:
    seen: list[int] = []

    async def broken(event: ToolResult) -> None:
        raise _Boom("subscriber bug")

    async def healthy(event: ToolResult) -> None:
        seen.append(event.seq)

    bus.subscribe(ToolResult, broken)
    bus.subscribe(ToolResult, healthy)
    with capture_logs() as logs:
        for i in range(3):
            await bus.publish(ToolResult.answering(_call(agent, f"c{i}"), "ok"))
    assert seen == [1, 2, 3]
    assert len(logs) == 3
    entry = logs[0]
    assert entry["log_level"] == "error"
    assert entry["event"] == "subscriber failed"
    assert entry["event_type"] == "ToolResult"
    assert "broken" in entry["subscriber"]
    assert entry["exc_info"] is True


class _Unprintable:
    """A handler or a returned value whose ``repr`` raises too."""

    def __repr__(self) -> str:
        raise _Boom("repr bug")

    def __getattr__(self, name: str) -> Any:  # its __qualname__ too
        raise _Boom(f"no {name}")

    async def __call__(self, event: object) -> None:
        raise _Boom("handler bug")


async def test_a_fault_is_reported_whatever_its_culprits_repr_does(bus: Bus, agent: Agent) -> None:
    bus.subscribe(ToolResult, _Unprintable())
    unprintable = _Unprintable()

    async def answers_junk(call: ToolCall) -> object:
        return unprintable

    bus.intercept("junk", answers_junk)  # type: ignore[arg-type]
    with capture_logs() as logs:
        await bus.publish(ToolResult.answering(_call(agent, "c1"), "ok"))
        assert (await bus.decide(_call(agent, "c2"))).allowed
    assert [entry["event"] for entry in logs] == ["subscriber failed", "interceptor failed"]
    assert logs[0]["subscriber"].startswith("<_Unprintable instance at")
    assert logs[1]["returned"].startswith("<_Unprintable instance at")


async def test_a_field_of_another_type_is_published_as_a_reader_of_the_log_gets_it(
    bus: Bus, capture: Capture, agent: Agent
) -> None:
    call = ToolCall(agent=agent, call_id=7, step="2", tool=5, args={})  # type: ignore[arg-type]
    await bus.decide(call)
    await bus.publish(ToolResult.answering(call, {"hits": [1]}))  # type: ignore[arg-type]
    await bus.publish(UserMessage(agent=agent, text=3))  # type: ignore[arg-type]
    published, result, message = capture.events
    assert (published.call_id, published.step, published.tool) == ("7", 2, "5")  # type: ignore[attr-defined]
    assert (result.call_id, result.content) == ("7", '{"hits":[1]}')  # type: ignore[attr-defined]
    assert message.text == "3"  # type: ignore[attr-defined]
    assert published.agent is agent, "the handle stays"


async def test_every_kind_of_event_is_published_as_a_reader_of_the_log_gets_it(
    bus: Bus, capture: Capture, agent: Agent, tmp_path: Path
) -> None:
    """A denial's advice, a status's ``by``, a context message's source:
    fields other than a call's and a result's own are read back too, so a
    replay of the log holds every event the live bus delivered."""
    log = SessionLog(tmp_path / "s.jsonl").attach(bus)
    call = _call(agent, "c1")
    await bus.decide(call)
    await bus.publish(ToolResult(agent=agent, call_id="c1", step=1, tool="t", denied_by=5, advice=42))  # type: ignore[arg-type]
    await bus.publish(AgentStatus(agent=agent, status="disposed", reason={"x": 1}, by=7))  # type: ignore[arg-type]
    source = ContextSource(plugin="p", summary=3)  # type: ignore[arg-type]
    await bus.publish(ContextMessage(agent=agent, call_id="c1", source=source, text="note"))
    log.close()
    _, denial, status, note = capture.events
    assert (denial.denied_by, denial.advice) == ("5", "42")  # type: ignore[attr-defined]
    assert (status.reason, status.by) == ('{"x":1}', "7")  # type: ignore[attr-defined]
    assert note.source.summary == "3"  # type: ignore[attr-defined]
    reader = read_log(tmp_path / "s.jsonl")
    assert [type(e).__name__ for e in reader] == ["ToolCall", "ToolResult", "AgentStatus", "ContextMessage"]
    assert reader.report.skipped == 0


async def test_tool_annotations_given_whole_as_hints_keep_the_hints_they_declare(
    bus: Bus, capture: Capture, agent: Agent, tmp_path: Path
) -> None:
    """MCP's annotations as a dict carry a title and unset hints as ``None``:
    the call is published with the hints declared true or false, and its
    log line reads back the same."""
    log = SessionLog(tmp_path / "s.jsonl").attach(bus)
    hints = {"title": "Read a file", "readOnlyHint": True, "destructiveHint": None, "openWorldHint": False}
    await bus.decide(ToolCall(agent=agent, call_id="c1", step=1, tool="read", hints=hints))  # type: ignore[arg-type]
    await bus.decide(ToolCall(agent=agent, call_id="c2", step=2, tool="list", hints={"title": "List"}))  # type: ignore[dict-item]
    log.close()
    published, undeclared = capture.events
    assert published.hints == {"readOnlyHint": True, "openWorldHint": False}  # type: ignore[attr-defined]
    assert undeclared.hints is msgspec.UNSET, "no hint declared: none at all"  # type: ignore[attr-defined]
    reader = read_log(tmp_path / "s.jsonl")
    assert [e.hints for e in reader if isinstance(e, ToolCall)] == [published.hints, msgspec.UNSET]  # type: ignore[attr-defined]
    assert reader.report.skipped == 0


@pytest.mark.parametrize("field", ["late", "source.kind"])
async def test_a_flag_or_a_source_kind_no_reader_could_read_is_refused_naming_it(
    bus: Bus, capture: Capture, agent: Agent, field: str
) -> None:
    event: Event
    if field == "late":
        event = ToolCall(agent=agent, call_id="c1", step=1, tool="t", late="no")  # type: ignore[arg-type]
    else:
        source = ContextSource(kind="note", plugin="p")  # type: ignore[arg-type]
        event = ContextMessage(agent=agent, call_id="c1", source=source, text="x")
    with pytest.raises(TypeError, match=rf"{type(event).__name__} cannot be logged: .* at `\$\.{field}`"):
        await bus.publish(event)
    assert (capture.events, bus.seq) == ([], 0)


async def test_an_agent_given_as_its_id_is_refused_naming_the_field(bus: Bus, capture: Capture) -> None:
    """Guards keep an agent's state on its handle: an id string would be a
    new agent at every event."""
    with pytest.raises(TypeError, match=r"ToolCall\.agent must be a bus\.Agent .*, got str 'main'"):
        await bus.decide(ToolCall(agent="main", call_id="c1", step=1, tool="t"))  # type: ignore[arg-type]
    assert (capture.events, bus.seq) == ([], 0)


@pytest.mark.parametrize("reading", [float("nan"), float("inf"), "now", None])
async def test_a_clock_reading_no_log_could_hold_is_refused(reading: object, agent: Agent) -> None:
    bus = Bus(clock=lambda: reading)  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError, match=f"the bus clock returned {reading!r}: an event's ts must be a finite number"):
        await bus.publish(UserMessage(agent=agent, text="hi"))
    assert bus.seq == 0


async def test_a_clock_reading_whole_seconds_is_taken(agent: Agent) -> None:
    bus = Bus(clock=lambda: 1764489600)
    seen: list[UserMessage] = []
    bus.record(lambda event: seen.append(event))  # type: ignore[arg-type]
    await bus.publish(UserMessage(agent=agent, text="hi"))
    assert (seen[0].ts, type(seen[0].ts)) == (1764489600.0, float)


async def test_an_event_no_reader_could_read_is_refused_naming_its_field(
    bus: Bus, capture: Capture, agent: Agent
) -> None:
    with pytest.raises(TypeError, match=r"ToolCall cannot be logged: Expected `int`, got `null` - at `\$\.step`"):
        await bus.decide(ToolCall(agent=agent, call_id="c1", step=None, tool="t"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ToolResult cannot be logged: .* at `\$\.is_error`"):
        await bus.publish(ToolResult(agent=agent, call_id="c1", step=1, tool="t", is_error="yes"))  # type: ignore[arg-type]
    assert capture.events == [], "nothing published"
    assert bus.seq == 0, "no seq taken"


async def test_recorder_that_always_raises_is_isolated_and_logged(bus: Bus, capture: Capture, agent: Agent) -> None:
    seen: list[int] = []

    def broken_recorder(event: Event) -> None:
        raise _Boom("disk full")

    async def healthy(event: UserMessage) -> None:
        seen.append(event.seq)

    bus.record(broken_recorder)
    bus.subscribe(UserMessage, healthy)
    with capture_logs() as logs:
        await bus.publish(UserMessage(agent=agent, text="a"))
        await bus.publish(UserMessage(agent=agent, text="b"))
    assert seen == [1, 2]
    assert [e.seq for e in capture.events] == [1, 2]
    assert [(e["event"], e["event_type"]) for e in logs] == [("recorder failed", "UserMessage")] * 2
    assert "broken_recorder" in logs[0]["subscriber"]


async def test_failing_callable_without_a_qualname_is_logged_by_repr(bus: Bus, agent: Agent) -> None:
    async def handler(event: UserMessage, *, tag: str) -> None:
        raise _Boom(tag)

    partial = functools.partial(handler, tag="x")
    bus.subscribe(UserMessage, partial)
    with capture_logs() as logs:
        await bus.publish(UserMessage(agent=agent, text="a"))
    assert logs[0]["subscriber"] == repr(partial)


async def test_unsubscribe_stops_delivery_to_that_handler_only(bus: Bus, agent: Agent) -> None:
    seen: list[str] = []

    async def one(event: UserMessage) -> None:
        seen.append("one")

    async def two(event: UserMessage) -> None:
        seen.append("two")

    bus.subscribe(UserMessage, one)
    bus.subscribe(UserMessage, two)
    bus.unsubscribe(UserMessage, one)
    await bus.publish(UserMessage(agent=agent, text="a"))
    assert seen == ["two"]


async def test_bound_methods_can_be_unsubscribed_unrecorded_and_unintercepted(bus: Bus, agent: Agent) -> None:
    class Plugin:
        def __init__(self) -> None:
            self.seen: list[str] = []

        async def on_message(self, event: UserMessage) -> None:
            self.seen.append("subscriber")

        def on_any(self, event: Event) -> None:
            self.seen.append("recorder")

        async def on_call(self, call: ToolCall) -> Decision:
            self.seen.append("interceptor")
            return Decision.deny("no", "plugin")

    plugin = Plugin()
    bus.subscribe(UserMessage, plugin.on_message)
    bus.record(plugin.on_any)
    bus.intercept("plugin", plugin.on_call)
    # A bound method is a new object on every attribute access; detaching
    # must still find it, as a plugin's ``detach`` does exactly this.
    bus.unsubscribe(UserMessage, plugin.on_message)
    bus.unrecord(plugin.on_any)
    bus.unintercept(plugin.on_call)
    await bus.publish(UserMessage(agent=agent, text="a"))
    assert await bus.decide(_call(agent)) is ALLOW
    assert plugin.seen == []


async def test_detaching_an_unknown_handler_is_a_clear_error(bus: Bus) -> None:
    async def handler(event: UserMessage) -> None: ...

    def recorder(event: Event) -> None: ...

    async def interceptor(call: ToolCall) -> Decision | None:
        return None

    with pytest.raises(ValueError, match=r"handler.* is not subscribed to UserMessage"):
        bus.unsubscribe(UserMessage, handler)
    bus.subscribe(ToolCall, handler)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"handler.* is not subscribed to UserMessage"):
        bus.unsubscribe(UserMessage, handler)
    with pytest.raises(ValueError, match=r"recorder.* is not a recorder of this bus"):
        bus.unrecord(recorder)
    with pytest.raises(ValueError, match=r"interceptor.* is not an interceptor of this bus"):
        bus.unintercept(interceptor)


async def test_subscribing_during_a_publish_takes_effect_from_the_next_publish(bus: Bus, agent: Agent) -> None:
    seen: list[str] = []

    async def late(event: UserMessage) -> None:
        seen.append(f"late:{event.text}")

    async def subscribes_another(event: UserMessage) -> None:
        seen.append(f"early:{event.text}")
        bus.subscribe(UserMessage, late)
        bus.unsubscribe(UserMessage, subscribes_another)

    async def stays(event: UserMessage) -> None:
        seen.append(f"stays:{event.text}")

    bus.subscribe(UserMessage, subscribes_another)
    bus.subscribe(UserMessage, stays)
    await bus.publish(UserMessage(agent=agent, text="1"))
    await bus.publish(UserMessage(agent=agent, text="2"))
    assert seen == ["early:1", "stays:1", "stays:2", "late:2"]


async def test_cancelling_a_subscriber_propagates_out_of_publish(bus: Bus, agent: Agent) -> None:
    after: list[str] = []

    async def blocks(event: UserMessage) -> None:
        await anyio.sleep_forever()

    async def next_one(event: UserMessage) -> None:
        after.append("next subscriber")

    bus.subscribe(UserMessage, blocks)
    bus.subscribe(UserMessage, next_one)
    with capture_logs() as logs:
        with anyio.move_on_after(0.01) as scope:
            await bus.publish(UserMessage(agent=agent, text="a"))
            after.append("publish returned")
    assert scope.cancelled_caught
    assert after == []
    assert logs == []


async def test_cancelling_an_interceptor_propagates_out_of_decide(bus: Bus, agent: Agent) -> None:
    reached: list[str] = []

    async def blocks(call: ToolCall) -> Decision | None:
        await anyio.sleep_forever()
        return None

    bus.intercept("slow", blocks)
    with capture_logs() as logs:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await bus.decide(_call(agent))
            reached.append("decided")
    assert scope.cancelled_caught
    assert reached == []
    assert logs == []


async def test_decide_publishes_the_call_before_asking_interceptors(bus: Bus, capture: Capture, agent: Agent) -> None:
    order: list[str] = []

    async def on_call(call: ToolCall) -> None:
        order.append(f"subscriber saw seq {call.seq}")

    async def interceptor(call: ToolCall) -> Decision | None:
        order.append(f"interceptor saw seq {call.seq}")
        return None

    bus.subscribe(ToolCall, on_call)
    bus.intercept("guard", interceptor)
    call = _call(agent)
    assert await bus.decide(call) is ALLOW
    assert capture.events == [call]
    assert order == ["subscriber saw seq 1", "interceptor saw seq 1"]


async def test_decide_allows_when_interceptors_return_none_or_allow(bus: Bus, agent: Agent) -> None:
    asked: list[str] = []

    async def returns_none(call: ToolCall) -> Decision | None:
        asked.append("none")
        return None

    async def returns_allow(call: ToolCall) -> Decision | None:
        asked.append("allow")
        return ALLOW

    async def allowed_with_reason(call: ToolCall) -> Decision | None:
        asked.append("reason")
        return Decision(reason="looks fine")

    bus.intercept("a", returns_none)
    bus.intercept("b", returns_allow)
    bus.intercept("c", allowed_with_reason)
    decision = await bus.decide(_call(agent))
    assert decision.allowed
    assert asked == ["none", "allow", "reason"]


async def test_a_plain_function_interceptor_and_subscriber_are_honoured(bus: Bus, agent: Agent) -> None:
    """A safety interceptor written without ``async`` still denies: a
    registration that is allowed must work, not fail open at every call."""
    seen: list[str] = []

    def no_rm(call: ToolCall) -> Decision | None:
        return Decision.deny("destructive command refused", "policy") if "rm -rf" in str(call.args) else None

    bus.intercept("safety", no_rm)
    bus.subscribe(ToolCall, lambda call: seen.append(call.call_id))
    bus.subscribe(ToolCall, lambda call: len(seen))  # type: ignore[arg-type,return-value]  # a value returned
    denied = await bus.decide(ToolCall(agent=agent, call_id="c1", step=1, tool="Bash", args={"command": "rm -rf /"}))
    assert (denied.allowed, denied.by) == (False, "policy")
    assert (await bus.decide(_call(agent))).allowed
    assert seen == ["c1", "c1"]


async def test_a_plain_interceptor_answering_no_decision_is_logged_with_its_answer(bus: Bus, agent: Agent) -> None:
    bus.intercept("confused", lambda call: False)  # type: ignore[arg-type,return-value]
    with capture_logs() as logs:
        assert (await bus.decide(_call(agent))).allowed
    assert [(e["event"], e["returned"]) for e in logs] == [("interceptor failed", "False")]


async def test_a_decision_whose_allowed_is_no_bool_is_logged_as_a_failing_interceptor(bus: Bus, agent: Agent) -> None:
    async def confused(call: ToolCall) -> Decision | None:
        return Decision(allowed="no", reason="x")  # type: ignore[arg-type]

    bus.intercept("confused", confused)
    with capture_logs() as logs:
        assert (await bus.decide(_call(agent))).allowed
    assert [(e["event"], e["returned"]) for e in logs] == [("interceptor failed", "allowed='no'")]


@pytest.mark.parametrize(
    ("register", "named"),
    [
        (lambda bus: bus.intercept(_async_interceptor, "safety"), "the name comes first"),  # arguments swapped
        (lambda bus: bus.intercept("", _async_interceptor), "a non-empty str"),
        (lambda bus: bus.intercept("safety", None), "the interceptor must be callable"),
        (lambda bus: bus.subscribe(ToolCall, None), "the handler must be callable"),
        (lambda bus: bus.subscribe(_async_interceptor, ToolCall), "the event type comes first"),
        (lambda bus: bus.record("log.jsonl"), "the recorder must be callable"),
    ],
)
def test_a_registration_that_could_never_run_is_refused_naming_what_is_wrong(register: Any, named: str) -> None:
    with pytest.raises(TypeError, match=named):
        register(Bus())


async def _async_interceptor(call: ToolCall) -> Decision | None:
    return None


async def test_decide_without_interceptors_allows(bus: Bus, agent: Agent) -> None:
    assert await bus.decide(_call(agent)) == Decision(allowed=True, reason=None, by=None)


async def test_first_deny_wins_and_later_interceptors_are_not_asked(bus: Bus, agent: Agent) -> None:
    asked: list[str] = []

    async def allows(call: ToolCall) -> Decision | None:
        asked.append("allows")
        return None

    async def denies(call: ToolCall) -> Decision | None:
        asked.append("denies")
        return Decision.deny("stop repeating grep", "loop-guard")

    async def also_denies(call: ToolCall) -> Decision | None:
        asked.append("also_denies")
        return Decision.deny("other reason", "other")

    bus.intercept("first", allows)
    bus.intercept("second", denies)
    bus.intercept("third", also_denies)
    decision = await bus.decide(_call(agent))
    assert decision == Decision(allowed=False, reason="stop repeating grep", by="loop-guard")
    assert asked == ["allows", "denies"]


async def test_deny_without_by_is_attributed_to_the_interceptor_name(bus: Bus, agent: Agent) -> None:
    async def denies(call: ToolCall) -> Decision | None:
        return Decision(allowed=False, reason="no more")

    async def denies_silently(call: ToolCall) -> Decision | None:
        return Decision(allowed=False)

    bus.intercept("budget", denies)
    assert await bus.decide(_call(agent)) == Decision.deny("no more", "budget")
    bus.unintercept(denies)
    bus.intercept("quiet", denies_silently)
    assert await bus.decide(_call(agent)) == Decision.deny("", "quiet")


async def test_failing_interceptor_is_logged_and_counts_as_allow(bus: Bus, agent: Agent) -> None:
    async def broken(call: ToolCall) -> Decision | None:
        raise _Boom("guard bug")

    async def denies(call: ToolCall) -> Decision | None:
        return Decision.deny("later deny still applies", "second")

    bus.intercept("broken-guard", broken)
    with capture_logs() as logs:
        assert (await bus.decide(_call(agent))).allowed
    assert [(e["event"], e["event_type"], e["subscriber"]) for e in logs] == [
        ("interceptor failed", "ToolCall", "broken-guard")
    ]
    bus.intercept("second", denies)
    with capture_logs():
        assert (await bus.decide(_call(agent))).by == "second"


async def test_interceptor_returning_a_non_decision_is_logged_and_counts_as_allow(bus: Bus, agent: Agent) -> None:
    async def confused(call: ToolCall) -> Any:
        return False

    bus.intercept("confused", confused)  # a mistake mypy would catch; the tool must still run
    with capture_logs() as logs:
        decision = await bus.decide(_call(agent))
    assert decision.allowed
    assert [(e["event"], e["subscriber"]) for e in logs] == [("interceptor failed", "confused")]
    assert "False" in logs[0]["returned"]


async def test_events_without_an_agent_are_delivered(bus: Bus, capture: Capture) -> None:
    call = _call(None)
    assert await bus.decide(call) is ALLOW
    await bus.publish(ToolResult.answering(call, "ok"))
    assert [e.agent for e in capture.events] == [None, None]


async def test_concurrent_publishers_get_distinct_increasing_seq(bus: Bus, capture: Capture) -> None:
    agents = [Agent(f"a{i}") for i in range(4)]

    async def slow(event: ToolResult) -> None:
        await anyio.sleep(0)

    bus.subscribe(ToolResult, slow)

    async def run(agent: Agent) -> None:
        for i in range(5):
            await bus.publish(ToolResult.answering(_call(agent, f"{agent.id}-{i}"), "ok"))

    async with anyio.create_task_group() as tg:
        for agent in agents:
            tg.start_soon(run, agent)
    assert [e.seq for e in capture.events] == list(range(1, 21))
    assert bus.seq == 20


async def test_advance_continues_numbering_after_events_numbered_elsewhere(bus: Bus, agent: Agent) -> None:
    await bus.publish(UserMessage(agent=agent, text="one"))
    bus.advance(5)
    bus.advance(2)  # never back
    message = UserMessage(agent=agent, text="six")
    await bus.publish(message)
    assert (bus.seq, message.seq) == (6, 6)
    with pytest.raises(ValueError, match="integer"):
        bus.advance(True)
