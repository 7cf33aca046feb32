"""Scripted chat APIs on loopback, for the real provider classes of LangChain.

``FakeChatAPI("anthropic" | "openai" | "gemini")`` serves that provider's
HTTP API (Anthropic Messages, OpenAI Chat Completions, Gemini
``generateContent``) from a thread on 127.0.0.1, answering each request with
the next scripted turn and recording every request body, so a test asserts
on the payload the provider's own request builder sent. ``chat_model()``
is ``ChatAnthropic`` / ``ChatOpenAI`` / ``ChatGoogleGenerativeAI`` pointed at it
with a dummy key. Turns are lists of ``text(...)`` and ``tool_use(...)``
blocks (from ``tests.claude_cli``); past the script the server answers text.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from tests.claude_cli import Block, text

__all__ = ["DIALECTS", "Dialect", "FakeChatAPI"]

Dialect = Literal["anthropic", "openai", "gemini"]
DIALECTS: tuple[Dialect, ...] = ("anthropic", "openai", "gemini")
MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1-mini", "gemini": "gemini-2.5-flash"}


class FakeChatAPI:
    """One provider's chat API, scripted; ``requests`` are the JSON bodies received."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._turns: list[list[Block]] = []
        self._ids = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"fake-{dialect}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *turns: Sequence[Block]) -> None:
        with self._lock:
            for turn in turns:
                blocks = []
                for block in turn:
                    block = dict(block)
                    if block["type"] == "tool_use" and block.get("id") is None:
                        self._ids += 1
                        block["id"] = f"call_{self._ids:02d}"
                    blocks.append(block)
                self._turns.append(blocks)

    def chat_model(self) -> Any:
        """The provider's LangChain chat model, sending to this server."""
        model = MODELS[self.dialect]
        if self.dialect == "anthropic":
            from langchain_anthropic import ChatAnthropic

            return ChatAnthropic(model_name=model, base_url=self.url, api_key="sk-ant-fake", max_retries=0)  # type: ignore[arg-type, call-arg]
        if self.dialect == "openai":
            from langchain_openai import ChatOpenAI

            return ChatOpenAI(model=model, base_url=f"{self.url}/v1", api_key="sk-fake", max_retries=0)  # type: ignore[arg-type]
        from langchain_google_genai import ChatGoogleGenerativeAI

        return ChatGoogleGenerativeAI(model=model, base_url=self.url, google_api_key="fake-key", max_retries=0)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.paths.append(path)
            self.requests.append(body)
            blocks = self._turns.pop(0) if self._turns else [text("(script exhausted)")]
            self._ids += 1
            number = self._ids
        return _FORMATS[self.dialect](blocks, number, body)


def _anthropic(blocks: list[Block], number: int, body: dict[str, Any]) -> dict[str, Any]:
    calls = any(b["type"] == "tool_use" for b in blocks)
    return {
        "id": f"msg_{number:02d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", MODELS["anthropic"]),
        "content": blocks,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _openai(blocks: list[Block], number: int, body: dict[str, Any]) -> dict[str, Any]:
    calls = [
        {"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
        for b in blocks
        if b["type"] == "tool_use"
    ]
    content = "".join(b["text"] for b in blocks if b["type"] == "text") or None
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{number:02d}",
        "object": "chat.completion",
        "created": 1764489600,
        "model": body.get("model", MODELS["openai"]),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _gemini(blocks: list[Block], number: int, body: dict[str, Any]) -> dict[str, Any]:
    parts = [
        {"text": b["text"]} if b["type"] == "text" else {"functionCall": {"name": b["name"], "args": b["input"]}}
        for b in blocks
    ]
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": MODELS["gemini"],
        "responseId": f"resp-{number:02d}",
    }


_FORMATS = {"anthropic": _anthropic, "openai": _openai, "gemini": _gemini}


def _handler(api: FakeChatAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            payload = json.dumps(api._answer(self.path, body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            # no keep-alive: the providers pool their clients process-wide, and a
            # pooled socket would outlive the test's event loop
            self.send_header("Connection", "close")
            self.close_connection = True
            self.end_headers()
            self.wfile.write(payload)

    return Handler
