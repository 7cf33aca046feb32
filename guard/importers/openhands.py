"""OpenHands event trajectories: V0 (``action``/``observation`` events) and
V1 (software-agent-sdk ``kind``-tagged events, see ``_openhands_v1``).

V0 comes in two forms: a trajectory file, a JSON list of events (or ``{"history": [...]}``),
which is one session; and an evaluation ``output.jsonl``, where each line is
one benchmark instance whose ``history`` is that event list: each line is
imported as its own session, named by its ``instance_id``. An agent action
other than a message, think, finish or bookkeeping action is a tool call; the
observation whose ``cause`` is the action's id is its result. Calls share a
step when the same model response (``tool_call_metadata.model_response.id``)
requested them. See ``docs/importers/openhands.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bus import AnyEvent
from guard.importers import _openhands_v1 as v1
from guard.importers._session import Builder, ImportedSession, ImportReport, parse_args, parse_time, text_of
from guard.importers._source import Format, Records, Sample, is_pair, read_jsonl

__all__ = ["FORMAT", "belongs_to_session"]

NAME = "openhands"
MAIN = "main"

_NOT_CALLS = frozenset(
    {"message", "finish", "reject", "think", "system", "recall", "change_agent_state", "condensation", "null"}
)
_NOT_RESPONSES = frozenset({"system", "recall", "change_agent_state", "condensation", "condensation_request", "null"})
_EDITOR_OBSERVATIONS = frozenset({"edit", "read"})
_EDITOR_ERROR = "ERROR:"
_BOOKKEEPING = frozenset(
    {
        "thought",
        "security_risk",
        "is_input",
        "blocking",
        "is_static",
        "cwd",
        "hidden",
        "confirmation_state",
        "impl_source",
        "translated_ipython_code",
        "include_extra",
        "kernel_init_code",
        "timeout",
        "keep_prompt",
        "is_confirmed",
    }
)


def _is_event(value: Any) -> bool:
    return isinstance(value, dict) and "source" in value and ("action" in value or "observation" in value)


def _is_events(value: Any) -> bool:
    return isinstance(value, list) and any(_is_event(e) or is_pair(e) for e in value[:20])


def _is_history(value: Any) -> bool:
    """Whether ``value`` is an evaluation record's history: V0 events or
    pairs, or V1 events."""
    return _is_events(value) or (isinstance(value, list) and any(v1.is_event(e) for e in value[:20]))


def _is_record(line: dict[str, Any]) -> bool:
    history = line.get("history")
    return isinstance(history, list) and ("instance_id" in line or _is_history(history))


def _v1_form(sample: Sample) -> str | None:
    """Which V1 form ``sample`` is: ``folder`` (one event file of a
    conversation, in its ``events/`` or a flat folder), ``list`` or ``lines``;
    ``None`` if not V1."""
    doc = sample.document
    if v1.is_event(doc) and v1.is_event_file(sample.path):
        return "folder"
    if isinstance(doc, list) and any(v1.is_event(e) for e in doc[:20]):
        return "list"
    if any(v1.is_event(line) for line in sample.lines):
        return "lines"
    return None


def _sniff(sample: Sample) -> str | None:
    doc = sample.document
    if _is_events(doc) or (isinstance(doc, dict) and _is_events(doc.get("history"))):
        return None
    if any(_is_record(line) for line in sample.lines):
        return None
    if _v1_form(sample) is not None:
        return None
    return (
        "neither a list of {source, action|observation} events (or [action, observation] pairs),"
        " JSON Lines of {instance_id, history}, nor V1 {kind, source} events"
    )


def belongs_to_session(path: Path, siblings: Sequence[str] | None = None) -> bool:
    """Whether ``path`` is part of a V1 conversation folder imported from its
    first event file (``siblings``: see ``is_later_event_file``)."""
    return v1.is_later_event_file(path, siblings)


def _sessions(sample: Sample) -> Iterator[ImportedSession]:
    path = sample.path
    doc = sample.document
    form = _v1_form(sample)
    if form == "folder":
        conversation = v1.conversation_of(path)
        yield ImportedSession(
            format=NAME,
            session=conversation.name,
            path=path,
            label=str(conversation),
            produce=lambda b: v1.events(v1.event_files(path.parent, b.report), b, v1.model_of(path.parent)),
        )
        return
    if form is not None:
        yield ImportedSession(
            format=NAME,
            session=path.stem,
            path=path,
            label=str(path),
            produce=lambda b: v1.events(doc if form == "list" else read_jsonl(path, b.report), b),
        )
        return
    if isinstance(doc, dict) and _is_record(doc) and "instance_id" in doc:
        # an evaluation output of one line: one instance, V0 or V1, named as in a longer one
        instance = str(doc["instance_id"])
        yield ImportedSession(
            format=NAME, session=instance, path=path, label=f"{path}#{instance}", produce=_producer(doc["history"])
        )
        return
    if _is_events(doc) or isinstance(doc, dict):
        history = doc if isinstance(doc, list) else doc.get("history", [])
        yield ImportedSession(
            format=NAME, session=path.stem, path=path, label=str(path), produce=lambda b: _events(history, b)
        )
        return
    report = ImportReport()
    records = _evaluation_records(path, report)
    pending = next(records, None)
    while pending is not None:
        line, record, history = pending
        # Read one line ahead, so a torn last line is counted before the
        # last session is handed out.
        pending = next(records, None)
        instance = str(record.get("instance_id") or record.get("task_id") or f"line-{line}")
        yield ImportedSession(
            format=NAME,
            session=instance,
            path=path,
            label=f"{path}#{instance}",
            produce=_producer(history),
            report=report,
        )


def _evaluation_records(path: Path, report: ImportReport) -> Iterator[tuple[int, dict[str, Any], Records]]:
    """The evaluation records of an ``output.jsonl``, each with its line
    and its history as ``Records`` (``output.jsonl:<line>#history``) bound
    to ``report``: each event is a record, as in a trajectory file, so an
    event the importer cannot use costs that event, not the rest of its
    instance."""
    for record in read_jsonl(path, report):
        if _is_record(record):
            assert report._at is not None  # read_jsonl marks the line of each object it yields
            name, line = report._at
            history = Records(record["history"], f"{name}:{line}#history")
            history.report = report
            yield line, record, history


def _producer(history: list[Any]) -> Callable[[Builder], Iterator[AnyEvent]]:
    """The events of one evaluation record: V1 evaluation output keeps the
    SDK's events in ``history``, V0 its own."""
    if any(v1.is_event(e) for e in history[:20]):
        return lambda b: v1.events(history, b)
    return lambda b: _events(history, b)


def _model_args(metadata: dict[str, Any], call_id: str) -> Any:
    """The arguments exactly as the model wrote them, from the recorded model
    response; ``None`` when the response is not recorded."""
    response = metadata.get("model_response")
    if not isinstance(response, dict):
        return None
    for choice in response.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        for call in (message or {}).get("tool_calls") or ():
            if isinstance(call, dict) and call.get("id") == call_id:
                function = call.get("function") or {}
                return parse_args(function.get("arguments"))
    return None


def _failed(event: dict[str, Any]) -> bool:
    """Whether an observation reports a failure: an ``error`` observation, an
    editor observation whose text is the editor's ``ERROR:`` report (how
    OpenHands records a failed ``str_replace`` or an invalid ``view_range``),
    or a command's exit code other than 0 (in ``extras.metadata``, or in
    ``extras`` itself in 2024 output) and -1, OpenHands' code for a command
    still running when its output was read (a soft timeout)."""
    kind = event.get("observation")
    if kind == "error":
        return True
    if kind in _EDITOR_OBSERVATIONS and text_of(event.get("content")).startswith(_EDITOR_ERROR):
        return True
    extras = event.get("extras")
    extras = extras if isinstance(extras, dict) else {}
    metadata = extras.get("metadata")
    code = metadata.get("exit_code") if isinstance(metadata, dict) else extras.get("exit_code")
    return v1.failed_code(code)


def _linked(history: list[Any]) -> Iterator[tuple[int, dict[str, Any], Any]]:
    """Each event of a V0 history with its position and the key that links
    an observation to its action: the action's ``id`` and the observation's
    ``cause``, or, for an ``[action, observation]`` pair, the pair itself."""
    for position, item in enumerate(history):
        if isinstance(item, dict):
            yield position, item, item.get("id") if item.get("action") is not None else item.get("cause")
        else:  # a history's Records pass only objects and [action, observation] pairs
            yield position, item[0], ("pair", position)
            yield position, item[1], ("pair", position)


def _events(history: list[Any], b: Builder) -> Iterator[AnyEvent]:
    ts = 0.0
    step = 0
    response: object = None
    calls_by_action: dict[Any, str] = {}
    for position, event, link in _linked(history):
        ts = parse_time(event.get("timestamp")) or ts
        action = event.get("action")
        metadata = event.get("tool_call_metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        if action is not None:
            args: dict[str, Any] = event["args"] if isinstance(event.get("args"), dict) else {}
            if event.get("source") == "user":
                if action == "message":
                    yield from b.user(MAIN, str(args.get("content") or event.get("message") or ""), ts)
                continue
            if event.get("source") != "agent" or not isinstance(action, str) or action in _NOT_RESPONSES:
                continue
            model_response = metadata.get("model_response")
            this_response = model_response.get("id") if isinstance(model_response, dict) else None
            if this_response is None or this_response != response:
                step += 1
                response = this_response
                if isinstance(model_response, dict):
                    b.model(model_response.get("model"))
            if action in _NOT_CALLS:
                continue
            event_id = event.get("id")
            call_id = str(metadata.get("tool_call_id") or (f"event-{event_id}" if event_id is not None else ""))
            call_id = call_id or f"position-{position}"
            tool = metadata.get("function_name") or action
            call_args = _model_args(metadata, call_id)
            if call_args is None:
                call_args = {k: v for k, v in args.items() if k not in _BOOKKEEPING}
            calls_by_action[link] = call_id
            yield from b.call(MAIN, call_id, step, tool, call_args, ts)
        elif event.get("observation") is not None:
            call_id = calls_by_action.pop(link, "")
            if not call_id:
                continue  # observes no tool call: a think, a recall, a validation error
            rejected = event.get("observation") == "user_rejected"
            yield from b.result(
                MAIN,
                call_id,
                text_of(event.get("content")),
                ts,
                is_error=rejected or _failed(event),
                denied_by="user" if rejected else None,
            )


FORMAT = Format(NAME, _sniff, _sessions)
