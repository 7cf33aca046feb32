"""How big and how long a benchmark run is."""

from __future__ import annotations

from pathlib import Path

import msgspec

__all__ = ["SECTIONS", "Settings"]

SECTIONS = ("dispatch", "fullpath", "log", "replay", "detection", "memory", "command-hook", "audit")


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """``seconds`` is the length of one timed round of a case and ``repeat``
    the number of rounds (the median is reported); ``log_mb`` sizes the
    generated replay log, ``agents`` the idle-agent population and ``calls``
    the stream fed to each loop guard. ``hook_sizes`` are the session lengths
    (earlier tool calls) the command hook is timed at, ``hook_processes`` the
    hook processes timed at each; ``audit_calls`` sizes the audited session, and a ``corpus`` of real
    transcripts is audited too when given.
    Temporary files go under ``tmpdir``."""

    tmpdir: Path
    seconds: float = 0.3
    repeat: int = 5
    log_mb: float = 100.0
    agents: int = 100_000
    calls: int = 1_000
    hook_sizes: tuple[int, ...] = (0, 1_000, 10_000, 100_000)
    hook_processes: int = 21
    audit_calls: int = 100_000
    corpus: Path | None = None
    sections: tuple[str, ...] = SECTIONS
    trio: bool = True
