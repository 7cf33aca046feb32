"""Running out of open files while accepting connections: one line now and
then, never a flood.

A burst of connections past ``ulimit -n`` makes ``accept()`` fail with
EMFILE until some connection closes. asyncio's accept loop (CPython 3.11)
goes on calling ``accept()`` within the same pass after that error, logging
it with a traceback and scheduling a retry each time, so one burst logged
thousands of tracebacks a second and its retries multiplied; trio logs each
failure with a traceback and retries every 0.1 s. The listening socket here
answers "nothing waiting" after a failure until asyncio's own retry, and the
two event loops' reports of it become one line at most every
``QUIET_SECONDS``, saying how many accepts failed since the last.
"""

from __future__ import annotations

import errno
import logging
import math
import socket
import time

__all__ = ["QUIET_SECONDS", "Listener", "OutOfFilesLog", "listener"]

_CAPACITY = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_PAUSE = 0.5  # under asyncio's retry delay (1 s), so its retry accepts for real

_ACCEPTS = ("socket.accept() out of system resource", "accept returned")  # asyncio's message, trio's

QUIET_SECONDS = 10.0
"""The shortest time between two reports of accepts failing for want of files."""


class Listener(socket.socket):
    """A listening socket whose ``accept()``, after failing for want of open
    files, says nothing is waiting for ``_PAUSE`` seconds instead of failing
    again: the connections stay in the backlog until files are free."""

    _failed_at = -math.inf

    def accept(self) -> tuple[socket.socket, object]:
        if time.monotonic() - self._failed_at < _PAUSE:
            raise BlockingIOError(errno.EAGAIN, "accepting paused: out of open files")
        try:
            return super().accept()
        except OSError as exc:
            if exc.errno in _CAPACITY:
                self._failed_at = time.monotonic()
            raise


def listener(sock: socket.socket) -> Listener:
    """The listening socket ``sock`` as a ``Listener`` (the same socket;
    ``sock`` is detached from it)."""
    return Listener(sock.family, sock.type, sock.proto, fileno=sock.detach())


class OutOfFilesLog(logging.Filter):
    """Installed on the ``asyncio`` and ``trio.serve_listeners`` loggers:
    their records of an accept that failed for want of files become one line
    without a traceback, at most one every ``QUIET_SECONDS``; the others are
    dropped and counted. Every other record passes unchanged."""

    def __init__(self, open_files: int) -> None:
        super().__init__()
        self._open_files = open_files
        self._said_at = -math.inf
        self._failures = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, OSError) or exc.errno not in _CAPACITY or not str(record.msg).startswith(_ACCEPTS):
            return True
        self._failures += 1
        now = time.monotonic()
        if now - self._said_at < QUIET_SECONDS:
            return False
        self._said_at = now
        record.msg = (
            f"repeat-tool-guard serve: out of open files ({exc.strerror}; ulimit -n {self._open_files}): "
            f"new connections wait until others close ({self._failures} accepts failed since the last report)"
        )
        record.args = ()
        record.exc_info = None
        record.exc_text = None
        self._failures = 0
        return True
