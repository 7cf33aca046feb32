"""Whatever a transcript holds, an import raises nothing but ``TranscriptError``:
records of any JSON type in any field are skipped and counted, never a crash.

Each format gets a first record it recognises (so detection passes and its
importer runs), then records drawn from the field names and values the
importers read, with values of every JSON type in every place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard.importers import FORMATS, TranscriptError, open_sessions

_KEYS = [
    "action",
    "actions",
    "agentId",
    "args",
    "arguments",
    "attachment",
    "call_id",
    "calls",
    "cause",
    "choices",
    "command",
    "content",
    "created",
    "error",
    "events",
    "exit_code",
    "extra",
    "extras",
    "function",
    "functionResponse",
    "function_name",
    "history",
    "id",
    "input",
    "instance_id",
    "isMeta",
    "isSidechain",
    "is_error",
    "kind",
    "llm_message",
    "llm_response_id",
    "message",
    "messages",
    "metadata",
    "model",
    "model_response",
    "name",
    "observation",
    "output",
    "payload",
    "prompt",
    "record_type",
    "response",
    "result",
    "resultDisplay",
    "returncode",
    "role",
    "sessionId",
    "source",
    "status",
    "success",
    "text",
    "timestamp",
    "toolCalls",
    "toolUseID",
    "tool_call",
    "tool_call_id",
    "tool_call_ids",
    "tool_call_metadata",
    "tool_calls",
    "tool_name",
    "tool_use_id",
    "type",
    "uuid",
    "projectHash",
    "toolCall",
    "toolResult",
    "toolCallId",
    "isError",
    "parts",
    "info",
    "state",
    "callID",
    "tool",
    "part",
    "time",
    "exit",
    "start",
    "ts",
    "conversation",
    "parentId",
    "synthetic",
    "value",
]
_WORDS = [
    "user",
    "assistant",
    "agent",
    "tool",
    "system",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "local_shell_call",
    "response_item",
    "event_msg",
    "session_meta",
    "user_message",
    "message",
    "run",
    "read",
    "edit",
    "finish",
    "think",
    "tool_use",
    "tool_result",
    "text",
    "ActionEvent",
    "ObservationEvent",
    "MessageEvent",
    "run_ipython",
    "main",
    "c1",
    "c2",
    "2026-01-01T00:00:00Z",
    "toolRequest",
    "toolResponse",
    "toolCall",
    "toolResult",
    "session",
    "step-start",
    "step_start",
    "completed",
    "error",
    "success",
    "[read_file for 'a'] Result:",
    "<read_file><path>a</path></read_file>",
]

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(_WORDS)
    | st.text(max_size=6)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4),
    max_leaves=10,
)
_records = st.dictionaries(st.sampled_from(_KEYS), _values, max_size=6)

_LINE_HEADS: dict[str, dict[str, Any]] = {
    "claude-code": {"type": "user", "sessionId": "s", "uuid": "u0", "message": {"role": "user", "content": "hi"}},
    "codex": {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "s"}},
    "gemini-cli": {"sessionId": "s", "projectHash": "p"},
    "openhands": {"kind": "MessageEvent", "source": "user", "llm_message": {"role": "user", "content": "hi"}},
    "session-log": {"type": "session/start", "v": 1, "session": "s", "ts": 0.0},
    "pi": {"type": "session", "id": "s", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/w"},
    "goose": {"working_dir": "/w", "message_count": 1},
    "opencode": {"type": "tool_use", "timestamp": 1, "sessionID": "s", "part": {"type": "tool", "callID": "c1"}},
}


def _document(name: str, records: list[dict[str, Any]]) -> Any:
    if name == "gemini-cli":
        return {"sessionId": "s", "messages": records}
    if name == "openhands":
        return [{"source": "user", "action": "message", "args": {"content": "hi"}}, *records]
    if name == "swe-agent":
        return {"history": [{"role": "system", "content": "x"}, *records]}
    if name == "mini-swe-agent":
        return {"trajectory_format": "mini-swe-agent-1", "info": {}, "messages": records}
    if name == "cline":
        return [{"role": "user", "content": "<task>\nhi\n</task>"}, *records]
    if name == "goose":
        return {"id": "s", "conversation": [{"role": "user", "created": 1, "content": []}, *records]}
    if name == "opencode":
        return {"info": {"id": "s"}, "messages": [{"info": {"role": "user"}, "parts": []}, *records]}
    return records


def _consume(path: Path, name: str | None) -> None:
    try:
        for session in open_sessions(path, name):
            for _ in session.events():
                pass
    except TranscriptError:
        pass


_settings = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("name", sorted(_LINE_HEADS))
@_settings
@given(records=st.lists(_records, max_size=8))
def test_json_lines_of_any_types_never_raise(name: str, records: list[dict[str, Any]], tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = [_LINE_HEADS[name], *records]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    _consume(path, name)
    _consume(path, None)


@pytest.mark.parametrize(
    "name", ["cline", "gemini-cli", "goose", "mini-swe-agent", "opencode", "openhands", "swe-agent"]
)
@_settings
@given(records=st.lists(_records | _values, max_size=8))
def test_documents_of_any_types_never_raise(name: str, records: list[Any], tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_document(name, records)))
    _consume(path, name)
    _consume(path, None)


@_settings
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    for name in (None, *FORMATS):
        _consume(path, name)
