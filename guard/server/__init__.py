"""The resident guard (``repeat-tool-guard serve``): an ASGI application that
keeps many sessions' guard state in memory and answers Claude Code HTTP hooks
and a JSON events API for any runtime.

Install with the ``serve`` extra. Importing this package costs nothing until
one of its names is used, so the CLI can offer ``serve`` without loading the
server for every other command.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guard.server.app import DEFAULT_MAX_BODY, create_app
    from guard.server.events import (
        AgentStatusIn,
        ContextMessageOut,
        EventAnswer,
        EventIn,
        Halt,
        ToolCallIn,
        ToolResultIn,
        UserMessageIn,
    )
    from guard.server.metrics import Metrics
    from guard.server.sessions import FileSessionStore, Session, SessionStore

__all__ = [
    "DEFAULT_MAX_BODY",
    "AgentStatusIn",
    "ContextMessageOut",
    "EventAnswer",
    "EventIn",
    "FileSessionStore",
    "Halt",
    "Metrics",
    "Session",
    "SessionStore",
    "ToolCallIn",
    "ToolResultIn",
    "UserMessageIn",
    "create_app",
]

_HOMES = {
    "DEFAULT_MAX_BODY": "app",
    "create_app": "app",
    "AgentStatusIn": "events",
    "ContextMessageOut": "events",
    "EventAnswer": "events",
    "EventIn": "events",
    "Halt": "events",
    "ToolCallIn": "events",
    "ToolResultIn": "events",
    "UserMessageIn": "events",
    "Metrics": "metrics",
    "FileSessionStore": "sessions",
    "Session": "sessions",
    "SessionStore": "sessions",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'guard.server' has no attribute {name!r}")
    return getattr(importlib.import_module(f"guard.server.{home}"), name)
