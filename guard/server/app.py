"""The resident guard as an ASGI application (Starlette, on anyio).

Every answer is JSON; every error is a 4xx/5xx whose body is one line,
``{"error": "<what was wrong>"}``, never a traceback. A session's events are
handled one at a time, in arrival order, under the session's lock, and
answered only once recorded (503 when they could not be).

What a web page in the user's browser could send is refused: a request with
an ``Origin`` header not explicitly allowed (403), one whose ``Host`` is not
a name the server answers to (403: DNS rebinding), and a POST whose body is
not declared ``application/json`` (415: no form or ``text/plain`` post).
"""

from __future__ import annotations

import contextlib
import hmac
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import aclosing, asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from bus._logging import LazyLogger
from guard._text import one_line, shown
from guard.adapters.claude_hooks import SESSION_ID_RULE, HookRuntime, is_session_id, parse_payload
from guard.adapters.codex_hooks import CODEX
from guard.adapters.hook_runtimes import RUNTIMES, check_event
from guard.config import Config
from guard.hook_forward import PAYLOAD_LIMIT, WAIT_HEADER
from guard.news import News
from guard.policies.escalation import answer_by
from guard.server import scope
from guard.server.events import RequestError, answer_event, decode_event, retry_keys
from guard.server.live import MAX_PAGES, LiveFeed, LivePages
from guard.server.mcp_hooks import answer_rpc
from guard.server.metrics import CONTENT_TYPE, Metrics
from guard.server.openapi import ErrorBody, openapi_document
from guard.server.sessions import SessionStore, StoreError
from guard.server.watchers import watch_store
from guard.telemetry import EXPORT_FLUSH_SECONDS

if TYPE_CHECKING:
    from guard.telemetry.otel import GuardTelemetry

__all__ = ["DEFAULT_BODY_TIMEOUT", "DEFAULT_MAX_BODY", "create_app"]

DEFAULT_MAX_BODY = PAYLOAD_LIMIT
"""Bytes a request body may have by default: a tool result (a file read, a
command's output) rides in a hook payload, so this is generous (the command
hook's limit on its stdin too)."""

DEFAULT_BODY_TIMEOUT = 30.0
"""Seconds a request body may take to arrive once its headers are in."""

_REFUSED = frozenset({401, 403, 415})
"""Answers given before the body was read."""

_log = LazyLogger("guard.server")
_JSON = "application/json"
_DEFAULT_PORTS = {"http": ":80", "https": ":443"}


def _comparable(origin: str) -> str:
    """An origin as compared: lower case, no trailing slash, no default port
    (which browsers leave out)."""
    origin = origin.lower().rstrip("/")
    default = _DEFAULT_PORTS.get(origin.partition("://")[0])
    return origin.removesuffix(default) if default else origin


_ORIGIN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?:\[[0-9A-Fa-f:.]+\]|[^\s/:?#@\[\]]+)(?::[0-9]{1,5})?")
"""A web origin as a browser sends it in ``Origin``: scheme, host, optional port."""

Endpoint = Callable[[Request], Awaitable[Response]]


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(msgspec.json.encode(body), status, headers, media_type=_JSON)


def _error(status: int, reason: str, headers: dict[str, str] | None = None) -> Response:
    return _json(ErrorBody(reason), status, headers)


class _Handlers:
    def __init__(
        self,
        store: SessionStore,
        metrics: Metrics,
        token: str | None,
        max_body: int,
        telemetry: GuardTelemetry | None = None,
        *,
        hosts: Collection[str] | None,
        origins: Collection[str],
        body_timeout: float,
        disconnects_queued: bool,
    ) -> None:
        self.store = store
        self.disconnects_queued = disconnects_queued
        self.metrics = metrics
        self.telemetry = telemetry
        self.token = token.encode() if token is not None else None
        self.max_body = max_body
        self.hosts = frozenset(host.lower() for host in hosts) if hosts is not None else None
        self.origins = frozenset(_comparable(origin) for origin in origins)
        self.body_timeout = body_timeout
        self.in_flight = 0
        """Requests being handled now: a shutdown may stop once none is."""
        try:
            self.openapi = msgspec.json.encode(openapi_document(version("repeat-tool-guard")))
        except PackageNotFoundError:  # pragma: no cover - the package runs uninstalled only from a bare checkout
            self.openapi = msgspec.json.encode(openapi_document("0"))

    def route(self, name: str, handler: Endpoint, *, public: bool = False) -> Endpoint:
        """``handler`` behind the browser and bearer checks, timed, with
        every failure one line."""

        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            self.in_flight += 1
            entered = scope.enter(name)
            try:
                refused = self._refused(request)
                if refused is not None:
                    response = _error(403, refused)
                elif not public and not self._authorized(request):
                    response = _error(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
                else:
                    with answer_by(_due(request, time.monotonic())):
                        response = await handler(request)
            except RequestError as exc:
                response = _error(exc.status, one_line(exc.reason, 500))
            except StoreError as exc:
                with contextlib.suppress(OSError):  # stderr may sit on the very disk that is full
                    _log.error("serve.not_recorded", route=name, path=request.url.path, error=str(exc))
                response = _error(503, one_line(str(exc), 500), {"Retry-After": "1"})
            except ClientDisconnect:
                response = _error(400, "the client hung up before its body was complete")
            except Exception as exc:
                with contextlib.suppress(OSError):
                    _log.exception("serve.request_failed", route=name, path=request.url.path)
                response = _error(500, one_line(f"internal error: {type(exc).__name__}: {exc}", 300))
            finally:
                self.in_flight -= 1
                scope.leave(entered)
            if response.status_code in _REFUSED:
                await self._discard(request)
            seconds = time.perf_counter() - started
            self.metrics.observe(name, response.status_code, seconds)
            if self.telemetry is not None and request.method == "POST":
                self.telemetry.observe_hook(name, seconds)
            return response

        return endpoint

    async def _discard(self, request: Request) -> None:
        """Read and drop the body of a request refused before it was read
        (within the body limits), so its connection stays usable for the
        client's next request instead of being closed under it."""
        size = 0
        with anyio.move_on_after(self.body_timeout), contextlib.suppress(ClientDisconnect, RuntimeError):
            async with aclosing(request.stream()) as stream:
                async for chunk in stream:
                    size += len(chunk)
                    if size > self.max_body:
                        break

    def _refused(self, request: Request) -> str | None:
        """Why a request that may come from a web page is refused, if it is."""
        origin = request.headers.get("origin")
        if origin is not None and _comparable(origin) not in self.origins:
            return f"origin {shown(origin, 100)} is not allowed (serve --allow-origin)"
        if self.hosts is not None:
            host = _hostname(request.headers.get("host", ""))
            if host not in self.hosts:
                return f"host {shown(host, 100)} is not a name this server answers to (serve --allow-host)"
        return None

    def _authorized(self, request: Request) -> bool:
        if self.token is None:
            return True
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode(), self.token)

    async def body(self, request: Request) -> bytes:
        media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media != _JSON:
            named = f"content type {shown(media, 100)}" if media else "no content type"
            raise RequestError(415, f"{named}: send application/json")
        limit = self.max_body
        declared = request.headers.get("content-length")
        if declared is not None and "transfer-encoding" in request.headers:
            # a proxy in front may frame this body by the other header: refused, as RFC 9112 allows
            raise RequestError(400, "a body framed by both Content-Length and Transfer-Encoding: send one")
        if declared is not None and declared.isdecimal() and int(declared) > limit:
            raise RequestError(413, f"body of {declared} bytes is larger than the limit of {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.body_timeout) as waited:
            async with aclosing(request.stream()) as stream:
                async for chunk in stream:
                    size += len(chunk)
                    if size > limit:
                        raise RequestError(413, f"body is larger than the limit of {limit} bytes")
                    chunks.append(chunk)
        if waited.cancelled_caught:
            raise RequestError(408, f"body not complete within {self.body_timeout:g} s")
        return b"".join(chunks)

    def hooks(self, runtime: HookRuntime) -> Endpoint:
        """The route answering ``runtime``'s hook payloads."""

        async def answer_hook(request: Request) -> Response:
            try:
                payload = parse_payload(await self.body(request))
                check_event(runtime, payload)
            except ValueError as exc:  # HookInputError among them
                raise RequestError(400, str(exc)) from None
            if runtime.seam(payload) is None:
                return _json({})  # nothing the guard follows: the session is not even opened
            if isinstance(payload.get("cwd"), str):
                scope.note(project=payload["cwd"])

            async def handle(present: Callable[[], Awaitable[None]]) -> bytes:
                async with self.store.use(payload["session_id"]) as session:
                    await present()
                    return msgspec.json.encode(await session.hooks_for(runtime).handle(payload))

            return Response(await self._attended(request, handle), media_type=_JSON)

        return answer_hook

    async def mcp(self, request: Request) -> Response:
        """Codex's ``mcp_tool`` hooks (``guard.server.mcp_hooks``)."""
        try:
            message = msgspec.json.decode(await self.body(request))
        except msgspec.DecodeError as exc:
            return _json({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"not JSON ({exc})"}})
        except RecursionError as exc:
            error = {"code": -32700, "message": f"nests too deeply to read ({exc})"}
            return _json({"jsonrpc": "2.0", "id": None, "error": error})
        answer = await answer_rpc(message, self._codex_hook)
        return Response(status_code=202) if answer is None else _json(answer)

    async def _codex_hook(self, payload: dict[str, Any]) -> dict[str, Any]:
        if not is_session_id(payload.get("session_id")):
            raise ValueError(f"session_id {shown(payload.get('session_id'))}: {SESSION_ID_RULE}")
        if CODEX.seam(payload) is None:
            return {}
        async with self.store.use(payload["session_id"]) as session:
            return await session.hooks_for(CODEX).handle(payload)

    async def _attended(
        self, request: Request, work: Callable[[Callable[[], Awaitable[None]]], Awaitable[bytes]]
    ) -> bytes:
        """``work(present)``'s answer, the client watched meanwhile. ``work``
        awaits ``present()`` once it holds its session, just before it
        applies the event: a request whose client hung up while it waited
        is dropped there (499), since its answer reaches no one and the
        client, if it retried, was answered elsewhere: applying it would
        record a copy. Hypercorn on asyncio reports a client that only
        closed its sending side (``shutdown(SHUT_WR)``) as hung up too, and
        no request can tell the two apart (a server paused while a client
        gave up sees the same), so such a client gets the 499. Where the
        server hands over a queued disconnect without suspending
        (``disconnects_queued``), one look at the moment of applying sees a
        hang-up whenever it came, at a fraction of a watching task's cost."""
        if self.disconnects_queued:
            return await work(lambda: _hung_up(request))
        gone = False

        async def watch() -> None:
            nonlocal gone
            while (await request.receive())["type"] != "http.disconnect":
                pass  # pragma: no cover - nothing but a disconnect follows a whole body
            gone = True

        async def present() -> None:
            await anyio.lowlevel.checkpoint()  # the watcher hears a disconnect already queued
            if gone:
                raise RequestError(499, _HUNG_UP)

        failure: Exception | None = None
        answer = b""
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(watch)
            try:
                answer = await work(present)
            except Exception as exc:
                failure = exc
            finally:
                tasks.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return answer

    async def events(self, request: Request) -> Response:
        here = scope.current()
        assert here is not None  # every route runs in its request's scope
        session_id = request.path_params["session"]
        if not is_session_id(session_id):
            raise RequestError(400, f"session {shown(session_id, 100)}: {SESSION_ID_RULE}")
        event = decode_event(await self.body(request))

        async def apply(present: Callable[[], Awaitable[None]]) -> bytes:
            async with self.store.use(session_id, retry_keys=retry_keys(event)) as session:
                await present()
                return await answer_event(session, event, arrived=here.arrived)

        return Response(await self._attended(request, apply), media_type=_JSON)

    async def healthz(self, request: Request) -> Response:
        problem = await self.store.unready()
        if problem is not None:
            return _json({"status": "unavailable", "error": one_line(problem, 300), "sessions": len(self.store)}, 503)
        return _json({"status": "ok", "sessions": len(self.store)})

    async def metrics_text(self, request: Request) -> Response:
        return Response(self.metrics.render(await self.store.fleet_counts()), media_type=CONTENT_TYPE)

    async def openapi_json(self, request: Request) -> Response:
        return Response(self.openapi, media_type=_JSON)


_HUNG_UP = "the client hung up before its event was applied; nothing was recorded"

_WAIT_MARGIN = 1.5
"""Seconds kept from a client's wait for recording and sending the answer."""


def _due(request: Request, now: float) -> float:
    """When the request's answer is due (``time.monotonic()``): as long
    after ``now`` as ``WAIT_HEADER`` says, less the margin; never, without
    the header. A value that is no number of seconds > 0 is refused (400)."""
    said = request.headers.get(WAIT_HEADER)
    if said is None:
        return math.inf
    try:
        wait = float(said)
    except ValueError:
        wait = math.nan
    if not 0 < wait < math.inf:
        raise RequestError(400, f"{WAIT_HEADER}: {shown(said, 40)}: must be a number of seconds > 0")
    return now + wait - min(_WAIT_MARGIN, wait / 4)


async def _hung_up(request: Request) -> None:
    """Raise the 499 when the client's disconnect is already queued; take
    nothing else and wait for nothing (a receive that would wait is
    cancelled at once)."""
    message: Any = {}
    with anyio.CancelScope() as look:
        look.cancel()
        message = await request.receive()
    if message.get("type") == "http.disconnect":
        raise RequestError(499, _HUNG_UP)


def _hostname(host: str) -> str:
    """``host`` (a ``Host`` header) without its port, lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rpartition(":")[0] if host.count(":") == 1 else host


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    reason = f"{request.method} {request.url.path}: {exc.detail}"
    headers = dict(exc.headers) if exc.headers else None
    return _error(exc.status_code, one_line(reason, 300), headers)


def create_app(
    store: SessionStore,
    *,
    token: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    metrics: Metrics | None = None,
    evict_every: float | None = None,
    allowed_hosts: Collection[str] | None = None,
    allowed_origins: Collection[str] = (),
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    telemetry: GuardTelemetry | None = None,
    max_live_pages: int = MAX_PAGES,
    disconnects_queued: bool = False,
) -> Starlette:
    """The server's ASGI application over ``store``.

    With ``token``, every route but ``/healthz`` needs ``Authorization:
    Bearer <token>``. Bodies above ``max_body`` bytes are refused with 413,
    bodies not complete ``body_timeout`` seconds after the headers with 408,
    POSTs not declared ``application/json`` with 415. A request carrying an
    ``Origin`` not in ``allowed_origins`` (``scheme://host[:port]``; none by
    default: browsers send one, other clients do not) is refused with 403, and
    so is one whose ``Host`` names none of ``allowed_hosts`` (compared without
    the port; ``None`` accepts any).
    ``app.state.in_flight()`` is how many requests it is handling now.
    While the application runs (its lifespan), idle sessions are evicted
    every ``evict_every`` seconds (see ``SessionStore.evict_idle_forever``);
    at shutdown every session is closed, its log among it. ``GET /`` is
    the live page (``guard.server.live``), of which ``max_live_pages`` may
    be open at once (another is refused with 503). With ``telemetry``, every guard
    action and the hooks' latency are exported to OpenTelemetry (flushed at shutdown).

    A request whose client hung up while it waited for its session is
    dropped (499) before its event is applied; a task watches each request
    for that. ``disconnects_queued`` says the server hands the application
    a disconnect already queued without suspending (Hypercorn on asyncio,
    as ``serve`` runs it; not through a middleware that wraps ``receive``):
    a request then looks once instead, at a fraction of the cost.
    """
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise ValueError(f"max_body = {max_body!r}: must be an integer >= 1")
    if token is not None and not token.strip():
        raise ValueError("token is empty")
    if not 0 < body_timeout < math.inf:
        raise ValueError(f"body_timeout = {body_timeout!r}: must be a number of seconds > 0")
    for origin in allowed_origins:
        if _ORIGIN.fullmatch(origin.rstrip("/")) is None or not origin.isascii():
            raise ValueError(
                f"allowed origin {shown(origin, 100)}: must be scheme://host[:port], as a browser sends it"
                " (no path, an international name as punycode, xn--...; not 'null', which any sandboxed page"
                " or local file sends)"
            )
    if isinstance(max_live_pages, bool) or not isinstance(max_live_pages, int) or max_live_pages < 1:
        raise ValueError(f"max_live_pages = {max_live_pages!r}: must be an integer >= 1")
    if evict_every is not None and not 0 < evict_every < math.inf:  # 0 would spin a core
        raise ValueError(f"evict_every = {evict_every!r}: must be a number of seconds > 0")
    metrics = metrics if metrics is not None else Metrics()
    metrics.watch(store)
    live = LiveFeed(News((store.config or Config()).loops.result_normalize))
    watch_store(store, metrics, live, telemetry)
    pages = LivePages(live, token, max_pages=max_live_pages)
    handlers = _Handlers(
        store,
        metrics,
        token,
        max_body,
        telemetry,
        hosts=allowed_hosts,
        origins=allowed_origins,
        body_timeout=body_timeout,
        disconnects_queued=disconnects_queued,
    )
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
                telemetry.shutdown(EXPORT_FLUSH_SECONDS)  # exports what the batches still hold

    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error}, lifespan=lifespan)
    app.state.in_flight = lambda: handlers.in_flight
    app.state.live = live
    app.state.live_pages = pages
    return app
