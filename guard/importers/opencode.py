"""OpenCode sessions.

Three forms, one session each: ``opencode export <id>`` (a JSON document
``{info, messages: [{info, parts}]}``); ``opencode run --format json`` (JSON
Lines of ``{type, timestamp, sessionID, part}`` events); and a session file
of OpenCode's storage (``storage/session/<project>/<id>.json``), whose
messages are ``storage/message/<id>/*.json`` and whose parts are
``storage/part/<message id>/*.json``. A ``tool`` part is a call and, once
``completed`` or failed (``error``), its result; each ``step-start`` part
begins a model response. See ``docs/importers/opencode.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from bus import AnyEvent
from guard.importers._session import Builder, ImportedSession, ImportReport, nested, parse_time, text_of
from guard.importers._source import Format, Sample, read_documents, read_jsonl

__all__ = ["FORMAT", "belongs_to_session"]

NAME = "opencode"
MAIN = "main"

_RUN_EVENTS = frozenset({"tool_use", "step_start", "step_finish", "text", "reasoning", "error"})
_STORE_PARTS = frozenset({"message", "part"})
_REJECTED = "The user rejected permission"


def _is_export(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("info"), dict)
        and isinstance(doc.get("messages"), list)
        and any(isinstance(m, dict) and isinstance(m.get("info"), dict) and "parts" in m for m in doc["messages"][:20])
    )


def _is_stored_session(sample: Sample) -> bool:
    doc = sample.document
    return (
        isinstance(doc, dict)
        and str(doc.get("id", "")).startswith("ses")
        and "projectID" in doc
        and sample.path.parent.parent.name == "session"
    )


def _is_run(sample: Sample) -> bool:
    return any(
        line.get("type") in _RUN_EVENTS and "sessionID" in line and isinstance(line.get("part"), dict)
        for line in sample.lines
    )


def _sniff(sample: Sample) -> str | None:
    if _is_export(sample.document) or _is_stored_session(sample) or _is_run(sample):
        return None
    return (
        "neither an export {info, messages: [{info, parts}]}, a storage session/<project>/<id>.json,"
        " nor run --format json events {type, sessionID, part}"
    )


def belongs_to_session(path: Path) -> bool:
    """Whether ``path`` is a message or part file of OpenCode's storage,
    imported with its session file."""
    return path.parent.parent.name in _STORE_PARTS and (path.parents[2] / "session").is_dir()


def _sessions(sample: Sample) -> Iterator[ImportedSession]:
    path = sample.path
    doc = sample.document
    if _is_export(doc):
        info = doc["info"]
        session = str(info.get("id") or path.stem)
        yield ImportedSession(
            format=NAME, session=session, path=path, label=str(path), produce=lambda b: _messages(doc["messages"], b)
        )
    elif _is_stored_session(sample):
        session = str(doc["id"])
        storage = path.parents[2]
        yield ImportedSession(
            format=NAME,
            session=session,
            path=path,
            label=str(path),
            produce=lambda b: _messages(_stored(storage, session, b.report), b),
        )
    else:
        first = next(line for line in sample.lines if "sessionID" in line)
        yield ImportedSession(
            format=NAME,
            session=str(first["sessionID"]),
            path=path,
            label=str(path),
            produce=lambda b: _run(read_jsonl(path, b.report), b),
        )


def _stored(storage: Path, session: str, report: ImportReport) -> Iterator[dict[str, Any]]:
    """The messages of a stored session with their parts, in id order (OpenCode's
    ids ascend with time); a file that does not decode is skipped and counted."""
    for info in read_documents(sorted((storage / "message" / session).glob("*.json")), report):
        if not isinstance(info, dict):
            continue
        parts = read_documents(sorted((storage / "part" / str(info.get("id"))).glob("*.json")), report)
        yield {"info": info, "parts": [p for p in parts if isinstance(p, dict)]}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _millis(value: Any) -> float | None:
    seconds = parse_time(value)
    return None if seconds is None else seconds / 1000


def _messages(messages: Iterable[Any], b: Builder) -> Iterator[AnyEvent]:
    step = 0
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("info"), dict):
            continue
        info = message["info"]
        parts: list[Any] = message["parts"] if isinstance(message.get("parts"), list) else []
        ts = _millis(nested(info, "time", "created")) or 0.0
        if info.get("role") == "user":
            text = "\n".join(
                str(p.get("text") or "")
                for p in parts
                if isinstance(p, dict) and p.get("type") == "text" and not p.get("synthetic") and not p.get("ignored")
            )
            if text.strip():
                yield from b.user(MAIN, text, ts)
            if any(isinstance(p, dict) and p.get("type") == "compaction" for p in parts):
                yield from b.compacted(MAIN, ts)  # the user (or opencode) asked to compact the context
            continue
        if info.get("role") != "assistant":
            continue
        if not any(isinstance(p, dict) and p.get("type") == "step-start" for p in parts):
            step += 1
            b.model(info.get("modelID"))
        for part in parts:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "step-start":
                step += 1
                b.model(info.get("modelID"))
            elif part.get("type") == "tool":
                yield from _tool(part, step, ts, b)


def _run(lines: Iterator[dict[str, Any]], b: Builder) -> Iterator[AnyEvent]:
    step = 0
    for line in lines:
        part = line.get("part")
        if not isinstance(part, dict):
            continue
        if line.get("type") == "step_start":
            step += 1
        elif line.get("type") == "tool_use" and part.get("type") == "tool":
            yield from _tool(part, max(step, 1), _millis(line.get("timestamp")) or 0.0, b)


def _tool(part: dict[str, Any], step: int, ts: float, b: Builder) -> Iterator[AnyEvent]:
    """A tool part: the call, and its result once it has one."""
    state = _dict(part.get("state"))
    times = _dict(state.get("time"))
    call_id = str(part.get("callID") or part.get("id"))
    start = _millis(times.get("start")) or ts
    # run --format json prints a completed part on each update of it (a pruned output): the same part id, a copy
    record = b.record(part.get("id"))
    yield from b.call(MAIN, call_id, step, part.get("tool"), state.get("input"), start, record=record)
    status = state.get("status")
    if status not in ("completed", "error"):
        return
    done = _millis(times.get("end")) or ts
    if status == "error":
        text = text_of(state.get("error"))
        denied = "user" if text.startswith(_REJECTED) else None
        yield from b.result(MAIN, call_id, text, done, is_error=True, denied_by=denied)
        return
    code = nested(state, "metadata", "exit")
    failed = isinstance(code, int) and not isinstance(code, bool) and code != 0
    yield from b.result(MAIN, call_id, text_of(state.get("output")), done, is_error=failed)


FORMAT = Format(NAME, _sniff, _sessions)
