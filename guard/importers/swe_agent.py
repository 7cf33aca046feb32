"""SWE-agent trajectories (``*.traj``): one JSON document per run.

The ``history`` list holds the chat the model saw. A non-demonstration
assistant turn is one step; its call is either the function-calling
``tool_calls`` (results are ``tool`` messages naming ``tool_call_ids``) or the
raw ``action`` string of the text-based interface (tool = its first word,
args ``{"command": action}``, or the editor's own arguments for a
``str_replace_editor`` action; the next user message is its result). User
messages before the first action are the task. The format has no
timestamps. See ``docs/importers/swe_agent.md``.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import Any

from bus import AnyEvent
from guard.importers._chat import function_calls
from guard.importers._session import Builder, ImportedSession, nested, parse_args, text_of
from guard.importers._source import Format, Records, Sample

__all__ = ["FORMAT"]

NAME = "swe-agent"
MAIN = "main"

_EDIT_REJECTED = "Your proposed edit has introduced new syntax error(s)"
_EDITOR_FAILED = (
    "No replacement was performed",
    "Invalid `view_range`",
    "Invalid `insert_line`",
    "No edit history found for ",
)
_BLOCKED = ("Operation '", "Interactive operation '")
_OBSERVATION = "OBSERVATION:"  # the header some runs put before every observation
_EDITOR = "str_replace_editor"
_EDITOR_COMMANDS = frozenset({"view", "create", "str_replace", "insert", "undo_edit"})
_EDITOR_NUMBERS = {"--view_range": 2, "--insert_line": 1}
_EDITOR_TEXTS = frozenset({"--file_text", "--old_str", "--new_str"})


def _is_history(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(m, dict) and "role" in m and "content" in m for m in value[:20])


def _sniff(sample: Sample) -> str | None:
    doc = sample.document
    if isinstance(doc, dict) and _is_history(doc.get("history")):
        return None
    return "not a document with a history of {role, content} messages"


def _sessions(sample: Sample) -> Iterator[ImportedSession]:
    path = sample.path
    history, trajectory = sample.document["history"], sample.document.get("trajectory")
    model = nested(parse_args(sample.document.get("replay_config")), "agent", "model", "name")
    steps = trajectory if isinstance(trajectory, Records) else Records([], f"{path}#trajectory")
    yield ImportedSession(
        format=NAME,
        session=path.stem,
        path=path,
        label=str(path),
        produce=lambda b: _events(history, steps, b, model),
    )


def _outcome(text: str) -> tuple[bool, str | None]:
    """Whether an observation is an error, and who denied the call: the
    environment's blocklist refuses some commands before they run (an
    ``OBSERVATION:`` header before the text is passed over). The
    trajectory keeps no exit code, so a failed edit is told by the editor's
    own report: a rolled-back edit, or ``str_replace_editor`` refusing one."""
    text = text.removeprefix(_OBSERVATION).lstrip()
    if text.startswith(_BLOCKED) and "is not supported by this environment" in text:
        return True, "blocklist"
    return text.startswith(_EDIT_REJECTED) or text.startswith(_EDITOR_FAILED), None


def _text_call(action: str) -> tuple[str, Any]:
    """The tool and arguments of a text-interface action. The editor's
    actions (``str_replace_editor view /f.py --view_range 9 20``) get the
    arguments its function-calling interface gives the same call
    (``{"command": "view", "path": "/f.py", "view_range": [9, 20]}``), so a
    view reads as a view and not as an edit; any other action, or an editor
    action that does not parse, is ``{"command": action}``."""
    tool = action.split()[0]
    if tool == _EDITOR:
        args = _editor_args(action)
        if args is not None:
            return tool, args
    return tool, {"command": action}


def _editor_args(action: str) -> dict[str, Any] | None:
    try:
        words = shlex.split(action)
    except ValueError:  # an unclosed quote
        return None
    if len(words) < 3 or words[1] not in _EDITOR_COMMANDS:
        return None
    args: dict[str, Any] = {"command": words[1], "path": words[2]}
    rest = words[3:]
    while rest:
        flag = rest.pop(0)
        count = _EDITOR_NUMBERS.get(flag)
        if count is not None:
            values, rest = rest[:count], rest[count:]
            if len(values) < count or not all(_number(v) for v in values):
                return None
            numbers = [int(v) for v in values]
            args[flag[2:]] = numbers if count > 1 else numbers[0]
        elif flag in _EDITOR_TEXTS and rest:
            args[flag[2:]] = rest.pop(0)
        else:
            return None
    return args


_MAX_DIGITS = 18


def _number(word: str) -> bool:
    """Whether ``word`` is a line number the editor takes: an integer of at
    most 18 digits (``int`` refuses a string of more than 4,300)."""
    digits = word.removeprefix("-")
    return digits.isdecimal() and len(digits) <= _MAX_DIGITS


def _events(history: list[Any], trajectory: Records, b: Builder, model: Any = None) -> Iterator[AnyEvent]:
    """The session log events of ``history``; each response is counted by
    ``model``, the run's (``replay_config``)."""
    step = 0
    acted = False
    waiting: str | None = None
    last: str | None = None
    for message in history:
        if not isinstance(message, dict) or message.get("is_demo"):
            continue
        role = message.get("role")
        text = text_of(message.get("content"))
        if role == "assistant":
            step += 1
            b.model(model)
            acted = True
            waiting = None
            calls = function_calls(message)
            action = message.get("action")
            last = action if isinstance(action, str) else None
            if not calls and isinstance(action, str) and action.strip():
                waiting = f"step-{step}"
                calls = [(waiting, *_text_call(action))]
            # every assistant message is a new response: each call, by its place, a record of its own (Builder.call)
            for index, (call_id, tool, args) in enumerate(calls):
                yield from b.call(MAIN, call_id, step, tool, args, 0.0, record=(step, index))
        elif role == "tool":
            for call_id in message.get("tool_call_ids") or [message.get("tool_call_id")]:
                is_error, denied = _outcome(text)
                yield from b.result(MAIN, str(call_id), text, 0.0, is_error=is_error, denied_by=denied)
        elif role == "user":
            if not acted:
                if text.strip():
                    yield from b.user(MAIN, text, 0.0)
            elif waiting is not None:
                is_error, denied = _outcome(text)
                yield from b.result(MAIN, waiting, text, 0.0, is_error=is_error, denied_by=denied)
                waiting = None
    yield from _after_history(trajectory, step, last, waiting, b, model)


def _after_history(
    trajectory: Records, step: int, last: str | None, waiting: str | None, b: Builder, model: Any = None
) -> Iterator[AnyEvent]:
    """What the run did after its ``history`` ends: the history is saved
    before the last step's observation (often a ``submit`` and its diff),
    which only ``trajectory`` (one ``{action, observation}`` per step) holds.
    The history's last action is found there (at its own step, else its
    last occurrence); its observation answers it if the history did not, and
    the steps after it are calls with their results."""
    if last is None or not trajectory:
        return
    actions = [_action(trajectory[i]) for i in range(len(trajectory))]  # indexed: iterating marks records
    at = step - 1 if 0 < step <= len(actions) and _same(actions[step - 1], last) else None
    if at is None:
        at = next((i for i in range(len(actions) - 1, -1, -1) if _same(actions[i], last)), None)
    if at is None:
        return
    observation = trajectory[at].get("observation")
    if waiting is not None and isinstance(observation, str):
        is_error, denied = _outcome(observation)
        yield from b.result(MAIN, waiting, observation, 0.0, is_error=is_error, denied_by=denied)
    for entry in trajectory.since(at + 1):  # the steps the history does not hold, each a record
        action = entry.get("action")
        if not isinstance(action, str) or not action.strip():
            continue
        step += 1
        b.model(model)
        call_id = f"step-{step}"
        yield from b.call(MAIN, call_id, step, *_text_call(action.strip()), 0.0)
        observation = entry.get("observation")
        if isinstance(observation, str):
            is_error, denied = _outcome(observation)
            yield from b.result(MAIN, call_id, observation, 0.0, is_error=is_error, denied_by=denied)


def _action(step: Any) -> Any:
    return step.get("action") if isinstance(step, dict) else None


def _same(action: Any, last: str) -> bool:
    return isinstance(action, str) and action.strip() == last.strip()


FORMAT = Format(NAME, _sniff, _sessions)
