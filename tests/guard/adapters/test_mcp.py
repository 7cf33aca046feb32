"""MCP: a real client talks to the guard proxy in memory, which talks to a real upstream server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

pytest.importorskip("mcp", reason="mcp is not installed: pip install 'repeat-tool-guard[mcp]'")

import mcp_types as types
from mcp import Client
from mcp.server.mcpserver import MCPServer

from bus import ToolResult
from bus.testing import Capture
from guard import GENTLE_REMINDER
from guard.adapters import GuardLink
from guard.adapters.mcp import HALT_DENIER, REMINDER_META_KEY, REMINDER_PREFIX, guard_proxy
from tests.guard.adapters.conftest import DENIAL, HALT, DenyRepeats, HaltAfter

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def proxied(link: GuardLink, runs: list[str]) -> AsyncIterator[Client]:
    upstream_server = MCPServer("files")

    @upstream_server.tool()
    def grep(pattern: str) -> str:
        """Search the code."""
        runs.append(pattern)
        return "src/cfg.py:12: def load_config():"

    async with Client(upstream_server) as upstream, Client(guard_proxy(upstream, link)) as client:
        yield client


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


async def until_told(client: Client, limit: int = 6) -> list[types.CallToolResult]:
    """The 'model': the same call again until a result carries a guard note or an error."""
    results: list[types.CallToolResult] = []
    for _ in range(limit):
        result = await client.call_tool("grep", {"pattern": "load_config"})
        results.append(result)
        if result.is_error or any(t.startswith(REMINDER_PREFIX) for t in texts(result)):
            break
    return results


async def test_reminder_is_an_extra_text_block_after_the_tools_own(
    link: GuardLink, events: Capture, anyio_backend: str
) -> None:
    runs: list[str] = []
    async with proxied(link, runs) as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == ["grep"]
        results = await until_told(client)
    assert len(results) == 3
    assert texts(results[0]) == ["src/cfg.py:12: def load_config():"]
    assert texts(results[2]) == ["src/cfg.py:12: def load_config():", REMINDER_PREFIX + GENTLE_REMINDER]
    assert results[2].content[1].meta == {REMINDER_META_KEY: "repeat-tool-reminder"}
    assert [r.content for r in events.of(ToolResult)] == ["src/cfg.py:12: def load_config():"] * 3


async def test_denied_call_never_reaches_upstream(link: GuardLink, events: Capture, anyio_backend: str) -> None:
    DenyRepeats(limit=2).attach(link.bus)
    runs: list[str] = []
    async with proxied(link, runs) as client:
        results = await until_told(client)
    assert len(runs) == 2
    assert results[2].is_error
    assert texts(results[2]) == [DENIAL.format(count=2), REMINDER_PREFIX + GENTLE_REMINDER]
    assert events.of(ToolResult)[-1].denied_by == "deny-repeats"


async def test_after_a_halt_request_every_call_is_refused(link: GuardLink, events: Capture, anyio_backend: str) -> None:
    HaltAfter(results=1).attach(link.bus)
    runs: list[str] = []
    async with proxied(link, runs) as client:
        first = await client.call_tool("grep", {"pattern": "a"})
        second = await client.call_tool("grep", {"pattern": "b"})
    assert (runs, first.is_error, second.is_error) == (["a"], False, True)
    assert texts(second) == [HALT]
    assert events.of(ToolResult)[-1].denied_by == HALT_DENIER
