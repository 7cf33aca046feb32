"""The command line's fleet side: ``export``, ``watch``, and Redis-held
sessions wherever a session log is read (``replay``, ``audit``).

Imported only for those uses, so the hook and file-only commands never load
the Redis client.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import msgspec
from redis.exceptions import RedisError, ResponseError

from bus.reader import LogError, ReadReport
from bus.redis_log import DEFAULT_PREFIX, RedisSessionLog, is_redis, redact_url, redis_client
from guard._text import one_line, terminal_text
from guard.redact import Redactor
from guard.sessions.fleet import FleetAction

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["Exported", "Unreadable", "export", "local_logs", "watch"]


_TIMEOUT = 30.0
"""Seconds a command waits on Redis before it says so (``watch`` blocks 1 s a read)."""


def _client(url: str) -> Redis:
    try:
        return redis_client(url, timeout=_TIMEOUT)
    except ValueError as exc:
        raise LogError(str(exc)) from None


async def _sessions(client: Redis, prefix: str, session: str | None) -> list[str]:
    """The sessions to read: ``session``, or every one the fleet's index
    lists. A member that is not UTF-8 (the fleet writes none; a hand-made
    one) is taken with its odd bytes escaped, so it is named, not fatal."""
    if session is not None:
        return [session]
    names = await client.zrange(f"{prefix}:sessions", 0, -1)
    return [n.decode("utf-8", "backslashreplace") if isinstance(n, bytes) else str(n) for n in names]


def _file_name(session: str) -> str:
    """A file name for ``session``'s export, unique to it among any ids and
    at most about 120 bytes: its id with every character other than
    letters, digits, ``-``, ``_`` and ``.`` made ``_`` and cut to 100,
    then a hash of the whole id (``a/b`` and ``a_b`` clean up alike)."""
    readable = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in session[:100])
    digest = hashlib.blake2b(session.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"{readable}-{digest}.jsonl"


Unreadable = Callable[[str, str], None]
"""Told ``(which session of which URL, why)`` for each session of a fleet
that could not be read."""

Exported = Callable[[Path, str, ReadReport], None]
"""Told ``(the file, the session it holds as URL#id, what reading it took
and skipped)`` for each session of a fleet exported to a file."""


def _skipped(where: str, reason: str) -> None:
    print(f"repeat-tool-guard: skipped {where}: {reason}", file=sys.stderr)


async def _export_all(
    url: str, prefix: str, session: str | None, folder: Path, on_unreadable: Unreadable, on_exported: Exported | None
) -> list[Path]:
    client = _client(url)
    try:
        paths = []
        for name in await _sessions(client, prefix, session):
            path = folder / _file_name(name)
            log = RedisSessionLog(client, name, prefix=prefix)
            try:
                report = await log.export(path)
            except (LogError, ResponseError, OSError) as exc:
                if session is not None:
                    raise
                # one session listed but expired (a ttl) or damaged: the others are still read
                where = f"session {name!r} of {redact_url(url)}"
                reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
                if isinstance(exc, LogError) and not await client.exists(log.meta, log.stream):
                    _skipped(where, f"{reason} (its keys expired)")
                else:
                    on_unreadable(where, reason)
                continue
            if report.skipped:  # not in the file, so the reader of it would never hear of them
                print(f"repeat-tool-guard: session {name!r} of {redact_url(url)}: {_summary(report)}", file=sys.stderr)
            if on_exported is not None:
                on_exported(path, f"{redact_url(url)}#{name}", report)
            paths.append(path)
        return paths
    except (RedisError, OSError) as exc:
        raise LogError(f"cannot read Redis at {redact_url(url)}: {exc}") from None
    finally:
        await client.aclose()


@contextlib.contextmanager
def local_logs(
    source: str,
    session: str | None,
    prefix: str = DEFAULT_PREFIX,
    *,
    on_unreadable: Unreadable | None = None,
    on_exported: Exported | None = None,
) -> Iterator[list[Path]]:
    """The session logs ``source`` names, as files for the duration: a path
    as itself; a Redis URL as an export of ``session`` (or of every session
    when ``None``) into a private temporary folder, removed afterwards.

    Of every session, one that cannot be read (a damaged header, a key of
    the wrong type, a file that cannot be written) is left out and told to
    ``on_unreadable`` (without one, a line on stderr), naming the URL and the
    session: a caller that reports errors lists it as one. A listed session
    whose keys all expired (a ``ttl``) is only a line on stderr. ``session``
    that cannot be read is a ``LogError``. Each file written is told to
    ``on_exported`` with the session it holds and what its export skipped
    (which the file cannot say)."""
    if not is_redis(source):
        yield [Path(source)]
        return
    with tempfile.TemporaryDirectory(prefix="rtg-export-") as folder:
        yield anyio.run(_export_all, source, prefix, session, Path(folder), on_unreadable or _skipped, on_exported)


def _summary(report: ReadReport) -> str:
    """What an export read, as ``replay`` says it of a file, in entries:
    ``11 events, 2 entries skipped (invalid-json 1, schema 1)``."""
    return report.summary().replace(" lines skipped", " entries skipped", 1)


def export(args: argparse.Namespace) -> int:
    """``repeat-tool-guard export``: the session as a log file, and on
    stderr what was written and what was skipped, as ``replay`` says it."""
    if not is_redis(args.source):
        raise LogError(f"export reads a Redis URL (redis://HOST:PORT/DB), not {args.source!r}")

    async def run() -> ReadReport:
        client = _client(args.source)
        try:
            return await RedisSessionLog(client, args.session, prefix=args.prefix).export(args.output)
        except (RedisError, OSError) as exc:
            raise LogError(f"cannot export session {args.session!r} from {redact_url(args.source)}: {exc}") from None
        finally:
            await client.aclose()

    report = anyio.run(run)
    print(f"{args.output}: session {args.session}: {_summary(report)}", file=sys.stderr)
    for sample in report.samples[:10]:  # the detail quotes the entry: shown escaped and cut
        print(f"  skipped entry {sample.line - 1} ({sample.reason}): {one_line(sample.detail, 300)}", file=sys.stderr)
    return 0


def _print_action(action: FleetAction, out: TextIO, as_json: bool, redact: Redactor) -> None:
    """One action as ``watch`` prints it: a line, or its JSON; its text
    (which quotes the call's arguments), its tool's name (an MCP tool's may
    carry its server's URL) and its agent's id redacted either way, as on
    the live page."""
    agent = redact(action.agent) if action.agent is not None else None
    action = msgspec.structs.replace(action, text=redact(action.text), tool=redact(action.tool), agent=agent)
    if as_json:
        out.write(msgspec.json.encode(action).decode() + "\n")
    else:
        first = action.text.splitlines()[0] if action.text else ""
        line = (
            f"{action.session}  seq {action.seq}  {action.agent or '-'}  {action.policy}/{action.action}  "
            f"{action.tool} × {action.count}  [{action.worker}]{'  (shadow)' if action.shadow else ''}  {first}"
        )
        out.write(terminal_text(line) + "\n")
    out.flush()


async def _watch(args: argparse.Namespace, out: TextIO) -> None:
    client = _client(args.source)
    stream = f"{args.prefix}:actions"
    # A group of this run's own is removed when it ends; a named one keeps its place for the next watcher.
    own_group = args.group is None
    # pid and random: in a container every run is pid 1, and must not join the group of the run before
    group = f"watch-{os.getpid()}-{os.urandom(4).hex()}" if own_group else args.group
    created = False
    try:
        if not await client.exists(stream, f"{args.prefix}:sessions"):
            print(
                f"watch: no fleet has written under the prefix {args.prefix!r} yet (is it the fleet's --prefix?); "
                "waiting for its first action",
                file=sys.stderr,
            )
        try:
            await client.xgroup_create(stream, group, id="0" if args.from_start else "$", mkstream=True)
            created = True
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise LogError(f"cannot create consumer group {group!r} on {stream}: {exc}") from None
        seen = 0
        decode = msgspec.json.Decoder(FleetAction).decode
        redact = Redactor()
        while True:  # until --count actions are printed (returns below), or interrupted
            # no more than it will print: an entry read is the group's, delivered to no other watcher
            wanted = 100 if args.count is None else min(100, args.count - seen)
            rows: Any = await client.xreadgroup(group, args.consumer, {stream: ">"}, count=wanted, block=1000)
            for _, entries in rows or []:
                for entry_id, fields in entries:
                    raw = fields.get(b"action") if isinstance(fields, dict) else None
                    try:
                        _print_action(decode(raw if isinstance(raw, bytes) else b""), out, args.json, redact)
                        seen += 1  # a skipped entry is no action: --count counts those printed
                    except msgspec.DecodeError:
                        ident = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
                        print(f"watch: skipped an unreadable action entry {ident}", file=sys.stderr)
                    await client.xack(stream, group, entry_id)
                    if args.count is not None and seen >= args.count:
                        return
    finally:
        if own_group and created:
            with anyio.CancelScope(shield=True), contextlib.suppress(RedisError, OSError):
                await client.xgroup_destroy(stream, group)
        await client.aclose()


def watch(args: argparse.Namespace) -> int:
    """``repeat-tool-guard watch``."""
    if not is_redis(args.source):
        raise LogError(f"watch follows a Redis URL (redis://HOST:PORT/DB), not {args.source!r}")
    stops = {stop: signal.signal(stop, _interrupt) for stop in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(_watch, args, sys.stdout)
    except RedisError as exc:
        raise LogError(f"cannot watch {redact_url(args.source)}: {exc}") from None
    finally:
        for stop, previous in stops.items():
            signal.signal(stop, previous)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM or SIGHUP (a service manager's stop, a closed terminal) as
    Ctrl-C: the run ends the same way, its own group removed from Redis."""
    raise KeyboardInterrupt
