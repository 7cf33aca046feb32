"""Running the server: checks before binding, Hypercorn on the chosen anyio
backend, and a graceful stop on SIGTERM/SIGINT.

Hypercorn serves the application on asyncio or trio alike (the application
is anyio code), binds TCP or a Unix socket, and on shutdown stops accepting,
lets in-flight requests finish (up to ``--graceful-timeout``), then runs the
application's lifespan shutdown, which closes every session log.
"""

from __future__ import annotations

import argparse
import fcntl
import ipaddress
import os
import signal
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import anyio
from hypercorn.config import Config as HypercornConfig
from hypercorn.config import Sockets

from guard.adapters.claude_hooks import default_state_dir
from guard.config import load_config
from guard.server.app import create_app
from guard.server.sessions import FileSessionStore

__all__ = ["ServeError", "is_loopback", "read_token", "run"]

EXIT_OK = 0
EXIT_ERROR = 2


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


def read_token(path: str) -> str:
    """The bearer token in ``path``; the file must be readable by its owner only."""
    try:
        info = os.stat(path)
        text = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ServeError(f"token file {path!r}: {exc}") from None
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ServeError(
            f"token file {path!r} is readable by others (mode {stat.S_IMODE(info.st_mode):o}): chmod 600 it"
        )
    if not text or any(c.isspace() for c in text):
        raise ServeError(f"token file {path!r} must hold one token: no whitespace inside, not empty")
    return text


def _lock_state_dir(state_dir: Path) -> IO[str]:
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = open(state_dir / "serve.lock", "a+", encoding="utf-8")  # noqa: SIM115 - held for the process's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "another process"
        lock.close()
        raise ServeError(f"state dir {str(state_dir)!r} is in use by another server (pid {holder})") from None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


class _Hypercorn(HypercornConfig):
    """Tells ``on_bound`` where the server listens once its sockets are bound
    (with ``--port 0``, the port the system picked)."""

    on_bound: Callable[[Sockets], None] = staticmethod(lambda sockets: None)

    def create_sockets(self) -> Sockets:
        sockets = super().create_sockets()
        self.on_bound(sockets)
        return sockets


def _where(sockets: Sockets) -> str:
    sock = sockets.insecure_sockets[0]
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


def _run(args: argparse.Namespace) -> int:
    config = load_config(args.config) if args.config else None
    token = read_token(args.token_file) if args.token_file else None
    if args.uds is None and not is_loopback(args.host) and token is None:
        raise ServeError(
            f"--host {args.host} is not a loopback address: give --token-file so clients must authenticate"
        )
    if not 0 <= args.port <= 65535:
        raise ServeError(f"--port {args.port}: must be 0-65535")
    state_dir = Path(args.state_dir) if args.state_dir else default_state_dir() / "serve"
    try:
        store = FileSessionStore(state_dir, config, idle_seconds=args.idle_timeout, max_sessions=args.max_sessions)
        app = create_app(store, token=token, max_body=args.max_body)
    except ValueError as exc:
        raise ServeError(str(exc)) from None
    if not args.graceful_timeout >= 0:
        raise ServeError(f"--graceful-timeout {args.graceful_timeout}: must be >= 0")
    lock = _lock_state_dir(state_dir)
    hypercorn = _Hypercorn()
    hypercorn.bind = (
        [f"unix:{args.uds}"]
        if args.uds
        else [f"[{args.host}]:{args.port}" if ":" in args.host else f"{args.host}:{args.port}"]
    )
    hypercorn.umask = 0o177  # a Unix socket only its owner may connect to
    hypercorn.graceful_timeout = args.graceful_timeout
    hypercorn.accesslog = None
    hypercorn.loglevel = "WARNING"
    hypercorn.include_server_header = False

    def announce(sockets: Sockets) -> None:
        print(
            f"repeat-tool-guard serve: listening on {_where(sockets)} (state dir {state_dir}, "
            f"{'bearer token required' if token else 'no token'}, {args.backend})",
            file=sys.stderr,
            flush=True,
        )

    hypercorn.on_bound = announce
    try:
        anyio.run(_serve, app, hypercorn, args.backend, backend=args.backend)
    except OSError as exc:
        raise ServeError(f"cannot listen on {hypercorn.bind[0]}: {exc.strerror or exc}") from None
    finally:
        lock.close()
    print("repeat-tool-guard serve: stopped; every session log is closed", file=sys.stderr, flush=True)
    return EXIT_OK


async def _serve(app: Any, hypercorn: HypercornConfig, backend: str) -> None:
    async def until_signal() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                print(
                    f"repeat-tool-guard serve: {signal.Signals(signum).name}: finishing in-flight requests",
                    file=sys.stderr,
                    flush=True,
                )
                return

    if backend == "trio":
        from hypercorn.trio import serve as serve_trio

        await serve_trio(app, hypercorn, shutdown_trigger=until_signal)
    else:
        from hypercorn.asyncio import serve as serve_asyncio

        await serve_asyncio(app, hypercorn, shutdown_trigger=until_signal)
