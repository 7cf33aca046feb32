"""Codex's ``mcp_tool`` hooks over MCP (streamable HTTP, JSON answers): a
hook that calls a tool on a resident MCP server instead of starting a
process. ``POST /mcp`` speaks just enough of MCP for that: ``initialize``,
``tools/list`` (one tool, ``codex_hook``) and ``tools/call``, whose
arguments are the hook payload Codex fills in from ``${field}``
placeholders, and whose text content is the hook's answer (the JSON a
command hook would print).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

from guard._text import shown
from guard.adapters.claude_hooks import check_env_name

__all__ = ["CODEX_HOOK_TOOL", "MCP_INPUTS", "MCP_SERVER", "answer_rpc", "mcp_hook_settings", "mcp_server_toml"]

CODEX_HOOK_TOOL = "codex_hook"
"""The tool Codex's ``mcp_tool`` hooks call."""

PROTOCOL_VERSION = "2025-06-18"

_BASE = {"session_id": "${session_id}", "hook_event_name": "${hook_event_name}"}
# ``cwd``: the directory the model chose for a shell command (``workdir``), which the guard adds to the call
_TOOL = {
    **_BASE,
    "tool_name": "${tool_name}",
    "tool_input": "${tool_input}",
    "tool_use_id": "${tool_use_id}",
    "cwd": "${cwd}",
}

MCP_INPUTS: Mapping[str, Mapping[str, str]] = {
    "UserPromptSubmit": {**_BASE, "prompt": "${prompt}"},
    "PreToolUse": _TOOL,
    "PostToolUse": {**_TOOL, "tool_response": "${tool_response}"},
    "Stop": _BASE,
    "PostCompact": _BASE,
    "SessionEnd": _BASE,
}
"""Each event's ``input`` template: the payload fields that event carries.
Codex fails a hook whose placeholder names a field its payload lacks, so a
subagent's ``agent_id`` (absent from the main agent's payloads) is not
passed: over MCP a subagent's calls count as its session's main agent's."""

_TOOL_SPEC = {
    "name": CODEX_HOOK_TOOL,
    "description": "Answer one Codex hook event for repeat-tool-guard: its payload in, the hook's JSON answer out.",
    "inputSchema": {
        "type": "object",
        "properties": {"session_id": {"type": "string"}, "hook_event_name": {"type": "string"}},
        "required": ["session_id", "hook_event_name"],
        "additionalProperties": True,
    },
}


async def answer_rpc(
    message: Any, handle: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
) -> dict[str, Any] | None:
    """The JSON-RPC answer to one MCP ``message`` (None for a notification);
    ``handle`` answers a hook payload. A payload the guard cannot take is a
    tool error (``isError``), which Codex reports as a failed hook: the call
    goes ahead."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return _error(None, -32600, "not a JSON-RPC 2.0 request")
    if "id" not in message:
        return None
    request_id, method = message["id"], message["method"]
    given = message.get("params")
    params: dict[str, Any] = given if isinstance(given, dict) else {}
    if method == "initialize":
        version = params.get("protocolVersion") if isinstance(params.get("protocolVersion"), str) else PROTOCOL_VERSION
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "repeat-tool-guard", "version": "1"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": [_TOOL_SPEC]}
    elif method == "tools/call":
        if params.get("name") != CODEX_HOOK_TOOL:
            named = shown(params.get("name"))
            return _error(request_id, -32602, f"unknown tool {named}; the tool is {CODEX_HOOK_TOOL!r}")
        arguments = params.get("arguments")
        try:
            answer = await handle(arguments if isinstance(arguments, dict) else {})
        except ValueError as exc:
            return _result(request_id, {"content": [{"type": "text", "text": str(exc)}], "isError": True})
        result = {"content": [{"type": "text", "text": msgspec.json.encode(answer).decode()}], "isError": False}
    else:
        return _error(request_id, -32601, f"method {shown(method)} is not served here")
    return _result(request_id, result)


def _result(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


MCP_SERVER = "repeat_tool_guard"
"""The MCP server's name in Codex's ``config.toml`` (``[mcp_servers.<name>]``)."""


def mcp_hook_settings() -> dict[str, Any]:
    """``hooks.json``'s body for Codex ``mcp_tool`` hooks calling ``CODEX_HOOK_TOOL``
    on the MCP server named ``MCP_SERVER`` (``mcp_server_toml`` declares it)."""
    return {
        "hooks": {
            event: [
                {
                    "hooks": [
                        {"type": "mcp_tool", "server": MCP_SERVER, "tool": CODEX_HOOK_TOOL, "input": dict(template)}
                    ]
                }
            ]
            for event, template in MCP_INPUTS.items()
        }
    }


def mcp_server_toml(url: str, token_env: str | None = None) -> str:
    """The ``config.toml`` table declaring serve's ``/mcp`` at ``url`` as
    ``MCP_SERVER``, sending the bearer token in ``$<token_env>`` if named
    (``ValueError`` when that is no variable's name)."""
    token = f'bearer_token_env_var = "{check_env_name(token_env)}"\n' if token_env else ""
    return f'[mcp_servers.{MCP_SERVER}]\nurl = "{url}"\n{token}'
