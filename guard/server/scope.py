"""What a request is about (its route, session and project), for listeners
that hear of events and actions without being told whose they are.

The server handles a session's events in the request's own task, so the
store's ``on_event`` and ``on_action`` listeners run inside the request's
context and read it from there.
"""

from __future__ import annotations

import time
from contextvars import ContextVar, Token

__all__ = ["RequestScope", "current", "enter", "leave", "note"]


class RequestScope:
    """The route a request came in on, when it arrived (wall clock), and
    once known, its session and project."""

    __slots__ = ("arrived", "project", "route", "session")

    def __init__(self, route: str) -> None:
        self.route = route
        self.arrived = time.time()
        self.session: str | None = None
        self.project: str | None = None


_current: ContextVar[RequestScope | None] = ContextVar("repeat_tool_guard_request", default=None)


def enter(route: str) -> Token[RequestScope | None]:
    """A new scope for a request of ``route``; ``leave`` it with the token."""
    return _current.set(RequestScope(route))


def leave(token: Token[RequestScope | None]) -> None:
    _current.reset(token)


def current() -> RequestScope | None:
    """The scope of the request being handled, ``None`` outside one."""
    return _current.get()


def note(*, session: str | None = None, project: str | None = None) -> None:
    """Record the request's session or project, when inside a request."""
    scope = _current.get()
    if scope is None:
        return
    if session is not None:
        scope.session = session
    if project is not None:
        scope.project = project
