"""pi coding agent sessions (``~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl``).

One JSON entry per line: a ``session`` header, then ``message`` entries
whose ``message`` is an agent message (``user``, ``assistant`` with
``toolCall`` blocks, ``toolResult`` answering one call by ``toolCallId``),
and bookkeeping entries (model and thinking-level changes, compactions,
labels, branch summaries). Since version 2 the entries form a tree through
``id``/``parentId`` (a branch continues from an earlier entry); they are
read in file order, so every branch the agent took is in the log. See
``docs/importers/pi.md``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bus import AnyEvent
from guard.importers._session import Builder, ImportedSession, parse_time, text_of
from guard.importers._source import Format, Sample, read_jsonl

__all__ = ["FORMAT"]

NAME = "pi"
MAIN = "main"

_ROLES = frozenset({"user", "assistant", "toolResult"})


def _sniff(sample: Sample) -> str | None:
    lines = sample.lines
    if lines and lines[0].get("type") == "session" and "id" in lines[0] and "timestamp" in lines[0]:
        return None
    for line in lines:
        message = line.get("message")
        if line.get("type") == "message" and isinstance(message, dict) and message.get("role") in _ROLES:
            return None
    return (
        'neither a {"type": "session"} header nor {"type": "message"} entries with a user/assistant/toolResult message'
    )


def _sessions(sample: Sample) -> Iterator[ImportedSession]:
    path = sample.path
    head = sample.lines[0]
    session = str(head.get("id") or path.stem) if head.get("type") == "session" else path.stem
    yield ImportedSession(
        format=NAME,
        session=session,
        path=path,
        label=str(path),
        produce=lambda b: _events(read_jsonl(path, b.report), b),
    )


def _events(entries: Iterator[dict[str, Any]], b: Builder) -> Iterator[AnyEvent]:
    ts = 0.0
    step = 0
    for entry in entries:
        message = entry.get("message")
        if entry.get("type") == "compaction":
            ts = parse_time(entry.get("timestamp")) or ts
            yield from b.compacted(MAIN, ts)
            continue
        if entry.get("type") != "message" or not isinstance(message, dict):
            continue
        ts = parse_time(entry.get("timestamp")) or _millis(message.get("timestamp")) or ts
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            text = text_of(content)
            if text.strip():
                yield from b.user(MAIN, text, ts)
        elif role == "assistant":
            step += 1
            b.model(message.get("model"))
            record = b.record(entry.get("id"), entry.get("timestamp"))  # an entry, by its id (its time before v2)
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "toolCall":
                    call_id = str(block.get("id"))
                    arguments = block.get("arguments")
                    yield from b.call(MAIN, call_id, step, block.get("name"), arguments, ts, record=record)
        elif role == "toolResult":
            yield from b.result(
                MAIN, str(message.get("toolCallId")), text_of(content), ts, is_error=message.get("isError") is True
            )


def _millis(value: Any) -> float | None:
    seconds = parse_time(value)
    return seconds / 1000 if seconds is not None and not isinstance(value, str) else seconds


FORMAT = Format(NAME, _sniff, _sessions)
