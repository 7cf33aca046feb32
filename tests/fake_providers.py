"""Scripted chat APIs on loopback, for the real provider classes of LangChain,
pydantic-ai, the OpenAI Agents SDK and ADK.

``FakeChatAPI(dialect)`` serves every provider's HTTP API from a thread on
127.0.0.1, whichever path a request takes: Anthropic Messages
(``/v1/messages``), OpenAI Chat Completions (``/chat/completions``), OpenAI
Responses (``/responses``) and Gemini (``:generateContent``). It answers each
request with the next scripted turn and records every request body, so a test
asserts on the payload the provider's own request builder sent.
``chat_model()`` is the LangChain chat model of ``dialect`` pointed at it;
``env()`` points every SDK at it through their base-URL variables. Turns are
lists of ``text(...)`` and ``tool_use(...)`` blocks (from ``tests.claude_cli``).
With ``stubborn(n)``, past the script the server calls one offered tool ``n``
times with the same arguments, like a model stuck in a loop (a tool named
``grep``, else ``Bash``, else the first), then answers text.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any, Literal

from tests.claude_cli import Block, ScriptedServer, text

__all__ = ["DIALECTS", "Dialect", "FakeChatAPI"]

Dialect = Literal["anthropic", "openai", "gemini"]
"""Which LangChain chat model ``chat_model()`` builds; the server speaks every dialect."""
DIALECTS: tuple[Dialect, ...] = ("anthropic", "openai", "gemini")
MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1-mini", "gemini": "gemini-2.5-flash"}


class FakeChatAPI(ScriptedServer):
    """One provider's chat API, scripted; ``requests`` are the JSON bodies received."""

    def __init__(self, dialect: Dialect) -> None:
        super().__init__(f"fake-{dialect}", "call_")
        self.dialect = dialect
        self._stubborn = 0

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler(self)

    def stubborn(self, times: int) -> None:
        """After the script, call one offered tool ``times`` times, then answer text."""
        self._stubborn = times

    def env(self) -> dict[str, str]:
        """Environment variables pointing the providers' SDKs here, with dummy keys."""
        return {
            "OPENAI_BASE_URL": f"{self.url}/v1",
            "OPENAI_API_KEY": "sk-fake",
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": "sk-ant-fake",
            "GOOGLE_GEMINI_BASE_URL": self.url,
            "GOOGLE_API_KEY": "fake-key",
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
        }

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

    def _answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        route = _route(path)
        with self._lock:
            self.paths.append(path)
            self.requests.append(body)
            if self._turns:
                blocks = self._turns.pop(0)
            elif self._stubborn:
                self._stubborn -= 1
                blocks = [_loop_call(route, body)]
            else:
                blocks = [text("(script exhausted)")]
            blocks = self._numbered(blocks)
            self._ids += 1
            number = self._ids
        return _FORMATS[route](blocks, number, body)


def _route(path: str) -> str:
    if "/messages" in path:
        return "anthropic"
    if "/chat/completions" in path:
        return "openai"
    if "/responses" in path:
        return "responses"
    return "gemini"


def _offered(route: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The tools a request offers, as (name, JSON schema of the arguments)."""
    tools = body.get("tools") or []
    if route == "anthropic":
        return [(t["name"], t.get("input_schema") or {}) for t in tools if "name" in t]
    if route == "openai":
        return [(t["function"]["name"], t["function"].get("parameters") or {}) for t in tools if "function" in t]
    if route == "responses":
        return [(t["name"], t.get("parameters") or {}) for t in tools if t.get("type") == "function"]
    return [
        (d["name"], d.get("parametersJsonSchema") or d.get("parameters") or {})
        for t in tools
        for d in t.get("functionDeclarations") or []
    ]


def _loop_call(route: str, body: dict[str, Any]) -> Block:
    offered = dict(_offered(route, body))
    if not offered:
        return text("(no tool offered)")
    name = next((n for n in ("grep", "Bash") if n in offered), next(iter(offered)))
    schema = offered[name]
    args = {
        key: ("ls" if key == "command" else "load_config")
        for key in schema.get("required") or []
        if str((schema.get("properties") or {}).get(key, {}).get("type", "string")).lower() == "string"
    }
    return {"type": "tool_use", "id": None, "name": name, "input": args}


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


def _responses(blocks: list[Block], number: int, body: dict[str, Any]) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    for n, b in enumerate(blocks):
        if b["type"] == "tool_use":
            arguments = json.dumps(b["input"])
            item = {"type": "function_call", "id": f"fc_{number}_{n}", "call_id": b["id"], "name": b["name"]}
            output.append({**item, "arguments": arguments, "status": "completed"})
        else:
            content = [{"type": "output_text", "text": b["text"], "annotations": []}]
            message = {"type": "message", "id": f"msg_{number}_{n}", "role": "assistant", "status": "completed"}
            output.append({**message, "content": content})
    return {
        "id": f"resp_{number:02d}",
        "object": "response",
        "created_at": 1764489600,
        "status": "completed",
        "model": body.get("model", "gpt-5"),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
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


_FORMATS = {"anthropic": _anthropic, "openai": _openai, "responses": _responses, "gemini": _gemini}


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
