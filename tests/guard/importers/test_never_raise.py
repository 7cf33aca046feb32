"""Whatever a transcript holds, an import raises nothing but ``TranscriptError``:
a record with a field of an unexpected type is skipped and counted as
``bad-record``, and the records around it are still imported.

Two kinds of property test: a realistic transcript of each format (written
here, and the real ones of ``tests/data/transcripts``) with fields replaced by
values of any JSON type, and records made up from the field names the
importers read.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bus import ToolCall
from guard.importers import FORMATS, TranscriptError, open_sessions
from tests.guard.importers._transcripts import corpus_file

_T = "2026-01-01T00:00:0{}Z"


def _claude(n: int) -> list[dict[str, Any]]:
    base = {"sessionId": "s", "isSidechain": False}
    lines: list[dict[str, Any]] = [
        {**base, "type": "user", "uuid": "u0", "timestamp": _T.format(0), "message": {"role": "user", "content": "go"}}
    ]
    for i in range(n):
        use = {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "ls"}}
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": [{"type": "text", "text": "a"}]}
        lines.append(
            {
                **base,
                "type": "assistant",
                "uuid": f"a{i}",
                "timestamp": _T.format(i),
                "message": {"role": "assistant", "content": [{"type": "text", "text": "x"}, use]},
            }
        )
        lines.append(
            {
                **base,
                "type": "user",
                "uuid": f"r{i}",
                "timestamp": _T.format(i),
                "message": {"role": "user", "content": [result]},
                "toolUseResult": {"stdout": "a"},
            }
        )
    return lines


def _codex(n: int) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [
        {"timestamp": _T.format(0), "type": "session_meta", "payload": {"id": "s", "cwd": "/w"}},
        {"timestamp": _T.format(0), "type": "event_msg", "payload": {"type": "user_message", "message": "go"}},
    ]
    for i in range(n):
        call = {"type": "function_call", "name": "shell", "arguments": '{"command": ["ls"]}', "call_id": f"c{i}"}
        output = {
            "type": "function_call_output",
            "call_id": f"c{i}",
            "output": '{"output": "a", "metadata": {"exit_code": 1}}',
        }
        lines.append(
            {"timestamp": _T.format(i), "type": "response_item", "payload": {"type": "reasoning", "summary": []}}
        )
        lines.append({"timestamp": _T.format(i), "type": "response_item", "payload": call})
        lines.append({"timestamp": _T.format(i), "type": "response_item", "payload": output})
    return lines


def _gemini(n: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"id": "m0", "type": "user", "timestamp": _T.format(0), "content": "go"}]
    for i in range(n):
        call = {
            "id": f"run_shell_command-17356896020{i:02d}-aa",
            "name": "run_shell_command",
            "args": {"command": "ls"},
            "status": "success" if i % 2 else "error",
            "timestamp": _T.format(i),
            "result": [{"functionResponse": {"id": f"x{i}", "response": {"output": "a"}}}],
            "resultDisplay": "a",
        }
        messages.append(
            {"id": f"m{i + 1}", "type": "gemini", "timestamp": _T.format(i), "content": "", "toolCalls": [call]}
        )
    return {"sessionId": "s", "projectHash": "p", "startTime": _T.format(0), "messages": messages}


def _openhands(n: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"id": 0, "source": "user", "action": "message", "args": {"content": "go"}}]
    for i in range(n):
        metadata = {
            "function_name": "execute_bash",
            "tool_call_id": f"call{i}",
            "model_response": {
                "id": f"r{i}",
                "choices": [
                    {
                        "message": {
                            "tool_calls": [
                                {
                                    "id": f"call{i}",
                                    "function": {"name": "execute_bash", "arguments": '{"command": "ls"}'},
                                }
                            ]
                        }
                    }
                ],
            },
        }
        events.append(
            {
                "id": 2 * i + 1,
                "timestamp": _T.format(i),
                "source": "agent",
                "action": "run",
                "args": {"command": "ls", "thought": ""},
                "tool_call_metadata": metadata,
            }
        )
        events.append(
            {
                "id": 2 * i + 2,
                "timestamp": _T.format(i),
                "source": "agent",
                "observation": "run",
                "cause": 2 * i + 1,
                "content": "a",
                "extras": {"metadata": {"exit_code": i % 2}},
            }
        )
    return events


def _swe_agent(n: int) -> dict[str, Any]:
    history: list[dict[str, Any]] = [{"role": "system", "content": "you are"}, {"role": "user", "content": "fix"}]
    for i in range(n):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
        history.append({"role": "assistant", "content": "x", "action": "ls", "tool_calls": [call]})
        history.append({"role": "tool", "content": "a", "tool_call_ids": [f"c{i}"]})
    return {"history": history, "trajectory": [], "info": {}}


def _mini_swe(n: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "you are"}, {"role": "user", "content": "fix"}]
    for i in range(n):
        messages.append({"role": "assistant", "content": f"THOUGHT\n```bash\nls {i}\n```"})
        messages.append({"role": "user", "content": f"<returncode>{i % 2}</returncode>\n<output>a</output>"})
    return {"info": {"exit_status": "Submitted"}, "messages": messages, "trajectory_format": "mini-swe-agent-1"}


def _cline(n: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "<task>\ngo\n</task>"}]}]
    for i in range(n):
        use = {"type": "tool_use", "id": f"t{i}", "name": "read_file", "input": {"path": "a"}}
        history.append({"role": "assistant", "content": [{"type": "text", "text": "x"}, use], "ts": 1767225600000 + i})
        answer = {"type": "text", "text": f"[read_file for 'a'] Result:\nCommand failed with exit code {i % 2}."}
        history.append({"role": "user", "content": [answer, {"type": "text", "text": "<environment_details>"}]})
    return history


def _goose(n: int) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [
        {"working_dir": "/w", "description": "d", "message_count": 2 * n + 1},
        {"role": "user", "created": 1767225600, "content": [{"type": "text", "text": "go"}]},
    ]
    for i in range(n):
        call = {"status": "success", "value": {"name": "developer__shell", "arguments": {"command": "ls"}}}
        result = (
            {"status": "success", "value": [{"type": "text", "text": "a"}]}
            if i % 2
            else {"status": "error", "error": "x"}
        )
        lines.append(
            {
                "role": "assistant",
                "created": 1767225601,
                "content": [{"type": "toolRequest", "id": f"t{i}", "toolCall": call}],
            }
        )
        lines.append(
            {
                "role": "user",
                "created": 1767225602,
                "content": [{"type": "toolResponse", "id": f"t{i}", "toolResult": result}],
            }
        )
    return lines


def _opencode(n: int) -> dict[str, Any]:
    user = {
        "info": {"id": "msg_0", "role": "user", "time": {"created": 1767225600000}},
        "parts": [{"type": "text", "text": "go"}],
    }
    messages: list[dict[str, Any]] = [user]
    for i in range(n):
        state = {
            "status": "completed",
            "input": {"command": "ls"},
            "output": "a",
            "metadata": {"exit": i % 2},
            "time": {"start": 1767225601000, "end": 1767225602000},
        }
        parts = [{"type": "step-start"}, {"type": "tool", "callID": f"c{i}", "tool": "bash", "state": state}]
        messages.append(
            {"info": {"id": f"msg_{i + 1}", "role": "assistant", "time": {"created": 1767225601000}}, "parts": parts}
        )
    return {"info": {"id": "ses_s", "projectID": "p"}, "messages": messages}


def _pi(n: int) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [
        {"type": "session", "id": "s", "timestamp": _T.format(0), "cwd": "/w"},
        {"type": "message", "timestamp": _T.format(0), "message": {"role": "user", "content": "go"}},
    ]
    for i in range(n):
        call = {"type": "toolCall", "id": f"t{i}", "name": "bash", "arguments": {"command": "ls"}}
        result = {
            "role": "toolResult",
            "toolCallId": f"t{i}",
            "toolName": "bash",
            "content": [{"type": "text", "text": "a"}],
        }
        lines.append(
            {"type": "message", "timestamp": _T.format(i), "message": {"role": "assistant", "content": [call]}}
        )
        lines.append({"type": "message", "timestamp": _T.format(i), "message": result | {"isError": i % 2 == 1}})
    return lines


def _session_log(n: int) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [{"type": "session/start", "v": 1, "session": "s", "ts": 0.0}]
    for i in range(n):
        call = {"type": "tool/call", "seq": 2 * i + 1, "ts": 1.0, "agent": "a", "call_id": f"c{i}", "step": i}
        call.update(tool="t", args={"x": 1})
        lines += [call, dict(call, type="tool/result", seq=2 * i + 2, content="a")]
    return lines


TEMPLATES: dict[str, Any] = {
    "claude-code": _claude(3),
    "codex": _codex(3),
    "gemini-cli": _gemini(3),
    "openhands": _openhands(3),
    "swe-agent": _swe_agent(3),
    "mini-swe-agent": _mini_swe(3),
    "session-log": _session_log(3),
    "cline": _cline(3),
    "goose": _goose(3),
    "opencode": _opencode(3),
    "pi": _pi(3),
}
_CORPUS_FILES = {
    "claude-code": "claude-code/claude-code-pomodoro-timer.jsonl",
    "codex": "codex/codex-pomodor-timer.jsonl",
    "gemini-cli": "gemini-cli/gemini-cli-pomodoro-timer.json",
    "openhands": "openhands/basic.json",
    "swe-agent": "swe-agent/function_calling_simple.traj",
    "mini-swe-agent": "mini-swe-agent/django__django-11951.traj.json",
    "opencode": "opencode/session__jolly-eagle__ses_39b5d713cffeRgAoxPIwS3Plus.json",
    "pi": "pi/large-session.jsonl",
}

_WORDS = ["user", "assistant", "tool", "function_call", "tool_use", "tool_result", "message", "run", "c1", "t0"]
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
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_WORDS) | st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


def _places(node: Any, depth: int = 0) -> Iterator[tuple[Any, Any]]:
    """Every (container, key) in ``node``: each place a value can be swapped."""
    if depth > 6:
        return
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield node, key
        yield from _places(value, depth + 1)


@st.composite
def _mutated(draw: st.DrawFn, template: Any) -> Any:
    transcript = copy.deepcopy(template)
    records = (
        transcript
        if isinstance(transcript, list)
        else next(v for v in transcript.values() if isinstance(v, list) and v)
    )
    for _ in range(draw(st.integers(1, 3))):
        record = draw(st.sampled_from(records[1:] or records))
        places = list(_places(record))
        if places:
            container, key = draw(st.sampled_from(places))
            container[key] = draw(_values)
    return transcript


def _write(path: Path, transcript: Any) -> Path:
    if isinstance(transcript, list) and path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in transcript))
    else:
        path.write_text(json.dumps(transcript))
    return path


def _file(tmp_path: Path, name: str) -> Path:
    jsonl = name in ("claude-code", "codex", "session-log", "goose", "pi")
    return tmp_path / ("t.jsonl" if jsonl else "t.json")


def _consume(path: Path, name: str | None) -> list[Any]:
    """Every event of every session; ``TranscriptError`` is the one allowed error."""
    events: list[Any] = []
    try:
        for session in open_sessions(path, name):
            events.extend(session.events())
    except TranscriptError:
        pass
    return events


_settings = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
@_settings
@given(data=st.data())
def test_a_transcript_with_fields_of_any_type_never_raises(name: str, data: st.DataObject, tmp_path: Path) -> None:
    path = _write(_file(tmp_path, name), data.draw(_mutated(TEMPLATES[name])))
    _consume(path, name)
    _consume(path, None)


def _corpus_template(name: str) -> Any:
    path = corpus_file(_CORPUS_FILES[name])
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines()[:30] if line.strip()]
    document = json.loads(path.read_text())
    if isinstance(document, list):
        return document[:30]
    return {k: v[:30] if isinstance(v, list) else v for k, v in document.items()}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_CORPUS_FILES))
@settings(_settings, max_examples=10)
@given(data=st.data())
def test_a_real_transcript_with_fields_of_any_type_never_raises(name: str, data: st.DataObject, tmp_path: Path) -> None:
    template = _corpus_template(name)
    path = _write(_file(tmp_path, name), data.draw(_mutated(template)))
    _consume(path, name)


@_settings
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    for name in (None, *FORMATS):
        _consume(path, name)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_every_template_imports_whole(name: str, tmp_path: Path) -> None:
    calls = [e for e in _consume(_write(_file(tmp_path, name), TEMPLATES[name]), None) if isinstance(e, ToolCall)]
    assert len(calls) == 3, "the templates exercise each importer's calls and results"


@pytest.mark.parametrize("name", sorted(set(TEMPLATES) - {"mini-swe-agent", "session-log"}))
@pytest.mark.parametrize(("value", "tool"), [(["Bash"], '["Bash"]'), ({"n": 1}, '{"n":1}'), (7, "7")])
def test_a_tool_name_that_is_no_string_is_its_json_text(name: str, value: Any, tool: str, tmp_path: Path) -> None:
    """A tool name written as a list, an object or a number is the tool its
    JSON text names, as the session log writes it, not Python's ``repr``.
    (mini-swe-agent's calls are shell text, and a session log's own schema
    is the bus's.)"""
    whole = [e.tool for e in _consume(_write(_file(tmp_path, name), TEMPLATES[name]), None) if isinstance(e, ToolCall)]
    transcript = copy.deepcopy(TEMPLATES[name])
    for container, key in list(_places(transcript)):
        if key in ("name", "tool", "tool_name", "function_name") and container[key] in whole:
            container[key] = value
    path = _write(_file(tmp_path, name), transcript)
    assert [e.tool for e in _consume(path, name) if isinstance(e, ToolCall)] == [tool] * len(whole)
