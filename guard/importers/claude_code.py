"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``),
and what ``claude -p --output-format stream-json --verbose`` prints (the
Agent SDK's messages), which holds the same entries.

One JSON object per line. The main agent is ``main``; each subagent is a
separate file, either under ``<session>/subagents/agent-<id>.jsonl`` (Claude
Code 2.1+) or beside the session as ``agent-<id>.jsonl`` (2.0, found by its
``sessionId``). A subagent is imported as agent ``<id>`` with parent ``main``,
its events interleaved with the main agent's by timestamp; in stream-json
output, a subagent's entries are inline, marked with its ``agent_id`` (or
the ``parent_tool_use_id`` of the call that started it). See
``docs/importers/claude_code.md`` for the field mapping.
"""

from __future__ import annotations

import fnmatch
import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from bus import AnyEvent
from guard._tags import tagged, without_ide_context
from guard.importers._session import Builder, ImportedSession, parse_time, text_of
from guard.importers._source import Format, Sample, first_object, merge_by_time, read_jsonl
from guard.importers._subagent import subagent_events

__all__ = ["FORMAT", "belongs_to_session", "subagent_files"]

NAME = "claude-code"
MAIN = "main"

_ENTRY_TYPES = frozenset(
    {
        "user",
        "assistant",
        "attachment",
        "system",
        "summary",
        "file-history-snapshot",
        "permission-mode",
        "last-prompt",
        "queue-operation",
        "progress",
    }
)
_ENTRY_KEYS = ("sessionId", "uuid", "leafUuid", "messageId", "session_id")
_TOOL_BLOCKS = ("tool_use", "tool_result")

_COMPACT_SUMMARY = "This session is being continued from a previous conversation"
"""How the summary Claude Code leaves after a compaction begins."""
_NOT_PROMPTS = (
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<task-notification>",
    "[Request interrupted by user",
)
_COMMAND = frozenset({"command-name", "command-args"})
_COMMAND_STARTS = ("<command-name>", "<command-message>")
# How far a result written before its call waits for it (see _EarlyResults):
# entries of the file, and results waiting at once.
_EARLY_ENTRIES = 32
_EARLY_MAX = 64
_USER_REJECTED = "The user doesn't want to"
_PERMISSION_DENIED = "Permission to use "


def _sniff(sample: Sample) -> str | None:
    for line in sample.lines:
        if line.get("type") in _ENTRY_TYPES and (any(key in line for key in _ENTRY_KEYS) or _wrapped(line)):
            return None
    return (
        "no line has a Claude Code entry type with sessionId/session_id/uuid"
        " (or an Agent SDK message: its init, or a tool_use/tool_result block)"
    )


def _wrapped(line: dict[str, Any]) -> bool:
    """Whether ``line`` is an Agent SDK message a program logged in its own
    wrapper (``{"type", "message", "timestamp"}``), without the session
    keys: the session's ``init`` (its ``session_id`` inside ``message``), or
    a message holding a ``tool_use`` or ``tool_result`` block."""
    message = line.get("message")
    if not isinstance(message, dict):
        return False
    if line["type"] == "system":
        return message.get("subtype") == "init" and "session_id" in message
    content = message.get("content")
    return (
        line["type"] in ("assistant", "user")
        and isinstance(content, list)
        and any(isinstance(block, dict) and block.get("type") in _TOOL_BLOCKS for block in content)
    )


_AGENT_FILES = "agent-*.jsonl"
_SETTLED_NS = 2_000_000_000


def _named_session(path: Path) -> tuple[str | None, bool]:
    """The session a flat agent file's first line names (its ``sessionId``),
    and whether that is final: a first line that holds an object never
    changes, as the file only grows, and one that holds none in a file
    left as it is for two seconds is damaged, not being written; a file
    that cannot be read now may be later."""
    head = first_object(path)
    session = head.get("sessionId")
    return (session if isinstance(session, str) and session else None), bool(head) or _untouched(path)


def _untouched(path: Path) -> bool:
    """Whether ``path`` was last written two seconds ago or more."""
    try:
        return time.time_ns() - os.stat(path).st_mtime_ns >= _SETTLED_NS
    except OSError:
        return False


class _FlatAgents:
    """A folder's flat subagent files (Claude Code 2.0) by the session each
    names, so a walk reads each file's first line once rather than once per
    session file beside it.

    ``refresh`` lists the folder again and reads only the files whose first
    line it has not read as an object yet. The index is taken as it is while
    the folder's modification time stays the same, once that time was at
    least two seconds old when the index was made (a file created within
    the same tick of a coarse clock leaves the time unchanged) and every
    file's answer was final."""

    def __init__(self) -> None:
        self.mtime = -1
        self.trusted = False
        self.named: dict[str, str | None] = {}  # file name -> the session it names, when final
        self.sessions: dict[str, list[Path]] = {}

    def refresh(self, folder: Path, mtime: int) -> None:
        try:
            with os.scandir(folder) as entries:
                names = sorted(e.name for e in entries if fnmatch.fnmatchcase(e.name, _AGENT_FILES))
        except OSError:
            names = []
        named: dict[str, str | None] = {}
        sessions: dict[str, list[Path]] = {}
        final = True
        for name in names:
            if name in self.named:
                session = named[name] = self.named[name]
            else:
                session, known = _named_session(folder / name)
                if known:
                    named[name] = session
                final = final and known
            if session is not None:
                sessions.setdefault(session, []).append(folder / name)
        self.named, self.sessions, self.mtime = named, sessions, mtime
        self.trusted = final and time.time_ns() - mtime >= _SETTLED_NS


_indexed: dict[Path, _FlatAgents] = {}


def _flat_agents(folder: Path) -> _FlatAgents:
    """The flat subagent files of ``folder``, indexed (see ``_FlatAgents``).
    The last folder's index is kept: a walk, and an audit after it, takes
    the files of one folder one after the other."""
    try:
        mtime = os.stat(folder).st_mtime_ns
    except OSError:
        return _FlatAgents()
    index = _indexed.get(folder)
    if index is None:
        _indexed.clear()
        index = _indexed[folder] = _FlatAgents()
    if not (index.trusted and index.mtime == mtime):
        index.refresh(folder, mtime)
    return index


def subagent_files(session_file: Path) -> list[Path]:
    """The subagent transcripts of a session file, in a stable order: those
    under ``<session>/subagents/``, then flat ``agent-*.jsonl`` beside it
    whose first line names this session."""
    session = session_file.stem
    nested = sorted((session_file.parent / session / "subagents").glob(_AGENT_FILES))
    return nested + _flat_agents(session_file.parent).sessions.get(session, [])


def belongs_to_session(path: Path) -> bool:
    """Whether ``path`` is a subagent file whose session file is present, so a
    directory walk imports it with that session rather than on its own."""
    if not path.name.startswith("agent-"):
        return False
    if path.parent.name == "subagents" and path.parent.parent.with_suffix(".jsonl").is_file():
        return True
    session = _flat_agents(path.parent).named.get(path.name)
    return session is not None and (path.parent / f"{session}.jsonl").is_file()


def _agent_id(path: Path) -> str:
    return path.stem.removeprefix("agent-")


def _sessions(sample: Sample) -> Iterator[ImportedSession]:
    path = sample.path
    if path.name.startswith("agent-"):
        subagent = _agent_id(path)
        yield ImportedSession(
            format=NAME,
            session=path.stem,
            path=path,
            label=str(path),
            produce=lambda b: _stream(path, b, subagent, inline_sidechains=False),
        )
        return
    subagents = subagent_files(path)

    filed = frozenset(_agent_id(sub) for sub in subagents)

    def produce(b: Builder) -> Iterator[AnyEvent]:
        streams = [_stream(path, b, MAIN, inline_sidechains=True, filed=filed)]
        for sub in subagents:
            b.parent(_agent_id(sub), MAIN)
            streams.append(subagent_events(_stream(sub, b, _agent_id(sub), inline_sidechains=False), b.report))
        return merge_by_time(streams)

    yield ImportedSession(format=NAME, session=path.stem, path=path, label=str(path), produce=produce)


def _said(entry: dict[str, Any], content: Any) -> str | None:
    """The text of a user entry that answers no tool call, without the
    context blocks an IDE adds to it; ``None`` for meta entries (a custom
    command's expansion among them) and for an entry with no text left."""
    if entry.get("isMeta") or entry.get("isCompactSummary") or entry.get("isVisibleInTranscriptOnly"):
        return None
    if isinstance(content, list):
        text = "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    elif isinstance(content, str):
        text = content
    else:
        return None
    text = without_ide_context(text)
    return text if text.strip() else None


def _command(text: str) -> str | None:
    """What the user typed to run a slash command (``/deploy-check
    staging``), from the entry Claude Code records for it
    (``<command-name>``, ``<command-args>``); ``None`` for any other text."""
    if not text.lstrip().startswith(_COMMAND_STARTS):
        return None
    parts = dict(tagged(text, _COMMAND))
    name = parts.get("command-name", "").strip()
    if not name:
        return None
    typed = name if name.startswith("/") else f"/{name}"
    args = parts.get("command-args", "").strip()
    return f"{typed} {args}" if args else typed


class _Command(NamedTuple):
    """A slash command the user typed, waiting for its expansion."""

    uuid: Any
    typed: str
    ts: float


def _expands(entry: dict[str, Any], command: _Command) -> bool:
    """Whether ``entry``, the user entry after ``command``'s, is the prompt
    Claude Code made of it (a custom command's or skill's text, or a
    built-in prompt command's such as ``/init``): an ``isMeta`` entry that
    names the command's entry as its parent. A command that runs in the CLI
    (``/model``, ``/clear``, ``/compact``) has none, only its
    ``<local-command-stdout>``."""
    return command.uuid is not None and entry.get("isMeta") is True and entry.get("parentUuid") == command.uuid


def _denial(text: str) -> str | None:
    if text.startswith(_USER_REJECTED):
        return "user"
    if text.startswith(_PERMISSION_DENIED) and "has been denied" in text:
        return "permissions"
    return None


def _stream(
    path: Path, b: Builder, agent: str, *, inline_sidechains: bool, filed: frozenset[str] = frozenset()
) -> Iterator[AnyEvent]:
    """The events of one transcript file, as ``agent``. In a session file,
    entries marked ``isSidechain`` (1.0 versions kept subagents inline) go to
    a subagent of ``agent``: their ``agentId``, or, without one, the
    subagent whose thread they continue (``parentUuid``); a sidechain entry
    that continues no known thread starts subagent ``sidechain-<n>``.
    Stream-json entries of a subagent go to it by their ``agent_id`` (or
    ``parent_tool_use_id``). Claude Code 2.1 also copies each message of a
    subagent into the session file, wrapped in a ``progress`` entry
    (``agent_progress``): read from there for a subagent not ``filed`` (its
    own file is missing, as when one session file is copied alone)."""
    ts = 0.0
    last_message: dict[str, Any] = {}
    steps: dict[str, int] = {}
    threads: dict[Any, str] = {}  # sidechain entry uuid -> its subagent
    roots = itertools.count(1)
    early = _EarlyResults(b)
    commands: dict[str, _Command] = {}  # an agent's slash command, until its next user entry
    compacted: set[str] = set()  # agents whose next user entry may be the summary of a compaction
    for number, entry in enumerate(read_jsonl(path, b.report)):
        yield from early.expire(number)
        who = agent
        copied = _copied(entry, filed) if inline_sidechains else None
        if copied is not None:
            who, entry = copied
            b.parent(who, agent)
        ts = parse_time(entry.get("timestamp")) or ts
        if inline_sidechains and copied is None:
            inline = entry.get("agent_id") or entry.get("parent_tool_use_id")
            if entry.get("isSidechain") is True:
                who = _sidechain(entry, threads, roots)
            elif isinstance(inline, str) and inline:
                who = inline
            if who != agent:
                b.parent(who, agent)
        kind = entry.get("type")
        message = entry.get("message")
        if kind == "assistant" and isinstance(message, dict):
            content = message.get("content")
            if message.get("model") == "<synthetic>" or not isinstance(content, list):
                continue
            response = message.get("id") or entry.get("uuid")
            if response is None or last_message.get(who) != response:
                last_message[who] = response
                steps[who] = steps.get(who, 0) + 1
                b.model(message.get("model"))
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    call_id = str(block.get("id") or f"{entry.get('uuid')}:{block.get('name')}")
                    yield from b.call(who, call_id, steps[who], block.get("name"), block.get("input"), ts)
                    yield from early.answer(who, call_id)
        elif kind == "user" and isinstance(message, dict):
            content = message.get("content")
            command = commands.pop(who, None)
            if command is not None and _expands(entry, command):
                yield from b.user(who, command.typed, command.ts)
                continue
            results = _tool_results(content)
            for block in results:
                yield from _result(b, early, who, block, ts, number)
            if results:
                continue
            said = _said(entry, content)
            if who in compacted:
                compacted.discard(who)
                if said is not None and said.lstrip().startswith(_COMPACT_SUMMARY):
                    continue  # the summary a compaction leaves, without the flag that says so (an SDK log)
            typed = None if said is None else _command(said)
            if typed is not None:
                commands[who] = _Command(entry.get("uuid"), typed, ts)
            elif said is not None and not said.lstrip().startswith(_NOT_PROMPTS):
                yield from b.user(who, said, ts)
        elif kind == "attachment":
            yield from _attachment(b, who, entry.get("attachment"), ts)
        elif kind == "system" and _subtype(entry, message) == "compact_boundary":
            compacted.add(who)
            yield from b.compacted(who, ts)
    yield from early.expire(None)


def _copied(entry: dict[str, Any], filed: frozenset[str]) -> tuple[str, dict[str, Any]] | None:
    """The subagent and its entry that a session file's ``agent_progress``
    entry copies, unless that subagent is ``filed``."""
    data = entry.get("data") if entry.get("type") == "progress" else None
    if not isinstance(data, dict) or data.get("type") != "agent_progress":
        return None
    copy, named = data.get("message"), data.get("agentId")
    if not isinstance(copy, dict) or not isinstance(named, str) or not named or named in filed:
        return None
    return named, copy


def _subtype(entry: dict[str, Any], message: Any) -> Any:
    """A system entry's subtype: at its top level in a transcript, inside its
    ``message`` in a log of the Agent SDK's messages."""
    subtype = entry.get("subtype")
    return message.get("subtype") if subtype is None and isinstance(message, dict) else subtype


def _tool_results(content: Any) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of a user entry's content."""
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict) and block.get("type") == "tool_result"]


def _result(
    b: Builder, early: _EarlyResults, agent: str, block: dict[str, Any], ts: float, number: int
) -> tuple[AnyEvent, ...]:
    """What a ``tool_result`` block gives now: its result, or nothing while
    it waits for a call the file holds after it (see ``_EarlyResults``)."""
    call_id = str(block.get("tool_use_id"))
    text = text_of(block.get("content"))
    failed = bool(block.get("is_error"))
    denied = _denial(text) if failed else None
    if b.was_called(agent, call_id):
        return b.result(agent, call_id, text, ts, is_error=failed, denied_by=denied)
    return early.wait(_Result(agent, call_id, text, ts, failed, denied, number + _EARLY_ENTRIES))


class _Result(NamedTuple):
    """A tool result read before its call, with the number of the last
    entry it waits for its call through."""

    agent: str
    call_id: str
    content: str
    ts: float
    is_error: bool
    denied_by: str | None
    until: int

    def given(self, b: Builder) -> tuple[AnyEvent, ...]:
        """The result's event, or none when its call is unknown (counted as
        ``orphan-result`` by ``Builder.result``)."""
        return b.result(
            self.agent, self.call_id, self.content, self.ts, is_error=self.is_error, denied_by=self.denied_by
        )


class _EarlyResults:
    """Results a file holds before the call they answer. Claude Code 2.1
    sometimes writes a tool's result line just before the assistant line
    that holds its ``tool_use``, though the result's ``timestamp`` and
    ``parentUuid`` come after the call. Such a result waits, at most for the
    next ``_EARLY_ENTRIES`` entries of the file and with at most
    ``_EARLY_MAX`` waiting (the oldest gives way), and is given right after
    its call; one whose call does not come by then is an ``orphan-result``,
    as any result without a call."""

    def __init__(self, b: Builder) -> None:
        self._b = b
        self._waiting: dict[tuple[str, str], _Result] = {}  # oldest first

    def wait(self, result: _Result) -> tuple[AnyEvent, ...]:
        """Keep ``result`` until its call comes. A second result for the
        same call, and the oldest one waiting when ``_EARLY_MAX`` do, is
        given up on: an orphan."""
        key = (result.agent, result.call_id)
        if key in self._waiting:  # a call answers once: the later result has no call
            return result.given(self._b)
        given: tuple[AnyEvent, ...] = ()
        if len(self._waiting) == _EARLY_MAX:
            given = self._waiting.pop(next(iter(self._waiting))).given(self._b)
        self._waiting[key] = result
        return given

    def answer(self, agent: str, call_id: str) -> tuple[AnyEvent, ...]:
        """The waiting result of the call just made, if any."""
        result = self._waiting.pop((agent, call_id), None)
        return () if result is None else result.given(self._b)

    def expire(self, number: int | None) -> tuple[AnyEvent, ...]:
        """Stop waiting for the results whose wait ends before entry
        ``number`` (all of them at the end of the file, ``None``)."""
        given: tuple[AnyEvent, ...] = ()
        while self._waiting:
            key, result = next(iter(self._waiting.items()))
            if number is not None and result.until >= number:
                break
            del self._waiting[key]
            given += result.given(self._b)
        return given


def _sidechain(entry: dict[str, Any], threads: dict[Any, str], roots: Iterator[int]) -> str:
    """The subagent of an inline sidechain entry, remembered for the entries
    that continue its thread."""
    named = entry.get("agentId")
    who = str(named) if named else threads.get(entry.get("parentUuid")) or f"sidechain-{next(roots)}"
    uuid = entry.get("uuid")
    if uuid is not None:
        threads[uuid] = who
    return who


def _attachment(b: Builder, agent: str, attachment: Any, ts: float) -> Iterator[AnyEvent]:
    if not isinstance(attachment, dict):
        return
    kind = attachment.get("type")
    if kind == "hook_additional_context":
        hook = str(attachment.get("hookName") or attachment.get("hookEvent") or "hook")
        call_id = str(attachment.get("toolUseID") or "")
        if not b.was_called(agent, call_id):
            call_id = ""
        content = attachment.get("content")
        text = "\n".join(map(str, content)) if isinstance(content, list) else str(content or "")
        yield from b.context(
            agent,
            call_id,
            text,
            ts,
            plugin=f"claude-code-hook:{hook}",
            form="hook_additional_context",
            summary=str(attachment.get("hookEvent") or ""),
        )
    elif kind == "queued_command":
        origin = attachment.get("origin")
        human = not isinstance(origin, dict) or origin.get("kind") in (None, "human")
        if attachment.get("commandMode", "prompt") == "prompt" and human:
            text = without_ide_context(text_of(attachment.get("prompt")))
            if text.strip():
                yield from b.user(agent, text, ts)


FORMAT = Format(NAME, _sniff, _sessions)
