"""``repeat-tool-guard audit``: loops, waste and each policy's first action."""

from __future__ import annotations

import gc
import io
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from bus import ToolCall
from guard import Config, RemindConfig, RescueConfig, build_policies, load_config, replay_log
from guard.actions import Action
from guard.audit import (
    NO_ASK_COMMAND,
    PARALLEL_BYTES,
    AuditReport,
    Origin,
    Timeline,
    _start_method,
    audit,
    audit_config,
    estimated_tokens,
    find_transcripts,
)
from guard.cli import _progress_bar, main
from guard.fingerprint import FingerprintCache
from guard.importers import open_sessions, write_log
from guard.policy import AnyPolicy, Policy
from guard.report import render_html, render_table
from tests.guard.importers._transcripts import (
    CORPUS,
    ClaudeCodeSession,
    corpus_file,
    looping_claude_code,
    openhands_runs,
    write_lines,
)

GREP_OUTPUT = len(b"src/cfg.py:12: def load_config():")


def test_audit_runs_every_policy_and_never_escalates_for_real() -> None:
    config = audit_config()
    assert (config.remind.enabled, config.turns.enabled, config.rescue.enabled) == (True, True, True)
    assert config.rescue.ask_command == NO_ASK_COMMAND
    assert not Path(NO_ASK_COMMAND).exists()
    assert config.rescue.log_file == ""
    mine = audit_config(Config(rescue=RescueConfig(ask_command="/usr/bin/ask", log_file="/tmp/trips.jsonl")))
    assert (mine.turns.enabled, mine.rescue.enabled) == (False, True)
    assert (mine.rescue.ask_command, mine.rescue.log_file) == (NO_ASK_COMMAND, "")


def test_loop_waste_and_first_actions_of_a_looping_session(tmp_path: Path) -> None:
    path = looping_claude_code(tmp_path / "loop.jsonl")
    report = audit([path], Config())
    assert report.policies == ["remind"]
    (session,) = report.sessions
    assert (session.calls, session.agents, session.longest_run, session.longest_run_tool) == (22, 1, 5, "Grep")
    assert session.format == "claude-code"
    grep, bash = session.loops
    assert (grep.tool, grep.occurrences, grep.longest_run, grep.first_call) == ("Grep", 15, 5, 1)
    assert grep.signature == '{"path":"src","pattern":"load_config"}'
    first = grep.first_actions["remind"]
    assert (first.action, first.mark, first.call_number, first.count) == ("remind", "remind", 3, 3)
    assert (grep.wasted_calls, grep.wasted_bytes) == (12, 12 * GREP_OUTPUT)
    assert (bash.tool, bash.occurrences, bash.first_actions["remind"].call_number, bash.wasted_calls) == (
        "Bash",
        3,
        22,
        0,
    )
    assert session.first_actions["remind"] == first
    assert session.actions == {"remind:remind": 7}
    assert (session.wasted_calls, session.wasted_bytes, session.errors) == (12, 12 * GREP_OUTPUT, 2)
    assert report.totals.sessions_acted_on == {"remind": 1}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_audit_says_what_replay_says_on_the_imported_log(tmp_path: Path, backend: str) -> None:
    path = looping_claude_code(tmp_path / "loop.jsonl")
    (session,) = open_sessions(path)
    write_log(session, tmp_path / "imported.jsonl")
    outcome = anyio.run(replay_log, tmp_path / "imported.jsonl", Config(), backend=backend)
    (audited,) = audit([path], Config()).sessions
    assert sum(audited.actions.values()) == len(outcome.verdicts)
    assert audited.first_actions["remind"] is not None
    assert audited.first_actions["remind"].seq == outcome.verdicts[0].seq
    assert audited.first_actions["remind"].call_number == outcome.verdicts[0].call_number


def test_a_session_the_guard_ran_in_is_answered_from_its_recorded_advice(tmp_path: Path) -> None:
    """The transcript records rescue's denials with the advice it bought:
    the audit answers each escalation from it, as replay of the imported
    log does, and what the import skipped is counted once."""
    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "rescue" / "incident_192.jsonl"
    config = load_config(scenario.with_suffix(".toml"))
    lines = scenario.read_bytes().splitlines(keepends=True)
    path = tmp_path / "ran.jsonl"
    path.write_bytes(b"".join([*lines[:3], b"{not json\n", *lines[3:]]))
    (session,) = open_sessions(path)
    write_log(session, tmp_path / "imported.jsonl")
    outcome = anyio.run(replay_log, tmp_path / "imported.jsonl", audit_config(config))
    timelines: list[Timeline] = []
    (audited,) = audit([path], config, timelines=timelines).sessions
    assert audited.actions == dict(Counter(f"{v.policy}:{v.action}" for v in outcome.verdicts))
    assert audited.actions == {"rescue:deny": 2, "rescue:rescue": 89}
    assert audited.skipped == {"invalid-json": 1}
    (timeline,) = timelines  # drawn once, from the replay of the log alone
    assert (len(timeline.calls), len(timeline.marks)) == (audited.calls, 91)


def test_each_session_says_what_its_own_import_skipped_and_where(tmp_path: Path) -> None:
    broken = {"a": [2], "b": [], "c": [2]}
    lines = [{"instance_id": i, "history": openhands_runs(2, *runs)} for i, runs in broken.items()]
    path = write_lines(tmp_path / "output.jsonl", lines, torn='{"instance_id": "d"')
    report = audit([path], Config(), jobs=1)
    assert [(s.session, s.calls, s.skipped) for s in report.sessions] == [
        ("a", 1, {"bad-record": 1}),
        ("b", 2, {}),
        ("c", 1, {"bad-record": 1, "torn": 1}),  # the torn last line is read before the last session
    ]
    bad = "TypeError: 'int' object is not iterable"
    assert [s.problems for s in report.sessions] == [
        [f"{path}:1#history[3]: {bad}"],
        [],
        [f"{path}:3#history[3]: {bad}"],
    ]
    assert (report.totals.skipped, report.totals.sessions_with_skips) == ({"bad-record": 2, "torn": 1}, 2)


def test_a_session_with_an_unreadable_subagent_is_audited_without_it(tmp_path: Path) -> None:
    looping_claude_code(tmp_path / "loop.jsonl")
    (tmp_path / "loop" / "subagents").mkdir(parents=True)
    (tmp_path / "loop" / "subagents" / "agent-x.jsonl").symlink_to("gone.jsonl")
    report = audit([tmp_path], Config())
    assert report.errors == []
    (session,) = report.sessions
    assert (session.calls, session.skipped) == (22, {"unreadable-subagent": 1})
    assert session.problems == [
        f"subagent not read: no such file: '{tmp_path / 'loop' / 'subagents' / 'agent-x.jsonl'}'"
    ]


def test_a_long_session_is_audited_to_its_last_call(tmp_path: Path) -> None:
    """Thousands of events, the loop at the very end: the audit reads the
    importer's stream ahead in batches, and none of it is lost."""
    s = ClaudeCodeSession("long")
    s.prompt("read every module")
    for n in range(2500):
        s.call("Read", {"file_path": f"src/module_{n}.py"}, "x = 1\n")
    for _ in range(4):
        s.call("Grep", {"pattern": "load_config", "path": "src"}, "src/cfg.py:12: def load_config():")
    (audited,) = audit([s.write(tmp_path / "long.jsonl")], Config()).sessions
    assert audited.calls == 2504
    (loop,) = audited.loops
    assert (loop.tool, loop.occurrences, loop.first_call) == ("Grep", 4, 2501)
    assert audited.actions == {"remind:remind": 1}


class _DenyThird(Policy[dict[bytes, int]]):
    """A denying policy for the test: the third identical call is denied."""

    name = "deny-third"
    plugin = "deny-third"

    def new_state(self) -> dict[bytes, int]:
        return {}

    async def on_call(self, state: dict[bytes, int], call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        digest = fingerprints.get(call.tool, call.args).digest
        state[digest] = state.get(digest, 0) + 1
        if state[digest] < 3:
            return None
        agent = call.agent.id if call.agent else None
        return Action(
            policy=self.name,
            action="deny",
            agent=agent,
            tool=call.tool,
            count=state[digest],
            text="no",
            call_id=call.call_id,
        )


def test_a_denied_call_is_itself_wasted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def policies(config: Config) -> list[AnyPolicy]:
        return [*build_policies(config), _DenyThird()]

    monkeypatch.setattr("guard.guard.build_policies", policies)
    monkeypatch.setattr("guard.audit.build_policies", policies)
    report = audit([looping_claude_code(tmp_path / "loop.jsonl")], Config())
    assert report.policies == ["remind", "deny-third"]
    grep = report.sessions[0].loops[0]
    assert grep.first_actions["deny-third"].mark == "deny"
    assert grep.first_actions["deny-third"].call_number == grep.first_actions["remind"].call_number == 3
    # The denial comes before the reminder on call 3, so call 3 is wasted too.
    assert (grep.wasted_calls, grep.wasted_bytes) == (13, 13 * GREP_OUTPUT)
    read = next(loop for loop in report.sessions[0].loops if loop.tool == "Read")
    assert (read.longest_run, read.first_actions["deny-third"].call_number) == (1, 18)


class _CollectorWatch(Policy[None]):
    """Records, at every call, whether Python's cyclic collector is on."""

    name = "collector-watch"
    plugin = "collector-watch"

    def __init__(self, seen: list[bool]) -> None:
        super().__init__()
        self.seen = seen

    def new_state(self) -> None:
        return None

    async def on_call(self, state: None, call: ToolCall, fingerprints: FingerprintCache) -> Action | None:
        self.seen.append(gc.isenabled())
        return None


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_off_only_while_a_session_is_audited(
    enabled: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    monkeypatch.setattr("guard.guard.build_policies", lambda config: [_CollectorWatch(seen)])
    path = looping_claude_code(tmp_path / "loop.jsonl")
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        audit([path, path], Config(), jobs=1)
        after = gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert len(seen) == 44
    assert not any(seen)
    assert after is enabled


def test_a_copy_is_reported_and_told_as_its_origin_with_what_copying_it_skipped(tmp_path: Path) -> None:
    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "remind" / "gentle_then_detailed.jsonl"
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(scenario.read_bytes())
    seen: list[str] = []
    report = audit(
        [copy, scenario],
        Config(),
        progress=lambda done, total, path: seen.append(path),
        origins={copy: Origin(label="redis://127.0.0.1:6379/0#alpha", skipped={"invalid-json": 2})},
    )
    assert [(s.label, s.path, s.skipped) for s in report.sessions] == [
        ("redis://127.0.0.1:6379/0#alpha", "redis://127.0.0.1:6379/0#alpha", {"invalid-json": 2}),
        (str(scenario), str(scenario), {}),
    ]
    assert seen == ["redis://127.0.0.1:6379/0#alpha", str(scenario), ""]
    assert (report.totals.skipped, report.totals.sessions_with_skips) == ({"invalid-json": 2}, 1)
    assert render_table(report).splitlines()[-1] == "  redis://127.0.0.1:6379/0#alpha: invalid-json 2"
    copy.write_text("not a transcript\n")
    failed = audit([copy], Config(), origins={copy: Origin(label="redis://127.0.0.1:6379/0#beta")})
    assert [error.path for error in [*failed.errors, *failed.not_transcripts]] == ["redis://127.0.0.1:6379/0#beta"]
    copy.write_text('{"no": "transcript"}\n')  # found in a folder, a file of no format this tool knows is left out
    walked = audit([tmp_path], Config(), origins={copy: Origin(label="redis://127.0.0.1:6379/0#gamma")})
    assert [error.path for error in walked.not_transcripts] == ["redis://127.0.0.1:6379/0#gamma"]


def test_the_whole_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int, str]] = []
    report = audit([CORPUS], Config(), progress=lambda done, total, path: seen.append((done, total, path)))
    t = report.totals
    assert (t.files, t.sessions, t.calls, t.unreadable, t.not_transcripts) == (28, 30, 1689, 0, 0)
    assert seen[0][:2] == (0, 28)
    assert seen[-1] == (28, 28, "")
    runs = {str(Path(s.label).relative_to(CORPUS)): s.longest_run for s in report.sessions}
    assert runs.pop("claude-code/openagents-autopilot-issue-ready.jsonl") == 26  # the one real loop of its kind
    assert runs.pop("gemini-cli/stream-json-two-runs.jsonl") == 5  # a loop scripted for the guard to stop
    assert max(runs.values()) == 2
    assert runs["openhands/output.jsonl#ponylang__ponyc-4593"] == 2
    assert runs["swe-agent/pydicom__pydicom-1458.traj"] == 2


def test_unreadable_files_are_reported_and_the_audit_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    walked = tmp_path / "walked"
    looping_claude_code(walked / "good.jsonl")
    write_lines(walked / "notes.json", [{"not": "a transcript"}])
    (walked / "README.md").write_text("ignored: not a transcript suffix")
    (walked / "crash.jsonl").write_text((walked / "good.jsonl").read_text())
    corrupt = tmp_path / "corrupt.traj"
    corrupt.write_text('{"history": [')
    unknown = write_lines(tmp_path / "unknown.jsonl", [{"x": 1}])
    real = open_sessions

    def flaky(path: Any, format: str | None = None) -> Any:
        if Path(path).name == "crash.jsonl":
            raise RuntimeError("importer bug")
        return real(path, format)

    monkeypatch.setattr("guard.audit.open_sessions", flaky)
    report = audit([walked, corrupt, unknown, tmp_path / "absent"], Config())
    assert [s.label.rsplit("/", 1)[-1] for s in report.sessions] == ["good.jsonl"]
    reasons = {Path(e.path).name: e.reason for e in report.errors}
    assert reasons["crash.jsonl"] == "import failed: RuntimeError: importer bug"
    assert "is neither JSON Lines nor a JSON document" in reasons["corrupt.traj"]
    assert "is not a transcript format this tool knows" in reasons["unknown.jsonl"]
    assert "no such file" in reasons["absent"]
    assert (report.totals.unreadable, report.totals.not_transcripts) == (4, 1)
    (left_out,) = report.not_transcripts
    assert left_out.path == str(walked / "notes.json")
    assert left_out.reason.startswith(f"{str(walked / 'notes.json')!r} is not a transcript format this tool knows")


def test_an_empty_file_in_a_folder_is_left_out_and_one_named_is_an_error(tmp_path: Path) -> None:
    """A session file a tool created and never wrote is no transcript:
    walked, it is left out (the audit goes on, exit 0); named, it is an
    error, as any file named that cannot be read."""
    (tmp_path / "empty").mkdir()
    empty = tmp_path / "empty" / "session.jsonl"
    empty.write_text("")
    walked = audit([tmp_path / "empty"], Config())
    assert (walked.errors, [e.reason for e in walked.not_transcripts]) == ([], [f"{str(empty)!r} is empty"])
    named = audit([empty], Config())
    assert [e.reason for e in named.errors] == [f"{str(empty)!r} is empty"]


def test_a_folder_of_files_audit_does_not_read_is_said_to_hold_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Logs saved as ``*.log``: "0 sessions in 0 files" alone would read
    as an empty folder."""
    (tmp_path / "logs").mkdir()
    write_lines(tmp_path / "logs" / "a.log", [{"type": "session/start", "v": 1, "session": "a", "ts": 1.0}])
    assert main(["audit", str(tmp_path / "logs")]) == 0
    err = capsys.readouterr().err
    assert "holds no file audit reads (.jsonl, .json, .traj, goose's sessions.db); passed over 1 other files" in err
    assert "such as a.log: name a file to audit it" in err


def test_walk_leaves_subagent_files_to_their_session(tmp_path: Path) -> None:
    found = [path.name for path, _ in find_transcripts([CORPUS / "claude-code"])]
    assert found == [
        "a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl",
        "claude-code-pomodoro-timer.jsonl",
        "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
        "openagents-autopilot-issue-ready.jsonl",
    ]


def test_timelines_follow_the_sessions(tmp_path: Path) -> None:
    timelines: list[Timeline] = []
    report = audit([looping_claude_code(tmp_path / "loop.jsonl")], Config(), timelines=timelines)
    (timeline,) = timelines
    assert len(timeline.calls) == report.sessions[0].calls
    assert timeline.agents == ["main"]
    assert timeline.signatures[0] == ("main", "Grep", '{"path":"src","pattern":"load_config"}')
    assert [c[1] for c in timeline.calls[:6]] == [0, 0, 0, 0, 0, 1]
    assert timeline.calls[-2][2] == 1  # the failing test run
    assert [(m[0], m[1], m[2]) for m in timeline.marks][:2] == [(2, "remind", "remind"), (4, "remind", "remind")]


def test_cli_audit_prints_a_table_json_and_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = looping_claude_code(tmp_path / "loop.jsonl")
    config = tmp_path / "remind.toml"
    config.write_text("[remind]\nthresholds = [2, 4]\n")
    assert main(["audit", str(path), "--config", str(config)]) == 0
    table = capsys.readouterr().out
    # 13 greps after the reminder; the test run that passed after it brought news
    assert table.startswith("audited 1 sessions in 1 files: 22 tool calls, 2 loops, 13 calls wasted")
    assert "policies: remind (acted in 1)" in table
    assert main(["audit", str(path), "--json", "--html", str(tmp_path / "r.html")]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["totals"]["calls"] == 22
    assert data["policies"] == [p.name for p in build_policies(audit_config())]
    assert set(data["sessions"][0]["first_actions"]) == set(data["policies"])
    assert f"report: {tmp_path / 'r.html'}" in captured.err
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


def test_cli_audit_never_writes_its_report_over_a_transcript_or_through_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = looping_claude_code(tmp_path / "sessions" / "loop.jsonl")
    content = path.read_bytes()
    for report in (path, tmp_path / "sessions" / "." / "loop.jsonl"):
        assert main(["audit", str(path), "--html", str(report)]) == 2
        assert "is one of the transcripts audited; name another file" in capsys.readouterr().err
    assert main(["audit", str(tmp_path / "sessions"), "--html", str(path)]) == 2  # found in the folder
    assert "is one of the transcripts audited" in capsys.readouterr().err
    link = tmp_path / "r.html"
    link.symlink_to(path)
    assert main(["audit", str(tmp_path / "sessions"), "--html", str(link)]) == 2
    assert "is a symbolic link; it is not written through" in capsys.readouterr().err
    assert path.read_bytes() == content
    report = tmp_path / "report.html"
    report.write_text("an earlier report")
    assert main(["audit", str(path), "--html", str(report)]) == 0  # a report is replaced, as reports are
    assert report.read_text().startswith("<!DOCTYPE html>")
    assert main(["audit", str(tmp_path / "absent.jsonl"), str(path), "--html", str(report)]) == 1  # one unreadable
    assert "could not read 1 files" in capsys.readouterr().out


def test_cli_audit_names_the_report_a_write_failed_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = looping_claude_code(tmp_path / "loop.jsonl")
    assert main(["audit", str(path), "--html", "/proc/self/status"]) == 2  # root opens it; the write fails
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("repeat-tool-guard: [Errno ")
    assert error.endswith(": '/proc/self/status'")


def test_cli_audit_names_each_file_it_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file found in a directory that no importer reads is not an error
    (exit 0), but the table and the JSON name it and say why."""
    looping_claude_code(tmp_path / "loop.jsonl")
    write_lines(tmp_path / "history" / "output.jsonl", [{"instance_id": "x", "result": "no history"}])
    skipped = str(tmp_path / "history" / "output.jsonl")
    assert main(["audit", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "1 files found were not transcripts and were left out" in table
    listed = table.split("left out 1 files that are not transcripts:\n")[1]
    assert listed.startswith(f"  {skipped}: {skipped!r} is not a transcript format this tool knows (tried claude-code:")
    assert main(["audit", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (entry,) = data["not_transcripts"]
    assert entry["path"] == skipped
    assert "openhands: neither a list of" in entry["reason"]
    assert data["totals"]["not_transcripts"] == 1


def test_cli_audit_exits_1_when_a_file_could_not_be_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", str(tmp_path / "absent.jsonl")]) == 1
    assert "could not read 1 files:" in capsys.readouterr().out


def test_cli_audit_as_json_also_says_on_stderr_which_file_it_could_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbage = tmp_path / "g.json"
    garbage.write_bytes(b"\x00\x01 not json")
    assert main(["audit", str(garbage), "--json"]) == 1
    out, err = capsys.readouterr()
    (error,) = json.loads(out)["errors"]
    assert err == f"repeat-tool-guard audit: could not read {garbage}: {error['reason']}\n"
    assert "is neither JSON Lines nor a JSON document" in err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert (
        main(["audit", str(looping_claude_code(tmp_path / "loop.jsonl")), "--config", str(_remind_only(tmp_path))]) == 0
    )
    assert "[............................] 0/1 " in terminal.getvalue()
    assert terminal.getvalue().endswith("\r\x1b[K")
    bar = io.StringIO()
    draw = _progress_bar(bar)
    draw(1, 4, "x" * 80)
    assert bar.getvalue() == f"\r[{'#' * 7}{'.' * 21}] 1/4 …{'x' * 49}\x1b[K"
    draw(0, 0, "")
    assert bar.getvalue().endswith("\r\x1b[K")


def _remind_only(tmp_path: Path) -> Path:
    path = tmp_path / "remind.toml"
    path.write_text("[remind]\n")
    return path


def test_remind_config_is_the_library_default() -> None:
    assert Config().remind == RemindConfig()


def test_no_policy_nags_the_corpus_edit_and_rerun_cycles() -> None:
    """Every policy side by side over real transcripts. Their agents rerun
    tests after each edit (Claude Code `Edit`, mini-swe-agent `sed -i` and
    `cat > file`): none of that may be denied. Rescue acts on OpenHands
    twice: it denies viewing the unchanged parser.c a third time, and the
    same failed ``str_replace`` (no ``old_str``) a third and fourth time; a
    failed edit is no progress. ``loops`` denies the third view of parser.c
    and advises on the real failure streaks (failed ``str_replace``s, a
    ``cd`` into a missing build directory, SWE-agent edits rejected for a
    syntax error, a shell tool refusing every command) and on one ``sed -n``
    range read again a few calls later. The one loop that runs on (an agent
    asking an empty queue for work 29 times) is denied by every policy that
    denies."""
    report = audit([CORPUS], audit_config())
    acted = {str(Path(s.label).relative_to(CORPUS)): s.actions for s in report.sessions if s.actions}
    assert acted == {
        "openhands/output.jsonl#ponylang__ponyc-4595": {"rescue:deny": 1, "loops:remind": 1, "loops:deny": 1},
        "openhands/output.jsonl#ponylang__ponyc-4593": {"rescue:deny": 2, "loops:remind": 2},
        "openhands/output.jsonl#ponylang__ponyc-4588": {"loops:remind": 1},
        "mini-swe-agent/django__django-15563.traj.json": {"loops:remind": 1},
        "swe-agent/pydicom__pydicom-1458.traj": {"loops:remind": 1},
        "pi/large-session.jsonl": {"loops:remind": 1},  # a third grep in a row finding nothing
        # Gemini CLI's shell tool refusing every command: advised at the third and the eighth
        "gemini-cli/m-gemini-shell-rejections.json": {"loops:remind": 2},
        # a scripted loop of six greps Gemini CLI ran headless, the guard's own hook stopping it
        "gemini-cli/stream-json-two-runs.jsonl": {
            "remind:remind": 2,
            "turns:remind": 1,
            "rescue:deny": 2,
            "rescue:escalation-failed": 1,
            "loops:deny": 3,
            "loops:halt": 1,
        },
        # a headless agent asking its empty issue queue for work 29 times: every policy acts, and
        # `loops` denies from the third ask on and halts the agent after its third denial in a row
        "claude-code/openagents-autopilot-issue-ready.jsonl": {
            "remind:remind": 3,
            "turns:remind": 1,
            "turns:deny": 20,
            "turns:halt": 1,
            "rescue:deny": 22,
            "rescue:escalation-failed": 3,
            "loops:remind": 1,
            "loops:deny": 25,
            "loops:halt": 1,
        },
    }


def test_each_loop_says_its_estimated_tokens_and_what_each_policy_would_have_saved(tmp_path: Path) -> None:
    """Six identical greps, every policy side by side: ``rescue`` denies the
    3rd (the denied call is itself saved), and so does ``loops``; ``remind``
    reminds after the 3rd (the 4th on are saved), ``turns`` advises after
    the 5th. Tokens are the
    calls' argument and output bytes / 4, rounded up."""
    session = ClaudeCodeSession("six")
    session.prompt("find x")
    for _ in range(6):
        session.call("Grep", {"pattern": "x"}, "none")
    path = session.write(tmp_path / "six.jsonl")
    report = audit([path])
    (loop,) = report.sessions[0].loops
    per_call = len(b'{"pattern":"x"}') + len(b"none")  # 19 bytes
    first = {p: a.call_number for p, a in loop.first_actions.items()}
    assert first == {"rescue": 3, "remind": 3, "turns": 5, "loops": 3}
    assert loop.saved_calls == {"remind": 3, "turns": 1, "rescue": 4, "loops": 4}
    saved = {"remind": -(-3 * per_call // 4), "turns": -(-per_call // 4), "rescue": 19, "loops": 19}
    assert loop.saved_tokens == saved
    assert (loop.wasted_calls, loop.wasted_bytes, loop.wasted_tokens) == (4, 4 * len(b"none"), 19)
    totals = report.totals
    assert (totals.wasted_tokens, totals.saved_calls, totals.saved_tokens) == (19, loop.saved_calls, loop.saved_tokens)
    as_json = json.loads(msgspec.json.encode(report))
    assert as_json["sessions"][0]["loops"][0]["saved_calls"] == {"remind": 3, "turns": 1, "rescue": 4, "loops": 4}
    assert as_json["totals"]["wasted_tokens"] == 19


def test_an_audit_shows_the_halt_and_no_advisory_after_a_denial_as_a_live_run_would(tmp_path: Path) -> None:
    """The transcript's denied calls ran (the guard was not there): what the
    audit shows after a denial is what enforcing would have done, a halt
    request at the third denial and no advisory on a denied call's result."""
    session = ClaudeCodeSession("reads")
    session.prompt("open the report")
    for _ in range(8):
        session.call("Bash", {"command": "cat report.md"}, "# Report\nQ3 revenue: flat")
    report = audit([session.write(tmp_path / "reads.jsonl")], load_config("recommended"))
    assert report.sessions[0].actions == {"loops:deny": 6, "loops:halt": 1}


def test_a_loop_no_policy_acted_on_saves_nothing(tmp_path: Path) -> None:
    session = ClaudeCodeSession("two")
    session.prompt("go")
    for _ in range(2):
        session.call("Read", {"path": "a.py"}, "print(1)")
    (loop,) = audit([session.write(tmp_path / "two.jsonl")]).sessions[0].loops
    assert (loop.occurrences, loop.first_actions, loop.wasted_tokens) == (2, {}, 0)
    assert loop.saved_calls == {"remind": 0, "turns": 0, "rescue": 0, "loops": 0}
    assert loop.saved_tokens == {"remind": 0, "turns": 0, "rescue": 0, "loops": 0}


def test_estimated_tokens_rounds_bytes_over_four_up() -> None:
    assert [estimated_tokens(n) for n in (0, 1, 4, 5, 400)] == [0, 1, 1, 2, 100]


def test_a_call_saved_by_two_policies_is_wasted_once(tmp_path: Path) -> None:
    session = ClaudeCodeSession("five")
    session.prompt("find x")
    for _ in range(5):
        session.call("Grep", {"pattern": "x"}, "none")
    config = Config(remind=RemindConfig(thresholds=(2,)), rescue=RescueConfig())
    (loop,) = audit([session.write(tmp_path / "five.jsonl")], config).sessions[0].loops
    # remind reminds after the 2nd call, rescue denies the 3rd: both save calls 3 to 5
    assert loop.saved_calls == {"remind": 3, "rescue": 3}
    assert loop.wasted_calls == 3


def test_a_call_whose_result_changed_is_not_wasted(tmp_path: Path) -> None:
    """After the reminder on a test run made again and again, only the runs
    that answered as the run before did (the same failure, whatever its
    timing) are wasted; a run whose result changed brought news, so no
    policy would have saved it either."""
    session = ClaudeCodeSession("reruns")
    session.prompt("make the tests pass")
    answers = ["2 failed in 0.51s", "2 failed in 0.48s", "2 failed in 0.50s", "1 failed in 0.49s"]
    answers += ["1 failed in 0.52s", "3 passed in 0.47s"]
    for answer in answers:
        session.call("Bash", {"command": "pytest -q"}, answer, is_error="failed" in answer)
    config = Config(remind=RemindConfig(thresholds=(2,)))
    (loop,) = audit([session.write(tmp_path / "reruns.jsonl")], config).sessions[0].loops
    assert loop.first_actions["remind"].call_number == 2
    # runs 3 and 5 answered as the run before; runs 4 and 6 changed
    assert loop.wasted_calls == loop.saved_calls["remind"] == 2
    assert loop.wasted_bytes == len(b"2 failed in 0.50s") + len(b"1 failed in 0.52s")


def test_a_call_never_answered_after_an_action_is_wasted(tmp_path: Path) -> None:
    session = ClaudeCodeSession("cut")
    session.prompt("find x")
    for _ in range(4):
        session.call("Grep", {"pattern": "x"}, "none")
    session.respond(("Grep", {"pattern": "x"}))  # the session ends before its result
    (loop,) = audit([session.write(tmp_path / "cut.jsonl")], Config()).sessions[0].loops
    assert (loop.occurrences, loop.wasted_calls, loop.wasted_bytes) == (5, 2, len(b"none"))


def test_loop_rate_per_model_and_the_tools_that_wasted_most(tmp_path: Path) -> None:
    looping = looping_claude_code(tmp_path / "loop.jsonl")
    calm = ClaudeCodeSession("calm")
    calm.prompt("read the two files")
    calm.call("Read", {"file_path": "a.py"}, "a")
    calm.call("Read", {"file_path": "b.py"}, "b")
    report = audit([looping, calm.write(tmp_path / "calm.jsonl")], Config())
    assert [s.model for s in report.sessions] == ["m", "m"]
    assert report.sessions[0].tools == {"Grep": 15, "Read": 3, "Edit": 1, "Bash": 3}
    assert [s.looped for s in report.sessions] == [True, False]
    (model,) = report.totals.by_model
    assert (model.name, model.sessions, model.looped, model.share) == ("m", 2, 1, 0.5)
    assert model.wasted_calls == 12
    (tool,) = report.totals.by_tool  # Bash's loop wasted nothing: not listed
    assert (tool.name, tool.sessions, tool.looped, tool.wasted_calls) == ("Grep", 1, 1, 12)
    table = render_table(report)
    assert "loop rate by model (a loop some policy stepped in on; MAST: 15.7% of 1,642 multi-agent traces):" in table
    assert "  m: 1/2 sessions looped (50.0%), 12 calls wasted" in table
    assert "  Grep: 1/1 sessions looped (100.0%), 12 calls wasted" in table
    page = render_html(report, [Timeline(), Timeline()])
    assert "loop rate by model" in page
    assert "top tools by wasted calls" in page


def test_sessions_whose_transcript_names_no_model_have_no_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("guard.audit.TOP_TOOLS", 0)
    report = audit([corpus_file("swe-agent/pydicom__pydicom-1458.traj")], Config())
    assert report.sessions[0].model is None
    assert (report.totals.by_model, report.totals.by_tool) == ([], [])
    assert "loop rate" not in render_table(report)
    assert "loop rate" not in render_html(report, [Timeline()])


@pytest.mark.parametrize(
    ("transcript", "model"),
    [
        ("claude-code/claude-code-pomodoro-timer.jsonl", "claude-sonnet-4-5-20250929"),
        ("codex/codex-pomodor-timer.jsonl", "gpt-5-codex"),
        ("gemini-cli/gemini-cli-pomodoro-timer.json", "gemini-2.5-pro"),
        ("openhands/basic.json", "claude-3-5-sonnet-20241022"),
        ("opencode/session__jolly-eagle__ses_39b5d713cffeRgAoxPIwS3Plus.json", "gpt-5.3-codex"),
        ("pi/large-session.jsonl", "claude-sonnet-4-5"),  # one response of another model in it
        ("mini-swe-agent/django__django-11951.traj.json", "google/gemini-3-pro-preview"),
        ("swe-agent/6e44b9__sweagenttestrepo-1c2844.traj", "gpt-4o"),
    ],
)
def test_a_transcript_that_records_its_model_is_counted_by_it(transcript: str, model: str) -> None:
    session = next(iter(open_sessions(corpus_file(transcript))))
    assert session.model is None  # known once its events are read
    for _ in session.events():
        pass
    assert session.model == model


def _folder(tmp_path: Path) -> Path:
    """Transcripts of every kind an audit meets: looping and calm sessions,
    a file it cannot read and one that is no transcript."""
    folder = tmp_path / "folder"
    looping_claude_code(folder / "a-loop.jsonl")
    for n in range(3):
        s = ClaudeCodeSession(f"calm-{n}")
        s.prompt("look around")
        for k in range(5 + n):
            s.call("Read", {"file_path": f"src/m{k}.py"}, "x = 1\n")
        s.write(folder / f"b-calm-{n}.jsonl")
    (folder / "c-corrupt.traj").write_text('{"history": [')
    write_lines(folder / "d-notes.jsonl", [{"not": "a transcript"}])
    return folder


def test_an_audit_in_worker_processes_reports_what_one_process_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder(tmp_path)
    absent = tmp_path / "absent.jsonl"
    monkeypatch.setattr("guard.audit.PARALLEL_BYTES", 0)
    runs: list[tuple[AuditReport, list[dict[str, Any]], list[tuple[int, int, str]]]] = []
    for jobs in (1, 2):
        timelines: list[Timeline] = []
        seen: list[tuple[int, int, str]] = []
        report = audit(
            [folder, absent],
            timelines=timelines,
            progress=lambda done, total, path: seen.append((done, total, path)),  # noqa: B023
            jobs=jobs,
        )
        runs.append((msgspec.structs.replace(report, seconds=0.0), [vars(t) for t in timelines], seen))
    assert runs[0] == runs[1]
    report, drawn, seen = runs[1]
    assert [Path(s.path).name for s in report.sessions] == ["a-loop.jsonl", *(f"b-calm-{n}.jsonl" for n in range(3))]
    assert [Path(e.path).name for e in report.errors] == ["c-corrupt.traj", "absent.jsonl"]
    assert [Path(e.path).name for e in report.not_transcripts] == ["d-notes.jsonl"]
    assert len(drawn) == 4
    assert [done for done, _, _ in seen] == list(range(8))
    pair = [folder / "a-loop.jsonl", folder / "b-calm-0.jsonl"]  # fewer files than the workers take ahead
    one, two = (msgspec.structs.replace(audit(pair, jobs=jobs), seconds=0.0) for jobs in (1, 2))
    assert one == two
    assert one.totals.sessions == 2


def test_a_worker_that_dies_costs_only_the_file_it_was_auditing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed mid-file (the kernel's out-of-memory killer) breaks
    the whole pool: the files in flight are audited again, the one that
    kills its worker again alone, and the report is whole."""
    folder = _folder(tmp_path)
    looping_claude_code(folder / "b-dies.jsonl")
    real = open_sessions

    def dying(path: Any, format: str | None = None) -> Any:
        if Path(path).name == "b-dies.jsonl":
            os._exit(9)  # in the worker: what SIGKILL leaves the pool to see
        return real(path, format)

    monkeypatch.setattr("guard.audit.PARALLEL_BYTES", 0)
    monkeypatch.setattr("guard.audit._start_method", lambda: "fork")  # the workers inherit the patch
    monkeypatch.setattr("guard.audit.open_sessions", dying)
    report = audit([folder], jobs=2)
    assert [Path(s.path).name for s in report.sessions] == ["a-loop.jsonl", *(f"b-calm-{n}.jsonl" for n in range(3))]
    died = [e for e in report.errors if Path(e.path).name == "b-dies.jsonl"]
    assert [e.reason.startswith("the process auditing it died") for e in died] == [True]
    assert [Path(e.path).name for e in report.errors] == ["b-dies.jsonl", "c-corrupt.traj"]


@pytest.mark.parametrize(("threads", "method"), [(1, "fork"), (2, "forkserver")])
def test_workers_are_forked_only_while_the_caller_runs_one_thread(
    monkeypatch: pytest.MonkeyPatch, threads: int, method: str
) -> None:
    monkeypatch.setattr("threading.active_count", lambda: threads)
    assert _start_method() == method


def test_workers_from_a_fresh_interpreter_report_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With another thread running, the workers start from a fresh
    interpreter (forking copies one thread only), with the same report."""
    folder = _folder(tmp_path)
    pair = [folder / "a-loop.jsonl", folder / "b-calm-0.jsonl"]
    monkeypatch.setattr("guard.audit.PARALLEL_BYTES", 0)
    stop = threading.Event()
    busy = threading.Thread(target=stop.wait)
    busy.start()
    try:
        assert _start_method() == "forkserver"
        threaded = audit(pair, jobs=2)
    finally:
        stop.set()
        busy.join()
    alone = audit(pair, jobs=1)
    assert msgspec.structs.replace(threaded, seconds=0.0) == msgspec.structs.replace(alone, seconds=0.0)


def test_a_small_audit_stays_in_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pool(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("no worker process for a small audit")

    monkeypatch.setattr("concurrent.futures.ProcessPoolExecutor", no_pool)
    report = audit([_folder(tmp_path)], jobs=2)
    assert report.totals.sessions == 4


@pytest.mark.parametrize("jobs", [0, -1, True, 1.5])
def test_audit_jobs_must_be_a_positive_integer(tmp_path: Path, jobs: Any) -> None:
    with pytest.raises(ValueError, match=f"audit jobs must be an integer >= 1, got {jobs!r}"):
        audit([tmp_path], jobs=jobs)


def test_cli_audit_workers_log_as_the_command_does(tmp_path: Path) -> None:
    """In a real process over more than ``PARALLEL_BYTES``: stdout carries
    the report alone, whatever the workers' guards log; with ``-v`` their
    actions reach stderr, as in one process."""
    folder = _folder(tmp_path)
    for n in range(2):
        s = ClaudeCodeSession(f"long-{n}")
        s.prompt("read everything")
        for k in range(1500):
            s.call("Read", {"file_path": f"src/m{k}.py"}, "x = 1\n" * 60)
        s.write(folder / f"e-long-{n}.jsonl")
    assert sum(p.stat().st_size for p in folder.iterdir()) > PARALLEL_BYTES
    command = [sys.executable, "-m", "guard", "audit", str(folder), "--json", "--jobs", "2"]
    quiet = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    loud = subprocess.run([*command[:3], "-v", *command[3:]], capture_output=True, text=True, timeout=120, check=False)
    for done in (quiet, loud):
        assert done.returncode == 1, done.stderr  # the corrupt file
        assert json.loads(done.stdout)["totals"]["sessions"] == 6
    assert "guard." not in quiet.stderr
    assert "guard.remind" in loud.stderr


def test_cli_audit_runs_the_jobs_it_is_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", str(looping_claude_code(tmp_path / "loop.jsonl")), "--json", "--jobs", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["sessions"] == 1


@pytest.mark.parametrize("value", ["0", "x"])
def test_cli_audit_jobs_must_be_a_positive_integer(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["audit", str(tmp_path), "--jobs", value])
    assert exit.value.code == 2
    assert f"must be an integer >= 1, got {value!r}" in capsys.readouterr().err
