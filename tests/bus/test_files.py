"""Only regular files (and, for a writer that asks, character devices) are
opened; anything else is a ``NotRegularFileError`` naming what it is,
before a byte is read or written and without blocking."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from bus import NotRegularFileError, open_regular, read_regular


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        yield path
    finally:
        server.close()


def test_a_regular_file_opens(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"data")
    with read_regular(tmp_path / "f") as file:
        assert file.read() == b"data"


@pytest.mark.parametrize("flags", [os.O_RDONLY, os.O_WRONLY | os.O_APPEND])
def test_a_fifo_is_refused_without_waiting_for_a_peer(flags: int, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p")
    with pytest.raises(NotRegularFileError, match=r"^log '.*/p' is a FIFO \(named pipe\), not a regular file$"):
        open_regular(tmp_path / "p", flags, what="log")


@pytest.mark.parametrize("flags", [os.O_RDONLY, os.O_WRONLY | os.O_APPEND])
def test_a_directory_is_refused(flags: int, tmp_path: Path) -> None:
    with pytest.raises(NotRegularFileError, match="is a directory, not a regular file"):
        open_regular(tmp_path, flags)


def test_a_socket_is_refused(unix_socket: Path) -> None:
    with pytest.raises(NotRegularFileError, match="is a socket, not a regular file"):
        open_regular(unix_socket)


def test_a_device_is_refused_unless_devices_are_allowed() -> None:
    with pytest.raises(NotRegularFileError, match="'/dev/zero' is a character device"):
        read_regular("/dev/zero")
    os.close(open_regular(os.devnull, os.O_WRONLY, devices=True))


def test_a_block_device_is_named(tmp_path: Path) -> None:
    try:
        os.mknod(tmp_path / "disk", stat.S_IFBLK | 0o600, os.makedev(7, 0))
    except PermissionError:
        pytest.skip("making a device node needs root")
    with pytest.raises(NotRegularFileError, match="is a block device"):
        open_regular(tmp_path / "disk")


def test_a_symbolic_link_is_followed_only_when_allowed(tmp_path: Path) -> None:
    (tmp_path / "target").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(NotRegularFileError, match=r"'.*/link' is a symbolic link; it is not written through"):
        open_regular(tmp_path / "link", os.O_WRONLY, what="log", follow_symlinks=False)
    os.close(open_regular(tmp_path / "link", os.O_WRONLY))


def test_other_errors_pass_through(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "missing")
    error = NotRegularFileError("plain words")
    assert (str(error), error.errno) == ("plain words", 22)


@pytest.mark.parametrize("read", ["read", "readline"])
def test_a_read_that_fails_names_the_file(read: str) -> None:
    if not os.path.exists("/proc/self/mem"):  # pragma: no cover - Linux has it
        pytest.skip("no /proc/self/mem here")
    with read_regular("/proc/self/mem") as file, pytest.raises(OSError, match="Input/output error") as failed:
        getattr(file, read)(16)
    assert failed.value.filename == "/proc/self/mem"
