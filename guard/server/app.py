"""The resident guard as an ASGI application (Starlette, on anyio).

Every answer is JSON; every error is a 4xx/5xx whose body is one line,
``{"error": "<what was wrong>"}``, never a traceback. A session's events are
handled one at a time, in arrival order, under the session's lock.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import structlog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from guard.adapters.claude_hooks import HOOK_EVENTS, SESSION_ID_RULE, HookInputError, is_session_id, parse_payload
from guard.server import scope
from guard.server.events import RequestError, answer_event, decode_event
from guard.server.live import LiveFeed, LivePages
from guard.server.metrics import CONTENT_TYPE, Metrics
from guard.server.openapi import ErrorBody, openapi_document
from guard.server.sessions import SessionStore
from guard.server.watchers import watch_store

if TYPE_CHECKING:
    from guard.telemetry.otel import GuardTelemetry

__all__ = ["DEFAULT_MAX_BODY", "create_app"]

DEFAULT_MAX_BODY = 8 * 1024 * 1024
"""Bytes a request body may have by default: a tool result (a file read, a
command's output) rides in a hook payload, so this is generous."""

_log = structlog.get_logger("guard.server")
_JSON = "application/json"

Endpoint = Callable[[Request], Awaitable[Response]]


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(msgspec.json.encode(body), status, headers, media_type=_JSON)


def _error(status: int, reason: str, headers: dict[str, str] | None = None) -> Response:
    return _json(ErrorBody(reason), status, headers)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class _Handlers:
    def __init__(
        self,
        store: SessionStore,
        metrics: Metrics,
        token: str | None,
        max_body: int,
        telemetry: GuardTelemetry | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.telemetry = telemetry
        self.token = token.encode() if token is not None else None
        self.max_body = max_body
        try:
            self.openapi = msgspec.json.encode(openapi_document(version("repeat-tool-guard")))
        except PackageNotFoundError:  # pragma: no cover - the package runs uninstalled only from a bare checkout
            self.openapi = msgspec.json.encode(openapi_document("0"))

    def route(self, name: str, handler: Endpoint, *, public: bool = False) -> Endpoint:
        """``handler`` behind the bearer check, timed, with every failure one line."""

        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            entered = scope.enter(name)
            try:
                if not public and not self._authorized(request):
                    response = _error(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
                else:
                    response = await handler(request)
            except RequestError as exc:
                response = _error(exc.status, exc.reason)
            except Exception as exc:
                _log.exception("serve.request_failed", route=name, path=request.url.path)
                response = _error(500, _one_line(f"internal error: {type(exc).__name__}: {exc}"))
            finally:
                scope.leave(entered)
            seconds = time.perf_counter() - started
            self.metrics.observe(name, response.status_code, seconds)
            if self.telemetry is not None and request.method == "POST":
                self.telemetry.observe_hook(name, seconds)
            return response

        return endpoint

    def _authorized(self, request: Request) -> bool:
        if self.token is None:
            return True
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode(), self.token)

    async def body(self, request: Request) -> bytes:
        limit = self.max_body
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise RequestError(413, f"body of {declared} bytes is larger than the limit of {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        async with aclosing(request.stream()) as stream:
            async for chunk in stream:
                size += len(chunk)
                if size > limit:
                    raise RequestError(413, f"body is larger than the limit of {limit} bytes")
                chunks.append(chunk)
        return b"".join(chunks)

    async def claude_code(self, request: Request) -> Response:
        try:
            payload = parse_payload(await self.body(request))
        except HookInputError as exc:
            raise RequestError(400, str(exc)) from None
        if payload.get("hook_event_name") not in HOOK_EVENTS:
            return _json({})  # nothing the guard follows: the session is not even opened
        if isinstance(payload.get("cwd"), str):
            scope.note(project=payload["cwd"])
        async with self.store.use(payload["session_id"]) as session:
            answer = await session.hooks.handle(payload)
        return _json(answer)

    async def events(self, request: Request) -> Response:
        session_id = request.path_params["session"]
        if not is_session_id(session_id):
            raise RequestError(400, f"session {session_id!r}: {SESSION_ID_RULE}")
        event = decode_event(await self.body(request))
        async with self.store.use(session_id) as session:
            answer = await answer_event(session, event)
        return Response(answer, media_type=_JSON)

    async def healthz(self, request: Request) -> Response:
        return _json({"status": "ok", "sessions": len(self.store)})

    async def metrics_text(self, request: Request) -> Response:
        return Response(self.metrics.render(await self.store.fleet_counts()), media_type=CONTENT_TYPE)

    async def openapi_json(self, request: Request) -> Response:
        return Response(self.openapi, media_type=_JSON)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    reason = f"{request.method} {request.url.path}: {exc.detail}"
    headers = dict(exc.headers) if exc.headers else None
    return _error(exc.status_code, _one_line(reason), headers)


def create_app(
    store: SessionStore,
    *,
    token: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    metrics: Metrics | None = None,
    evict_every: float | None = None,
    telemetry: GuardTelemetry | None = None,
) -> Starlette:
    """The server's ASGI application over ``store``.

    With ``token``, every route but ``/healthz`` needs ``Authorization:
    Bearer <token>``. Bodies above ``max_body`` bytes are refused with 413.
    While the application runs (its lifespan), idle sessions are evicted
    every ``evict_every`` seconds (see ``SessionStore.evict_idle_forever``);
    at shutdown every session is closed, its log among it. ``GET /`` is
    the live page (``guard.server.live``). With ``telemetry``, every guard
    action and the hooks' latency are exported to OpenTelemetry (flushed at shutdown).
    """
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise ValueError(f"max_body = {max_body!r}: must be an integer >= 1")
    if token is not None and not token.strip():
        raise ValueError("token is empty")
    metrics = metrics if metrics is not None else Metrics()
    metrics.watch(store)
    live = LiveFeed()
    watch_store(store, metrics, live, telemetry)
    pages = LivePages(live, token)
    handlers = _Handlers(store, metrics, token, max_body, telemetry)
    routes = [
        Route("/hooks/claude-code", handlers.route("claude-code", handlers.claude_code), methods=["POST"]),
        Route("/v1/sessions/{session}/events", handlers.route("events", handlers.events), methods=["POST"]),
        Route("/healthz", handlers.route("healthz", handlers.healthz, public=True), methods=["GET"]),
        Route("/metrics", handlers.route("metrics", handlers.metrics_text), methods=["GET"]),
        Route("/openapi.json", handlers.route("openapi", handlers.openapi_json), methods=["GET"]),
        # the live page checks the token itself: a browser may hold it in a cookie
        Route("/", handlers.route("live", pages.page, public=True), methods=["GET"]),
        Route("/live/events", handlers.route("live-events", pages.events, public=True), methods=["GET"]),
        Route("/live/state", handlers.route("live-state", pages.state, public=True), methods=["GET"]),
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(store.evict_idle_forever, evict_every)
                tasks.start_soon(live.run)
                try:
                    yield
                finally:
                    live.close()
                    tasks.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await store.aclose()
            if telemetry is not None:
                telemetry.shutdown()  # exports what the batches still hold

    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error}, lifespan=lifespan)
    app.state.live = live
    return app
