"""The command line's fleet side: ``export``, ``watch``, and Redis-held
sessions wherever a session log is read (``replay``, ``audit``).

Imported only for those uses, so the hook and file-only commands never load
the Redis client.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import msgspec
from redis.exceptions import RedisError, ResponseError

from bus.reader import LogError
from bus.redis_log import DEFAULT_PREFIX, RedisSessionLog, check_redis_url, is_redis, redact_url, redis_client
from guard._text import terminal_text
from guard.redact import Redactor
from guard.sessions.fleet import FleetAction

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["export", "local_logs", "watch"]


_TIMEOUT = 30.0
"""Seconds a command waits on Redis before it says so (``watch`` blocks 1 s a read)."""


def _client(url: str) -> Redis:
    try:
        check_redis_url(url)
        return redis_client(url, timeout=_TIMEOUT)
    except ValueError as exc:
        raise LogError(f"not a usable Redis URL {redact_url(url)!r}: {exc}") from None


async def _sessions(client: Redis, prefix: str, session: str | None) -> list[str]:
    if session is not None:
        return [session]
    names = await client.zrange(f"{prefix}:sessions", 0, -1)
    return [n.decode() if isinstance(n, bytes) else str(n) for n in names]


async def _export_all(url: str, prefix: str, session: str | None, folder: Path) -> list[Path]:
    client = _client(url)
    try:
        paths = []
        for name in await _sessions(client, prefix, session):
            path = folder / f"{''.join(c if c.isalnum() or c in '-_.' else '_' for c in name)}.jsonl"
            try:
                await RedisSessionLog(client, name, prefix=prefix).export(path)
            except (LogError, ResponseError) as exc:
                if session is not None:
                    raise
                # one session listed but expired (a ttl) or damaged: the others are still read
                print(f"repeat-tool-guard: skipped session {name!r} of {redact_url(url)}: {exc}", file=sys.stderr)
                continue
            paths.append(path)
        return paths
    except (RedisError, OSError) as exc:
        raise LogError(f"cannot read Redis at {redact_url(url)}: {exc}") from None
    finally:
        await client.aclose()


@contextlib.contextmanager
def local_logs(source: str, session: str | None, prefix: str = DEFAULT_PREFIX) -> Iterator[list[Path]]:
    """The session logs ``source`` names, as files for the duration: a path
    as itself; a Redis URL as an export of ``session`` (or of every session
    when ``None``) into a private temporary folder, removed afterwards."""
    if not is_redis(source):
        yield [Path(source)]
        return
    with tempfile.TemporaryDirectory(prefix="rtg-export-") as folder:
        yield anyio.run(_export_all, source, prefix, session, Path(folder))


def export(args: argparse.Namespace) -> int:
    """``repeat-tool-guard export``."""
    if not is_redis(args.source):
        raise LogError(f"export reads a Redis URL (redis://HOST:PORT/DB), not {args.source!r}")

    async def run() -> int:
        client = _client(args.source)
        try:
            return await RedisSessionLog(client, args.session, prefix=args.prefix).export(args.output)
        except (RedisError, OSError) as exc:
            raise LogError(f"cannot export session {args.session!r} from {redact_url(args.source)}: {exc}") from None
        finally:
            await client.aclose()

    count = anyio.run(run)
    print(f"{args.output}: session {args.session}: {count} events", file=sys.stderr)
    return 0


def _print_action(action: FleetAction, out: TextIO, as_json: bool, redact: Redactor) -> None:
    """One action as ``watch`` prints it: a line, or its JSON; its text
    redacted either way (it quotes the call's arguments)."""
    action = msgspec.structs.replace(action, text=redact(action.text))
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
                    except msgspec.DecodeError:
                        print(f"watch: skipped an unreadable action entry {entry_id!r}", file=sys.stderr)
                    await client.xack(stream, group, entry_id)
                    seen += 1
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
    try:
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(_watch, args, sys.stdout)
    except RedisError as exc:
        raise LogError(f"cannot watch {redact_url(args.source)}: {exc}") from None
    return 0
