"""The guard's answer to one event, whoever asks: a fleet worker
(``FleetGuard.handle``), the server (``POST /v1/sessions/{id}/events``, which
sends it as JSON) and the command hook (which turns it into Claude Code's
hook output); and the one key a retried call or result is recognised by."""

from __future__ import annotations

import msgspec

from bus import ContextMessage, Decision

__all__ = ["Answer", "retry_key"]


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
