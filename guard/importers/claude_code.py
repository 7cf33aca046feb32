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
from typing import Any

from bus import AnyEvent
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

    def produce(b: Builder) -> Iterator[AnyEvent]:
        streams = [_stream(path, b, MAIN, inline_sidechains=True)]
        for sub in subagents:
            b.parent(_agent_id(sub), MAIN)
            streams.append(subagent_events(_stream(sub, b, _agent_id(sub), inline_sidechains=False), b.report))
        return merge_by_time(streams)

    yield ImportedSession(format=NAME, session=path.stem, path=path, label=str(path), produce=produce)


def _prompt(entry: dict[str, Any], content: Any) -> str | None:
    """The text of a genuine user prompt in an entry that answers no tool
    call, or ``None`` for meta entries and Claude Code's own scaffolding
    (slash commands, local command output, interruption markers, task
    notifications)."""
    if entry.get("isMeta") or entry.get("isCompactSummary") or entry.get("isVisibleInTranscriptOnly"):
        return None
    if isinstance(content, list):
        text = "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    elif isinstance(content, str):
        text = content
    else:
        return None
    stripped = text.lstrip()
    if not stripped or stripped.startswith(_NOT_PROMPTS):
        return None
    return text


def _denial(text: str) -> str | None:
    if text.startswith(_USER_REJECTED):
        return "user"
    if text.startswith(_PERMISSION_DENIED) and "has been denied" in text:
        return "permissions"
    return None


def _stream(path: Path, b: Builder, agent: str, *, inline_sidechains: bool) -> Iterator[AnyEvent]:
    """The events of one transcript file, as ``agent``. In a session file,
    entries marked ``isSidechain`` (1.0 versions kept subagents inline) go to
    a subagent of ``agent``: their ``agentId``, or, without one, the
    subagent whose thread they continue (``parentUuid``); a sidechain entry
    that continues no known thread starts subagent ``sidechain-<n>``.
    Stream-json entries of a subagent go to it by their ``agent_id`` (or
    ``parent_tool_use_id``)."""
    ts = 0.0
    last_message: dict[str, Any] = {}
    steps: dict[str, int] = {}
    threads: dict[Any, str] = {}  # sidechain entry uuid -> its subagent
    roots = itertools.count(1)
    for entry in read_jsonl(path, b.report):
        ts = parse_time(entry.get("timestamp")) or ts
        who = agent
        if inline_sidechains:
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
        elif kind == "user" and isinstance(message, dict):
            content = message.get("content")
            answers = False
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        answers = True
                        text = text_of(block.get("content"))
                        failed = bool(block.get("is_error"))
                        yield from b.result(
                            who,
                            str(block.get("tool_use_id")),
                            text,
                            ts,
                            is_error=failed,
                            denied_by=_denial(text) if failed else None,
                        )
            prompt = None if answers else _prompt(entry, content)
            if prompt is not None:
                yield from b.user(who, prompt, ts)
        elif kind == "attachment":
            yield from _attachment(b, who, entry.get("attachment"), ts)
        elif kind == "system" and entry.get("subtype") == "compact_boundary":
            yield from b.compacted(who, ts)


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
            text = text_of(attachment.get("prompt"))
            if text.strip():
                yield from b.user(agent, text, ts)


FORMAT = Format(NAME, _sniff, _sessions)
