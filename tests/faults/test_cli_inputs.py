"""Odd arguments and files at the commands: a one-line error with the
documented exit code, or the work done; never a traceback."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

import msgspec
import pytest

from bus import Agent, SessionLog, ToolCall, ToolResult, UserMessage
from guard.cli import _quiet_stdout, main
from tests.faults.conftest import CLI


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    with SessionLog(path, session="s") as writer:
        writer.write(UserMessage(agent=Agent("a"), seq=1, text="hi"))
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "a\x00b.jsonl"],
        ["check-config", "a\x00b.toml"],
        ["import", "a\x00b.jsonl", "-o", "out.jsonl"],
    ],
)
def test_a_nul_in_a_path_is_one_line(argv: list[str], cli: CLI) -> None:
    assert "null byte" in cli(*argv).clean_error(2)


@pytest.mark.parametrize("command", ["serve", "hook-settings", "install"])
def test_an_empty_state_dir_is_a_usage_error_not_the_default_directory(command: str, tmp_path: Path, cli: CLI) -> None:
    settings = tmp_path / "settings.json"
    where = ["--file", settings] if command == "install" else []
    assert "--state-dir '': an empty value names nothing" in cli(command, *where, "--state-dir", "").clean_error(2)
    assert not settings.exists(), "nothing installed"


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["audit", ""], "PATH"),
        (["audit", "{log}", ""], "PATH"),
        (["audit", "{log}", "--html", ""], "--html"),
        (["check-config", ""], "FILE"),
        (["replay", ""], "LOG"),
        (["replay", "{log}", "--config", ""], "--config"),
        (["export", "redis://127.0.0.1:9/0", "--session", "s", "-o", ""], "-o"),
        (["export", "redis://127.0.0.1:9/0", "--session", "", "-o", "{log}.out"], "--session"),
        (["watch", "redis://127.0.0.1:9/0", "--group", ""], "--group"),
        (["serve", "--host", ""], "--host"),
        (["serve", "--allow-host", ""], "--allow-host"),
        (["serve", "--allow-origin", ""], "--allow-origin"),
        (["serve", "--redis", ""], "--redis"),
        (["serve", "--redis", "redis://127.0.0.1:9/0", "--redis-prefix", ""], "--redis-prefix"),
    ],
)
def test_an_empty_value_is_a_usage_error_naming_it_never_the_current_directory_or_a_default(
    argv: list[str], named: str, log: Path, cli: CLI
) -> None:
    line = cli(*[word.format(log=log) for word in argv]).clean_error(2)
    assert line == f"repeat-tool-guard: {named} '': an empty value names nothing"


@pytest.mark.parametrize("command", ["replay", "audit"])
def test_a_session_id_beside_a_log_file_is_a_usage_error_not_ignored(command: str, log: Path, cli: CLI) -> None:
    assert "--session picks a session of a Redis URL" in cli(command, log, "--session", "other").clean_error(2)


def test_an_error_quotes_control_characters_escaped_never_raw(tmp_path: Path, cli: CLI) -> None:
    config = tmp_path / "guard.toml"
    config.write_text('[remind]\n"bad\\u001b]0;owned\\u0007" = 1\n')
    line = cli("check-config", config).clean_error(2)
    assert "\x1b" not in line
    assert "\x07" not in line
    assert "bad\\x1b]0;owned\\x07" in line


def test_verbose_shows_the_traceback_of_an_unexpected_error(cli: CLI) -> None:
    with pytest.raises(ValueError, match="null byte"):
        cli("-v", "replay", "a\x00b.jsonl")


def test_a_log_with_a_byte_order_mark_replays(log: Path, cli: CLI) -> None:
    log.write_bytes(b"\xef\xbb\xbf" + log.read_bytes())
    run = cli("replay", log)
    assert run.code == 0
    assert run.err.startswith("1 events, 0 lines skipped")


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("missing-dir/out.jsonl", "No such file or directory"),
        (".", "is a directory, not a regular file"),
        ("s.jsonl", "already exists; choose another -o"),
    ],
)
def test_import_to_a_place_it_cannot_write_is_one_line(target: str, expected: str, log: Path, cli: CLI) -> None:
    assert expected in cli("import", log, "-o", log.parent / target).clean_error(2)


def test_a_damaged_first_line_costs_one_line_at_import(tmp_path: Path, cli: CLI) -> None:
    source = tmp_path / "t.jsonl"
    call = {"type": "function_call", "name": "sh", "arguments": "{}", "call_id": "c1"}
    lines = [
        '{"timestamp": "2026-01-01T00:00:00Z", "type": "session_me',
        json.dumps({"timestamp": "2026-01-01T00:00:01Z", "type": "response_item", "payload": call}),
    ]
    source.write_text("\n".join(lines) + "\n")
    run = cli("import", source, "-o", tmp_path / "out.jsonl")
    assert run.code == 0, run.err
    assert "1 tool calls" in run.out
    assert "invalid-json 1" in run.out


def test_a_huge_session_id_is_shown_cut_short(tmp_path: Path, cli: CLI) -> None:
    payload = {"session_id": "x" * 1_000_000, "hook_event_name": "UserPromptSubmit"}
    line = cli("hook", "--state-dir", tmp_path, stdin=json.dumps(payload).encode()).clean_error(1)
    assert line.startswith("repeat-tool-guard hook: hook input session_id = 'xxxx")
    assert len(line) < 300


def test_a_huge_agent_value_in_a_log_line_is_reported_cut_short(log: Path, cli: CLI) -> None:
    with log.open("a") as file:
        file.write('{"type":"user/message","seq":2,"ts":1,"agent":{"k":"' + "v" * 100_000 + '"},"text":"x"}\n')
    run = cli("replay", log)
    assert run.code == 0
    [skipped] = [line for line in run.err.splitlines() if line.startswith("  skipped line 3 (schema)")]
    assert len(skipped) < 300


@pytest.fixture
def stdout_gone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], None]]:
    """Give the command a stdout whose reader has already left (as ``| head``
    leaves once it has its lines): a real pipe, so every write to it fails
    with EPIPE. Each call makes a fresh one."""
    pipes: list[TextIO] = []

    def gone() -> None:
        read_end, write_end = os.pipe()
        os.close(read_end)
        pipes.append(os.fdopen(write_end, "w", buffering=1))  # each line is a write, as a terminal's
        monkeypatch.setattr(sys, "stdout", pipes[-1])

    yield gone
    monkeypatch.undo()
    for pipe in pipes:
        with contextlib.suppress(OSError):
            pipe.close()


LISTED = [
    "policy remind (built in): off",
    "policy turns (built in): off",
    "policy rescue (built in): off",
    "policy loops (built in): on",
]
"""What ``check-config recommended`` says on stderr: the policies found."""


def test_a_reader_that_leaves_early_ends_the_output_quietly(
    log: Path, tmp_path: Path, stdout_gone: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> None:
    with SessionLog(log, append=True) as writer:
        for n in range(5):
            call = ToolCall(agent=Agent("a"), seq=2 * n + 2, call_id=f"c{n}", step=n + 1, tool="grep", args={})
            writer.write(call)
            writer.write(msgspec.structs.replace(ToolResult.answering(call, "same"), seq=2 * n + 3))
    stdout_gone()
    assert main(["replay", str(log), "--json"]) == 0
    assert capsys.readouterr().err.splitlines() == ["11 events, 0 lines skipped; actions: remind 2"]
    stdout_gone()
    assert main(["check-config", "recommended"]) == 0
    assert capsys.readouterr().err.splitlines() == LISTED  # the summary on stderr, and nothing else
    read_end, write_end = os.pipe()  # block-buffered, as a pipe's: the flush finds the reader gone
    os.close(read_end)
    with os.fdopen(write_end, "w") as pipe:
        sys.stdout = pipe
        assert main(["check-config", "recommended"]) == 0
    assert capsys.readouterr().err.splitlines() == LISTED
    stdout_gone()
    assert main(["check-config", str(tmp_path / "missing.toml")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_quieting_a_stdout_that_is_no_file_is_harmless(capsys: pytest.CaptureFixture[str]) -> None:
    _quiet_stdout()
    print("still captured")
    assert capsys.readouterr().out == "still captured\n"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["replay"], "repeat-tool-guard: cannot read session log '/proc/self/mem': Input/output error"),
        (["import", "-o", "out.jsonl"], "repeat-tool-guard: [Errno 5] Input/output error: '/proc/self/mem'"),
    ],
)
def test_a_file_that_opens_but_cannot_be_read_is_named(
    argv: list[str], expected: str, cli: CLI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if not Path("/proc/self/mem").exists():  # pragma: no cover - Linux has it
        pytest.skip("no /proc/self/mem here")
    monkeypatch.chdir(tmp_path)
    assert cli(argv[0], "/proc/self/mem", *argv[1:]).clean_error(2) == expected
