"""Running the server: checks before binding, Hypercorn on the chosen anyio
backend, and a graceful stop on SIGTERM/SIGINT.

Hypercorn serves the application on asyncio or trio alike (the application
is anyio code), binds TCP or a Unix socket, and on shutdown stops accepting,
lets in-flight requests finish (up to ``--graceful-timeout``), then runs the
application's lifespan shutdown, which closes every session log.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import ipaddress
import logging
import os
import resource
import signal
import socket
import stat
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from hypercorn.config import Config as HypercornConfig
from hypercorn.config import Sockets
from prometheus_client import disable_created_metrics

from bus import NotRegularFileError, open_regular
from bus.redis_log import check_redis_url, env_password, is_redis, redact_url, redis_client
from guard._text import error_text
from guard.adapters.claude_hooks import default_state_dir
from guard.config import Config, apply_environment, load_config, shadowed
from guard.server._accept import OutOfFilesLog, listener
from guard.server.app import create_app
from guard.server.sessions import FileSessionStore, SessionStore, StoreError

if TYPE_CHECKING:
    from guard.telemetry.otel import GuardTelemetry

__all__ = [
    "REDIS_TIMEOUT",
    "Hypercorn",
    "ServeError",
    "allowed_hosts",
    "hypercorn_config",
    "is_loopback",
    "raise_open_files_limit",
    "read_token",
    "run",
    "serve_app",
]

EXIT_OK = 0
EXIT_ERROR = 2

REDIS_TIMEOUT = 5.0
"""Seconds a Redis connect or command may take before the request fails
(503): a Redis that stopped answering never holds a request longer."""

_LOW_OPEN_FILES = 256
_LAST_WRITES = 0.5
"""Seconds a stopping server gives answers already computed to reach their clients."""


class ServeError(Exception):
    """The server cannot start as asked; the message says why."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


TOKEN_FILE_MAX = 4096
"""Bytes a token file may have: a token is one line, never a large file."""


def read_token(path: str) -> str:
    """The bearer token in ``path``: a regular file of at most
    ``TOKEN_FILE_MAX`` bytes, readable by its owner only (a FIFO or a device
    is refused before a byte is read, so startup never hangs on one)."""
    try:
        fd = open_regular(path, what="token file")
    except OSError as exc:
        raise ServeError(str(exc) if isinstance(exc, NotRegularFileError) else f"token file {path!r}: {exc}") from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if info.st_size > TOKEN_FILE_MAX:
            raise ServeError(f"token file {path!r} has {info.st_size} bytes; a token file has at most {TOKEN_FILE_MAX}")
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ServeError(
                f"token file {path!r} is readable by others (mode {stat.S_IMODE(info.st_mode):o}): chmod 600 it"
            )
        try:
            text = file.read(TOKEN_FILE_MAX + 1).decode("utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ServeError(f"token file {path!r}: {exc}") from None
    if not text or any(c.isspace() for c in text):
        raise ServeError(f"token file {path!r} must hold one token: no whitespace inside, not empty")
    if not text.isascii() or not text.isprintable():
        # HTTP headers are read as Latin-1: a client sending the token in UTF-8 could never match it
        raise ServeError(f"token file {path!r} must hold printable ASCII only (a header carries the token)")
    return text


def allowed_hosts(host: str, names: list[str]) -> frozenset[str] | None:
    """The ``Host`` names a server bound to ``host`` answers to: for a
    loopback address, the loopback names and ``names``; for another
    address, it and ``names``; for a wildcard (``0.0.0.0``, ``::``), any
    name unless ``names`` are given (such a server needs a token anyway)."""
    bare = host.strip("[]").lower()
    given = {name.strip("[]").lower() for name in names}
    if is_loopback(bare):
        return frozenset({bare, "localhost", "127.0.0.1", "::1", *given} - {""}) | _bracketed(given | {bare, "::1"})
    if bare in ("0.0.0.0", "::", ""):
        return (frozenset(given) | _bracketed(given)) if given else None
    return frozenset({bare, *given}) | _bracketed(given | {bare})


def _bracketed(names: set[str]) -> frozenset[str]:
    return frozenset(f"[{name}]" for name in names if ":" in name)


def raise_open_files_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit; the
    limit now. Session logs are open only while written, so the limit
    bounds concurrent connections, not sessions."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return soft


KEEP_ALIVE_SECONDS = 75.0
"""How long the server keeps an idle connection open. Longer than HTTP
clients keep theirs in a pool (httpx 5 s, Node 4-5 s): when the server closes
first, a request a client sends on the connection at that moment fails with a
reset instead of being answered. With Hypercorn's default, 5 s, exactly
httpx's, a server paused for 5 s under load closes connections that already
hold a request."""


BACKLOG = 4096
"""Connections the kernel queues before the server accepts them (clamped to
``net.core.somaxconn``). Hypercorn's 100 overflows when hooks of many agents
start at once, or during a pause of the server: each connection refused is
retried by the client's kernel a second or more later."""


def hypercorn_config(bind: str, *, graceful_timeout: float = 30.0) -> Hypercorn:
    """Hypercorn's settings for the server: one ``bind`` (``HOST:PORT`` or
    ``unix:PATH``, the socket made 0600), no access log, no ``server`` header,
    idle connections kept for ``KEEP_ALIVE_SECONDS``, and a listen queue of
    ``BACKLOG``."""
    config = Hypercorn()
    config.bind = [bind]
    config.graceful_timeout = graceful_timeout
    config.keep_alive_timeout = KEEP_ALIVE_SECONDS
    config.backlog = BACKLOG
    config.accesslog = None
    config.loglevel = "WARNING"
    config.include_server_header = False
    return config


class Hypercorn(HypercornConfig):
    """Hypercorn's config, binding up front: ``listen`` binds and listens
    before anything else starts (a port in use is a plain ``OSError``, the
    address is known, and connections wait in the backlog until the server
    accepts), and the server then serves on that socket."""

    _sockets: Sockets | None = None

    def listen(self, backend: str) -> str:
        """Bind and listen for serving on ``backend``; returns where
        (``http://HOST:PORT`` or ``unix:PATH``). On asyncio the socket pauses
        its accepts when files run out (``guard.server._accept``); trio takes
        only a plain socket and paces its own retries."""
        sock = _bind(self.bind[0], self.backlog)
        if backend == "asyncio":
            sock = listener(sock)
        sock.setblocking(False)
        self._sockets = Sockets(secure_sockets=[], insecure_sockets=[sock], quic_sockets=[])
        return _where(sock)

    def create_sockets(self) -> Sockets:
        assert self._sockets is not None, "listen() before serving"
        return self._sockets


def _bind(bind: str, backlog: int) -> socket.socket:
    if not bind.startswith("unix:"):
        host, _, port = bind.rpartition(":")
        host = host.strip("[]")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, int(port)), family=family, backlog=backlog)
        # Answers go out in more than one write: without this, Nagle's
        # algorithm and delayed ACKs add 40 ms to every request.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    path = bind[len("unix:") :]
    if Path(path).is_socket():
        with socket.socket(socket.AF_UNIX) as probe:
            if probe.connect_ex(path) == 0:
                raise OSError(errno.EADDRINUSE, "a server is listening on it")
        os.unlink(path)  # left behind by a server that died
    elif os.path.lexists(path):
        raise OSError(errno.EEXIST, "something that is no socket is there (left as it is)")
    sock = socket.socket(socket.AF_UNIX)
    umask = os.umask(0o177)  # a socket only its owner may connect to
    try:
        sock.bind(path)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    finally:
        os.umask(umask)
    return sock


def _where(sock: socket.socket) -> str:
    address = sock.getsockname()
    if isinstance(address, str):
        return f"unix:{address}"
    host, port = address[0], address[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def run(args: argparse.Namespace) -> int:
    """The ``serve`` command: returns the exit code."""
    try:
        return _run(args)
    except ServeError as exc:
        print(f"repeat-tool-guard serve: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _store(args: argparse.Namespace, state_dir: Path, config: Config | None) -> SessionStore:
    options = {"idle_seconds": args.idle_timeout, "max_sessions": args.max_sessions}
    if args.redis is None:
        if args.redis_ttl or args.redis_maxlen:
            raise ServeError("--redis-ttl and --redis-maxlen bound a fleet's Redis: they need --redis")
        return FileSessionStore(state_dir, config, **options)
    if args.backend != "asyncio":
        raise ServeError("--redis runs on asyncio only (the Redis client has no trio support)")
    if not is_redis(args.redis):
        raise ServeError(f"--redis {redact_url(args.redis)}: must be a redis://, rediss:// or unix:// URL")
    try:
        check_redis_url(args.redis)
    except ValueError as exc:
        raise ServeError(f"--redis {redact_url(args.redis)}: {exc}") from None
    from guard.server.redis_store import RedisSessionStore

    _check_redis(args.redis, args.redis_prefix, args.redis_ttl)
    client = redis_client(args.redis, timeout=REDIS_TIMEOUT)
    return RedisSessionStore(
        client, config, prefix=args.redis_prefix, ttl=args.redis_ttl, maxlen=args.redis_maxlen, **options
    )


_REDIS_CHECK_SECONDS = 1.0


def _check_redis(url: str, prefix: str, ttl: int = 0) -> None:
    """Refuse to start on what waiting cannot mend (a wrong password or user,
    a database Redis does not have, a user the ACL does not let run scripts
    or touch the fleet's keys): every request would get a 503. A Redis that
    does not answer yet, or is out of memory, is only warned of: requests
    get 503 until it can, and ``/healthz`` says so. So is one that evicts
    the fleet's keys when full (``_evicts``)."""
    from redis import Redis
    from redis.exceptions import AuthenticationError, NoPermissionError, RedisError, ResponseError

    from guard.server.redis_store import PROBE_SCRIPT, probe_key

    client = Redis.from_url(
        url,
        socket_timeout=_REDIS_CHECK_SECONDS,
        socket_connect_timeout=_REDIS_CHECK_SECONDS,
        password=env_password(url),
    )
    try:
        client.ping()
        client.register_script(PROBE_SCRIPT)(keys=[probe_key(prefix)])
    except (AuthenticationError, NoPermissionError) as exc:
        raise ServeError(f"--redis {redact_url(url)}: Redis refused it: {error_text(exc)}") from None
    except ResponseError as exc:
        if not _transient(exc):
            raise ServeError(f"--redis {redact_url(url)}: Redis refused it: {error_text(exc)}") from None
        _warn_redis(url, exc, "cannot record events yet", "it can")
    except RedisError as exc:
        _warn_redis(url, exc, "does not answer yet", "it does")
    else:
        _warn_if_skewed(client, url)
        policy = _evicts(client, ttl)
        if policy is not None:
            print(
                f"repeat-tool-guard serve: warning: Redis at {redact_url(url)} evicts keys when full"
                f" (maxmemory-policy {policy}): a session whose keys it evicts starts over, its loops"
                " uncounted, and nothing says so; use noeviction, and --redis-ttl to bound what is kept",
                file=sys.stderr,
                flush=True,
            )
    finally:
        client.close()


CLOCK_SKEW_WARNED = 1.0
"""Seconds this machine's clock may differ from Redis's before ``serve --redis`` warns."""


def _warn_if_skewed(client: Any, url: str) -> None:
    """Warn when this machine's clock is off Redis's (``TIME``, read halfway
    through its round trip) by more than ``CLOCK_SKEW_WARNED``: a session's
    events are stamped by whichever replica answers them, and ``loops`` reads
    the time between them, so a replica ahead or behind makes a patient poll
    look like a fast repeat (denied) or a fast loop look patient."""
    from redis.exceptions import RedisError

    try:
        sent = time.time()
        seconds, micros = client.time()
        off = (sent + time.time()) / 2 - (seconds + micros / 1e6)
    except RedisError:
        return
    if abs(off) > CLOCK_SKEW_WARNED:
        print(
            f"repeat-tool-guard serve: warning: this machine's clock is {abs(off):.1f} s"
            f" {'ahead of' if off > 0 else 'behind'} Redis's at {redact_url(url)}: replicas stamp the events they"
            " answer, so clocks that disagree make a patient poll look like a fast repeat; keep every replica's"
            " clock in step (NTP)",
            file=sys.stderr,
            flush=True,
        )


def _evicts(client: Any, ttl: int) -> str | None:
    """Redis's ``maxmemory-policy`` when it may evict the fleet's keys
    (``allkeys-*``; ``volatile-*`` once keys expire, ``--redis-ttl``), else
    ``None``; also ``None`` when the user may not read the setting."""
    from redis.exceptions import RedisError

    try:
        policy = client.config_get("maxmemory-policy").get("maxmemory-policy", "")
    except RedisError:
        return None
    if policy.startswith("allkeys-") or (ttl and policy.startswith("volatile-")):
        return str(policy)
    return None


def _transient(exc: Exception) -> bool:
    """Whether a Redis error reply may pass by itself (out of memory, still
    loading its data, a replica not in sync), rather than refuse every request."""
    from redis.exceptions import BusyLoadingError, MasterDownError, OutOfMemoryError, ReadOnlyError, TryAgainError

    transient = (OutOfMemoryError, BusyLoadingError, ReadOnlyError, MasterDownError, TryAgainError)
    return isinstance(exc, transient) or str(exc).startswith("BUSY")  # a script running: no class of its own


def _warn_redis(url: str, exc: Exception, state: str, until: str) -> None:
    print(
        f"repeat-tool-guard serve: warning: Redis at {redact_url(url)} {state} ({error_text(exc)});"
        f" requests get 503 until {until}",
        file=sys.stderr,
        flush=True,
    )


def _telemetry() -> GuardTelemetry | None:
    """Export as the ``OTEL_*`` variables ask; a request that cannot be met is a usage error."""
    from guard.telemetry import TelemetryUnavailable, telemetry_from_environment

    try:
        return telemetry_from_environment(runtime="serve")
    except TelemetryUnavailable as exc:
        raise ServeError(str(exc)) from None


def _run(args: argparse.Namespace) -> int:
    disable_created_metrics()  # type: ignore[no-untyped-call]  # one series per counter, not two
    # asyncio warns once per write to a connection its client closed: a
    # client that hung up on pipelined requests would flood stderr.
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    config = apply_environment(load_config(args.config) if args.config else Config())
    if getattr(args, "shadow", False):
        config = shadowed(config)
    token = read_token(args.token_file) if args.token_file else None
    if args.uds is None and not is_loopback(args.host) and token is None:
        raise ServeError(
            f"--host {args.host} is not a loopback address: give --token-file so clients must authenticate"
        )
    if not 0 <= args.port <= 65535:
        raise ServeError(f"--port {args.port}: must be 0-65535")
    try:
        state_dir = Path(args.state_dir) if args.state_dir else default_state_dir() / "serve"
    except ValueError as exc:
        raise ServeError(str(exc)) from None
    telemetry = _telemetry()
    open_files = raise_open_files_limit()
    if open_files < _LOW_OPEN_FILES:
        print(
            f"repeat-tool-guard serve: warning: only {open_files} open files allowed (ulimit -n): "
            "that bounds concurrent connections",
            file=sys.stderr,
            flush=True,
        )
    hosts = None if args.uds else allowed_hosts(args.host, args.allow_host)
    try:
        store = _store(args, state_dir, config)
        app = create_app(
            store,
            token=token,
            max_body=args.max_body,
            allowed_hosts=hosts,
            allowed_origins=args.allow_origin,
            body_timeout=args.body_timeout,
            telemetry=telemetry,
            max_live_pages=args.max_live_pages,
            disconnects_queued=args.backend == "asyncio",  # Hypercorn's asyncio queue: one look will do
        )
    except ValueError as exc:
        raise ServeError(str(exc)) from None
    if not args.graceful_timeout >= 0:
        raise ServeError(f"--graceful-timeout {args.graceful_timeout}: must be >= 0")
    held = contextlib.ExitStack()  # the state dir's lock, when sessions live there
    if isinstance(store, FileSessionStore):
        try:
            store.claim()
        except StoreError as exc:
            raise ServeError(str(exc)) from None
        held.callback(store.release)
    sessions_at = f"state dir {state_dir}" if args.redis is None else f"sessions in {redact_url(args.redis)}"
    bind = (
        f"unix:{args.uds}"
        if args.uds
        else f"[{args.host}]:{args.port}"
        if ":" in args.host
        else f"{args.host}:{args.port}"
    )

    hypercorn = hypercorn_config(bind, graceful_timeout=args.graceful_timeout)
    try:
        where = hypercorn.listen(args.backend)
    except OSError as exc:
        held.close()
        raise ServeError(f"cannot listen on {bind}: {exc.strerror or exc}") from None

    def ready() -> None:
        print(
            f"repeat-tool-guard serve: listening on {where} ({sessions_at}, "
            f"{'bearer token required' if token else 'no token'}, {args.backend}"
            f"{', OpenTelemetry export on' if telemetry is not None else ''})",
            file=sys.stderr,
            flush=True,
        )

    out_of_files = OutOfFilesLog(open_files)
    loggers = [logging.getLogger(name) for name in ("asyncio", "trio.serve_listeners")]
    for logger in loggers:
        logger.addFilter(out_of_files)
    try:
        anyio.run(_serve, app, hypercorn, args.backend, ready, backend=args.backend)
    finally:
        for logger in loggers:
            logger.removeFilter(out_of_files)
        if args.uds:
            Path(args.uds).unlink(missing_ok=True)  # the server may have removed it already
        held.close()
    print("repeat-tool-guard serve: stopped; every session log is closed", file=sys.stderr, flush=True)
    return EXIT_OK


async def _serve(app: Any, hypercorn: HypercornConfig, backend: str, ready: Callable[[], None]) -> None:
    # The server says it is listening only once the signal receiver is open,
    # so a SIGTERM right after that line still shuts down gracefully.
    stop = anyio.Event()
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        ready()

        async def until_signal() -> None:
            signum = await anext(signals)
            print(
                f"repeat-tool-guard serve: {signal.Signals(signum).name}: finishing in-flight requests",
                file=sys.stderr,
                flush=True,
            )
            stop.set()
            app.state.live.close()  # open live pages would otherwise hold the graceful stop

        async def answered() -> None:
            # Hypercorn would wait out its whole graceful timeout for a
            # connection whose client hung up on pipelined requests: once no
            # request is in flight, nothing is left to finish, so the
            # connections left get only a moment before they are closed.
            await stop.wait()
            with anyio.move_on_after(hypercorn.graceful_timeout):
                while app.state.in_flight():
                    await anyio.sleep(0.05)
            hypercorn.graceful_timeout = min(hypercorn.graceful_timeout, _LAST_WRITES)
            logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # the closed connections' noise

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(until_signal)
            await serve_app(app, hypercorn, backend, shutdown_trigger=answered)
            tasks.cancel_scope.cancel()


async def serve_app(
    app: Any, hypercorn: HypercornConfig, backend: str, *, shutdown_trigger: Callable[[], Awaitable[Any]]
) -> None:
    """Serve ``app`` with Hypercorn on the running ``backend`` ("asyncio" or
    "trio") until ``shutdown_trigger`` returns, then shut down gracefully."""
    _close_connections_their_clients_closed()
    if backend == "trio":
        from hypercorn.trio import serve as serve_trio

        await serve_trio(app, hypercorn, shutdown_trigger=shutdown_trigger)
    else:
        from hypercorn.asyncio import serve as serve_asyncio

        await serve_asyncio(app, hypercorn, shutdown_trigger=shutdown_trigger)


def _close_connections_their_clients_closed() -> None:
    """Make Hypercorn close a connection as soon as its client closes it
    between requests. Hypercorn (0.17, 0.18) reads the client's end of an
    idle HTTP/1.1 connection and does nothing until its keep-alive timeout
    (``KEEP_ALIVE_SECONDS``) ends, holding the socket in CLOSE-WAIT meanwhile:
    a curl hook per tool call (how Codex and Gemini CLI reach the server)
    leaves one file descriptor behind each, and a busy server runs out of
    them. Here a connection with no request in flight is closed when its
    client's end is read (one that half-closed after sending a request
    still gets its answer); patched once per process, on Hypercorn's own
    class, since it offers no setting for it."""
    import h11
    from hypercorn.events import Closed
    from hypercorn.protocol.h11 import H11Protocol

    handle = H11Protocol.handle
    if getattr(handle, "closes_when_client_closed", False):
        return
    _ANSWERED = (h11.IDLE, h11.DONE, h11.MUST_CLOSE, h11.CLOSED)  # the client's end read after an answer

    async def closing_handle(self: H11Protocol, event: Any) -> None:
        idle = self.connection.our_state in _ANSWERED  # nothing left to answer
        await handle(self, event)
        if isinstance(event, Closed) and idle and not getattr(self, "_closed_by_client", False):
            self._closed_by_client = True  # type: ignore[attr-defined]  # once: the close reports back as Closed
            await self.send(Closed())

    closing_handle.closes_when_client_closed = True  # type: ignore[attr-defined]
    H11Protocol.handle = closing_handle  # type: ignore[method-assign]
