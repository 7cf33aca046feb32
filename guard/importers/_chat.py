"""What SWE-agent and mini-swe-agent share: OpenAI-style chat messages."""

from __future__ import annotations

from typing import Any

from guard.importers._session import parse_args

__all__ = ["function_calls"]


def function_calls(message: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(call id, tool, args)`` of each entry of a message's ``tool_calls``."""
    calls = []
    for index, call in enumerate(message.get("tool_calls") or ()):
        if not isinstance(call, dict):
            continue
        function: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else {}
        call_id = str(call.get("id") or f"call-{index}")
        calls.append((call_id, function.get("name") or call.get("name"), parse_args(function.get("arguments"))))
    return calls
