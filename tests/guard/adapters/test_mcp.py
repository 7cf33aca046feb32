"""MCP: a real client talks to the guard proxy in memory, which talks to a real upstream server."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="mcp is not installed: pip install 'repeat-tool-guard[mcp]'")

import mcp_types as types
import msgspec
from mcp import Client, StdioServerParameters
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from bus import ToolCall, ToolResult
from bus.testing import Capture
from guard import GENTLE_REMINDER, TURNS_ADVISORY, TURNS_HALT_REASON
from guard.adapters import CANCELLED, GuardLink
from guard.adapters.mcp import HALT_DENIER, REMINDER_META_KEY, REMINDER_PREFIX, guard_proxy, restarting
from guard.normalize import ResultNormalizer
from guard.policies.rescue import advice_in
from tests.claude_cli import FakeAnthropic, text, tool_use
from tests.guard.adapters.conftest import ADVICE, RESCUE_DENIED, TURNS_DENIED

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def proxied(link: GuardLink, runs: list[str], **options: Any) -> AsyncIterator[Client]:
    upstream_server = MCPServer("files")

    @upstream_server.tool()
    def grep(pattern: str) -> str:
        """Search the code."""
        runs.append(pattern)
        return "src/cfg.py:12: def load_config():"

    @upstream_server.tool()
    def build() -> str:
        """Always fails."""
        raise ToolError("compile error in cfg.py")

    async with Client(upstream_server) as upstream, Client(guard_proxy(upstream, link, **options)) as client:
        yield client


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


async def until_told(client: Client, limit: int = 6, until: str | None = None) -> list[types.CallToolResult]:
    """The 'model': the same call again until a result carries ``until``, or
    without it, a guard note or an error."""
    results: list[types.CallToolResult] = []
    for _ in range(limit):
        result = await client.call_tool("grep", {"pattern": "load_config"})
        results.append(result)
        said = texts(result)
        if until is not None and any(until in t for t in said):
            break
        if until is None and (result.is_error or any(t.startswith(REMINDER_PREFIX) for t in said)):
            break
    return results


async def test_reminder_is_an_extra_text_block_after_the_tools_own(
    link: GuardLink, events: Capture, anyio_backend: str
) -> None:
    runs: list[str] = []
    async with proxied(link, runs) as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == ["grep", "build"]
        results = await until_told(client)
    assert len(results) == 3
    assert texts(results[0]) == ["src/cfg.py:12: def load_config():"]
    assert texts(results[2]) == ["src/cfg.py:12: def load_config():", REMINDER_PREFIX + GENTLE_REMINDER]
    assert results[2].content[1].meta == {REMINDER_META_KEY: "repeat-tool-reminder"}
    assert results[0].structured_content == {"result": "src/cfg.py:12: def load_config():"}, "a typed return"
    assert results[2].structured_content is None, "a client showing it would hide the reminder"
    assert [r.content for r in events.of(ToolResult)] == ["src/cfg.py:12: def load_config():"] * 3


async def test_rescue_denies_the_third_call_and_it_never_reaches_upstream(
    rescue_link: GuardLink, anyio_backend: str
) -> None:
    events = Capture().attach(rescue_link.bus)
    runs: list[str] = []
    async with proxied(rescue_link, runs) as client:
        results = await until_told(client)
    assert len(runs) == 2, "the third grep never reached upstream"
    assert [r.is_error for r in results] == [False, False, True]
    denied = events.of(ToolResult)[-1]
    assert denied.denied_by == "loop-rescue"
    assert denied.content.startswith(f"{RESCUE_DENIED}\nYou have made this exact call 3 times in your last 3")
    assert advice_in(denied.content) is None, "the ask command is missing: the free local denial"
    assert texts(results[2]) == [denied.content], "the client reads the denial as the call's result"


async def test_rescue_escalation_brings_the_ask_commands_advice_to_the_client(
    advice_link: GuardLink, asked: Path, anyio_backend: str
) -> None:
    events = Capture().attach(advice_link.bus)
    runs: list[str] = []
    async with proxied(advice_link, runs) as client:
        results = await until_told(client, until=ADVICE)
    assert runs == ["load_config"], "the 2nd call is denied, the 3rd escalated and denied with advice"
    denials = [r.content for r in events.of(ToolResult) if r.denied_by == "loop-rescue"]
    assert [advice_in(d) for d in denials] == [None, ADVICE]
    assert [texts(r) for r in results[1:]] == [[d] for d in denials]
    question = asked.read_text()
    assert "(no user message recorded)" in question, "MCP carries no user turns"
    assert "src/cfg.py:12: def load_config():" in question, "the output the client already had"


async def test_turns_sees_each_call_as_a_turn_and_after_its_halt_request_every_call_is_refused(
    turns_link: GuardLink, anyio_backend: str
) -> None:
    events = Capture().attach(turns_link.bus)
    runs: list[str] = []
    async with proxied(turns_link, runs) as client:
        results = await until_told(client, limit=4, until="never said")
        other = await client.call_tool("grep", {"pattern": "something else"})
    assert runs == ["load_config"] * 2, "calls 3 and 4 were denied"
    assert [c.step for c in events.of(ToolCall)] == [1, 2, 3, 4, 5]
    assert {c.agent.id for c in events.of(ToolCall) if c.agent} == {"mcp-client"}, "MCP cannot tell agents apart"
    advisory = texts(results[1])[1]
    assert advisory.startswith(REMINDER_PREFIX + TURNS_ADVISORY.split("{tool}")[0] + "grep with identical arguments")
    assert [(r.is_error, texts(r)[0].startswith(TURNS_DENIED)) for r in results[2:]] == [(True, True)] * 2
    halt = TURNS_HALT_REASON.format(tool="grep", count=4, denials=" and 2 denied calls")
    assert (other.is_error, texts(other)) == (True, [halt]), "a server cannot stop its client: it refuses"
    assert events.of(ToolResult)[-1].denied_by == HALT_DENIER


async def test_a_halt_lapses_once_the_client_paused_as_long_as_a_users_turn(
    turns_link: GuardLink, anyio_backend: str
) -> None:
    """MCP carries no user turns, so a halt would refuse every call of the
    session for good: a pause without calls ends it, while calls that keep
    coming (the looping agent's) keep it."""
    runs: list[str] = []
    async with proxied(turns_link, runs, halt_lapses_after=0.5) as client:
        await until_told(client, limit=4, until="never said")
        for n in range(3):
            refused = await client.call_tool("grep", {"pattern": f"other {n}"})
            assert refused.is_error
            await anyio.sleep(0.2)
        await anyio.sleep(0.6)
        after = await client.call_tool("grep", {"pattern": "new work"})
    assert not after.is_error
    assert runs == ["load_config", "load_config", "new work"]


@pytest.mark.parametrize("lapse", [0, -1.0, float("nan")])
async def test_a_lapse_that_is_no_time_is_refused(link: GuardLink, lapse: float, anyio_backend: str) -> None:
    with pytest.raises(ValueError, match=r"halt_lapses_after = .*: must be a number of seconds > 0, or None"):
        guard_proxy(Client(MCPServer("x")), link, halt_lapses_after=lapse)


async def test_an_upstream_error_is_an_error_result(link: GuardLink, events: Capture, anyio_backend: str) -> None:
    async with proxied(link, []) as client:
        result = await client.call_tool("build", {})
    assert result.is_error
    (published,) = events.of(ToolResult)
    assert published.is_error
    assert "compile error in cfg.py" in published.content
    assert texts(result) == [published.content], "the upstream blocks, unchanged"


async def test_a_call_the_upstream_refuses_is_recorded_and_refused_alike(
    link: GuardLink, events: Capture, anyio_backend: str
) -> None:
    async def refuse(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        raise MCPError(-32000, "upstream refused")

    upstream_server = Server("refusing", on_call_tool=refuse)
    starts = 0

    def connect() -> Client:
        nonlocal starts
        starts += 1
        return Client(upstream_server)

    async with restarting(connect) as upstream, Client(guard_proxy(upstream, link)) as client:
        for _ in range(2):
            with pytest.raises(MCPError, match="upstream refused"):
                await client.call_tool("grep", {"pattern": "x"})
    first, _ = events.of(ToolResult)
    assert (first.call_id, first.is_error) == ("mcp-1", True), "the call is not left open in the log"
    assert first.content == "upstream server failed: MCPError: upstream refused"
    assert starts == 1, "an error of the upstream's own restarts nothing"


async def test_a_call_the_client_gives_up_on_is_answered_as_cancelled(
    link: GuardLink, events: Capture, anyio_backend: str
) -> None:
    """A client's request timeout cancels the proxied call: the call is not
    left open in the log (where a later result could answer it)."""
    upstream_server = MCPServer("slow")

    @upstream_server.tool()
    async def wait() -> str:
        """Takes its time."""
        await anyio.sleep(30)
        return "never"

    async with Client(upstream_server) as upstream, Client(guard_proxy(upstream, link)) as client:
        with pytest.raises(MCPError, match="Timed out"):
            await client.call_tool("wait", {}, read_timeout_seconds=0.2)
        with anyio.fail_after(10):
            while not events.of(ToolResult):
                await anyio.sleep(0.01)
    (published,) = events.of(ToolResult)
    assert (published.call_id, published.is_error, published.content) == ("mcp-1", True, CANCELLED)


async def test_a_structured_only_result_keeps_its_json_as_text_beside_the_reminder(
    link: GuardLink, anyio_backend: str
) -> None:
    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"hits": {"type": "integer"}}, "required": ["hits"]}
        tool = types.Tool(name="count", input_schema={"type": "object"}, output_schema=schema)
        return types.ListToolsResult(tools=[tool])

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[], structured_content={"hits": 3})

    upstream_server = Server("counter", on_list_tools=on_list_tools, on_call_tool=on_call_tool)
    async with Client(upstream_server) as upstream, Client(guard_proxy(upstream, link)) as client:
        (tool,) = (await client.list_tools()).tools
        results = [await client.call_tool("count", {}) for _ in range(3)]
    assert tool.output_schema is None, "with a schema, a result without structured content would be refused"
    assert [r.structured_content for r in results[:2]] == [{"hits": 3}] * 2
    assert texts(results[2]) == ['{"hits": 3}', REMINDER_PREFIX + GENTLE_REMINDER]
    assert results[2].structured_content is None


async def test_structured_and_image_results_are_recorded_so_that_different_ones_never_read_alike(
    link: GuardLink, events: Capture, anyio_backend: str
) -> None:
    polled: list[types.CallToolResult] = [
        types.CallToolResult(content=[], structured_content={"state": "running", "done": 1}),
        types.CallToolResult(content=[], structured_content={"state": "running", "done": 2}),
        types.CallToolResult(content=[types.ImageContent(data="AAAA", mime_type="image/png")]),
        types.CallToolResult(content=[types.ImageContent(data="AAAB", mime_type="image/png")]),
    ]

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="status", input_schema={"type": "object"})])

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return polled.pop(0)

    upstream_server = Server("jobs", on_list_tools=on_list_tools, on_call_tool=on_call_tool)
    async with Client(upstream_server) as upstream, Client(guard_proxy(upstream, link)) as client:
        for _ in range(4):
            await client.call_tool("status", {"job": 7})
    recorded = [r.content for r in events.of(ToolResult)]
    assert recorded[:2] == ['{"done": 1, "state": "running"}', '{"done": 2, "state": "running"}']
    assert [text[:7] for text in recorded[2:]] == ["[image "] * 2
    assert len(set(recorded)) == 4
    # two screenshots that differ stay different once normalised, as the loops policy compares them
    assert len({ResultNormalizer().normalize(text) for text in recorded[2:]}) == 2


PROXY_SCRIPT = """
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.server.stdio import stdio_server

from guard import Config, RemindConfig
from guard.adapters import GuardLink
from guard.adapters.mcp import guard_proxy, restarting


async def main() -> None:
    upstream_command = StdioServerParameters(command=sys.executable, args=sys.argv[1:])
    async with restarting(lambda: Client(upstream_command)) as upstream, stdio_server() as (read, write):
        link = GuardLink(config=Config(remind=RemindConfig(thresholds=(2,))), log="proxy-session.jsonl")
        proxy = guard_proxy(upstream, link)
        await proxy.run(read, write, proxy.create_initialization_options())


anyio.run(main)
"""

UPSTREAM_SCRIPT = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("files")


@server.tool()
def grep(pattern: str) -> str:
    \"\"\"Search the code.\"\"\"
    return "src/cfg.py:12: def load_config():"


server.run("stdio")
"""


async def test_claude_code_shows_the_model_the_reminder_of_a_structured_result(
    fake_anthropic: FakeAnthropic, tmp_path: Path, anyio_backend: str
) -> None:
    """The real Claude Code CLI, with the proxy as its MCP server over stdio,
    run twice in one project: the second session continues the proxy's log."""
    from claude_agent_sdk import query

    (tmp_path / "proxy.py").write_text(PROXY_SCRIPT)
    (tmp_path / "upstream.py").write_text(UPSTREAM_SCRIPT)
    command = [str(tmp_path / "proxy.py"), str(tmp_path / "upstream.py")]
    servers: Any = {"files": {"type": "stdio", "command": sys.executable, "args": command}}
    for _ in range(2):
        fake_anthropic.script(*[[tool_use("mcp__files__grep", {"pattern": "load_config"})]] * 2, [text("Found it.")])
        options = fake_anthropic.options(mcp_servers=servers)
        async for _message in query(prompt="find the config loader", options=options):
            pass

    for session in (0, 3):
        first, second = (fake_anthropic.texts_after_tool_results(session + n) for n in (1, 2))
        assert "src/cfg.py:12: def load_config():" in first
        assert REMINDER_PREFIX not in first
        assert "src/cfg.py:12: def load_config():" in second
        assert REMINDER_PREFIX + GENTLE_REMINDER in second
    log = fake_anthropic.work / "proxy-session.jsonl"
    assert log.read_text().count('"type":"session/start"') == 2


async def test_the_tools_annotations_ride_on_their_calls(link: GuardLink, events: Capture, anyio_backend: str) -> None:
    upstream_server = MCPServer("tickets")

    @upstream_server.tool(annotations=types.ToolAnnotations(read_only_hint=False, idempotent_hint=False))
    def create_ticket(title: str) -> str:
        """Open a ticket."""
        return "created #7"

    @upstream_server.tool()
    def ping() -> str:
        """No annotations."""
        return "pong"

    async with Client(upstream_server) as upstream, Client(guard_proxy(upstream, link)) as client:
        await client.list_tools()
        await client.call_tool("create_ticket", {"title": "bug"})
        await client.call_tool("ping", {})
    created, pinged = events.of(ToolCall)
    assert created.hints == {"readOnlyHint": False, "idempotentHint": False}
    assert pinged.hints is msgspec.UNSET


_RAW_UPSTREAM = """
import json, os, sys
def send(message):
    sys.stdout.write(json.dumps(message) + "\\n")
    sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    ident, method = message.get("id"), message.get("method")
    if method == "initialize":
        started = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}}}
        started["serverInfo"] = {"name": "raw", "version": "1"}
        send({"jsonrpc": "2.0", "id": ident, "result": started})
    elif method == "tools/list":
        tools = [{"name": name, "inputSchema": {"type": "object"}} for name in ("ok", "crash", "malformed")]
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": tools}})
    elif method == "tools/call":
        name = message["params"]["name"]
        if name == "crash":
            os._exit(1)
        content = "not a list" if name == "malformed" else [{"type": "text", "text": "fine"}]
        send({"jsonrpc": "2.0", "id": ident, "result": {"content": content}})
    elif ident is not None:
        send({"jsonrpc": "2.0", "id": ident, "result": {}})
"""
"""An upstream server written by hand, over stdio, that answers ``malformed``
with no MCP result and exits on ``crash``."""


@asynccontextmanager
async def raw_upstream(tmp_path: Path) -> AsyncIterator[Client]:
    from mcp import StdioServerParameters

    script = tmp_path / "raw_upstream.py"
    script.write_text(_RAW_UPSTREAM)
    async with Client(StdioServerParameters(command=sys.executable, args=[str(script)])) as upstream:
        yield upstream


async def test_a_malformed_upstream_result_is_an_error_result_naming_the_upstream(
    link: GuardLink, events: Capture, tmp_path: Path, anyio_backend: str
) -> None:
    """Not an error the client would blame on the model's own arguments."""
    async with raw_upstream(tmp_path) as upstream, Client(guard_proxy(upstream, link)) as client:
        result = await client.call_tool("malformed", {})
        assert result.is_error
        assert texts(result)[0].startswith("upstream server failed: ValidationError")
        assert texts(await client.call_tool("ok", {})) == ["fine"], "and the next call goes through"
    assert [r.is_error for r in events.of(ToolResult)] == [True, False]


async def test_an_upstream_that_crashed_is_said_so_once_its_call_is_recorded(
    link: GuardLink, events: Capture, tmp_path: Path, anyio_backend: str
) -> None:
    closed: list[int] = []
    async with raw_upstream(tmp_path) as upstream:
        proxy = guard_proxy(upstream, link, on_upstream_closed=lambda: closed.append(len(events.of(ToolResult))))
        async with Client(proxy) as client:
            with pytest.raises(MCPError, match="Connection closed"):
                await client.call_tool("crash", {})
    assert closed == [1], "told after the call's outcome was recorded"
    (published,) = events.of(ToolResult)
    assert (published.is_error, published.content) == (True, "upstream server failed: MCPError: Connection closed")


CRASHING_UPSTREAM = """
import os
import sys
import time

from mcp.server.mcpserver import MCPServer

if sys.argv[1:] and os.path.exists(sys.argv[1]):
    time.sleep(3600)  # started while its hang file is there: it never answers its initialization

server = MCPServer("files")


@server.tool()
def grep(pattern: str) -> str:
    \"\"\"Search the code.\"\"\"
    return f"{os.getpid()}"


@server.tool()
def crash() -> str:
    \"\"\"The server dies mid-call.\"\"\"
    os._exit(3)


server.run("stdio")
"""


@pytest.fixture
def crashing(tmp_path: Path) -> StdioServerParameters:
    """A real upstream server process whose ``crash`` tool makes it exit;
    its ``grep`` answers with the process id that served it."""
    (tmp_path / "upstream.py").write_text(CRASHING_UPSTREAM)
    return StdioServerParameters(command=sys.executable, args=[str(tmp_path / "upstream.py"), str(tmp_path / "hang")])


@asynccontextmanager
async def restarted(link: GuardLink, upstream: StdioServerParameters, **options: Any) -> AsyncIterator[Client]:
    """A client of the proxy in front of ``upstream``, started again when it
    crashes (``restarting`` with ``options``)."""
    async with (
        restarting(lambda: Client(upstream), **options) as restarted_upstream,
        Client(guard_proxy(restarted_upstream, link)) as client,
    ):
        yield client


async def test_an_upstream_that_crashed_is_started_again_for_the_next_call(
    link: GuardLink, events: Capture, crashing: StdioServerParameters, anyio_backend: str
) -> None:
    async with restarted(link, crashing) as client:
        before = texts(await client.call_tool("grep", {"pattern": "a"}))
        with pytest.raises(MCPError, match="Connection closed"):
            await client.call_tool("crash", {})
        after = texts(await client.call_tool("grep", {"pattern": "b"}))
        again = texts(await client.call_tool("grep", {"pattern": "c"}))
    assert before != after == again, "a new server process answers, and keeps answering"
    results = [(r.tool, r.is_error) for r in events.of(ToolResult)]
    assert results == [("grep", False), ("crash", True), ("grep", False), ("grep", False)]
    assert events.of(ToolResult)[1].content == "upstream server failed: MCPError: Connection closed"
    with pytest.raises(ProcessLookupError):
        os.kill(int(again[0]), 0)  # the proxy's exit stopped the server it started


async def test_claude_code_gets_its_mcp_tool_back_after_the_upstream_crashed(
    fake_anthropic: FakeAnthropic, tmp_path: Path, anyio_backend: str
) -> None:
    """The real Claude Code CLI with the proxy as its stdio MCP server: the
    call that crashed the upstream fails, the next one is answered by the
    server started again, in the same session."""
    from claude_agent_sdk import query

    (tmp_path / "proxy.py").write_text(PROXY_SCRIPT)
    (tmp_path / "upstream.py").write_text(CRASHING_UPSTREAM)
    command = [str(tmp_path / "proxy.py"), str(tmp_path / "upstream.py")]
    servers: Any = {"files": {"type": "stdio", "command": sys.executable, "args": command}}
    fake_anthropic.script(
        [tool_use("mcp__files__grep", {"pattern": "a"})],
        [tool_use("mcp__files__crash", {})],
        [tool_use("mcp__files__grep", {"pattern": "b"})],
        [text("Done.")],
    )
    async for _message in query(prompt="search twice", options=fake_anthropic.options(mcp_servers=servers)):
        pass

    before, crashed, after = (fake_anthropic.texts_after_tool_results(n) for n in (1, 2, 3))
    pids = [re.findall(r'"result":"(\d+)"', answer) for answer in (before, after)]
    assert all(len(pid) == 1 for pid in pids), (before, after)
    assert pids[0] != pids[1], "another server process answered"
    assert "Connection closed" in crashed


async def test_a_server_that_keeps_dying_is_left_down_past_its_restarts(
    link: GuardLink, crashing: StdioServerParameters, anyio_backend: str
) -> None:
    async with restarted(link, crashing, restarts=1, per=60) as client:
        for _ in range(2):
            with pytest.raises(MCPError, match="Connection closed"):
                await client.call_tool("crash", {})
        with pytest.raises(MCPError, match="Connection closed"):
            await client.call_tool("grep", {"pattern": "a"})  # one restart a minute, and it was spent


async def test_a_server_left_down_is_started_again_once_its_oldest_restart_is_old_enough(
    link: GuardLink, crashing: StdioServerParameters, anyio_backend: str
) -> None:
    async with restarted(link, crashing, restarts=1, per=5) as client:
        for _ in range(3):  # two crashes, then a call the spent restart leaves unanswered
            with pytest.raises(MCPError, match="Connection closed"):
                await client.call_tool("crash" if _ < 2 else "grep", {})
        assert await answered_again(client)


async def test_no_restarts_leaves_a_crashed_server_down(
    link: GuardLink, crashing: StdioServerParameters, anyio_backend: str
) -> None:
    async with restarted(link, crashing, restarts=0, per=0.2) as client:
        with pytest.raises(MCPError, match="Connection closed"):
            await client.call_tool("crash", {})
        await anyio.sleep(0.3)
        with pytest.raises(MCPError, match="Connection closed"):
            await client.call_tool("grep", {"pattern": "a"})


async def test_a_restart_that_never_answers_is_given_up_and_tried_again_later(
    link: GuardLink, crashing: StdioServerParameters, tmp_path: Path, anyio_backend: str
) -> None:
    """A server started again that never answers its initialization (a
    package fetch stuck on the network): a call waits for it no longer than
    a start may take, and fails as the closed connection's; once the cause
    is gone, a later restart brings the server back."""
    async with restarted(link, crashing, per=4, start_timeout=3) as client:
        (tmp_path / "hang").touch()
        with pytest.raises(MCPError, match="Connection closed"):
            await client.call_tool("crash", {})
        with anyio.fail_after(10), pytest.raises(MCPError, match="Connection closed"):
            await client.call_tool("grep", {"pattern": "a"})
        (tmp_path / "hang").unlink()
        assert await answered_again(client)


async def answered_again(client: Client, within: float = 60) -> bool:
    """Whether the upstream answers a call again within ``within`` seconds
    (calls before then may find it still down): a restart takes a Python
    start, which a loaded machine slows."""
    with anyio.move_on_after(within):
        while True:
            try:
                return texts(await client.call_tool("grep", {"pattern": "again"}))[0].isdigit()
            except MCPError:
                await anyio.sleep(0.2)
    return False


async def test_a_first_start_that_never_answers_is_the_callers_timeout(
    crashing: StdioServerParameters, tmp_path: Path, anyio_backend: str
) -> None:
    (tmp_path / "hang").touch()
    with anyio.fail_after(10), pytest.raises(ExceptionGroup) as raised:
        async with restarting(lambda: Client(crashing), start_timeout=1):
            pass
    assert raised.group_contains(TimeoutError, match="did not start within 1 s")


async def test_a_server_that_will_not_start_again_fails_its_calls(
    link: GuardLink, crashing: StdioServerParameters, tmp_path: Path, anyio_backend: str
) -> None:
    async with restarted(link, crashing) as client:
        (tmp_path / "upstream.py").write_text("raise SystemExit(1)\n")
        with pytest.raises(MCPError, match="Connection closed"):
            await client.call_tool("crash", {})
        with pytest.raises(MCPError, match="Connection closed"):
            await client.call_tool("grep", {"pattern": "a"})


async def test_an_upstream_that_will_not_start_at_all_is_the_callers_error(tmp_path: Path, anyio_backend: str) -> None:
    (tmp_path / "upstream.py").write_text("raise SystemExit(1)\n")
    params = StdioServerParameters(command=sys.executable, args=[str(tmp_path / "upstream.py")])
    with pytest.raises(ExceptionGroup) as raised:  # as the client alone raises it, in a task group
        async with restarting(lambda: Client(params)):
            pass
    assert raised.group_contains(MCPError, match="Connection closed")


@pytest.mark.parametrize(
    ("restarts", "per", "start"), [(-1, 60.0, 30.0), (3, 0.0, 30.0), (3, float("nan"), 30.0), (3, 60.0, 0.0)]
)
async def test_restarts_out_of_range_are_refused(restarts: int, per: float, start: float, anyio_backend: str) -> None:
    with pytest.raises(ValueError, match="restarts must be >= 0, per and start_timeout numbers of seconds > 0"):
        async with restarting(lambda: Client(MCPServer("x")), restarts=restarts, per=per, start_timeout=start):
            pass
