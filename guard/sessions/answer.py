"""The guard's answer to one event, whoever asks: a fleet worker
(``FleetGuard.handle``), the server (``POST /v1/sessions/{id}/events``, which
sends it as JSON) and the command hook (which turns it into Claude Code's
hook output); the one key a retried call or result is recognised by; and
what an answer is kept with, so a copy of the hook event that asked it (a
hook delivered twice) gets it again instead of being applied twice."""

from __future__ import annotations

from typing import Any

import msgspec

from bus import ContextMessage, Decision
from guard.fingerprint import fingerprint

__all__ = ["Answer", "KeptAnswer", "call_digest", "result_digest", "retry_key"]


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """What the guard concluded at one event: ``seq`` is the event's place
    in its session; ``decision`` answers a tool call (``None`` for other
    events); ``messages`` are the context messages to show the model after
    it; ``halt`` is the reason while the guard asks the runtime to stop."""

    seq: int
    decision: Decision | None = None
    messages: tuple[ContextMessage, ...] = ()
    halt: str | None = None


def retry_key(kind: str, agent: str, call_id: str) -> str:
    """The key under which the answer to a ``tool/call`` or ``tool/result``
    (``kind``) of ``agent``'s call ``call_id`` is kept, so a retry of it is
    answered again rather than applied twice."""
    return f"{kind}\x1f{agent}\x1f{call_id}"


class KeptAnswer(msgspec.Struct, frozen=True):
    """An answer kept for copies of the event that asked it: ``digest``
    tells a copy (same content) from a new event under the same key."""

    digest: bytes
    answer: Answer


def call_digest(tool: str, args: Any) -> bytes:
    """A tool call's content (tool and arguments, as the log holds them), as
    16 bytes that tell a copy of it from another call under the same id."""
    return fingerprint("tool/call", [tool, args]).digest


def result_digest(content: str, is_error: bool) -> bytes:
    """A tool result's content, as 16 bytes that tell a copy of it (a tool's
    output may be megabytes: a snapshot keeps only this)."""
    return fingerprint("tool/result", [content, is_error]).digest
