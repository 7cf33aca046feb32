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
from typing import Any

import anyio
import msgspec
import structlog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from guard.adapters.claude_hooks import SESSION_ID_RULE, HookInputError, HookRuntime, is_session_id, parse_payload
from guard.adapters.codex_hooks import CODEX
from guard.adapters.hook_runtimes import RUNTIMES
from guard.server.events import RequestError, answer_event, decode_event
from guard.server.mcp_hooks import answer_rpc
from guard.server.metrics import CONTENT_TYPE, Metrics
from guard.server.openapi import ErrorBody, openapi_document
from guard.server.sessions import SessionStore

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
    def __init__(self, store: SessionStore, metrics: Metrics, token: str | None, max_body: int) -> None:
        self.store = store
        self.metrics = metrics
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
            self.metrics.observe(name, response.status_code, time.perf_counter() - started)
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

    def hooks(self, runtime: HookRuntime) -> Endpoint:
        """The route answering ``runtime``'s hook payloads."""

        async def answer_hook(request: Request) -> Response:
            try:
                payload = parse_payload(await self.body(request))
            except HookInputError as exc:
                raise RequestError(400, str(exc)) from None
            if payload.get("hook_event_name") not in runtime.seams:
                return _json({})  # nothing the guard follows: the session is not even opened
            async with self.store.use(payload["session_id"]) as session:
                answer = await session.hooks_for(runtime).handle(payload)
            return _json(answer)

        return answer_hook

    async def mcp(self, request: Request) -> Response:
        """Codex's ``mcp_tool`` hooks (``guard.server.mcp_hooks``)."""
        try:
            message = msgspec.json.decode(await self.body(request))
        except msgspec.DecodeError as exc:
            return _json({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"not JSON ({exc})"}})
        answer = await answer_rpc(message, self._codex_hook)
        return Response(status_code=202) if answer is None else _json(answer)

    async def _codex_hook(self, payload: dict[str, Any]) -> dict[str, Any]:
        if not is_session_id(payload.get("session_id")):
            raise ValueError(f"session_id {payload.get('session_id')!r}: {SESSION_ID_RULE}")
        if payload.get("hook_event_name") not in CODEX.seams:
            return {}
        async with self.store.use(payload["session_id"]) as session:
            return await session.hooks_for(CODEX).handle(payload)

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
) -> Starlette:
    """The server's ASGI application over ``store``.

    With ``token``, every route but ``/healthz`` needs ``Authorization:
    Bearer <token>``. Bodies above ``max_body`` bytes are refused with 413.
    While the application runs (its lifespan), idle sessions are evicted
    every ``evict_every`` seconds (see ``SessionStore.evict_idle_forever``);
    at shutdown every session is closed, its log among it.
    """
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise ValueError(f"max_body = {max_body!r}: must be an integer >= 1")
    if token is not None and not token.strip():
        raise ValueError("token is empty")
    metrics = metrics if metrics is not None else Metrics()
    metrics.watch(store)
    store.on_action = metrics.on_action
    store.on_event = metrics.on_event
    handlers = _Handlers(store, metrics, token, max_body)
    routes = [
        *(
            Route(f"/hooks/{name}", handlers.route(name, handlers.hooks(runtime)), methods=["POST"])
            for name, runtime in RUNTIMES.items()
        ),
        Route("/mcp", handlers.route("mcp", handlers.mcp), methods=["POST"]),
        Route("/v1/sessions/{session}/events", handlers.route("events", handlers.events), methods=["POST"]),
        Route("/healthz", handlers.route("healthz", handlers.healthz, public=True), methods=["GET"]),
        Route("/metrics", handlers.route("metrics", handlers.metrics_text), methods=["GET"]),
        Route("/openapi.json", handlers.route("openapi", handlers.openapi_json), methods=["GET"]),
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(store.evict_idle_forever, evict_every)
                try:
                    yield
                finally:
                    tasks.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await store.aclose()

    return Starlette(routes=routes, exception_handlers={HTTPException: _http_error}, lifespan=lifespan)
