"""Sessions on Redis Streams, so several ``serve`` replicas share them.

Any replica may answer any request of any session. A request holds the
session's lease in Redis while it runs, so one replica at a time acts for a
session and the session's events reach the stream in the order they were
answered. Before acting, the replica compares the stream's last ``seq`` with
the one it last saw: when another replica has appended since, its copy is
stale and is rebuilt from the stream (exactly as the file store restores a
session from its log). After acting, the events the request produced are
appended in one atomic step, and only if the stream has not moved, so a
replica that lost its lease (paused past ``lease_ms``) can never fork the
session. A replica that dies mid-session loses nothing that was answered:
every answered event is in the stream, and the next request, on any
replica, rebuilds from it and decides the same way.

Needs the ``redis`` extra and asyncio (redis-py has no trio support).
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from bus import Event, LogError
from bus.redis_log import DEFAULT_PREFIX, RedisSessionLog
from guard.actions import Action
from guard.adapters._resume import resume_or_restart
from guard.config import Config
from guard.fleet import ActionLedger, FleetCounts
from guard.server.sessions import Session, SessionStore

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["LeaseTimeout", "RedisSessionStore"]

_log = structlog.get_logger("guard.server")

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class LeaseTimeout(Exception):
    """Another replica held the session's lease for longer than ``lease_ms``."""


class _Shared:
    """What the store keeps beside a live session: its stream, the seq the
    stream had when this replica last acted, and what the current request
    produced (events to append, actions to record)."""

    def __init__(self, log: RedisSessionLog, seq: int) -> None:
        self.log = log
        self.seq = seq
        self.pending: list[Event] = []
        self.actions: list[tuple[int, Action]] = []


class RedisSessionStore(SessionStore):
    """A ``SessionStore`` whose sessions live in Redis streams (see the
    module's docstring). ``scratch`` holds the files a rebuild reads (the
    stream exported as a session log); ``maxlen`` and ``ttl`` bound each
    stream as for ``RedisSessionLog``; ``lease_ms`` is how long a request may
    hold a session before another replica may take it over: keep it above
    the ask command's timeout."""

    def __init__(
        self,
        client: Redis,
        config: Config | None = None,
        *,
        prefix: str = DEFAULT_PREFIX,
        maxlen: int = 0,
        ttl: int = 0,
        lease_ms: int = 120_000,
        scratch: Path | None = None,
        worker: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(config, **options)
        if lease_ms < 1:
            raise ValueError(f"lease_ms = {lease_ms!r}: must be >= 1")
        self.client = client
        self.prefix = prefix
        self.maxlen = maxlen
        self.ttl = ttl
        self.lease_ms = lease_ms
        self.worker = worker or f"serve-{uuid.uuid4().hex[:8]}"
        self.ledger = ActionLedger(client, prefix=prefix, worker=self.worker)
        self._own_scratch = scratch is None
        self._scratch = scratch if scratch is not None else Path(tempfile.mkdtemp(prefix="rtg-serve-"))
        self._shared: dict[str, _Shared] = {}
        self._release = client.register_script(_RELEASE)

    def _stream(self, session_id: str) -> RedisSessionLog:
        return RedisSessionLog(self.client, session_id, prefix=self.prefix, maxlen=self.maxlen, ttl=self.ttl)

    async def restore(self, session_id: str) -> Session:
        stream = self._stream(session_id)
        path = self._scratch / f"{uuid.uuid4().hex}.jsonl"
        try:
            existed = await stream.export(path) > 0
        except LogError:
            existed = False  # a new session: nothing in Redis yet
        shared = _Shared(stream, 0)

        def heard(action: Action, trigger: Event) -> None:
            shared.actions.append((trigger.seq, action))
            if self.on_action is not None:
                self.on_action(action, trigger)

        link, log = await resume_or_restart(path, session_id, self.config, on_action=heard)
        if existed:
            self.restored += 1
        shared.seq = link.bus.seq
        link.bus.record(shared.pending.append)
        if self.on_event is not None:
            link.bus.record(self.on_event)
        self._shared[session_id] = shared

        def close() -> None:
            log.close()
            path.unlink(missing_ok=True)
            del self._shared[session_id]

        session = Session(session_id, link, close)
        for key, answer in (await stream.notes()).items():  # another replica's answers, for retries
            session.remember_answer(key, answer)
        return session

    @asynccontextmanager
    async def use(self, session_id: str) -> AsyncIterator[Session]:
        async with self._lease(session_id):
            last = await self._stream(session_id).last_seq()
            shared = self._shared.get(session_id)
            live = self._live.get(session_id)
            if live is not None and (shared is None or shared.seq != last):
                self._evict(live)  # another replica acted since: rebuild from the stream
            async with super().use(session_id) as session:
                shared = self._shared[session_id]
                answered = dict(session.answers)
                try:
                    yield session
                finally:
                    await self._flush(session, shared, answered)

    async def _flush(self, session: Session, shared: _Shared, answered: dict[str, bytes]) -> None:
        """Append what the request produced, with the answers it gave (so a
        client's retry on another replica gets the same answer)."""
        events, actions = shared.pending[:], shared.actions[:]
        shared.pending.clear()  # in place: the session's bus records into this very list
        shared.actions.clear()
        if not events:
            return
        put = {key: answer for key, answer in session.answers.items() if answered.get(key) is not answer}
        drop = answered.keys() - session.answers.keys()
        if not await shared.log.extend(events, expected=shared.seq, put=put, drop=drop):
            # The lease lapsed and another replica moved the stream: this
            # copy is stale; the next request rebuilds it from the stream.
            _log.error("serve.redis_conflict", session=session.id, expected=shared.seq)
            self._evict(session)
            return
        shared.seq = events[-1].seq
        by_trigger: dict[int, list[Action]] = {}
        for seq, action in actions:
            by_trigger.setdefault(seq, []).append(action)
        for seq, acted in by_trigger.items():
            await self.ledger.record(session.id, seq, acted)

    @asynccontextmanager
    async def _lease(self, session_id: str) -> AsyncIterator[None]:
        key = f"{self.prefix}:{{{session_id}}}:serving"
        token = uuid.uuid4().hex
        deadline = time.monotonic() + self.lease_ms / 1000
        while not await self.client.set(key, token, nx=True, px=self.lease_ms):
            if time.monotonic() > deadline:
                raise LeaseTimeout(f"session {session_id!r} is held by another replica for over {self.lease_ms} ms")
            await anyio.sleep(0.002)
        try:
            yield
        finally:
            await self._release(keys=[key], args=[token])

    async def fleet_counts(self) -> FleetCounts | None:
        """Every replica's counts, from Redis."""
        return await self.ledger.counts()

    def close(self) -> None:
        super().close()
        if self._own_scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)

    async def aclose(self) -> None:
        """Close every session and the Redis connection the store was given."""
        self.close()
        await self.client.aclose()
