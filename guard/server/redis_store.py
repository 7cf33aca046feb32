"""Sessions on Redis Streams, so several ``serve`` replicas share them.

Any replica may answer any request of any session. A request holds the
session's lease in Redis while it runs, so one replica at a time acts for a
session and the session's events reach the stream in the order they were
answered. Taking the lease reads, in the same script, the stream's last
``seq`` and, when another replica has appended since this replica's copy
last saw it, the entries after this replica's position: the replica applies
just those to its live copy (``follow``: as a restore would apply them) and
acts on it. After acting, one script appends the events the request
produced, only if the stream has not moved and the lease is still this
request's, records the guard actions they carry, and releases the lease; so
a request costs two round trips, and a replica that lost its lease (paused
past ``lease_ms``) can never fork the session. The answers other replicas
gave (kept beside the stream, for clients' retries) are read only when a
call or result they answered comes again: a third round trip for that
request alone.
A request renews its lease while it runs (an escalation may take long), so
the lease of a replica that died lapses within ``lease_ms``. A
replica that dies mid-session loses nothing that was answered: every
answered event is in the stream, and the next request, on any replica,
catches up from it and decides the same way. A copy is rebuilt from the
whole stream only when it cannot be caught up (the stream was trimmed past
it, or expired and began again).

Needs the ``redis`` extra and asyncio (redis-py has no trio support).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeout

from bus import Agent, AgentStatus, AnyEvent, Bus, Event, SessionStart, ToolCall, ToolResult
from bus._codec import event_decoder
from bus._logging import LazyLogger
from bus.redis_log import DEFAULT_PREFIX, RedisSessionLog, stream_entry
from guard._text import error_text
from guard.actions import Action
from guard.config import Config
from guard.guard import Guard
from guard.server.events import recall
from guard.server.scope import current
from guard.server.sessions import Session, SessionStore, StoreError
from guard.sessions.answer import retry_key
from guard.sessions.fleet import ActionLedger, FleetCounts
from guard.sessions.lease import Lease, SessionLeases
from guard.sessions.lease import LeaseTimeout as HeldElsewhere
from guard.sessions.link import GuardLink
from guard.sessions.resume import follow

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["PROBE_SCRIPT", "LeaseTimeout", "RedisSessionStore", "probe_key"]

_log = LazyLogger("guard.server")


PROBE_SCRIPT = "return redis.call('SET', KEYS[1], '1', 'PX', 1000)"
"""What every request does, in little: a script (run by its digest) that
writes a key under the fleet's prefix. It fails as requests would: a user
the ACL does not let run scripts or touch those keys, a Redis out of memory."""


def probe_key(prefix: str) -> str:
    """The key ``PROBE_SCRIPT`` writes for a fleet under ``prefix``."""
    return f"{prefix}:{{healthz}}:probe"


class LeaseTimeout(StoreError):
    """Another replica held the session's lease for longer than ``wait_ms``."""


_UNFETCHED_KEPT = 4096


class _Shared:
    """What the store keeps beside a live session: its stream, its guard,
    the seq and entry id of the last event this replica has applied, what
    the current request found (its answers) and produced (actions to record),
    whether the guard is applying another replica's events (whose actions
    were recorded where they happened), and the retry keys whose answers
    were given elsewhere and not read yet (``unfetched``, oldest first)."""

    def __init__(self, log: RedisSessionLog, guard: Guard) -> None:
        self.log = log
        self.guard = guard
        self.seq = 0
        self.position = "-"
        self.actions: list[tuple[int, Action]] = []
        self.answered: dict[str, bytes] = {}
        self.following = False
        self.unfetched: dict[str, None] = {}

    def unfetch(self, keys: Iterable[str]) -> None:
        """The record may hold answers for ``keys`` this copy lacks."""
        unfetched = self.unfetched
        for key in keys:
            unfetched.pop(key, None)
            unfetched[key] = None
        while len(unfetched) > _UNFETCHED_KEPT:
            del unfetched[next(iter(unfetched))]


RELEASE_SECONDS = 0.5
"""How long the end of a request waits to hand its session's lease back."""


class RedisSessionStore(SessionStore):
    """A ``SessionStore`` whose sessions live in Redis streams (see the
    module's docstring). ``maxlen`` and ``ttl`` bound each stream as for
    ``RedisSessionLog``; ``lease_ms`` is how long a session's lease outlives
    its last renewal (a request renews it every third of that while it
    runs), so how soon a dead replica's sessions are free again; ``wait_ms``
    is how long a request waits for another replica's request of the same
    session before it fails with ``LeaseTimeout``. ``caught_up`` counts requests that found another
    replica had moved a live session on and applied just what it appended;
    ``restored`` counts rebuilds from a whole stream."""

    def __init__(
        self,
        client: Redis,
        config: Config | None = None,
        *,
        prefix: str = DEFAULT_PREFIX,
        maxlen: int = 0,
        ttl: int = 0,
        lease_ms: int = 5_000,
        wait_ms: int = 120_000,
        worker: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(config, **options)
        self.leases = SessionLeases(client, prefix=prefix, lease_ms=lease_ms, wait_ms=wait_ms)
        self.client = client
        self.prefix = prefix
        self.maxlen = maxlen
        self.ttl = ttl
        self.worker = worker or f"serve-{uuid.uuid4().hex[:8]}"
        self.ledger = ActionLedger(client, prefix=prefix, worker=self.worker, ttl=ttl)
        self._probe = client.register_script(PROBE_SCRIPT)
        self._shared: dict[str, _Shared] = {}
        self._fetched: dict[str, Lease] = {}
        self._spent: set[str] = set()
        """Tokens of leases a commit's script released or found lost."""
        self._stalled: dict[str, tuple[float, str]] = {}
        """The last Redis timeout of each session with requests in flight:
        when (wall clock) and what it said."""

    def _stream(self, session_id: str) -> RedisSessionLog:
        return RedisSessionLog(self.client, session_id, prefix=self.prefix, maxlen=self.maxlen, ttl=self.ttl)

    async def restore(self, session_id: str) -> Session:
        """The session rebuilt from its whole stream (a new one when the
        stream is empty), read from the entries its lease read if it read
        them from the start."""
        stream = self._stream(session_id)
        lease = self._fetched.get(session_id)
        shared: _Shared

        def heard(action: Action, trigger: Event) -> None:
            if shared.following:
                return  # another replica's action, recorded where it happened
            shared.actions.append((trigger.seq, action))
            if self.on_action is not None:
                self.on_action(action, trigger)

        guard = self.new_guard(on_action=heard)
        shared = _Shared(stream, guard)
        bus = Bus()
        guard.attach(bus)
        link = GuardLink(bus)
        rows = await self._rows(stream, lease if lease is not None and lease.after == "-" else None, "-")
        history: list[AnyEvent] = []
        if rows:
            history = _decode(rows, link) or []
            await self._follow(shared, link, history)
            shared.position = rows[-1][0]
            self.restored += 1
        bus.advance(lease.seq if lease is not None else await stream.last_seq())
        shared.seq = bus.seq
        if self.on_event is not None:
            bus.record(self.on_event)
        self._shared[session_id] = shared

        def close() -> None:
            del self._shared[session_id]

        session = Session(session_id, link, close, guard.plugins)
        session.fetch_answers = partial(self._fetch_answers, shared, session)
        if rows:
            await recall(session, history, guard.owns)  # the denials, and when each call and result was recorded
            session.answers.clear()
            shared.unfetch(session.recorded)  # the answers given, for retries: read when one comes
        return session

    async def _fetch_answers(self, shared: _Shared, session: Session, keys: Sequence[str]) -> None:
        """Read the answers of those of ``keys`` given elsewhere (by another
        replica, or before a restore) and not read with the lease from the
        stream's notes: one round trip, and none when this copy holds them all."""
        wanted = [key for key in keys if key in shared.unfetched]
        if not wanted:
            return
        notes = await shared.log.notes(wanted)
        _adopt(shared, session, {key: notes.get(key) for key in wanted})
        for key in wanted:
            answer = notes.get(key)
            if answer is not None:
                shared.answered[key] = answer  # recorded already: the commit puts it only if it changes

    @asynccontextmanager
    async def _turn(self, session_id: str) -> AsyncIterator[None]:
        """The session's turn, as for any store; but a request that waited
        for it behind one Redis did not answer in time fails at once, as
        that one did: one timeout per stall, not one for each request
        queued behind it (parallel calls of one agent come together)."""
        scope = current()
        arrived = scope.arrived if scope is not None else time.time()
        try:
            async with super()._turn(session_id):
                stalled = self._stalled.get(session_id)
                if stalled is not None and stalled[0] >= arrived:
                    raise StoreError(f"session {session_id!r}: Redis: {stalled[1]} (a request before this one)")
                yield
        finally:
            if session_id not in self._requests:  # no request left that waited behind the stall
                self._stalled.pop(session_id, None)

    def _note_stall(self, session_id: str, exc: RedisError) -> str:
        """``exc``'s text; when it is a timeout, noted for the requests
        waiting behind this one (``_turn``)."""
        text = error_text(exc)
        if isinstance(exc, RedisTimeout):
            self._stalled[session_id] = (time.time(), text)
        return text

    @asynccontextmanager
    async def _held(self, session_id: str, retry_keys: Sequence[str]) -> AsyncIterator[Session]:
        """``use``'s session, caught up with the stream under its lease,
        which is released when the block ends (see the module's docstring).
        Entered in the session's turn: the lease orders replicas, the turn
        this replica's own requests, so a request never reads the stream
        from a position its predecessor is still moving."""
        live = self._live.get(session_id)
        shared = self._shared.get(session_id) if live is not None else None
        try:
            lease = await self._acquire(session_id, shared, retry_keys)
        except RedisError as exc:
            raise StoreError(f"session {session_id!r}: Redis: {self._note_stall(session_id, exc)}") from None
        stop_renewal = self.leases.hold(session_id, lease.token)
        try:
            # (evicted while the lease was taken: restored below instead)
            if live is not None and shared is not None and lease.entries is not None and not live.closed:
                await self._catch_up(live, shared, lease)
            self._fetched[session_id] = lease  # for a restore and the commit: what the lease read, its token
            async with super()._held(session_id, retry_keys) as session:
                shared = self._shared[session_id]
                if lease.notes is not None:  # the answers asked for, read with the lease
                    _adopt(shared, session, lease.notes)
                shared.answered = dict(session.answers)
                yield session
        except RedisError as exc:
            raise StoreError(f"session {session_id!r}: Redis: {self._note_stall(session_id, exc)}") from None
        finally:
            stop_renewal()
            self._fetched.pop(session_id, None)
            if lease.token not in self._spent:
                # Bounded: against a stalled Redis the request has spent its timeout already; a
                # lease not handed back is taken back by this replica's next request of the
                # session, and lapses by itself (lease_ms) for the others.
                released = False
                with anyio.move_on_after(RELEASE_SECONDS, shield=True), contextlib.suppress(RedisError):
                    await self.leases.release(session_id, lease.token)
                    released = True
                if not released:
                    self.leases.abandon(session_id, lease.token)
            self._spent.discard(lease.token)

    async def _acquire(self, session_id: str, shared: _Shared | None, notes: Sequence[str]) -> Lease:
        log = shared.log if shared is not None else self._stream(session_id)
        known, after = (shared.seq, shared.position) if shared is not None else (-1, "-")
        try:
            return await self.leases.acquire(session_id, log, known, after, notes)
        except HeldElsewhere as exc:
            raise LeaseTimeout(str(exc)) from None

    async def _rows(self, log: RedisSessionLog, lease: Lease | None, after: str) -> list[tuple[str, bytes]]:
        """The stream's entries after ``after``: those ``lease`` read (when
        it read from there), then any beyond them."""
        rows = [stream_entry(row) for row in lease.entries] if lease is not None and lease.entries is not None else []
        if lease is not None and lease.entries is not None and len(rows) < self.leases.prefetch:
            return rows
        async for row in log.entries(rows[-1][0] if rows else after):
            rows.append(row)
        return rows

    async def _follow(self, shared: _Shared, link: GuardLink, events: Sequence[AnyEvent]) -> None:
        shared.following = True
        try:
            await follow(link, shared.guard, events)
        finally:
            shared.following = False

    async def _catch_up(self, live: Session, shared: _Shared, lease: Lease) -> None:
        """Apply to ``live`` what other replicas appended since this replica
        last acted for it; evict it (the next step restores it from the
        whole stream) when the stream does not continue from its position."""
        async with live.lock:
            try:
                rows = await self._rows(shared.log, lease, shared.position)
                events = _decode(rows, live.link, strict=True)
                if events is None or not _continues(events, shared.seq, lease.seq):
                    _log.info("serve.redis_rebuild", session=live.id, known=shared.seq, stream=lease.seq)
                    self._evict(live)
                    return
                await self._follow(shared, live.link, events)
                live.relink()
                await recall(live, events, shared.guard.owns)
                keys = [
                    retry_key(kind, event.agent.id, event.call_id)
                    for event in events
                    if (type(event) is ToolCall or type(event) is ToolResult) and event.agent is not None
                    for kind in ("tool/call", "tool/result")
                ]
                for key in keys:  # the answers other replicas gave: read when a retry comes
                    live.answers.pop(key, None)
                shared.unfetch(keys)
            except BaseException:
                self._evict(live)  # half applied: rebuilt from the stream next time
                raise
            shared.seq = lease.seq
            shared.position = rows[-1][0]
            self.caught_up += 1

    async def commit(self, session: Session, events: list[Event]) -> None:
        """Append what the request produced, with the answers it gave (so a
        client's retry on another replica gets the same answer), record its
        actions, and release the lease: one script. ``StoreError`` when it
        did not append: the lease was lost (another replica took the
        session over), or Redis did not answer (the script may have run:
        the next request's restore reads whether it did)."""
        shared = self._shared[session.id]
        token = self._fetched[session.id].token
        actions = shared.actions[:]
        shared.actions.clear()
        answered = shared.answered
        put = {key: answer for key, answer in session.answers.items() if answered.get(key) is not answer}
        drop = answered.keys() - session.answers.keys()
        keys, args = shared.log.extension(events, expected=shared.seq, put=put, drop=drop)
        by_trigger: dict[int, list[Action]] = {}
        for seq, action in actions:
            by_trigger.setdefault(seq, []).append(action)
        ledger, recorded = self.ledger.recording([(session.id, seq, acted) for seq, acted in by_trigger.items()])
        try:
            reply = await self.leases.flush(session.id, token, (keys, args), (ledger, recorded))
        except RedisError as exc:
            raise StoreError(
                f"session {session.id!r}: Redis: {self._note_stall(session.id, exc)}; the event may not be recorded"
            ) from None
        self._spent.add(token)
        if not reply[0]:
            # The lease lapsed and another replica took the session over:
            # this copy is stale; the next request rebuilds it from the stream.
            _log.error("serve.redis_conflict", session=session.id, expected=shared.seq)
            raise StoreError(f"session {session.id!r}: another replica took it over; the event was not recorded")
        shared.seq = events[-1].seq
        position = reply[2]
        shared.position = position.decode() if isinstance(position, bytes) else str(position)

    async def unready(self) -> str | None:
        """Redis must run ``PROBE_SCRIPT``, as it runs every request's."""
        try:
            await self._probe(keys=[probe_key(self.prefix)])
        except RedisError as exc:
            return f"Redis: {error_text(exc)}"
        return None

    async def fleet_counts(self) -> FleetCounts | None:
        """Every replica's counts, from Redis; ``None`` while Redis cannot
        answer, so ``/metrics`` still serves this replica's own counts (its
        503s among them) through an outage."""
        try:
            return await self.ledger.counts()
        except (RedisError, OSError):
            return None

    async def aclose(self) -> None:
        """Close every session and the Redis connection the store was given."""
        self.close()
        await self.client.aclose()


def _decode(rows: Sequence[tuple[str, bytes]], link: GuardLink, *, strict: bool = False) -> list[AnyEvent] | None:
    """Stream entries as events whose agents are ``link``'s live handles
    (new ones for agents it does not have). A line that does not decode is
    skipped, as a log reader skips it; with ``strict``, the answer is then
    ``None``."""
    agents: dict[str, Agent] = {agent.agent.id: agent.agent for agent in link.links()}
    decode = event_decoder(agents).decode
    events: list[AnyEvent] = []
    for _, line in rows:
        try:
            event = decode(line)
        except msgspec.DecodeError:
            if strict:
                return None
            continue
        if isinstance(event, SessionStart):  # pragma: no cover - no writer puts a header into a stream
            continue
        if type(event) is AgentStatus and event.parent is not None and event.agent is not None:
            event.agent.parent_id = event.agent.parent_id or event.parent
        events.append(event)
    return events


def _adopt(shared: _Shared, session: Session, notes: dict[str, bytes | None]) -> None:
    """Take the answers ``notes`` holds (read under the lease: what the
    record holds) as the copy's, unset ones as none."""
    for key, answer in notes.items():
        shared.unfetched.pop(key, None)
        if answer is not None:
            session.remember_answer(key, answer)
        else:
            session.answers.pop(key, None)


def _continues(events: Sequence[AnyEvent], seq: int, last: int) -> bool:
    """Whether ``events`` are exactly the seqs after ``seq`` up to ``last``."""
    return bool(events) and all(event.seq == seq + n for n, event in enumerate(events, 1)) and events[-1].seq == last
