"""The ``repeat-tool-guard`` command line.

Exit codes: 0 success, 1 ``replay --check`` found a difference or ``audit``
could not read some file, 2 a usage, config or file error (the message names
what was wrong, on one line). ``hook`` exits 1 on any error of its own,
usage errors included, since Claude Code reads 2 as "block the tool call".

Claude Code starts ``hook`` for every hook event, so this module imports
only what every command needs; each command imports the rest itself.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import msgspec

from bus import LogError, open_regular
from guard._text import one_line
from guard.config import PRESETS, Config, ConfigError, load_config, shadowed

if TYPE_CHECKING:
    import structlog

    from guard.verdicts import ReplayOutcome, Verdict

__all__ = ["main"]

EXIT_OK = 0
EXIT_DIFFERENCE = 1
EXIT_ERROR = 2
EXIT_HOOK_FAULT = 1


def _configure_logging(verbose: bool) -> None:
    """Send structlog to stderr so ``--json`` output on stdout stays clean,
    with every string in an event (a rendered traceback too) redacted."""
    import logging

    import structlog

    from guard.redact import Redactor

    renderer = structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
    structlog.configure(
        processors=[structlog.processors.add_log_level, Redactor().processor, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO if verbose else logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )


def _load(path: str | None) -> Config:
    return load_config(path) if path else Config()


def _print_verdict(verdict: Verdict, out: TextIO, as_json: bool) -> None:
    if as_json:
        out.write(verdict.json_line() + "\n")
        return
    agent = verdict.agent or "-"
    shadow = "  (shadow: not delivered)" if verdict.shadow else ""
    out.write(
        f"seq {verdict.seq}  call {verdict.call_number}  {agent}  "
        f"{verdict.policy}/{verdict.action}  {verdict.tool} × {verdict.count}{shadow}\n"
    )
    for line in verdict.text.splitlines():
        out.write(f"    {line}\n")


@contextlib.contextmanager
def _session_logs(sources: Sequence[str], session: str | None) -> Iterator[list[Path]]:
    """Files as themselves; a Redis URL as its sessions exported for the
    duration (the fleet code is imported only then)."""
    if not any(s.startswith(("redis://", "rediss://", "unix://")) for s in sources):
        yield [Path(s) for s in sources]
        return
    from guard.fleet_cli import local_logs

    with contextlib.ExitStack() as stack:
        yield [path for source in sources for path in stack.enter_context(local_logs(source, session))]


def _cmd_replay(args: argparse.Namespace) -> int:
    import anyio

    from guard.verdicts import replay_log

    config = _load(args.config)
    out: TextIO = sys.stdout
    if args.log.startswith(("redis://", "rediss://", "unix://")) and not args.session:
        raise LogError("replay of a Redis URL needs --session ID")

    reader_left = False

    def emit(verdict: Verdict) -> None:
        nonlocal reader_left
        if reader_left:
            return
        try:
            _print_verdict(verdict, out, args.json)
        except BrokenPipeError:  # `| head` has what it wanted: finish quietly
            reader_left = True
            _quiet_stdout()

    with _session_logs([args.log], args.session) as (log,):
        outcome = anyio.run(lambda: replay_log(log, config, on_verdict=emit, live_asks=args.ask))
    report = outcome.report
    counts = outcome.counts()
    actions = ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items())) or "none"
    print(f"{report.summary()}; actions: {actions}", file=sys.stderr)
    for sample in report.samples[:10]:
        print(f"  skipped line {sample.line} ({sample.reason}): {sample.detail}", file=sys.stderr)
    if args.check:
        return _report_check(outcome)
    return EXIT_OK


def _quiet_stdout() -> None:
    """Point stdout at /dev/null once its reader has gone (``| head``), so
    later writes and Python's flush at exit do not fail again."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a real file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _report_check(outcome: ReplayOutcome) -> int:
    """Print every difference between the recorded and the regenerated guard
    actions to stderr; exit 1 if there is any."""
    err = sys.stderr
    for diff in outcome.differences:
        if diff.kind == "missing":
            err.write(f"check: seq {diff.seq}: the replay makes a {diff.what} the log lacks\n")
        elif diff.kind == "extra":
            err.write(f"check: seq {diff.seq}: the log records a {diff.what} the replay does not make\n")
        else:
            err.write(f"check: seq {diff.seq}: the recorded {diff.what} differs from the replay's\n")
        if diff.recorded is not None:
            err.write(f"  recorded:    {diff.recorded}\n")
        if diff.regenerated is not None:
            err.write(f"  regenerated: {diff.regenerated}\n")
    checked = ", ".join(f"{n} {what}{'s' if n != 1 else ''}" for what, n in sorted(outcome.checked.items()))
    if outcome.differences:
        kinds = Counter(d.kind for d in outcome.differences)
        detail = ", ".join(f"{kinds[k]} {k}" for k in ("missing", "extra", "changed") if kinds[k])
        err.write(
            f"check: {len(outcome.differences)} guard actions differ ({detail}); the log records {checked or 'none'}\n"
        )
        return EXIT_DIFFERENCE
    err.write(f"check: every guard action matches the log ({checked or 'none recorded'})\n")
    return EXIT_OK


def _cmd_check_config(args: argparse.Namespace) -> int:
    from guard.config import apply_environment, to_toml

    config = load_config(args.file)
    effective = apply_environment(config)  # validated either way, as a live guard would
    if args.toml:
        sys.stdout.write(to_toml(config))
    else:
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(effective), indent=2).decode() + "\n")
    return EXIT_OK


def _cmd_import(args: argparse.Namespace) -> int:
    import itertools

    from guard.importers import TranscriptError, open_sessions, write_log

    sessions = open_sessions(args.src, args.format)
    head = list(itertools.islice(sessions, 2))
    out = Path(args.output)
    for session in itertools.chain(head, sessions):
        # Several sessions (an OpenHands output.jsonl): one log each, beside OUT.
        path = out if len(head) == 1 else out.with_name(f"{out.stem}.{_safe(session.session)}{out.suffix or '.jsonl'}")
        try:
            summary = write_log(session, path)
        except FileExistsError:
            raise TranscriptError(f"{str(path)!r} already exists; choose another -o") from None
        skipped = ", ".join(f"{r} {n}" for r, n in sorted(summary.skipped.items())) or "nothing"
        print(
            f"{summary.path}: {session.format} session {summary.session}: {summary.events} events, "
            f"{summary.calls} tool calls, {summary.agents} agents; skipped {skipped}"
        )
    return EXIT_OK


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _progress_bar(stream: TextIO) -> Callable[[int, int, str], None]:
    def draw(done: int, total: int, current: str) -> None:
        width = 28
        filled = width * done // total if total else width
        name = current if len(current) <= 50 else "…" + current[-49:]
        stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {name}\x1b[K")
        if done == total:
            stream.write("\r\x1b[K")
        stream.flush()

    return draw


def _cmd_audit(args: argparse.Namespace) -> int:
    # Imported here: every start of the CLI (each Claude Code hook call among
    # them) would otherwise pay for the audit and its report.
    from guard.audit import Timeline, audit
    from guard.report import render_html, render_table

    config = load_config(args.config) if args.config else None
    timelines: list[Timeline] | None = [] if args.html else None
    progress = _progress_bar(sys.stderr) if sys.stderr.isatty() else None
    with _session_logs(args.paths, args.session) as paths:
        report = audit(paths, config, timelines=timelines, progress=progress)
    if args.json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        sys.stdout.write(render_table(report))
    if args.html:
        assert timelines is not None
        page = render_html(report, timelines).encode("utf-8")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        with os.fdopen(open_regular(args.html, flags, 0o600, what="HTML report"), "wb") as html:
            html.write(page)
        print(f"report: {args.html}", file=sys.stderr)
    return EXIT_DIFFERENCE if report.errors else EXIT_OK


def _cmd_hook(args: argparse.Namespace) -> int:
    """Claude Code reads exit code 2 as "block this tool call", so a guard
    fault here exits 1 (a non-blocking error) whatever went wrong, with one
    line on stderr naming it. The guard's own log lines are held until the
    answer is known and then written one line each, never as a traceback.

    structlog is imported only when something logs (or with ``-v``): every
    hook call would pay for it otherwise. stdout carries the answer and
    nothing else.
    """
    from bus._logging import configure_when_imported
    from guard.adapters.claude_hooks import answer_hook, default_state_dir, parse_payload

    held: list[structlog.testing.LogCapture] = []

    def hold_log_lines() -> None:
        import logging

        import structlog

        capture = structlog.testing.LogCapture()
        held.append(capture)
        structlog.configure(
            processors=[structlog.processors.add_log_level, _error_text, capture],
            wrapper_class=structlog.make_filtering_bound_logger(logging.INFO if args.verbose else logging.WARNING),
        )

    notes: list[str] = []  # said on success only: a failure is one line, its error

    def replaying(reason: str) -> None:
        notes.append(f"repeat-tool-guard hook: {one_line(reason, 1000)}")

    if args.verbose:
        hold_log_lines()
    else:
        configure_when_imported(hold_log_lines)
    answer_to = sys.stdout
    sys.stdout = sys.stderr
    try:
        config = _load(args.config)
        if args.shadow:
            config = shadowed(config)
        payload = parse_payload(sys.stdin.buffer.read())
        state_dir = Path(args.state_dir) if args.state_dir else default_state_dir()
        answer = answer_hook(payload, state_dir, config, log_actions=args.verbose, on_replay=replaying)
    except Exception as exc:
        print(f"repeat-tool-guard hook: {one_line(str(exc), 4000)}", file=sys.stderr)
        return EXIT_HOOK_FAULT
    finally:
        sys.stdout = answer_to
    for note in notes:
        print(note, file=sys.stderr)
    entries = [entry for capture in held for entry in capture.entries]
    if entries:
        from guard.redact import Redactor  # only when there is something to print: its rules cost a compile

        redact = Redactor()
        for entry in entries:
            level, event = entry.pop("log_level"), entry.pop("event")
            fields = " ".join(f"{key}={value!r}" for key, value in entry.items())
            print(one_line(redact(f"{level}: {event} {fields}"), 1000), file=sys.stderr)
    if answer:
        sys.stdout.write(msgspec.json.encode(answer).decode() + "\n")
    return EXIT_OK


def _error_text(_logger: object, _method: str, event: structlog.typing.EventDict) -> structlog.typing.EventDict:
    """An ``exc_info`` as ``error="Type: message"``: the hook's stderr gets no tracebacks."""
    exc_info = event.pop("exc_info", None)
    if exc_info:
        exc = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        event["error"] = f"{type(exc).__name__}: {exc}"
    return event


def _cmd_hook_settings(args: argparse.Namespace) -> int:
    import json

    from guard.adapters.claude_hooks import hook_settings

    script = Path(sys.executable).parent / "repeat-tool-guard"  # this installation's, not whatever PATH finds
    argv = [str(script)] if os.access(script, os.X_OK) else [sys.executable, "-m", "guard"]
    argv.append("hook")
    if args.config:
        _load(args.config)
        argv += ["--config", args.config if args.config in PRESETS else str(Path(args.config).absolute())]
    if args.shadow:
        argv.append("--shadow")
    if args.state_dir:
        argv += ["--state-dir", str(Path(args.state_dir).absolute())]
    sys.stdout.write(json.dumps(hook_settings(argv), indent=2) + "\n")
    return EXIT_OK


def _bench_moved() -> int:
    print(
        "repeat-tool-guard: the benchmarks are not part of the installed package any more; from a source "
        "checkout run `python -m benchmarks` (see docs/performance.md)",
        file=sys.stderr,
    )
    return EXIT_ERROR


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, told the terminal's width up front: left to
    find it, argparse imports shutil (and with it every compression module)
    for each parser it builds, on every start of the hook."""

    def __init__(self, prog: str) -> None:
        columns = os.environ.get("COLUMNS", "")
        try:
            width = int(columns) if columns.isdigit() else os.get_terminal_size(1).columns
        except OSError:  # not a terminal
            width = 80
        super().__init__(prog, width=width - 2)


def _parser(*, hook_only: bool = False) -> argparse.ArgumentParser:
    """The command line; with ``hook_only``, just ``hook`` (whose every start
    would otherwise pay for the importers that ``import`` lists)."""
    parser = argparse.ArgumentParser(
        prog="repeat-tool-guard",
        description="Stop AI agents from re-issuing the same tool call.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every guard action to stderr")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if not hook_only:
        _add_commands(commands)
    hook = commands.add_parser(
        "hook",
        formatter_class=_HelpFormatter,
        help="answer one Claude Code hook: the hook's JSON on stdin, the guard's answer on stdout",
        description="Configure as a command hook for UserPromptSubmit, PreToolUse, PostToolUse, "
        "PostToolUseFailure, SubagentStart, SubagentStop and SessionEnd. Exits 1 (never 2, which "
        "would block the tool) on any error of its own, a usage error included.",
    )
    hook.add_argument(
        "--config", metavar="FILE", help="a .toml or .yaml config, or a preset: recommended (default: remind only)"
    )
    hook.add_argument(
        "--shadow",
        action="store_true",
        help="record every action the guard would take, deliver none (nothing denied, nothing shown)",
    )
    hook.add_argument(
        "--state-dir",
        metavar="DIR",
        help="where per-session logs and snapshots live (default: $REPEAT_TOOL_GUARD_STATE, else "
        "$XDG_STATE_HOME/repeat-tool-guard, else ~/.local/state/repeat-tool-guard)",
    )
    hook.set_defaults(run=_cmd_hook)
    if not hook_only:
        # Listed so that help says where it went; main() answers it, options and all.
        commands.add_parser("bench", help="moved: run `python -m benchmarks` from a source checkout")
    return parser


def _add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from guard.importers import FORMATS

    replay = commands.add_parser("replay", help="replay a session log through a fresh guard")
    replay.add_argument("log", metavar="LOG", help="a session log (.jsonl), or a fleet's redis://HOST:PORT/DB")
    replay.add_argument("--session", metavar="ID", help="with a Redis URL: the session to replay")
    replay.add_argument(
        "--config", metavar="FILE", help="a .toml or .yaml config, or a preset: recommended (default: remind only)"
    )
    replay.add_argument("--json", action="store_true", help="one JSON object per action on stdout")
    replay.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if any guard action (message, denial, escalation, halt) the log records differs from the replay's",
    )
    replay.add_argument(
        "--ask",
        action="store_true",
        help="run rescue's ask command for escalations (spends money) instead of answering them from the log",
    )
    replay.set_defaults(run=_cmd_replay)

    imp = commands.add_parser(
        "import",
        help="convert another agent tool's transcript into a session log",
        description="Convert a transcript into a session log. A file holding several sessions "
        "(an OpenHands output.jsonl) becomes one log per session, named OUT.<session>.jsonl.",
    )
    imp.add_argument("src", metavar="SRC", help="a transcript file")
    imp.add_argument(
        "--from",
        dest="format",
        choices=list(FORMATS),
        metavar="FORMAT",
        help=f"its format, one of {', '.join(FORMATS)} (default: detected)",
    )
    imp.add_argument("-o", "--output", metavar="OUT.jsonl", required=True, help="the session log to write")
    imp.set_defaults(run=_cmd_import)

    aud = commands.add_parser(
        "audit",
        help="find loops in transcripts and show what each policy would have done",
        description="Import every transcript under PATH (files or directories), replay each session "
        "through every policy side by side, and report calls, runs, loops and each policy's first action. "
        "Exits 1 when some file could not be read (it is listed with its reason).",
    )
    aud.add_argument(
        "paths", metavar="PATH", nargs="+", help="transcript files or directories to walk, or a fleet's redis:// URL"
    )
    aud.add_argument("--session", metavar="ID", help="with a Redis URL: audit this session only (default: all)")
    aud.add_argument(
        "--config", metavar="FILE", help="a .toml or .yaml config, or a preset: recommended (default: every policy)"
    )
    aud.add_argument("--json", action="store_true", help="print the report as one JSON object")
    aud.add_argument("--html", metavar="REPORT.html", help="also write a self-contained HTML report")
    aud.set_defaults(run=_cmd_audit)

    check = commands.add_parser(
        "check-config",
        help="validate a config file (or a preset: recommended) and print the effective config",
        description="Validate FILE (.toml, .yaml) or name a preset (recommended) and print the effective "
        "config as JSON, or with --toml as a config file to start your own from.",
    )
    check.add_argument("file", metavar="FILE")
    check.add_argument("--toml", action="store_true", help="print it as a TOML config file, every key spelled out")
    check.set_defaults(run=_cmd_check_config)

    settings = commands.add_parser(
        "hook-settings",
        help="print the .claude/settings.json hooks that run this installation's hook command",
        description="Print the hooks block of .claude/settings.json for every hook event the guard needs. "
        "The command is this installation's repeat-tool-guard by absolute path (Claude Code's PATH may not "
        "have it), and when it cannot run Claude Code shows you a message saying the guard is off.",
    )
    settings.add_argument("--config", metavar="FILE", help="a config file the hook should use")
    settings.add_argument("--shadow", action="store_true", help="the hook runs in shadow mode (hook --shadow)")
    settings.add_argument("--state-dir", metavar="DIR", help="where the hook keeps per-session logs")
    settings.set_defaults(run=_cmd_hook_settings)

    from guard.server.command import add_command as add_serve_command  # the server itself loads only for `serve`

    add_serve_command(commands)
    _add_fleet_commands(commands)


def _cmd_export(args: argparse.Namespace) -> int:
    from guard.fleet_cli import export

    return export(args)


def _cmd_watch(args: argparse.Namespace) -> int:
    from guard.fleet_cli import watch

    return watch(args)


_FLEET_PREFIX = "rtg"


def _add_fleet_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser(
        "export",
        help="write a Redis-held session as a normal session log",
        description="Write one session of a fleet's Redis as a session log that replay and audit read.",
    )
    export.add_argument("source", metavar="REDIS_URL", help="redis://HOST:PORT/DB")
    export.add_argument("--session", required=True, help="the session id")
    export.add_argument(
        "-o", "--output", metavar="FILE.jsonl", required=True, help="the log to write (never overwritten)"
    )
    export.add_argument("--prefix", default=_FLEET_PREFIX, help=f"the fleet's key prefix (default {_FLEET_PREFIX})")
    export.set_defaults(run=_cmd_export)

    watch = commands.add_parser(
        "watch",
        help="follow every session's guard actions live, fleet-wide",
        description="Read the fleet's action stream through a consumer group (several watchers in one "
        "group share the actions; separate groups each see all of them). Ctrl-C ends it.",
    )
    watch.add_argument("source", metavar="REDIS_URL", help="redis://HOST:PORT/DB")
    watch.add_argument("--json", action="store_true", help="one JSON object per action")
    watch.add_argument("--group", default=f"watch-{os.getpid()}", help="the consumer group (default: a new one)")
    watch.add_argument("--consumer", default="watcher", help="this watcher's name in the group")
    watch.add_argument("--from-start", action="store_true", help="a new group starts at the oldest kept action")
    watch.add_argument("--count", type=int, default=None, help="stop after this many actions")
    watch.add_argument("--prefix", default=_FLEET_PREFIX, help=f"the fleet's key prefix (default {_FLEET_PREFIX})")
    watch.set_defaults(run=_cmd_watch)


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the first word that is no option)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command(argv)
    if command == "bench":
        return _bench_moved()
    hook = command == "hook"
    try:
        args = _parser(hook_only=hook).parse_args(argv)
    except SystemExit as exit_:
        if hook and exit_.code not in (0, None):
            return EXIT_HOOK_FAULT  # a typo in settings.json must not block every tool call
        raise
    if hook:
        if args.verbose:
            _configure_logging(verbose=True)
        return int(args.run(args))
    _configure_logging(args.verbose)
    from guard.importers import TranscriptError, UnknownFormatError

    try:
        code: int = args.run(args)
        sys.stdout.flush()  # a reader that left shows here, not in Python's flush at exit
    except UnknownFormatError as exc:
        # Every format tried and why not, a line each: the list outgrows one line.
        where = one_line(repr(str(exc.path)), 300)
        print(f"repeat-tool-guard: {where} is not a transcript format this tool knows; tried:", file=sys.stderr)
        for name, why in exc.tried:
            print(f"  {name}: {one_line(why, 300)}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # stdout's reader left early (`| head`): not an error of ours
        _quiet_stdout()
        return EXIT_OK
    except (ConfigError, LogError, TranscriptError, OSError) as exc:
        print(f"repeat-tool-guard: {one_line(str(exc), 4000)}", file=sys.stderr)
        return EXIT_ERROR
    except (ValueError, RecursionError, MemoryError) as exc:
        # What a bad argument provokes below the checks (a NUL in a path, a
        # structure too deep or too big): still one line, not a traceback.
        if args.verbose:
            raise
        print(f"repeat-tool-guard: {type(exc).__name__}: {one_line(str(exc), 4000)}", file=sys.stderr)
        return EXIT_ERROR
    return code
