"""``python -m benchmarks``: every benchmark section from one command."""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from benchmarks.settings import SECTIONS, Settings

__all__ = ["main"]


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


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None
    if not sizes or min(sizes) < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: sizes must be numbers >= 0")
    return sizes


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Measure the bus, guard, log, replay, command hook and audit against bare baselines and "
        "peers, as medians over interleaved rounds, each reported as a ratio to a baseline measured in the "
        "same run (see docs/performance.md).",
    )
    parser.add_argument("--runs", type=_positive(int), default=1, help="whole runs; each cell is their median (1)")
    parser.add_argument("--only", action="append", choices=SECTIONS, help="run just this section (repeatable)")
    parser.add_argument(
        "--skip", action="append", choices=SECTIONS, default=[], help="leave this section out (repeatable)"
    )
    parser.add_argument("--no-fleet", action="store_true", help="leave out the two fleet sections (the slowest)")
    parser.add_argument("--seconds", type=_positive(float), default=0.3, help="length of one timed round (0.3)")
    parser.add_argument("--repeat", type=_positive(int), default=5, help="rounds per case; the median is kept (5)")
    parser.add_argument("--log-mb", type=_positive(float), default=100.0, help="size of the replay log (100)")
    parser.add_argument("--agents", type=_positive(int), default=100_000, help="idle agents for memory (100000)")
    parser.add_argument("--calls", type=_positive(int), default=1_000, help="stream fed to each loop guard (1000)")
    parser.add_argument(
        "--hook-sizes",
        type=_sizes,
        default=(0, 1_000, 10_000, 100_000),
        help="earlier calls in the session for the command hook (0,1000,10000,100000)",
    )
    parser.add_argument("--hook-processes", type=_positive(int), default=21, help="hook processes timed per size (21)")
    parser.add_argument(
        "--audit-calls", type=_positive(int), default=100_000, help="calls in the audited session (100000)"
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        default=Path(__file__).resolve().parents[2] / "shared" / "corpus",
        metavar="DIR",
        help="real transcripts for the audit section, when present (../shared/corpus)",
    )
    parser.add_argument(
        "--http-rounds", type=_positive(int), default=10, help="interleaved rounds of the HTTP hook (10)"
    )
    parser.add_argument(
        "--http-pairs", type=_positive(int), default=25, help="tool calls per session size per HTTP round (25)"
    )
    parser.add_argument("--fleet-workers", type=_positive(int), default=4, help="FleetGuard worker processes (4)")
    parser.add_argument("--fleet-sessions", type=_positive(int), default=400, help="sessions in the fleet run (400)")
    parser.add_argument("--fleet-calls", type=_positive(int), default=40, help="tool calls per fleet session (40)")
    parser.add_argument("--chaos-replicas", type=_positive(int), default=4, help="serve --redis replicas (4)")
    parser.add_argument(
        "--chaos-sessions", type=_positive(int), default=1000, help="sessions in each replicas run (1000)"
    )
    parser.add_argument("--chaos-clients", type=_positive(int), default=50, help="concurrent HTTP clients (50)")
    parser.add_argument(
        "--chaos-kill-every", type=_positive(float), default=3.0, help="seconds between replica kills (3)"
    )
    parser.add_argument("--no-trio", action="store_true", help="skip the bus-under-trio measurement")
    parser.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    parser.add_argument("--tmpdir", metavar="DIR", help="where the temporary logs go (system default)")
    return parser


def _sections(only: list[str] | None, skip: list[str], no_fleet: bool) -> tuple[str, ...]:
    left_out = set(skip) | ({"fleet", "fleet-chaos"} if no_fleet else set())
    return tuple(name for name in (only or SECTIONS) if name not in left_out)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # As the command line configures it: the guard's action records filtered
    # out (a deployment that does not print every reminder), stdout clean.
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.dev.ConsoleRenderer(colors=False)],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
    from benchmarks import report
    from benchmarks.runner import machine, run

    with tempfile.TemporaryDirectory(prefix="rtg-bench-", dir=args.tmpdir) as tmp:
        settings = Settings(
            tmpdir=Path(tmp),
            seconds=args.seconds,
            repeat=args.repeat,
            log_mb=args.log_mb,
            agents=args.agents,
            calls=args.calls,
            hook_sizes=args.hook_sizes,
            hook_processes=args.hook_processes,
            audit_calls=args.audit_calls,
            corpus=args.corpus,
            http_rounds=args.http_rounds,
            http_pairs=args.http_pairs,
            fleet_workers=args.fleet_workers,
            fleet_sessions=args.fleet_sessions,
            fleet_calls=args.fleet_calls,
            fleet_latency_sessions=min(16, args.fleet_sessions),
            chaos_replicas=args.chaos_replicas,
            chaos_sessions=args.chaos_sessions,
            chaos_clients=args.chaos_clients,
            chaos_kill_every=args.chaos_kill_every,
            sections=_sections(args.only, args.skip, args.no_fleet),
            trio=not args.no_trio,
        )
        runs = []
        for number in range(1, args.runs + 1):
            prefix = f"benchmarks: run {number} of {args.runs}: " if args.runs > 1 else "benchmarks: "

            def progress(name: str, prefix: str = prefix) -> None:
                print(f"{prefix}{name} ...", file=sys.stderr)

            runs.append(run(settings, progress=progress))
    rows = report.combine(runs)
    render = {"text": report.text, "markdown": report.markdown, "json": report.json_lines}[args.format]
    sys.stdout.write(render(rows, machine()) + "\n")
    return 0
