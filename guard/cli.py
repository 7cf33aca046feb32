"""The ``repeat-tool-guard`` command line.

Exit codes: 0 success, 1 ``replay --check`` found a difference or ``audit``
could not read some file, 2 a usage, config or file error (the message names
what was wrong, on one line). ``hook`` exits 1 on any error of its own,
usage errors included, since Claude Code reads 2 as "block the tool call".

Claude Code starts ``hook`` for every hook event, so this module imports
nothing but ``os`` and ``sys`` itself; each command imports what it needs.
A ``hook`` with a server to forward to (``--serve``, ``$REPEAT_TOOL_GUARD_SERVE``)
imports only the forwarding client until the server fails to answer.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterator, Sequence
    from contextlib import AbstractContextManager
    from pathlib import Path
    from typing import Any, TextIO

    import structlog

    from bus import ReadReport
    from guard.config import Config
    from guard.verdicts import ReplayOutcome, Verdict

__all__ = ["main"]

EXIT_OK = 0
EXIT_DIFFERENCE = 1
EXIT_ERROR = 2
EXIT_HOOK_FAULT = 1


def _configure_logging(verbose: bool) -> None:
    """Send structlog to stderr so ``--json`` output on stdout stays clean,
    with every string in an event (a rendered traceback too) redacted and
    its control characters escaped."""
    import logging

    import structlog

    from guard._text import terminal_text
    from guard.redact import Redactor

    renderer = structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)

    def escaped(logger: object, method: str, line: Any) -> str:  # the rendered line, as the terminal gets it
        return terminal_text(str(line))

    structlog.configure(
        processors=[structlog.processors.add_log_level, Redactor().processor, renderer, escaped],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO if verbose else logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )


def _load(path: str | None) -> Config:
    from guard.config import Config, load_config

    return load_config(path) if path else Config()


def _print_verdict(verdict: Verdict, out: TextIO, as_json: bool) -> None:
    if as_json:
        out.write(verdict.json_line() + "\n")
        return
    from guard._text import terminal_text

    agent = verdict.agent or "-"
    shadow = "  (shadow: not delivered)" if verdict.shadow else ""
    lines = [
        f"seq {verdict.seq}  call {verdict.call_number}  {agent}  "
        f"{verdict.policy}/{verdict.action}  {verdict.tool} × {verdict.count}{shadow}",
        *(f"    {line}" for line in verdict.text.splitlines()),
    ]
    out.write(terminal_text("\n".join(lines)) + "\n")


def _session_logs(
    sources: Sequence[str],
    session: str | None,
    on_unreadable: Callable[[str, str], None] | None = None,
    on_exported: Callable[[Path, str, ReadReport], None] | None = None,
) -> AbstractContextManager[list[Path]]:
    """Files as themselves; a Redis URL as its sessions exported for the
    duration (the fleet code is imported only then). A session of a fleet
    that cannot be read is told to ``on_unreadable``, each one exported to
    ``on_exported`` (see ``local_logs``)."""
    import contextlib

    return contextlib.contextmanager(_exported)(sources, session, on_unreadable, on_exported)


def _exported(
    sources: Sequence[str],
    session: str | None,
    on_unreadable: Callable[[str, str], None] | None,
    on_exported: Callable[[Path, str, ReadReport], None] | None,
) -> Iterator[list[Path]]:
    import contextlib
    from pathlib import Path

    from bus.redis_log import is_redis

    if not any(is_redis(s) for s in sources):
        if session is not None:
            raise _UsageError("--session picks a session of a Redis URL; a log file holds one session already")
        yield [Path(s) for s in sources]
        return
    from guard.fleet_cli import local_logs

    with contextlib.ExitStack() as stack:
        yield [
            path
            for source in sources
            for path in stack.enter_context(
                local_logs(source, session, on_unreadable=on_unreadable, on_exported=on_exported)
            )
        ]


def _check_report_path(report: str, sources: Sequence[str]) -> None:
    """Refuse, before an audit starts, an HTML report that would replace one
    of the transcripts it reads, write through a symbolic link, or could
    not be written (``_check_report_opens``); a report that is there already
    is replaced, as a report is."""
    import stat

    from guard.audit import find_transcripts

    try:
        info = os.lstat(report)
    except OSError:
        _check_report_opens(report, exists=False)  # not there yet, or not reachable: opening it says why
        return
    if stat.S_ISLNK(info.st_mode):
        raise _UsageError(f"--html {report!r} is a symbolic link; it is not written through")
    from bus.redis_log import is_redis

    files = find_transcripts(s for s in sources if not is_redis(s))
    for path, _ in files:
        try:
            other = os.stat(path)
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (info.st_dev, info.st_ino):
            raise _UsageError(f"--html {report!r} is one of the transcripts audited; name another file")
    _check_report_opens(report, exists=True)


def _check_report_opens(report: str, *, exists: bool) -> None:
    """Open the HTML report for writing as it will be written (beside it,
    then renamed over it), and close it again, before the audit starts: a
    directory, a missing folder, a file or a folder without write
    permission (a file the kernel provides, under /proc or /sys) is one
    line and exit 2 before the audit's work, not after it. It changes
    nothing: an existing report is not truncated, and the file made beside
    it is removed again."""
    from bus import open_regular

    if exists:  # a directory, a file without write permission
        os.close(open_regular(report, os.O_WRONLY, 0o600, what="HTML report", follow_symlinks=False))
    temporary = _report_temporary(report)
    try:
        os.close(open_regular(temporary, _NEW_FILE, 0o600, what="HTML report", follow_symlinks=False))
    except OSError as exc:  # where the page is written first, but named as the report
        why = f"{exc.strerror}: no new file can be made beside it" if exists else exc.strerror
        raise type(exc)(exc.errno, why, report) from None
    os.unlink(temporary)


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL


def _report_temporary(report: str) -> str:
    """Where the HTML report is written before it is renamed over ``report``."""
    return f"{report}.{os.getpid()}.tmp"


def _cmd_replay(args: argparse.Namespace) -> int:
    import anyio

    from bus import LogError
    from bus.redis_log import is_redis
    from guard.verdicts import replay_log

    config = _load(args.config)
    out: TextIO = sys.stdout
    if is_redis(args.log) and not args.session:
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
        # printed as they come: kept only to be compared
        outcome = anyio.run(lambda: replay_log(log, config, on_verdict=emit, live_asks=args.ask, keep=args.check))
    report = outcome.report
    counts = outcome.counts()
    actions = ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items())) or "none"
    print(f"{report.summary()}; actions: {actions}", file=sys.stderr)
    if report.samples:
        from guard._text import one_line

    for sample in report.samples[:10]:  # the detail quotes the log: shown escaped and cut
        print(f"  skipped line {sample.line} ({sample.reason}): {one_line(sample.detail, 300)}", file=sys.stderr)
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
    from collections import Counter

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
    if outcome.unanswered:
        err.write(
            f"check: {outcome.unanswered} call{'s' if outcome.unanswered != 1 else ''} the replay denies"
            " never got a result in the log (cancelled while the guard decided, or the session was cut off):"
            " not compared\n"
        )
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
    import msgspec

    from guard.config import apply_environment, load_config, to_toml
    from guard.policies.registry import BUILTIN, build_policies, installed_plugins

    config = load_config(args.file)
    effective = apply_environment(config)  # validated either way, as a live guard would
    enabled = {policy.name for policy in build_policies(effective)}
    found = {policy.name: "built in" for policy in BUILTIN}
    for name, entry in installed_plugins().items():
        dist = entry.dist
        found[name] = f"{dist.name} {dist.version}" if dist is not None else entry.value
    for name, origin in found.items():
        sys.stderr.write(f"policy {name} ({origin}): {'on' if name in enabled else 'off'}\n")
    if args.toml:
        sys.stdout.write(to_toml(config))
    else:
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(effective), indent=2).decode() + "\n")
    return EXIT_OK


def _cmd_import(args: argparse.Namespace) -> int:
    import itertools
    from pathlib import Path

    from guard._text import one_line
    from guard.importers import ImportReport, TranscriptError, open_sessions, write_log

    sessions = open_sessions(args.src, args.format)
    head = list(itertools.islice(sessions, 2))
    if not head:  # a goose database whose one session never got a message, say
        raise TranscriptError(f"{str(args.src)!r} holds no session with anything to import; nothing written")
    out = Path(args.output)
    taken: set[str] = set()
    written: list[Path] = []
    shared: ImportReport | None = None  # the sessions of one file may share a report: each names its own problems
    listed = 0
    for session in itertools.chain(head, sessions):
        if session.report is not shared:
            shared, listed = session.report, 0
        # Several sessions (an OpenHands output.jsonl): one log each, beside OUT.
        path = (
            out
            if len(head) == 1
            else out.with_name(f"{out.stem}.{_log_name(session.session, taken)}{out.suffix or '.jsonl'}")
        )
        try:
            summary = write_log(session, path)
        except FileExistsError:
            # The set is written again under another -o: the logs this run
            # wrote before would only be copies beside the old ones.
            for done in written:
                done.unlink(missing_ok=True)
            n = len(written)
            removed = f" (the {n} log{'s' if n != 1 else ''} written before it removed)" if n else ""
            raise TranscriptError(f"{str(path)!r} already exists; choose another -o{removed}") from None
        written.append(path)
        skipped = ", ".join(f"{r} {n}" for r, n in sorted(summary.skipped.items())) or "nothing"
        print(
            f"{one_line(str(summary.path), 1000)}: {session.format} session {one_line(summary.session)}: "
            f"{summary.events} events, "
            f"{summary.calls} tool calls, {summary.agents} agents; skipped {skipped}"
        )
        _print_problems(session.report.problems[listed:])
        listed = len(session.report.problems)
    return EXIT_OK


def _print_problems(problems: list[str]) -> None:
    """Where and why an import skipped what it could not use, on stderr
    below the session's line, each on one line (``ImportReport.problems``,
    which keeps the first twenty and where the import stopped)."""
    from guard._text import one_line

    for problem in problems:
        print(f"  {one_line(problem, 1000)}", file=sys.stderr)


def _log_name(session: str, taken: set[str]) -> str:
    """A file name part for ``session`` that no other session of this import
    has: the id itself when it is short and made of letters, digits, ``-``,
    ``_`` and ``.``; else those characters of it (at most 100) and a digest
    of the whole id, so ``a b`` and ``a\nb`` stay apart; a ``-N`` is added
    for an id seen again."""
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in session)
    if name != session or len(name) > 100 or name.strip(".") == "":
        from guard.fingerprint import blake2b

        digest = blake2b(session.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
        name = f"{name[:100]}-{digest}"
    unique, number = name, 1
    while unique in taken:
        number += 1
        unique = f"{name}-{number}"
    taken.add(unique)
    return unique


def _progress_bar(stream: TextIO) -> Callable[[int, int, str], None]:
    """A progress callback drawing one bar line on ``stream``, the current
    file's name at its end: one line, its control characters escaped
    (``one_line``), cut to its last 50 characters."""
    from guard._text import one_line

    def draw(done: int, total: int, current: str) -> None:
        width = 28
        filled = width * done // total if total else width
        name = one_line(current, sys.maxsize)
        name = name if len(name) <= 50 else "…" + name[-49:]
        stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {name}\x1b[K")
        if done == total:
            stream.write("\r\x1b[K")
        stream.flush()

    return draw


def _cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - a platform without affinity (macOS)
        return os.cpu_count() or 1


def _positive(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def _cmd_audit(args: argparse.Namespace) -> int:
    # Imported here: every start of the CLI (each Claude Code hook call among
    # them) would otherwise pay for the audit and its report.
    import contextlib
    import functools

    import msgspec

    from bus import open_regular
    from guard._text import one_line, terminal_text
    from guard.audit import FileError, Origin, Timeline, audit
    from guard.config import load_config
    from guard.report import render_html, render_table

    config = load_config(args.config) if args.config else None
    if args.html:
        _check_report_path(args.html, args.paths)
    timelines: list[Timeline] | None = [] if args.html else None
    progress = _progress_bar(sys.stderr) if sys.stderr.isatty() else None
    unreadable: list[FileError] = []  # sessions of a fleet: errors of the audit, as files are
    origins: dict[Path, Origin] = {}

    def told(where: str, why: str) -> None:
        unreadable.append(FileError(path=where, reason=why))

    def exported(path: Path, session: str, read: ReadReport) -> None:
        origins[path] = Origin(label=session, skipped=dict(read.skipped_by_reason))

    with _session_logs(args.paths, args.session, told, exported) as paths:
        report = audit(
            paths,
            config,
            timelines=timelines,
            progress=progress,
            jobs=args.jobs or _cpus(),
            worker_setup=functools.partial(_configure_logging, args.verbose),
            origins=origins,
        )
    if unreadable:
        totals = msgspec.structs.replace(report.totals, unreadable=report.totals.unreadable + len(unreadable))
        report = msgspec.structs.replace(report, errors=[*unreadable, *report.errors], totals=totals)
    if args.json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
        for error in report.errors:  # the report lists them too; a reader of the terminal sees why it failed
            where, why = one_line(error.path, 1000), one_line(error.reason, 3000)  # a long path cut, not the reason
            print(f"repeat-tool-guard audit: could not read {where}: {why}", file=sys.stderr)
    else:
        sys.stdout.write(terminal_text(render_table(report)))
    _say_what_was_passed_over(args.paths)
    if args.html:
        assert timelines is not None
        page = render_html(report, timelines).encode("utf-8")
        # written beside it and renamed over it: a full disk leaves the last report whole, not a page
        # cut short, and a file the kernel provides (/proc, /sys) is never written into
        temporary = _report_temporary(args.html)
        try:
            report_fd = open_regular(temporary, _NEW_FILE, 0o600, what="HTML report", follow_symlinks=False)
            try:
                with os.fdopen(report_fd, "wb") as html:
                    html.write(page)
                os.replace(temporary, args.html)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError as exc:  # a full disk, a directory it cannot write in: named, as open's errors are
            raise type(exc)(exc.errno, exc.strerror, args.html) from None
        print(f"report: {args.html}", file=sys.stderr)
    return EXIT_DIFFERENCE if report.errors else EXIT_OK


def _say_what_was_passed_over(paths: list[str]) -> None:
    """For a folder that held no transcript audit reads but other files (a
    folder of logs named ``*.log``), say so on stderr: "0 sessions in 0
    files" alone reads as an empty folder."""
    from pathlib import Path

    from bus.redis_log import is_redis
    from guard._text import one_line
    from guard.audit import TRANSCRIPT_SUFFIXES

    for raw in paths:
        folder = Path(raw).expanduser()
        if is_redis(raw) or not folder.is_dir():
            continue
        others = [Path(root) / name for root, _, files in os.walk(folder) for name in sorted(files)]
        if others and not any(file.name.endswith(TRANSCRIPT_SUFFIXES) for file in others):
            print(
                f"repeat-tool-guard audit: {one_line(str(folder), 1000)} holds no file audit reads (.jsonl, .json, "
                f".traj, goose's sessions.db); passed over {len(others)} other files, such as "
                f"{one_line(others[0].name, 200)}: name a file to audit it whatever its name",
                file=sys.stderr,
            )


def _cmd_hook(args: argparse.Namespace) -> int:
    """Claude Code reads exit code 2 as "block this tool call", so a guard
    fault here exits 1 (a non-blocking error) whatever went wrong, with one
    line on stderr naming it. The guard's own log lines are held until the
    answer is known and then written one line each, never as a traceback.

    structlog is imported only when something logs (or with ``-v``): every
    hook call would pay for it otherwise. stdout carries the answer and
    nothing else.
    """
    from pathlib import Path

    _import_msgspec_alone()
    import msgspec

    from bus._logging import configure_when_imported
    from guard._text import error_text, one_line
    from guard.adapters.claude_hooks import answer_hook, default_state_dir, parse_payload
    from guard.adapters.hook_runtimes import RUNTIMES, check_event
    from guard.hook_forward import read_payload

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
    decides = False  # only a call the CLI waits on is abandoned: a result or a turn's end happened anyway

    def abandoned() -> bool:
        # the process that started this one gone (this one adopted): the CLI gave up and killed its shell
        return decides and os.getppid() != args.parent

    try:
        config = _load(args.config)
        if args.shadow:
            from guard.config import shadowed

            config = shadowed(config)
        payload = parse_payload(read_payload() if args.raw is None else args.raw)
        state_dir = Path(args.state_dir) if args.state_dir else default_state_dir()
        runtime = RUNTIMES[args.agent]
        check_event(runtime, payload)
        decides = runtime.seams.get(str(payload.get("hook_event_name"))) == "pre"
        answer = answer_hook(
            payload,
            state_dir,
            config,
            log_actions=args.verbose,
            on_replay=replaying,
            runtime=runtime,
            abandoned=abandoned,
        )
    except Exception as exc:
        _warn(f"repeat-tool-guard hook: {error_text(exc, 4000)}")
        return EXIT_HOOK_FAULT
    finally:
        sys.stdout = answer_to
    for note in notes:
        _warn(note)
    entries = [entry for capture in held for entry in capture.entries]
    if entries:
        from guard.redact import Redactor  # only when there is something to print: its rules cost a compile

        redact = Redactor()
        for entry in entries:
            level, event = entry.pop("log_level"), entry.pop("event")
            fields = " ".join(f"{key}={value!r}" for key, value in entry.items())
            _warn(one_line(redact(f"{level}: {event} {fields}"), 1000))
    if answer:
        try:
            sys.stdout.write(msgspec.json.encode(answer).decode() + "\n")
            sys.stdout.flush()
        except (OSError, ValueError, AttributeError) as exc:  # a full disk, a closed pipe, no stdout at all
            reason = "it is closed" if sys.stdout is None else str(exc)
            _drop_stdout()
            _warn(f"repeat-tool-guard hook: the answer could not be written to stdout: {reason}")
            return EXIT_HOOK_FAULT
    return EXIT_OK


def _warn(line: str) -> None:
    """One line on stderr, if there is one: with stderr closed, ``print``
    would write to stdout, which carries the hook's answer alone."""
    if sys.stderr is None:
        return
    try:  # noqa: SIM105 - not contextlib: a forwarding hook imports this module, and contextlib costs it ms
        print(line, file=sys.stderr)
    except (OSError, ValueError):
        pass


def _drop_stdout() -> None:
    """Point stdout at the null device, so what is left in its buffer is not
    written again (and reported) when the interpreter exits."""
    try:
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def _error_text(_logger: object, _method: str, event: structlog.typing.EventDict) -> structlog.typing.EventDict:
    """An ``exc_info`` as ``error="Type: message"``: the hook's stderr gets no tracebacks."""
    exc_info = event.pop("exc_info", None)
    if exc_info:
        exc = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        event["error"] = f"{type(exc).__name__}: {exc}"
    return event


def _hook_argv(args: argparse.Namespace) -> list[str]:
    """This installation's ``hook`` command for ``args.agent``, with the
    config (a preset by its name, a file by its absolute path) and state directory."""
    from pathlib import Path

    from guard.config import PRESETS

    if args.serve:
        from guard.hook_forward import forwarding_argv

        argv = forwarding_argv()
    else:
        script = Path(sys.executable).parent / "repeat-tool-guard"  # this installation's, not whatever PATH finds
        argv = [str(script)] if os.access(script, os.X_OK) else [sys.executable, "-P", "-m", "guard"]
    argv.append("hook")
    if args.agent != "claude-code":
        argv += ["--agent", args.agent]
    if args.config:
        _load(args.config)
        argv += ["--config", args.config if args.config in PRESETS else str(Path(args.config).absolute())]
    if args.shadow:
        argv.append("--shadow")
    if args.state_dir:
        argv += ["--state-dir", str(Path(args.state_dir).absolute())]
    if args.serve:
        from guard.hook_forward import check_target

        if args.shadow:
            raise _UsageError(
                "--shadow with --serve: a forwarded hook is answered by the server in its own mode "
                "(start it with serve --shadow and leave --shadow out here)"
            )
        try:
            argv += ["--serve", check_target(args.serve)]
        except ValueError as exc:
            raise _UsageError(str(exc)) from None
    return argv


def _settings_for(args: argparse.Namespace) -> dict[str, object]:
    from guard.adapters.claude_hooks import check_env_name, forward_command, hook_settings, http_hook_settings
    from guard.adapters.hook_runtimes import RUNTIMES

    runtime = RUNTIMES[args.agent]
    if args.token_env is not None:
        if args.http is None:
            raise _UsageError("--token-env VAR goes with --http URL: it names the server's bearer token")
        try:
            check_env_name(args.token_env)
        except ValueError as exc:
            raise _UsageError(str(exc)) from None
    if args.http is not None and not _is_http_url(args.http):
        raise _UsageError(f"--http {args.http!r}: must be the server's http:// or https:// URL (http://127.0.0.1:8787)")
    if args.mcp and (args.agent != "codex" or args.http is None):
        raise _UsageError("--mcp: Codex's mcp_tool hooks, with --agent codex and --http URL (the server's)")
    if args.http is None:
        return hook_settings(_hook_argv(args), runtime)
    if args.config or args.state_dir or args.shadow:
        raise _UsageError("--http: the server's own --config, --shadow and --state-dir apply; pass them to `serve`")
    if args.serve:
        raise _UsageError("--serve with --http: --http sends every event to the server itself; leave --serve out")
    url = args.http.rstrip("/")
    if not url.endswith(f"/hooks/{args.agent}") and not args.mcp:
        url += f"/hooks/{args.agent}"
    if args.mcp:
        from guard.server.mcp_hooks import mcp_hook_settings

        return mcp_hook_settings()
    if args.agent == "claude-code":
        return http_hook_settings(url, token_env=args.token_env)
    return runtime.settings({"type": "command", "command": forward_command(url, token_env=args.token_env)})


def _is_http_url(url: str) -> bool:
    """Whether ``url`` is an http(s) URL whose every character is safe in a
    shell command and a settings file as it is (no quotes, backslashes,
    backticks, ``$`` or whitespace)."""
    import re

    return re.fullmatch(r"https?://[A-Za-z0-9.:\[\]-]+(?:/[A-Za-z0-9._~:/?#@!&()*+,;=%-]*)?", url) is not None


class _UsageError(ValueError):
    """Options that do not go together, or name what the command cannot use:
    one line on stderr and exit 2, like a config that does not load."""


def _cmd_hook_settings(args: argparse.Namespace) -> int:
    import json

    settings = _settings_for(args)
    sys.stdout.write(json.dumps(settings, indent=2) + "\n")
    if args.mcp:
        print(f"repeat-tool-guard: and in Codex's config.toml:\n{_mcp_server_toml(args)}", file=sys.stderr)
    return EXIT_OK


def _mcp_server_toml(args: argparse.Namespace) -> str:
    from guard.server.mcp_hooks import mcp_server_toml

    return mcp_server_toml(args.http.rstrip("/").removesuffix("/mcp") + "/mcp", args.token_env)


def _add_settings_options(parser: argparse.ArgumentParser) -> None:
    from guard.hook_forward import HOOK_AGENTS

    parser.add_argument(
        "--agent",
        choices=HOOK_AGENTS,
        default="claude-code",
        metavar="CLI",
        help="claude-code (default), codex or gemini-cli",
    )
    parser.add_argument("--config", metavar="FILE", help="a config file, or a preset: recommended")
    parser.add_argument("--shadow", action="store_true", help="the hook runs in shadow mode (hook --shadow)")
    parser.add_argument("--state-dir", metavar="DIR", help="where the hook keeps per-session logs")
    parser.add_argument(
        "--http",
        metavar="URL",
        help="send every event to a running `serve` at URL instead of starting a hook process "
        "(Codex and Gemini CLI: a curl command hook)",
    )
    parser.add_argument(
        "--serve",
        metavar="URL",
        help="the hook command forwards each event to a running `serve` at URL (see hook --serve), "
        "in-process when none answers",
    )
    parser.add_argument("--token-env", metavar="VAR", help="with --http: the variable holding serve's bearer token")
    parser.add_argument(
        "--mcp",
        action="store_true",
        help="with --agent codex --http URL: Codex mcp_tool hooks calling serve's /mcp (no process per event)",
    )


def _cmd_install(args: argparse.Namespace) -> int:
    import contextlib
    import json
    from pathlib import Path

    from guard.adapters.hook_install import (
        SettingsFileError,
        add_toml_table,
        check_toml,
        install,
        installed_elsewhere,
        remove_toml_table,
        settings_file,
    )
    from guard.adapters.hook_runtimes import RUNTIMES
    from guard.server.mcp_hooks import MCP_SERVER

    def done(file: Path, what: str) -> None:
        print(f"repeat-tool-guard: {file}: {what}", file=sys.stderr)

    table = f"[mcp_servers.{MCP_SERVER}]"
    try:
        path = Path(args.file) if args.file else settings_file(args.agent, args.scope)
        settings = _settings_for(args)
        other: Path | None = None
        if not args.file and not args.uninstall:
            scope = "project" if args.scope == "user" else "user"
            with contextlib.suppress(SettingsFileError):  # a home the other scope cannot be found in: none there
                other = settings_file(args.agent, scope)
            if other is not None and installed_elsewhere(path, other, settings):
                raise SettingsFileError(
                    f"{other} already runs the guard's hooks, with other options: the CLI would run both, "
                    f"and count every call twice. Take them out there first (repeat-tool-guard install "
                    f"--agent {args.agent} --{scope} --uninstall, or by hand), or install with the same options"
                )
        config = path.with_name("config.toml")
        if args.agent == "codex" and (args.mcp or args.uninstall):
            check_toml(config)  # before the hooks file changes: both are changed, or neither
        added = ""
        if args.mcp and not args.uninstall:
            # the server first: hooks that call tools of a server Codex does not know would fail every call
            added = add_toml_table(config, _mcp_server_toml(args))
            done(config, added)
        try:
            what = install(path, settings, uninstall=args.uninstall)
            if not args.uninstall:
                if args.scope == "project" and not args.file:
                    what += RUNTIMES[args.agent].project_trust.format(project=json.dumps(str(Path.cwd())))
                what += RUNTIMES[args.agent].hook_trust
            done(path, what)
        except SettingsFileError:  # both files changed or neither: the table added for them goes again
            if added.endswith(" added"):
                done(config, remove_toml_table(config, table))
            raise
        if args.uninstall and args.agent == "codex" and config.exists():
            done(config, remove_toml_table(config, table))
    except SettingsFileError as exc:
        raise _UsageError(str(exc)) from None
    return EXIT_OK


def _help_formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's formatter, told the terminal's width up front: left to
    find it, argparse imports shutil (and with it every compression module)
    for each parser it builds, on every start of the hook."""
    import argparse

    columns = os.environ.get("COLUMNS", "")
    try:
        width = int(columns) if columns.isdecimal() else os.get_terminal_size(1).columns
    except OSError:  # not a terminal
        width = 80
    return argparse.HelpFormatter(prog, width=width - 2)


def _parser(*, hook_only: bool = False) -> argparse.ArgumentParser:
    """The command line; with ``hook_only``, just ``hook`` (whose every start
    would otherwise pay for the importers that ``import`` lists)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="repeat-tool-guard",
        description="Stop AI agents from re-issuing the same tool call.",
        formatter_class=_help_formatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every guard action to stderr")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if not hook_only:
        _add_commands(commands)
    hook = commands.add_parser(
        "hook",
        formatter_class=_help_formatter,
        help="answer one agent CLI hook (Claude Code, Codex, Gemini CLI): its JSON on stdin, the answer on stdout",
        description="Configure as a command hook for the events `hook-settings --agent NAME` lists. "
        "Exits 1 (never 2, which would block the tool) on any error of its own, a usage error included.",
    )
    from guard.hook_forward import HOOK_AGENTS

    hook.add_argument(
        "--agent",
        choices=HOOK_AGENTS,
        default="claude-code",
        metavar="CLI",
        help="the CLI whose hook this is: claude-code (default), codex or gemini-cli",
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
    hook.add_argument(
        "--serve",
        metavar="URL",
        help="forward the event to a running `serve` at unix:PATH or http://127.0.0.1:PORT (the --agent's route) and "
        "print its answer; in-process when none answers (default: $REPEAT_TOOL_GUARD_SERVE, else in-process)",
    )
    hook.set_defaults(run=_cmd_hook, raw=None)
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
    aud.add_argument(
        "--jobs",
        metavar="N",
        type=_positive,
        default=None,
        help="files audited at once, each in its own process (default: the CPUs this process may use)",
    )
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
        help="print the hooks an agent CLI needs to run the guard (Claude Code, Codex, Gemini CLI)",
        description="Print the hooks block for every hook event the guard needs: for Claude Code "
        ".claude/settings.json's, for Codex hooks.json's, for Gemini CLI settings.json's. The command is "
        "this installation's repeat-tool-guard by absolute path (the CLI's PATH may not have it); when it "
        "cannot run, the call goes ahead and the CLI shows a message saying the guard is off.",
    )
    _add_settings_options(settings)
    settings.set_defaults(run=_cmd_hook_settings)

    install = commands.add_parser(
        "install",
        help="add the guard's hooks to an agent CLI's settings file (or remove them: --uninstall)",
        description="Merge what hook-settings prints into the CLI's settings file, leaving every other hook "
        "and setting as it is; the file is backed up first (FILE.bak-<time>) and running it twice changes "
        "nothing. --user (default): $CLAUDE_CONFIG_DIR/settings.json (~/.claude), $CODEX_HOME/hooks.json (~/.codex), "
        "$GEMINI_CLI_HOME/.gemini/settings.json (~); --project: .claude/settings.json, .codex/hooks.json, "
        ".gemini/settings.json "
        "under the current directory.",
    )
    _add_settings_options(install)
    scope = install.add_mutually_exclusive_group()
    scope.add_argument("--user", dest="scope", action="store_const", const="user", help="the user's settings (default)")
    scope.add_argument("--project", dest="scope", action="store_const", const="project", help="this project's settings")
    scope.add_argument("--file", metavar="FILE", help="this settings file instead")
    install.add_argument("--uninstall", action="store_true", help="remove the guard's hooks instead")
    install.set_defaults(run=_cmd_install, scope="user")

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
    watch.add_argument(
        "--group", default=None, help="the consumer group (default: one of this run's own, removed when it ends)"
    )
    watch.add_argument("--consumer", default="watcher", help="this watcher's name in the group")
    watch.add_argument("--from-start", action="store_true", help="a new group starts at the oldest kept action")
    watch.add_argument("--count", type=_positive, default=None, help="stop after this many actions")
    watch.add_argument("--prefix", default=_FLEET_PREFIX, help=f"the fleet's key prefix (default {_FLEET_PREFIX})")
    watch.set_defaults(run=_cmd_watch)


def _forwarded(target: str, raw: bytes, route: str) -> bool:
    """Whether the server at ``target`` answered the hook event ``raw`` on
    ``route`` (its answer is then on stdout); when it did not, a reason
    other than "nothing listens there" is one line on stderr, and the hook
    answers in-process."""
    from guard.hook_forward import ForwardError, forward, shown_target

    try:
        answer = forward(target, raw, route)
    except (ForwardError, ValueError) as exc:
        print(f"repeat-tool-guard hook: {exc}; answering in-process", file=sys.stderr)
        return False
    except Exception as exc:  # whatever went wrong on the way, the event is still answered
        print(
            f"repeat-tool-guard hook: --serve {shown_target(target)}: {type(exc).__name__}: {exc}; "
            "answering in-process",
            file=sys.stderr,
        )
        return False
    if answer is None:
        return False
    if answer.strip() != b"{}":
        sys.stdout.buffer.write(answer.strip() + b"\n")
    return True


def _import_msgspec_alone() -> None:
    """Import msgspec without ``typing_extensions``, which it only tries:
    without it msgspec reads type hints with ``typing``'s own functions,
    complete on the Pythons this package supports. ``typing_extensions`` and
    the ``inspect`` module it loads are about a fifth of a hook process's
    start, paid on every tool call. Once msgspec is in, ``typing_extensions``
    imports normally again (a plugin policy may use it)."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # its import now raises ImportError
    try:
        import msgspec  # noqa: F401
    except ImportError:  # a msgspec that needs it: the caller's own import loads both
        pass
    finally:
        del sys.modules["typing_extensions"]


# What each value naming a file, a directory, a URL or a name is called on the command line.
_NAMED_VALUES = {
    "log": "LOG",
    "src": "SRC",
    "paths": "PATH",
    "file": "FILE",
    "source": "REDIS_URL",
    "output": "-o",
    "html": "--html",
    "config": "--config",
    "state_dir": "--state-dir",
    "token_file": "--token-file",
    "uds": "--uds",
    "session": "--session",
    "group": "--group",
    "consumer": "--consumer",
    "prefix": "--prefix",
    "host": "--host",
    "allow_host": "--allow-host",
    "allow_origin": "--allow-origin",
    "redis": "--redis",
    "redis_prefix": "--redis-prefix",
}


def _refuse_empty(args: argparse.Namespace) -> None:
    """An empty value names nothing: a usage error, never the current
    directory, the default or a file not written."""
    for dest, shown in _NAMED_VALUES.items():
        value = getattr(args, dest, None)
        if value == "" or (isinstance(value, list) and "" in value):
            raise _UsageError(f"{shown} '': an empty value names nothing")


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the first word that is no option)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command(argv)
    hook = command == "hook"
    raw = None
    parent = os.getppid()  # taken first: the CLI may give up while the payload is read or forwarded
    if hook:
        from guard.hook_forward import hook_route, read_payload, serve_target

        target = serve_target(argv)
        if target is not None:
            try:
                raw = read_payload()
            except ValueError as exc:
                _warn(f"repeat-tool-guard hook: {exc}")
                return EXIT_HOOK_FAULT
            if _forwarded(target, raw, hook_route(argv)):
                return EXIT_OK
    try:
        args = _parser(hook_only=hook).parse_args(argv)
    except SystemExit as exit_:
        if hook and exit_.code not in (0, None):
            return EXIT_HOOK_FAULT  # a typo in settings.json must not block every tool call
        raise
    if hook:
        args.raw, args.parent = raw, parent
        try:
            _refuse_empty(args)  # --serve '' stays: it turns forwarding off
        except _UsageError as exc:
            _warn(f"repeat-tool-guard hook: {exc}")
            return EXIT_HOOK_FAULT
        if args.verbose:
            _configure_logging(verbose=True)
        return int(args.run(args))
    _configure_logging(args.verbose)
    from bus import LogError
    from guard._text import one_line
    from guard.config import ConfigError
    from guard.importers import TranscriptError, UnknownFormatError

    try:
        _refuse_empty(args)
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
    except (ConfigError, LogError, TranscriptError, OSError, _UsageError) as exc:
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
