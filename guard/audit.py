"""Auditing transcripts: where agents looped, what it cost, and what each
policy would have done about it.

Each session of each transcript is replayed, as its importer streams it,
through a fresh guard running every enabled policy side by side
(``replay_events``: what ``replay`` says on the imported log), and measured
in the same pass: calls, runs and loops. It streams: memory per session
grows with its distinct calls, not its size.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

import anyio
import msgspec

from bus import AnyEvent, ToolCall, ToolResult
from guard.actions import DENYING
from guard.config import Config, every_policy
from guard.fingerprint import fingerprint
from guard.importers import (
    EmptyTranscriptError,
    ImportedSession,
    ImportReport,
    TranscriptError,
    UnknownFormatError,
    belongs_to_session,
    open_sessions,
)
from guard.importers import write_log as write_session_log
from guard.news import LastResult, News
from guard.policies.registry import build_policies
from guard.verdicts import RecordedOutputError, Verdict, replay_events, replay_log

__all__ = [
    "LOOP_SHARE_ANCHOR",
    "MAST_STEP_REPETITION",
    "MAST_TRACES",
    "NO_ASK_COMMAND",
    "PARALLEL_BYTES",
    "AuditReport",
    "AuditTotals",
    "FileError",
    "Loop",
    "LoopRate",
    "Origin",
    "PolicyAction",
    "SessionAudit",
    "Timeline",
    "audit",
    "audit_config",
    "audit_session",
    "estimated_tokens",
    "find_transcripts",
]

NO_ASK_COMMAND = os.path.join(os.devnull, "repeat-tool-guard-audit-never-asks")
"""Where an audit points ``rescue.ask_command``: a path that cannot exist (a
file under ``/dev/null``), so an audit never runs a program or spends money;
the escalations it would have made show as ``escalation-failed``."""

TRANSCRIPT_SUFFIXES = (".jsonl", ".json", ".traj", "sessions.db")
"""The files a directory walk offers to the importers."""

MARKS = {"remind": "remind", "deny": "deny", "rescue": "escalate", "escalation-failed": "escalate", "halt": "halt"}
"""How the report marks each action kind: where a policy would remind, deny,
escalate (an ask the audit never makes) or halt."""

_PREVIEW = 160

MAST_STEP_REPETITION = 0.157
"""The published anchor a loop rate is read against: MAST (Cemri et al.,
"Why Do Multi-Agent LLM Systems Fail?", 2025) found step repetition in
15.7 % of the multi-agent traces it annotated."""

MAST_TRACES = 1642
"""How many traces MAST's rate is over."""

TOP_TOOLS = 10
"""Tools listed by wasted calls."""

LOOP_SHARE_ANCHOR = (
    f"MAST (Cemri et al., 2025): step repetition in {MAST_STEP_REPETITION * 100:.1f} % "
    f"of {MAST_TRACES:,} multi-agent traces"
)
"""The published figure an audit's share of sessions with a loop is shown next to."""

BYTES_PER_TOKEN = 4
"""The token estimate's rule of thumb: about four bytes of English text or
code per token for the BPE tokenizers agents' models use."""


def estimated_tokens(size: int) -> int:
    """Tokens estimated for ``size`` UTF-8 bytes: ``ceil(size / 4)``. An
    estimate, not a tokenizer's count: it is the same for every model, so
    sessions and policies compare, and it is what an audit reports."""
    return -(-size // BYTES_PER_TOKEN)


def audit_config(config: Config | None = None) -> Config:
    """The configuration an audit runs.

    Without ``config``, every policy the guard knows (``every_policy``: the
    built-in ones and installed plugins) with its defaults, side by side
    (the library default runs ``remind`` alone). With one, exactly what it enables.
    Either way ``rescue`` never escalates for real (``ask_command`` is
    ``NO_ASK_COMMAND``) and writes no trip log.
    """
    if config is None:
        config = every_policy()
    rescue = msgspec.structs.replace(config.rescue, ask_command=NO_ASK_COMMAND, log_file="")
    return msgspec.structs.replace(config, rescue=rescue)


class PolicyAction(msgspec.Struct, frozen=True, kw_only=True):
    """One policy action placed in its session: ``call_number`` is the
    ordinal of the session's latest call when it happened (as ``replay``
    counts), ``mark`` what the report draws (remind, deny, escalate, halt)."""

    policy: str
    action: str
    mark: str
    call_number: int
    seq: int
    agent: str | None
    tool: str
    count: int


class Loop(msgspec.Struct, frozen=True, kw_only=True):
    """A call one agent repeated: back to back at least twice, or often
    enough that a policy stepped in.

    ``wasted_calls`` are the calls with this signature from the first point
    a policy stepped in (the denied call itself, or the calls after a
    reminder or halt); ``wasted_bytes`` the tool output they returned.
    ``wasted_tokens`` estimates what they cost: ``estimated_tokens`` of the
    bytes of their arguments (canonical JSON, what the model wrote) plus
    their output (what it read back). ``first_actions`` holds each policy's
    first action on this call; ``saved_calls`` and ``saved_tokens``, for
    every policy that ran, what it would have saved by the same rule counted
    from its own first action (0 for a policy that never acted on it).
    """

    agent: str
    tool: str
    signature: str
    occurrences: int
    longest_run: int
    first_call: int
    wasted_calls: int
    wasted_bytes: int
    wasted_tokens: int
    first_actions: dict[str, PolicyAction]
    saved_calls: dict[str, int]
    saved_tokens: dict[str, int]


class SessionAudit(msgspec.Struct, frozen=True, kw_only=True):
    """One session's audit. ``first_actions`` has an entry for every policy
    that ran, ``None`` when it never acted; ``actions`` counts actions as
    ``policy:action``; ``skipped`` is what the import skipped, by reason,
    and ``problems`` says where and why for the records it could not use
    (``ImportReport.problems``)."""

    label: str
    path: str
    format: str
    session: str
    agents: int
    calls: int
    errors: int
    output_bytes: int
    longest_run: int
    longest_run_tool: str
    start: float
    end: float
    loops: list[Loop]
    first_actions: dict[str, PolicyAction | None]
    actions: dict[str, int]
    skipped: dict[str, int]
    model: str | None = None
    """The model that gave most of the session's responses, when the transcript names it."""
    tools: dict[str, int] = msgspec.field(default_factory=dict)
    """Calls by tool."""
    problems: list[str] = msgspec.field(default_factory=list)
    """Where and why the import skipped what it could not use: the first
    twenty records (``file:line: error``), an unreadable subagent file, an
    import that stopped early."""

    @property
    def looped(self) -> bool:
        """Whether the session has a loop some policy stepped in on."""
        return any(loop.first_actions for loop in self.loops)

    @property
    def wasted_calls(self) -> int:
        return sum(loop.wasted_calls for loop in self.loops)

    @property
    def wasted_bytes(self) -> int:
        return sum(loop.wasted_bytes for loop in self.loops)

    @property
    def wasted_tokens(self) -> int:
        return sum(loop.wasted_tokens for loop in self.loops)


class FileError(msgspec.Struct, frozen=True, kw_only=True):
    """A file the audit could not read, and why; the audit went on."""

    path: str
    reason: str


class Origin(msgspec.Struct, frozen=True, kw_only=True):
    """Where a session log came from when the file is only its copy (a
    fleet's session in Redis, exported for the audit): the ``label`` (and
    ``path``) the report gives its sessions, and what the copying skipped,
    by reason, added to each session's ``skipped``."""

    label: str
    skipped: dict[str, int] = msgspec.field(default_factory=dict)


class LoopRate(msgspec.Struct, frozen=True, kw_only=True):
    """How often sessions of one model, or sessions using one tool, looped:
    ``looped`` of ``sessions`` had a loop some policy stepped in on (for a
    tool: on that tool), ``share`` = looped / sessions; what those loops
    wasted, in calls and estimated tokens."""

    name: str
    sessions: int
    looped: int
    share: float
    wasted_calls: int
    wasted_tokens: int


class AuditTotals(msgspec.Struct, frozen=True, kw_only=True):
    files: int
    sessions: int
    calls: int
    loops: int
    wasted_calls: int
    wasted_bytes: int
    wasted_tokens: int
    output_bytes: int
    saved_calls: dict[str, int]
    saved_tokens: dict[str, int]
    sessions_acted_on: dict[str, int]
    actions: dict[str, int]
    unreadable: int
    not_transcripts: int
    by_model: list[LoopRate] = msgspec.field(default_factory=list)
    """Per model the transcripts name, most sessions first."""
    by_tool: list[LoopRate] = msgspec.field(default_factory=list)
    """The ``TOP_TOOLS`` tools that wasted the most calls."""
    sessions_with_loops: int = 0
    skipped: dict[str, int] = msgspec.field(default_factory=dict)
    """What the imports skipped, by reason, every session's added up."""
    sessions_with_skips: int = 0
    """The sessions whose import skipped something."""

    @property
    def loop_share(self) -> float:
        """The share of sessions with at least one loop, in percent."""
        return 100 * self.sessions_with_loops / self.sessions if self.sessions else 0.0


class AuditReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``audit`` found: the policies that ran, each session, each file
    it could not read, each file found in a directory that is no transcript
    (and why), totals, and how long it took."""

    policies: list[str]
    sessions: list[SessionAudit]
    errors: list[FileError]
    not_transcripts: list[FileError] = msgspec.field(default_factory=list)
    totals: AuditTotals
    seconds: float


class Timeline:
    """One session's calls in order, compact, for the HTML report.

    ``calls`` holds ``[agent index, signature index, error (0/1), output
    bytes]`` per call; the signature index is ``-1`` for a call made only once.
    ``signatures`` names each repeated signature (agent, tool, preview) and
    ``marks`` holds ``(call index, policy, mark, text)`` for every action.
    """

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self.agents: list[str] = []
        self.parents: dict[str, str | None] = {}
        self.calls: list[list[int]] = []
        self.signatures: list[tuple[str, str, str]] = []
        self.marks: list[tuple[int, str, str, str]] = []


class _Signature:
    """Running statistics of one (agent, signature). ``saved_calls`` and
    ``saved_bytes`` count, per policy that acted on it, the calls from its
    first action (and their bytes, arguments and output)."""

    __slots__ = (
        "args_bytes",
        "first_actions",
        "first_call",
        "index",
        "last",
        "longest",
        "occurrences",
        "preview",
        "run",
        "saved_bytes",
        "saved_calls",
        "tool",
        "wasted_bytes",
        "wasted_calls",
        "wasted_in",
    )

    def __init__(self, tool: str, preview: str, first_call: int, args_bytes: int) -> None:
        self.tool = tool
        self.preview = preview
        self.first_call = first_call
        self.args_bytes = args_bytes
        self.occurrences = 0
        self.run = 0
        self.longest = 0
        self.index = -1
        self.wasted_calls = 0
        self.wasted_bytes = 0
        self.wasted_in = 0
        self.last = LastResult()
        self.first_actions: dict[str, PolicyAction] = {}
        self.saved_calls: dict[str, int] = {}
        self.saved_bytes: dict[str, int] = {}


class _Open:
    """A call awaiting its result: its signature, whether it is wasted
    (unless its result brings news), the policies that would have saved it,
    and its place in the timeline."""

    __slots__ = ("index", "savers", "stats", "wasted")

    def __init__(self, stats: _Signature, index: int) -> None:
        self.stats = stats
        self.savers = list(stats.first_actions)
        self.wasted = bool(self.savers)
        self.index = index

    def settle(self, size: int) -> None:
        """Count the call as wasted, and saved by each of its ``savers``,
        with ``size`` bytes of output (0 for a call never answered)."""
        stats = self.stats
        stats.wasted_calls += 1
        stats.wasted_bytes += size
        stats.wasted_in += size + stats.args_bytes
        saved_calls, saved_bytes = stats.saved_calls, stats.saved_bytes
        for policy in self.savers:
            saved_calls[policy] = saved_calls.get(policy, 0) + 1
            saved_bytes[policy] = saved_bytes.get(policy, 0) + size + stats.args_bytes


def _intervene(call: _Open, verdict: Verdict, timeline: Timeline | None) -> None:
    """Record ``verdict`` on the call it concerns. A policy's first action on
    a signature starts what it saves: a denied call is itself saved; after a
    reminder, an escalation or a halt, the calls that follow are. The first
    action of any policy starts the signature's waste the same way. Either
    way a call whose result brought news (``News``) is neither."""
    stats = call.stats
    policy = verdict.policy
    if policy not in stats.first_actions:
        stats.first_actions[policy] = _action(verdict)
        if verdict.action in DENYING:
            call.savers.append(policy)
            call.wasted = True
    if timeline is not None:
        timeline.marks.append((call.index, verdict.policy, MARKS.get(verdict.action, verdict.action), verdict.text))


def _action(verdict: Verdict) -> PolicyAction:
    return PolicyAction(
        policy=verdict.policy,
        action=verdict.action,
        mark=MARKS.get(verdict.action, verdict.action),
        call_number=verdict.call_number,
        seq=verdict.seq,
        agent=verdict.agent,
        tool=verdict.tool,
        count=verdict.count,
    )


async def audit_session(
    session: ImportedSession, config: Config, workdir: Path, *, timeline: Timeline | None = None
) -> SessionAudit:
    """Audit one imported session, using ``workdir`` for a temporary log
    when it needs one.

    ``config`` is used as given (pass it through ``audit_config`` to keep
    escalation off). ``timeline``, when given, is filled for the report.
    The session is replayed as the importer streams it (``replay_events``),
    each event measured right after the replay applied it, with the
    verdicts it triggered. A session that holds the guard's own recorded
    output (a transcript of a session the guard ran in) is imported again
    into a temporary log and replayed from there (``replay_log``), so its
    policies answer from that output as ``replay`` of the imported log does.
    """
    news = News(config.loops.result_normalize)
    measure = _Measure(timeline, news)
    try:
        events = _read_ahead(session.events())
        outcome = await replay_events(events, config, on_verdict=measure.verdict, then=measure.then, keep=False)
    except RecordedOutputError:
        if timeline is not None:
            timeline._clear()
        measure = _Measure(timeline, news)
        log = workdir / "session.jsonl"
        try:
            write_session_log(session, log)
            outcome = await replay_log(log, config, on_verdict=measure.verdict, then=measure.then, keep=False)
        finally:
            log.unlink(missing_ok=True)
    return measure.result(session, outcome.report.skipped_by_reason, config)


def _read_ahead(events: Iterator[AnyEvent], size: int = 4096) -> Iterator[AnyEvent]:
    """``events``, taken from the importer ``size`` at a time: the importer
    and the replay each run over a batch in turn, rather than taking turns
    at every event, which costs more CPU time for the same work."""
    while batch := list(itertools.islice(events, size)):
        yield from batch


class _Measure:
    """Calls, runs and loops of one session, measured event by event."""

    def __init__(self, timeline: Timeline | None, news: News) -> None:
        self.timeline = timeline
        self.signatures: dict[tuple[str, bytes], _Signature] = {}
        self.last: dict[str, tuple[str, bytes]] = {}
        self.open_calls: dict[tuple[str, str], _Open] = {}
        self.order: list[_Signature] = []
        self.agents: dict[str, int] = {}
        self.tools: Counter[str] = Counter()
        self.call_number = self.errors = self.output_bytes = 0
        self.best: _Signature | None = None
        self.best_run = 0
        self.start = self.end = 0.0
        self.made: list[Verdict] = []
        self.first_actions: dict[str, PolicyAction] = {}
        self.actions: Counter[str] = Counter()
        self.news = news

    def verdict(self, verdict: Verdict) -> None:
        """The replay's ``on_verdict``: counted, and kept in ``made`` for
        the event that triggered it."""
        self.made.append(verdict)
        self.actions[f"{verdict.policy}:{verdict.action}"] += 1
        if verdict.policy not in self.first_actions:
            self.first_actions[verdict.policy] = _action(verdict)

    def then(self, event: AnyEvent) -> None:
        """The replay's ``then``: measure the event just replayed, with
        the verdicts it made (``made``, emptied once used)."""
        timeline = self.timeline
        ts = event.ts
        if not self.start:
            self.start = ts
        if ts > self.end:
            self.end = ts
        handle = event.agent
        agent = handle.id if handle is not None else ""
        agents = self.agents
        if agent not in agents:
            agents[agent] = len(agents)
            if timeline is not None:
                timeline.agents.append(agent)
                timeline.parents[agent] = handle.parent_id if handle is not None else None
        if isinstance(event, ToolCall):
            is_call = True
        elif isinstance(event, ToolResult):
            is_call = False
        else:  # the guard acts on calls and results alone
            return
        slot = (agent, event.call_id)
        open_calls = self.open_calls
        if is_call or slot not in open_calls:
            self.call_number += 1
            self.tools[event.tool] += 1
            fp = fingerprint(event.tool, event.args)
            key = (agent, fp.digest)
            stats = self.signatures.get(key)
            if stats is None:
                args_bytes = len(fp.canonical)  # canonical_json(event.args): no key is left out
                stats = self.signatures[key] = _Signature(
                    event.tool, fp.preview(_PREVIEW), self.call_number, args_bytes
                )
            stats.occurrences += 1
            stats.run = run = stats.run + 1 if self.last.get(agent) == key else 1
            if run > stats.longest:
                stats.longest = run
            self.last[agent] = key
            if run > self.best_run:
                self.best, self.best_run = stats, run
            open_calls[slot] = _Open(stats, len(self.order))
            if timeline is not None:
                self.order.append(stats)
                timeline.calls.append([agents[agent], -1, 0, 0])
        made = self.made
        if made:
            for verdict in made:
                _intervene(open_calls[slot], verdict, timeline)
            made.clear()
        if isinstance(event, ToolResult):
            call = open_calls.pop(slot)
            content = event.content
            size = len(content) if content.isascii() else len(content.encode("utf-8", "surrogatepass"))
            self.output_bytes += size
            self.errors += event.is_error
            stats = call.stats
            # a denied call never ran: its result (the denial) is no news
            brought = event.denied_by is None and self.news.brought(stats.last, content, stats.occurrences > 1)
            if call.wasted and not brought:
                call.settle(size)
            if timeline is not None:
                timeline.calls[call.index][2:] = [int(event.is_error), size]

    def result(self, session: ImportedSession, skipped: Counter[str], config: Config) -> SessionAudit:
        """The session's audit, once every event was measured; ``skipped``
        is what reading its log skipped."""
        for call in self.open_calls.values():
            if call.wasted:
                call.settle(0)  # never answered: it brought nothing
        self.open_calls.clear()
        timeline = self.timeline
        policies = [p.name for p in build_policies(config)]
        loops = [
            Loop(
                agent=agent,
                tool=stats.tool,
                signature=stats.preview,
                occurrences=stats.occurrences,
                longest_run=stats.longest,
                first_call=stats.first_call,
                wasted_calls=stats.wasted_calls,
                wasted_bytes=stats.wasted_bytes,
                wasted_tokens=estimated_tokens(stats.wasted_in),
                first_actions=stats.first_actions,
                saved_calls={p: stats.saved_calls.get(p, 0) for p in policies},
                saved_tokens={p: estimated_tokens(stats.saved_bytes.get(p, 0)) for p in policies},
            )
            for (agent, _), stats in self.signatures.items()
            if stats.longest >= 2 or stats.first_actions
        ]
        loops.sort(key=lambda loop: (-loop.wasted_calls, -loop.occurrences, loop.first_call))
        if timeline is not None:
            for index, stats in enumerate(self.order):
                if stats.occurrences >= 2:
                    if stats.index < 0:
                        stats.index = len(timeline.signatures)
                        agent = timeline.agents[timeline.calls[index][0]]
                        timeline.signatures.append((agent, stats.tool, stats.preview))
                    timeline.calls[index][1] = stats.index
        first_actions: dict[str, PolicyAction | None] = dict.fromkeys(policies)
        first_actions.update(self.first_actions)
        best = self.best
        return SessionAudit(
            label=_reportable(session.label),
            path=_reportable(str(session.path)),
            format=session.format,
            session=_reportable(session.session),
            agents=len(self.agents),
            calls=self.call_number,
            errors=self.errors,
            output_bytes=self.output_bytes,
            longest_run=self.best_run,
            longest_run_tool=best.tool if best is not None else "",
            start=self.start,
            end=self.end,
            loops=loops,
            first_actions=first_actions,
            actions=dict(self.actions),
            skipped=dict(session.report.skipped) | dict(skipped),
            model=session.model,
            tools=dict(self.tools),
            problems=[_reportable(problem) for problem in session.report.problems],
        )


def _reportable(text: str) -> str:
    """``text`` (a path, or a label or session id made from one) as a report
    carries it: the bytes of a file name that are no UTF-8 (which Python
    holds as lone surrogates) shown escaped, ``caf\\xe9``, so that the JSON,
    the HTML page and the table can all be written. A lone surrogate no
    file system gave (one passed in a ``str`` from Python) is shown as
    ``\\ud800``."""
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


def _file_error(path: str | os.PathLike[str], reason: str) -> FileError:
    """A ``FileError`` whose path and reason can be written in any report (``_reportable``)."""
    return FileError(path=_reportable(os.fspath(path)), reason=_reportable(reason))


def find_transcripts(
    paths: Iterable[str | os.PathLike[str]], unlisted: list[FileError] | None = None
) -> Iterator[tuple[Path, bool]]:
    """Each file to audit, and whether it was named explicitly.

    A directory is walked in sorted order for ``.jsonl``, ``.json`` and
    ``.traj`` files and goose's ``sessions.db``, leaving out the files
    imported with another (``belongs_to_session``: a subagent file whose
    session file is present; an OpenHands V1 conversation's other event
    files, ``base_state.json`` and ``meta.json``). Anything else named is
    offered as is: each session once, whoever walks.
    A directory the walk cannot list (no permission, a path too long) is
    appended to ``unlisted``, with why, when it is given; its files are not
    offered either way.
    """

    def cannot_list(exc: OSError) -> None:
        if unlisted is not None:
            unlisted.append(_file_error(exc.filename, f"cannot list this directory: {exc.strerror}"))

    for raw in paths:
        path = Path(raw).expanduser()
        if not path.is_dir():
            yield path, True
            continue
        for root, dirs, files in os.walk(path, onerror=cannot_list):
            dirs.sort()
            files.sort()
            for name in files:
                file = Path(root) / name
                if name.endswith(TRANSCRIPT_SUFFIXES) and not belongs_to_session(file, files):
                    yield file, False


Progress = Callable[[int, int, str], None]
"""Told ``(files done, files in all, current file)`` as an audit goes."""


def audit(
    paths: Iterable[str | os.PathLike[str]],
    config: Config | None = None,
    *,
    timelines: list[Timeline] | None = None,
    progress: Progress | None = None,
    jobs: int = 1,
    worker_setup: Callable[[], object] | None = None,
    origins: Mapping[Path, Origin] | None = None,
) -> AuditReport:
    """Audit every transcript under ``paths``.

    ``config`` goes through ``audit_config``. A file that cannot be read,
    or a directory that cannot be listed (listed first: the walk comes
    before the audit), is reported in ``errors`` with its reason and the
    audit goes on; in every path the report carries, the bytes of a file
    name that are no UTF-8 are shown escaped (``caf\\xe9``); a file
    found in a directory that is no known transcript format is left out and
    listed, with why, in ``not_transcripts``. ``timelines``, when given, receives one
    ``Timeline`` per session, in the order of ``sessions``.

    With ``jobs`` above 1 and more than one file (``PARALLEL_BYTES`` in all),
    files are audited that many at a time in worker processes (each file is independent of the
    others); the report is the same, in the same order, and ``progress`` is
    told the same files in the same order. ``worker_setup`` (picklable) runs
    first in each worker: configure logging there as the caller did its own.
    A file named in ``origins`` (a copy) is reported, and told to
    ``progress``, as its origin.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"audit jobs must be an integer >= 1, got {jobs!r}")
    errors: list[FileError] = []
    files = list(find_transcripts(paths, errors))
    config = audit_config(config)
    started = time.perf_counter()
    sessions: list[SessionAudit] = []
    not_transcripts: list[FileError] = []
    origins = origins or {}
    if origins and progress is not None:
        progress = _progress_of(progress, origins)
    for (path, _), result in zip(
        files, _audit_files(files, config, timelines is not None, jobs, worker_setup, progress), strict=True
    ):
        origin = origins.get(path)
        if origin is not None:
            result = _from(origin, result)
        sessions += result.sessions
        if timelines is not None:
            timelines += result.timelines
        if result.error is not None:
            errors.append(result.error)
        if result.left_out is not None:
            not_transcripts.append(result.left_out)
    if progress is not None:
        progress(len(files), len(files), "")
    policies = [p.name for p in build_policies(config)]
    return AuditReport(
        policies=policies,
        sessions=sessions,
        errors=errors,
        not_transcripts=not_transcripts,
        totals=_totals(files, sessions, errors, len(not_transcripts), policies),
        seconds=time.perf_counter() - started,
    )


PARALLEL_BYTES = 1 << 20
"""Below this many bytes of transcripts in all, an audit stays in one
process whatever ``jobs`` says: starting workers would cost more than they save."""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class _FileAudit:
    """One file's part of an audit: its sessions (and their timelines), and
    why it could not be read, or why it is no transcript, if so."""

    def __init__(self) -> None:
        self.sessions: list[SessionAudit] = []
        self.timelines: list[Timeline] = []
        self.error: FileError | None = None
        self.left_out: FileError | None = None


def _audit_files(
    files: list[tuple[Path, bool]],
    config: Config,
    timelines: bool,
    jobs: int,
    setup: Callable[[], object] | None,
    progress: Progress | None,
) -> Iterator[_FileAudit]:
    """Each file's audit, in order: here, one after the other, or with
    ``jobs`` worker processes, a few files ahead of the one awaited.
    ``progress`` hears of each file before its audit is awaited."""
    total = len(files)
    if jobs == 1 or total < 2 or sum(_size(path) for path, _ in files) < PARALLEL_BYTES:
        for done, (path, explicit) in enumerate(files):
            if progress is not None:
                progress(done, total, _reportable(str(path)))
            yield _audit_file(path, explicit, config, timelines)
        return
    import multiprocessing
    from collections import deque
    from concurrent.futures import Future, ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context(_start_method())
    workers = min(jobs, len(files))

    def start(count: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(count, mp_context=context, initializer=setup)

    pool = start(workers)
    try:
        ahead: deque[tuple[Path, bool, Future[_FileAudit]]] = deque()
        waiting = iter(files)
        for path, explicit in waiting:
            ahead.append((path, explicit, pool.submit(_audit_file, path, explicit, config, timelines)))
            if len(ahead) == 2 * workers:
                break
        for done, (path, _) in enumerate(files):
            if progress is not None:
                progress(done, total, _reportable(str(path)))
            path, explicit, future = ahead.popleft()
            following = next(waiting, None)
            if following is not None:
                ahead.append((*following, pool.submit(_audit_file, *following, config, timelines)))
            try:
                result = future.result()
            except BrokenProcessPool:
                # A worker died (killed, or out of memory), and the pool with it. Every file in
                # flight is audited again: this one alone, so that dying again is its own doing,
                # the others in a new pool.
                pool.shutdown(wait=False, cancel_futures=True)
                with start(1) as alone:
                    try:
                        result = alone.submit(_audit_file, path, explicit, config, timelines).result()
                    except BrokenProcessPool as exc:
                        result = _FileAudit()
                        result.error = _file_error(path, f"the process auditing it died: {exc}")
                pool = start(workers)
                ahead = deque((p, e, pool.submit(_audit_file, p, e, config, timelines)) for p, e, _ in ahead)
            yield result
    finally:
        pool.shutdown(cancel_futures=True)


def _start_method() -> str:
    """How audit workers start: forked while this process runs one thread
    (nothing else to copy, and no start-up); else from a fresh interpreter,
    which imports the caller's main module again (multiprocessing's ``if
    __name__ == "__main__"`` rule)."""
    import multiprocessing
    import threading

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while one session is audited,
    when it was on. Decoding a transcript makes containers by the million
    that live a moment, and each batch of them that outlives a young
    collection brings a full one nearer, which walks the whole heap (about
    0.45 s of CPU in auditing a 100,000-call session). An audit leaves
    about 200 objects in reference cycles whatever the session's size (its
    event loop's), which the collector frees as usual once it is back on."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _audit_file(path: Path, explicit: bool, config: Config, timelines: bool) -> _FileAudit:
    """Audit one file's sessions; a file that cannot be read is a
    ``FileError`` in the result, never an exception."""
    result = _FileAudit()
    try:
        with tempfile.TemporaryDirectory(prefix="repeat-tool-guard-audit-") as workdir:
            shared: ImportReport | None = None
            before = _Counted(Counter(), 0)
            for session in open_sessions(path):
                if session.report is not shared:
                    shared, before = session.report, _Counted(Counter(), 0)
                timeline = Timeline() if timelines else None
                audit_one = functools.partial(audit_session, session, config, Path(workdir), timeline=timeline)
                with _collector_paused():
                    result.sessions.append(_own_part(anyio.run(audit_one), before))
                before = _Counted(shared.skipped.copy(), len(shared.problems))
                if timeline is not None:
                    result.timelines.append(timeline)
    except (UnknownFormatError, EmptyTranscriptError) as exc:
        failure = _file_error(path, str(exc))
        if explicit:
            result.error = failure
        else:
            result.left_out = failure
    except TranscriptError as exc:
        result.error = _file_error(path, str(exc))
    except Exception as exc:  # an importer's bug on odd data must not end the audit
        result.error = _file_error(path, f"import failed: {type(exc).__name__}: {exc}")
    return result


class _Counted(NamedTuple):
    """What a report shared by a file's sessions held once the sessions
    before one were audited: its counts by reason, and how many problems."""

    skipped: Counter[str]
    problems: int


def _from(origin: Origin, copy: _FileAudit) -> _FileAudit:
    """The audit of a copy as its ``origin``'s: its sessions, error and
    reason to be left out named by the origin, and what copying skipped
    added to each session's skips."""
    label = _reportable(origin.label)
    for n, audited in enumerate(copy.sessions):
        skipped = Counter(audited.skipped)
        skipped.update(origin.skipped)
        copy.sessions[n] = msgspec.structs.replace(
            audited, label=label, path=label, skipped=dict(sorted(skipped.items()))
        )
    if copy.error is not None:
        copy.error = _file_error(origin.label, copy.error.reason)
    if copy.left_out is not None:
        copy.left_out = _file_error(origin.label, copy.left_out.reason)
    return copy


def _progress_of(progress: Progress, origins: Mapping[Path, Origin]) -> Progress:
    """``progress`` told each copy's origin instead of the copy."""
    shown = {_reportable(str(path)): _reportable(origin.label) for path, origin in origins.items()}

    def told(done: int, total: int, current: str) -> None:
        progress(done, total, shown.get(current, current))

    return told


def _own_part(audited: SessionAudit, before: _Counted) -> SessionAudit:
    """``audited`` with only what its own import skipped: the sessions of a
    multi-session file (an OpenHands ``output.jsonl``) share one report,
    whose counts and problems run on from session to session."""
    if not before.skipped and not before.problems:
        return audited
    skipped = {r: n - before.skipped[r] for r, n in audited.skipped.items() if n > before.skipped[r]}
    return msgspec.structs.replace(audited, skipped=skipped, problems=audited.problems[before.problems :])


def _totals(
    files: list[tuple[Path, bool]],
    sessions: list[SessionAudit],
    errors: list[FileError],
    not_transcripts: int,
    policies: list[str],
) -> AuditTotals:
    acted = Counter(policy for s in sessions for policy, first in s.first_actions.items() if first is not None)
    actions: Counter[str] = Counter()
    saved_calls: Counter[str] = Counter()
    saved_tokens: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    for s in sessions:
        actions.update(s.actions)
        skipped.update(s.skipped)
        for loop in s.loops:
            saved_calls.update(loop.saved_calls)
            saved_tokens.update(loop.saved_tokens)
    return AuditTotals(
        files=len(files),
        sessions=len(sessions),
        calls=sum(s.calls for s in sessions),
        loops=sum(len(s.loops) for s in sessions),
        wasted_calls=sum(s.wasted_calls for s in sessions),
        wasted_bytes=sum(s.wasted_bytes for s in sessions),
        wasted_tokens=sum(s.wasted_tokens for s in sessions),
        output_bytes=sum(s.output_bytes for s in sessions),
        saved_calls={p: saved_calls[p] for p in policies},
        saved_tokens={p: saved_tokens[p] for p in policies},
        sessions_acted_on={p: acted.get(p, 0) for p in policies},
        actions=dict(sorted(actions.items())),
        unreadable=len(errors),
        not_transcripts=not_transcripts,
        by_model=_by_model(sessions),
        by_tool=_by_tool(sessions),
        sessions_with_loops=sum(1 for s in sessions if s.loops),
        skipped=dict(sorted(skipped.items())),
        sessions_with_skips=sum(1 for s in sessions if s.skipped),
    )


def _rate(name: str, sessions: int, looped: int, wasted_calls: int, wasted_tokens: int) -> LoopRate:
    return LoopRate(
        name=name,
        sessions=sessions,
        looped=looped,
        share=looped / sessions,
        wasted_calls=wasted_calls,
        wasted_tokens=wasted_tokens,
    )


def _by_model(sessions: list[SessionAudit]) -> list[LoopRate]:
    grouped: dict[str, list[SessionAudit]] = {}
    for s in sessions:
        if s.model is not None:
            grouped.setdefault(s.model, []).append(s)
    rates = [
        _rate(
            model,
            len(group),
            sum(s.looped for s in group),
            sum(s.wasted_calls for s in group),
            sum(s.wasted_tokens for s in group),
        )
        for model, group in grouped.items()
    ]
    return sorted(rates, key=lambda r: (-r.sessions, r.name))


def _by_tool(sessions: list[SessionAudit]) -> list[LoopRate]:
    used: Counter[str] = Counter()
    looped: Counter[str] = Counter()
    wasted: Counter[str] = Counter()
    tokens: Counter[str] = Counter()
    for s in sessions:
        used.update(s.tools.keys())
        looped.update({loop.tool for loop in s.loops if loop.first_actions})
        for loop in s.loops:
            wasted[loop.tool] += loop.wasted_calls
            tokens[loop.tool] += loop.wasted_tokens
    rates = [_rate(tool, used[tool], looped[tool], wasted[tool], tokens[tool]) for tool in used if wasted[tool]]
    return sorted(rates, key=lambda r: (-r.wasted_calls, r.name))[:TOP_TOOLS]
