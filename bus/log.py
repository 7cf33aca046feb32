"""The session log writer: every event as one JSON line, flushed as it happens."""

from __future__ import annotations

import codecs
import contextlib
import errno
import fcntl
import os
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import NoReturn

import msgspec

from bus._codec import checked_time, conform, encode_line, encode_lines, header_decoder
from bus.bus import Bus
from bus.events import Event, SessionStart
from bus.files import open_regular

__all__ = ["LOG_VERSION", "LogInUseError", "LogWriteError", "SessionLog"]

LOG_VERSION = 1
_HEADER_READ = 1 << 16  # a header line is a few hundred bytes


class LogWriteError(OSError):
    """An event could not be written to a session log (a full disk, a file
    size limit, an I/O error; ``EBADF`` once the log is closed); ``errno``
    is the system's. The log holds no part of it."""

    def __init__(self, errno: int | None, message: str) -> None:
        super().__init__(errno, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class LogInUseError(BlockingIOError):
    """A session log is open for writing already, by another process or
    another ``SessionLog`` in this one: a log has one writer at a time
    (their lines would interleave). ``errno`` is ``EWOULDBLOCK``; the
    message names the log."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EWOULDBLOCK, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


# flock not supported where the file lives (NFS without a lock daemon, some
# FUSE file systems): the log is written unlocked, as before locks existed.
_NO_FLOCK = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


class SessionLog:
    """Writes a session log (JSONL) for one bus.

    The file is created with mode 0600 and a ``session/start`` header. An
    existing file is never overwritten: pass ``append=True`` to continue it,
    which writes a fresh header line marking the resumed session (on a line
    of its own, even after a line torn by a crash), unless ``mark_resume`` is
    false: a session that goes on in one short process after another (a
    command hook) keeps the one header its log began with. Each line goes to the
    file as it is written, so nothing sits in a user-space buffer;
    ``fsync=True`` also forces it to disk.

    The log must be a regular file or a character device (``/dev/null``); a
    FIFO, socket or directory raises ``NotRegularFileError``, and so does a
    symbolic link unless ``follow_symlinks=True``.

    A log has one writer at a time: a regular file is locked (``flock``)
    while it is open, and opening it again, from another process or in this
    one, raises ``LogInUseError`` (an ``OSError``, ``EWOULDBLOCK``) until
    the first writer closes it. A device (``/dev/null``) is shared; where
    the file system has no ``flock``, the log is written unlocked. Threads
    may share one log (a bus each runtime thread publishes into, under its
    own event loop): its lines are written one at a time.

    A write either lands a whole line or raises ``LogWriteError`` and leaves none:
    the part of a line a full disk accepted is cut off again, or, if even
    that fails, ended with a newline before the next line, so a failed event
    never swallows the next one. ``failures`` counts the events not written
    and ``error`` keeps the last error, for a caller that recorded through
    the bus (which logs a failing recorder and carries on).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        session: str | None = None,
        append: bool = False,
        fsync: bool = False,
        follow_symlinks: bool = False,
        mark_resume: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not os.fspath(path) or "\x00" in os.fspath(path):
            raise ValueError(f"session log path {os.fspath(path)!r}: must be a file name, without NUL")
        if session is not None and not isinstance(session, str):  # the header must read back: a reader takes a str
            raise TypeError(f"session log session id {session!r}: must be a str, not {type(session).__name__}")
        self.path = Path(path)
        self.session = session or uuid.uuid4().hex
        self.failures = 0
        self.error: LogWriteError | None = None
        self._fsync = fsync
        self._torn = False
        self._writing = threading.Lock()
        flags = os.O_CREAT | os.O_APPEND | (os.O_RDWR if append else os.O_WRONLY | os.O_EXCL)
        try:
            self._fd: int | None = open_regular(
                self.path, flags, 0o600, what="session log", follow_symlinks=follow_symlinks, devices=True
            )
        except FileExistsError:
            self._refuse_existing(follow_symlinks)
        self._lock(self._fd)
        self._buffer = bytearray()
        self._held: bytearray | None = None
        self._held_count = 0
        try:
            empty = True
            if append:
                empty = not os.fstat(self._fd).st_size
                if not empty:
                    self._check_header(self._fd)
                self._torn = self._ends_mid_line(self._fd)
            if empty or mark_resume:
                start = checked_time(clock(), "the session log's clock returned")
                self._record(SessionStart(v=LOG_VERSION, session=self.session, ts=start))
        except BaseException:
            try:
                if not append:  # the file is ours and empty: a retry must not find it "already there"
                    self.path.unlink(missing_ok=True)  # while locked, so no writer continues it meanwhile
            finally:
                self.close()
            raise

    def _lock(self, fd: int) -> None:
        """Take the log's writer lock (a regular file's; a device is shared),
        or close the log (``fd``) and raise ``LogInUseError``: another writer
        has it open. Nothing is removed: a file this log just created is the other
        writer's now."""
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in _NO_FLOCK:
                return
            self.close()
            if isinstance(exc, BlockingIOError):
                raise LogInUseError(
                    f"session log {str(self.path)!r} is open for writing already (by another process, or another"
                    " SessionLog in this one); a log has one writer at a time"
                ) from None
            raise

    def _refuse_existing(self, follow_symlinks: bool) -> NoReturn:
        """A new log's path is taken: say what is there. A link, a FIFO or a
        directory is named as such (appending would not help); a file is
        left for ``append=True`` to continue."""
        with contextlib.suppress(PermissionError):  # not readable: a file there all the same
            os.close(open_regular(self.path, what="session log", follow_symlinks=follow_symlinks, devices=True))
        raise FileExistsError(
            f"session log {str(self.path)!r} already exists; pass append=True to continue it"
        ) from None

    def _check_header(self, fd: int) -> None:
        """Refuse to continue a file that is no session log of this version:
        lines appended to it could never be read back, and the file is
        someone else's."""
        first = os.pread(fd, _HEADER_READ, 0).split(b"\n", 1)[0].removeprefix(codecs.BOM_UTF8)
        try:
            header = header_decoder.decode(first)
        except msgspec.DecodeError:
            raise ValueError(
                f"session log {str(self.path)!r} cannot be continued: it is no session log"
                " (line 1 is not a session/start header)"
            ) from None
        if header.v != LOG_VERSION:
            raise ValueError(
                f"session log {str(self.path)!r} cannot be continued: it has session log version {header.v},"
                f" this writer writes version {LOG_VERSION}"
            )

    @staticmethod
    def _ends_mid_line(fd: int) -> bool:
        # A writer killed mid-line leaves no newline; the resume header must
        # not be glued onto that fragment, or the reader loses it too.
        size = os.fstat(fd).st_size
        return bool(size) and os.pread(fd, 1, size - 1) != b"\n"

    def attach(self, bus: Bus) -> SessionLog:
        """Record every event ``bus`` publishes, in ``seq`` order."""
        bus.record(self._record)
        return self

    def detach(self, bus: Bus) -> None:
        """Stop recording ``bus``'s events; a log not attached to it is a ``ValueError``."""
        bus.unrecord(self._record)

    def write(self, event: Event) -> None:
        """Append one event, given without a bus, as a line; ``LogWriteError``
        if it could not be (see above). Its fields are checked as
        ``Bus.publish`` checks them, so that the line reads back: a field of
        another type is written as a reader would read it, and an event no
        reader could read (``step=None``, a ``ts`` that is no finite number)
        is a ``TypeError`` naming the field, and nothing is written."""
        self._record(_readable(event))

    def _record(self, event: Event | SessionStart) -> None:
        """Append one line: what the bus, which checked the event, records.
        One ``os.write`` of a buffer encoded in place, one thread at a time."""
        with self._writing:
            fd = self._fd
            if fd is None:
                self._closed(1)
            buffer = self._buffer
            held = self._held
            try:
                encode_line(event, buffer)
                buffer.append(10)  # b"\n"
                if held is not None:
                    held += buffer
            except MemoryError:  # a huge event where memory is bounded: not written, and said so
                self._lost(1, errno.ENOMEM, "out of memory")
            if held is not None:
                self._held_count += 1
                return
            torn = self._torn
            if torn:
                buffer[0:0] = b"\n"
            self._put(fd, buffer)
            if torn:
                self._torn = False

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Keep the lines written inside the block and write them together
        when it ends, also when it raises: one system write, all of them or
        none (``LogWriteError``, as ``write_many``). For a writer whose
        events belong together, a command hook answering one event: killed
        inside the block, it leaves none of them behind."""
        if self._held is not None:
            raise RuntimeError(f"session log {str(self.path)!r} is already holding its lines")
        self._held = held = bytearray()
        self._held_count = 0
        try:
            yield
        finally:
            with self._writing:
                self._held = None
                if held:
                    self._put_lines(held, self._held_count)

    def discard_held(self) -> None:
        """Drop the lines held so far (``held``): the events they record are
        abandoned (a command hook its CLI stopped waiting for), so the block
        writes none of them."""
        if self._held is not None:
            self._held.clear()
            self._held_count = 0

    def write_many(self, events: Iterable[Event]) -> None:
        """Append ``events`` as lines, with one system write for them all:
        every line lands, or ``LogWriteError`` and none does (as ``write``
        for one; ``failures`` counts each event not written). For a writer
        that has many events at once (an importer): one write per event is
        most of what writing them costs. Inside ``held``, they are held too."""
        items = [_readable(event) for event in events]
        if self._fd is None:
            self._closed(len(items))
        if not items:
            return
        try:
            lines = encode_lines(items)
        except MemoryError:
            self._lost(len(items), errno.ENOMEM, "out of memory")
        with self._writing:
            held = self._held
            if held is not None:
                held += lines
                self._held_count += len(items)
                return
            self._put_lines(lines, len(items))

    def _put_lines(self, batch: bytes | bytearray, count: int) -> None:
        """Append ``count`` whole lines with one system write, all or none."""
        fd = self._fd
        if fd is None:
            self._closed(count)
        if self._torn:
            batch = b"\n" + batch
        try:
            self._put(fd, batch)
        except LogWriteError:
            self.failures += count - 1
            raise
        self._torn = False

    def _put(self, fd: int, buffer: bytes | bytearray) -> None:
        """Append ``buffer`` (whole lines) with one system write, the rest of
        it after a short write, then fsync if asked; on failure none of it
        stays (``_fail``)."""
        try:
            written = os.write(fd, buffer)
        except OSError as exc:
            self._fail(fd, 0, exc)
        if written != len(buffer) or self._fsync:
            self._finish(fd, buffer, written)

    def _finish(self, fd: int, buffer: bytes | bytearray, written: int) -> None:
        """After a short write (a full disk, a signal): write the rest of the
        line; then fsync, if asked."""
        view = memoryview(buffer)
        try:
            while written < len(buffer):
                n = os.write(fd, view[written:])
                if n <= 0:  # pragma: no cover - a regular file's write returns > 0 or raises
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                written += n
            if self._fsync:
                os.fsync(fd)
        except OSError as exc:
            view.release()
            self._fail(fd, written, exc)
        view.release()

    def _fail(self, fd: int, written: int, exc: OSError) -> NoReturn:
        self._cut(fd, written)
        self._lost(1, exc.errno, exc.strerror)

    def _closed(self, count: int) -> NoReturn:
        """``count`` events came after ``close``: none is written."""
        self._lost(count, errno.EBADF, "the log is closed")

    def _lost(self, count: int, code: int | None, why: str | None) -> NoReturn:
        """``count`` events were not written: ``failures`` counts them, and
        ``error``, the ``LogWriteError`` raised, says which log and why (a
        bus logs it in one line)."""
        self.failures += count
        self.error = LogWriteError(code, f"session log {str(self.path)!r}: event not written ({why})")
        raise self.error from None

    def _cut(self, fd: int, written: int) -> None:
        """Take back the ``written`` bytes of a line that did not land whole:
        the file's last bytes, as no other writer has it open (the lock)."""
        if not written:
            return
        try:
            os.ftruncate(fd, os.fstat(fd).st_size - written)
        except OSError:
            self._torn = True  # the next line starts with a newline instead

    def close(self) -> None:
        """Close the file, which lets the next writer in; later writes raise
        ``LogWriteError``. Closing twice is harmless."""
        with self._writing:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> SessionLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _readable(event: Event) -> Event:
    """``event`` made what its line reads back as (``conform``), or a
    ``TypeError`` naming what no reader could read."""
    conform(event)
    if type(event.seq) is not int:
        raise TypeError(f"{type(event).__name__} cannot be logged: seq must be an int, got {event.seq!r}")
    checked_time(event.ts, f"{type(event).__name__}.ts is")
    return event
