"""The ``Guard``: policies from config, bus wiring, per-agent state, delivery, fault isolation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec
import pytest
from structlog.testing import capture_logs

from bus import Agent, AgentStatus, Bus, ContextMessage, Event, ToolCall, ToolResult, UserMessage
from bus.testing import Capture, FakeClock
from guard import (
    Action,
    ActionKind,
    Config,
    FingerprintCache,
    Guard,
    Policy,
    RemindConfig,
    RemindPolicy,
    action_for,
    build_policies,
)
from guard.actions import DENYING
from guard.config import RECOMMENDED
from guard.guard import _Entry
from tests.guard.conftest import OnCallPolicy

GREP = {"pattern": "x"}


class _Halts(Policy[None]):
    name = "halts"
    plugin = "halts-plugin"

    def new_state(self) -> None:
        return None

    def on_result(self, state: Any, result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        return Action(
            policy=self.name,
            action="halt",
            agent=result.agent.id if result.agent else None,
            tool=result.tool,
            count=1,
            text="stop the run: no progress",
            call_id=result.call_id,
        )


class _Broken(Policy[None]):
    name = "broken"
    plugin = "broken-plugin"

    def new_state(self) -> None:
        return None

    async def on_call(self, state: Any, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        raise RuntimeError("on_call is broken")

    def on_result(self, state: Any, result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        raise RuntimeError("on_result is broken")

    def on_user_message(self, state: Any, message: UserMessage) -> None:
        raise RuntimeError("on_user_message is broken")

    def on_status(self, state: Any, status: AgentStatus) -> None:
        raise RuntimeError("on_status is broken")


_NOT_ACTION = "returned %s, not an Action or None"


class _NoState(Policy[None]):
    """A plugin whose per-agent state cannot be made (a resource it opens is down)."""

    name = "no-state"
    plugin = "no-state-plugin"

    def new_state(self) -> None:
        raise ConnectionError("audit database unreachable")

    async def on_call(self, state: Any, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        raise AssertionError("a policy without state is never asked")


class _Sloppy(Policy[None]):
    """A plugin whose hooks answer with something that is not an ``Action``."""

    name = "sloppy"
    plugin = "sloppy-plugin"

    def new_state(self) -> None:
        return None

    async def on_call(self, state: Any, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        return {"action": "deny"}  # type: ignore[return-value]

    def on_result(self, state: Any, result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        return "remind"  # type: ignore[return-value]


class _Untexted(Policy[None]):
    """A plugin whose reminder is no text (a dict)."""

    name = "untexted"
    plugin = "untexted-plugin"

    def new_state(self) -> None:
        return None

    def on_result(self, state: Any, result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        return action_for(result, policy=self.name, kind="remind", count=1, text={"not": "text"})  # type: ignore[arg-type]


async def _call(bus: Bus, agent: Agent | None, call_id: str, tool: str = "grep", args: Any = None) -> ToolResult:
    """What a runtime does for one tool call: decide, run (or not), publish the result."""
    call = ToolCall(agent=agent, call_id=call_id, step=1, tool=tool, args=GREP if args is None else args)
    decision = await bus.decide(call)
    if decision.allowed:
        result = ToolResult.answering(call, "ok")
    else:
        result = ToolResult.answering(
            call, decision.reason or "", is_error=True, denied_by=decision.by, advice=decision.advice
        )
    await bus.publish(result)
    return result


def test_no_config_runs_remind_alone() -> None:
    guard = Guard()
    assert guard.config == Config()
    assert [type(p) for p in guard.policies] == [RemindPolicy]
    assert guard.plugins == frozenset({"repeat-tool-reminder"})


def test_a_disabled_policy_is_not_built() -> None:
    assert build_policies(Config(remind=RemindConfig(enabled=False))) == []


@pytest.mark.anyio
async def test_a_guard_with_no_policies_observes_nothing(bus: Bus, capture: Capture, agent: Agent) -> None:
    guard = Guard(Config(remind=RemindConfig(enabled=False))).attach(bus)
    for i in range(5):
        await _call(bus, agent, f"c{i}")
    assert capture.of(ContextMessage) == []
    assert guard.plugins == frozenset()


@pytest.mark.anyio
async def test_attach_serves_one_bus_at_a_time(bus: Bus, capture: Capture, agent: Agent) -> None:
    guard = Guard().attach(bus)
    with pytest.raises(RuntimeError, match="already attached"):
        guard.attach(Bus())
    guard.detach()
    guard.detach()  # harmless
    for i in range(3):
        await _call(bus, agent, f"c{i}")
    assert capture.of(ContextMessage) == []  # detached: silent
    other = Bus()
    other_capture = Capture().attach(other)
    guard.attach(other)
    for i in range(3):
        await _call(other, agent, f"d{i}")
    assert [m.call_id for m in other_capture.of(ContextMessage)] == ["d2"]


@pytest.mark.anyio
async def test_a_denying_policy_denies_through_bus_decide(bus: Bus, agent: Agent) -> None:
    seen: list[tuple[str, str]] = []
    guard = Guard(
        policies=[OnCallPolicy("gate", "deny")], on_action=lambda a, e: seen.append((a.action, type(e).__name__))
    )
    guard.attach(bus)
    first = await _call(bus, agent, "c1")
    second = await _call(bus, agent, "c2")
    assert (first.denied_by, first.content) == (None, "ok")
    assert (second.denied_by, second.content, second.is_error) == ("gate-plugin", "gate says no", True)
    assert seen == [("deny", "ToolCall")]
    guard.detach()
    assert (await _call(bus, agent, "c3")).denied_by is None  # the interceptor left with the guard


@pytest.mark.anyio
@pytest.mark.parametrize("kind", sorted(DENYING))
async def test_every_denying_kind_denies_and_the_first_deny_wins(bus: Bus, agent: Agent, kind: ActionKind) -> None:
    actions: list[str] = []
    Guard(
        policies=[OnCallPolicy("first", kind), OnCallPolicy("second", "deny")],
        on_action=lambda a, e: actions.append(a.policy),
    ).attach(bus)
    await _call(bus, agent, "c1")
    result = await _call(bus, agent, "c2")
    assert (result.denied_by, result.content) == ("first-plugin", "first says no")
    assert actions == ["first", "second"]  # both acted; the first deny is the one the model sees


@pytest.mark.anyio
async def test_a_remind_action_before_the_call_allows_it(bus: Bus, capture: Capture, agent: Agent) -> None:
    Guard(policies=[OnCallPolicy("early", "remind")]).attach(bus)
    await _call(bus, agent, "c1")
    result = await _call(bus, agent, "c2")
    assert result.denied_by is None
    [message] = capture.of(ContextMessage)
    assert (message.call_id, message.source.plugin, message.text) == ("c2", "early-plugin", "early says no")


@pytest.mark.anyio
async def test_interceptors_ignore_calls_with_no_agent(bus: Bus) -> None:
    guard = Guard(policies=[OnCallPolicy("gate", "deny")]).attach(bus)
    for i in range(3):
        assert (await _call(bus, None, f"c{i}")).denied_by is None
    assert guard.agent_count() == 0


@pytest.mark.anyio
async def test_a_halt_action_requests_a_halt(bus: Bus, capture: Capture, agent: Agent) -> None:
    Guard(policies=[_Halts()]).attach(bus)
    await _call(bus, agent, "c1")
    [status] = capture.of(AgentStatus)
    assert (status.agent, status.status, status.reason) == (agent, "halt-requested", "stop the run: no progress")
    assert capture.of(ContextMessage) == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("faulty", "failures"),
    [
        (_NoState(), [("new_state", "no-state", None)]),
        (_Sloppy(), [("on_call", "sloppy", _NOT_ACTION % "dict"), ("on_result", "sloppy", _NOT_ACTION % "str")] * 4),
        (_Untexted(), [("on_result", "untexted", "returned an Action whose text is a dict, not a str")] * 4),
    ],
    ids=["state-cannot-be-made", "answers-not-an-action", "answers-an-action-without-text"],
)  # fmt: skip
async def test_a_faulty_plugin_beside_the_built_in_policies_switches_none_of_them_off(
    faulty: Policy[None], failures: list[tuple[str, str, str | None]], bus: Bus, agent: Agent
) -> None:
    Guard(policies=[faulty, OnCallPolicy("gate", "deny")]).attach(bus)
    with capture_logs() as logs:
        await bus.publish(UserMessage(agent=agent, text="find the loader"))
        results = [await _call(bus, agent, f"c{i}") for i in range(1, 5)]
        await bus.publish(AgentStatus(agent=agent, status="disposed"))
    assert [r.denied_by for r in results] == [None, "gate-plugin", "gate-plugin", "gate-plugin"]
    logged = [(e["hook"], e["policy"], e.get("error")) for e in logs if e["event"] == "guard.policy_failed"]
    assert logged == failures
    assert all(e["log_level"] == "error" for e in logs if e["event"] == "guard.policy_failed")


@pytest.mark.anyio
async def test_a_failing_policy_is_logged_and_the_others_still_run(bus: Bus, capture: Capture, agent: Agent) -> None:
    Guard(policies=[_Broken(), RemindPolicy(RemindConfig(thresholds=(2,)))]).attach(bus)
    with capture_logs() as logs:
        await _call(bus, agent, "c1")
        await bus.publish(UserMessage(agent=agent, text="again"))
        await _call(bus, agent, "c2")
        await _call(bus, agent, "c3")
        await bus.publish(AgentStatus(agent=agent, status="disposed"))
    assert [m.call_id for m in capture.of(ContextMessage)] == ["c3"]  # the reset still happened
    failures = [(e["hook"], e["policy"], e["agent"]) for e in logs if e["event"] == "guard.policy_failed"]
    assert failures == [
        ("on_call", "broken", "main"),
        ("on_result", "broken", "main"),
        ("on_user_message", "broken", "main"),
        ("on_call", "broken", "main"),
        ("on_result", "broken", "main"),
        ("on_call", "broken", "main"),
        ("on_result", "broken", "main"),
        ("on_status", "broken", "main"),
    ]
    assert all(e["log_level"] == "error" and e["exc_info"] for e in logs if e["event"] == "guard.policy_failed")


@pytest.mark.anyio
async def test_a_failing_listener_neither_blocks_delivery_nor_other_listeners(
    bus: Bus, capture: Capture, agent: Agent
) -> None:
    def broken(action: Action, trigger: Event) -> None:
        raise RuntimeError("listener is broken")

    heard: list[int] = []
    guard = Guard(on_action=broken).attach(bus)
    guard.add_listener(lambda action, trigger: heard.append(action.count))
    with capture_logs() as logs:
        for i in range(3):
            await _call(bus, agent, f"c{i}")
    assert heard == [3]
    assert [m.source.summary for m in capture.of(ContextMessage)] == ["grep × 3"]
    assert [e["listener"] for e in logs if e["event"] == "guard.listener_failed"] == [
        "test_a_failing_listener_neither_blocks_delivery_nor_other_listeners.<locals>.broken"
    ]


@pytest.mark.anyio
async def test_a_guard_detached_by_a_listener_publishes_nothing_more(bus: Bus, capture: Capture, agent: Agent) -> None:
    guard = Guard()
    guard.add_listener(lambda action, trigger: guard.detach())
    guard.attach(bus)
    for i in range(3):
        await _call(bus, agent, f"c{i}")
    assert capture.of(ContextMessage) == []


@pytest.mark.anyio
async def test_status_events_other_than_disposal_keep_state(bus: Bus, agent: Agent) -> None:
    guard = Guard().attach(bus)
    await _call(bus, agent, "c1")
    await bus.publish(AgentStatus(agent=agent, status="idle"))
    await bus.publish(AgentStatus(agent=None, status="disposed"))
    assert guard.agent_count() == 1
    await bus.publish(AgentStatus(agent=agent, status="disposed"))
    await bus.publish(AgentStatus(agent=agent, status="disposed"))  # twice is harmless
    assert guard.agent_count() == 0


@pytest.mark.anyio
async def test_user_messages_without_an_agent_are_ignored(bus: Bus, capture: Capture, agent: Agent) -> None:
    Guard().attach(bus)
    await _call(bus, agent, "c1")
    await _call(bus, agent, "c2")
    await bus.publish(UserMessage(agent=None, text="broadcast"))
    await _call(bus, agent, "c3")
    assert [m.call_id for m in capture.of(ContextMessage)] == ["c3"]


@pytest.mark.anyio
async def test_action_events_follow_a_logging_reconfiguration_made_after_the_guard(
    bus: Bus, agent: Agent, request: pytest.FixtureRequest
) -> None:
    import logging

    import structlog

    request.addfinalizer(structlog.reset_defaults)
    Guard(Config(remind=RemindConfig(thresholds=(2, 3, 4)))).attach(bus)
    with capture_logs() as before:
        await _call(bus, agent, "c1")
        await _call(bus, agent, "c2")
    assert [e["event"] for e in before] == ["guard.remind"]

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with capture_logs() as filtered:
        await _call(bus, agent, "c3")
    assert filtered == []

    structlog.reset_defaults()
    with capture_logs() as after:
        await _call(bus, agent, "c4")
    assert [(e["event"], e["count"]) for e in after] == [("guard.remind", 4)]


@pytest.mark.anyio
async def test_an_action_record_shows_a_secret_in_the_agent_id_or_tool_name_redacted(bus: Bus) -> None:
    """A log line often ends up in a log shipper, as exported data does: an
    agent named after its token, an MCP tool whose name carries its
    server's URL with a password."""
    agent = Agent("worker-ghp_R7kX2mQ9vL4nP8sT1wY6zB3cF5hJ0dG7aK2eW")
    tool = "mcp__https://deploy:Tr0ub4dor@mcp.example.com__fetch"
    Guard(Config(remind=RemindConfig(thresholds=(2,)))).attach(bus)
    with capture_logs() as logged:
        await _call(bus, agent, "c1", tool=tool)
        await _call(bus, agent, "c2", tool=tool)
    (record,) = logged
    assert (record["agent"], record["tool"]) == (
        "worker-[REDACTED]",
        "mcp__https://deploy:[REDACTED]@mcp.example.com__fetch",
    )


@pytest.mark.anyio
async def test_without_action_logging_the_guard_still_acts_and_tells_listeners(bus: Bus, agent: Agent) -> None:
    heard: list[str] = []
    Guard(
        Config(remind=RemindConfig(thresholds=(2,))), log_actions=False, on_action=lambda a, _: heard.append(a.action)
    ).attach(bus)
    with capture_logs() as logged:
        await _call(bus, agent, "c1")
        await _call(bus, agent, "c2")
    assert (logged, heard) == ([], ["remind"])


@pytest.mark.anyio
async def test_action_records_go_through_a_logger_that_cannot_say_its_level(
    bus: Bus, agent: Agent, request: pytest.FixtureRequest
) -> None:
    import structlog

    request.addfinalizer(structlog.reset_defaults)
    structlog.configure(wrapper_class=structlog.BoundLogger)  # the generic wrapper: no is_enabled_for
    Guard(Config(remind=RemindConfig(thresholds=(2,)))).attach(bus)
    with capture_logs() as logged:
        await _call(bus, agent, "c1")
        await _call(bus, agent, "c2")
    assert [e["event"] for e in logged] == ["guard.remind"]


@pytest.mark.anyio
@pytest.mark.usefixtures("logging_to_a_full_disk")
async def test_a_denial_stands_when_the_record_of_it_cannot_be_written(bus: Bus, agent: Agent) -> None:
    Guard(RECOMMENDED).attach(bus)
    results = [await _call(bus, agent, f"c{n}") for n in range(4)]
    assert [r.denied_by for r in results] == [None, None, "loop-detector", "loop-detector"]


@pytest.mark.anyio
async def test_watches_saved_from_one_guard_continue_in_another(bus: Bus, agent: Agent, clock: FakeClock) -> None:
    import copy

    config = Config(remind=RemindConfig(thresholds=(3,)))
    first = Guard(config).attach(bus)
    await _call(bus, agent, "c1")
    await _call(bus, agent, "c2")
    saved = first.watches(agent)
    assert saved is not None
    assert first.watches(Agent("never-seen")) is None
    later_bus = Bus(clock=clock, seq=bus.seq)
    capture = Capture().attach(later_bus)
    later = Guard(config).attach(later_bus)
    with pytest.raises(ValueError, match="not over this guard's policies"):
        later.restore(agent, saved)  # over the first guard's policy
    moved = [copy.copy(w) for w in saved]
    for watch in moved:
        watch.policy = later.policies[0]  # type: ignore[misc]
    with pytest.raises(ValueError, match="not over this guard's policies"):
        later.restore(agent, [*moved, *moved])
    later.restore(agent, moved)
    await _call(later_bus, agent, "c3")
    assert [m.call_id for m in capture.of(ContextMessage)] == ["c3"], "the run of three went on"


@pytest.mark.anyio
async def test_a_result_delivered_twice_is_seen_once(bus: Bus, capture: Capture, agent: Agent) -> None:
    from guard import load_config

    Guard(load_config("recommended")).attach(bus)
    read = {"file_path": "/src/app.py"}
    allowed = []
    for step in range(1, 4):
        call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool="Read", args=read)
        decision = await bus.decide(call)
        allowed.append(decision.allowed)
        result = ToolResult.answering(call, "print('hello')") if decision.allowed else ToolResult.denial(call, decision)
        await bus.publish(result)
        await bus.publish(msgspec.structs.replace(result))  # the runtime delivers it again
    assert allowed == [True, True, False]  # as with each result delivered once


@pytest.mark.anyio
@pytest.mark.parametrize("preset", ["default", "recommended"])
async def test_a_call_id_and_step_used_again_answer_a_new_call_each_time(
    bus: Bus, capture: Capture, agent: Agent, preset: str
) -> None:
    from guard import load_config

    # A loop of one's own that names every call "x" at step 0: each result
    # answers a call made since, so it is no copy and it counts.
    Guard(load_config(preset) if preset != "default" else Config()).attach(bus)
    allowed = []
    for _ in range(3):
        call = ToolCall(agent=agent, call_id="x", step=0, tool="grep", args=GREP)
        decision = await bus.decide(call)
        allowed.append(decision.allowed)
        await bus.publish(ToolResult.answering(call, "ok") if decision.allowed else ToolResult.denial(call, decision))
    if preset == "default":
        [reminder] = capture.of(ContextMessage)
        assert reminder.source.summary == "grep × 3"
    else:
        assert allowed == [True, True, False]


class _Results(Policy[list[int]]):
    """Sees results only (it decides no call), and counts them."""

    name = "results"
    plugin = "results-plugin"

    def new_state(self) -> list[int]:
        return [0]

    def on_result(self, state: list[int], result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        state[0] += 1
        return None


@pytest.mark.anyio
async def test_a_guard_that_decides_no_call_still_tells_a_new_result_from_a_copy(bus: Bus, agent: Agent) -> None:
    guard = Guard(policies=[_Results()]).attach(bus)
    for _ in range(2):
        call = ToolCall(agent=agent, call_id="x", step=0, tool="grep", args=GREP)
        await bus.decide(call)
        result = ToolResult.answering(call, "ok")
        await bus.publish(result)
        await bus.publish(msgspec.structs.replace(result))  # delivered again
    watches = guard.watches(agent)
    assert watches is not None
    assert watches[0].state == [2]  # type: ignore[attr-defined]
    guard.detach()
    await bus.decide(ToolCall(agent=agent, call_id="y", step=1, tool="grep", args=GREP))  # nobody listens now


@pytest.mark.anyio
async def test_a_call_id_used_again_in_a_later_step_is_a_new_result(bus: Bus, capture: Capture, agent: Agent) -> None:
    Guard().attach(bus)
    for step in range(1, 4):  # a model server that names every response's first call "call_0"
        call = ToolCall(agent=agent, call_id="call_0", step=step, tool="grep", args=GREP)
        await bus.decide(call)
        await bus.publish(ToolResult.answering(call, "ok"))
    [reminder] = capture.of(ContextMessage)
    assert reminder.source.summary == "grep × 3"


class _Counts(Policy[list[int]]):
    """Counts the calls and results it is shown (``seen``: calls, results)."""

    name = "counts"
    plugin = "counts-plugin"

    def __init__(self) -> None:
        self.seen = [0, 0]

    def new_state(self) -> list[int]:
        return self.seen

    async def on_call(self, state: list[int], call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        state[0] += 1
        return None

    def on_result(self, state: list[int], result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        state[1] += 1
        return None


class _Asks(Policy[None]):
    """Decides each call the way an escalation does: by waiting on someone."""

    name = "asks"
    plugin = "asks-plugin"

    def new_state(self) -> None:
        return None

    async def on_call(self, state: Any, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        await anyio.sleep(10)
        return None


@pytest.mark.anyio
async def test_the_policies_after_a_cancelled_ask_still_see_the_call(agent: Agent, anyio_backend: str) -> None:
    bus = Bus()
    counts = _Counts()
    Guard(policies=[_Asks(), counts]).attach(bus)
    call = ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args=GREP)
    with anyio.move_on_after(0.05) as scope:  # the runtime's timeout, while the first policy waits
        await bus.decide(call)
    assert scope.cancelled_caught
    assert counts.seen == [1, 0]  # as a replay of the log, which holds the call, shows it to every policy


@pytest.mark.anyio
async def test_the_policies_after_a_cancelled_delivery_still_see_the_result(agent: Agent, anyio_backend: str) -> None:
    bus = Bus()
    counts = _Counts()
    Guard(policies=[_Halts(), counts]).attach(bus)

    async def slow_listener(status: AgentStatus) -> None:  # a runtime forwarding the halt somewhere
        await anyio.sleep(0.2)

    bus.subscribe(AgentStatus, slow_listener)
    call = ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args=GREP)
    await bus.decide(call)
    with anyio.move_on_after(0.05) as scope:  # the runtime's timeout, while the halt is delivered
        await bus.publish(ToolResult.answering(call, "ok"))
    assert scope.cancelled_caught
    assert counts.seen == [1, 1]


@pytest.mark.anyio
async def test_a_subscriber_that_never_returns_holds_a_cancelled_caller_only_so_long(
    agent: Agent, anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("guard.guard._FINISH_SECONDS", 0.2)
    bus = Bus()
    Guard(policies=[_Halts(), _Halts()]).attach(bus)
    stuck = anyio.Event()

    async def never(status: AgentStatus) -> None:
        await stuck.wait()

    bus.subscribe(AgentStatus, never)
    call = ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args=GREP)
    await bus.decide(call)
    with anyio.fail_after(5):  # the shielded finish gives up after its 0.2 s
        with anyio.move_on_after(0.05) as scope:
            await bus.publish(ToolResult.answering(call, "ok"))
    assert scope.cancelled_caught


class _Interrupted(Policy[None]):
    name = "interrupted"
    plugin = "interrupted-plugin"

    def new_state(self) -> None:
        return None

    async def on_call(self, state: Any, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        raise KeyboardInterrupt


@pytest.mark.anyio
async def test_an_interrupt_in_a_policy_stops_the_guard_there(agent: Agent, anyio_backend: str) -> None:
    bus = Bus()
    counts = _Counts()
    Guard(policies=[_Interrupted(), counts]).attach(bus)
    with pytest.raises(KeyboardInterrupt):  # the user's Ctrl-C is no cancellation to finish the event under
        await bus.decide(ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args=GREP))
    assert counts.seen == [0, 0]


class _Order(Policy[None]):
    """Notes the ``seq`` of every event it is shown."""

    name = "order"
    plugin = "order-plugin"

    def __init__(self) -> None:
        self.seen: list[int] = []

    def new_state(self) -> None:
        return None

    async def on_call(self, state: Any, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        self.seen.append(call.seq)
        return None

    def on_result(self, state: Any, result: ToolResult, fingerprints: FingerprintCache) -> Action | None:
        self.seen.append(result.seq)
        return None

    def on_user_message(self, state: Any, message: UserMessage) -> None:
        self.seen.append(message.seq)

    def on_status(self, state: Any, status: AgentStatus) -> None:
        self.seen.append(status.seq)


async def test_an_agents_events_reach_the_policies_in_order_while_a_reminder_is_awaited(anyio_backend: str) -> None:
    """A subscriber that awaits the guard's reminder (a runtime showing it
    somewhere) holds up the event that drew it: the agent's next events,
    published meanwhile by its other tasks, wait for it, so every policy
    sees them in the order of the log, as a replay of the log shows them."""
    order = _Order()
    bus = Bus()
    Guard(policies=[*build_policies(Config(remind=RemindConfig(thresholds=(2,)))), order]).attach(bus)
    shown = anyio.Event()
    released = anyio.Event()

    async def show(message: ContextMessage) -> None:
        shown.set()
        await released.wait()

    bus.subscribe(ContextMessage, show)
    agent, other = Agent("main"), Agent("other")

    async def repeat(n: int) -> None:
        call = ToolCall(agent=agent, call_id=f"c{n}", step=n, tool="grep", args=GREP)
        await bus.decide(call)
        await bus.publish(ToolResult.answering(call, "none"))

    async def parallel() -> None:
        call = ToolCall(agent=agent, call_id="p", step=2, tool="read", args={"path": "a.py"})
        await bus.decide(call)
        await bus.publish(ToolResult.answering(call, "x = 1"))
        await bus.publish(UserMessage(agent=agent, text="go on"))
        await bus.publish(AgentStatus(agent=agent, status="idle"))

    with anyio.fail_after(10):
        await repeat(1)
        async with anyio.create_task_group() as group:
            group.start_soon(repeat, 2)  # its result draws the reminder, whose subscriber waits
            await shown.wait()
            group.start_soon(parallel)
            await bus.publish(UserMessage(agent=other, text="elsewhere"))  # another agent is not held up
            await anyio.sleep(0.05)
            assert order.seen == [1, 2, 3, 6]  # main's result 4 is still being shown; 6 is other's
            released.set()
    # 5 is the reminder, the guard's own output; main's parallel call, result, message and status follow 4
    assert order.seen == [1, 2, 3, 6, 4, 7, 8, 9, 10]


async def test_an_event_published_in_answer_to_the_guards_own_output_is_not_held_up(anyio_backend: str) -> None:
    """A runtime that answers a halt request at once (publishing the
    agent's ``disposed`` from its subscriber) publishes within the turn of
    the event that drew the halt: that status is seen there and then."""
    order = _Order()
    bus = Bus()
    Guard(policies=[_Halts(), order]).attach(bus)
    agent = Agent("main")

    async def stop(status: AgentStatus) -> None:
        if status.status == "halt-requested":
            await bus.publish(AgentStatus(agent=agent, status="disposed"))

    bus.subscribe(AgentStatus, stop)
    call = ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args=GREP)
    with anyio.fail_after(5):
        await bus.decide(call)
        await bus.publish(ToolResult.answering(call, "none"))
    assert order.seen == [1, 3, 4, 2]  # the halt (3) and disposed (4) reach it inside result 2's turn


def test_a_config_given_as_a_dict_is_refused_naming_what_makes_one() -> None:
    with pytest.raises(
        TypeError, match=r"takes a Config \(parse_config\(dict\) or load_config\(path\) makes one\), got dict"
    ):
        Guard({"remind": {}})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("policies", "said"),
    [
        ([RemindConfig()], "takes policies (build_policies(config) makes them), got RemindConfig"),
        ("remind", "takes a list of policies, got str"),
        (3, "takes a list of policies, got int"),
    ],
)
def test_policies_that_are_no_policies_are_refused_naming_what_was_given(policies: Any, said: str) -> None:
    with pytest.raises(TypeError) as caught:
        Guard(policies=policies)
    assert str(caught.value) == f"Guard(policies=...) {said}"


@pytest.mark.anyio
async def test_a_policy_that_publishes_for_its_agent_while_deciding_never_deadlocks(
    bus: Bus, capture: Capture, agent: Agent
) -> None:
    """A policy that posts a note of the agent it decides for publishes in
    that agent's turn, which it holds: the note is in the turn already,
    not queued behind it for ever."""

    class Noting(OnCallPolicy):
        async def on_call(self, state: list[int], call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
            await bus.publish(UserMessage(agent=call.agent, text="note from a policy"))
            return None

    Guard(policies=[Noting("noting", "deny")]).attach(bus)
    with anyio.fail_after(5):
        decision = await bus.decide(ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args={}))
    assert decision.allowed
    assert [type(e).__name__ for e in capture.events] == ["ToolCall", "UserMessage"]


@pytest.mark.anyio
async def test_a_policy_whose_on_call_is_a_plain_def_still_denies(bus: Bus, agent: Agent) -> None:
    """A policy written with a plain ``def on_call`` (the other hooks are
    plain defs): its deny counts, not a failure logged at every call."""

    class NoDeploys(OnCallPolicy):
        def on_call(self, state: list[int], call: ToolCall, fingerprints: FingerprintCache) -> Action | None:  # type: ignore[override]
            return action_for(call, policy=self.name, kind="deny", count=1, text="no deploys", threshold=1)

    Guard(policies=[NoDeploys("no-deploys", "deny")]).attach(bus)
    with capture_logs() as logs:
        decision = await bus.decide(ToolCall(agent=agent, call_id="c1", step=1, tool="deploy", args={}))
    assert (decision.allowed, decision.reason) == (False, "no deploys")
    assert not [e for e in logs if e["log_level"] == "error"]


async def test_a_waiting_event_that_is_cancelled_never_holds_up_the_next(anyio_backend: str) -> None:
    """A runtime that gives up on a parallel call (its timeout) cancels the
    event waiting for its agent's turn: one cancelled while it waits leaves
    the queue, one cancelled just as it was handed the turn hands it on."""
    entry = _Entry(Agent("main"), lambda _: None, [])
    entry.busy = True  # an event of the agent is being shown to the policies
    scopes: dict[str, anyio.CancelScope] = {}
    turns: list[str] = []

    async def wait(name: str) -> None:
        with anyio.CancelScope() as scope:
            scopes[name] = scope
            await entry.turn()
            turns.append(name)
            entry.done()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            for name in ("cancelled-waiting", "cancelled-handed", "next"):
                group.start_soon(wait, name)
            await anyio.sleep(0.05)
            scopes["cancelled-waiting"].cancel()
            await anyio.sleep(0.05)
            entry.done()  # the turn goes to the first still waiting...
            scopes["cancelled-handed"].cancel()  # ...which gives up before it runs
    assert turns[-1] == "next"
    assert "cancelled-waiting" not in turns
    assert (entry.busy, list(entry.waiting or ())) == (False, [])


async def test_a_message_published_in_answer_to_a_reminder_is_not_held_up(anyio_backend: str) -> None:
    """A runtime that answers the guard's reminder by publishing a message
    of the agent from its subscriber: the message is seen inside the turn of
    the result that drew the reminder, not queued behind it for ever."""
    order = _Order()
    bus = Bus()
    Guard(policies=[*build_policies(Config(remind=RemindConfig(thresholds=(2,)))), order]).attach(bus)
    agent = Agent("main")

    async def answer(message: ContextMessage) -> None:
        await bus.publish(UserMessage(agent=agent, text="noted"))

    bus.subscribe(ContextMessage, answer)
    with anyio.fail_after(5):
        for n in range(2):
            call = ToolCall(agent=agent, call_id=f"c{n}", step=n, tool="grep", args=GREP)
            await bus.decide(call)
            await bus.publish(ToolResult.answering(call, "none"))
    assert order.seen == [1, 2, 3, 6, 4]  # 5 is the reminder; its answer, 6, comes before result 4 reaches order


@pytest.fixture
def held() -> tuple[_Order, Bus, anyio.Event]:
    """A bus whose guard reminds at the 2nd repeat, then shows every event to
    ``_Order``; a subscriber holds each reminder up until the event is set."""
    order = _Order()
    bus = Bus()
    Guard(policies=[*build_policies(Config(remind=RemindConfig(thresholds=(2,)))), order]).attach(bus)
    released = anyio.Event()

    async def show(message: ContextMessage) -> None:
        await released.wait()

    bus.subscribe(ContextMessage, show)
    return order, bus, released


async def test_a_result_arriving_while_another_is_held_up_waits_its_turn(
    held: tuple[_Order, Bus, anyio.Event], anyio_backend: str
) -> None:
    order, bus, released = held
    agent = Agent("main")
    calls = [ToolCall(agent=agent, call_id=f"c{n}", step=n, tool="grep", args=GREP) for n in range(3)]
    with anyio.fail_after(5):
        for call in calls:
            await bus.decide(call)
        await bus.publish(ToolResult.answering(calls[0], "none"))
        async with anyio.create_task_group() as group:
            group.start_soon(bus.publish, ToolResult.answering(calls[1], "none"))  # draws the reminder
            await anyio.sleep(0.05)
            group.start_soon(bus.publish, ToolResult.answering(calls[2], "none"))
            await anyio.sleep(0.05)
            assert order.seen == [1, 2, 3, 4]
            released.set()
    assert order.seen == [1, 2, 3, 4, 5, 7]  # 6: the reminder


async def test_events_whose_publishers_give_up_while_they_wait_are_still_seen(
    held: tuple[_Order, Bus, anyio.Event], anyio_backend: str
) -> None:
    """The log holds every event published, so a replay shows each to every
    policy: the live guard must too, even when the runtime gives up on a
    publish (its timeout) while the event waits for its agent's turn. Such
    an event is shown out of turn, and the cancellation goes on."""
    order, bus, released = held
    agent = Agent("main")
    calls = [ToolCall(agent=agent, call_id=f"c{n}", step=n, tool="grep", args=GREP) for n in range(3)]
    late = ToolCall(agent=agent, call_id="late", step=9, tool="read", args={"path": "a.py"})
    given_up: list[Callable[[], Awaitable[object]]] = [
        lambda: bus.publish(ToolResult.answering(calls[2], "late")),
        lambda: bus.decide(late),
        lambda: bus.publish(UserMessage(agent=agent, text="stop")),
        lambda: bus.publish(AgentStatus(agent=agent, status="idle")),
    ]
    with anyio.fail_after(5):
        for call in calls:
            await bus.decide(call)
        await bus.publish(ToolResult.answering(calls[0], "none"))
        async with anyio.create_task_group() as group:
            group.start_soon(bus.publish, ToolResult.answering(calls[1], "none"))  # draws the reminder, held up
            await anyio.sleep(0.05)
            for publish in given_up:
                with anyio.move_on_after(0.05) as scope:  # the runtime's timeout
                    await publish()
                assert scope.cancelled_caught
            assert order.seen == [1, 2, 3, 4, 7, 8, 9, 10]  # 5 is still being shown (6: its reminder)
            released.set()
    assert order.seen == [1, 2, 3, 4, 7, 8, 9, 10, 5]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_task_cancelled_as_it_is_handed_the_turn_hands_it_on(anyio_backend: str) -> None:
    """asyncio's own ``Task.cancel`` (a runtime's ``wait_for``) can land
    after the turn was handed over and before the task ran again: the turn
    goes on to the next event, or every later event of the agent would wait
    for ever."""
    import asyncio

    entry = _Entry(Agent("main"), lambda _: None, [])
    entry.busy = True
    turns: list[str] = []

    async def wait(name: str) -> None:
        await entry.turn()
        turns.append(name)
        entry.done()

    handed = asyncio.ensure_future(wait("handed"))
    following = asyncio.ensure_future(wait("next"))
    await asyncio.sleep(0.01)
    entry.done()  # the turn goes to "handed"...
    handed.cancel()  # ...which is cancelled before it runs again
    await asyncio.sleep(0.01)
    assert (turns, handed.cancelled(), following.done(), entry.busy) == (["next"], True, True, False)
