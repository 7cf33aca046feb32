"""The session log writer: every event as one JSON line, flushed as it happens."""

from __future__ import annotations

import os
import stat
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from bus._codec import encode_line, encoder
from bus.bus import Bus
from bus.events import Event, SessionStart

__all__ = ["LOG_VERSION", "SessionLog"]

LOG_VERSION = 1

_encode_into = encoder.encode_into


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
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        session: str | None = None,
        append: bool = False,
        fsync: bool = False,
        mark_resume: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.session = session or uuid.uuid4().hex
        self._fsync = fsync
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (0 if append else os.O_EXCL)
        try:
            self._fd: int | None = os.open(self.path, flags, 0o600)
        except FileExistsError:
            raise FileExistsError(
                f"session log {str(self.path)!r} already exists; pass append=True to continue it"
            ) from None
        self._buffer = bytearray()
        try:
            size = self._end_torn_line(self._fd) if append else 0
            if not size or mark_resume:
                self.write(SessionStart(v=LOG_VERSION, session=self.session, ts=clock()))
        except BaseException:
            self.close()
            raise

    def _end_torn_line(self, fd: int) -> int:
        """The size of what the file held (nonzero for a pipe or device)."""
        # A writer killed mid-line leaves no newline; the next line must not
        # be glued onto that fragment, or the reader loses it too.
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return 1
        if info.st_size:
            with self.path.open("rb") as existing:
                existing.seek(info.st_size - 1)
                if existing.read(1) != b"\n":
                    os.write(fd, b"\n")
        return info.st_size

    def attach(self, bus: Bus) -> SessionLog:
        """Record every event ``bus`` publishes, in ``seq`` order."""
        bus.record(self.write)
        return self

    def write(self, event: Event | SessionStart) -> None:
        """Append one event as a line (one ``os.write``, the encoding done
        in place: this runs for every event a bus publishes)."""
        fd = self._fd
        if fd is None:
            raise ValueError(f"session log {str(self.path)!r} is closed")
        buffer = self._buffer
        try:
            _encode_into(event, buffer)
        except (UnicodeEncodeError, RecursionError):
            encode_line(event, buffer)
        buffer.append(10)  # b"\n"
        written = os.write(fd, buffer)
        if written != len(buffer):  # a short write (a full disk, a signal): finish the line
            view = memoryview(buffer)[written:]
            while view:
                view = view[os.write(fd, view) :]
        if self._fsync:
            os.fsync(fd)

    def close(self) -> None:
        """Close the file; later writes raise. Closing twice is harmless."""
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
