"""The live page of ``serve``: every session being guarded, its calls,
repeats and guard actions drawn as the audit report draws them, updated as
they happen through server-sent events.

The feed keeps a bounded summary of the most recently active sessions in
memory. A hook request only updates that summary and marks its session
changed; a background task sends each changed session, at most every
``FLUSH_SECONDS``, encoded once, to every open page. With no page open,
nothing is encoded. A page that cannot keep up is disconnected (its browser
reconnects and gets a fresh snapshot), so it never holds the server back.
A snapshot is encoded once for every page that opens while the feed is
unchanged, and sent in slices, so a page that does not read holds a slice
of it, never a copy; at most ``MAX_PAGES`` pages are open at once (more
are refused with 503).
"""

from __future__ import annotations

import hmac
import time
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Callable
from importlib.resources import files
from pathlib import PurePath
from typing import Any

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectSendStream
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from bus import Event, ToolCall, ToolResult
from guard.actions import DENYING, Action
from guard.audit import MARKS, estimated_tokens
from guard.fingerprint import fingerprint
from guard.news import LastResult, News
from guard.redact import Redactor
from guard.report import _CSS as REPORT_CSS
from guard.report import _PALETTE
from guard.server.scope import current

__all__ = ["COOKIE", "FLUSH_SECONDS", "MAX_PAGES", "LiveFeed", "LivePages"]

FLUSH_SECONDS = 0.1
"""How long changes gather before they are sent: one message per changed
session per flush, however many hook calls made them."""

COOKIE = "repeat_tool_guard_token"
"""Where a browser keeps the bearer token once it opened ``/?token=...``."""

MAX_PAGES = 32
"""Live pages (``GET /live/events`` streams) open at once by default."""

_SESSIONS_KEPT = 500
_CELLS_DRAWN = 2000
_TEXT = 300
_PREVIEW = 120
_NAME = 120
"""Characters kept of a tool name, an agent id or a project name."""
_SLICE = 64 * 1024
_QUEUE = 64
_ANSWERED_KEPT = 64
# What one session keeps, however long it runs: the signatures of the calls
# drawn (a call past them that is new is counted, not kept), the latest
# actions, and calls whose results never came.
_SIGNATURES_KEPT = _CELLS_DRAWN
_MARKS_KEPT = 1000
_OPEN_KEPT = 1024


class _Signature:
    __slots__ = ("acted", "args_bytes", "count", "index", "last", "last_output", "preview", "tool")

    def __init__(self, index: int, tool: str, preview: str, args_bytes: int) -> None:
        self.index = index
        self.tool = tool
        self.preview = preview
        self.args_bytes = args_bytes
        self.count = 0
        self.acted = False
        self.last_output = 0
        self.last = LastResult()


class _Session:
    """One session's summary: what the page draws."""

    def __init__(self, session_id: str, runtime: str, project: str | None, redact: Redactor, news: News) -> None:
        self.id = session_id
        self._redact = redact
        self._news = news
        self.runtime = runtime
        self.project = project
        self.started = self.updated = time.time()
        self.agents: list[str] = []
        self._agent_numbers: dict[str, int] = {}
        self.cells: list[list[int]] = []
        self.calls = 0
        self.repeats = 0
        self.signatures: dict[tuple[str, bytes], _Signature] = {}
        self.marks: deque[list[Any]] = deque(maxlen=_MARKS_KEPT)
        self.actions: dict[str, int] = {}
        self.wasted_calls = 0
        self.wasted_bytes = 0
        self.saved_calls = 0
        self.saved_bytes = 0
        self.open: dict[tuple[str, str], tuple[int, _Signature, bool]] = {}
        self.answered: OrderedDict[tuple[str, str], tuple[int, _Signature, bool]] = OrderedDict()
        """Calls whose result came, most recent last: the actions a result
        triggers are heard after the result itself."""

    def _agent(self, agent: str) -> int:
        number = self._agent_numbers.get(agent)
        if number is None:
            number = self._agent_numbers[agent] = len(self.agents)
            self.agents.append(self._redact.capped(agent, _NAME))
        return number

    def _call(self, agent: str, event: ToolCall | ToolResult) -> tuple[int, _Signature, bool]:
        fp = fingerprint(event.tool, event.args)
        key = (agent, fp.digest)
        sig = self.signatures.get(key)
        if sig is None:
            preview = self._redact.capped(fp.canonical.decode("utf-8", "replace"), _PREVIEW)
            sig = _Signature(len(self.signatures), self._redact.capped(event.tool, _NAME), preview, len(fp.canonical))
            if len(self.signatures) < _SIGNATURES_KEPT:  # past them no call is drawn: the cells are full
                self.signatures[key] = sig
        sig.count += 1
        if sig.count > 1:
            self.repeats += 1
        self.calls += 1
        wasted = sig.acted
        if wasted:
            self.wasted_calls += 1
        if len(self.cells) < _CELLS_DRAWN:
            self.cells.append([self._agent(agent), sig.index, 0, 0])
        opened = (self.calls - 1, sig, wasted)
        self.open[(agent, event.call_id)] = opened
        if len(self.open) > _OPEN_KEPT:
            del self.open[next(iter(self.open))]
        return opened

    def event(self, event: ToolCall | ToolResult) -> None:
        self.updated = time.time()
        agent = event.agent.id if event.agent is not None else ""
        slot = (agent, event.call_id)
        opened = self.open.get(slot)
        if isinstance(event, ToolCall) or opened is None:
            opened = self._call(agent, event)
        if isinstance(event, ToolResult):
            del self.open[slot]
            self.answered[slot] = opened
            if len(self.answered) > _ANSWERED_KEPT:
                self.answered.popitem(last=False)
            number, sig, wasted = opened
            size = len(event.content.encode("utf-8", "surrogatepass"))
            news = False
            if event.denied_by is None:
                sig.last_output = size
                news = self._news.brought(sig.last, event.content, sig.count > 1)
            if wasted and news:
                self.wasted_calls -= 1  # it learned something after all: not wasted
            elif wasted:
                self.wasted_bytes += size + sig.args_bytes
            if number < len(self.cells):
                self.cells[number][2:] = [int(event.is_error), size]

    def action(self, action: Action, trigger: Event) -> None:
        self.updated = time.time()
        agent = action.agent or ""
        slot = (agent, action.call_id)
        opened = self.open.get(slot) or self.answered.get(slot)
        if opened is None and isinstance(trigger, ToolCall | ToolResult):
            opened = self._call(agent, trigger)
        shadow = bool(getattr(action, "shadow", False))
        mark = MARKS.get(action.action, action.action)
        kind = f"shadow {mark}" if shadow else mark
        self.actions[kind] = self.actions.get(kind, 0) + 1
        number = opened[0] if opened is not None else self.calls - 1
        cut = self._redact.capped  # the page is a record shown outside the agent: no secrets
        text, named, tool = cut(action.text, _TEXT), cut(agent, _NAME), cut(action.tool, _NAME)
        self.marks.append([number, action.policy, mark, text, named, tool, action.count, shadow])
        if opened is None or shadow:
            return
        _, sig, wasted = opened
        if not sig.acted:
            sig.acted = True
            if action.action in DENYING and not wasted:
                self.wasted_calls += 1
                if slot in self.open:
                    self.open[slot] = (opened[0], sig, True)
        if action.action in DENYING:
            self.saved_calls += 1
            self.saved_bytes += sig.args_bytes + sig.last_output

    def view(self) -> dict[str, Any]:
        signatures = sorted(self.signatures.values(), key=lambda s: s.index)
        return {
            "id": self.id,
            "runtime": self.runtime,
            "project": self.project,
            "started": self.started,
            "updated": self.updated,
            "agents": self.agents,
            "calls": self.calls,
            "repeats": self.repeats,
            "cells": self.cells,
            "signatures": [[s.tool, s.preview, s.count] for s in signatures],
            "marks": list(self.marks),
            "actions": self.actions,
            "wasted_calls": self.wasted_calls,
            "wasted_tokens": estimated_tokens(self.wasted_bytes),
            "saved_calls": self.saved_calls,
            "saved_tokens": estimated_tokens(self.saved_bytes),
        }


class LiveFeed:
    """The sessions the page shows and the pages open on it.

    ``on_event`` and ``on_action`` are the store's listeners (through the
    server's fan-out); they learn the session, route and project from the
    request being handled (``guard.server.scope``). ``run`` sends the changes
    until cancelled; ``close`` ends every open page's stream (at shutdown).
    A session's wasted calls are counted as ``audit`` counts them: the
    calls of a signature after a policy acted on it, but for those whose
    result brought ``news`` (results normalised by its patterns).
    """

    def __init__(self, news: News | None = None) -> None:
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._redact = Redactor()
        self._news = news if news is not None else News()
        self._pages: set[MemoryObjectSendStream[bytes]] = set()
        self._changed: set[str] = set()
        self._wake = anyio.Event()
        self._encoded: bytes | None = None
        """The snapshot, encoded, while the feed has not changed since."""
        self.closed = False

    def __len__(self) -> int:
        return len(self._sessions)

    def _session(self) -> _Session | None:
        scope = current()
        if scope is None or scope.session is None:
            return None
        self._encoded = None
        session = self._sessions.get(scope.session)
        if session is None:
            project = self._redact.capped(PurePath(scope.project).name, _NAME) if scope.project else None
            session = self._sessions[scope.session] = _Session(
                scope.session, scope.route, project, self._redact, self._news
            )
            if len(self._sessions) > _SESSIONS_KEPT:
                gone, _ = self._sessions.popitem(last=False)
                self._changed.discard(gone)
        else:
            self._sessions.move_to_end(scope.session)
        if self._pages:
            self._changed.add(session.id)
            self._wake.set()
        return session

    def on_event(self, event: Event) -> None:
        if isinstance(event, ToolCall | ToolResult):
            session = self._session()
            if session is not None:
                session.event(event)

    def on_action(self, action: Action, trigger: Event) -> None:
        session = self._session()
        if session is not None:
            session.action(action, trigger)

    def snapshot(self) -> dict[str, Any]:
        """Every session the feed holds, most recently active last."""
        return {"sessions": [s.view() for s in self._sessions.values()]}

    def encoded(self) -> bytes:
        """``snapshot`` as JSON, encoded once for every caller until the
        feed changes."""
        if self._encoded is None:
            self._encoded = msgspec.json.encode(self.snapshot())
        return self._encoded

    async def run(self) -> None:
        """Send changed sessions to the open pages, until cancelled."""
        while True:
            await self._wake.wait()
            await anyio.sleep(FLUSH_SECONDS)
            self._wake = anyio.Event()
            changed, self._changed = self._changed, set()
            for session_id in changed:  # an evicted session left the set with it
                view = self._sessions[session_id].view()
                self._send(b"event: session\ndata: " + msgspec.json.encode(view) + b"\n\n")

    def _send(self, message: bytes) -> None:
        for page in list(self._pages):
            try:
                page.send_nowait(message)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._pages.discard(page)
                page.close()

    async def stream(self) -> AsyncGenerator[bytes, None]:
        """One page's stream: a snapshot (``encoded``, in slices of
        ``_SLICE`` bytes), then each changed session, with a comment every
        15 s so proxies keep the connection."""
        if self.closed:
            return
        send, receive = anyio.create_memory_object_stream[bytes](_QUEUE)
        self._pages.add(send)
        try:
            snapshot = self.encoded()
            yield b"retry: 1000\nevent: snapshot\ndata: "
            for start in range(0, len(snapshot), _SLICE):
                yield snapshot[start : start + _SLICE]
            del snapshot  # shared while it is sent; a page holds none of it after
            yield b"\n\n"
            while True:
                message = b": keep-alive\n\n"
                with anyio.move_on_after(15):
                    message = await receive.receive()
                yield message
        except anyio.EndOfStream:
            return
        finally:
            self._pages.discard(send)
            send.close()
            receive.close()

    def close(self) -> None:
        """End every open page's stream; no new one opens."""
        self.closed = True
        for page in list(self._pages):
            page.close()
        self._pages.clear()


class LivePages:
    """The live page's routes: ``GET /`` (the page), ``GET /live/events``
    (its server-sent events) and ``GET /live/state`` (the same data as JSON).

    The same bearer token as the API guards them; a browser, which cannot
    send that header, opens ``/?token=TOKEN`` once and is answered with a
    redirect to ``/`` and a ``SameSite=Strict``, ``HttpOnly`` cookie holding it.
    At most ``max_pages`` event streams are served at once; another is
    answered 503 with one JSON line saying so.
    """

    def __init__(self, feed: LiveFeed, token: str | None, *, max_pages: int = MAX_PAGES) -> None:
        self.feed = feed
        self.max_pages = max_pages
        self.open = 0
        """Event streams being served now."""
        self._token = token.encode() if token is not None else None

    def _authorized(self, request: Request) -> bool:
        if self._token is None:
            return True
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        offered = credentials.strip() if scheme.lower() == "bearer" else request.cookies.get(COOKIE, "")
        return hmac.compare_digest(offered.encode(), self._token)

    def _refused(self) -> Response:
        return HTMLResponse(_REFUSED, 401, {"WWW-Authenticate": "Bearer"})

    async def page(self, request: Request) -> Response:
        offered = request.query_params.get("token")
        if offered is not None and self._token is not None:
            if not hmac.compare_digest(offered.encode(), self._token):
                return self._refused()
            response = RedirectResponse("/", 303)
            response.set_cookie(COOKIE, offered, httponly=True, samesite="strict", path="/")
            return response
        if not self._authorized(request):
            return self._refused()
        return HTMLResponse(_PAGE, headers={"Cache-Control": "no-store"})

    async def events(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._refused()
        if self.open >= self.max_pages:
            reason = (
                f"{self.max_pages} live pages are open, the most this server serves at once "
                "(serve --max-live-pages): close one, or try again later"
            )
            return Response(msgspec.json.encode({"error": reason}), 503, {"Retry-After": "5"}, "application/json")
        self.open += 1
        return _EventStream(self.feed.stream(), self._closed)

    def _closed(self) -> None:
        self.open -= 1

    async def state(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._refused()
        return Response(self.feed.encoded(), media_type="application/json")


class _EventStream(StreamingResponse):
    """A page's server-sent events. However the response ends (the feed
    closed, the client gone, cancelled), the stream is closed at once, so
    the page leaves the feed, and ``closed`` is called."""

    def __init__(self, stream: AsyncGenerator[bytes, None], closed: Callable[[], None]) -> None:
        super().__init__(
            stream, media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )
        self._stream = stream
        self._on_closed = closed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self._stream.aclose()
            self._on_closed()


_REFUSED = (
    "<!DOCTYPE html><html lang=en><meta charset=utf-8><title>repeat-tool-guard</title>"
    "<body style='font:15px system-ui;margin:40px'><h1>Token required</h1>"
    "<p>This server needs its bearer token. Open <code>/?token=TOKEN</code> once; "
    "the browser keeps it in a cookie for this server only.</p></body></html>"
)


def _asset(name: str) -> str:
    return (files("guard.server") / "static" / name).read_text(encoding="utf-8")


_PAGE = (
    "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
    "<meta name=viewport content='width=device-width,initial-scale=1'>"
    "<title>repeat-tool-guard · live</title><style>"
    + REPORT_CSS
    + _asset("live.css")
    + "</style></head><body data-connected=0><main>"
    "<div class=top><h1>Guarded sessions, live</h1><span class=sub><i class=dot></i><span id=status>connecting…</span>"
    "</span></div>"
    "<p class=sub>repeat-tool-guard serve · every session the guard is watching, its calls, repeats and actions</p>"
    "<div class=cards id=cards style='grid-template-columns:repeat(6,1fr)'></div>"
    "<div class=filters><label>session<select id=f-session></select></label>"
    "<label>runtime<select id=f-runtime></select></label>"
    "<label>action<select id=f-action></select></label></div>"
    "<div class=legend><span><i class=key style='background:var(--single);border-radius:3px'></i>"
    "a call made once</span>"
    "<span><i class=key style='background:#2f7de1;border-radius:3px'></i><i class=key "
    "style='background:#11a39a;border-radius:3px'></i>a repeated call, one color per signature</span>"
    "<span><i class=key style='background:var(--single) repeating-linear-gradient(135deg,rgba(0,0,0,.38) 0 2px,"
    "transparent 2px 5px);border-radius:3px'></i>the call failed</span>"
    + "".join(f"<span><i class='key square {m}'></i>{m}</span>" for m in ("remind", "deny", "escalate", "halt"))
    + "<span id=legend-policies style='display:contents'></span></div>"
    "<div id=sessions></div></main><script>"
    + _asset("live.js").replace("__PALETTE__", msgspec.json.encode(list(_PALETTE)).decode())
    + "</script></body></html>"
)
