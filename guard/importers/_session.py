"""What every importer produces: sessions that stream session-log events.

An importer turns one transcript into one or more ``ImportedSession``s. A
session's ``events()`` is a generator over ``bus`` events in log order, built
with a ``Builder`` that keeps just what streaming needs: one handle per agent,
each agent's open calls (to copy tool and args onto their results), and the
call ids already seen, with the records that carried them (to tell a new
call under a reused id from a copy of an earlier entry, see ``Builder.call``).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Callable, Hashable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
from msgspec.structs import force_setattr

from bus import (
    MAX_NESTING,
    Agent,
    AgentStatus,
    AnyEvent,
    ContextMessage,
    ContextSource,
    ToolCall,
    ToolResult,
    UserMessage,
    too_deep,
)
from guard._text import one_line

__all__ = ["Builder", "ImportReport", "ImportedSession", "TranscriptError", "UnknownFormatError"]


class TranscriptError(Exception):
    """A transcript cannot be imported at all: unreadable, not valid JSON, or
    not the format it was said to be. The message names the file and why."""


class EmptyTranscriptError(TranscriptError):
    """The file holds nothing at all: no transcript of any format."""


class UnknownFormatError(TranscriptError):
    """No importer recognised the file; ``tried`` lists each format and why it
    did not match."""

    def __init__(self, path: Path, tried: list[tuple[str, str]]) -> None:
        self.path = path
        self.tried = tried
        reasons = "; ".join(f"{name}: {why}" for name, why in tried)
        super().__init__(f"{str(path)!r} is not a transcript format this tool knows (tried {reasons})")


_MAX_PROBLEMS = 20
_MAX_RERUNS = 20


class _SavedReport(NamedTuple):
    skipped: Counter[str]
    problems: list[str]
    passed: set[tuple[str, int]]


class ImportReport:
    """What an import skipped, by reason (``torn`` last line, ``invalid-json``
    line, ``too-deep`` line, ``orphan-result`` without a call,
    ``duplicate-call`` entry, ``bad-record`` the importer could not use, ...).

    ``problems`` says where and why, for a user who wants to know which:
    the first twenty ``bad-record`` details (where, and the error the
    record caused) and unreadable subagent files, then, when the import
    stopped early, why.
    """

    def __init__(self) -> None:
        self.skipped: Counter[str] = Counter()
        self.problems: list[str] = []
        self._at: tuple[str, int] | None = None  # the record being imported (see _where)
        self._passed: set[tuple[str, int]] = set()  # records a re-run passes over

    def _saved(self) -> _SavedReport:
        """What the report holds now, for ``_restore``: an import started over
        counts its records again from here."""
        return _SavedReport(self.skipped.copy(), list(self.problems), set(self._passed))

    def _restore(self, saved: _SavedReport) -> None:
        self.skipped, self.problems, self._passed = saved.skipped.copy(), list(saved.problems), set(saved.passed)

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1

    def _problem(self, problem: str) -> None:
        """Name ``problem`` in ``problems``, while they are fewer than twenty."""
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(problem)

    def _bad_record(self, exc: Exception) -> None:
        self.skip("bad-record")
        self._problem(f"{_where(self._at)}: {type(exc).__name__}: {one_line(str(exc))}")

    def _stopped(self, why: str) -> None:
        """The import ended before the end of the session: counted as
        ``stopped-early`` and said as the last of ``problems``, even past
        the twenty."""
        self.skip("stopped-early")
        self.problems.append(f"{why}: the rest of the session is not read")

    def summary(self) -> str:
        total = sum(self.skipped.values())
        if not total:
            return "nothing skipped"
        return f"{total} skipped (" + ", ".join(f"{r} {n}" for r, n in sorted(self.skipped.items())) + ")"


class ImportedSession:
    """One session of a transcript.

    ``session`` is its id, ``label`` a human name (file, and instance for a
    multi-session file). ``events()`` streams the events, in log order;
    ``report`` fills as it goes (the sessions of a multi-session file share
    one report, so its counts are for the file up to this session).
    """

    def __init__(
        self,
        *,
        format: str,
        session: str,
        path: Path,
        label: str,
        produce: Callable[[Builder], Iterator[AnyEvent]],
        report: ImportReport | None = None,
    ) -> None:
        self.format = format
        self.session = session
        self.path = path
        self.label = label
        self.report = report if report is not None else ImportReport()
        self.models: Counter[str] = Counter()
        """Model responses by the model the transcript names, once ``events()``
        ran (empty when it names none)."""
        self._produce = produce
        self._before: _SavedReport | None = None

    @property
    def model(self) -> str | None:
        """The model that gave most of the session's responses, when the transcript names it."""
        return self.models.most_common(1)[0][0] if self.models else None

    def events(self) -> Iterator[AnyEvent]:
        """The session's events; never raises but ``TranscriptError`` (see ``_isolated``).
        Calling it again starts the import over, with the report put back as
        it was before the first call (so nothing is counted twice), as long
        as no other session of the file was imported in between."""
        if self._before is None:
            self._before = self.report._saved()
        else:
            self.report._restore(self._before)
        return _isolated(self.report, self._produce, self.models)


def _where(at: tuple[str, int] | None) -> str:
    """A record's place: ``file:line`` for a JSON Lines line (or a one-event
    file), ``file#list[index]`` for an item of a document's list."""
    if at is None:
        return "a record"
    name, number = at
    if "#" in name:
        return f"{name}[{number}]"
    return f"{name}:{number}"


def _isolated(
    report: ImportReport, produce: Callable[[Builder], Iterator[AnyEvent]], models: Counter[str]
) -> Iterator[AnyEvent]:
    """``produce``'s events, with a record the importer cannot use skipped.

    An importer reads fields of any JSON type; one of an unexpected type may
    make it raise. That costs the record, not the session: events are handed
    out a record at a time (once the importer moves on to the next record:
    a JSON Lines line, a one-event file, an item of a document's top-level
    list, see ``Records``), so on an error the failing record's events are dropped,
    the import runs again from the start passing over that record, and the
    events already handed out are not repeated (an import is deterministic).
    The failure is counted as ``bad-record``. When the record cannot be told
    (a failure before the first record) or after twenty re-runs, the
    session ends there instead, with what came before (counted as
    ``stopped-early``, and said in ``problems``).
    """
    released = 0
    reruns = 0
    agents: dict[str, Agent] = {}
    while True:
        counts = report.skipped.copy()
        report._at = at = None
        pending: deque[AnyEvent] = deque()
        index = 0
        models.clear()  # a re-run names them again
        builder = Builder(report, models)
        try:
            for event in produce(builder):
                if report._at != at:  # the records before this one are done
                    at = report._at
                    while pending:
                        released += 1
                        yield pending.popleft()
                index += 1
                if index > released:
                    pending.append(_same_agent(event, agents) if reruns else event)
        except TranscriptError:
            raise
        except Exception as exc:
            for agent in builder._agents.values():  # the handles the events handed out carry
                agents.setdefault(agent.id, agent)
            report.skipped = counts
            report._bad_record(exc)
            if report._at is None:  # before any record: keep what came first
                report._stopped("the import stopped at a failure outside any record")
                yield from pending
                return
            if reruns == _MAX_RERUNS:
                report._stopped(f"the import stopped after {reruns + 1} records it could not use")
                return
            reruns += 1
            report._passed.add(report._at)
            continue
        while pending:
            released += 1
            yield pending.popleft()
        return


def _same_agent(event: AnyEvent, agents: dict[str, Agent]) -> AnyEvent:
    """``event`` carrying the handle earlier events of its agent carried:
    a re-run builds new handles, and a handle is the agent's identity."""
    agent = event.agent
    if agent is not None and (known := agents.setdefault(agent.id, agent)) is not agent:
        force_setattr(event, "agent", known)
    return event


def parse_time(value: Any) -> float | None:
    """Unix seconds from an ISO-8601 string (naive means UTC) or a number;
    ``None`` for anything else (a number too large or not finite included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:
            return None
        return seconds if math.isfinite(seconds) else None
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def nested(value: Any, *keys: str) -> Any:
    """What sits at ``keys`` down nested objects (``nested(state, "agent",
    "llm", "model")``); ``None`` where a key is missing or a level is not an
    object, as a transcript's optional metadata often is."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def nests_too_deep(text: str, limit: int = MAX_NESTING) -> bool:
    """Whether the JSON in ``text`` (a string a record carries: arguments, a
    stored message) nests deeper than ``limit`` levels (``MAX_NESTING``);
    decode it only if not, since the decoder does not survive a thousand
    levels."""
    return text.count("[") + text.count("{") > limit and too_deep(text.encode(), limit)


# Arguments sit one level inside their event's log line: deeper than this,
# the log would hold a stand-in for them, not what the model wrote.
_ARGS_NESTING = MAX_NESTING - 1


def parse_args(raw: Any) -> Any:
    """The model's arguments: parsed JSON when ``raw`` is a JSON string, the
    raw string when it is malformed or nested so deep that its event's log
    line would nest deeper than ``MAX_NESTING`` levels, ``raw`` itself
    otherwise. So an event the importer makes is the event its log holds."""
    if isinstance(raw, str):
        if nests_too_deep(raw, _ARGS_NESTING):
            return raw
        try:
            return msgspec.json.decode(raw)
        except msgspec.DecodeError:
            return raw
    return raw


def text_of(content: Any) -> str:
    """The text a model saw in a tool result or message: a string as is, a
    list of content blocks joined by newlines (non-text blocks named)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_block_text(block) for block in content)
    if content is None:
        return ""
    return msgspec.json.encode(content).decode()


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if isinstance(block, dict):
        for key in ("text", "output", "content"):
            value = block.get(key)
            if isinstance(value, (str, list)):
                return text_of(value)
        if block.get("type") == "tool_reference":
            return str(block.get("tool_name", ""))
        return f"[{block.get('type', 'block')}]"
    return msgspec.json.encode(block).decode()


class Builder:
    """Makes the events of one session, with the bookkeeping that keeps them
    consistent: an agent's ``started`` status (with its parent) before its
    first event, each result carrying its call's step, tool and args, calls
    deduplicated by id (a reused id told apart, see ``call``), and results
    without a call skipped and counted."""

    def __init__(self, report: ImportReport, models: Counter[str] | None = None) -> None:
        self.report = report
        self._models = models if models is not None else Counter()
        self._agents: dict[str, Agent] = {}
        self._open: dict[tuple[str, str], ToolCall] = {}
        self._latest: dict[tuple[str, str], str] = {}  # an agent's call id -> the id its latest call was issued as
        self._issued: set[tuple[str, str]] = set()
        self._carriers: dict[tuple[str, str], set[Hashable]] = {}  # a call id -> the records that carried it
        self._parents: dict[str, str] = {}

    def model(self, name: Any) -> None:
        """One model response by ``name`` (ignored unless a non-empty string)."""
        if isinstance(name, str) and name.strip():
            self._models[name.strip()] += 1

    def parent(self, agent_id: str, parent: str) -> None:
        """Declare ``agent_id`` a subagent of ``parent``, before its first event."""
        self._parents.setdefault(agent_id, parent)

    def _handle(self, agent_id: str, ts: float) -> tuple[Agent, tuple[AnyEvent, ...]]:
        """The agent's handle, and its ``started`` status the first time."""
        agent = self._agents.get(agent_id)
        if agent is not None:
            return agent, ()
        parent = self._parents.get(agent_id)
        agent = self._agents[agent_id] = Agent(agent_id, parent_id=parent)
        return agent, (AgentStatus(agent=agent, ts=ts, status="started", parent=parent),)

    def user(self, agent_id: str, text: str, ts: float) -> tuple[AnyEvent, ...]:
        agent, started = self._handle(agent_id, ts)
        return (*started, UserMessage(agent=agent, ts=ts, text=text))

    def record(self, *names: Any) -> Hashable:
        """What identifies the transcript record being imported, for
        ``call``: the first of ``names`` (the record's id, its time) that is
        a non-empty string, else the record's place in the file (``None``
        before any record)."""
        return next((name for name in names if isinstance(name, str) and name), self.report._at)

    def call(
        self,
        agent_id: str,
        call_id: str,
        step: int,
        tool: Any,
        args: Any,
        ts: float,
        *,
        record: Hashable = None,
    ) -> tuple[AnyEvent, ...]:
        """A tool call.

        A call id is only unique within one response: some model servers
        name every call ``call_0``. So an id this agent used before names a
        new call when the transcript record carrying it (``record``, see
        ``Builder.record``) carried no earlier call with that id, whether
        the earlier call was answered or abandoned (an interrupted
        response); it is issued as ``<id>@<step>``, and a result naming the
        id answers the latest call with it. A record that carried the id
        before is a copy (an entry written again, a response naming one id
        twice): the call is a duplicate, dropped and counted as
        ``duplicate-call``. Without ``record`` (a format whose copies cannot
        be told from new calls: Claude Code's resumed files copy history)
        every reused id is a duplicate; a format that writes no copies (a
        chat history, whose every assistant message is a new response)
        gives each call its own ``record``, so a reused id is always a new call.

        A ``tool`` name that is no string (a transcript's ``null`` or list)
        is its JSON text, as the session log writes a number given as one."""
        key = (agent_id, call_id)
        issued = call_id
        carriers = self._carriers.setdefault(key, set()) if record is not None else None
        if key in self._latest:
            if carriers is None or record in carriers:
                self.report.skip("duplicate-call")
                return ()
            issued = self._fresh(agent_id, call_id, step)
        if carriers is not None:
            carriers.add(record)
        self._latest[key] = issued
        self._issued.add((agent_id, issued))
        agent, started = self._handle(agent_id, ts)
        if type(tool) is not str:
            tool = msgspec.json.encode(tool).decode()
        call = ToolCall(agent=agent, ts=ts, call_id=issued, step=step, tool=tool, args=args)
        self._open[(agent_id, issued)] = call
        return (*started, call)

    def _fresh(self, agent_id: str, call_id: str, step: int) -> str:
        """An id for a new call under a reused ``call_id``: ``<id>@<step>``,
        with ``.<n>`` added when one response reused the id again."""
        issued = f"{call_id}@{step}"
        n = 1
        while (agent_id, issued) in self._issued:
            n += 1
            issued = f"{call_id}@{step}.{n}"
        return issued

    def result(
        self,
        agent_id: str,
        call_id: str,
        content: str,
        ts: float,
        *,
        is_error: bool = False,
        denied_by: str | None = None,
    ) -> tuple[AnyEvent, ...]:
        """The result of an open call (the latest one under ``call_id``, see
        ``call``); one for an unknown call is counted as ``orphan-result``
        and dropped, since its tool and args are unknown."""
        call = self._open.pop((agent_id, self._latest.get((agent_id, call_id), call_id)), None)
        if call is None:
            self.report.skip("orphan-result")
            return ()
        result = ToolResult(
            agent=call.agent,
            ts=ts,
            call_id=call.call_id,
            step=call.step,
            tool=call.tool,
            args=call.args,
            content=content,
            is_error=is_error,
            denied_by=denied_by,
        )
        return (result,)

    def compacted(self, agent_id: str, ts: float) -> tuple[AnyEvent, ...]:
        """The runtime compacted the agent's context: earlier results left
        the model's view (what the live hooks publish on a compaction)."""
        agent, started = self._handle(agent_id, ts)
        return (*started, AgentStatus(agent=agent, ts=ts, status="compacted"))

    def was_called(self, agent_id: str, call_id: str) -> bool:
        """Whether this agent made a call with this id (open or answered)."""
        return (agent_id, call_id) in self._latest

    def context(
        self, agent_id: str, call_id: str, text: str, ts: float, *, plugin: str, form: str, summary: str = ""
    ) -> tuple[AnyEvent, ...]:
        agent, started = self._handle(agent_id, ts)
        source = ContextSource(plugin=plugin, form=form, summary=summary)
        return (*started, ContextMessage(agent=agent, ts=ts, call_id=call_id, source=source, text=text))
