"""The rescue policy's trip log: one JSON line per denial or escalation.

A trip is written to the configured ``log_file`` (appended, created with mode
0600 along with its directory, 0700) and emitted as the structlog event
``rescue.trip`` with the same fields. A log file that cannot be written (a
full disk, a FIFO, a symbolic link, which is never written through) is
reported through structlog and otherwise ignored: observability never breaks
the agent's tool call. A line is written whole or not at all.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import msgspec

from bus import open_regular
from bus._codec import encode_line
from bus._logging import InfoLog, LazyLogger

__all__ = ["Trip", "TripKind", "TripLog", "TripTrigger"]

TripKind = Literal["deny", "rescue", "escalation-failed"]
TripTrigger = Literal["repeat", "stall"]

_log = LazyLogger("guard.rescue")


class Trip(msgspec.Struct, frozen=True, kw_only=True):
    """One time the rescue policy stopped a call.

    ``ts`` is the call's event timestamp (the bus clock, so replays agree);
    ``signature`` the hex digest of (tool, arguments without ignored ones);
    ``count`` the signature's occurrences in the window; ``trigger`` is
    ``repeat`` (count crossed a threshold) or ``stall`` (``redundant`` calls in
    the epoch reached ``stall_at``). ``cached`` marks advice reused for free,
    ``ask_ms`` the wall time of an ask that ran, and ``reason`` why a call
    got no advice (budget spent, cooldown, or why the ask failed).
    """

    ts: float
    kind: TripKind
    agent: str | None
    tool: str
    call_id: str
    signature: str
    count: int
    epoch: int
    trigger: TripTrigger
    redundant: int
    rescues_used: int
    cached: bool = False
    ask_ms: float | None = None
    reason: str | None = None


class TripLog:
    """Appends trips to ``path`` (``''`` writes none) and logs each one."""

    def __init__(self, path: str) -> None:
        self.path = Path(os.path.expanduser(path)) if path else None
        self._info = InfoLog("guard.rescue")

    def record(self, trip: Trip) -> None:
        if self._info.enabled():
            self._info.info("rescue.trip", **msgspec.structs.asdict(trip))
        if self.path is None:
            return
        line = bytearray()
        encode_line(trip, line)  # a lone surrogate in an id or a reason is written as the session log writes it
        line += b"\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = open_regular(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, what="trip log", follow_symlinks=False)
            try:
                _append(fd, line)
            finally:
                os.close(fd)
        except (OSError, ValueError) as exc:  # ValueError: a path the system cannot take (a NUL in it)
            _log.warning("rescue.trip_log_failed", path=str(self.path), error=str(exc))


def _append(fd: int, line: bytearray) -> None:
    """Write ``line`` whole, or take back what landed and raise."""
    written = 0
    try:
        while written < len(line):
            written += os.write(fd, line[written:])
    except OSError:
        if written:
            os.ftruncate(fd, os.fstat(fd).st_size - written)
        raise
