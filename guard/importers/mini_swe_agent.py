"""mini-swe-agent trajectories (``*.traj.json``, formats ``mini-swe-agent-1``
and ``mini-swe-agent-1.1``).

A JSON document whose ``messages`` are the chat (or, in the project's own
test data, the bare message list). Version 1 acts through text: an
assistant turn with exactly one ```` ```bash ```` block is a call of tool
``bash`` with args ``{"command": <block>}``, and the next user message is its
output (``<returncode>N</returncode>``; non-zero is an error). A turn with no
block or several is a format error the agent rejects: a step without a call,
and the complaint that follows is not a result. Version 2 records the
actions it executed in each response's ``extra.actions`` (tool calls by
default, answered by ``tool`` messages, or Responses API ``function_call``
items answered by ``function_call_output``) and each output's return code in
``extra.returncode``; a response it rejects for its format leaves no
assistant message, only the complaint (``extra.interrupt_type:
FormatError``), so that complaint is the step without a call. The user
messages before the first response are the task. See
``docs/importers/mini_swe_agent.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from bus import AnyEvent
from guard._tags import fenced
from guard.importers._chat import function_calls
from guard.importers._session import Builder, ImportedSession, nested, parse_args, parse_time, text_of
from guard.importers._source import Format, Sample

__all__ = ["FORMAT"]

NAME = "mini-swe-agent"
MAIN = "main"

_ACTION = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)
_RETURN_CODE = re.compile(r"<returncode>(-?\d+)</returncode>")
_TIMED_OUT = "timed out and has been killed"


def _is_chat(messages: Any) -> bool:
    return isinstance(messages, list) and any(
        isinstance(m, dict) and m.get("role") == "assistant" for m in messages[:20]
    )


def _sniff(sample: Sample) -> str | None:
    doc = sample.document
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        if str(doc.get("trajectory_format", "")).startswith("mini-swe-agent"):
            return None
        messages = doc["messages"]
        if "info" in doc and any(isinstance(m, dict) and "role" in m for m in messages[:20]):
            return None
    if _is_chat(doc):
        return None
    return "not a document with trajectory_format mini-swe-agent-* (or info and {role, content} messages)"


def _sessions(sample: Sample) -> Iterator[ImportedSession]:
    path = sample.path
    doc = sample.document
    name = path.name.removesuffix(".json").removesuffix(".traj")
    model = nested(doc, "info", "config", "model", "model_name")
    if isinstance(doc, list):
        messages: list[Any] = doc
    else:
        messages = doc["messages"]
        name = str(doc.get("instance_id") or name)
    yield ImportedSession(
        format=NAME, session=name, path=path, label=str(path), produce=lambda b: _events(messages, b, model)
    )


def _extra(message: dict[str, Any]) -> dict[str, Any]:
    extra = message.get("extra")
    return extra if isinstance(extra, dict) else {}


def _failed(message: dict[str, Any], text: str) -> bool:
    code = _extra(message).get("returncode")
    if isinstance(code, int) and not isinstance(code, bool):
        return code != 0
    match = _RETURN_CODE.search(text)
    return (match is not None and match.group(1) != "0") or _TIMED_OUT in text


def _time(message: dict[str, Any]) -> float | None:
    """Version 2 stamps each message's ``extra.timestamp``; version 1 only
    has the model response's ``created``."""
    extra = _extra(message)
    response = extra.get("response")
    created = response.get("created") if isinstance(response, dict) else None
    return parse_time(extra.get("timestamp")) or parse_time(created) or parse_time(message.get("created_at"))


def _rejected(message: dict[str, Any]) -> bool:
    """Whether ``message`` is mini-swe-agent 2's complaint about a response
    it rejected for its format ("No tool calls found in the response…").
    Version 2 records no assistant message for such a response, so the
    complaint stands for a model turn that made no call; it is the harness's
    text, never the user's. (Version 1 records the rejected response and
    marks no complaint.)"""
    return _extra(message).get("interrupt_type") == "FormatError"


def _recorded_actions(message: dict[str, Any], step: int) -> list[tuple[str, Any, Any]] | None:
    """The actions mini-swe-agent 2 executed for this response, as it
    recorded them; ``None`` when it did not (version 1)."""
    actions = _extra(message).get("actions")
    if not isinstance(actions, list):
        return None
    calls = []
    for index, action in enumerate(actions):
        if isinstance(action, dict):
            call_id = str(action.get("tool_call_id") or f"step-{step}" + (f"-{index}" if index else ""))
            calls.append((call_id, "bash", {"command": action.get("command")}))
    return calls


def _output_calls(message: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``function_call`` items of a Responses API response object."""
    return [
        (str(item.get("call_id") or item.get("id")), item.get("name"), parse_args(item.get("arguments")))
        for item in message.get("output") or ()
        if isinstance(item, dict) and item.get("type") == "function_call"
    ]


def _events(messages: list[Any], b: Builder, model: Any = None) -> Iterator[AnyEvent]:
    """The session log events of ``messages``; each response is counted by
    the model its recorded response names, else by ``model`` (the run's)."""
    ts = 0.0
    step = 0
    waiting: str | None = None
    for message in messages:
        if not isinstance(message, dict):  # a pair of objects, which only OpenHands histories hold
            b.report.skip("not-an-object")
            continue
        ts = _time(message) or ts
        role = message.get("role")
        text = text_of(message.get("content"))
        is_response = message.get("object") == "response"
        if _rejected(message):
            step += 1  # a response without calls: a gap in the steps, as a 1.x rejected turn leaves
            b.model(nested(message, "extra", "response", "model") or model)
            waiting = None
        elif role == "assistant" or is_response:
            step += 1
            b.model((message.get("model") if is_response else nested(message, "extra", "response", "model")) or model)
            waiting = None
            calls = _recorded_actions(message, step)
            if calls is None:
                calls = _output_calls(message) if is_response else function_calls(message)
            if not calls and not is_response:
                blocks = fenced(_ACTION, text)
                if len(blocks) == 1:
                    calls = [(f"step-{step}", "bash", {"command": blocks[0].strip()})]
            if len(calls) == 1 and calls[0][0].startswith("step-"):
                waiting = calls[0][0]
            # every assistant message is a new response: each call, by its place, a record of its own (Builder.call)
            for index, (call_id, tool, args) in enumerate(calls):
                yield from b.call(MAIN, call_id, step, tool, args, ts, record=(step, index))
        elif role == "tool" or message.get("type") == "function_call_output":
            raw = message.get("tool_call_id") if role == "tool" else message.get("call_id")
            if role != "tool":
                text = text_of(message.get("output"))
            yield from b.result(MAIN, str(raw), text, ts, is_error=_failed(message, text))
        elif role == "user":
            if step == 0:
                if text.strip():
                    yield from b.user(MAIN, text, ts)
            elif waiting is not None:
                yield from b.result(MAIN, waiting, text, ts, is_error=_failed(message, text))
                waiting = None


FORMAT = Format(NAME, _sniff, _sessions)
