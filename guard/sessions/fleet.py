"""Guard state shared by a fleet of workers through Redis Streams.

Every worker that handles an event of a session appends it to the session's
stream first, then brings its in-memory copy of that session's guard up to
the event's position, reading whatever other workers appended since, and
only then decides. The guard is a pure function of the stream's events
(guard output is withheld and regenerated, as in ``replay``), so every
worker computes the same decision for the same position, and a session can
move between workers, or survive a worker's death, without losing a count.

What the guard says (context messages, halt requests) is appended to the
stream by whichever worker computes it first, under an idempotency key made
from the triggering event's ``seq``, so it is recorded exactly once and an
exported session passes ``replay --check``. Escalations run once fleet-wide
per call: one worker takes a lease in Redis and asks, the others wait for
the answer it records.

Needs the optional ``redis`` package and asyncio (redis-py has no trio
support).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, TypeVar

import anyio
import msgspec

from bus import (
    Agent,
    AgentStatus,
    AnyEvent,
    ContextMessage,
    Event,
    Replay,
    SessionStart,
    ToolCall,
    ToolResult,
)
from bus._codec import as_logged, event_decoder, mistyped_event
from bus.redis_log import DEFAULT_PREFIX, LUA_HELPERS, Appended, PendingAppend, RedisSessionLog, append_many
from guard.actions import SHADOW_FORM, Action
from guard.config import Config, apply_environment
from guard.guard import Guard
from guard.policies.escalation import AskOutcome
from guard.policies.registry import build_policies
from guard.policies.rescue import Asker, RescuePolicy
from guard.sessions._group import GroupCommit
from guard.sessions.answer import Answer, retry_key
from guard.sessions.live import LiveTable
from guard.sessions.restore import regenerated

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["ActionLedger", "FleetAction", "FleetCounts", "FleetGuard", "Outcome", "idempotency_key"]

T = TypeVar("T")
R = TypeVar("R")

_KEPT_OUTCOMES = 256
_APPLIED_BETWEEN_TURNS = 32
"""A long catch-up (a session's first visit to this worker) lets the worker's
other sessions go on every this many entries, rather than stall them all."""
_ACTIONS_MAXLEN = 100_000

# Record guard actions fleet-wide, each once: every worker that applies an
# event computes its actions, and only the first to record each one counts.
# KEYS: the actions stream, the metrics hash, then each action's session's
# record of acted ones; ARGV: the stream's length, then field, entry, kind
# for each action.
_RECORD_ACTIONS = (
    LUA_HELPERS
    + """
local typed = {KEYS[1], 'stream', KEYS[2], 'hash'}
for i = 3, #KEYS do
  typed[#typed + 1] = KEYS[i]
  typed[#typed + 1] = 'hash'
end
local wrong = check_types(typed)
if wrong then return redis.error_reply(wrong) end
local recorded, ttl = 0, tonumber(ARGV[2])
for op = 0, #KEYS - 3 do
  local a = 3 + 3 * op
  if redis.call('HSETNX', KEYS[3 + op], ARGV[a], 1) == 1 then
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'action', ARGV[a + 1])
    redis.call('HINCRBY', KEYS[2], ARGV[a + 2], 1)
    recorded = recorded + 1
  end
  if ttl > 0 then redis.call('EXPIRE', KEYS[3 + op], ttl) end
end
return recorded
"""
)


class FleetCounts(msgspec.Struct, frozen=True, kw_only=True):
    """Fleet-wide counters: events appended to every session, and guard
    actions recorded, by (policy, action)."""

    events: int
    actions: dict[tuple[str, str], int]


class FleetAction(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One guard action as the fleet records it for ``watch`` and metrics:
    the session and triggering event's ``seq`` place it; the rest is what
    ``replay --json`` prints for it."""

    session: str
    seq: int
    agent: str | None
    policy: str
    action: str
    tool: str
    count: int
    text: str
    worker: str
    shadow: bool = False
    """A shadow-mode policy's action: recorded, never delivered."""


Outcome = Answer
"""The guard's answer to one event (``guard.sessions.answer.Answer``)."""


def idempotency_key(event: Event) -> str | None:
    """The key under which a retry of ``event`` is recognised: its agent,
    call id and type for tool calls and results; ``None`` for other events,
    which a caller may key itself."""
    return _call_key(str(type(event).__struct_config__.tag), event)


def _counterpart(event: Event) -> str | None:
    """The key an appended call or result frees: a result's call's (its id
    may name a new call now, as model servers that call every response's
    first call ``call_0`` do), a call's earlier result's (the new call's
    result is new)."""
    return _call_key("tool/result" if isinstance(event, ToolCall) else "tool/call", event)


def _call_key(kind: str, event: Event) -> str | None:
    if isinstance(event, ToolCall | ToolResult) and event.agent is not None:
        # a lone surrogate as the log writes it: the key travels as UTF-8
        return str(as_logged(retry_key(kind, event.agent.id, event.call_id)))
    return None


class ActionLedger:
    """Records guard actions fleet-wide, each once, for ``watch`` and the
    fleet's counters: an action is keyed by its session, its triggering
    event's ``seq`` and its place among that event's actions, so a worker
    that computes it again (a retry, a catch-up) records nothing twice.
    With ``ttl``, a session's record expires with its stream."""

    script = _RECORD_ACTIONS
    """The Lua script that records actions (KEYS and ARGV from
    ``recording``), for a writer that runs it inside a script of its own."""

    def __init__(self, client: Redis, *, prefix: str = DEFAULT_PREFIX, worker: str, ttl: int = 0) -> None:
        self.client = client
        self.prefix = prefix
        self.worker = worker
        self.ttl = ttl
        self._script = client.register_script(_RECORD_ACTIONS)

    async def record(self, batch: Sequence[tuple[str, int, Sequence[Action]]]) -> None:
        """Record, for each (session, seq, actions) of ``batch``, the actions
        the guard took at event ``seq`` of ``session``; those recorded
        already are passed over. One round trip, whatever the sessions."""
        keys, args = self.recording(batch)
        await self._script(keys=keys, args=args)

    def recording(
        self, batch: Sequence[tuple[str, int, Sequence[Action]]]
    ) -> tuple[list[str], list[bytes | str | int]]:
        """What ``record`` sends, unsent: the script's KEYS and ARGV."""
        keys = [f"{self.prefix}:actions", f"{self.prefix}:metrics"]
        args: list[bytes | str | int] = [_ACTIONS_MAXLEN, self.ttl]
        for session, seq, actions in batch:
            for index, action in enumerate(actions):
                keys.append(f"{self.prefix}:{{{session}}}:acted")
                args += self._fields(session, seq, index, action)
        return keys, args

    def _fields(self, session: str, seq: int, index: int, action: Action) -> tuple[str, bytes, str]:
        entry = FleetAction(session=session, seq=seq, worker=self.worker, **action.reported())
        return f"{seq}\x1f{index}", msgspec.json.encode(entry), f"{action.policy}\x1f{action.action}"

    async def counts(self) -> FleetCounts:
        """Events appended to every session, and actions by (policy, action)."""
        raw = await self.client.hgetall(f"{self.prefix}:metrics")
        events = 0
        actions: dict[tuple[str, str], int] = {}
        for field, value in raw.items():
            name = field.decode() if isinstance(field, bytes) else str(field)
            if name == "events":
                events = int(value)
            else:
                policy, _, kind = name.partition("\x1f")
                actions[(policy, kind)] = int(value)
        return FleetCounts(events=events, actions=actions)


class _FleetAsker:
    """Runs an escalation once fleet-wide: the first worker to take the
    call's lease asks ``inner`` and records the outcome; every other worker
    (and every later catch-up) reuses the record."""

    def __init__(self, fleet: FleetGuard, session: str, inner: Asker, on_failure: Callable[[Exception], None]) -> None:
        self._fleet = fleet
        self._session = session
        self._inner = inner
        self._on_failure = on_failure

    async def ask(self, question: str, call: ToolCall | None = None) -> AskOutcome:
        """The escalation's outcome, asked once fleet-wide. Redis failing
        here fails the request (``on_failure``), not just the policy: the
        guard would take a failed policy for an allowed call."""
        from redis.exceptions import RedisError

        try:
            return await self._ask(question, call)
        except RedisError as exc:
            self._on_failure(exc)
            return AskOutcome(advice=None, reason=f"Redis: {exc}", elapsed_ms=0.0)

    async def _ask(self, question: str, call: ToolCall | None) -> AskOutcome:
        client, prefix = self._fleet.client, self._fleet.prefix
        agent = call.agent.id if call is not None and call.agent is not None else ""
        field = f"{agent}\x1f{call.call_id if call is not None else ''}"
        answers = f"{prefix}:{{{self._session}}}:advice"
        lease = f"{prefix}:{{{self._session}}}:lease:{field}"
        while True:
            recorded = await client.hget(answers, field)
            if recorded is not None:
                return msgspec.json.decode(recorded, type=AskOutcome)
            # The lease is released only by a cancelled ask; else it lapses after lease_ms, so a
            # worker that died mid-ask is taken over, and one that answered
            # leaves no gap in which a second worker could ask again.
            if await client.set(lease, self._fleet.worker, nx=True, px=self._fleet.lease_ms):
                try:
                    outcome = await self._inner.ask(question, call)
                except BaseException:  # cancelled (the runtime's timeout): free the call for the retry
                    with anyio.CancelScope(shield=True):
                        await client.delete(lease)
                    raise
                await client.hset(answers, field, msgspec.json.encode(outcome))
                if self._fleet.ttl:
                    await client.expire(answers, self._fleet.ttl)
                return outcome
            await anyio.sleep(0.02)


class _NewLife(Exception):
    """A session's stream no longer goes on from a copy's position."""


class _Replica:
    """This worker's copy of one session's guard, and how far it has read."""

    def __init__(self, fleet: FleetGuard, session: str) -> None:
        self.log = RedisSessionLog(fleet.client, session, prefix=fleet.prefix, maxlen=fleet.maxlen, ttl=fleet.ttl)
        self.replay = Replay()  # recorded guard output never reaches it: _apply passes it over
        self.fleet = fleet
        self.session = session
        # Escalations go through the fleet's lease, so one worker asks per call.
        policies = [
            RescuePolicy(policy.config, ask=_FleetAsker(fleet, session, policy.command, self._failed))
            if isinstance(policy, RescuePolicy)
            else policy
            for policy in build_policies(fleet.config, share=fleet._policies)
        ]
        self.guard = Guard(fleet.config, on_action=self._on_action, policies=policies)
        self.actions: list[Action] = []
        self.guard.attach(self.replay.bus)
        self.replay.bus.record(self._capture)
        self.agents: dict[str, Agent] = {}
        self._decoder = event_decoder(self.agents)
        self.position = "-"
        self.seq = 0
        self.read = 0
        """The seq of the last entry read, guard output included."""
        self._resuming = False
        self.lock = asyncio.Lock()
        self.outcomes: OrderedDict[int, Answer] = OrderedDict()
        self.output: list[Event] = []
        # what the guard said and did at events applied here, until it is recorded
        self.owed: list[tuple[int, list[Event], list[Action]]] = []
        self.broken = False
        """An event was left half-applied (cancelled, or Redis failed inside
        an escalation): this copy is dropped and the session rebuilt."""
        self._failure: Exception | None = None

    def _failed(self, exc: Exception) -> None:
        self._failure = exc

    def _on_action(self, action: Action, trigger: Event) -> None:
        self.actions.append(action)

    def _regenerated(self, event: Event) -> bool:
        return regenerated(self.guard, event)

    def _capture(self, event: Event) -> None:
        if self._regenerated(event):
            self.output.append(event)

    async def catch_up(self, until: int, fetched: Sequence[tuple[str, bytes]] = ()) -> None:
        """Apply every event the stream holds up to seq ``until``, recording
        the guard's output for each one that has not been recorded yet.
        ``fetched`` are entries already read (with the append); those this
        replica has applied are passed over, and the stream is read for the
        rest only when they fall short of ``until``. The output of every
        event applied is recorded at the end, in one round trip. Raises
        ``_NewLife`` when an entry after this copy's position does not go on
        from it: the session's stream began again (expired, flushed, restored
        from an older snapshot) and this copy is of its earlier life."""
        await self._catch_up(until, fetched, self.owed)
        await self.record_owed()

    async def record_owed(self) -> None:
        """Record the output applied here and not recorded yet: a record
        that failed (Redis went away after the event was appended) is made
        again before this replica answers from it, so a retry's answer
        never carries a reminder the stream lacks. Records are keyed by the
        event's seq, so one that did land is not made twice."""
        if self.owed:
            await self.fleet._record(self, self.owed)
            self.owed = []

    async def _catch_up(
        self, until: int, fetched: Sequence[tuple[str, bytes]], owed: list[tuple[int, list[Event], list[Action]]]
    ) -> None:
        applied = _entry_key(self.position)
        self._resuming = self.read > 0
        for count, (entry, line) in enumerate(fetched, 1):
            key = _entry_key(entry)
            if key <= applied:
                continue
            if await self._apply(entry, line, until, owed):
                return
            applied = key
            if count % _APPLIED_BETWEEN_TURNS == 0:
                await asyncio.sleep(0)
        async for entry, line in self.log.entries(self.position):  # reading yields to other sessions
            if await self._apply(entry, line, until, owed):
                return

    async def _apply(
        self, entry: str, line: bytes, until: int, owed: list[tuple[int, list[Event], list[Action]]]
    ) -> bool:
        """Apply one entry, adding what the guard said and did at it to
        ``owed``; true once seq ``until`` is reached."""
        self.position = entry
        event: AnyEvent | SessionStart | None
        try:
            event = self._decoder.decode(line)
        except msgspec.ValidationError:  # a field of another type (call_id=7): read as any reader reads it
            event = mistyped_event(line, self._decoder)
            if event is None:
                return False
        except msgspec.DecodeError:
            return False
        if isinstance(event, SessionStart):  # pragma: no cover - the fleet never writes a header into a stream
            return False
        if self._resuming:
            # the first entry read past this copy's position: a stream that began again
            # holds an entry there that does not go on from it
            self._resuming = False
            if event.seq <= self.read:
                raise _NewLife(self.session)
        self.read = event.seq
        if self._regenerated(event):
            return False  # recorded guard output: regenerated, never re-applied
        if type(event) is AgentStatus and event.parent is not None and event.agent is not None:
            event.agent.parent_id = event.agent.parent_id or event.parent
        self.output.clear()
        self.actions.clear()
        seq = event.seq  # read first: a synthesized call's publish stamps the replay bus's own
        try:
            decision = await self.replay.apply(event)
        except BaseException:
            self.broken = True
            raise
        if self._failure is not None:
            self.broken = True
            failure, self._failure = self._failure, None
            raise failure
        self.seq = seq
        if self.output or self.actions:
            owed.append((seq, self.output[:], self.actions[:]))
            messages = tuple(e for e in self.output if isinstance(e, ContextMessage) and e.source.form != SHADOW_FORM)
            halts = [e.reason or "" for e in self.output if isinstance(e, AgentStatus)]
            outcome = Answer(seq=seq, decision=decision, messages=messages, halt=halts[0] if halts else None)
        else:
            outcome = Answer(seq=seq, decision=decision)
        self.outcomes[seq] = outcome
        while len(self.outcomes) > _KEPT_OUTCOMES:
            self.outcomes.popitem(last=False)
        if type(event) is AgentStatus and event.status == "disposed" and event.agent is not None:
            self.agents.pop(event.agent.id, None)
        return seq >= until


async def _each_refused_alone(
    send: Callable[[Sequence[T]], Awaitable[Sequence[R]]], batch: Sequence[T]
) -> Sequence[R | Exception]:
    """``send``'s answers to a batch (appends, records), in one round trip.
    A batch Redis refused (one session's key holds the wrong type: every
    script checks its keys before it writes, so nothing of it was applied)
    is sent again one at a time, so only the session at fault gets the error."""
    from redis.exceptions import ResponseError  # the client's: loaded once it has sent anything

    try:
        return await send(batch)
    except ResponseError:
        if len(batch) == 1:
            raise
    answers: list[R | Exception] = []
    for item in batch:
        try:
            answers += await send([item])
        except ResponseError as exc:
            answers.append(exc)
    return answers


def _timed_out(exc: Exception) -> bool:
    """Whether Redis did not answer in time (the client's timeout, not a
    refusal): a batch queued behind one that did would wait it out again."""
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return isinstance(exc, RedisTimeoutError)


def _entry_key(entry: str) -> tuple[int, int]:
    """A stream entry id (``ms-n``; ``-`` for before the first) as a sortable pair."""
    if entry == "-":
        return (-1, -1)
    ms, _, n = entry.partition("-")
    return (int(ms), int(n))


class FleetGuard:
    """Guards many sessions for one worker of a fleet; every worker sharing
    ``client``'s Redis (and ``prefix``) sees the same sessions and decides
    the same way. A live guard: the environment's overrides apply to
    ``config`` here, so every worker of a fleet needs the same environment.

    ``handle`` is the one entry point: it appends the event (a retry with
    the same idempotency key is applied once) and returns the guard's
    ``Outcome`` at that event. Call it concurrently for many sessions: the
    appends of every call in flight share one round trip to Redis (group
    commit), so a worker's throughput grows with its concurrency. At most
    ``max_sessions`` sessions are held in memory; the least recently used is
    dropped and rebuilt from its stream when it comes back. ``maxlen`` and ``ttl`` bound each session's stream
    (see ``RedisSessionLog``); ``lease_ms`` is how long an escalation's
    lease lasts before another worker may take it over: keep it above the
    ask command's timeout, or a slow ask may be asked twice.
    """

    def __init__(
        self,
        client: Redis,
        config: Config | None = None,
        *,
        prefix: str = DEFAULT_PREFIX,
        maxlen: int = 0,
        ttl: int = 0,
        max_sessions: int = 10_000,
        lease_ms: int = 120_000,
        worker: str | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(getattr(client, "execute_command", None)):
            raise TypeError(
                f"FleetGuard needs an asyncio Redis client (bus.redis_log.redis_client(url)), "
                f"got {type(client).__module__}.{type(client).__name__}"
            )
        self.client = client
        self.config = apply_environment(config if config is not None else Config())
        self._policies = build_policies(self.config)
        """The config's policies, built once: each session's guard shares the ``shareable`` ones."""
        self.prefix = prefix
        self.maxlen = maxlen
        self.ttl = ttl
        self.lease_ms = lease_ms
        self.worker = worker or f"worker-{time.time_ns()}"
        self._replicas: LiveTable[str, _Replica] = LiveTable(max_sessions)
        self.ledger = ActionLedger(client, prefix=prefix, worker=self.worker, ttl=ttl)
        # Keys for events that have none of their own, so that a resend after a lost reply is recognised
        self._once = f"once\x1f{os.urandom(8).hex()}\x1f"
        self._onces = itertools.count(1)
        # a batch Redis did not answer in time fails the requests queued behind it at once
        self._appends: GroupCommit[PendingAppend, Appended] = GroupCommit(self._append_batch, fails_queued=_timed_out)
        self._records: GroupCommit[tuple[str, int, Sequence[Action]], None] = GroupCommit(
            self._record_batch, fails_queued=_timed_out
        )

    async def _append_batch(self, batch: Sequence[PendingAppend]) -> Sequence[Appended | Exception]:
        return await _each_refused_alone(partial(append_many, self.client), batch)

    async def _record_batch(self, batch: Sequence[tuple[str, int, Sequence[Action]]]) -> Sequence[Exception | None]:
        async def record(records: Sequence[tuple[str, int, Sequence[Action]]]) -> list[None]:
            await self.ledger.record(records)
            return [None] * len(records)

        return await _each_refused_alone(record, batch)

    async def _record(self, replica: _Replica, owed: Sequence[tuple[int, list[Event], list[Action]]]) -> None:
        """Append the guard's output at each event of ``owed`` to the stream
        (keyed by the event's seq, so a worker that computes it again adds
        nothing) and record its actions, all in flight together."""
        pending: list[Awaitable[object]] = []
        for seq, outputs, actions in owed:
            pending += [
                self._appends.submit(replica.log.pending(output, key=f"out\x1f{seq}\x1f{index}"))
                for index, output in enumerate(outputs)
            ]
            pending.append(self._records.submit((replica.session, seq, actions)))
        await asyncio.gather(*pending)

    async def counts(self) -> FleetCounts:
        """Fleet-wide counters, every worker's (see ``ActionLedger.counts``)."""
        return await self.ledger.counts()

    @property
    def max_sessions(self) -> int:
        return self._replicas.max_sessions

    @property
    def sessions(self) -> int:
        """How many sessions this worker holds in memory."""
        return len(self._replicas)

    def _replica(self, session: str) -> _Replica:
        replica = self._replicas.get(session)
        if replica is None or replica.broken:
            replica = _Replica(self, session)
            self._replicas.add(session, replica)  # one pushed out is rebuilt from its stream when it comes back
        return replica

    async def handle(self, session: str, event: AnyEvent, *, key: str | None = None) -> Answer:
        """Append ``event`` to ``session`` and return the guard's outcome at
        it. ``key`` overrides ``idempotency_key(event)``."""
        replica = self._replica(session)
        appended = await self._appends.submit(
            replica.log.pending(
                event,
                key=key if key is not None else idempotency_key(event) or f"{self._once}{next(self._onces)}",
                after=replica.position,
                forget=_counterpart(event) if key is None else None,
            )
        )
        async with replica.lock:
            # A new event's seq may be an earlier life's (the session expired,
            # Redis lost it): only a retry is answered from what was kept.
            known = None if appended.new or replica.broken else replica.outcomes.get(appended.seq)
            if known is not None:
                await replica.record_owed()
                return known
            try:
                if replica.broken or appended.seq <= replica.seq:
                    raise _NewLife(session)
                await replica.catch_up(appended.seq, appended.entries)
            except _NewLife:
                # Applied here long ago and forgotten, a new life of the session
                # (even one already past this copy's seq), or left half-applied:
                # rebuild from the stream.
                replica = _Replica(self, session)
                self._replicas.add(session, replica)
                async with replica.lock:
                    await replica.catch_up(appended.seq)
            # Absent only when the stream no longer holds the event (trimmed
            # or expired in between): the guard has nothing to say about it.
            return replica.outcomes.get(appended.seq) or Answer(seq=appended.seq)
