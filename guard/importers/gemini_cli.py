"""gemini-cli chat recordings (``~/.gemini/tmp/<project>/chats/session-*.json[l]``).

Two forms: the legacy single JSON document ``{sessionId, projectHash,
messages: [...]}``, and JSON Lines whose first line is that metadata and whose
other lines are message records (a record re-appended with the same ``id``
replaces the earlier one), ``{"$set": ...}`` metadata updates and
``{"$rewindTo": id}`` markers. Subagent recordings live in
``chats/<parent session id>/<session id>.jsonl`` and are merged in as
subagents of ``main``. A ``/chat save`` checkpoint (``checkpoint-<tag>.json``)
is the Gemini API history itself: ``{history: Content[], authType}``, or the
bare list in older versions. Headless output (``gemini -p ... --output-format
stream-json``) is JSON Lines of events: ``init``, ``message``, ``tool_use``,
``tool_result``, ``error``, ``result``. See ``docs/importers/gemini_cli.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bus import AnyEvent
from guard.adapters.gemini_hooks import cli_wrote, shell_failed
from guard.importers._session import Builder, ImportedSession, parse_time, text_of
from guard.importers._source import Format, Sample, merge_by_time, read_jsonl
from guard.importers._subagent import subagent_events

__all__ = ["FORMAT", "belongs_to_session"]

NAME = "gemini-cli"
MAIN = "main"

# a call id carries its creation time in ms: "<tool>-<ms>-<hex>" (older), "<tool>_<ms>_<n>" (current)
_CALL_TIME = re.compile(r"[-_](\d{13})[-_][0-9a-zA-Z]+$")
# what Gemini CLI shows for a shell command that printed nothing and exited non-zero
_SHELL_EXITED = re.compile(r"Command exited with code: -?[1-9]\d*")


def _checkpoint(doc: Any) -> list[Any] | None:
    """The history of a ``/chat save`` checkpoint: Gemini API ``Content``
    entries (``role`` ``user`` or ``model``, a list of ``parts``)."""
    history = doc.get("history") if isinstance(doc, dict) else doc
    if isinstance(history, list) and any(
        isinstance(c, dict) and c.get("role") in ("user", "model") and isinstance(c.get("parts"), list)
        for c in history[:20]
    ):
        return history
    return None


def _sniff(sample: Sample) -> str | None:
    doc = sample.document
    if isinstance(doc, dict) and "sessionId" in doc and isinstance(doc.get("messages"), list):
        messages = [m for m in doc["messages"][:20] if isinstance(m, dict)]
        if not messages or any("type" in m for m in messages):
            return None
        return "a {sessionId, messages} document whose messages have no type (gemini-cli's each have one)"
    if _checkpoint(doc) is not None:
        return None
    if sample.lines:
        first = sample.lines[0]
        if "sessionId" in first and "projectHash" in first and "type" not in first:
            return None
    if any(_is_stream_event(line) for line in sample.lines):
        return None
    return (
        "neither a {sessionId, messages} document, JSON Lines opening with {sessionId, projectHash},"
        " a checkpoint's history of {role, parts} contents, nor stream-json events"
        " ({type: init, session_id} or {type: tool_use|tool_result, tool_id})"
    )


def _is_stream_event(line: dict[str, Any]) -> bool:
    """Whether ``line`` is an event of headless output that names what it is
    about: an ``init`` its ``session_id``, a ``tool_use`` or ``tool_result``
    its call's ``tool_id`` (OpenCode's ``run`` events of those types carry
    a ``part`` instead, Claude Code's init is a ``system`` message)."""
    kind = line.get("type")
    return (kind == "init" and "session_id" in line) or (kind in ("tool_use", "tool_result") and "tool_id" in line)


def _sessions(sample: Sample) -> Iterator[ImportedSession]:
    path = sample.path
    history = _checkpoint(sample.document)
    if history is not None:
        yield ImportedSession(
            format=NAME, session=path.stem, path=path, label=str(path), produce=lambda b: _contents(history, b)
        )
        return
    if any(_is_stream_event(line) for line in sample.lines):
        init = next((line for line in sample.lines if line.get("type") == "init"), {})
        yield ImportedSession(
            format=NAME,
            session=str(init.get("session_id") or path.stem),
            path=path,
            label=str(path),
            produce=lambda b: _stream(path, b),
        )
        return
    doc = sample.document if isinstance(sample.document, dict) and "messages" in sample.document else None
    after = 0  # lines after a whole recording written as the file's first line
    if doc is None and isinstance(sample.lines[0].get("messages"), list):
        doc, after = sample.lines[0], len(sample.lines) - 1
    head = doc if doc is not None else sample.lines[0]
    session = str(head.get("sessionId") or path.stem)

    def produce(b: Builder) -> Iterator[AnyEvent]:
        if doc is not None:
            for _ in range(after):
                b.report.skip("bad-record")
            messages = doc.get("messages")
            return _events(messages if isinstance(messages, list) else [], b, MAIN)
        streams = [_events(_records(path, b), b, MAIN)]
        for sub in sorted((path.parent / session).glob("*.jsonl")):
            b.parent(sub.stem, MAIN)
            streams.append(subagent_events(_events(_records(sub, b), b, sub.stem), b.report))
        return merge_by_time(streams)

    yield ImportedSession(format=NAME, session=session, path=path, label=str(path), produce=produce)


def belongs_to_session(path: Path) -> bool:
    """Whether ``path`` is a subagent recording (``chats/<parent id>/<id>.jsonl``)
    whose parent session file ``chats/session-*-<parent id[:8]>.json[l]`` is present."""
    parent = path.parent.name
    if path.suffix != ".jsonl" or len(parent) < 8:
        return False
    return any(path.parent.parent.glob(f"session-*-{parent[:8]}.json*"))


def _records(path: Path, b: Builder) -> Iterator[dict[str, Any]]:
    """The message records of a JSON Lines recording, each in its final
    version. gemini-cli only ever re-appends its latest message (as tool
    calls and token counts arrive), so holding one record back suffices.
    Rewinds and ``$set`` rewrites are not applied: the audit wants what the
    agent did, including turns the user later rewound.

    The record handed out is marked as the one being imported (the line it
    came from, not the line read after it), so a record the importer cannot
    use is the one passed over and named."""
    report = b.report
    pending: dict[str, Any] | None = None
    at = report._at
    for record in read_jsonl(path, report):
        if not isinstance(record.get("id"), str) or "type" not in record:
            if not _METADATA.intersection(record):
                report.skip("bad-record")  # a message record with no id or type to read it by
            continue
        if pending is not None and pending["id"] != record["id"]:
            read, report._at = report._at, at
            yield pending
            report._at = read
        pending, at = record, report._at
    if pending is not None:
        report._at = at
        yield pending


# the lines of a JSON Lines recording that are no message: its header, its updates and rewinds
_METADATA = frozenset({"sessionId", "$set", "$rewindTo"})


def _call_time(call_id: str) -> float | None:
    match = _CALL_TIME.search(call_id)
    return int(match.group(1)) / 1000 if match else None


def _events(messages: Any, b: Builder, agent: str) -> Iterator[AnyEvent]:
    """Events of a message list. A ``gemini`` message collects the calls of
    every model response until the next text, so a call starts a new step
    when it was created (the time in its id) after the previous call
    finished: the model had seen that result."""
    ts = 0.0
    step = 0
    for message in messages:
        if not isinstance(message, dict):  # a pair of objects, or any item of a recording read from a line
            b.report.skip("not-an-object")
            continue
        ts = parse_time(message.get("timestamp")) or ts
        kind = message.get("type")
        if kind == "user":
            text = _typed(message.get("content"))
            if text:
                yield from b.user(agent, text, ts)
        elif kind is None and not isinstance(message.get("toolCalls"), list):
            b.report.skip("bad-record")  # no type to read it by
        elif kind == "gemini" or (kind not in _NOT_MODEL and isinstance(message.get("toolCalls"), list)):
            step += 1
            b.model(message.get("model"))
            finished: float | None = None
            for index, call in enumerate(_listed(message.get("toolCalls"), "toolCalls")):
                if not isinstance(call, dict):
                    continue
                call_id = str(call.get("id") or f"{message.get('id') or step}:{index}")
                created = _call_time(call_id)
                if finished is not None and created is not None and created > finished:
                    step += 1
                call_ts = parse_time(call.get("timestamp")) or ts
                finished = call_ts
                record = b.record(message.get("id"))  # a message re-appended (its id with it) is a copy
                yield from b.call(
                    agent, call_id, step, call.get("name"), call.get("args"), created or ts, record=record
                )
                yield from _result(b, agent, call_id, call, call_ts)


# the message types gemini-cli records that are no model response; a fork's
# model messages ("bob-shell") are read by their tool calls
_NOT_MODEL = frozenset({"user", "info", "error", "warning"})


def _typed(content: Any) -> str:
    """What the user typed in a recorded user turn: its text parts, none
    of the tool results (``functionResponse`` parts) an exported session
    keeps in user turns, nor what gemini-cli wrote there itself
    (``cli_wrote``); ``""`` when nothing is left."""
    if isinstance(content, list):
        content = "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str) and not part.get("thought")
        )
    text = text_of(content).strip()
    return "" if cli_wrote(text) else text


def _contents(history: list[Any], b: Builder) -> Iterator[AnyEvent]:
    """Events of a checkpoint's history: each ``model`` content is one
    response; its ``functionCall`` parts are calls, answered by the
    ``functionResponse`` parts of a later ``user`` content (by ``id``, else
    the first open call of that name). A checkpoint has no times."""
    step = 0
    pending: dict[str, str] = {}  # open calls and their tools, in the order they were made
    for content in history:
        if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
            continue
        parts = [p for p in content["parts"] if isinstance(p, dict)]
        if content.get("role") == "model":
            step += 1
            for index, part in enumerate(parts):
                call = part.get("functionCall")
                if isinstance(call, dict):
                    call_id = str(call.get("id") or f"{step}:{index}")
                    pending[call_id] = str(call.get("name"))
                    yield from b.call(MAIN, call_id, step, call.get("name"), call.get("args"), 0.0)
            continue
        for part in parts:
            response = part.get("functionResponse")
            if isinstance(response, dict):
                call_id = str(response.get("id") or "")
                if call_id not in pending:
                    name = str(response.get("name"))
                    call_id = next((c for c, tool in pending.items() if tool == name), call_id)
                pending.pop(call_id, None)
                body = response.get("response")
                text = text_of(_response_text(part))
                failed = (isinstance(body, dict) and "error" in body and "output" not in body) or shell_failed(
                    str(response.get("name")), text
                )
                yield from b.result(MAIN, call_id, text, 0.0, is_error=failed)
            elif isinstance(part.get("text"), str) and not part.get("thought"):
                text = _typed(part["text"])
                if text:
                    yield from b.user(MAIN, text, 0.0)


def _result(b: Builder, agent: str, call_id: str, call: dict[str, Any], ts: float) -> Iterator[AnyEvent]:
    status = call.get("status")
    if status not in ("success", "error", "cancelled"):
        return  # scheduled or still running when the file was written
    parts = [text_of(_response_text(part)) for part in _parts(call.get("result"))]
    text = "\n".join(p for p in parts if p) or text_of(call.get("resultDisplay"))
    denied = "user" if status == "cancelled" else None
    # a shell command that failed is recorded as a success; only its exit code says otherwise
    failed = status != "success" or shell_failed(str(call.get("name")), text)
    yield from b.result(agent, call_id, text, ts, is_error=failed, denied_by=denied)


def _stream(path: Path, b: Builder) -> Iterator[AnyEvent]:
    """Events of headless output. A model response is the run of
    ``assistant`` messages (its text comes in ``delta`` chunks) and
    ``tool_use`` events between two inputs (the prompt, a ``tool_result``),
    so the calls of one response share a step. Every run of the CLI opens
    with an ``init``; output of several runs appended to one file holds
    several. A run under another ``session_id`` than the first is a
    conversation of its own, so it is an agent of its own, named by that id
    (a run that resumes an earlier session goes on as that session's agent).
    Each line is written once: a ``tool_id`` used again is a new call."""
    first: str | None = None
    agent, model, ts = MAIN, None, 0.0
    steps: dict[str, int] = {}
    in_response = False
    for line in read_jsonl(path, b.report):
        ts = parse_time(line.get("timestamp")) or ts
        kind, role = line.get("type"), line.get("role")
        if kind == "init":
            session = str(line.get("session_id"))
            first = first or session
            agent = MAIN if session == first else session
            model, in_response = line.get("model"), False
        elif kind == "message" and role == "user":
            in_response = False
            text = text_of(line.get("content"))
            # the CLI stamps every event: a prompt without a timestamp is a note some
            # harness added (one echoes part of the prompt before each run), not a prompt
            if text.strip() and "timestamp" in line:
                yield from b.user(agent, text, ts)
        elif kind == "tool_result":
            in_response = False
            yield from _stream_result(b, agent, line, ts)
        elif kind == "tool_use" or (kind == "message" and role == "assistant"):
            if not in_response:
                steps[agent] = steps.get(agent, 0) + 1
                b.model(model)
                in_response = True
            if kind == "tool_use":
                call_id, tool, args = str(line.get("tool_id")), line.get("tool_name"), line.get("parameters")
                yield from b.call(agent, call_id, steps[agent], tool, args, ts, record=b.record())


def _stream_result(b: Builder, agent: str, line: dict[str, Any], ts: float) -> tuple[AnyEvent, ...]:
    """A ``tool_result``. ``output`` is what the CLI displays, all the line
    holds of a success (the model read more: a file's text, a command's exit
    code, so a command that failed shows only when it printed nothing). A
    failure (``status: "error"``) carries what the model read as ``error``
    ``{type, message}``; type ``policy_violation`` is a call that never ran,
    denied by Gemini CLI's policy engine or a ``BeforeTool`` hook."""
    call_id = str(line.get("tool_id"))
    output = text_of(line.get("output"))
    if line.get("status") == "success":
        return b.result(agent, call_id, output, ts, is_error=_SHELL_EXITED.fullmatch(output) is not None)
    error = line.get("error")
    kind, message = (error.get("type"), error.get("message")) if isinstance(error, dict) else (None, error)
    denied = "policy" if kind == "policy_violation" else None
    return b.result(agent, call_id, text_of(message) or output, ts, is_error=True, denied_by=denied)


def _listed(value: Any, field: str) -> Any:
    """A field gemini-cli writes as a list, or leaves out; an object or a
    text there makes the record one the importer cannot use (iterating it
    would pass over what it holds without a word), as does a number, which
    fails to iterate."""
    if not value:
        return ()
    if isinstance(value, (dict, str)):
        raise TypeError(f"{field} is {type(value).__name__}, not a list")
    return value


def _parts(result: Any) -> list[dict[str, Any]]:
    """A call's ``result`` as parts: gemini-cli records a list of parts,
    and its type (``PartListUnion``) also allows one part, or a text."""
    if isinstance(result, (dict, str)):
        result = [result]
    parts = _listed(result, "result")
    return [{"text": part} if isinstance(part, str) else part for part in parts if isinstance(part, (dict, str))]


def _response_text(part: dict[str, Any]) -> Any:
    response = part.get("functionResponse")
    if not isinstance(response, dict):
        return part.get("text", "")
    body = response.get("response")
    if isinstance(body, dict):
        for key in ("output", "error", "content"):
            if key in body:
                return body[key]
    return body


FORMAT = Format(NAME, _sniff, _sessions)
