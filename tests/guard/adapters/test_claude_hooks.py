"""The command hook between invocations: the snapshot it restores from, the
replay it falls back to (and says why), one header per log, one trip-log line
per trip, exit codes Claude Code reads right, and an ask that dies with the
hook whatever signal kills it."""

from __future__ import annotations

import io
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from bus import AgentStatus, ContextMessage, ToolCall, ToolResult, UserMessage, read_log
from guard import GENTLE_REMINDER, Config, RemindConfig, RescueConfig
from guard.adapters.claude_hooks import ClaudeHooks, HookInputError, answer_hook, parse_payload, run_to_completion
from guard.cli import main
from guard.config import RECOMMENDED, apply_environment, load_config
from guard.sessions.link import ANSWERS_KEPT, GuardLink
from guard.sessions.snapshot import _HEADER, SNAPSHOT_BUDGET, SNAPSHOT_VERSION, _opened, _seal, snapshot_path
from guard.verdicts import replay_log
from tests.conftest import AskScript
from tests.processes import running

SESSION = "hook-session"
REPO = Path(__file__).resolve().parents[3]


def payload(event: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": SESSION, "hook_event_name": event, "cwd": "/w", "transcript_path": "/t", **fields}


def grep(n: int) -> Iterator[dict[str, Any]]:
    """One Grep call (the same arguments every time) as its two hook events."""
    tool = {"tool_name": "Grep", "tool_input": {"pattern": "load_config"}, "tool_use_id": f"toolu_{n:02d}"}
    yield payload("PreToolUse", **tool)
    yield payload("PostToolUse", tool_response="src/cfg.py:12", **tool)


class Hook:
    """``repeat-tool-guard hook`` in process, as its own process runs it
    (no event loop), recording what it said about replaying."""

    def __init__(self, state: Path, config: Config | None = None) -> None:
        self.state = state
        self.config = config
        self.replays: list[str] = []

    def __call__(self, hook_payload: dict[str, Any]) -> dict[str, Any]:
        return answer_hook(hook_payload, self.state, self.config, log_actions=False, on_replay=self.replays.append)

    @property
    def log(self) -> Path:
        return self.state / f"{SESSION}.jsonl"

    @property
    def snapshot(self) -> Path:
        return snapshot_path(self.log, apply_environment(self.config or Config()))


@pytest.fixture
def hook(tmp_path: Path) -> Hook:
    return Hook(tmp_path / "state")


def context(answer: dict[str, Any]) -> str | None:
    text: str | None = answer.get("hookSpecificOutput", {}).get("additionalContext")
    return text


def test_each_invocation_restores_from_the_snapshot_and_the_log_keeps_one_header(hook: Hook) -> None:
    answers = [hook(p) for n in range(3) for p in grep(n)]
    assert [context(a) for a in answers] == [None] * 5 + [GENTLE_REMINDER]
    assert hook.replays == [], "a snapshot was there every time after the first"
    assert hook.snapshot.stat().st_mode & 0o777 == 0o600
    lines = hook.log.read_bytes().splitlines()
    assert sum(b'"session/start"' in line for line in lines) == 1
    assert [e.seq for e in read_log(hook.log)] == list(range(1, len(lines)))


def test_the_same_call_making_one_more_each_time_is_told_across_hook_processes(tmp_path: Path) -> None:
    """Each hook event runs in a process of its own: what a call's tool name
    says is read again where its result is judged."""
    hook = Hook(tmp_path / "state", load_config("recommended"))
    answers = []
    for n in range(1, 5):
        tool = {
            "tool_name": "mcp__github__create_issue",
            "tool_input": {"owner": "acme", "repo": "app", "title": "Login fails"},
            "tool_use_id": f"toolu_{n:02d}",
        }
        answers.append(hook(payload("PreToolUse", **tool)))
        answers.append(hook(payload("PostToolUse", tool_response=f"Created issue #10{n}", **tool)))
    told = [n for n, answer in enumerate(answers) if context(answer)]
    assert told == [5], "the third result: one advisory"
    assert "each time it made one more" in (context(answers[5]) or "")


def test_a_pre_hook_sent_again_for_a_running_call_is_allowed_and_counted_once(hook: Hook) -> None:
    pre, post = grep(0)
    assert hook(pre) == hook(pre) == {}
    hook(post)
    for p in [*grep(1), *grep(2)]:
        hook(p)
    calls = [e.call_id for e in read_log(hook.log) if isinstance(e, ToolCall)]
    assert calls == ["toolu_00", "toolu_01", "toolu_02"]


def test_fields_of_the_wrong_type_are_read_as_empty_never_as_python_text(hook: Hook) -> None:
    hook(payload("UserPromptSubmit", prompt="find the loader"))
    hook(payload("UserPromptSubmit", prompt=None))
    tool = {"tool_name": None, "tool_input": {"q": 1}, "tool_use_id": 7, "agent_id": {"x": 1}}
    hook(payload("PreToolUse", **tool))
    hook(payload("PostToolUseFailure", error={"code": 2}, **tool))
    events = list(read_log(hook.log))
    texts = [e.text for e in events if isinstance(e, UserMessage)]
    assert texts == ["find the loader", ""]
    (call,) = [e for e in events if isinstance(e, ToolCall)]
    assert (call.tool, call.call_id, call.agent.id if call.agent else None) == ("", "7", SESSION)
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert (result.content, result.is_error) == ('{"code":2}', True)
    assert "None" not in hook.log.read_text()


def test_what_an_ide_puts_in_a_prompt_is_not_the_users_words(hook: Hook) -> None:
    selection = "<ide_selection>The user selected lines 3-4:\nretry 5 times, poll until it is up</ide_selection>"
    opened = "<ide_opened_file>app.py</ide_opened_file>"
    hook(payload("UserPromptSubmit", prompt=f"{opened}{selection}\nwhy does this fail?"))
    hook(payload("UserPromptSubmit", prompt="<ide_opened_file>The user opened app.py</ide_opened_file>"))
    texts = [e.text for e in read_log(hook.log) if isinstance(e, UserMessage)]
    assert texts == ["why does this fail?"]  # a prompt of nothing but an IDE's blocks is no user turn


def test_a_slash_command_is_the_users_message_as_typed(hook: Hook) -> None:
    """Claude Code (2.1.332, headless and interactive) sends a custom
    command's or a skill's ``UserPromptSubmit`` with the prompt as typed;
    its ``<command-…>`` tags and its expansion are only in the transcript."""
    hook(payload("UserPromptSubmit", prompt="/deploy-check staging", prompt_id="p-1"))
    hook(payload("UserPromptSubmit", prompt="/release-notes v2.0", prompt_id="p-2"))
    texts = [e.text for e in read_log(hook.log) if isinstance(e, UserMessage)]
    assert texts == ["/deploy-check staging", "/release-notes v2.0"]


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [
        (lambda h: h.snapshot.unlink(), "there is no snapshot"),
        (lambda h: h.snapshot.write_bytes(b"not a pickle"), "the snapshot is not in this guard's format"),
        (
            lambda h: _write_sealed(h.snapshot, lambda buffer: buffer.write(b"not a pickle")),
            "the snapshot does not load (UnpicklingError",
        ),
        (
            lambda h: _flip_a_byte_of_the_record(h.snapshot),
            "the snapshot is damaged (its digest does not match its record)",
        ),
        (lambda h: h.snapshot.chmod(0o666), "the snapshot is not a file of yours that only you can write"),
        (
            lambda h: _resave(h, version=SNAPSHOT_VERSION + 1),
            f"the snapshot has format {SNAPSHOT_VERSION + 1}; this guard",
        ),
        (lambda h: _resave(h, states=[None, None]), "the snapshot's policy states do not match the config's policies"),
        (lambda h: _append(h.log, b"\n"), "the session log changed since the snapshot was written"),
        (lambda h: _replace_with_link(h.snapshot), "the snapshot cannot be opened (Too many levels of symbolic"),
        (lambda h: _resave(h, states=[_Place(7)]), "the snapshot does not load (UnpicklingError: no policy at place 7"),
        (lambda h: _resave(h, drop=1), "the snapshot does not hold what this guard saves (ValueError"),
        (lambda h: _resave(h, answers=[(1, 2, 3)]), "the snapshot does not hold what this guard saves (ValueError"),
        (
            lambda h: _write_sealed(h.snapshot, lambda buffer: buffer.write(pickle.dumps([SNAPSHOT_VERSION]))),
            "the snapshot is not a record",
        ),
    ],
)
def test_an_unusable_snapshot_falls_back_to_replaying_the_log_and_says_why(
    hook: Hook, spoil: Callable[[Hook], object], reason: str
) -> None:
    answers = [hook(p) for n in range(2) for p in grep(n)]
    spoil(hook)
    answers += [hook(p) for p in grep(2)]
    assert [context(a) for a in answers] == [None] * 5 + [GENTLE_REMINDER], "replay rebuilt the same state"
    (said,) = hook.replays
    assert said.startswith(reason)
    assert said.endswith(f"; replaying {str(hook.log)!r}")
    assert [context(hook(p)) for p in grep(3)] == [None, None], "the 4th is no threshold; a fresh snapshot is used"
    assert len(hook.replays) == 1


def test_a_long_session_whose_snapshot_is_gone_is_rebuilt_from_its_log(hook: Hook) -> None:
    """More than 256 events (where a replay lets other tasks run) replayed
    with no event loop, as after an upgrade names the snapshot anew: the
    hook answers, and the session goes on counting."""
    for n in range(130):
        tool = {"tool_name": "Read", "tool_input": {"file_path": f"src/m{n}.py"}, "tool_use_id": f"toolu_r{n}"}
        hook(payload("PreToolUse", **tool))
        hook(payload("PostToolUse", tool_response=f"module {n}", **tool))
    answers = [hook(p) for n in range(2) for p in grep(n)]
    hook.snapshot.unlink()
    answers += [hook(p) for p in grep(2)]
    assert [context(a) for a in answers] == [None] * 5 + [GENTLE_REMINDER]
    assert hook.replays == [f"there is no snapshot; replaying {str(hook.log)!r}"]


def test_a_snapshot_that_cannot_be_saved_leaves_the_answer_standing_and_the_next_call_replays(hook: Hook) -> None:
    hook.state.mkdir()
    hook.snapshot.mkdir()  # what stands where the snapshot goes cannot be replaced
    answers = [hook(p) for n in range(3) for p in grep(n)]
    assert [context(a) for a in answers] == [None] * 5 + [GENTLE_REMINDER], "every call answered, as with a snapshot"
    assert all("could not be saved (Is a directory); the next call replays" in said for said in hook.replays[1::2])
    assert not list(hook.state.glob("*.tmp")), "no half-written snapshot is left"


def test_calls_the_user_refused_do_not_ride_along_in_every_snapshot(hook: Hook) -> None:
    """A ``PreToolUse`` whose ``PostToolUse`` never comes (the user said no)
    leaves its call open; once the snapshot passes its budget, the refused
    calls' arguments are shed, largest first, so each hook reads and writes
    a bounded file. A result that comes for one after all is still
    recorded: nothing the runtime reports is lost."""

    def write(n: int, event: str) -> dict[str, Any]:
        content = "z" * (300_000 if n == 0 else 200_000)  # the first the largest: the first shed
        tool = {"tool_name": "Write", "tool_input": {"file_path": f"/w/f{n}.py", "content": content}}
        return payload(event, tool_use_id=f"toolu_w{n}", **tool)

    for n in range(30):
        hook(write(n, "PreToolUse"))  # refused by the user: no PostToolUse
        if n == 0:  # two calls under one id (an endpoint that reuses ids), the second refused too
            hook(write(0, "PreToolUse") | {"tool_input": {"file_path": "/w/small.py", "content": "x"}})
        for p in grep(n):  # the model's next response runs a call
            hook(p)
    assert hook.snapshot.stat().st_size < SNAPSHOT_BUDGET
    hook(write(0, "PostToolUse") | {"tool_response": "written after all"})
    results = [e for e in read_log(hook.log) if isinstance(e, ToolResult) and e.call_id.startswith("toolu_w0")]
    assert [(e.call_id, e.content) for e in results] == [("toolu_w0@1", "written after all")], "its shed twin gone"
    assert hook.replays == []


def test_refusals_one_after_another_keep_only_the_calls_that_could_be_running(hook: Hook) -> None:
    """Forty calls refused in a row, none answered: no response ran, so all
    are in one step, and the newest 32 (one response's tools at most) are
    kept; the older ones are shed."""
    for n in range(40):
        tool = {"tool_name": "Write", "tool_input": {"file_path": f"/w/g{n:02d}.py", "content": "z" * 150_000}}
        hook(payload("PreToolUse", tool_use_id=f"toolu_g{n:02d}", **tool))
    assert hook.snapshot.stat().st_size < 32 * 151_000 + 100_000


class _Place(int):
    """A policy's place, as the snapshot writes it."""


class _Keep(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> _Place:
        return _Place(pid)


class _Put(pickle.Pickler):
    def persistent_id(self, obj: Any) -> int | None:
        return int(obj) if type(obj) is _Place else None


def _resave(
    hook: Hook,
    *,
    version: int = SNAPSHOT_VERSION,
    states: list[Any] | None = None,
    answers: list[Any] | None = None,
    drop: int = 0,
) -> None:
    pickled = _opened(hook.snapshot.read_bytes())
    assert isinstance(pickled, bytes)
    record = list(_Keep(io.BytesIO(pickled)).load())
    record[0] = version
    if states is not None:
        record[4] = [(*agent[:-1], states) for agent in record[4]]
    if answers is not None:
        record[5] = answers
    del record[len(record) - drop :]
    _write_sealed(hook.snapshot, lambda buffer: _Put(buffer).dump(tuple(record)))


def _write_sealed(path: Path, dump: Callable[[io.BytesIO], object]) -> None:
    """Write a snapshot file whose record ``dump`` pickles, sealed as the hook seals its own."""
    buffer = io.BytesIO()
    buffer.write(bytes(_HEADER))
    dump(buffer)
    _seal(buffer.getbuffer())
    path.write_bytes(buffer.getvalue())


def _flip_a_byte_of_the_record(snapshot: Path) -> None:
    data = bytearray(snapshot.read_bytes())
    data[-5] ^= 0x01
    snapshot.write_bytes(bytes(data))


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as file:
        file.write(data)


def _replace_with_link(snapshot: Path) -> None:
    target = snapshot.with_name("elsewhere")
    snapshot.rename(target)
    snapshot.symlink_to(target)


def test_a_snapshot_of_another_config_is_replayed_over(hook: Hook) -> None:
    for p in grep(0):
        hook(p)
    other = Hook(hook.state, Config(remind=RemindConfig(thresholds=(2,))))
    answers = [other(p) for p in grep(1)]
    assert context(answers[1]) == GENTLE_REMINDER, "the log replayed under the new config: 2 in a row"
    assert other.replays == [f"there is no snapshot; replaying {str(other.log)!r}"], "none of its config yet"
    hook.snapshot.replace(other.snapshot)
    other(payload("UserPromptSubmit", prompt="go on"))
    assert other.replays[1] == f"the snapshot was written under another config; replaying {str(other.log)!r}"


def test_hooks_of_one_session_under_two_configs_catch_up_on_each_other_and_never_replay(tmp_path: Path) -> None:
    """The plugin (default config) and a settings hook (``recommended``)
    both answer every event: each keeps a snapshot of its own config and
    catches up on what the other recorded, so no call replays the session;
    each event is recorded once, and each hook answers as it would
    rebuilding the session from the whole log."""
    events = [event for n in range(6) for event in grep(n)]
    events += [payload("UserPromptSubmit", prompt="go on"), *grep(6)]
    events += [{**event, "agent_id": "helper-1"} for n in (7, 8, 9) for event in grep(n)]  # a subagent's calls
    events.append(payload("SessionEnd", reason="other"))
    answers: dict[bool, list[dict[str, Any]]] = {}
    for rebuilt in (False, True):
        plugin, settings = Hook(tmp_path / f"state-{rebuilt}"), Hook(tmp_path / f"state-{rebuilt}", RECOMMENDED)
        answers[rebuilt] = []
        for event in events:
            for hook in (plugin, settings):
                if rebuilt:
                    hook.snapshot.unlink(missing_ok=True)  # each call replays the whole log
                answers[rebuilt].append(hook(event))
        if not rebuilt:
            assert plugin.replays == [], "the plugin's first call found nothing to replay"
            assert settings.replays == [f"there is no snapshot; replaying {str(settings.log)!r}"], "its first only"
            assert plugin.snapshot != settings.snapshot
            assert plugin.snapshot.exists()
            assert settings.snapshot.exists()
        recorded = [(type(e).__name__, e.call_id) for e in read_log(plugin.log) if isinstance(e, ToolCall | ToolResult)]
        assert recorded == [(kind, f"toolu_0{n}") for n in range(10) for kind in ("ToolCall", "ToolResult")]
    assert answers[False] == answers[True]
    assert any(context(answer) == GENTLE_REMINDER for answer in answers[False]), "the plugin's remind had its say"


def test_the_hook_that_runs_second_answers_with_the_decision_the_first_recorded(tmp_path: Path) -> None:
    """Two hooks under two configs: the first to see a pre hook decides it
    under its config and records it; the other answers its copy with that
    decision, a denial its own config would not have made included."""
    first, second = Hook(tmp_path, RECOMMENDED), Hook(tmp_path)

    def decision(answer: dict[str, Any]) -> str | None:
        decided: str | None = answer.get("hookSpecificOutput", {}).get("permissionDecision")
        return decided

    decisions = []
    for n in range(4):
        pre, post = grep(n)
        decisions.append((decision(first(pre)), decision(second(pre))))
        if decisions[-1][0] is None:  # a denied call does not run: no post hook
            first(post)
            second(post)
    assert decisions == [(None, None), (None, None), ("deny", "deny"), ("deny", "deny")]
    assert [e.call_id for e in read_log(first.log) if isinstance(e, ToolCall)] == [f"toolu_0{n}" for n in range(4)]


def test_a_log_grown_by_anything_but_whole_events_numbered_on_is_replayed(hook: Hook) -> None:
    for p in grep(0):
        hook(p)
    other = Hook(hook.state, RECOMMENDED)
    other(payload("UserPromptSubmit", prompt="look"))
    hook(next(grep(1)))  # recorded by the plugin: the settings hook catches up on it
    assert other(payload("UserPromptSubmit", prompt="again")) == {}
    assert len(other.replays) == 1
    lines = hook.log.read_bytes().splitlines(keepends=True)
    header, last = lines[0], json.loads(lines[-1])
    gap = json.dumps({**last, "seq": last["seq"] + 2}).encode() + b"\n"
    for grown in (header, gap, b'{"type": "tool/call"}\n', b'{"type": "user/message"'):
        hook(payload("UserPromptSubmit", prompt="more"))
        _append(hook.log, grown)
        other(payload("UserPromptSubmit", prompt="and more"))
        assert other.replays[-1].startswith("the session log changed since the snapshot was written")
    assert len(other.replays) == 5


def test_a_snapshot_whose_log_is_gone_starts_a_new_session_and_says_so(hook: Hook) -> None:
    for p in grep(0):
        hook(p)
    hook.log.unlink()
    assert [context(hook(p)) for n in (1, 2) for p in grep(n)] == [None] * 4, "the old calls are forgotten"
    assert hook.replays == [f"the session log is gone; replaying {str(hook.log)!r}"]
    assert isinstance(next(iter(read_log(hook.log))), type(next(iter(read_log(hook.log))))), "a new log"


def test_a_log_that_is_no_session_log_is_moved_aside_and_says_where(hook: Hook) -> None:
    for p in grep(0):
        hook(p)
    hook.log.write_bytes(b"\x00garbage, not a session log\n")
    assert [context(hook(p)) for p in grep(1)] == [None, None], "a new session"
    (aside,) = hook.state.glob(f"{SESSION}.jsonl.unreadable-*")
    assert aside.read_bytes() == b"\x00garbage, not a session log\n"
    replayed, moved = hook.replays
    assert replayed.endswith(f"; replaying {str(hook.log)!r}")
    assert moved.endswith(f"; moved to {str(aside)!r} and a new log begun")
    assert str(hook.log) in moved, "the error names the file it could not read"


def test_a_new_session_replays_nothing_and_says_nothing(hook: Hook) -> None:
    assert hook(payload("UserPromptSubmit", prompt="go")) == {}
    assert hook.replays == []


def test_a_coroutine_that_waits_on_an_event_loop_cannot_be_run_without_one() -> None:
    import asyncio

    async def waits() -> None:
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="waited on an event loop, and none is running"):
        run_to_completion(waits())


def test_rescue_trips_are_written_once_however_many_invocations_follow(tmp_path: Path, ask_script: AskScript) -> None:
    trips = tmp_path / "trips.jsonl"
    ask = ask_script("echo 'Read src/cfg.py instead.'")
    config = Config(
        remind=RemindConfig(enabled=False),
        rescue=RescueConfig(ask_command=str(ask), nudge_at=2, rescue_at=3, log_file=str(trips)),
    )
    hook = Hook(tmp_path / "state", config)
    denied = 0
    for n in range(5):
        pre, post = grep(n)
        answer = hook(pre)
        if answer.get("hookSpecificOutput", {}).get("permissionDecision") == "deny":
            denied += 1
        else:
            hook(post)
    hook.snapshot.unlink()  # the next invocation replays every trip's call
    hook(payload("UserPromptSubmit", prompt="go on"))
    assert denied == 4
    kinds = [json.loads(line)["kind"] for line in trips.read_text().splitlines()]
    assert kinds == ["deny", "rescue", "rescue", "rescue"], "one line per trip, none from the replay"
    assert len(hook.replays) == 1
    main(["replay", str(hook.log), "--config", str(_toml(tmp_path, config, trips))])
    assert len(trips.read_text().splitlines()) == 4, "replay never appends to the live trip log"


def _toml(tmp_path: Path, config: Config, trips: Path) -> Path:
    path = tmp_path / "guard.toml"
    rescue = config.rescue
    path.write_text(
        f'[remind]\nenabled = false\n\n[rescue]\nask_command = "{rescue.ask_command}"\n'
        f'nudge_at = 2\nrescue_at = 3\nlog_file = "{trips}"\n'
    )
    return path


def test_every_usage_error_of_hook_exits_1_never_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hook", "--confg", "guard.toml"]) == 1
    assert "unrecognized arguments: --confg" in capsys.readouterr().err
    assert main(["-v", "hook", "--state-dir"]) == 1
    assert "--state-dir: expected one argument" in capsys.readouterr().err
    with pytest.raises(SystemExit) as other:
        main(["replay", "--bogus"])
    assert other.value.code == 2, "other commands keep argparse's 2"
    with pytest.raises(SystemExit) as asked_for_help:
        main(["hook", "--help"])
    assert asked_for_help.value.code == 0
    assert "--state-dir DIR" in capsys.readouterr().out


def test_there_is_no_bench_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as unknown:
        main(["bench"])
    assert unknown.value.code == 2
    assert "invalid choice: 'bench'" in capsys.readouterr().err


def test_help_is_as_wide_as_columns_says(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit):
        main(["hook", "--help"])
    wide = capsys.readouterr().out
    monkeypatch.setenv("COLUMNS", "50")
    with pytest.raises(SystemExit):
        main(["hook", "--help"])
    narrow = capsys.readouterr().out
    assert max(map(len, narrow.splitlines())) <= 50 < max(map(len, wide.splitlines()))


def test_a_columns_value_int_cannot_read_is_ignored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "\u00b2")  # a digit to str.isdigit, not to int
    with pytest.raises(SystemExit) as done:
        main(["hook", "--help"])
    assert done.value.code == 0
    assert "usage: repeat-tool-guard hook" in capsys.readouterr().out


# --- the ask dies with the hook: real processes, real signals --------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kill_with", [signal.SIGTERM, signal.SIGKILL])
def test_the_ask_and_its_children_die_with_the_hook_whatever_signal_kills_it(
    tmp_path: Path, ask_script: AskScript, kill_with: signal.Signals
) -> None:
    pids = tmp_path / "pids"
    ask = ask_script(f"sleep 300 &\necho $$ $! > {pids}.tmp && mv {pids}.tmp {pids}\nwait")
    config = tmp_path / "guard.toml"
    config.write_text(f'[remind]\nenabled = false\n\n[rescue]\nask_command = "{ask}"\nnudge_at = 2\nrescue_at = 3\n')
    state = tmp_path / "state"
    command = [sys.executable, "-m", "guard", "hook", "--state-dir", str(state), "--config", str(config)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE")}
    for hook_payload in (*grep(0), next(grep(1))):  # a call, its result, a denied repeat
        subprocess.run(command, input=json.dumps(hook_payload).encode(), check=True, cwd=REPO, env=env)
    hook = subprocess.Popen(command, stdin=subprocess.PIPE, cwd=REPO, env=env)
    assert hook.stdin is not None
    hook.stdin.write(json.dumps(next(grep(2))).encode())  # the third escalates: the ask runs
    hook.stdin.close()
    deadline = time.monotonic() + 30
    while not pids.exists():
        assert time.monotonic() < deadline, "the ask never started"
        time.sleep(0.05)
    ask_pid, child_pid = (int(pid) for pid in pids.read_text().split())
    # The hook names the ask's group to the watchdog right after starting it;
    # a hook killed within that first instant leaves the ask unwatched. A
    # hook timeout comes seconds later: so does this kill.
    time.sleep(1)
    hook.send_signal(kill_with)
    assert hook.wait(timeout=10) == -kill_with
    deadline = time.monotonic() + 10
    while running(ask_pid) or running(child_pid):
        assert time.monotonic() < deadline, "the ask outlived the hook"
        time.sleep(0.05)


def test_a_verbose_hook_logs_its_actions_to_stderr_and_answers_alone_on_stdout(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    import io

    import structlog

    request.addfinalizer(structlog.reset_defaults)  # -v configures logging for the whole process
    codes = []
    for n in range(3):
        for hook_payload in grep(n):
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(hook_payload).encode())))
            codes.append(main(["-v", "hook", "--state-dir", str(tmp_path)]))
    out, err = capsys.readouterr()
    assert codes == [0] * 6
    assert [context(json.loads(line)) for line in out.splitlines()] == [GENTLE_REMINDER]
    assert "guard.remind" in err


def test_resuming_without_a_guard_of_ones_own_builds_one_from_the_config(tmp_path: Path) -> None:
    from guard.sessions.resume import resume_link

    link, log = run_to_completion(resume_link(tmp_path / "s.jsonl", "s", Config()))
    with log:
        assert link.links() == []
    assert [type(e) for e in read_log(tmp_path / "s.jsonl")] == []
    assert (tmp_path / "s.jsonl").read_bytes().startswith(b'{"type":"session/start"')


def test_the_hook_command_says_on_stderr_that_it_replayed_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    def call(hook_payload: dict[str, Any]) -> int:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(hook_payload).encode())))
        return main(["hook", "--state-dir", str(tmp_path)])

    assert [call(p) for p in grep(0)] == [0, 0]
    snapshot_path(tmp_path / f"{SESSION}.jsonl", Config()).unlink()
    assert call(next(grep(1))) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"repeat-tool-guard hook: there is no snapshot; replaying {str(tmp_path / f'{SESSION}.jsonl')!r}\n"


def test_the_hook_command_in_shadow_answers_nothing_and_records_what_it_would_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def call(hook_payload: dict[str, Any]) -> str:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(hook_payload).encode())))
        assert main(["hook", "--shadow", "--state-dir", str(tmp_path)]) == 0
        return capsys.readouterr().out

    answers = [call(p) for n in range(3) for p in grep(n)]
    assert answers == [""] * 6  # nothing for the model: no reminder, no denial
    recorded = [e for e in read_log(tmp_path / f"{SESSION}.jsonl") if isinstance(e, ContextMessage)]
    assert [message.source.form for message in recorded] == ["shadow"]
    assert recorded[0].text == GENTLE_REMINDER


def test_post_hooks_whose_pre_hooks_never_came_record_what_would_have_been_denied_and_replay_alike(
    tmp_path: Path,
) -> None:
    hook = Hook(tmp_path / "state", load_config("recommended"))
    tool = {"tool_name": "Grep", "tool_input": {"pattern": "load_config"}}
    answers = [
        hook(payload("PostToolUse", tool_use_id=f"toolu_{n:02d}", tool_response="src/cfg.py:12", **tool))
        for n in range(6)
    ]

    assert not any("permissionDecision" in a.get("hookSpecificOutput", {}) for a in answers), "the tool ran"
    calls = [e for e in read_log(hook.log) if isinstance(e, ToolCall)]
    assert [c.late for c in calls] == [True] * 6
    outcome = anyio.run(replay_log, hook.log, load_config("recommended"))
    assert [(v.action, v.shadow) for v in outcome.verdicts if v.policy == "loops"][:1] == [("deny", True)]
    assert outcome.differences == [], "the replay makes the same record: no denial the log lacks"


def test_a_lone_surrogate_in_hook_input_is_read_as_the_log_writes_it(hook: Hook) -> None:
    tool = {"tool_name": "Grep", "tool_input": {"pattern": "a\ud83d"}, "tool_use_id": "toolu_01"}
    raw = json.dumps(payload("PostToolUse", tool_response="cut mid-emoji \ud83d", **tool)).encode()
    assert b"\\ud83d" in raw, "written as JavaScript writes a string cut mid-character"

    hook(parse_payload(raw))

    (result,) = [e for e in read_log(hook.log) if isinstance(e, ToolResult)]
    assert (result.args, result.content) == ({"pattern": "a\\ud83d"}, "cut mid-emoji \\ud83d")
    with pytest.raises(HookInputError, match="not JSON"):
        parse_payload(b'{"session_id": "s", "n": NaN}')


def _nested(depth: int, leaf: str) -> Any:
    value: Any = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [150, 600])
def test_arguments_nested_deeper_than_the_log_keeps_are_seen_as_the_log_holds_them(hook: Hook, depth: int) -> None:
    hook.config = load_config("recommended")
    answers = []
    for n in range(3):  # arguments that differ only below the depth the log keeps: one call, made three times
        tool = {"tool_name": "Bash", "tool_input": {"a": _nested(depth, f"v{n}")}, "tool_use_id": f"toolu_{n:02d}"}
        answers += [hook(payload("PreToolUse", **tool)), hook(payload("PostToolUse", tool_response="same", **tool))]
    assert answers[4]["hookSpecificOutput"]["permissionDecision"] == "deny", "the third, as the log shows it"
    assert hook.snapshot.exists()
    from guard.verdicts import replay_log

    outcome = anyio.run(replay_log, hook.log, hook.config)
    assert outcome.differences == []


def test_a_snapshot_keeps_no_output_of_the_results_it_answered(hook: Hook) -> None:
    output = "x" * 1_000_000
    for n in range(3):
        tool = {"tool_name": "Bash", "tool_input": {"command": f"cat big{n}"}, "tool_use_id": f"toolu_{n:02d}"}
        hook(payload("PreToolUse", **tool))
        hook(payload("PostToolUse", tool_response=output, **tool))
        hook(payload("PostToolUse", tool_response=output, **tool))  # a copy: still told from a new result
    assert hook.snapshot.stat().st_size < 50_000
    results = [e for e in read_log(hook.log) if isinstance(e, ToolResult)]
    assert len(results) == 3


def test_a_session_resumed_after_its_end_starts_afresh_whether_restored_from_snapshot_or_log(tmp_path: Path) -> None:
    def bash(n: int, seam: str) -> dict[str, Any]:
        tool = {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": f"toolu_{n:02d}"}
        return payload(seam, tool_response="same", **tool) if seam == "PostToolUse" else payload(seam, **tool)

    events = [bash(n, seam) for n in (1, 2) for seam in ("PreToolUse", "PostToolUse")]
    events += [bash(n, "PreToolUse") for n in (3, 4, 5)]  # denied three times: a halt is asked
    events += [payload("SessionEnd", reason="other"), *grep(6), *grep(7)]  # `claude --resume` keeps the id
    answers: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    for from_log in (False, True):
        hook = Hook(tmp_path / f"state-{from_log}", load_config("recommended"))
        for event in events:
            if from_log:
                hook.snapshot.unlink(missing_ok=True)  # each event restores the session from its log
            answers[from_log].append(hook(event))

    assert answers[True] == answers[False]
    assert answers[True][-5:] == [{}] * 5, "the halt and the calls left open ended with the session"


def test_a_hook_event_delivered_twice_is_answered_alike_and_recorded_once_across_processes(hook: Hook) -> None:
    hook.config = load_config("recommended")
    twice = [event for n in range(2) for event in grep(n) for _ in range(2)]  # the plugin and a settings hook
    denied = payload("PreToolUse", tool_name="Grep", tool_input={"pattern": "load_config"}, tool_use_id="toolu_02")

    answers = [hook(event) for event in twice]
    denials = [hook(denied) for _ in range(3)]

    assert answers == [{}] * 8, "the second of each pair neither counts nor reminds"
    assert denials[0]["hookSpecificOutput"]["permissionDecision"] == "deny", "the third call, counted once each"
    assert denials[1:] == [denials[0]] * 2, "a copy of a denied call gets its denial, not a halt"
    recorded = [(type(e).__name__, e.call_id) for e in read_log(hook.log) if isinstance(e, ToolCall | ToolResult)]
    assert recorded == [(kind, f"toolu_0{n}") for n in range(3) for kind in ("ToolCall", "ToolResult")]


def test_a_copy_is_answered_alike_and_recorded_once_when_its_id_names_another_open_call(hook: Hook) -> None:
    """An endpoint that gives calls one id (``c1``) and hooks installed twice:
    each copy of a pre hook gets its first delivery's answer, a denied one
    included, however many calls that id names, and nothing is recorded
    again (two copies of one denial are no three denials: no halt)."""
    hook.config = load_config("recommended")

    def bash(command: str, seam: str = "PreToolUse", call_id: str = "c1", **extra: Any) -> dict[str, Any]:
        return payload(seam, tool_name="Bash", tool_input={"command": command}, tool_use_id=call_id, **extra)

    for call_id in ("a", "b"):
        hook(bash("ls src", call_id=call_id))
        hook(bash("ls src", "PostToolUse", call_id=call_id, tool_response="same"))
    assert hook(bash("make test")) == {}  # c1, left running
    assert hook(bash("git status")) == {}  # c1 again: c1@1
    assert hook(bash("git status")) == {}, "a copy of a call still running"
    denied = hook(bash("ls src"))  # c1@2: the third ls, denied
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert [hook(bash("ls src")) for _ in range(2)] == [denied] * 2
    events = list(read_log(hook.log))
    assert [e.call_id for e in events if isinstance(e, ToolCall)] == ["a", "b", "c1", "c1@1", "c1@2"]
    assert not [e for e in events if isinstance(e, AgentStatus) and e.status == "halt-requested"]


@pytest.mark.parametrize("config", [Config(), RECOMMENDED], ids=["remind", "recommended"])
def test_a_copy_is_answered_alike_and_recorded_once_when_the_session_is_rebuilt_from_its_log(
    tmp_path: Path, config: Config
) -> None:
    """The answers kept for copies come back with a session replayed from
    its log (no snapshot: another format, a log written meanwhile), the
    reminder a result drew and a denial alike."""
    events = [event for n in range(3) for event in grep(n)]
    events.append(
        payload("PreToolUse", tool_name="Grep", tool_input={"pattern": "load_config"}, tool_use_id="toolu_03")
    )
    once = Hook(tmp_path / "once", config)
    expected = [once(event) for event in events]
    assert any(context(answer) or "permissionDecision" in json.dumps(answer) for answer in expected)

    rebuilt = Hook(tmp_path / "rebuilt", config)
    answers = []
    for event in events:
        for _ in range(2):
            rebuilt.snapshot.unlink(missing_ok=True)  # each delivery rebuilds the session from its log
            answers.append(rebuilt(event))

    assert answers == [answer for answer in expected for _ in range(2)], "each copy gets its first delivery's answer"
    assert [(type(e), e.call_id) for e in read_log(rebuilt.log) if isinstance(e, ToolCall | ToolResult)] == [
        (type(e), e.call_id) for e in read_log(once.log) if isinstance(e, ToolCall | ToolResult)
    ]


def test_a_session_rebuilt_from_a_long_log_keeps_the_latest_answers_as_a_live_one_does(tmp_path: Path) -> None:
    from guard.sessions.resume import resume_link

    def ls(n: int | str, output: str = "") -> list[dict[str, Any]]:
        tool = {"tool_name": "Bash", "tool_input": {"command": f"ls dir{n}"}, "tool_use_id": f"toolu_{n}"}
        return [payload("PreToolUse", **tool), payload("PostToolUse", tool_response=output or f"file{n}", **tool)]

    async def run() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        log = tmp_path / "long.jsonl"
        live = GuardLink(log=log, config=RECOMMENDED)
        hooks = ClaudeHooks(live)
        for n in range(3):  # the same call three times: the third is denied, and its denial kept a while
            same = ls("same")
            same[0]["tool_use_id"] = same[1]["tool_use_id"] = f"toolu_same_{n}"
            assert ("deny" in json.dumps(await hooks.handle(same[0]))) == (n == 2)
            if n < 2:
                await hooks.handle(same[1])
        for n in range(2 * ANSWERS_KEPT + 10):
            for event in ls(n, "x" * 20_000 if n == 2 * ANSWERS_KEPT + 8 else ""):
                await hooks.handle(event)
            if n == 2 * ANSWERS_KEPT:
                await hooks.handle(ls(ANSWERS_KEPT + 5)[1])  # a copy answered keeps its answer where it was
        live.close()
        before = [(type(e).__name__, e.call_id) for e in read_log(log) if isinstance(e, ToolCall | ToolResult)]
        link, session_log = await resume_link(log, SESSION, RECOMMENDED)
        with session_log:
            rebuilt = ClaudeHooks(link)
            assert link.answers.items() == live.answers.items()
            for n in (2 * ANSWERS_KEPT + 9, ANSWERS_KEPT + 10, 0):  # copies: the two latest kept, the first not
                await rebuilt.handle(ls(n, "x" * 20_000 if n == 2 * ANSWERS_KEPT + 8 else "")[1])
        return before, [(type(e).__name__, e.call_id) for e in read_log(log) if isinstance(e, ToolCall | ToolResult)]

    before, after = anyio.run(run)
    assert after == [*before, ("ToolCall", "toolu_0"), ("ToolResult", "toolu_0")], "only the copy of the oldest is new"


@pytest.mark.parametrize("stdout", ["/dev/full", "closed"])
def test_an_answer_that_cannot_be_written_is_one_line_on_stderr_and_a_non_blocking_exit(
    tmp_path: Path, stdout: str
) -> None:
    state = tmp_path / "state"
    denied = payload("PreToolUse", tool_name="Grep", tool_input={"pattern": "load_config"}, tool_use_id="toolu_02")
    for event in [*grep(0), *grep(1)]:
        Hook(state, load_config("recommended"))(event)
    target = None if stdout == "closed" else open(stdout, "w")  # noqa: SIM115 - handed to the child
    try:
        done = subprocess.run(
            [sys.executable, "-m", "guard", "hook", "--config", "recommended", "--state-dir", str(state)],
            input=json.dumps(denied).encode(),
            stdout=target if target is not None else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            close_fds=True,
            pass_fds=(),
            preexec_fn=None if target is not None else lambda: os.close(1),
            timeout=60,
        )
    finally:
        if target is not None:
            target.close()
    assert done.returncode == 1, "exit 2 would block the call in Claude Code"
    [line] = done.stderr.decode().splitlines()
    assert line.startswith("repeat-tool-guard hook: the answer could not be written to stdout: ")


@pytest.mark.parametrize("stderr", ["open", "closed"])
def test_an_answer_that_cannot_be_written_in_process_is_a_non_blocking_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], stderr: str
) -> None:
    from guard.cli import main

    state = tmp_path / "state"
    for event in [*grep(0), *grep(1)]:
        Hook(state, load_config("recommended"))(event)
    denied = payload("PreToolUse", tool_name="Grep", tool_input={"pattern": "load_config"}, tool_use_id="toolu_02")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(denied).encode())))
    full = open("/dev/full", "w")  # noqa: SIM115 - stdout for the call, closed below
    monkeypatch.setattr("sys.stdout", full)
    if stderr == "closed":
        monkeypatch.setattr("sys.stderr", None)
    try:
        assert main(["hook", "--config", "recommended", "--state-dir", str(state)]) == 1
    finally:
        full.close()
    said = capsys.readouterr().err
    if stderr == "open":
        assert (
            said
            == "repeat-tool-guard hook: the answer could not be written to stdout: [Errno 28] No space left on device\n"
        )


def test_a_snapshot_that_cannot_be_saved_needs_no_one_told(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    snapshot_path(state / f"{SESSION}.jsonl", Config()).mkdir()
    answers = [answer_hook(p, state, None, log_actions=False) for n in range(3) for p in grep(n)]
    assert [context(a) for a in answers] == [None] * 5 + [GENTLE_REMINDER]


class _Unwritable(io.StringIO):
    """A stream that takes nothing and has no file descriptor (a closed pipe's wrapper, say)."""

    def write(self, text: str) -> int:
        raise OSError(32, "Broken pipe")


def test_a_hook_whose_stdout_and_stderr_both_fail_still_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from guard.cli import main

    state = tmp_path / "state"
    for event in [*grep(0), *grep(1)]:
        Hook(state, load_config("recommended"))(event)
    denied = payload("PreToolUse", tool_name="Grep", tool_input={"pattern": "load_config"}, tool_use_id="toolu_02")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(denied).encode())))
    monkeypatch.setattr("sys.stdout", _Unwritable())
    monkeypatch.setattr("sys.stderr", _Unwritable())
    assert main(["hook", "--config", "recommended", "--state-dir", str(state)]) == 1


def refused_edit(n: int) -> dict[str, Any]:
    """A response's ``PostToolBatch`` listing one Edit Claude Code refused
    itself, before any tool hook (its ``old_string`` is not in the file)."""
    call = {
        "tool_name": "Edit",
        "tool_input": {"file_path": "/w/mod.py", "old_string": "x = 2", "new_string": "x = 3"},
        "tool_use_id": f"toolu_{n:02d}",
        "tool_response": "<tool_use_error>String to replace not found in file.\nString: x = 2</tool_use_error>",
    }
    return payload("PostToolBatch", tool_calls=[call])


def test_a_refused_call_listed_in_a_batch_delivered_twice_is_recorded_once(hook: Hook) -> None:
    """With the guard's hooks installed twice (the plugin and settings), each
    batch comes twice: its refused call counts once."""
    answers = []
    for n in range(1, 4):
        answers += [hook(refused_edit(n)), hook(refused_edit(n))]
    calls = [e for e in read_log(hook.log) if isinstance(e, ToolCall)]
    assert [(c.call_id, c.late, c.step) for c in calls] == [(f"toolu_{n:02d}", True, n) for n in range(1, 4)]
    assert [context(a) is not None for a in answers] == [False] * 4 + [True, False], "told once, at the third"


def test_calls_refused_before_any_hook_join_their_responses_step(hook: Hook) -> None:
    refused = refused_edit(1)["tool_calls"][0]
    unknown = {
        "tool_name": "TaskOutput",
        "tool_input": {"task_id": "t1"},
        "tool_use_id": "toolu_02",
        "tool_response": "<tool_use_error>Error: No such tool available: TaskOutput</tool_use_error>",
    }
    read = {"tool_name": "Read", "tool_input": {"file_path": "/w/a.py"}, "tool_use_id": "toolu_03"}
    hook(payload("PreToolUse", **read))
    hook(payload("PostToolUse", tool_response="x = 1", **read))
    hook(payload("PostToolBatch", tool_calls=[refused, unknown, {**read, "tool_response": "x = 1"}]))
    hook(
        payload(
            "PostToolBatch", tool_calls=[{**refused, "tool_use_id": "toolu_04"}, {**unknown, "tool_use_id": "toolu_05"}]
        )
    )
    calls = [e for e in read_log(hook.log) if isinstance(e, ToolCall)]
    assert [(c.call_id, c.step) for c in calls] == [
        ("toolu_03", 1),
        ("toolu_01", 1),
        ("toolu_02", 1),
        ("toolu_04", 2),
        ("toolu_05", 2),
    ]
