"""Opening the files the project reads and writes without hanging on what is
not a file: a FIFO would block ``open`` until a peer arrived, ``/dev/zero``
never ends, a directory has no bytes. Everything opens non-blocking and is
checked with ``fstat`` before a byte is read or written."""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path
from typing import IO

__all__ = ["NotRegularFileError", "open_regular", "private_dir", "read_regular"]


class NotRegularFileError(OSError):
    """``path`` is not a file the project can use (a directory, a FIFO, a
    device, a socket, or a symbolic link it was told not to follow). The
    message names the path and what it is."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EINVAL, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(
    path: str | os.PathLike[str],
    flags: int = os.O_RDONLY,
    mode: int = 0o600,
    *,
    what: str = "file",
    follow_symlinks: bool = True,
    devices: bool = False,
) -> int:
    """A descriptor for ``path`` opened with ``flags`` (new files get ``mode``).

    Raises ``NotRegularFileError`` for anything but a regular file (a
    character device too when ``devices`` is true, so a writer may go to
    ``/dev/null``), and for a symbolic link unless ``follow_symlinks``;
    ``what`` names the file in the message (``"session log"``). Other
    ``OSError``s (missing, no permission) pass through.
    """
    name = os.fspath(path)
    flags |= os.O_NONBLOCK | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(name, flags, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise NotRegularFileError(
                f"{what} {name!r} is a symbolic link; it is not written through unless asked to"
            ) from None
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO without a reader, a socket; a directory
            raise NotRegularFileError(
                f"{what} {name!r} is {_kind(os.stat(name).st_mode)}, not a regular file"
            ) from None
        raise
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) or (devices and stat.S_ISCHR(info.st_mode)):
        return fd
    os.close(fd)
    raise NotRegularFileError(f"{what} {name!r} is {_kind(info.st_mode)}, not a regular file")


def read_regular(path: str | os.PathLike[str], *, what: str = "file") -> IO[bytes]:
    """``path`` opened for reading in binary, if it is a regular file (see
    ``open_regular``). A read that fails names it (``[Errno 5] Input/output
    error: '/proc/self/mem'``): some files open and then refuse to be read."""
    return _ReadFile(io.FileIO(open_regular(path, what=what), "rb"), os.fspath(path))


class _ReadFile(io.BufferedReader):
    """A binary file whose read errors carry its path, as ``open``'s do."""

    def __init__(self, raw: io.FileIO, path: str) -> None:
        super().__init__(raw)
        self._path = path

    def read(self, size: int | None = -1) -> bytes:
        try:
            return super().read(size)
        except OSError as exc:
            raise type(exc)(exc.errno, exc.strerror, self._path) from None

    def readline(self, size: int | None = -1) -> bytes:
        try:
            return super().readline(size)
        except OSError as exc:
            raise type(exc)(exc.errno, exc.strerror, self._path) from None


def private_dir(path: Path) -> None:
    """Make the directory ``path`` (and its parents), readable by its owner
    only; ``NotADirectoryError`` naming it when something else stands there
    (``mkdir``'s own error says only "File exists")."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except FileExistsError:
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(path)) from None
