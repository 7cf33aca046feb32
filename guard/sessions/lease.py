"""The lease protocol by which ``serve --redis`` replicas share a session:
one request at a time holds the session's lease in Redis, taking it reads
where the session's stream stands, renewing it keeps it while the request
runs, and one script ends the request (append what it produced, record the
guard's actions, release) only if the lease is still the request's.

Needs the ``redis`` extra and asyncio (redis-py has no trio support).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
from redis.exceptions import NoScriptError, RedisError

from bus.redis_log import EXTEND_KEYS, EXTEND_SCRIPT, LUA_HELPERS, RedisSessionLog
from guard.sessions.fleet import ActionLedger

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

__all__ = ["PREFETCH", "Lease", "LeaseTimeout", "SessionLeases"]

PREFETCH = 256
"""Entries taking a lease returns at most; a longer catch-up reads on."""

_ABANDONED_KEPT = 8  # tokens of a session's abandoned leases kept, the latest
_ABANDONED_SESSIONS = 4096

# Take the session's lease and, in the same step, read where the stream is:
# its last seq and, when that is not the seq the replica knows (ARGV[3]) or
# its last entry is not the replica's position (ARGV[4], an entry id or '-':
# a new life of the session, after a Redis restarted without its data, that
# reached the same seq), the entries after that position and the notes
# named by ARGV[6:] (from the hash KEYS[4]).
# A lease held by another request answers {0, its remaining ms, its token};
# one held by this token already (the same taking sent again after a lost
# connection) is this request's.
_ACQUIRE = (
    LUA_HELPERS
    + """
local wrong = check_types({KEYS[1], 'string', KEYS[2], 'hash', KEYS[3], 'stream', KEYS[4], 'hash'})
if wrong then return redis.error_reply(wrong) end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local holder = redis.call('GET', KEYS[1])
  if holder ~= ARGV[1] then return {0, redis.call('PTTL', KEYS[1]), holder} end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local seq = last_seq(KEYS[2], KEYS[3])
if seq == tonumber(ARGV[3]) then
  local last = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)[1]
  if (last and last[1] or '-') == ARGV[4] then return {1, seq} end
end
local start = ARGV[4] == '-' and '-' or '(' .. ARGV[4]
local entries = redis.call('XRANGE', KEYS[3], start, '+', 'COUNT', ARGV[5])
if #ARGV == 5 then return {1, seq, entries} end
return {1, seq, entries, redis.call('HMGET', KEYS[4], unpack(ARGV, 6))}
"""
)

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# A request's end in one step: if the lease is still the request's, the
# log's extend (refused when the stream moved), then, only if it appended,
# the ledger's record of each action, then the release. The two scripts are
# the log's and the ledger's own, each wrapped in a function whose KEYS and
# ARGV are its slice of this script's: ARGV is the token, the number of the
# extend's arguments, those arguments, then the ledger's ARGV.
_FLUSH = f"""
local function extend(KEYS, ARGV)
{EXTEND_SCRIPT}
end
local function record(KEYS, ARGV)
{ActionLedger.script}
end
local function slice(t, first, last)
  local part = {{}}
  for i = first, last do part[#part + 1] = t[i] end
  return part
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {{0, -1}} end
local n = tonumber(ARGV[2])
local done = extend(slice(KEYS, 2, {1 + EXTEND_KEYS}), slice(ARGV, 3, 2 + n))
if done[1] == 1 then record(slice(KEYS, {2 + EXTEND_KEYS}, #KEYS), slice(ARGV, 3 + n, #ARGV)) end
redis.call('DEL', KEYS[1])
return done
"""


class LeaseTimeout(Exception):
    """Another replica held the session's lease for longer than ``wait_ms``."""


class Lease(msgspec.Struct, frozen=True):
    """A request's hold on a session: its ``token``, the stream's last
    ``seq`` when it was taken, and, when that differed from what the replica
    knew, up to ``PREFETCH`` entries (as the script returned them) after
    ``after`` and the notes asked for (name -> value, ``None`` when unset);
    ``None`` when the script read none."""

    token: str
    seq: int
    after: str
    entries: list[Any] | None
    notes: dict[str, bytes | None] | None = None


class _Batches:
    """Script calls made in one turn of the event loop, sent to Redis
    together: one pipeline (one write, one connection, replies in order)
    instead of one round trip each. Each caller still waits for its own
    script's reply and gets its own error (a connection lost under the
    pipeline fails every call in it, as it would have failed each alone):
    batching changes how the calls travel, not what any of them does."""

    def __init__(self, client: Redis) -> None:
        self._client = client
        self._waiting: list[tuple[AsyncScript, list[Any], list[Any], asyncio.Future[Any]]] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def call(self, script: AsyncScript, keys: list[Any], args: list[Any]) -> Any:
        """``script``'s reply to ``keys`` and ``args``, sent with the calls
        made in the same turn of the event loop."""
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        if not self._waiting:
            loop.call_soon(self._start)
        self._waiting.append((script, keys, args, reply))
        return await reply  # a caller cancelled meanwhile leaves its call to run, as one already sent would

    def _start(self) -> None:
        task = asyncio.get_running_loop().create_task(self._send(self._waiting))
        self._waiting = []
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[tuple[AsyncScript, list[Any], list[Any], asyncio.Future[Any]]]) -> None:
        try:
            if len(batch) == 1:
                answers: list[Any] = [await _reply(*batch[0][:3])]
            else:
                async with self._client.pipeline(transaction=False) as pipe:
                    for script, keys, args, _ in batch:
                        pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
                    answers = await pipe.execute(raise_on_error=False)
                for n, (script, keys, args, _) in enumerate(batch):
                    if isinstance(answers[n], NoScriptError):  # Redis restarted or flushed its scripts
                        answers[n] = await _reply(script, keys, args)
        except Exception as exc:
            answers = [exc] * len(batch)
        except BaseException:  # pragma: no cover - the event loop closing under a batch in flight
            for *_, reply in batch:
                reply.cancel()
            raise
        for (*_, reply), answer in zip(batch, answers, strict=True):
            if reply.done():
                continue  # its caller was cancelled meanwhile
            if isinstance(answer, Exception):
                reply.set_exception(answer)
            else:
                reply.set_result(answer)


async def _reply(script: AsyncScript, keys: list[Any], args: list[Any]) -> Any:
    """``script``'s reply (loading it if Redis lacks it), or the error it raised."""
    try:
        return await script(keys=keys, args=args)
    except RedisError as exc:
        return exc


class SessionLeases:
    """The leases of the sessions under ``prefix`` on ``client``: a lease
    outlives its last renewal by ``lease_ms``; ``acquire`` waits up to
    ``wait_ms`` for another request's lease before ``LeaseTimeout``.

    A lease this process gave up on (``abandon``: taking it or handing it
    back failed, so Redis may still grant or keep it once it answers again,
    with no request left to use it) is taken back by this process's next
    request of the session instead of waited out."""

    def __init__(self, client: Redis, *, prefix: str, lease_ms: int = 5_000, wait_ms: int = 120_000) -> None:
        if lease_ms < 3:
            raise ValueError(f"lease_ms = {lease_ms!r}: must be >= 3")
        if wait_ms < 0:
            raise ValueError(f"wait_ms = {wait_ms!r}: must be >= 0")
        self.prefix = prefix
        self.lease_ms = lease_ms
        self.wait_ms = wait_ms
        self.prefetch = PREFETCH
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)
        self._renew = client.register_script(_RENEW)
        self._flush = client.register_script(_FLUSH)
        self._batches = _Batches(client)
        self._abandoned: dict[str, list[str]] = {}

    def key(self, session_id: str) -> str:
        """The Redis key of ``session_id``'s lease."""
        return f"{self.prefix}:{{{session_id}}}:serving"

    async def acquire(
        self, session_id: str, log: RedisSessionLog, known: int, after: str, notes: Sequence[str] = ()
    ) -> Lease:
        """Take the session's lease, waiting while another request holds it
        (up to ``wait_ms``); with it, where the stream stands: its last seq
        and, when that is not ``known``, the entries after ``after`` and the
        log's ``notes`` of these names."""
        keys = [self.key(session_id), log.meta, log.stream, log.notes_key]
        token = uuid.uuid4().hex
        deadline = time.monotonic() + self.wait_ms / 1000
        pause = 0.001
        while True:
            try:
                reply = await self._batches.call(
                    self._acquire, keys, [token, self.lease_ms, known, after, self.prefetch, *notes]
                )
            except BaseException:
                self.abandon(session_id, token)  # the script may yet run and take the lease
                raise
            if reply[0]:
                if len(reply) < 3:
                    return Lease(token, int(reply[1]), after, None)
                read = dict(zip(notes, reply[3], strict=True)) if len(reply) > 3 else None
                return Lease(token, int(reply[1]), after, reply[2], read)
            if await self._take_back(session_id, reply[2]):
                continue
            if time.monotonic() > deadline:
                raise LeaseTimeout(f"session {session_id!r} is held by another replica for over {self.wait_ms} ms")
            # The holder is another replica answering one request: a few ms.
            await anyio.sleep(pause)
            pause = min(pause * 2, 0.05)

    def abandon(self, session_id: str, token: str) -> None:
        """Note that no request holds ``token``'s lease of the session any
        more, though Redis may grant or keep it (see the class docstring)."""
        tokens = self._abandoned.pop(session_id, [])
        if len(self._abandoned) >= _ABANDONED_SESSIONS:
            del self._abandoned[next(iter(self._abandoned))]
        self._abandoned[session_id] = [*tokens[1 - _ABANDONED_KEPT :], token]

    async def _take_back(self, session_id: str, holder: bytes | str | None) -> bool:
        """Release the session's lease when ``holder``, the token holding
        it, is one this process abandoned: whether it did."""
        tokens = self._abandoned.get(session_id)
        held = holder.decode() if isinstance(holder, bytes) else holder
        if not tokens or held not in tokens:
            return False
        tokens.remove(held)
        if not tokens:
            del self._abandoned[session_id]
        await self.release(session_id, held)
        return True

    def hold(self, session_id: str, token: str) -> Callable[[], None]:
        """Keep the lease while the caller runs: renewed every third of
        ``lease_ms`` from now on, until it is lost (the flush will then be
        refused) or the returned function is called. A request shorter than
        a third of ``lease_ms`` costs one timer, no task."""
        loop = asyncio.get_running_loop()
        renewal: asyncio.Task[None] | None = None

        def start() -> None:
            nonlocal renewal
            renewal = loop.create_task(self._keep(session_id, token))

        timer = loop.call_later(self.lease_ms / 3000, start)

        def stop() -> None:
            timer.cancel()
            if renewal is not None:
                renewal.cancel()

        return stop

    async def _keep(self, session_id: str, token: str) -> None:
        key = self.key(session_id)
        while True:
            try:
                if not await self._renew(keys=[key], args=[token, self.lease_ms]):
                    return
            except RedisError:
                return  # the request's own calls to Redis fail and say why
            await anyio.sleep(self.lease_ms / 3000)

    async def release(self, session_id: str, token: str) -> None:
        await self._release(keys=[self.key(session_id)], args=[token])

    async def flush(
        self, session_id: str, token: str, log: tuple[list[str], list[Any]], ledger: tuple[list[str], list[Any]]
    ) -> Any:
        """End the request in one step: if the lease is still ``token``'s,
        the log's extend (``log``: its keys and arguments), then, only if it
        appended, the ledger's record (``ledger``), then the release. The
        reply is the extend's, or ``[0, -1]`` when the lease was lost."""
        (log_keys, log_args), (ledger_keys, ledger_args) = log, ledger
        keys = [self.key(session_id), *log_keys, *ledger_keys]
        return await self._batches.call(self._flush, keys, [token, len(log_args), *log_args, *ledger_args])
