"""Session logs on Redis Streams: one stream per session, many writers.

A fleet of workers (several processes, several machines) appends the events
of one session to that session's stream. Redis orders the appends, so the
stream's order *is* the session's order: ``seq`` is assigned inside Redis, in
the same atomic step that adds the entry, and two writers can neither
reorder nor share a ``seq``. An append may carry an idempotency key; a retry
with the same key is answered with the ``seq`` of the first append and adds
nothing, so a client that resends after a timeout is applied once.

Each stream entry holds one line of the session log's JSON form, ``seq``
included, so ``export`` writes a stream out as a normal session log that
``replay``, ``audit`` and ``LogReader`` read unchanged.

Keys, for a prefix ``p`` and a session ``s`` (the braces keep one session's
keys in one Redis Cluster slot): ``p:{s}:events`` (the stream), ``p:{s}:meta``
(a hash: log version, creation time, the ``seq`` counter) and ``p:{s}:keys``
(idempotency key -> seq); a writer that keeps small values beside the events
(``extend``'s notes) keeps them in ``p:{s}:notes`` (a hash) and when each was
set in ``p:{s}:noted`` (a sorted set by seq), so a note lives for the next
``NOTES_SPAN`` events whoever set it. ``p:sessions`` is a sorted set of session ids by
last append, for listing and watching, and ``p:metrics`` a hash of fleet-wide
counters (``events``: appends that added an event).

This module needs the optional ``redis`` package (``pip install
'repeat-tool-guard[redis]'``) and runs on asyncio (redis-py has no trio
support).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import msgspec

from bus._codec import MAX_NESTING, as_logged, checked_time, conform, encode_line, encoded, event_decoder, too_deep
from bus.events import AgentStatus, AnyEvent, Event, SessionStart
from bus.log import LOG_VERSION
from bus.reader import LogError, ReadReport

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = [
    "EXTEND_KEYS",
    "EXTEND_SCRIPT",
    "LUA_HELPERS",
    "NOTES_SPAN",
    "REDIS_AUTH_ENV",
    "REDIS_SCHEMES",
    "Appended",
    "PendingAppend",
    "RedisSessionLog",
    "RedisTarget",
    "append_many",
    "check_redis_url",
    "env_password",
    "is_redis",
    "parse_redis_target",
    "redact_url",
    "redis_client",
    "stream_entry",
]

DEFAULT_PREFIX = "rtg"

_SEQ_PLACEHOLDER = b'"seq":0,'

# Lua shared by the scripts below. ``last_seq``: a session's last seq, from
# its meta hash, or, when that was lost (deleted, evicted), from the last
# entry of its stream (``stream_seq``), so a lost counter neither restarts at 1 beside the old
# entries nor refuses every later append. ``check_types``: a script errors out
# before its first write when a key holds the wrong type, since Redis keeps
# the writes a script made before an error.
LUA_HELPERS = """
local function stream_seq(events)
  local last = redis.call('XREVRANGE', events, '+', '-', 'COUNT', 1)
  if #last == 0 then return 0 end
  local fields = last[1][2]
  for f = 1, #fields, 2 do
    if fields[f] == 'seq' then return tonumber(fields[f + 1]) end
  end
  return 0
end
local function last_seq(meta, events)
  local seq = redis.call('HGET', meta, 'seq')
  if seq then return tonumber(seq) end
  return stream_seq(events)
end
local function check_types(pairs_)
  for i = 1, #pairs_, 2 do
    local kind = redis.call('TYPE', pairs_[i])['ok']
    if kind ~= 'none' and kind ~= pairs_[i + 1] then
      return 'WRONGTYPE ' .. pairs_[i] .. ' holds a ' .. kind .. ', not a ' .. pairs_[i + 1] .. ': nothing was written'
    end
  end
  return nil
end
-- The session index forgets the sessions idle for longer than ttl: their keys have expired.
local function forget_expired(sessions, now, ttl)
  redis.call('ZREMRANGEBYSCORE', sessions, '-inf', '(' .. (tonumber(now) - ttl))
end
"""


# Atomic appends, one or many (one round trip for a batch, even across
# sessions): for each, dedupe by key, take the session's next seq, write it
# into the line in place of the placeholder, add the entry, trim, and return
# the entries after the caller's position as a flat id, line, id, line list.
# The appends' arguments come as one MessagePack array, which costs the
# client far less to send than an argument each; lines go as MessagePack
# strings, since Redis's MessagePack reader has no binary type.
_MSGPACK = msgspec.msgpack.Encoder()

_APPEND = (
    LUA_HELPERS
    + """
local sessions, metrics = KEYS[1], KEYS[2]
local version, count, ops = ARGV[1], tonumber(ARGV[2]), cmsgpack.unpack(ARGV[3])
local out, added, indexed = {}, 0, {}
local typed = {sessions, 'zset', metrics, 'hash'}
for op = 0, #ops - 1 do
  for _, kind in ipairs({{3, 'stream'}, {4, 'hash'}, {5, 'hash'}}) do
    typed[#typed + 1] = KEYS[kind[1] + 3 * op]
    typed[#typed + 1] = kind[2]
  end
end
local wrong = check_types(typed)
if wrong then return redis.error_reply(wrong) end
for op = 0, #ops - 1 do
  local events, meta, keys = KEYS[3 + 3 * op], KEYS[4 + 3 * op], KEYS[5 + 3 * op]
  local session, key, line, after, maxlen, ttl, now, forget = unpack(ops[op + 1])
  local seq, new = nil, 1
  if key ~= '' then
    local seen = redis.call('HGET', keys, key)
    if seen then seq, new = tonumber(seen), 0 end
  end
  if new == 1 then
    seq = redis.call('HINCRBY', meta, 'seq', 1)
    if seq == 1 then  -- a new session, or one whose counter was lost: number on from its stream
      local known = stream_seq(events)
      if known > 0 then
        seq = known + 1
        redis.call('HSET', meta, 'seq', seq)
      end
    end
    if redis.call('HSETNX', meta, 'v', version) == 1 then redis.call('HSET', meta, 'ts', now, 'session', session) end
    local i = string.find(line, '"seq":0,', 1, true)
    if not i then return redis.error_reply('event line has no seq placeholder') end
    line = string.sub(line, 1, i - 1) .. '"seq":' .. seq .. ',' .. string.sub(line, i + 8)
    if maxlen > 0 then
      redis.call('XADD', events, 'MAXLEN', '~', maxlen, '*', 'seq', seq, 'line', line)
    else
      redis.call('XADD', events, '*', 'seq', seq, 'line', line)
    end
    if key ~= '' then redis.call('HSET', keys, key, seq) end
    if forget ~= '' then redis.call('HDEL', keys, forget) end
    if not indexed[session] then
      redis.call('ZADD', sessions, now, session)
      indexed[session] = true
      if ttl > 0 then forget_expired(sessions, now, ttl) end
    end
    added = added + 1
    if ttl > 0 then
      redis.call('EXPIRE', events, ttl)
      redis.call('EXPIRE', meta, ttl)
      redis.call('EXPIRE', keys, ttl)
    end
  end
  local rows = {}
  if after ~= '' then
    local start = after == '-' and '-' or '(' .. after
    for _, entry in ipairs(redis.call('XRANGE', events, start, '+', 'COUNT', count)) do
      local fields = entry[2]
      for f = 1, #fields, 2 do
        if fields[f] == 'line' then
          rows[#rows + 1] = entry[1]
          rows[#rows + 1] = fields[f + 1]
        end
      end
    end
  end
  out[op + 1] = {seq, new, rows}
end
if added > 0 then redis.call('HINCRBY', metrics, 'events', added) end
return out
"""
)


NOTES_SPAN = 1024
"""How many events of its session a note outlives: older ones are removed
as the session's stream grows, whichever writer set them."""

EXTEND_KEYS = 6
"""The number of keys ``EXTEND_SCRIPT`` takes (``RedisSessionLog.extension``)."""

# Append events that already carry their seqs, only if the stream is still
# where the writer saw it (the writer holds the session's lease; this check
# turns a lease lost to a pause into a refusal rather than a fork). Returns
# the last entry's id too, so the writer can read on from there.
_EXTEND = """
local events, meta, sessions, metrics, notes, noted = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local expected, maxlen, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now, session, version, n = ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7])
local wrong = check_types({
  events, 'stream', meta, 'hash', sessions, 'zset', metrics, 'hash', notes, 'hash', noted, 'zset'
})
if wrong then return redis.error_reply(wrong) end
local current = last_seq(meta, events)
if current ~= expected then return {0, current} end
if redis.call('HSETNX', meta, 'v', version) == 1 then
  redis.call('HSET', meta, 'ts', now, 'session', session)
end
local last = ''
for i = 8, 7 + n do
  current = current + 1
  if maxlen > 0 then
    last = redis.call('XADD', events, 'MAXLEN', '~', maxlen, '*', 'seq', current, 'line', ARGV[i])
  else
    last = redis.call('XADD', events, '*', 'seq', current, 'line', ARGV[i])
  end
end
local p = 8 + n
local puts = tonumber(ARGV[p])
if redis.call('EXISTS', noted) == 0 and redis.call('EXISTS', notes) == 1 then
  -- notes an older version set without their seqs: they live from here on
  for _, name in ipairs(redis.call('HKEYS', notes)) do redis.call('ZADD', noted, current, name) end
end
for i = p + 1, p + 2 * puts, 2 do
  redis.call('HSET', notes, ARGV[i], ARGV[i + 1])
  redis.call('ZADD', noted, current, ARGV[i])
end
for i = p + 1 + 2 * puts, #ARGV do
  redis.call('HDEL', notes, ARGV[i])
  redis.call('ZREM', noted, ARGV[i])
end
-- whichever writer set them, the notes that old go, up to 64 an append
local old = redis.call('ZRANGEBYSCORE', noted, '-inf', current - __NOTES_SPAN__, 'LIMIT', 0, 64)
for _, name in ipairs(old) do
  redis.call('HDEL', notes, name)
  redis.call('ZREM', noted, name)
end
redis.call('HSET', meta, 'seq', current)
redis.call('ZADD', sessions, now, session)
redis.call('HINCRBY', metrics, 'events', n)
if ttl > 0 then
  forget_expired(sessions, now, ttl)
  redis.call('EXPIRE', events, ttl)
  redis.call('EXPIRE', meta, ttl)
  redis.call('EXPIRE', notes, ttl)
  redis.call('EXPIRE', noted, ttl)
end
return {1, current, last}
""".replace("__NOTES_SPAN__", str(NOTES_SPAN))

EXTEND_SCRIPT = LUA_HELPERS + _EXTEND
"""The Lua script behind ``extend``, for a caller that runs it inside a
script of its own (see ``RedisSessionLog.extension``). It returns
``{1, last seq, last entry id}`` when it appended, ``{0, current seq}``
when the stream had moved."""


class Appended(msgspec.Struct, frozen=True):
    """The outcome of one append: the event's ``seq`` in its session,
    whether this call added it (false for a retry of an idempotency key),
    and, when the append asked for them, the stream's entries after the
    given position as (entry id, line), read in the same atomic step."""

    seq: int
    new: bool
    entries: list[tuple[str, bytes]] = []


class PendingAppend(msgspec.Struct, frozen=True, array_like=True):
    """One append of a batch, made by ``RedisSessionLog.pending`` and sent by
    ``append_many``: the fleet-wide keys, the session's keys, the arguments."""

    fleet: Sequence[bytes]
    keys: tuple[bytes, bytes, bytes]
    args: tuple[str, str, str, str, int, int, str, str]


async def append_many(client: Redis, batch: Sequence[PendingAppend], *, count: int = 1000) -> list[Appended]:
    """Send a batch of appends, to any sessions under one prefix, in one
    round trip; each is applied as ``RedisSessionLog.append`` applies it, in
    the batch's order, and the answers come back in that order. Either every
    append of the batch is applied or, when Redis cannot be reached, the
    error is raised for all of them."""
    if not batch:
        return []
    fleet = batch[0].fleet
    keys: list[bytes] = [*fleet]
    for pending in batch:
        if pending.fleet != fleet:
            raise ValueError(
                f"one batch appends under one prefix: {pending.fleet[0].decode()!r} is not {fleet[0].decode()!r}"
            )
        keys += pending.keys
    ops = encoded([pending.args for pending in batch], _MSGPACK)
    answers = await client.register_script(_APPEND)(keys=keys, args=[LOG_VERSION, count, ops])
    return [Appended(int(seq), bool(new), _pairs(rows)) for seq, new, rows in answers]


def _pairs(rows: list[Any]) -> list[tuple[str, bytes]]:
    """The script's flat id, line, id, line list as (id, line) pairs."""
    return [
        (ident.decode() if isinstance(ident, bytes) else str(ident), line.encode() if isinstance(line, str) else line)
        for ident, line in zip(rows[::2], rows[1::2], strict=True)
    ]


class RedisTarget(msgspec.Struct, frozen=True):
    """A Redis server and database as a ``redis://`` URL names it."""

    url: str


REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
"""How a URL names a Redis server; anything else a command takes is a file."""


def is_redis(source: str) -> bool:
    """Whether a command's source names a Redis server rather than a file."""
    return source.startswith(REDIS_SCHEMES)


def parse_redis_target(text: str) -> RedisTarget | None:
    """``text`` as a Redis target when it is a ``redis://``, ``rediss://`` or
    ``unix://`` URL, else ``None`` (a file path)."""
    if is_redis(text):
        return RedisTarget(text)
    return None


def _credentials(url: str) -> tuple[str, str, str]:
    """``url`` split into its scheme, its user part (up to the last ``@``,
    so a password holding ``/``, ``?`` or ``#`` stays whole) and the rest."""
    scheme, _, rest = url.partition("://")
    credentials, at, tail = rest.rpartition("@")
    return scheme, credentials if at else "", tail if at else rest


def check_redis_url(url: str) -> None:
    """A ``ValueError`` saying what is wrong with ``url`` as a Redis URL (it
    does not parse, its port is no port or 0, its database is no number, a
    password holds an unencoded ``/``, ``?`` or ``#``, a query parameter the
    client does not take), before a client takes it: redis-py reads
    ``redis://host/abc`` as database 0 and port 0 as 6379. The caller names
    the URL (``redact_url``)."""
    scheme, credentials, _ = _credentials(url)
    if any(c in credentials for c in "/?#"):
        raise ValueError("its password holds '/', '?' or '#': percent-encode them (%2F, %3F, %23)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"it does not parse ({exc})") from None
    if port == 0:
        raise ValueError("its port is 0")
    database = parts.path.strip("/")
    if scheme != "unix" and database and not database.isdigit():
        raise ValueError(f"its database {database!r} is not a number")
    from redis.asyncio import ConnectionPool
    from redis.exceptions import RedisError

    try:
        ConnectionPool.from_url(url).make_connection()  # type: ignore[no-untyped-call]  # connects nowhere
    except (TypeError, ValueError, RedisError) as exc:  # the client refuses some options as its own errors
        detail = str(exc).rpartition("__init__() ")[2]
        raise ValueError(f"its query does not suit the Redis client ({detail})") from None


REDIS_AUTH_ENV = "REDISCLI_AUTH"
"""The variable holding the Redis password for a URL that has none, as
``redis-cli`` reads it: a password in a URL on a command line is shown by
``ps`` to every local user for as long as the command runs."""


def env_password(url: str) -> str | None:
    """``$REDISCLI_AUTH`` when set and ``url`` (checked by
    ``check_redis_url`` first) gives no password of its own (a password in
    the URL wins)."""
    password = os.environ.get(REDIS_AUTH_ENV)
    if not password:
        return None
    return password if urlsplit(url).password is None else None


def redis_client(url: str, *, timeout: float) -> Redis:
    """A client for ``url`` (checked by ``check_redis_url`` first) that gives
    up on a command after ``timeout`` seconds, whatever redis-py's own
    defaults, and takes a connection Redis closed while it sat idle (its
    ``timeout`` setting, a restart, ``CLIENT KILL``) for a new one: each
    command is sent once more on a fresh connection after a connection
    error, never after a timeout, so a stalled Redis costs ``timeout`` once.
    The password may come from ``$REDISCLI_AUTH`` (``env_password``). A URL
    that does not suit raises a ``ValueError`` that names it with its
    password hidden (``redact_url``): a worker's start-up traceback shows no
    secret."""
    try:
        check_redis_url(url)
    except ValueError as exc:
        raise ValueError(f"not a usable Redis URL {redact_url(url)!r}: {exc}") from None
    from redis.asyncio import Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    return Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        health_check_interval=1,
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),  # redis-py adds timeouts otherwise
        retry_on_error=[RedisConnectionError],
        password=env_password(url),
    )


def _secret_option(name: str) -> bool:
    """Whether a URL query option holds a secret (``password``,
    ``ssl_password``, ``token``, ...), however it is spelt."""
    name = name.strip().lower()
    return name in ("pass", "passwd", "token") or name.endswith(("password", "_token", "secret"))


def redact_url(url: str) -> str:
    """``url`` fit to print: a password in its user part or its query
    (``redis://:secret@host``, ``?password=secret``) becomes ``***``; of a
    URL that does not parse, only its scheme is shown."""
    scheme, credentials, rest = _credentials(url)
    try:
        parts = urlsplit(f"{scheme}://{rest}")
    except ValueError:  # an unclosed IPv6 bracket: where a password would be cannot be told
        return f"{scheme}://<malformed>"
    user = ""
    if credentials:
        name, colon, _ = credentials.partition(":")
        user = f"{name}:***@" if colon else f"{credentials}@"
    query = "&".join(
        f"{name}=***" if _secret_option(unquote(name)) else pair
        for pair in parts.query.split("&")
        if pair
        for name in (pair.partition("=")[0],)
    )
    tail = f"?{query}" if query else ""
    return f"{parts.scheme}://{user}{parts.netloc}{parts.path}{tail}"


def _events_key(prefix: str, session: str) -> str:
    return f"{prefix}:{{{session}}}:events"


class RedisSessionLog:
    """One session's log in a Redis stream, shared by every writer.

    ``append`` is the only way events enter: it assigns ``seq`` in Redis and
    returns it. ``maxlen`` trims the stream approximately to that many
    entries (Redis ``MAXLEN ~``); ``ttl`` expires an idle session's keys that
    many seconds after its last append, and an append with it takes the
    sessions idle for longer out of the ``p:sessions`` index (writers that
    share a prefix should share a ``ttl``). Either bounds what a long-lived
    fleet keeps; neither is on by default, so nothing is dropped unasked.
    """

    def __init__(
        self,
        client: Redis,
        session: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        maxlen: int = 0,
        ttl: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not session:
            raise ValueError("a Redis session log needs a non-empty session id")
        session = as_logged(session)  # a lone surrogate as the log writes it: keys are UTF-8
        if maxlen < 0 or ttl < 0:
            raise ValueError(f"maxlen and ttl must be >= 0, got maxlen={maxlen}, ttl={ttl}")
        self.client = client
        self.session = session
        self.prefix = prefix
        self.maxlen = maxlen
        self.ttl = ttl
        self._clock = clock
        self._keys = [
            _events_key(prefix, session),
            f"{prefix}:{{{session}}}:meta",
            f"{prefix}:{{{session}}}:keys",
            f"{prefix}:sessions",
            f"{prefix}:metrics",
            f"{prefix}:{{{session}}}:notes",
            f"{prefix}:{{{session}}}:noted",
        ]
        self._extend = client.register_script(EXTEND_SCRIPT)
        self._fleet_keys = (self._keys[3].encode(), self._keys[4].encode())
        self._session_keys = (self._keys[0].encode(), self._keys[1].encode(), self._keys[2].encode())
        self._buffer = bytearray()

    @property
    def stream(self) -> str:
        """The stream's key."""
        return self._keys[0]

    async def append(
        self, event: Event, *, key: str | None = None, after: str | None = None, count: int = 1000
    ) -> Appended:
        """Add ``event`` (its ``seq`` is ignored and assigned here); with
        ``key``, a second append under the same key adds nothing and returns
        the first one's seq. With ``after`` (an entry id, or ``-`` for the
        start), the answer also carries up to ``count`` entries that follow
        it, so a reader catching up pays one round trip, not two."""
        (appended,) = await append_many(self.client, [self.pending(event, key=key, after=after)], count=count)
        return appended

    def pending(
        self, event: Event, *, key: str | None = None, after: str | None = None, forget: str | None = None
    ) -> PendingAppend:
        """``append``'s request, not yet sent: ``append_many`` sends many in
        one round trip. ``forget``: a key that no longer names an event once
        this one is appended (a call's, once its result is in: its id may
        name a new call). An event built without a time (``ts`` 0.0) is
        logged at the log's clock, as ``Bus.publish`` stamps one; a field
        no reader could read is a ``TypeError`` naming it, as it is there."""
        now = self._clock()
        return PendingAppend(
            self._fleet_keys,
            self._session_keys,
            (
                self.session,
                key or "",
                self._line(event, now),
                after or "",
                self.maxlen,
                self.ttl,
                repr(now),
                forget or "",
            ),
        )

    async def last_seq(self) -> int:
        """The seq of the session's last event (0 for none)."""
        value = await self.client.hget(self._keys[1], "seq")
        return int(value or 0)

    async def extend(
        self,
        events: Sequence[Event],
        *,
        expected: int,
        put: Mapping[str, bytes] | None = None,
        drop: Iterable[str] = (),
    ) -> bool:
        """Append ``events``, which carry their seqs already (``expected`` + 1,
        + 2, ...: a writer that holds the session's lease numbers them
        itself), if and only if the session's last seq is still
        ``expected``; false, and nothing written, when another writer got
        there first. In the same atomic step, ``put`` sets and ``drop``
        removes the session's notes: small values a writer keeps beside the
        events (see ``notes``)."""
        put = put or {}
        drop = list(drop)
        if not events and not put and not drop:
            return True
        keys, args = self.extension(events, expected=expected, put=put, drop=drop)
        reply = await self._extend(keys=keys, args=args)
        return bool(reply[0])

    def extension(
        self,
        events: Sequence[Event],
        *,
        expected: int,
        put: Mapping[str, bytes] | None = None,
        drop: Iterable[str] = (),
    ) -> tuple[list[str], list[Any]]:
        """``extend``'s script call as (KEYS, ARGV) for ``EXTEND_SCRIPT``,
        unsent: for a writer that runs the extend inside a script of its own,
        with other steps, in one round trip."""
        lines = []
        for event in events:
            encode_line(event, self._buffer)
            lines.append(bytes(self._buffer))
        keys = [self._keys[0], self._keys[1], self._keys[3], self._keys[4], self._keys[5], self._keys[6]]
        now = self._clock()
        args: list[Any] = [expected, self.maxlen, self.ttl, repr(now), self.session, LOG_VERSION, len(lines), *lines]
        put = put or {}
        args.append(len(put))
        for name, value in put.items():
            args += [name, value]
        args += drop
        return keys, args

    @property
    def meta(self) -> str:
        """The key of the session's meta hash (log version, creation time, the ``seq`` counter)."""
        return self._keys[1]

    @property
    def notes_key(self) -> str:
        """The key of the session's notes hash (see ``notes``)."""
        return self._keys[5]

    async def notes(self, names: Iterable[str] | None = None) -> dict[str, bytes]:
        """The session's notes (``extend``'s ``put``), by name: all of them,
        or only those among ``names`` that are set."""
        if names is not None:
            wanted = list(names)
            if not wanted:
                return {}
            values = await self.client.hmget(self._keys[5], wanted)
            return {name: _bytes(value) for name, value in zip(wanted, values, strict=True) if value is not None}
        raw = await self.client.hgetall(self._keys[5])
        return {(k.decode() if isinstance(k, bytes) else str(k)): _bytes(v) for k, v in raw.items()}

    def _line(self, event: Event, now: float) -> str:
        """The event's log line with ``"seq":0``, for the script to number,
        and its time, or ``now`` when it has none."""
        conform(event)
        ts = checked_time(event.ts or now, f"{type(event).__name__}.ts is")
        buffer = self._buffer
        encode_line(msgspec.structs.replace(event, seq=0, ts=ts) if event.seq or ts != event.ts else event, buffer)
        if _SEQ_PLACEHOLDER in buffer[:64]:
            return buffer.decode()
        # Written through the stand-ins (a value JSON cannot carry as it is), whose
        # keys come sorted: put type and seq first again, the rest as written.
        fields = msgspec.json.decode(buffer)
        first = {"type": fields.pop("type"), "seq": 0}
        return msgspec.json.encode({**first, **fields}).decode()

    async def length(self) -> int:
        """How many events the stream holds now (after any trimming)."""
        return int(await self.client.xlen(self.stream))

    async def entries(self, after: str = "-", *, batch: int = 1000) -> AsyncIterator[tuple[str, bytes]]:
        """Stream entries as (entry id, line) from just after ``after`` (an
        entry id; ``-`` for the start), in order, ``batch`` at a time."""
        start = after if after == "-" else f"({after}"
        while True:
            rows: list[tuple[Any, Any]] = (await self.client.xrange(self.stream, min=start, max="+", count=batch)) or []
            ident = ""
            for row in rows:
                ident, line = _entry(row)
                yield ident, line
            if len(rows) < batch:
                return
            start = f"({ident}"

    async def header(self) -> SessionStart:
        """The session's header, as a file log's first line; ``LogError`` when
        no event was ever appended (or the session expired), when its meta
        key is gone while events remain, and when the
        header is one ``LogReader`` would refuse in a file (a version it does
        not know, a creation time that is no number), so that what
        ``export`` writes always reads back; and when its keys hold data of
        another kind (another program's keys under the prefix)."""
        for key, kind in ((self.meta, "hash"), (self.stream, "stream")):
            found = await self.client.type(key)
            found = found.decode() if isinstance(found, bytes) else str(found)
            if found not in (kind, "none"):
                raise LogError(f"session {self.session!r} in Redis: {key} holds a {found}, not a {kind}")
        meta = await self.client.hgetall(self._keys[1])
        if not meta:
            if await self.client.exists(self.stream):
                raise LogError(f"session {self.session!r} in Redis has events but no header ({self.meta} is gone)")
            raise LogError(f"no session {self.session!r} under prefix {self.prefix!r} in Redis")
        try:
            header = SessionStart(v=int(_field(meta, b"v")), session=self.session, ts=float(_field(meta, b"ts")))
        except ValueError:
            raise LogError(f"session {self.session!r} in Redis has a damaged header: {meta!r}") from None
        if not math.isfinite(header.ts):
            raise LogError(f"session {self.session!r} in Redis has a damaged header: its ts {header.ts} is no time")
        if header.v != LOG_VERSION:
            raise LogError(
                f"session {self.session!r} in Redis has session log version {header.v};"
                f" this reader knows version {LOG_VERSION}"
            )
        return header

    async def read(self, report: ReadReport | None = None) -> AsyncIterator[AnyEvent]:
        """The session's events, decoded as ``LogReader`` decodes a file's:
        a bad entry is skipped and counted in ``report``, never raised."""
        report = report if report is not None else ReadReport()
        report.session = (await self.header()).session
        async for _, event in self._decoded(report):
            yield event

    async def _decoded(self, report: ReadReport) -> AsyncIterator[tuple[bytes, AnyEvent]]:
        """Each entry that decodes as ``LogReader`` decodes a file's line, as
        (its line, its event); the others are skipped and counted in
        ``report``, numbered as lines of the exported log (the header is
        line 1). ``read`` and ``export`` both go through here, so a file
        ``export`` wrote reads back as ``read`` reads the stream."""
        decoder = event_decoder({})
        number = 1
        report.lines = 1
        last = 0
        async for _, line in self.entries():
            number += 1
            report.lines = number
            if too_deep(line):
                report._skip(number, "too-deep", f"nested deeper than {MAX_NESTING} levels")
                continue
            try:
                event = decoder.decode(line)
            except msgspec.ValidationError as exc:
                mistyped = report._refused(number, line, decoder, exc)
                if mistyped is None:
                    continue
                event = mistyped
            except msgspec.DecodeError as exc:
                report._skip(number, "invalid-json", str(exc))
                continue
            if isinstance(event, SessionStart):
                report._skip(number, "schema", "a session/start header among the events")
                continue
            if type(event) is AgentStatus and event.parent is not None and event.agent is not None:
                event.agent.parent_id = event.agent.parent_id or event.parent
            report.events += 1
            if event.seq != last + 1 and event.seq:
                report._gap(last, event.seq)
            last = event.seq or last
            yield line, event

    async def export(self, path: str | os.PathLike[str]) -> ReadReport:
        """Write the session as a normal session log at ``path`` (created
        0600, never overwritten); returns what was read, as ``read`` reports
        it: ``events`` were written, the entries skipped (that do not decode,
        so that a reader of the file would skip them too) are counted by
        reason. An entry that decodes with a newline in it (JSON whitespace)
        is written on one line. An export that fails part-way (Redis lost, a
        full disk) removes what it wrote, so a file at ``path`` is always the
        whole session."""
        header = await self.header()
        report = ReadReport()
        report.session = header.session
        buffer = bytearray()
        encode_line(header, buffer)
        target = Path(path)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        done = False
        try:
            os.write(fd, bytes(buffer) + b"\n")
            chunk = bytearray()
            async for line, _ in self._decoded(report):
                chunk += line.replace(b"\n", b" ")
                chunk.append(10)
                if len(chunk) >= 1 << 16:
                    _write_all(fd, chunk)
                    chunk.clear()
            _write_all(fd, chunk)
            done = True
        finally:
            os.close(fd)
            if not done:
                target.unlink(missing_ok=True)
        return report


def _write_all(fd: int, data: bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def stream_entry(row: Any) -> tuple[str, bytes]:
    """A stream entry as ``XRANGE`` returns it, to a client or from a
    script, as (entry id, line)."""
    return _entry(row)


def _entry(row: Any) -> tuple[str, bytes]:
    """A stream entry as XRANGE returns it (id, fields as a dict, or as a
    flat list from a script) -> (id, line)."""
    entry_id, fields = row
    if isinstance(fields, list):
        fields = dict(zip(fields[::2], fields[1::2], strict=True))
    return (entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)), _field(fields or {}, b"line")


def _field(fields: dict[Any, Any], name: bytes) -> bytes:
    """A field of an entry or hash as bytes (clients made with
    ``decode_responses=True`` give str); empty when it is missing, which
    the decoder then counts as a bad line."""
    value = fields.get(name, fields.get(name.decode(), b""))
    return value.encode() if isinstance(value, str) else bytes(value)
