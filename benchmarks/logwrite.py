"""Session log lines per second against writing the same bytes raw.

The raw baseline writes each pre-encoded line with one ``os.write`` on a file
opened the same way (``O_APPEND``), so the difference is what ``SessionLog``
adds: encoding the event and its bookkeeping.
"""

from __future__ import annotations

import os

from benchmarks import stream
from benchmarks._measure import Case, Row, measure
from benchmarks.settings import Settings
from bus import Agent, SessionLog
from bus._codec import encoder

__all__ = ["log_write"]

_POOL = 4096


async def log_write(settings: Settings) -> list[Row]:
    events = stream.results(stream.calls(_POOL, agent=Agent("bench")))
    lines = [encoder.encode(event) + b"\n" for event in events]
    mask = _POOL - 1
    path = settings.tmpdir / "log-write.jsonl"

    async def raw(n: int) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_EXCL, 0o600)
        try:
            for i in range(n):
                os.write(fd, lines[i & mask])
        finally:
            os.close(fd)
            os.unlink(path)

    async def logged(n: int) -> None:
        with SessionLog(path) as log:
            write = log.write
            for i in range(n):
                write(events[i & mask])
        os.unlink(path)

    cases: list[tuple[str, Case]] = [("raw os.write of pre-encoded lines", raw), ("SessionLog.write", logged)]
    timings = await measure(cases, seconds=settings.seconds, repeat=settings.repeat)
    raw_rate = timings["raw os.write of pre-encoded lines"].rate
    size = sum(map(len, lines)) / len(lines)
    return [
        Row(
            section="session log write",
            name=name,
            rate=timing.rate,
            unit="lines/s",
            micros=timing.micros,
            ratio=timing.rate / raw_rate,
            baseline="raw os.write of pre-encoded lines",
            extra=f"{size:.0f} B/line",
            target=">= 50% of raw" if name == "SessionLog.write" else "",
            met=timing.rate >= raw_rate / 2 if name == "SessionLog.write" else None,
        )
        for name, timing in timings.items()
    ]
