"""Replay throughput on a generated log against msgspec decoding it alone.

The log is written by the real path (bus, default guard, session log) from
the benchmark's call stream until it reaches ``log_mb`` megabytes, so it
holds calls, results and reminders in realistic proportions. Every case
reads the whole file, from the page cache after the first pass.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks import stream
from benchmarks._measure import Case, Row, measure
from benchmarks.settings import Settings
from bus import Agent, Bus, LogReader, SessionLog
from bus._codec import event_decoder
from guard.guard import Guard
from guard.verdicts import replay_log

__all__ = ["generate_log", "replay"]


async def generate_log(path: Path, megabytes: float) -> int:
    """Write a session log of about ``megabytes`` MB; returns its event lines."""
    bus = Bus()
    Guard().attach(bus)
    pairs = list(zip(calls := stream.calls(4096, agent=Agent("main")), stream.results(calls), strict=True))
    limit = int(megabytes * 1_000_000)
    with SessionLog(path, session="bench").attach(bus):
        i = 0
        while i % 1024 or os.path.getsize(path) < limit:
            call, result = pairs[i % len(pairs)]
            await bus.decide(call)
            await bus.publish(result)
            i += 1
    return bus.seq


async def replay(settings: Settings) -> list[Row]:
    path = settings.tmpdir / "replay.jsonl"
    events = await generate_log(path, settings.log_mb)
    size = os.path.getsize(path)
    decoder = event_decoder({})

    async def decode_only(n: int) -> None:
        decode = decoder.decode
        with open(path, "rb") as file:
            file.readline()
            for line in file:
                decode(line)

    async def reader(n: int) -> None:
        for _ in LogReader(path):
            pass

    async def full(n: int) -> None:
        await replay_log(path)

    cases: list[tuple[str, Case]] = [
        ("msgspec decode alone", decode_only),
        ("LogReader (read_log)", reader),
        ("replay_log: reader + Bus + Guard", full),
    ]
    timings = await measure(cases, seconds=settings.seconds, repeat=settings.repeat, fixed=events)
    os.unlink(path)
    base = timings["msgspec decode alone"].rate
    rows = []
    for name, timing in timings.items():
        measured = name != "msgspec decode alone"
        rows.append(
            Row(
                section=f"replay, {size / 1e6:.0f} MB log, {events:,} events",
                name=name,
                rate=timing.rate,
                unit="events/s",
                micros=timing.micros,
                ratio=timing.rate / base,
                baseline="msgspec decode alone",
                extra=f"{timing.rate * size / events / 1e6:.0f} MB/s",
                target=">= 50% of decode alone" if measured else "",
                met=timing.rate >= base / 2 if measured else None,
            )
        )
    return rows
