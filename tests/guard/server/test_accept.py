"""Accepting connections with no open files left: the socket pauses, the
event loops' reports become one line now and then."""

from __future__ import annotations

import errno
import logging
import os
import resource
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from guard.server._accept import OutOfFilesLog, listener


@contextmanager
def _no_files_left() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest_free = os.dup(0)  # the number the next file would get: the limit is on numbers
    os.close(lowest_free)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_an_accept_that_ran_out_of_files_pauses_the_next_ones() -> None:
    with listener(socket.create_server(("127.0.0.1", 0))) as sock:
        waiting = socket.create_connection(sock.getsockname())
        with _no_files_left():
            with pytest.raises(OSError, match="Too many open files") as failed:
                sock.accept()
            assert failed.value.errno == errno.EMFILE
            with pytest.raises(BlockingIOError):
                sock.accept()  # what asyncio's accept loop tries next in the same pass
        time.sleep(0.6)
        accepted, _ = sock.accept()  # its retry a second later: the connection waited in the backlog
        accepted.close()
        waiting.close()


def _record(exc: BaseException | None, message: str = "socket.accept() out of system resource") -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, message + "%s", ("",), exc_info)


def test_running_out_of_files_is_said_in_one_line_now_and_then() -> None:
    log = OutOfFilesLog(64)
    first = _record(OSError(errno.EMFILE, "Too many open files"))
    assert log.filter(first)
    assert first.getMessage() == (
        "repeat-tool-guard serve: out of open files (Too many open files; ulimit -n 64): "
        "new connections wait until others close (1 accepts failed since the last report)"
    )
    assert first.exc_info is None
    assert not log.filter(_record(OSError(errno.EMFILE, "Too many open files")))  # within QUIET_SECONDS


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (None, "socket.accept() out of system resource"),
        (OSError(errno.ECONNRESET, "reset"), "socket.accept() out of system resource"),
        (ValueError("x"), "socket.accept() out of system resource"),
        (OSError(errno.EMFILE, "Too many open files"), "Task exception was never retrieved"),  # not an accept
    ],
)
def test_other_records_pass_unchanged(exc: BaseException | None, message: str) -> None:
    record = _record(exc, message)
    assert OutOfFilesLog(64).filter(record)
    assert record.getMessage() == message
    assert record.exc_info == ((type(exc), exc, None) if exc is not None else None)
