"""Fixtures for the bus suite: hand-written session logs, byte for byte."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

HEADER = b'{"type":"session/start","v":1,"session":"s1","ts":1764489600.0}\n'

RawLog = Callable[..., Path]


@pytest.fixture
def raw_log(log_path: Path) -> RawLog:
    """Write a log from raw lines: ``raw_log(*lines, header=HEADER, torn=b"")``.

    Each line gets a newline; ``torn`` is appended without one, as a writer
    killed mid-line leaves it.
    """

    def write(*lines: bytes, header: bytes = HEADER, torn: bytes = b"") -> Path:
        log_path.write_bytes(header + b"".join(line + b"\n" for line in lines) + torn)
        return log_path

    return write
