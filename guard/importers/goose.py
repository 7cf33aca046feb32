"""goose sessions.

Two forms, one session each: a session file of goose up to 1.9
(``~/.local/share/goose/sessions/<id>.jsonl``: a first line of metadata,
``{working_dir, description, message_count, ...}``, then one message per
line), and a session exported as JSON (``goose session export --format
json``: the metadata with the messages under ``conversation``). A message is
``{role, created, content: [...]}``; a ``toolRequest`` block is a call
(``toolCall.value`` holds name and arguments) and the ``toolResponse`` block
with the same ``id`` is its result. goose 1.10 and later keep sessions in a
SQLite database; export them to read them. See ``docs/importers/goose.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from bus import AnyEvent
from guard.importers._session import Builder, ImportedSession, parse_time, text_of
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
    return "neither JSON Lines opening with {working_dir, message_count, ...} nor an export with a conversation"


def _sessions(sample: Sample) -> Iterator[ImportedSession]:
    path = sample.path
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
                yield from b.call(MAIN, call_id, step, str(call.get("name")), call.get("arguments"), ts)
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
