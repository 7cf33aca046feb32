"""What SWE-agent and mini-swe-agent share: OpenAI-style chat messages."""

from __future__ import annotations

from typing import Any

from guard.importers._session import parse_args

__all__ = ["CallIds", "function_calls"]


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


class CallIds:
    """Call ids that stay unique across a chat history.

    A chat history is not a log with duplicate entries: every assistant
    message is a new response. Yet a tool call id only has to be unique
    within one response, and some providers and replayed trajectories reuse
    one (``call_0`` every turn). A reused id is issued as ``<id>@<step>``,
    and a tool message answers the latest call that carried the id.
    """

    def __init__(self) -> None:
        self._latest: dict[str, str] = {}

    def issue(self, raw: str, step: int) -> str:
        unique = raw if raw not in self._latest else f"{raw}@{step}"
        self._latest[raw] = unique
        return unique

    def answer(self, raw: str) -> str:
        return self._latest.get(raw, raw)
