"""The ``repeat-tool-guard`` command line: replay (--json, --check), check-config, exit codes."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import structlog

from guard.cli import main
from tests.guard.conftest import MakeScript

ROOT = Path(__file__).resolve().parents[2]
GREP = {"pattern": "load_config", "path": "src"}


@pytest.fixture(autouse=True)
def _restore_structlog() -> Iterator[None]:
    """``main`` configures structlog for the process, as a command does; undo it."""
    yield
    structlog.reset_defaults()


@pytest.fixture
def session(make_script: MakeScript) -> Path:
    """A recorded session: 5 identical greps (reminders at 3 and 5), then a different call."""
    s = make_script()

    async def record() -> None:
        await s.start("main")
        for _ in range(5):
            await s.call("main", "grep", GREP, "no matches")
        await s.call("main", "read", {"path": "src/cfg.py"})

    anyio.run(record)
    s.close()
    return s.log.path


def test_replay_json_prints_one_object_per_action(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(session), "--json"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert [list(json.loads(line)) for line in lines] == [
        ["seq", "call_number", "agent", "policy", "action", "tool", "count", "text"]
    ] * 2
    assert lines[0] == (
        '{"seq": 7, "call_number": 3, "agent": "main", "policy": "remind", "action": "remind", "tool": "grep", '
        '"count": 3, "text": "You are repeating the exact same tool call with identical arguments. Carefully '
        "analyze the previous result before calling again: if the task is not complete, try a different approach "
        'or different arguments instead of repeating the call."}'
    )
    assert json.loads(lines[1])["text"].startswith("Repeated tool call detected:\n- tool: grep\n")
    assert (json.loads(lines[1])["seq"], json.loads(lines[1])["call_number"]) == (12, 5)
    assert err == "15 events, 0 lines skipped; actions: remind 2\n"


def test_replay_text_names_each_action_and_indents_its_text(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(session)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("seq 7  call 3  main  remind/remind  grep × 3\n    You are repeating the exact same")
    assert "seq 12  call 5  main  remind/remind  grep × 5\n    Repeated tool call detected:\n    - tool: grep\n" in out


def test_replay_and_audit_print_what_a_log_holds_with_its_control_characters_escaped(
    make_script: MakeScript, capsys: pytest.CaptureFixture[str]
) -> None:
    s = make_script()
    tool = "grep\x1b]0;owned\x07\r\x1b[2K"  # retitles the terminal, then erases the line printed before

    async def record() -> None:
        await s.start("main\x1b[31m")
        for _ in range(5):
            await s.call("main\x1b[31m", tool, GREP, "no matches")

    anyio.run(record)
    s.close()
    capsys.readouterr()
    assert main(["-v", "replay", str(s.log.path)]) == 0
    replayed, logged = capsys.readouterr()
    assert main(["audit", str(s.log.path)]) == 0
    audited = capsys.readouterr().out
    assert "guard.remind" in logged
    for out in (replayed, logged, audited):
        assert not any(c in out for c in "\x1b\x07\r"), out
    for out in (replayed, audited):
        assert "grep\\x1b]0;owned\\x07\\x0d\\x1b[2K" in out
    assert "seq 7  call 3  main\\x1b[31m  remind/remind" in replayed
    assert "\n    - tool: grep\\x1b" in replayed  # the reminder's own lines kept


def test_bidirectional_controls_are_printed_escaped_not_obeyed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    transcript = tmp_path / "gpj\u202eexe.jsonl"  # a session id, and a file name, that read backwards
    record = {"type": "user", "sessionId": "gpj\u202eexe", "uuid": "u1", "message": {"content": "hi"}}
    transcript.write_text(json.dumps(record) + "\n")
    assert main(["import", str(transcript), "-o", str(tmp_path / "out\u202e.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "\u202e" not in out
    assert "out\\u202e.jsonl: claude-code session gpj\\u202eexe:" in out


def test_check_passes_on_an_intact_log(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(session), "--check"]) == 0
    assert capsys.readouterr().err.endswith("check: every guard action matches the log (2 context messages)\n")


def test_check_fails_on_a_tampered_log(session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tampered = tmp_path / "tampered.jsonl"
    text = session.read_text(encoding="utf-8")
    assert text.count("consecutive_calls: 5") == 1
    tampered.write_text(text.replace("consecutive_calls: 5", "consecutive_calls: 4"), encoding="utf-8")
    assert main(["replay", str(tampered), "--check", "--json"]) == 1
    err = capsys.readouterr().err
    assert "check: seq 13: the recorded context message differs from the replay's\n" in err
    assert err.endswith("check: 1 guard actions differ (1 changed); the log records 2 context messages\n")
    assert "consecutive_calls: 4" in err.split("regenerated:")[0]
    assert "consecutive_calls: 5" in err.split("regenerated:")[1]


def test_check_counts_a_denied_call_without_a_result_and_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "guard.toml"
    config.write_text('[remind]\nenabled = false\n[rescue]\nask_command = "/nonexistent/ask"\n')
    lines = [{"type": "session/start", "v": 1, "session": "s", "ts": 0.0}]
    for n in (1, 2, 3, 4):
        call = {"agent": "main", "call_id": f"c{min(n, 3)}", "step": n, "tool": "grep" if n < 4 else "ls", "args": GREP}
        lines.append({"type": "tool/call", "seq": 2 * n - 1, "ts": float(n), **call})
        if n != 3:  # the third call's runtime gave up on it while the guard decided, and used its id again
            result = {"content": "no matches", "is_error": False, "denied_by": None}
            lines.append({"type": "tool/result", "seq": 2 * n, "ts": n + 0.5, **call, **result})
    log = tmp_path / "cut.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["replay", str(log), "--config", str(config), "--check"]) == 0
    err = capsys.readouterr().err
    assert "actions: deny 1\n" in err
    assert err.endswith(
        "check: 1 call the replay denies never got a result in the log"
        " (cancelled while the guard decided, or the session was cut off): not compared\n"
        "check: every guard action matches the log (none recorded)\n"
    )


def test_skipped_lines_are_counted_and_shown(session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    damaged = tmp_path / "damaged.jsonl"
    lines = session.read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(3, "not json at all\n")
    lines.insert(5, '{"type":"tool/teleport","seq":99,"ts":0,"agent":"main"}\n')
    damaged.write_text("".join(lines) + '{"type":"tool/ca', encoding="utf-8")
    assert main(["replay", str(damaged)]) == 0
    err = capsys.readouterr().err
    assert err.startswith(
        "15 events, 3 lines skipped (invalid-json 1, torn 1, unknown-type 1); actions: remind 2\n"
        "  skipped line 4 (invalid-json): "
    )
    assert "  skipped line 6 (unknown-type): " in err
    assert "  skipped line 19 (torn): " in err


def test_a_skipped_lines_detail_is_shown_escaped_and_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [
        {"type": "session/start", "v": 1, "session": "s", "ts": 0.0},
        {"type": "tool/\u001b]0;owned\u0007\r", "seq": 1, "ts": 0.0, "agent": "main"},
        {"type": "x" * 200_000, "seq": 2, "ts": 0.0, "agent": "main"},
    ]
    log = tmp_path / "odd.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["replay", str(log)]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err
    assert "\r" not in err
    assert "'tool/\\x1b" in err
    assert max(map(len, err.splitlines())) < 400


def test_a_log_without_actions_says_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "empty.jsonl"
    log.write_text('{"type":"session/start","v":1,"session":"s","ts":0.0}\n')
    assert main(["replay", str(log), "--check"]) == 0
    assert (
        capsys.readouterr().err
        == "0 events, 0 lines skipped; actions: none\ncheck: every guard action matches the log (none recorded)\n"
    )


def test_replay_uses_the_given_config(session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "guard.toml"
    config.write_text("[remind]\nthresholds = [2]\n")
    assert main(["replay", str(session), "--config", str(config), "--json", "--check"]) == 1
    out = capsys.readouterr().out
    assert [json.loads(line)["count"] for line in out.splitlines()] == [2]


def test_verbose_logs_each_action_to_stderr(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-v", "replay", str(session), "--json"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2  # stdout stays JSON only
    assert err.count("guard.remind") == 2
    assert "count=3" in err


def test_log_lines_on_stderr_are_redacted(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(session), "--json"]) == 0
    capsys.readouterr()
    try:
        raise RuntimeError("connect failed for postgres://app:s3cr3tpw@db/app")
    except RuntimeError:
        structlog.get_logger("guard").exception("guard.listener_failed", detail="export DB_PASS=hunter2")
    err = capsys.readouterr().err
    assert "detail='export DB_PASS=[REDACTED]'" in err
    assert "RuntimeError: connect failed for postgres://app:[REDACTED]@db/app" in err
    assert "hunter2" not in err
    assert "s3cr3tpw" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["replay", "{tmp}/missing.jsonl"], "repeat-tool-guard: no session log at '{tmp}/missing.jsonl'"),
        (["replay", "{tmp}"], "repeat-tool-guard: session log '{tmp}' is a directory, not a regular file"),
        (
            ["replay", "{tmp}/plain.txt/x.jsonl"],
            "repeat-tool-guard: cannot read session log '{tmp}/plain.txt/x.jsonl': Not a directory",
        ),
        (["replay", "{tmp}/plain.txt"], "repeat-tool-guard: '{tmp}/plain.txt' is not a session log: line 1 is not"),
        (
            ["replay", "{tmp}/plain.txt", "--config", "{tmp}/nope.toml"],
            "repeat-tool-guard: config file = '{tmp}/nope.toml': no such file",
        ),
        (["check-config", "{tmp}/nope.yaml"], "repeat-tool-guard: config file = '{tmp}/nope.yaml': no such file"),
        (
            ["check-config", "recomended"],
            "repeat-tool-guard: config file = 'recomended': no such file (and no preset: recommended)",
        ),
        (
            ["check-config", "{tmp}/bad.toml"],
            "repeat-tool-guard: remind.thresholds = 1: each threshold must be an integer >= 2",
        ),
    ],
)
def test_file_and_config_errors_exit_2_with_a_clear_message(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "plain.txt").write_text("hello\n")
    (tmp_path / "bad.toml").write_text("[remind]\nthresholds = [1, 3]\n")
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(message.format(tmp=tmp_path))
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [[], ["replay"], ["frobnicate"], ["replay", "x.jsonl", "--bogus"]])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage: repeat-tool-guard" in capsys.readouterr().err


def test_check_config_prints_the_effective_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "guard.yaml"
    path.write_text("remind:\n  thresholds: [4, 2]\n  exclude: []\nturns: {}\n")
    assert main(["check-config", str(path)]) == 0
    effective = json.loads(capsys.readouterr().out)
    assert effective["remind"] == {
        "enabled": True,
        "mode": "enforce",
        "thresholds": [2, 4],
        "include": [],
        "exclude": [],
        "exclude_commands": [],
        "ignored_args": [],
        "interjections": [],
        "arguments_preview_chars": 500,
        "repeat_every": 0,
    }
    assert effective["turns"]["enabled"] is True
    assert effective["rescue"]["enabled"] is False


def test_python_dash_m_guard_runs_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "guard.toml"
    path.write_text("[remind]\nrepeat_every = 2\n")
    monkeypatch.setattr(sys, "argv", ["python -m guard", "check-config", str(path)])
    with pytest.raises(SystemExit) as info:
        runpy.run_module("guard", run_name="__main__", alter_sys=True)
    assert info.value.code == 0
    assert json.loads(capsys.readouterr().out)["remind"]["repeat_every"] == 2


def test_the_bundled_scenario_replays_and_checks_in_a_real_process() -> None:
    scenario = ROOT / "scenarios" / "remind" / "gentle_then_detailed.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "guard", "replay", str(scenario), "--json", "--check"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["count"] for line in done.stdout.splitlines()] == [3, 5, 8]
    assert done.stderr.endswith("actions: remind 3\ncheck: every guard action matches the log (3 context messages)\n")


INCIDENT = ROOT / "scenarios" / "rescue" / "incident_192.jsonl"


def test_check_fails_on_a_tampered_denial(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(INCIDENT.with_suffix(".toml"))
    assert main(["replay", str(INCIDENT), "--config", config, "--check"]) == 0
    assert capsys.readouterr().err.endswith("check: every guard action matches the log (91 denials)\n")
    tampered = tmp_path / "tampered.jsonl"
    text = INCIDENT.read_text(encoding="utf-8")
    tampered.write_text(text.replace("exact call 3 times", "exact call 2 times", 1), encoding="utf-8")
    assert main(["replay", str(tampered), "--config", config, "--check"]) == 1
    err = capsys.readouterr().err
    assert "the recorded denial differs from the replay's\n" in err
    assert err.endswith("check: 1 guard actions differ (1 changed); the log records 91 denials\n")


def test_check_fails_on_a_log_lacking_the_denials_the_replay_makes(
    session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A session recorded with ``remind`` does not pass as one recorded with ``rescue``."""
    config = tmp_path / "rescue.toml"
    config.write_text("[rescue]\nask_command = '/nonexistent/ask'\n")
    assert main(["replay", str(session), "--config", str(config), "--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("the replay makes a denial the log lacks") == 3
    assert err.endswith("check: 3 guard actions differ (3 missing); the log records 2 context messages\n")


def test_a_replay_never_depends_on_the_environment() -> None:
    """``REPEAT_TOOL_GUARD_TURNS_THRESHOLD`` is for live guards: the same
    replay, with the variable set or unset, prints the same."""
    log = ROOT / "scenarios" / "turns" / "ladder.jsonl"
    command = [sys.executable, "-m", "guard", "replay", str(log), "--config", str(log.with_suffix(".toml"))]
    command += ["--json", "--check"]
    env = {k: v for k, v in os.environ.items() if k != "REPEAT_TOOL_GUARD_TURNS_THRESHOLD"}
    runs = [
        subprocess.run(command, env=env | extra, capture_output=True, text=True, timeout=60, check=False)
        for extra in ({}, {"REPEAT_TOOL_GUARD_TURNS_THRESHOLD": "2"}, {"REPEAT_TOOL_GUARD_TURNS_THRESHOLD": "0"})
    ]
    assert [r.returncode for r in runs] == [0, 0, 0], runs[1].stderr
    assert runs[0].stdout
    assert [(r.stdout, r.stderr) for r in runs[1:]] == [(runs[0].stdout, runs[0].stderr)] * 2
