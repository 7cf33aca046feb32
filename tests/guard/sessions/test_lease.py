"""The lease protocol's own bookkeeping: leases this process gave up on, and
taking them back (``serve --redis`` replicas; a real redis-server)."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from bus.redis_log import RedisSessionLog
from guard.sessions import lease
from guard.sessions.lease import LeaseTimeout, SessionLeases
from tests.conftest import RedisClients

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


async def _hold(client: Redis, leases: SessionLeases, session: str, token: str) -> None:
    """``session``'s lease taken by ``token`` as a request that then gave up would leave it."""
    await client.set(leases.key(session), token, px=60_000)
    leases.abandon(session, token)


async def test_each_lease_given_up_on_is_taken_back_once(redis_clients: RedisClients) -> None:
    client = redis_clients()
    leases = SessionLeases(client, prefix="rtg", wait_ms=0)
    log = RedisSessionLog(client, "s")
    leases.abandon("s", "older")  # a taking that never ran
    await _hold(client, leases, "s", "orphan")
    taken = await leases.acquire("s", log, -1, "-")
    assert await client.get(leases.key("s")) == taken.token.encode()
    await leases.release("s", taken.token)
    await client.set(leases.key("s"), "orphan", px=60_000)  # the same token again: given back already
    with pytest.raises(LeaseTimeout):
        await leases.acquire("s", log, -1, "-")
    await client.set(leases.key("s"), "older", px=60_000)  # the other one still is this process's
    assert (await leases.acquire("s", log, -1, "-")).token != "older"


async def test_leases_given_up_on_are_kept_for_a_bounded_number_of_sessions(
    redis_clients: RedisClients, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lease, "_ABANDONED_SESSIONS", 2)
    client = redis_clients()
    leases = SessionLeases(client, prefix="rtg", wait_ms=0)
    for session in ("a", "b", "c"):
        await _hold(client, leases, session, f"orphan-{session}")
    with pytest.raises(LeaseTimeout):  # the oldest session's forgotten: its lease lapses by itself
        await leases.acquire("a", RedisSessionLog(client, "a"), -1, "-")
    for session in ("b", "c"):
        await leases.acquire(session, RedisSessionLog(client, session), -1, "-")
