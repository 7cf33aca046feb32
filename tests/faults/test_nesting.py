"""Nesting deeper than ``MAX_NESTING``: a skipped, counted line in a session
log or a JSON Lines transcript, a one-line error (exit 2) for a config or a
whole-document transcript, exit 1 for the hook."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bus import MAX_NESTING, Agent, LogReader, SessionLog, ToolCall, UserMessage
from guard.importers import open_sessions
from tests.faults.conftest import CLI
from tests.guard.importers.test_never_raise import TEMPLATES

DEPTHS = [MAX_NESTING + 1, 1_000, 100_000]


def _deep(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


def _log(path: Path, middle: bytes) -> Path:
    with SessionLog(path, session="s") as log:
        log.write(UserMessage(agent=Agent("a"), seq=1, text="before"))
    with path.open("ab") as file:
        file.write(middle + b"\n")
    with SessionLog(path, session="s", append=True) as log:
        log.write(UserMessage(agent=Agent("a"), seq=2, text="after"))
    return path


@pytest.mark.parametrize("depth", DEPTHS)
def test_replay_skips_and_counts_a_deep_log_line(depth: int, tmp_path: Path, cli: CLI) -> None:
    args = '{"x":' * (depth - 1) + "1" + "}" * (depth - 1)
    line = f'{{"type":"tool/call","seq":2,"ts":1.0,"agent":"a","call_id":"c","step":1,"tool":"t","args":{args}}}'
    log = _log(tmp_path / "s.jsonl", line.encode())
    run = cli("replay", log)
    assert run.code == 0
    assert "2 events, 1 lines skipped (too-deep 1)" in run.err
    reader = LogReader(log)
    assert [e.text for e in reader if isinstance(e, UserMessage)] == ["before", "after"]
    assert reader.report.skipped_by_reason == {"too-deep": 1}


def test_a_line_at_the_limit_is_read(tmp_path: Path) -> None:
    args = _deep(MAX_NESTING - 1)
    line = f'{{"type":"tool/call","seq":2,"ts":1.0,"agent":"a","call_id":"c","step":1,"tool":"t","args":{args}}}'
    reader = LogReader(_log(tmp_path / "s.jsonl", line.encode()))
    assert [type(e).__name__ for e in reader] == ["UserMessage", "ToolCall", "UserMessage"]


def test_brackets_inside_strings_are_not_nesting(tmp_path: Path) -> None:
    with SessionLog(tmp_path / "s.jsonl") as log:
        log.write(ToolCall(agent=Agent("a"), seq=1, call_id="c", step=1, tool="t", args={"s": "[{" * 5000}))
    assert [e.args for e in LogReader(tmp_path / "s.jsonl") if isinstance(e, ToolCall)] == [{"s": "[{" * 5000}]


@pytest.mark.parametrize("name", ["claude-code", "codex"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_import_skips_and_counts_a_deep_transcript_line(name: str, depth: int, tmp_path: Path, cli: CLI) -> None:
    source = tmp_path / "t.jsonl"
    lines = [json.dumps(line) for line in TEMPLATES[name]]
    lines.insert(2, _deep(depth, '{"a":', "}").replace("{}", "1"))
    source.write_text("\n".join(lines) + "\n")
    run = cli("import", source, "--from", name, "-o", tmp_path / "out.jsonl")
    assert run.code == 0, run.err
    assert "too-deep 1" in run.out
    [session] = open_sessions(source, name)
    assert len([e for e in session.events() if isinstance(e, ToolCall)]) == 3
    assert session.report.skipped == {"too-deep": 1}


@pytest.mark.parametrize("name", ["gemini-cli", "mini-swe-agent", "openhands", "swe-agent"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_a_deep_document_is_a_one_line_error(name: str, depth: int, tmp_path: Path, cli: CLI) -> None:
    source = tmp_path / "t.json"
    body = json.dumps(TEMPLATES[name]).replace('"fix"', "PLACEHOLDER", 1).replace('"go"', "PLACEHOLDER", 1)
    assert "PLACEHOLDER" in body
    source.write_text(body.replace("PLACEHOLDER", _deep(depth)))
    line = cli("import", source, "-o", tmp_path / "out.jsonl").clean_error(2)
    assert f"deeper than {MAX_NESTING} levels" in line


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 1_000, 30_000])  # a config is at most 64 KiB
@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
def test_a_deep_config_is_a_one_line_error(depth: int, suffix: str, tmp_path: Path, cli: CLI) -> None:
    config = tmp_path / f"guard{suffix}"
    if suffix == ".toml":
        config.write_text(f"[remind]\nthresholds = {_deep(depth)}\n")
    else:
        config.write_text(f"remind:\n  thresholds: {_deep(depth)}\n")
    line = cli("check-config", config).clean_error(2)
    assert f"deeper than {MAX_NESTING} levels" in line


def test_a_hook_payload_past_the_limit_is_recorded_cut_and_reads_back(tmp_path: Path, cli: CLI) -> None:
    run = cli("hook", "--state-dir", tmp_path, stdin=_hook_payload(MAX_NESTING + 1))
    assert run.code == 0, run.err
    reader = LogReader(tmp_path / "s.jsonl")
    assert [type(e).__name__ for e in reader] == ["AgentStatus", "ToolCall"]
    assert reader.report.skipped == 0


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_a_hook_payload_too_deep_to_parse_exits_1_with_one_line(depth: int, tmp_path: Path, cli: CLI) -> None:
    assert "recursion" in cli("hook", "--state-dir", tmp_path, stdin=_hook_payload(depth)).clean_error(1)


def _hook_payload(depth: int) -> bytes:
    head = '{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"t","tool_use_id":"c","tool_input":'
    return (head + _deep(depth) + "}").encode()
