"""Fleet mode: workers sharing guard state through a real redis-server.

Each ``FleetGuard`` here has its own Redis connection and its own memory,
as separate worker processes would; they share nothing but Redis.
redis-py's asyncio client does not run under trio: asyncio only.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from benchmarks._redis import free_port
from bus import Agent, AgentStatus, AnyEvent, ToolCall, ToolResult, UserMessage
from bus.redis_log import RedisSessionLog, redis_client
from guard import Config, RemindConfig, RescueConfig, TurnsConfig, shadowed
from guard.sessions.fleet import FleetAction, FleetGuard, Outcome
from guard.verdicts import replay_log
from tests.conftest import AskScript, Proxy, RedisClients

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


Workers = Callable[..., list[FleetGuard]]


@pytest.fixture
def workers(redis_clients: RedisClients) -> Workers:
    def make(n: int, config: Config | None = None, **options: Any) -> list[FleetGuard]:
        return [FleetGuard(redis_clients(), config, worker=f"w{i}", **options) for i in range(n)]

    return make


GREP = {"pattern": "load_config"}


class Driver:
    """A runtime's loop that sends each event to a worker chosen by ``pick``,
    as a load balancer would, and reacts to denials as a runtime does."""

    def __init__(self, workers: list[FleetGuard], session: str, pick: Callable[[int], int]) -> None:
        self.workers = workers
        self.session = session
        self.pick = pick
        self.sent = 0
        self.agent = Agent("main")
        self.step = 0
        self.outcomes: list[Outcome] = []

    async def send(self, event: AnyEvent) -> Outcome:
        worker = self.workers[self.pick(self.sent) % len(self.workers)]
        self.sent += 1
        outcome = await worker.handle(self.session, event)
        self.outcomes.append(outcome)
        return outcome

    async def call(self, tool: str, args: Any, content: str) -> Outcome:
        self.step += 1
        call = ToolCall(agent=self.agent, call_id=f"c{self.step}", step=self.step, tool=tool, args=args, ts=self.step)
        decision = (await self.send(call)).decision
        if decision is not None and not decision.allowed:
            result = ToolResult.answering(
                call, decision.reason or "", is_error=True, denied_by=decision.by, advice=decision.advice
            )
        else:
            result = ToolResult.answering(call, content)
        return await self.send(msgspec.structs.replace(result, ts=self.step + 0.5))


def _wire(outcome: Outcome) -> tuple[Any, ...]:
    """An outcome as a client sees it (agent handles are per worker)."""
    messages = [(m.seq, m.agent.id if m.agent else None, m.call_id, m.source, m.text) for m in outcome.messages]
    return outcome.seq, outcome.decision, messages, outcome.halt


async def _export_and_replay(redis_url: str, session: str, tmp_path: Path, config: Config | None) -> tuple[Any, Path]:
    client = Redis.from_url(redis_url)
    try:
        path = tmp_path / f"{session}.jsonl"
        await RedisSessionLog(client, session).export(path)
    finally:
        await client.aclose()
    return await replay_log(path, config), path


async def test_a_call_with_annotations_given_whole_as_hints_is_guarded(workers: Workers) -> None:
    """MCP's annotations as a dict (a title, unset hints as ``None``): the
    call is appended with the hints it declares, so every worker reads it
    back and the guard decides on it."""
    (worker,) = workers(1)
    agent = Agent("main")
    hints = {"title": "Search", "readOnlyHint": True, "destructiveHint": None}
    decisions = []
    for n in range(1, 4):
        call = ToolCall(agent=agent, call_id=f"c{n}", step=n, tool="grep", args=GREP, hints=hints)  # type: ignore[arg-type]
        decisions.append((await worker.handle("s1", call)).decision)
        await worker.handle("s1", ToolResult.answering(call, "no matches"))
    assert None not in decisions, "every call was decided"


async def test_workers_taking_turns_decide_as_one_process_would(
    workers: Workers, redis_url: str, tmp_path: Path
) -> None:
    fleet = workers(3)
    driver = Driver(fleet, "s1", pick=lambda n: n)  # round robin: every event on another worker
    await driver.send(AgentStatus(agent=driver.agent, status="started"))
    await driver.send(UserMessage(agent=driver.agent, text="find the loader"))
    for _ in range(8):
        await driver.call("grep", GREP, "no matches")
    reminders = [m.text for o in driver.outcomes for m in o.messages]
    assert len(reminders) == 3  # remind's thresholds 3, 5 and 8, each said once

    outcome, _ = await _export_and_replay(redis_url, "s1", tmp_path, None)
    assert outcome.differences == []
    assert [v.text for v in outcome.verdicts] == reminders
    assert outcome.report.skipped == 0


async def test_a_retry_is_applied_once_and_answered_the_same(workers: Workers, redis_url: str, tmp_path: Path) -> None:
    a, b = workers(2)
    agent = Agent("main")
    outcomes = []
    for step in range(1, 4):
        call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool="grep", args=GREP)
        await a.handle("s1", call)
        result = ToolResult.answering(call, "none")
        outcomes.append(await a.handle("s1", result))
        retry = await b.handle("s1", result)  # the client timed out and resent to another worker
        assert _wire(retry) == _wire(outcomes[-1])
    assert [len(o.messages) for o in outcomes] == [0, 0, 1]
    client = Redis.from_url(redis_url)
    try:
        assert await RedisSessionLog(client, "s1").length() == 7  # 6 events and one reminder, nothing twice
    finally:
        await client.aclose()


async def test_a_worker_that_dies_loses_nothing(workers: Workers, redis_url: str, tmp_path: Path) -> None:
    config = Config(remind=RemindConfig(enabled=False), turns=TurnsConfig(threshold=2, deny_after=1, halt_after=1))
    (first,) = workers(1, config)
    driver = Driver([first], "s2", pick=lambda n: 0)
    await driver.call("grep", GREP, "no matches")
    await driver.call("grep", GREP, "no matches")
    del first  # the worker dies with its memory; a fresh one picks the session up
    driver.workers = workers(1, config)
    outcomes = [await driver.call("grep", GREP, "no matches") for _ in range(3)]
    assert any(o.halt for o in driver.outcomes)
    assert outcomes
    replayed, _ = await _export_and_replay(redis_url, "s2", tmp_path, config)
    assert replayed.differences == []
    actions = [v.action for v in replayed.verdicts]
    assert "deny" in actions
    assert "halt" in actions


async def test_an_escalation_runs_once_across_the_fleet(
    workers: Workers, redis_url: str, tmp_path: Path, ask_script: AskScript
) -> None:
    asked = tmp_path / "asked"
    script = ask_script(f"echo x >> {asked}\nsleep 0.3\necho 'Edit src/cfg.py instead.'")
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(script)))
    fleet = workers(4, config)
    driver = Driver(fleet, "s3", pick=lambda n: random.Random(n).randrange(4))
    for _ in range(6):
        await driver.call("grep", GREP, "no matches")
    assert asked.read_text().splitlines() == ["x"]
    denials = [o.decision.reason for o in driver.outcomes if o.decision is not None and not o.decision.allowed]
    assert any("Edit src/cfg.py instead." in (d or "") for d in denials)
    replayed, _ = await _export_and_replay(redis_url, "s3", tmp_path, config)
    assert replayed.differences == []


async def test_with_ttl_a_sessions_record_of_actions_and_escalations_expires_too(
    workers: Workers, redis_url: str, ask_script: AskScript
) -> None:
    config = Config(rescue=RescueConfig(ask_command=str(ask_script("echo 'Edit src/cfg.py instead.'"))))
    (fleet,) = workers(1, config, ttl=60)
    driver = Driver([fleet], "short", pick=lambda n: 0)
    for _ in range(6):
        await driver.call("grep", GREP, "no matches")
    assert (await fleet.counts()).actions[("rescue", "rescue")] >= 1
    for key in ("events", "meta", "keys", "acted", "advice"):
        assert 0 < await fleet.client.ttl(f"rtg:{{short}}:{key}") <= 60, key


async def test_a_user_message_resent_after_its_reply_was_lost_is_recorded_once(
    redis_proxy: Proxy, redis_url: str, tmp_path: Path
) -> None:
    client = redis_client(f"redis://127.0.0.1:{redis_proxy.port}/0", timeout=5)
    fleet = FleetGuard(client, worker="lost")
    agent = Agent("main")
    try:
        await fleet.handle("lost", UserMessage(agent=agent, text="start"))
        redis_proxy.arm("after", b"look again")  # Redis appends it; its reply is lost, and the client resends
        await fleet.handle("lost", UserMessage(agent=agent, text="look again"))
        assert (redis_proxy.cuts, redis_proxy.sent) == (1, 2)
        await fleet.handle("lost", UserMessage(agent=agent, text="look again"))  # the user said it twice: two events
    finally:
        await client.aclose()
    outcome, log = await _export_and_replay(redis_url, "lost", tmp_path, None)
    texts = [json.loads(line).get("text") for line in log.read_text().splitlines()[1:]]
    assert (texts, outcome.differences) == (["start", "look again", "look again"], [])


async def test_concurrent_sessions_on_many_workers_match_their_replays(
    workers: Workers, redis_url: str, tmp_path: Path
) -> None:
    fleet = workers(4)

    async def drive(session: str) -> None:
        rng = random.Random(session)
        driver = Driver(fleet, session, pick=lambda n: rng.randrange(4))
        for i in range(12):
            await driver.call("grep", GREP if i % 4 else {"pattern": session}, "no matches")

    async with anyio.create_task_group() as tg:
        for n in range(20):
            tg.start_soon(drive, f"c{n}")
    for n in range(20):
        replayed, _ = await _export_and_replay(redis_url, f"c{n}", tmp_path, None)
        assert replayed.differences == []
        assert replayed.verdicts


async def test_the_least_recent_session_is_dropped_and_rebuilt(workers: Workers) -> None:
    (worker,) = workers(1, max_sessions=2)
    agent = Agent("main")
    for session in ("a", "b", "c"):
        await worker.handle(session, UserMessage(agent=agent, text="go"))
    assert worker.sessions == 2
    outcomes = []
    for step in range(1, 4):
        call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool="grep", args=GREP)
        await worker.handle("a", call)
        outcomes.append(await worker.handle("a", ToolResult.answering(call, "none")))
    assert [len(o.messages) for o in outcomes] == [0, 0, 1]


def test_max_sessions_is_validated() -> None:
    with pytest.raises(ValueError, match="max_sessions = 0: must be an integer >= 1"):
        FleetGuard(Redis(), max_sessions=0)
    assert FleetGuard(Redis(), max_sessions=3).max_sessions == 3


async def test_a_retry_racing_the_first_attempt_waits_for_its_escalation(
    workers: Workers, tmp_path: Path, ask_script: AskScript
) -> None:
    asked = tmp_path / "asked"
    script = ask_script(f"echo x >> {asked}\nsleep 0.5\necho 'Read the file once.'")
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(script), nudge_at=3))
    a, b = workers(2, config)
    agent = Agent("main")
    for step in range(1, 5):
        call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool="grep", args=GREP)
        await a.handle("s1", call)
        await a.handle("s1", ToolResult.answering(call, "none"))
    escalating = ToolCall(agent=agent, call_id="c5", step=5, tool="grep", args=GREP)
    outcomes: list[Outcome] = []

    async def send(worker: FleetGuard) -> None:
        outcomes.append(await worker.handle("s1", escalating))

    async with anyio.create_task_group() as tg:
        tg.start_soon(send, a)
        tg.start_soon(send, b)
    assert asked.read_text().splitlines() == ["x"]
    first, retry = (_wire(o) for o in outcomes)
    assert first == retry
    decision = outcomes[0].decision
    assert decision is not None
    assert "Read the file once." in (decision.reason or "")


async def test_fleet_counts_every_action_once(workers: Workers) -> None:
    a, b = workers(2)
    driver = Driver([a, b], "s1", pick=lambda n: n)
    for _ in range(5):
        await driver.call("grep", GREP, "none")
    await b.handle("s1", UserMessage(agent=driver.agent, text="again"))
    counts = await a.counts()
    assert counts.actions == {("remind", "remind"): 2}
    assert counts.events == 13  # 10 calls and results, 2 reminders, 1 user message
    assert await b.counts() == await a.counts()


async def test_subagents_and_disposal_follow_the_stream(workers: Workers, redis_url: str, tmp_path: Path) -> None:
    a, b = workers(2)
    main, sub = Agent("main"), Agent("sub", parent_id="main")
    await a.handle("s1", AgentStatus(agent=sub, status="started", parent="main"))
    for step in range(1, 4):
        call = ToolCall(agent=sub, call_id=f"c{step}", step=step, tool="grep", args=GREP)
        await a.handle("s1", call)
        await a.handle("s1", ToolResult.answering(call, "none"))
    await a.handle("s1", AgentStatus(agent=sub, status="disposed"))
    outcome = await b.handle("s1", UserMessage(agent=main, text="next"))
    assert outcome.messages == ()
    replayed, _ = await _export_and_replay(redis_url, "s1", tmp_path, None)
    assert replayed.differences == []
    assert [v.agent for v in replayed.verdicts] == ["sub"]


async def test_an_unreadable_entry_is_passed_over(workers: Workers, redis_url: str) -> None:
    a, b = workers(2)
    agent = Agent("main")
    await a.handle("s1", UserMessage(agent=agent, text="go"))
    client = Redis.from_url(redis_url)
    try:
        stream = RedisSessionLog(client, "s1").stream
        await client.xadd(stream, {"seq": 99, "line": b"{torn"})
        unreadable = b'{"type":"tool/call","seq":100,"ts":1.0,"agent":"main","call_id":"c","step":"one","tool":"t"}'
        await client.xadd(stream, {"seq": 100, "line": unreadable})  # a field no reader can read as its type
    finally:
        await client.aclose()
    outcome = await b.handle("s1", UserMessage(agent=agent, text="again"))
    assert outcome.seq == 2


async def test_a_retry_older_than_the_kept_outcomes_is_rebuilt_from_the_stream(workers: Workers) -> None:
    (worker,) = workers(1)
    agent = Agent("main")
    await worker.handle("s1", UserMessage(agent=agent, text="start"))
    first = ToolCall(agent=agent, call_id="c0", step=1, tool="grep", args=GREP)
    original = await worker.handle("s1", first)
    for step in range(1, 300):
        await worker.handle("s1", UserMessage(agent=agent, text=f"message {step}"))
    again = await worker.handle("s1", first)
    assert _wire(again) == _wire(original)


async def test_the_same_event_sent_twice_at_once_to_one_worker_is_one_event(workers: Workers) -> None:
    (worker,) = workers(1)
    agent = Agent("main")
    call = ToolCall(agent=agent, call_id="c1", step=1, tool="grep", args=GREP)
    seqs: list[int] = []

    async def send() -> None:
        seqs.append((await worker.handle("s1", call)).seq)

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(send)
    assert seqs == [1, 1, 1]


async def test_a_retry_of_an_event_the_stream_no_longer_holds_is_allowed(workers: Workers, redis_url: str) -> None:
    first, later = workers(2)
    call = ToolCall(agent=Agent("main"), call_id="c1", step=1, tool="grep", args=GREP)
    await first.handle("s1", call)
    client = Redis.from_url(redis_url)
    try:
        await client.xtrim(RedisSessionLog(client, "s1").stream, maxlen=0)  # retention removed it
    finally:
        await client.aclose()
    outcome = await later.handle("s1", call)
    assert (outcome.seq, outcome.decision, outcome.messages) == (1, None, ())


async def test_concurrent_events_of_one_session_on_one_worker_are_each_applied_once(
    workers: Workers, redis_url: str, tmp_path: Path
) -> None:
    (worker,) = workers(1)
    agents = [Agent(f"a{i}") for i in range(6)]
    async with anyio.create_task_group() as tg:
        for agent in agents:
            tg.start_soon(worker.handle, "s1", UserMessage(agent=agent, text="go"))
    replayed, _ = await _export_and_replay(redis_url, "s1", tmp_path, None)
    assert replayed.report.events == 6
    assert worker.sessions == 1


async def test_unreachable_redis_fails_every_waiting_call_instead_of_hanging_it() -> None:
    client = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=1)
    fleet = FleetGuard(client, worker="w0")
    agent = Agent("main")
    calls = [ToolCall(agent=agent, call_id=f"c{n}", step=n, tool="grep", args=GREP) for n in range(5)]
    try:
        with anyio.fail_after(10):
            results = await asyncio.gather(
                *(fleet.handle(f"s{n}", call) for n, call in enumerate(calls)), return_exceptions=True
            )
    finally:
        await client.aclose()
    assert all(isinstance(result, RedisConnectionError) for result in results), results


async def test_a_long_catch_up_lets_the_workers_other_sessions_go_on(workers: Workers) -> None:
    one, two = workers(2)
    agent = Agent("main")
    for n in range(1, 101):  # 200 events that worker two has never seen
        call = ToolCall(agent=agent, call_id=f"c{n}", step=n, tool="grep", args={"n": n})
        await one.handle("long", call)
        await one.handle("long", ToolResult.answering(call, "x"))
    finished: list[str] = []

    async def send(session: str, n: int) -> None:
        call = ToolCall(agent=agent, call_id=f"c{n}", step=n, tool="grep", args={"n": n})
        await two.handle(session, call)
        finished.append(session)

    # Both join one batch, the long session first; the short one must not
    # wait for all 200 entries to be applied.
    await asyncio.gather(send("long", 101), send("short", 1))
    assert finished == ["short", "long"]


async def test_a_fleet_in_shadow_records_its_actions_as_shadow_and_delivers_none(workers: Workers) -> None:
    (worker,) = workers(1, shadowed(Config()))
    driver = Driver([worker], "s1", pick=lambda n: n)
    for _ in range(3):
        outcome = await driver.call("grep", GREP, "none")
    assert outcome.messages == ()  # nothing for the model
    counts = await worker.counts()
    assert counts.actions == {("remind", "remind"): 1}
    rows: Any = await worker.client.xrange(f"{worker.ledger.prefix}:actions")
    (recorded,) = [msgspec.json.decode(fields[b"action"], type=FleetAction) for _, fields in rows]
    assert (recorded.policy, recorded.shadow) == ("remind", True)


async def test_a_reminder_whose_record_failed_is_recorded_by_the_retry(
    redis_proxy: Proxy, redis_url: str, tmp_path: Path
) -> None:
    client = redis_client(f"redis://127.0.0.1:{redis_proxy.port}/0", timeout=5)
    fleet = FleetGuard(client, worker="cut")
    agent = Agent("main")
    try:
        for step in range(1, 4):
            call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool="grep", args=GREP)
            await fleet.handle("cut", call)
            result = ToolResult.answering(call, "no matches")
            if step < 3:
                await fleet.handle("cut", result)
                continue
            # the result is appended; Redis goes away as the reminder it earns is recorded
            redis_proxy.arm("before", b"out\x1f", then_refuse=True)
            with pytest.raises(RedisConnectionError):
                await fleet.handle("cut", result)
            redis_proxy.refusing = False
            retry = await fleet.handle("cut", result)  # the runtime sends it again
            assert [m.source.summary for m in retry.messages] == ["grep × 3"]
        assert (await fleet.counts()).actions == {("remind", "remind"): 1}
    finally:
        await client.aclose()
    outcome, _ = await _export_and_replay(redis_url, "cut", tmp_path, None)
    assert outcome.differences == []  # the stream holds the reminder the retry answered with
    assert [v.count for v in outcome.verdicts] == [3]


async def test_a_session_whose_key_holds_the_wrong_type_fails_alone(workers: Workers, redis_url: str) -> None:
    (fleet,) = workers(1)
    agent = Agent("main")
    client = Redis.from_url(redis_url)
    try:
        await client.set(RedisSessionLog(client, "broken").stream, "not a stream")
        calls = [
            ToolCall(agent=agent, call_id=f"c{i}", step=1, tool="grep", args=GREP) for i in range(3)
        ]  # sent together: their appends share one batch
        answers = await asyncio.gather(
            fleet.handle("good", calls[0]),
            fleet.handle("broken", calls[1]),
            fleet.handle("other", calls[2]),
            return_exceptions=True,
        )
        assert [type(a).__name__ for a in answers] == ["Answer", "ResponseError", "Answer"]
        with pytest.raises(ResponseError, match="WRONGTYPE"):  # sent alone, it fails as it is
            await fleet.handle("broken", calls[1])
        assert [await RedisSessionLog(client, s).length() for s in ("good", "other")] == [1, 1]
    finally:
        await client.aclose()


async def _greps(worker: FleetGuard, session: str, prefix: str, n: int, *, same: bool = True) -> list[bool | None]:
    """``n`` greps through ``worker`` (identical, or each its own with
    ``same`` false), each answered as a runtime answers it; whether each
    call was allowed."""
    agent = Agent("main")
    allowed: list[bool | None] = []
    for step in range(1, n + 1):
        args = GREP if same else {"pattern": f"p{step}"}
        call = ToolCall(agent=agent, call_id=f"{prefix}{step}", step=step, tool="grep", args=args)
        decision = (await worker.handle(session, call)).decision
        allowed.append(None if decision is None else decision.allowed)
        denied = decision is not None and not decision.allowed
        result = ToolResult.denial(call, decision) if denied and decision else ToolResult.answering(call, "none")
        await worker.handle(session, result)
    return allowed


def test_a_synchronous_redis_client_is_refused_by_name() -> None:
    from redis import Redis as SyncRedis

    with pytest.raises(TypeError, match=r"needs an asyncio Redis client .* got redis\.client\.Redis"):
        FleetGuard(SyncRedis())  # type: ignore[arg-type]  # the mistake refused


async def test_results_sent_before_their_calls_are_each_answered_for_their_own_event(workers: Workers) -> None:
    (worker,) = workers(1)
    agent = Agent("main")
    answers = []
    for step in range(1, 5):  # a pipeline that delivers each result before its call
        call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool="grep", args=GREP)
        answers.append(await worker.handle("late", ToolResult.answering(call, "none")))
        answers.append(await worker.handle("late", call))
    assert [a.decision is not None for a in answers] == [False, True] * 4, "a call's answer is a call's"
    seqs = [a.seq for a in answers]
    assert seqs == sorted(set(seqs)), "each answered at its own place in the stream"


async def test_a_session_that_expired_starts_afresh_not_with_its_old_answers(
    workers: Workers, redis_url: str, tmp_path: Path
) -> None:
    config = Config(remind=RemindConfig(enabled=False), loops=msgspec.structs.replace(Config().loops, enabled=True))
    (worker,) = workers(1, config)
    assert await _greps(worker, "life", "a", 4) == [True, True, False, False]
    client = Redis.from_url(redis_url)
    try:
        await client.flushall()  # what an expired ttl, or a Redis restarted without persistence, leaves
    finally:
        await client.aclose()
    assert await _greps(worker, "life", "b", 4, same=False) == [True] * 4, "a new life, not the old one's answers"
    replayed, _ = await _export_and_replay(redis_url, "life", tmp_path, config)
    assert replayed.differences == []


async def test_a_worker_holding_a_sessions_earlier_life_decides_on_its_new_one(
    workers: Workers, redis_url: str, tmp_path: Path
) -> None:
    """Redis lost the session (an expired ttl, a flush, a restart), and
    another worker took its new life past the seq this worker's copy had
    reached: the first grep of the new life is still a first one here."""
    config = Config(remind=RemindConfig(enabled=False), loops=msgspec.structs.replace(Config().loops, enabled=True))
    holder, other = workers(2, config)
    assert await _greps(holder, "lives", "a", 2) == [True, True]
    client = Redis.from_url(redis_url)
    try:
        await client.flushall()
    finally:
        await client.aclose()
    assert await _greps(other, "lives", "b", 3, same=False) == [True] * 3
    assert await _greps(holder, "lives", "c", 1) == [True], "the new life has no grep yet"
    replayed, _ = await _export_and_replay(redis_url, "lives", tmp_path, config)
    assert replayed.differences == []


async def test_numeric_call_ids_are_guarded_as_their_text(workers: Workers, redis_url: str, tmp_path: Path) -> None:
    config = Config(remind=RemindConfig(enabled=False), loops=msgspec.structs.replace(Config().loops, enabled=True))
    (worker,) = workers(1, config)
    agent = Agent("main")
    allowed = []
    for step in range(1, 5):
        call = ToolCall(agent=agent, call_id=step, step=step, tool="grep", args=GREP)  # type: ignore[arg-type]
        decision = (await worker.handle("numbers", call)).decision
        allowed.append(decision is not None and decision.allowed)
        if decision is not None and not decision.allowed:
            await worker.handle("numbers", ToolResult.denial(call, decision))
        else:
            await worker.handle("numbers", ToolResult.answering(call, "none"))
    assert allowed == [True, True, False, False]
    replayed, _ = await _export_and_replay(redis_url, "numbers", tmp_path, config)
    assert replayed.differences == []


async def test_a_request_cancelled_mid_escalation_is_answered_right_when_retried(
    workers: Workers, redis_url: str, tmp_path: Path, ask_script: AskScript
) -> None:
    script = ask_script("sleep 1\necho 'Edit src/cfg.py instead.'")
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(script)))
    (worker,) = workers(1, config)
    agent = Agent("main")
    answers = []
    for step in range(1, 7):
        call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool="grep", args=GREP)
        try:
            outcome = await asyncio.wait_for(worker.handle("cut", call), 0.3)  # the runtime's own timeout
        except TimeoutError:
            outcome = await worker.handle("cut", call)  # and its retry
        answers.append(outcome.decision)
        decision = outcome.decision
        if decision is not None and not decision.allowed:
            await worker.handle("cut", ToolResult.denial(call, decision))
        else:
            await worker.handle("cut", ToolResult.answering(call, "none"))
    assert any(d is not None and not d.allowed and "Edit src/cfg.py" in (d.reason or "") for d in answers)
    replayed, _ = await _export_and_replay(redis_url, "cut", tmp_path, config)
    assert replayed.differences == []


async def test_redis_failing_inside_an_escalation_fails_the_request_not_the_guard(
    workers: Workers, redis_url: str, tmp_path: Path, ask_script: AskScript, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = ask_script("echo 'Edit src/cfg.py instead.'")
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(script)))
    (worker,) = workers(1, config)
    agent = Agent("main")
    failing = [True]
    real_hget = worker.client.hget

    async def hget(*args: Any) -> Any:
        if failing[0] and b"advice" in str(args[0]).encode():
            raise RedisConnectionError("connection lost mid-escalation")
        return await real_hget(*args)

    monkeypatch.setattr(worker.client, "hget", hget)
    denied_with_advice = False
    for step in range(1, 7):
        call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool="grep", args=GREP)
        try:
            outcome = await worker.handle("gone", call)
        except RedisConnectionError:
            failing[0] = False  # Redis is back: the client's retry
            outcome = await worker.handle("gone", call)
        decision = outcome.decision
        denied_with_advice |= decision is not None and "Edit src/cfg.py" in (decision.reason or "")
        if decision is not None and not decision.allowed:
            await worker.handle("gone", ToolResult.denial(call, decision))
        else:
            await worker.handle("gone", ToolResult.answering(call, "none"))
    assert not failing[0], "Redis failed inside an escalation and the request said so"
    assert denied_with_advice
    replayed, _ = await _export_and_replay(redis_url, "gone", tmp_path, config)
    assert replayed.differences == []


async def test_what_json_cannot_carry_as_it_is_is_recorded_and_replays(
    workers: Workers, redis_url: str, tmp_path: Path
) -> None:
    deep: Any = "leaf"
    for _ in range(150):
        deep = [deep]
    (worker,) = workers(1)
    agent = Agent("main\ud800")
    for step, args in enumerate([{"a": deep}, {"n": 10**5000}, {"a": deep}, {"a": deep}], 1):
        call = ToolCall(agent=agent, call_id=f"c\ud800{step}", step=step, tool="grep", args=args)
        await worker.handle("odd\ud800", call)
        await worker.handle("odd\ud800", ToolResult.answering(call, "none"))
    replayed, _ = await _export_and_replay(redis_url, "odd\\ud800", tmp_path, None)
    assert replayed.report.events == 8
    assert replayed.differences == []


async def test_a_sessions_record_of_actions_of_the_wrong_type_fails_that_session_alone(
    workers: Workers, redis_url: str
) -> None:
    config = Config(remind=RemindConfig(enabled=False), loops=msgspec.structs.replace(Config().loops, enabled=True))
    (worker,) = workers(1, config)
    client = Redis.from_url(redis_url)
    try:
        await client.set("rtg:{bad}:acted", "oops")
        await client.set("rtg:{alone}:acted", "oops")
    finally:
        await client.aclose()
    outcomes = await asyncio.gather(
        *(_greps(worker, session, "c", 4) for session in ("bad", "good1", "good2")), return_exceptions=True
    )
    bad, good1, good2 = outcomes
    assert isinstance(bad, ResponseError)
    assert "WRONGTYPE rtg:{bad}:acted holds a string, not a hash: nothing was written" in str(bad)
    assert good1 == good2 == [True, True, False, False]
    with pytest.raises(ResponseError, match=r"WRONGTYPE rtg:\{alone\}:acted"):  # alone in its batch too
        await _greps(worker, "alone", "c", 4)


async def test_a_call_id_used_again_once_its_result_is_in_is_a_new_call(
    workers: Workers, redis_url: str, tmp_path: Path
) -> None:
    config = Config(remind=RemindConfig(enabled=False), loops=msgspec.structs.replace(Config().loops, enabled=True))
    a, b = workers(2, config)
    agent = Agent("main")
    allowed = []
    for step in range(1, 5):  # a model server that names every response's call "call_0"
        call = ToolCall(agent=agent, call_id="call_0", step=step, tool="grep", args=GREP)
        decision = (await a.handle("reuse", call)).decision
        assert decision is not None
        allowed.append(decision.allowed)
        result = ToolResult.answering(call, "none") if decision.allowed else ToolResult.denial(call, decision)
        answer = await a.handle("reuse", result)
        assert _wire(await b.handle("reuse", result)) == _wire(answer), "a retry of the result is still a retry"
    assert allowed == [True, True, False, False]
    replayed, _ = await _export_and_replay(redis_url, "reuse", tmp_path, config)
    assert replayed.report.events == 8
    assert replayed.differences == []
