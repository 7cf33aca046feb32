"""``repeat-tool-guard bench``: the benchmark as a subcommand."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from guard.bench.settings import SECTIONS, Settings

__all__ = ["add_command"]

EXIT_OK = 0


def _positive(kind: Callable[[str], float | int]) -> Callable[[str], float | int]:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
        return value

    return parse


def _run(args: argparse.Namespace) -> int:
    from guard.bench import report
    from guard.bench.runner import machine, run

    with tempfile.TemporaryDirectory(prefix="rtg-bench-", dir=args.tmpdir) as tmp:
        settings = Settings(
            tmpdir=Path(tmp),
            seconds=args.seconds,
            repeat=args.repeat,
            log_mb=args.log_mb,
            agents=args.agents,
            calls=args.calls,
            sections=tuple(args.only or SECTIONS),
            trio=not args.no_trio,
        )
        runs = []
        for number in range(1, args.runs + 1):
            prefix = f"bench: run {number} of {args.runs}: " if args.runs > 1 else "bench: "

            def progress(name: str, prefix: str = prefix) -> None:
                print(f"{prefix}{name} ...", file=sys.stderr)

            runs.append(run(settings, progress=progress))
    rows = report.combine(runs)
    render = {"text": report.text, "markdown": report.markdown, "json": report.json_lines}[args.format]
    sys.stdout.write(render(rows, machine()) + "\n")
    return EXIT_OK


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``bench`` on the CLI's subcommands."""
    bench = commands.add_parser(
        "bench",
        help="measure the bus, guard, log and replay against bare baselines and peers",
        description="Measure throughput, per-call overhead and memory, as medians over interleaved rounds, "
        "each reported as a ratio to a baseline measured in the same run (see docs/performance.md).",
    )
    bench.add_argument("--runs", type=_positive(int), default=1, help="whole runs; each cell is their median (1)")
    bench.add_argument("--only", action="append", choices=SECTIONS, help="run just this section (repeatable)")
    bench.add_argument("--seconds", type=_positive(float), default=0.3, help="length of one timed round (0.3)")
    bench.add_argument("--repeat", type=_positive(int), default=5, help="rounds per case; the median is kept (5)")
    bench.add_argument("--log-mb", type=_positive(float), default=100.0, help="size of the replay log (100)")
    bench.add_argument("--agents", type=_positive(int), default=100_000, help="idle agents for memory (100000)")
    bench.add_argument("--calls", type=_positive(int), default=1_000, help="stream fed to each loop guard (1000)")
    bench.add_argument("--no-trio", action="store_true", help="skip the bus-under-trio measurement")
    bench.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    bench.add_argument("--tmpdir", metavar="DIR", help="where the temporary logs go (system default)")
    bench.set_defaults(run=_run)
