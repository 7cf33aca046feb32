"""Score loop-detection configs on labelled stretches of real public transcripts.

    python -m benchmarks.detection real                      # recommended, both halves
    python -m benchmarks.detection real --config all --half held-out
    python -m benchmarks.detection real --detail             # every stretch

Labels: ``real/stretches.toml`` (file, call range, label, kind, reason and the
transcript it came from); sources and licences: ``real/DATA.md``. The logs
themselves are fetched public data, kept out of the repository: they are read
from ``../shared/corpus/real`` (from the repository root), or from the folder
``$REPEAT_TOOL_GUARD_REAL_DATA`` or ``--data`` names. Each is a real session
converted to the session log schema by our importers and trimmed to its
labelled stretches and the calls before them.

Every stretch belongs to one half, ``tune`` or ``held-out``, by a hash of
the transcript it came from (so a session is never split): tune detection on
``tune``; the published figure is ``held-out``'s. Scoring is ``run.py``'s:
a loop is caught when any action falls on one of its calls, wasted calls are
its calls after the first round up to the first action; on legit stretches
the stretches with an advisory and the stretches with a denial or halt are
counted.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import statistics
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import anyio
import msgspec
import structlog

from benchmarks.detection.run import CONFIGS, CORPUS, HERE, Score, Stretch, detail, score_stretches
from guard.config import Config

LABELS = HERE / "real" / "stretches.toml"
DATA = CORPUS / "real"
HALVES = ("tune", "held-out")
ENV = "REPEAT_TOOL_GUARD_REAL_DATA"


@dataclass(frozen=True)
class Thresholds:
    """What ``recommended`` must reach on a half (the published promise)."""

    legit_denied: int = 0
    legit_advised_share: float = 0.02
    caught_share: float = 0.95
    median_wasted: float = 1
    max_wasted: int = 3

    def misses(self, score: Score) -> list[str]:
        """The thresholds ``score`` misses, each as a sentence; empty if it meets them all."""
        misses = []
        if score.legit_stretches_denied > self.legit_denied:
            misses.append(
                f"{score.legit_stretches_denied} legit stretches denied or halted (at most {self.legit_denied})"
            )
        if score.legits and score.legit_stretches_advised > self.legit_advised_share * score.legits:
            misses.append(
                f"{score.legit_stretches_advised}/{score.legits} legit stretches advised"
                f" (at most {self.legit_advised_share:.0%})"
            )
        if score.loops and score.caught < self.caught_share * score.loops:
            misses.append(f"{score.caught}/{score.loops} loops caught (at least {self.caught_share:.0%})")
        wasted = score.wasted
        if wasted and statistics.median(wasted) > self.median_wasted:
            misses.append(f"median {statistics.median(wasted):g} wasted calls (at most {self.median_wasted:g})")
        if wasted and max(wasted) > self.max_wasted:
            misses.append(f"max {max(wasted)} wasted calls (at most {self.max_wasted})")
        return misses


PROMISE = Thresholds()


def data_folder(given: Path | None = None) -> Path:
    """Where the real logs are: ``given``, else ``$REPEAT_TOOL_GUARD_REAL_DATA``, else ``../shared/corpus/real``."""
    if given is not None:
        return given
    env = os.environ.get(ENV)
    return Path(env) if env else DATA


def half_of(origin: str) -> str:
    """The half a transcript's stretches belong to, fixed by its name."""
    return HALVES[hashlib.sha256(origin.encode()).digest()[0] % 2]


class _Labels(msgspec.Struct, frozen=True):
    stretch: list[Stretch] = msgspec.field(default_factory=list)


def load_real(labels: Path = LABELS) -> list[Stretch]:
    """Every labelled real stretch (``source`` is ``real``)."""
    data = tomllib.loads(labels.read_text(encoding="utf-8"))
    stretches = [msgspec.convert({"source": "real", **item}, Stretch) for item in data.get("stretch", [])]
    for stretch in stretches:
        if stretch.label not in ("loop", "legit", "unclear"):
            raise ValueError(f"{stretch.name}: label must be loop, legit or unclear, not {stretch.label!r}")
        if not stretch.origin:
            raise ValueError(f"{stretch.name}: origin (the transcript it came from) is required")
    return stretches


def split(stretches: list[Stretch]) -> dict[str, list[Stretch]]:
    """The stretches of each half."""
    halves: dict[str, list[Stretch]] = {half: [] for half in HALVES}
    for stretch in stretches:
        halves[half_of(stretch.origin)].append(stretch)
    return halves


async def score_half(
    half: str, configs: dict[str, Config] | None = None, *, data: Path | None = None, labels: Path = LABELS
) -> list[Score]:
    """Score ``configs`` (default ``recommended`` alone) on one half."""
    configs = {"recommended": CONFIGS["recommended"]} if configs is None else configs
    stretches = split(load_real(labels))[half]
    return await score_stretches(stretches, configs, real=data_folder(data))


def counts(stretches: list[Stretch]) -> str:
    by = {label: sum(1 for s in stretches if s.label == label) for label in ("loop", "legit", "unclear")}
    sessions = len({s.origin for s in stretches})
    return f"{len(stretches)} stretches from {sessions} sessions: " + ", ".join(f"{n} {k}" for k, n in by.items())


def table(rows: list[tuple[str, Score]]) -> str:
    """The real benchmark's table, as Markdown: one row per (half, config)."""
    lines = [
        "| half | config | loops caught | wasted calls before the first action (median / max) "
        "| legit stretches with an advisory | legit stretches denied or halted | denials on unclear |",
        "|---|---|---|---|---|---|---|",
    ]
    for half, s in rows:
        wasted = s.wasted
        spent = f"{statistics.median(wasted):g} / {max(wasted)}" if wasted else "–"
        caught = f"{s.caught}/{s.loops} ({100 * s.caught / s.loops:.0f} %)" if s.loops else "0/0"
        advised = (
            f"{s.legit_stretches_advised}/{s.legits} ({100 * s.legit_stretches_advised / s.legits:.1f} %)"
            if s.legits
            else "0/0"
        )
        denied = f"{s.legit_stretches_denied}/{s.legits}" if s.legits else "0/0"
        lines.append(f"| {half} | {s.config} | {caught} | {spent} | {advised} | {denied} | {s.unclear_denials} |")
    return "\n".join(lines)


async def _score(stretches: list[Stretch], configs: dict[str, Config], data: Path) -> list[Score]:
    return await score_stretches(stretches, configs, real=data)


def main(argv: list[str] | None = None) -> int:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(prog="python -m benchmarks.detection real", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="recommended", choices=[*CONFIGS, "all"], help="default: recommended")
    parser.add_argument("--half", default="both", choices=[*HALVES, "both"])
    parser.add_argument(
        "--data", type=Path, default=None, help=f"the real logs (default ${ENV} or ../shared/corpus/real)"
    )
    parser.add_argument("--detail", action="store_true", help="also list every stretch")
    args = parser.parse_args(argv)
    data = data_folder(args.data)
    if not data.is_dir():
        print(f"no real logs at {data}: see benchmarks/detection/real/DATA.md", file=sys.stderr)
        return 2
    configs = dict(CONFIGS) if args.config == "all" else {args.config: CONFIGS[args.config]}
    halves = split(load_real())
    chosen = HALVES if args.half == "both" else (args.half,)
    rows: list[tuple[str, Score]] = []
    for half in chosen:
        print(f"{half}: {counts(halves[half])}")
        scores = anyio.run(_score, halves[half], configs, data)
        rows.extend((half, s) for s in scores)
    print()
    print(table(rows))
    for half, s in rows:
        if s.config == "recommended":
            misses = PROMISE.misses(s)
            print(
                f"\n{half}, recommended: " + ("meets every threshold" if not misses else "misses: " + "; ".join(misses))
            )
    if args.detail:
        for half, s in rows:
            print(f"\n{half}, {s.config}\n")
            print(detail(s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
