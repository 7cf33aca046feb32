"""How big and how long a benchmark run is."""

from __future__ import annotations

from pathlib import Path

import msgspec

__all__ = ["SECTIONS", "Settings"]

SECTIONS = ("dispatch", "fullpath", "log", "replay", "detection", "memory")


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """``seconds`` is the length of one timed round of a case and ``repeat``
    the number of rounds (the median is reported); ``log_mb`` sizes the
    generated replay log, ``agents`` the idle-agent population and ``calls``
    the stream fed to each loop guard. Temporary files go under ``tmpdir``."""

    tmpdir: Path
    seconds: float = 0.3
    repeat: int = 5
    log_mb: float = 100.0
    agents: int = 100_000
    calls: int = 1_000
    sections: tuple[str, ...] = SECTIONS
    trio: bool = True
