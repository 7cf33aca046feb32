"""mini-swe-agent trajectories (``*.traj.json``, format ``mini-swe-agent-1``).

A JSON document whose ``messages`` are the chat. The model acts through
text: an assistant turn with exactly one ```` ```bash ```` block is a call of
tool ``bash`` with args ``{"command": <block>}``, and the next user message
is its output (``<returncode>N</returncode>``; non-zero is an error). A turn
with no block or several is a format error the agent rejects: a step without
a call, and the complaint that follows is not a result. The first user
message is the task. Times come from each response's ``created``. See
``docs/importers/mini_swe_agent.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from bus import AnyEvent
from guard.importers._chat import function_calls
from guard.importers._session import Builder, ImportedSession, parse_time, text_of
from guard.importers._source import Format, Sample

__all__ = ["FORMAT"]

NAME = "mini-swe-agent"
MAIN = "main"

_ACTION = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)
_RETURN_CODE = re.compile(r"<returncode>(-?\d+)</returncode>")
_TIMED_OUT = "timed out and has been killed"


def _sniff(sample: Sample) -> str | None:
    doc = sample.document
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        if str(doc.get("trajectory_format", "")).startswith("mini-swe-agent"):
            return None
        messages = doc["messages"]
        if "info" in doc and any(isinstance(m, dict) and "role" in m for m in messages[:20]):
            return None
    return "not a document with trajectory_format mini-swe-agent-* (or info and {role, content} messages)"


def _sessions(sample: Sample) -> Iterator[ImportedSession]:
    path = sample.path
    doc = sample.document
    session = str(doc.get("instance_id") or path.name.removesuffix(".json").removesuffix(".traj"))
    messages = doc["messages"]
    yield ImportedSession(
        format=NAME, session=session, path=path, label=str(path), produce=lambda b: _events(messages, b)
    )


def _failed(text: str) -> bool:
    match = _RETURN_CODE.search(text)
    return (match is not None and match.group(1) != "0") or _TIMED_OUT in text


def _created(message: dict[str, Any]) -> float | None:
    extra = message.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    return parse_time(response.get("created")) if isinstance(response, dict) else None


def _events(messages: list[Any], b: Builder) -> Iterator[AnyEvent]:
    ts = 0.0
    step = 0
    waiting: str | None = None
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        text = text_of(message.get("content"))
        if role == "assistant":
            ts = _created(message) or ts
            step += 1
            waiting = None
            calls = function_calls(message)
            if not calls:
                blocks = _ACTION.findall(text)
                if len(blocks) == 1:
                    waiting = f"step-{step}"
                    calls = [(waiting, "bash", {"command": blocks[0].strip()})]
            for call_id, tool, args in calls:
                yield from b.call(MAIN, call_id, step, tool, args, ts)
        elif role == "tool":
            yield from b.result(MAIN, str(message.get("tool_call_id")), text, ts, is_error=_failed(text))
        elif role == "user":
            if step == 0:
                if text.strip():
                    yield from b.user(MAIN, text, ts)
            elif waiting is not None:
                yield from b.result(MAIN, waiting, text, ts, is_error=_failed(text))
                waiting = None


FORMAT = Format(NAME, _sniff, _sessions)
