"""The ``repeat-tool-guard`` command line.

Exit codes: 0 success, 1 ``replay --check`` found a difference, 2 a usage,
config or file error (the message names what was wrong).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TextIO

import anyio
import msgspec
import structlog

from bus import LogError
from guard.bench.cli import add_command as _add_bench_command
from guard.config import Config, ConfigError, load_config
from guard.verdicts import Verdict, replay_log

__all__ = ["main"]

EXIT_OK = 0
EXIT_DIFFERENCE = 1
EXIT_ERROR = 2


def _configure_logging(verbose: bool) -> None:
    """Send structlog to stderr so ``--json`` output on stdout stays clean."""
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.dev.ConsoleRenderer(colors=False)],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO if verbose else logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )


def _load(path: str | None) -> Config:
    return load_config(path) if path else Config()


def _print_verdict(verdict: Verdict, out: TextIO, as_json: bool) -> None:
    if as_json:
        out.write(msgspec.json.encode(verdict).decode() + "\n")
        return
    agent = verdict.agent or "-"
    out.write(
        f"seq {verdict.seq}  call {verdict.call_number}  {agent}  "
        f"{verdict.policy}/{verdict.action}  {verdict.tool} × {verdict.count}\n"
    )
    for line in verdict.text.splitlines():
        out.write(f"    {line}\n")


def _cmd_replay(args: argparse.Namespace) -> int:
    config = _load(args.config)
    out: TextIO = sys.stdout

    outcome = anyio.run(
        lambda: replay_log(args.log, config, on_verdict=lambda v: _print_verdict(v, out, args.json))
    )
    report = outcome.report
    counts = outcome.counts()
    actions = ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items())) or "none"
    print(f"{report.summary()}; actions: {actions}", file=sys.stderr)
    for sample in report.samples[:10]:
        print(f"  skipped line {sample.line} ({sample.reason}): {sample.detail}", file=sys.stderr)
    if args.check:
        for diff in outcome.differences:
            print(
                f"check: guard message {diff.index + 1} differs\n  recorded:    {diff.recorded}\n"
                f"  regenerated: {diff.regenerated}",
                file=sys.stderr,
            )
        if outcome.differences:
            return EXIT_DIFFERENCE
        print("check: every guard message matches the log", file=sys.stderr)
    return EXIT_OK


def _cmd_check_config(args: argparse.Namespace) -> int:
    config = load_config(args.file)
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(config), indent=2).decode() + "\n")
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="repeat-tool-guard",
        description="Stop AI agents from re-issuing the same tool call.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every guard action to stderr")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    replay = commands.add_parser("replay", help="replay a session log through a fresh guard")
    replay.add_argument("log", metavar="LOG", help="a session log (.jsonl)")
    replay.add_argument("--config", metavar="FILE", help="a .toml or .yaml config (default: remind only)")
    replay.add_argument("--json", action="store_true", help="one JSON object per action on stdout")
    replay.add_argument(
        "--check", action="store_true", help="exit 1 if regenerated guard messages differ from the recorded ones"
    )
    replay.set_defaults(run=_cmd_replay)

    check = commands.add_parser("check-config", help="validate a config file and print the effective config")
    check.add_argument("file", metavar="FILE")
    check.set_defaults(run=_cmd_check_config)

    _add_bench_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _configure_logging(args.verbose)
    try:
        code: int = args.run(args)
    except (ConfigError, LogError) as exc:
        print(f"repeat-tool-guard: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return code
