"""The real Claude Code CLI, offline: a scripted fake Anthropic Messages API on loopback.

The CLI bundled in ``claude-agent-sdk`` talks to ``$ANTHROPIC_BASE_URL``; this
module serves that API from a thread on 127.0.0.1 and answers each request of
the agent loop with the next scripted assistant turn, streamed as SSE the way
the real API streams it. Every request is recorded, so a test can assert what
reached the model (a reminder, a denial, a tool result) on its next request.

Use the ``fake_anthropic`` fixture (``tests/conftest.py``)::

    async def test_x(fake_anthropic: FakeAnthropic) -> None:
        fake_anthropic.script(
            [tool_use("Bash", {"command": "ls"})],   # 1st model response
            [tool_use("Bash", {"command": "ls"})],   # 2nd
            [text("done")],                          # 3rd: end_turn
        )
        options = fake_anthropic.options(hooks=...)  # ClaudeAgentOptions for the SDK
        async for message in query(prompt="go", options=options): ...
        fake_anthropic.requests[1]                   # the 2nd agent-loop request's JSON body
        fake_anthropic.tool_results(1)               # the tool_result blocks it carried

or run the CLI yourself (command hooks): ``fake_anthropic.run_cli("go", settings=...)``
(``claude -p``) with ``fake_anthropic.env()``.

A turn is a list of content blocks (``text``, ``tool_use``); its stop reason is
``tool_use`` when it has a tool call, else ``end_turn``. Requests that are not
agent-loop turns (the CLI's side queries: titles, topic checks; those carry no
``tools``) are answered with a short text and kept in ``side_requests``. When
the script runs out, the server answers ``end_turn`` with the text
``(script exhausted)`` and counts it in ``overruns``, so a runaway loop ends.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from claude_agent_sdk import ClaudeAgentOptions

__all__ = ["LEAVES_A_TRACE", "FakeAnthropic", "ScriptedServer", "bundled_cli", "text", "tool_use"]

MODEL = "claude-sonnet-4-6"
LEAVES_A_TRACE = "sh leave-a-trace.sh"
"""A command that appends ``ran`` to ``work/ran.txt`` (a script every fake's
``work`` holds): the guard cannot see that it writes, as with any program,
so the same command again is the same call."""
EXHAUSTED = "(script exhausted)"

Block = dict[str, Any]


def text(value: str) -> Block:
    """A text block of a scripted assistant turn."""
    return {"type": "text", "text": value}


def tool_use(name: str, input: Mapping[str, Any], id: str | None = None) -> Block:
    """A tool_use block; ``id`` defaults to a fresh ``toolu_fake_NN``."""
    return {"type": "tool_use", "id": id, "name": name, "input": dict(input)}


def bundled_cli() -> Path | None:
    """The Claude Code binary shipped inside ``claude-agent-sdk``, if installed."""
    try:
        import claude_agent_sdk
    except ImportError:
        return None
    path = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    return path if path.is_file() and os.access(path, os.X_OK) else None


@dataclass
class _Recorded:
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class ScriptedServer:
    """An HTTP server on 127.0.0.1 in a thread, answering with scripted assistant
    turns: the shared part of the fake model APIs. ``requests`` are the JSON
    bodies it answered, ``paths`` every request path; thread-safe."""

    def __init__(self, name: str, id_prefix: str) -> None:
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._turns: list[list[Block]] = []
        self._id_prefix = id_prefix
        self._ids = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)
        self._thread.start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *turns: Sequence[Block]) -> None:
        """Append assistant turns, answered one per request."""
        with self._lock:
            self._turns.extend(self._numbered(turn) for turn in turns)

    def _numbered(self, turn: Sequence[Block]) -> list[Block]:
        """``turn`` with an id for each tool call that has none (call with the lock held)."""
        blocks = []
        for block in turn:
            block = dict(block)
            if block["type"] == "tool_use" and block.get("id") is None:
                self._ids += 1
                block["id"] = f"{self._id_prefix}{self._ids:02d}"
            blocks.append(block)
        return blocks

    @property
    def remaining(self) -> int:
        """Scripted turns not yet served."""
        return len(self._turns)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class FakeAnthropic(ScriptedServer):
    """A scripted Anthropic Messages API on ``http://127.0.0.1:<port>``; the CLI
    runs with ``home`` as its HOME and ``home/work`` (``work``) as its cwd.

    ``requests`` holds the JSON bodies of the agent-loop requests (those
    offering tools) in arrival order, ``side_requests`` the others, and
    ``paths`` every request path seen. Thread-safe: the CLI may send
    requests concurrently.
    """

    def __init__(self, home: Path) -> None:
        super().__init__("fake-anthropic", "toolu_fake_")
        self.home = home
        self.work = home / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        (self.work / "leave-a-trace.sh").write_text("echo ran >> ran.txt\n")
        self.side_requests: list[dict[str, Any]] = []
        self.subagent_requests: list[dict[str, Any]] = []
        self.overruns = 0
        self._subagent_turns: dict[str, list[list[Block]]] = {}

    def script_subagent(self, task: str, *turns: Sequence[Block]) -> None:
        """Turns for the subagent whose task (its first user message) contains
        ``task``: its requests are answered from these, in order, and kept in
        ``subagent_requests``, so a subagent running beside the main agent
        cannot take the main agent's turns."""
        with self._lock:
            self._subagent_turns.setdefault(task, []).extend(self._numbered(turn) for turn in turns)

    # --- what reached the model ------------------------------------------------------------

    def last_user_content(self, index: int) -> list[Block]:
        """The content blocks of the last user message of agent-loop request ``index``."""
        messages = self.requests[index]["messages"]
        content = messages[-1]["content"]
        return [text(content)] if isinstance(content, str) else list(content)

    def tool_results(self, index: int) -> list[Block]:
        """The ``tool_result`` blocks of request ``index``'s last user message."""
        return [b for b in self.last_user_content(index) if b.get("type") == "tool_result"]

    def texts_after_tool_results(self, index: int) -> str:
        """Every text request ``index`` carried in its last user message, tool results included, joined."""
        return "\n".join(_texts(self.last_user_content(index)))

    # --- running the CLI -------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """Environment for the CLI: this server as the API, a dummy key, an empty
        home (no user settings or credentials), and no traffic beyond loopback."""
        config = self.home / ".claude"
        config.mkdir(parents=True, exist_ok=True)
        return {
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": "sk-ant-fake-offline-key",
            "ANTHROPIC_MODEL": MODEL,
            "ANTHROPIC_SMALL_FAST_MODEL": MODEL,
            "CLAUDE_CONFIG_DIR": str(config),
            "HOME": str(self.home),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "IS_SANDBOX": "1",  # bypassPermissions is refused to root otherwise (CI containers run as root)
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
            "CLAUDE_CODE_SKIP_VERTEX_AUTH": "1",
            "CLAUDE_CODE_SKIP_BEDROCK_AUTH": "1",
            # anything that is not the fake API goes to a closed port
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "HTTP_PROXY": "http://127.0.0.1:9",
            "NO_PROXY": "127.0.0.1,localhost",
        }

    def claude(self, *args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Another ``claude`` command (``plugin install ...``) with this home's environment."""
        cli = bundled_cli()
        if cli is None:
            raise RuntimeError("claude-agent-sdk with its bundled CLI is not installed")
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **self.env(), **(env or {})}
        return subprocess.run(
            [str(cli), *args], cwd=self.work, env=full_env, capture_output=True, text=True, timeout=120, check=False
        )

    def options(self, **kwargs: Any) -> ClaudeAgentOptions:
        """``ClaudeAgentOptions`` running the bundled CLI against this server in
        ``home/work``; ``kwargs`` override (``env`` is merged)."""
        from claude_agent_sdk import ClaudeAgentOptions

        env = {**self.env(), **kwargs.pop("env", {})}
        defaults: dict[str, Any] = {
            "cwd": str(self.work),
            "env": env,
            "model": MODEL,
            "permission_mode": "bypassPermissions",
            "setting_sources": [],
            "max_turns": 20,
        }
        return ClaudeAgentOptions(**{**defaults, **kwargs})

    def run_cli(
        self,
        prompt: str,
        *args: str,
        settings: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 120,
        setting_sources: str = "",
    ) -> subprocess.CompletedProcess[str]:
        """``claude -p prompt --output-format stream-json --verbose`` in ``home/work``,
        with ``settings`` (hooks, say) written to a file and passed by ``--settings``,
        reading only the settings files ``setting_sources`` names (none by default)."""
        cli = bundled_cli()
        if cli is None:
            raise RuntimeError("claude-agent-sdk with its bundled CLI is not installed")
        command = [str(cli), "-p", prompt, "--output-format", "stream-json", "--verbose", "--model", MODEL]
        command += ["--permission-mode", "bypassPermissions", "--setting-sources", setting_sources]
        if settings is not None:
            path = self.home / "settings.json"
            path.write_text(json.dumps(settings))
            command += ["--settings", str(path)]
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **self.env(), **(env or {})}
        return subprocess.run(
            [*command, *args],
            cwd=self.work,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    # --- serving ---------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler(self)

    def _answer(self, path: str, body: dict[str, Any]) -> list[Block] | None:
        with self._lock:
            self.paths.append(path)
            if not path.startswith("/v1/messages") or "count_tokens" in path:
                return None
            if not body.get("tools"):
                self.side_requests.append(body)
                return [text("ok")]
            first = body.get("messages", [{}])[0].get("content")
            opening = "\n".join(_texts([text(first)] if isinstance(first, str) else first or []))
            for task, turns in self._subagent_turns.items():
                if task in opening:
                    self.subagent_requests.append(body)
                    if turns:
                        return turns.pop(0)
                    break
            else:
                self.requests.append(body)
                if self._turns:
                    return self._turns.pop(0)
            self.overruns += 1
            return [text(EXHAUSTED)]

    def _next_id(self) -> str:
        with self._lock:
            self._ids += 1
            return f"msg_fake_{self._ids:02d}"


def _texts(blocks: Sequence[Block]) -> Iterator[str]:
    for block in blocks:
        if block.get("type") == "text":
            yield block["text"]
        elif block.get("type") == "tool_result":
            content = block.get("content")
            if isinstance(content, str):
                yield content
            elif isinstance(content, list):
                yield from _texts(content)


def _message(message_id: str, blocks: list[Block], model: str) -> dict[str, Any]:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _sse(message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": text("")}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            empty = {**block, "input": {}}
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 5}}
    yield "message_stop", {"type": "message_stop"}


def _handler(api: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            with api._lock:
                api.paths.append(self.path)
            self._json(200, {"data": [], "has_more": False})

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {}
            blocks = api._answer(self.path, body)
            if blocks is None:
                self._json(200, {"input_tokens": 10} if "count_tokens" in self.path else {})
                return
            message = _message(api._next_id(), blocks, body.get("model") or MODEL)
            if not body.get("stream"):
                self._json(200, message)
                return
            chunks = b"".join(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode() for event, data in _sse(message))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Content-Length", str(len(chunks)))
            self.end_headers()
            self.wfile.write(chunks)

        def _json(self, status: int, data: Any) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler
