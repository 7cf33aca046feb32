"""The guard as an MCP proxy: a server that forwards ``tools/list`` and
``tools/call`` to an upstream MCP server, deciding each call first.

Any MCP client then gets the guard without knowing it. A deny answers the
call with ``isError: true`` and the denial as its text; the upstream tool is
never called. MCP has no side channel for extra model-visible text, so the
guard's messages for a call are appended to its result as extra text blocks
(marked by ``REMINDER_PREFIX`` and ``_meta``), after the tool's own content,
which is never changed.

A client shows ``structuredContent`` in place of the text blocks when a
result has it (Claude Code does), which would hide those blocks; so a result
that carries guard messages goes without its structured content (its JSON
then stands as a text block if upstream sent none), and ``tools/list``
drops each tool's ``outputSchema``, which would oblige every result to carry
structured content.
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol, TypeVar

import anyio
import mcp_types as types
from anyio.abc import TaskStatus
from mcp import MCPError
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from bus import Decision
from bus._logging import LazyLogger
from guard.config import Config
from guard.fingerprint import blake2b
from guard.sessions.link import REMINDER_PREFIX, AgentLink, GuardLink, adapter_link

__all__ = [
    "HALT_DENIER",
    "HALT_LAPSES_AFTER",
    "REMINDER_META_KEY",
    "REMINDER_PREFIX",
    "Upstream",
    "guard_proxy",
    "restarting",
]

HALT_DENIER = "repeat-tool-guard-halt"
"""``denied_by`` of the calls the proxy refuses after a halt request."""

HALT_LAPSES_AFTER = 120.0
"""Seconds without a call after which the proxy's halt lapses (a user's turn)."""

REMINDER_META_KEY = "repeat-tool-guard"
"""Key in the ``_meta`` of a guard text block: the plugin that wrote it."""


class Upstream(Protocol):
    """What the proxy needs of the upstream connection (``mcp.Client`` has it)."""

    async def list_tools(self, *, cursor: str | None = None) -> types.ListToolsResult: ...

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult: ...


_log = LazyLogger("guard")
T = TypeVar("T")


@asynccontextmanager
async def restarting(
    connect: Callable[[], AbstractAsyncContextManager[Upstream]],
    *,
    restarts: int = 3,
    per: float = 60.0,
    start_timeout: float = 30.0,
) -> AsyncIterator[Upstream]:
    """An upstream started again once its connection closed (the server
    exited or crashed), as a client running the server alone would start
    it again: ``connect`` opens a connection (``lambda: Client(params)``).

    The call that found the connection closed fails as it would have
    (``Connection closed``); the server is started again at once, and the
    calls after it wait for it and go to it. A server that keeps dying is
    started at most ``restarts`` times in ``per`` seconds: past that its
    calls fail as the closed connection's until the oldest of those
    restarts is ``per`` seconds old. A connection not open within
    ``start_timeout`` seconds (a server that never answers its
    initialization) is given up: the first, on entry, raises
    ``TimeoutError`` (in an exception group, as ``Client`` raises its own
    failures to open); a
    restart that fails or times out is logged, and counts as a restart. A
    call waits for a restart at most that long, then fails as the closed
    connection's.
    """
    if restarts < 0 or not per > 0 or not 0 < start_timeout < math.inf:
        raise ValueError(
            "restarting: restarts must be >= 0, per and start_timeout numbers of seconds > 0"
            f" (got {restarts}, {per}, {start_timeout})"
        )
    upstream = _Restarting(connect, restarts, per, start_timeout)
    async with anyio.create_task_group() as group:
        await group.start(upstream.run)
        try:
            yield upstream
        finally:
            group.cancel_scope.cancel()


class _Restarting:
    """The live state of ``restarting``: the connection calls go to, opened
    and closed by one task (``run``), since a connection's context must be
    left in the task that entered it."""

    def __init__(
        self,
        connect: Callable[[], AbstractAsyncContextManager[Upstream]],
        restarts: int,
        per: float,
        start_timeout: float,
    ) -> None:
        self._connect = connect
        self._restarts = restarts
        self._per = per
        self._start_timeout = start_timeout
        self._started: deque[float] = deque()
        self._current: Upstream | None = None
        self._ready = anyio.Event()  # set while calls have a connection to go to, or none to wait for
        self._lost = anyio.Event()  # set when a call found the current connection closed

    async def list_tools(self, *, cursor: str | None = None) -> types.ListToolsResult:
        return await self._request(lambda upstream: upstream.list_tools(cursor=cursor))

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        return await self._request(lambda upstream: upstream.call_tool(name, arguments))

    async def _request(self, send: Callable[[Upstream], Awaitable[T]]) -> T:
        with anyio.move_on_after(self._start_timeout):
            await self._ready.wait()
        upstream = self._current
        if upstream is None:  # gone, and not started again before its restarts allow
            raise MCPError(types.CONNECTION_CLOSED, "Connection closed")
        try:
            return await send(upstream)
        except MCPError as exc:
            if _closed(exc) and upstream is self._current:
                self._current = None
                self._ready = anyio.Event()
                self._lost.set()
            raise

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold a connection open until a call finds it closed, then open
        another, as the restarts allow, until cancelled."""
        first: TaskStatus[None] | None = task_status
        while True:
            if first is None and not await self._may_restart():
                continue
            try:
                # the scope holds the whole connection (its context opens tasks of its own), and its
                # deadline is lifted once the connection is open
                with anyio.CancelScope(deadline=anyio.current_time() + self._start_timeout) as attempt:
                    async with self._connect() as upstream:
                        attempt.deadline = math.inf
                        if first is None:
                            _log.warning("guard.mcp_upstream_restarted", restarts=len(self._started))
                        status, first = first, None
                        await self._serve(upstream, status)
                if attempt.cancelled_caught:
                    raise TimeoutError(f"the upstream server did not start within {self._start_timeout:g} s")
            except Exception as exc:
                if first is not None:
                    raise  # the first connection would not open: the caller's to see
                # it would not start again, or closing the dead one failed
                _log.warning("guard.mcp_upstream_restart_failed", error=f"{type(exc).__name__}: {exc}")
                self._current = None

    async def _may_restart(self) -> bool:
        """Whether a restart is allowed now (and counted); when none is,
        calls fail at once until the oldest restart is ``per`` seconds old."""
        now = time.monotonic()
        while self._started and now - self._started[0] >= self._per:
            self._started.popleft()
        if len(self._started) < self._restarts:
            self._started.append(now)
            return True
        self._ready.set()
        await anyio.sleep(self._started[0] + self._per - now if self._started else self._per)
        self._ready = anyio.Event()
        return False

    async def _serve(self, upstream: Upstream, task_status: TaskStatus[None] | None) -> None:
        self._current = upstream
        self._lost = anyio.Event()
        self._ready.set()
        if task_status is not None:
            task_status.started()
        await self._lost.wait()


def guard_proxy(
    upstream: Upstream,
    link: GuardLink | None = None,
    *,
    config: Config | None = None,
    agent_id: str = "mcp-client",
    name: str = "repeat-tool-guard",
    on_upstream_closed: Callable[[], object] | None = None,
    halt_lapses_after: float | None = HALT_LAPSES_AFTER,
) -> Server[Any]:
    """A server forwarding to ``upstream``; serve it over any MCP transport.

    MCP cannot tell agents apart: every call through one proxy is one agent,
    ``agent_id``; each call is its own step; no user turn ever resets the
    guard. After a halt request every further call is denied with the halt
    reason, since a server cannot stop its client, until the client has
    made no call for ``halt_lapses_after`` seconds (``None``: never): a
    pause that long is the user's turn, which MCP does not carry, and the
    call after it is new work. The annotations
    ``tools/list`` declares for a tool (``readOnlyHint``,
    ``destructiveHint``, ``idempotentHint``) ride on its calls as ``hints``,
    which ``loops`` reads as defaults.

    A call the upstream fails with an MCP error gets that error, passed on;
    one it answers with what is no MCP result (a malformed one) an error
    result naming the upstream, so the model does not read it as its own
    mistake. When a call finds the upstream's connection closed (the
    server exited or crashed), ``on_upstream_closed`` is called: a proxy
    run as a process of its own should end then, so that its client starts
    it, and with it the upstream, again, as it would the upstream alone.
    """
    if halt_lapses_after is not None and not halt_lapses_after > 0:
        raise ValueError(f"halt_lapses_after = {halt_lapses_after!r}: must be a number of seconds > 0, or None")
    link = adapter_link(link, config, "mcp")
    agent: AgentLink | None = None
    calls = 0
    last_call = -math.inf
    hints: dict[str, dict[str, bool]] = {}

    async def live() -> AgentLink:
        nonlocal agent
        if agent is None:
            agent = link.agent(agent_id)
            await agent.start()
        return agent

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        listed = await upstream.list_tools(cursor=params.cursor if params is not None else None)
        for tool in listed.tools:
            declared = _hints(tool.annotations)
            if declared:
                hints[tool.name] = declared
        tools = [tool.model_copy(update={"output_schema": None}) for tool in listed.tools]
        return listed.model_copy(update={"tools": tools})

    async def on_call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        nonlocal calls, last_call
        agent = await live()
        now = time.monotonic()
        if halt_lapses_after is not None and agent.halt_reason is not None and now - last_call >= halt_lapses_after:
            agent.halt_reason = None
        last_call = now
        calls += 1
        call_id = f"mcp-{calls}"
        agent.begin_step()
        decision = await agent.call(call_id, params.name, params.arguments, hints=hints.get(params.name))
        if decision.allowed and agent.halt_reason is not None:
            decision = Decision.deny(agent.halt_reason, HALT_DENIER)
        if not decision.allowed:
            await agent.denied(call_id, decision)
            return _answer(agent, call_id, [types.TextContent(text=decision.reason or "")], is_error=True)
        try:
            result = await upstream.call_tool(params.name, params.arguments)
        except MCPError as exc:  # the call's outcome all the same: recorded, then answered as upstream answered
            await agent.result(call_id, f"upstream server failed: {type(exc).__name__}: {exc}", is_error=True)
            if _closed(exc) and on_upstream_closed is not None:
                on_upstream_closed()
            raise
        except Exception as exc:  # no MCP result (a malformed one): an error result that names the upstream
            failed = f"upstream server failed: {type(exc).__name__}: {exc}"
            await agent.result(call_id, failed, is_error=True)
            return _answer(agent, call_id, [types.TextContent(text=failed)], is_error=True)
        except BaseException as exc:  # the client gave up (its timeout cancels the request): no call left open
            await agent.failed(call_id, exc)
            raise
        await agent.result(call_id, _recorded(result), is_error=bool(result.is_error))
        notes = _notes(agent, call_id)
        if not notes:
            return result
        content: list[types.ContentBlock] = list(result.content)
        if result.structured_content is not None and not any(isinstance(b, types.TextContent) for b in content):
            content.append(types.TextContent(text=json.dumps(result.structured_content)))
        return result.model_copy(update={"content": [*content, *notes], "structured_content": None})

    return Server(name, on_list_tools=on_list_tools, on_call_tool=on_call_tool)


_HINTS = {
    "read_only_hint": "readOnlyHint",
    "destructive_hint": "destructiveHint",
    "idempotent_hint": "idempotentHint",
    "open_world_hint": "openWorldHint",
}


def _closed(exc: MCPError) -> bool:
    """Whether ``exc`` says the connection to the upstream is gone (not an
    error of the upstream's own under the same code)."""
    return exc.code == types.CONNECTION_CLOSED and exc.message == "Connection closed"


def _hints(annotations: types.ToolAnnotations | None) -> dict[str, bool]:
    """A tool's declared annotations, under their MCP names."""
    if annotations is None:
        return {}
    return {
        name: value for field, name in _HINTS.items() if isinstance(value := getattr(annotations, field, None), bool)
    }


def _recorded(result: types.CallToolResult) -> str:
    """What a result says, as the guard compares it: its text blocks; for
    any other block (an image, audio, a resource) its kind and a digest of
    it, so another image is another result (its digest in groups of four,
    ``[image 3f2a-9c1b-77de-0a12]``, which result normalisation keeps: a
    bare hex digest is noise there); and, without any text, the structured
    content as JSON. Results that differ never read alike."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        else:
            digest = blake2b(block.model_dump_json().encode(), digest_size=8).hexdigest()
            parts.append(f"[{block.type} {'-'.join(digest[i : i + 4] for i in range(0, 16, 4))}]")
    if result.structured_content is not None and not any(isinstance(b, types.TextContent) for b in result.content):
        parts.append(json.dumps(result.structured_content, sort_keys=True))
    return "\n".join(parts)


def _notes(agent: AgentLink, call_id: str) -> list[types.TextContent]:
    return [
        types.TextContent(text=REMINDER_PREFIX + m.text, _meta={REMINDER_META_KEY: m.source.plugin})
        for m in agent.take_messages(call_id)
    ]


def _answer(
    agent: AgentLink, call_id: str, content: list[types.TextContent], *, is_error: bool
) -> types.CallToolResult:
    return types.CallToolResult(content=[*content, *_notes(agent, call_id)], is_error=is_error)
