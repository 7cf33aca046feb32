"""Replay places each result at its own call's ordinal (``call_number``),
whether the call was recorded or is synthesized from the result."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from bus import Event, Replay

pytestmark = pytest.mark.anyio


def _write(path: Path, events: list[dict[str, object]]) -> None:
    header = {"type": "session/start", "v": 1, "session": "s", "ts": 1.0}
    lines = [header, *({"seq": seq, "ts": 1.0 + seq, "agent": "main", **e} for seq, e in enumerate(events, 1))]
    path.write_bytes(b"".join(msgspec.json.encode(line) + b"\n" for line in lines))


def _call(call_id: str, step: int) -> dict[str, object]:
    return {"type": "tool/call", "call_id": call_id, "step": step, "tool": "grep", "args": {"p": call_id}}


def _result(call_id: str, step: int) -> dict[str, object]:
    return {"type": "tool/result", "call_id": call_id, "step": step, "tool": "grep", "args": {"p": call_id}}


async def _replay(path: Path) -> list[tuple[str, int]]:
    """Each re-published event as ``Type:call_id`` with the replay's
    ``call_number`` at that moment."""
    replay = Replay(path)
    seen: list[tuple[str, int]] = []

    def note(event: Event) -> None:
        seen.append((f"{type(event).__name__}:{getattr(event, 'call_id', '')}", replay.call_number))

    replay.bus.record(note)
    await replay.run()
    return seen


async def test_a_result_of_parallel_calls_carries_its_own_calls_number(log_path: Path) -> None:
    _write(log_path, [_call("a", 1), _call("b", 1), _result("a", 1), _result("b", 1), _call("c", 2)])
    assert await _replay(log_path) == [
        ("ToolCall:a", 1),
        ("ToolCall:b", 2),
        ("ToolResult:a", 1),
        ("ToolResult:b", 2),
        ("ToolCall:c", 3),
    ]


async def test_a_result_without_a_recorded_call_gets_a_synthesized_one_numbered_in_order(log_path: Path) -> None:
    _write(
        log_path,
        [
            {"type": "user/message", "text": "go"},
            _result("a", 1),
            _result("b", 2),
            {"type": "user/message", "text": "again"},
        ],
    )
    assert await _replay(log_path) == [
        ("UserMessage:", 0),
        ("ToolCall:a", 1),
        ("ToolResult:a", 1),
        ("ToolCall:b", 2),
        ("ToolResult:b", 2),
        ("UserMessage:", 2),
    ]
