"""Timing: calibrated batches, interleaved repeats, medians.

Every figure is a median over ``repeat`` rounds, and in each round the cases
of one section run one after the other, so a noisy neighbour on a shared
machine slows a case and its baseline alike and the ratios stay honest.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence

import msgspec

__all__ = ["Case", "Row", "Timing", "measure"]

Case = Callable[[int], Awaitable[None]]
"""Runs ``n`` iterations of one benchmarked operation."""


class Row(msgspec.Struct, frozen=True, kw_only=True):
    """One line of the results table.

    ``rate`` is items per second (or, for memory rows, a byte count with
    ``unit`` saying so); ``ratio`` compares it with the section's baseline
    measured in the same run; ``met`` is ``None`` when no target applies.
    """

    section: str
    name: str
    rate: float
    unit: str
    micros: float | None = None
    ratio: float | None = None
    baseline: str | None = None
    extra: str = ""
    target: str = ""
    met: bool | None = None


class Timing(msgspec.Struct, frozen=True):
    """A case's median rate and the iterations per round that produced it."""

    name: str
    rate: float
    n: int

    @property
    def micros(self) -> float:
        return 1e6 / self.rate


async def _elapsed(case: Case, n: int) -> float:
    start = time.perf_counter()
    await case(n)
    return time.perf_counter() - start


async def _calibrate(case: Case, seconds: float) -> int:
    """Iterations that take about ``seconds``: double from 16 until a batch
    takes a tenth of that, then scale."""
    n = 16
    while True:
        elapsed = await _elapsed(case, n)
        if elapsed >= seconds / 10 or n >= 1 << 26:
            return max(1, int(n * seconds / max(elapsed, 1e-9)))
        n *= 2


async def measure(
    cases: Sequence[tuple[str, Case]],
    *,
    seconds: float,
    repeat: int,
    fixed: int | None = None,
) -> dict[str, Timing]:
    """Median rate of each case over ``repeat`` interleaved rounds.

    ``fixed`` runs every case for exactly that many iterations (for work whose
    per-item cost depends on how far into a stream it is); otherwise each case
    is calibrated to take about ``seconds`` per round.
    """
    sizes = {name: fixed if fixed is not None else await _calibrate(case, seconds) for name, case in cases}
    samples: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(repeat):
        for name, case in cases:
            samples[name].append(sizes[name] / max(await _elapsed(case, sizes[name]), 1e-9))
    return {name: Timing(name, statistics.median(samples[name]), sizes[name]) for name, _ in cases}


def process_cpu(pid: int) -> float:
    """Another process's CPU seconds so far (user + system), from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
