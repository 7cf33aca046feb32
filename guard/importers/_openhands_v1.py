"""OpenHands V1 (software-agent-sdk) conversations.

A V1 conversation is a folder ``<conversation id>/`` holding ``base_state.json``
and ``events/event-<index>-<event id>.json``, one event per file, each tagged
with its class in ``kind``. The same events also travel as a JSON list or as
JSON Lines (one event per line). An ``ActionEvent`` is a tool call (``tool_call``
holds the arguments exactly as the model wrote them); the observation events
(``ObservationEvent``, ``UserRejectObservation``, ``AgentErrorEvent``) answer
it by ``tool_call_id``. Calls share a step when one model response
(``llm_response_id``) requested them. See ``docs/importers/openhands.md``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bus import AnyEvent
from guard.importers._session import Builder, ImportReport, TranscriptError, nested, parse_args, parse_time, text_of
from guard.importers._source import read_document, read_documents

__all__ = [
    "conversation_of",
    "event_files",
    "events",
    "is_event",
    "is_event_file",
    "is_later_event_file",
    "model_of",
]

MAIN = "main"

_EVENT_FILE = re.compile(r"^event-(\d{5,})-[0-9a-fA-F-]{8,}\.json$")
_KINDS = frozenset(
    {
        "ActionEvent",
        "ObservationEvent",
        "UserRejectObservation",
        "AgentErrorEvent",
        "MessageEvent",
        "SystemPromptEvent",
        "ConversationStateUpdateEvent",
        "Condensation",
        "CondensationRequest",
        "CondensationSummaryEvent",
        "PauseEvent",
        "TokenEvent",
        "LLMCompletionLogEvent",
        "HookExecutionEvent",
        "ConversationErrorEvent",
    }
)
_ANSWERS = frozenset({"ObservationEvent", "UserRejectObservation", "AgentErrorEvent"})
_NOT_CALLS = frozenset({"finish", "think"})  # as in V0: a response, not a tool call


def is_event(value: Any) -> bool:
    """Whether ``value`` is a V1 event: a ``kind`` this module knows, with a ``source``."""
    return isinstance(value, dict) and value.get("kind") in _KINDS and "source" in value


def is_event_file(path: Path) -> bool:
    """Whether ``path`` is named as one event of a conversation folder: in its
    ``events/`` folder, or in a flat folder of event files."""
    return _EVENT_FILE.match(path.name) is not None


_STORES = frozenset({"event_service"})  # the agent server's folder inside a conversation


def conversation_of(path: Path) -> Path:
    """The conversation an event file belongs to: the folder holding
    ``events/`` (or, for the agent server, holding ``event_service/events/``),
    or the flat folder of event files itself."""
    folder = path.parent.parent if path.parent.name == "events" else path.parent
    return folder.parent if folder.name in _STORES else folder


_COMPANIONS = frozenset({"base_state.json", "meta.json"})
"""The files a conversation keeps beside its events: the SDK's state (which
names the model) and the agent server's record of the conversation. Neither
holds an event."""


def is_later_event_file(path: Path, siblings: Sequence[str] | None = None) -> bool:
    """Whether ``path`` is an event file other than a conversation's first,
    or a companion file beside its events (``_COMPANIONS``): a directory
    walk imports the conversation once, from its first event, and passes
    over the rest of its folder in silence. The first is the one of
    the lowest number among ``siblings`` (the sorted names of the files in
    its folder, as a walk lists them) that holds an event, so a conversation
    whose early events are gone or unreadable is still imported; without
    ``siblings``, ``event-00000-…``."""
    if path.name in _COMPANIONS:
        beside = path.parent
        events = (beside / "events").is_dir() or any(beside.glob("event-0*.json"))
        return events and (path.name == "base_state.json" or (beside / "base_state.json").is_file())
    match = _EVENT_FILE.match(path.name)
    if match is None:
        return False
    if siblings is None:
        return int(match.group(1)) > 0
    named = [name for name in siblings if _EVENT_FILE.match(name)][:_FIRST_TRIED]
    first = next((name for name in named if _holds_event(path.parent / name)), named[0] if named else path.name)
    return first != path.name


_FIRST_TRIED = 8
"""Event files a walk tries, in order, for the one a conversation is
imported from: an empty or cut-off first file (a writer killed mid-write)
does not hide the others, which the import reads all (the bad one skipped
and counted)."""


def _holds_event(path: Path) -> bool:
    try:
        return is_event(json.loads(path.read_bytes()))
    except (OSError, ValueError):
        return False


def event_files(folder: Path, report: ImportReport) -> Iterator[Any]:
    """The events of an ``events/`` folder in index order; a file that does
    not decode is skipped and counted as ``invalid-json``, one that holds
    no tagged event as ``not-an-event``."""
    numbered = []
    for path in folder.glob("event-*.json"):
        match = _EVENT_FILE.match(path.name)
        if match is not None:
            numbered.append((int(match.group(1)), path))
    for document in read_documents((path for _, path in sorted(numbered)), report):
        if isinstance(document, dict) and "kind" in document:
            yield document  # an event, or one of a kind newer than this importer (left out by ``events``)
        else:
            report.skip("not-an-event")


def model_of(events_folder: Path) -> str | None:
    """The agent's model, as the ``base_state.json`` beside ``events_folder``
    names it (``agent.llm.model``): the events themselves never name it.
    ``None`` when the file is missing, unreadable or names none; it holds no
    events, so nothing of the session is lost without it."""
    folder = events_folder.parent if events_folder.name == "events" else events_folder
    try:
        state = read_document(folder / "base_state.json")
    except TranscriptError:
        return None
    model = nested(state, "agent", "llm", "model")
    return model if isinstance(model, str) else None


def _text(value: Any) -> str:
    return text_of(value.get("content")) if isinstance(value, dict) else ""


def _call_args(event: dict[str, Any]) -> Any:
    call = event.get("tool_call")
    if isinstance(call, dict) and "arguments" in call:
        return parse_args(call["arguments"])
    action = event.get("action")
    return {k: v for k, v in action.items() if k != "kind"} if isinstance(action, dict) else {}


def failed_code(code: Any) -> bool:
    """Whether a command's exit code says it failed: any but 0 and -1, which
    means it had not finished (OpenHands reads a running command's output at
    a soft timeout, and the agent waits on it with an empty command)."""
    return isinstance(code, int) and not isinstance(code, bool) and code not in (0, -1)


def _answer(event: dict[str, Any]) -> tuple[str, bool, str | None]:
    """An observation's text, whether it failed, and who denied the call.

    Observations have changed shape across SDK releases: the text is
    ``content`` (blocks) in current ones and ``output`` in late-2025 ones,
    where a failure is ``error`` (a message, or ``true`` for a command) and the
    exit code sits in ``metadata``. The text is what the model saw: an error
    message replaces the output."""
    kind = event["kind"]
    if kind == "UserRejectObservation":
        return str(event.get("rejection_reason") or ""), True, str(event.get("rejection_source") or "user")
    if kind == "AgentErrorEvent":
        return str(event.get("error") or ""), True, None
    observation = event.get("observation")
    observation = observation if isinstance(observation, dict) else {}
    metadata = observation.get("metadata")
    error = observation.get("error")
    failed = (
        observation.get("is_error") is True
        or error is True
        or (isinstance(error, str) and bool(error))
        or failed_code(observation.get("exit_code"))
        or (isinstance(metadata, dict) and failed_code(metadata.get("exit_code")))
    )
    if isinstance(error, str) and error:
        return error, True, None
    if "content" in observation:
        return _text(observation), failed, None
    return text_of(observation.get("output")), failed, None


def events(stream: Iterable[Any], b: Builder, model: str | None = None) -> Iterator[AnyEvent]:
    """The session log events of V1 ``stream``; each model response is
    counted as one by ``model`` (the conversation's, from ``model_of``)."""
    ts = 0.0
    step = 0
    response: object = None
    responses: set[str] = set()  # the ids of think and finish calls, whose observations answer no tool call
    for event in stream:
        if not is_event(event):
            continue
        ts = parse_time(event.get("timestamp")) or ts
        kind = event["kind"]
        if kind == "MessageEvent" and event.get("source") == "user":
            text = _text(event.get("llm_message"))
            if text.strip():
                yield from b.user(MAIN, text, ts)
        elif kind in ("ActionEvent", "MessageEvent") and event.get("source") == "agent":
            this_response = event.get("llm_response_id")
            if this_response is None or this_response != response:
                step += 1
                response = this_response
                b.model(model)
            call = event.get("tool_call")
            tool = event.get("tool_name") or (call.get("name") if isinstance(call, dict) else None)
            call_id = str(event.get("tool_call_id") or f"event-{event.get('id')}")
            if kind == "ActionEvent" and tool in _NOT_CALLS:
                responses.add(call_id)
            elif kind == "ActionEvent":
                yield from b.call(MAIN, call_id, step, tool, _call_args(event), ts)
        elif kind == "Condensation":  # earlier events left the agent's view
            yield from b.compacted(MAIN, ts)
        elif kind in _ANSWERS:
            call_id = str(event.get("tool_call_id"))
            if call_id in responses:
                continue
            if kind == "AgentErrorEvent" and not b.was_called(MAIN, call_id):
                continue  # a malformed call that never became an action
            text, failed, denied = _answer(event)
            yield from b.result(MAIN, call_id, text, ts, is_error=failed, denied_by=denied)
