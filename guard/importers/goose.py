"""goose sessions.

Three forms: goose's session database (``~/.local/share/goose/sessions/
sessions.db``, SQLite, since 1.10: every session in it, its messages in the
``messages`` table); a session file of goose up to 1.9 (``<id>.jsonl``: a
first line of metadata, ``{working_dir, description, message_count, ...}``,
then one message per line); and a session exported as JSON (``goose session
export --format json``: the metadata with the messages under
``conversation``). A message is ``{role, created, content: [...]}``; a
``toolRequest`` block is a call (``toolCall.value`` holds name and
arguments) and the ``toolResponse`` block with the same ``id`` is its
result. See ``docs/importers/goose.md``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import msgspec

from bus import AnyEvent
from guard.importers._session import (
    Builder,
    ImportedSession,
    ImportReport,
    TranscriptError,
    nests_too_deep,
    parse_time,
    text_of,
)
from guard.importers._source import Format, Sample, read_jsonl

__all__ = ["FORMAT"]

NAME = "goose"
MAIN = "main"

_METADATA = ("working_dir", "message_count", "total_tokens", "accumulated_total_tokens")
_REQUESTS = frozenset({"toolRequest", "frontendToolRequest"})
_DECLINED = "The user has declined to run this tool"


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and "role" in value and "created" in value and isinstance(value.get("content"), list)


def _is_export(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("conversation"), list)
        and any(_is_message(m) for m in doc["conversation"][:20])
    )


def _is_jsonl(sample: Sample) -> bool:
    lines = sample.lines
    return (
        bool(lines)
        and "role" not in lines[0]
        and any(k in lines[0] for k in _METADATA)
        and (len(lines) == 1 or any(_is_message(line) for line in lines[1:]))
    )


def _sniff(sample: Sample) -> str | None:
    if _is_jsonl(sample) or _is_export(sample.document):
        return None
    if sample.sqlite:
        return None if _has_messages(sample.path) else "an SQLite database without goose's messages table"
    return "neither JSON Lines opening with {working_dir, message_count, ...} nor an export with a conversation"


def _connect(path: Path) -> closing[sqlite3.Connection]:
    """The database, read-only (goose may be writing to it), closed after use."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    return closing(db)


def _has_messages(path: Path) -> bool:
    try:
        with _connect(path) as db:
            columns = {row[1] for row in db.execute("PRAGMA table_info(messages)")}
    except sqlite3.Error:
        return False
    return {"session_id", "role", "content_json", "created_timestamp"} <= columns


def _database_sessions(path: Path) -> Iterator[ImportedSession]:
    try:
        with _connect(path) as db:
            ids = [
                row[0]
                for row in db.execute("SELECT session_id, MIN(rowid) FROM messages GROUP BY session_id ORDER BY 2")
            ]
    except sqlite3.Error as exc:
        raise TranscriptError(f"{str(path)!r} cannot be read as goose's session database: {exc}") from None
    for value in ids:
        text = _text(value)
        session = "null" if text is None else text
        yield ImportedSession(
            format=NAME,
            session=session,
            path=path,
            label=f"{path}#{session}",
            produce=_stored(path, value),
        )


def _stored(path: Path, session: object) -> Any:
    return lambda b: _events(_rows(path, session, b.report), b)


def _text(cell: object) -> str | None:
    """A cell read as text: TEXT as it is, a BLOB decoded as UTF-8 (JSON
    stored as a BLOB is still JSON), a number ``str``'d; ``NULL`` is
    ``None``."""
    if cell is None or isinstance(cell, str):
        return cell
    if isinstance(cell, bytes):
        return cell.decode("utf-8", "replace")
    return str(cell)


def _rows(path: Path, session: object, report: ImportReport) -> Iterator[dict[str, Any]]:
    """A session's messages from the database, in the order goose wrote them;
    a message whose JSON does not decode (or whose cells hold no text) is
    skipped and counted."""
    try:
        with _connect(path) as db:
            query = "SELECT rowid AS record, * FROM messages WHERE session_id IS ? ORDER BY rowid"
            rows = db.execute(query, (session,)).fetchall()
    except sqlite3.Error as exc:
        raise TranscriptError(f"{str(path)!r} cannot be read as goose's session database: {exc}") from None
    columns = set(rows[0].keys()) if rows else set()
    name = f"{path}#messages"
    for row in rows:
        record = (name, row["record"])  # a row is a record: one the importer fails on costs that row
        if record in report._passed:
            continue
        report._at = record
        stored = _text(row["content_json"]) or ""
        metadata = _text(row["metadata_json"]) if "metadata_json" in columns else None  # older databases lack it
        if nests_too_deep(stored) or nests_too_deep(metadata or ""):
            report.skip("too-deep")
            continue
        try:
            content = msgspec.json.decode(stored)
            message = {"role": row["role"], "created": row["created_timestamp"], "content": content}
            message["metadata"] = msgspec.json.decode(metadata) if metadata else None
        except msgspec.DecodeError:
            report.skip("invalid-json")
            continue
        if not isinstance(content, list):
            report.skip("not-a-message")  # goose stores a message's content as a list of parts
            continue
        yield message


def _sessions(sample: Sample) -> Iterator[ImportedSession]:
    path = sample.path
    if sample.sqlite:
        yield from _database_sessions(path)
        return
    doc = sample.document
    if _is_export(doc):
        session = str(doc.get("id") or path.stem)
        yield ImportedSession(
            format=NAME, session=session, path=path, label=str(path), produce=lambda b: _events(doc["conversation"], b)
        )
        return
    yield ImportedSession(
        format=NAME,
        session=path.stem,
        path=path,
        label=str(path),
        produce=lambda b: _events(read_jsonl(path, b.report), b),
    )


def _value(part: dict[str, Any], key: str) -> tuple[Any, Any]:
    """A ``toolCall`` or ``toolResult``: its value and its error (``None``
    when it succeeded)."""
    outcome = part.get(key)
    if not isinstance(outcome, dict):
        return None, "missing"
    if outcome.get("status") == "error" or "error" in outcome:
        return None, outcome.get("error") or "error"
    return outcome.get("value"), None


def _events(messages: Iterable[Any], b: Builder) -> Iterator[AnyEvent]:
    step = 0
    malformed: set[str] = set()  # requests the model wrote but goose could not parse: no call ran
    for message in messages:
        if not _is_message(message):
            continue
        ts = parse_time(message.get("created")) or 0.0
        role = message.get("role")
        if role == "assistant":
            step += 1
        texts = []
        for part in message["content"]:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            call_id = str(part.get("id"))
            if kind in _REQUESTS and role == "assistant":
                call, error = _value(part, "toolCall")
                if error is not None or not isinstance(call, dict):
                    malformed.add(call_id)
                    continue
                record = b.record(message.get("id"))  # a message, by its id (else its place)
                yield from b.call(MAIN, call_id, step, call.get("name"), call.get("arguments"), ts, record=record)
            elif kind == "toolResponse":
                if call_id in malformed:
                    continue
                result, error = _value(part, "toolResult")
                if error is not None:
                    yield from b.result(MAIN, call_id, text_of(error), ts, is_error=True)
                    continue
                content = result.get("content") if isinstance(result, dict) else result
                text = text_of(content)
                denied = "user" if text.startswith(_DECLINED) else None
                failed = denied is not None or (isinstance(result, dict) and result.get("isError") is True)
                yield from b.result(MAIN, call_id, text, ts, is_error=failed, denied_by=denied)
            elif kind == "text" and role == "user":
                texts.append(str(part.get("text") or ""))
        visible = message.get("metadata")
        if texts and "".join(texts).strip() and not (isinstance(visible, dict) and visible.get("userVisible") is False):
            yield from b.user(MAIN, "\n".join(texts), ts)


FORMAT = Format(NAME, _sniff, _sessions)
