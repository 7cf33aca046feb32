"""What a policy decided to do, as data: logged, replayed and compared."""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["DENYING", "Action", "ActionKind"]

ActionKind = Literal["remind", "deny", "rescue", "escalation-failed", "halt"]

DENYING: frozenset[str] = frozenset({"deny", "rescue", "escalation-failed"})
"""The kinds that deny the call that triggered them."""


class Action(msgspec.Struct, frozen=True, kw_only=True):
    """One guard action. ``text`` is exactly what the model (or runtime) gets:
    a reminder, a denial, or a halt reason. ``count`` is the repeat count the
    policy saw and ``threshold`` the configured value it crossed."""

    policy: str
    action: ActionKind
    agent: str | None
    tool: str
    count: int
    text: str
    call_id: str
    threshold: int | None = None
