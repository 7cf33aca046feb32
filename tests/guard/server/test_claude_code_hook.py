"""POST /hooks/claude-code: Claude Code's HTTP hooks get exactly what the
command hook (``repeat-tool-guard hook``) prints for the same payloads."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from bus import AgentStatus, ToolCall, ToolResult, read_log
from guard.adapters.claude_hooks import SESSION_ID_RULE
from guard.config import RECOMMENDED, Config, RemindConfig, RescueConfig, TurnsConfig, load_config, shadowed
from guard.verdicts import replay_log
from tests.guard.server.conftest import REPO, MakeServed, hook_payload

SESSION = "5b7c1f0e-claude-session"


def ls(n: int, agent_id: str | None = None, *, fails: bool = False) -> Iterator[dict[str, Any]]:
    tool: dict[str, Any] = {"tool_name": "Bash", "tool_input": {"command": "ls src", "description": "List src"}}
    if agent_id:
        tool["agent_id"] = agent_id
    yield hook_payload(SESSION, "PreToolUse", tool_use_id=f"toolu_{n:02d}", **tool)
    if fails:
        yield hook_payload(SESSION, "PostToolUseFailure", tool_use_id=f"toolu_{n:02d}", error="ls: src: gone", **tool)
    else:
        response = {"stdout": "cfg.py\nmain.py", "stderr": "", "interrupted": False, "isImage": False}
        yield hook_payload(SESSION, "PostToolUse", tool_use_id=f"toolu_{n:02d}", tool_response=response, **tool)


def remind_session() -> list[dict[str, Any]]:
    payloads = [hook_payload(SESSION, "UserPromptSubmit", prompt="what is in src?")]
    for n in range(3):
        payloads += ls(n)
    payloads.append(hook_payload(SESSION, "SubagentStart", agent_id="sub-1", agent_type="Explore"))
    for n in range(10, 13):
        payloads += ls(n, "sub-1", fails=n == 12)
    payloads.append(hook_payload(SESSION, "SubagentStop", agent_id="sub-1", stop_hook_active=False))
    payloads.append(hook_payload(SESSION, "Notification", message="Claude needs your permission"))
    payloads += ls(3)
    payloads.append(hook_payload(SESSION, "SessionEnd", reason="exit"))
    return payloads


def repeated_session() -> list[dict[str, Any]]:
    """The same call four times; the last two are denied, so Claude Code
    sends no PostToolUse for them."""
    payloads = [hook_payload(SESSION, "UserPromptSubmit", prompt="list src until it changes")]
    for n in range(4):
        payloads += list(ls(n))[: 2 if n < 2 else 1]
    return payloads


CONFIGS = {
    "remind": ("", remind_session),
    "rescue": ('[remind]\nenabled = false\n[rescue]\nask_command = "/nonexistent/ask"\n', repeated_session),
    "turns": ("[remind]\nenabled = false\n[turns]\nthreshold = 2\ndeny_after = 1\nhalt_after = 1\n", repeated_session),
}


def command_hook_answers(config: Path, state_dir: Path, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each payload through ``repeat-tool-guard hook``, as a command hook runs it."""
    answers = []
    for payload in payloads:
        done = subprocess.run(
            [sys.executable, "-m", "guard", "hook", "--config", str(config), "--state-dir", str(state_dir)],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            cwd=REPO,
            check=True,
        )
        answers.append(json.loads(done.stdout) if done.stdout.strip() else {})
    return answers


@pytest.fixture(scope="module")
def expected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """The command hook's answers for each config's session (computed once)."""
    answers = {}
    for name, (toml, script) in CONFIGS.items():
        where = tmp_path_factory.mktemp(f"command-{name}")
        (where / "guard.toml").write_text(toml)
        answers[name] = command_hook_answers(where / "guard.toml", where / "state", script())
    return answers


@pytest.mark.slow  # the command hook runs as one process per payload
@pytest.mark.parametrize("name", list(CONFIGS))
def test_answers_are_the_command_hooks_answers(
    name: str, expected: dict[str, list[dict[str, Any]]], make_served: MakeServed, tmp_path: Path
) -> None:
    toml, script = CONFIGS[name]
    (tmp_path / "guard.toml").write_text(toml)
    config = load_config(tmp_path / "guard.toml")
    served = make_served(config)
    answers = []
    for payload in script():
        response = served.post("/hooks/claude-code", payload)
        assert response.status_code == 200
        answers.append(response.json())
    assert answers == expected[name]
    log = served.state_dir / f"{SESSION}.jsonl"
    outcome = anyio.run(replay_log, log, config)
    assert outcome.differences == []
    assert outcome.verdicts  # each session draws at least one guard action


@pytest.mark.slow
def test_what_each_config_answers(expected: dict[str, list[dict[str, Any]]]) -> None:
    """What the shared answers are: a reminder as additionalContext, a deny as
    permissionDecision, a halt as continue: false."""
    remind = expected["remind"]
    assert remind[6]["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    assert "repeating the exact same tool call" in remind[6]["hookSpecificOutput"]["additionalContext"]
    rescue = expected["rescue"]
    denial = rescue[5]["hookSpecificOutput"]  # the third PreToolUse
    assert (denial["hookEventName"], denial["permissionDecision"]) == ("PreToolUse", "deny")
    assert denial["permissionDecisionReason"].startswith("loop-rescue denied this call")
    turns = expected["turns"]
    assert turns[-1]["continue"] is False
    assert turns[-1]["stopReason"].startswith("tool-loop-guard")


def test_session_end_frees_the_session_and_a_resumed_session_continues_its_log(make_served: MakeServed) -> None:
    served = make_served()
    for payload in [*ls(0), *ls(1)]:
        assert served.post("/hooks/claude-code", payload).json() == {}
    served.post("/hooks/claude-code", hook_payload(SESSION, "SessionEnd", reason="clear"))
    assert SESSION not in served.store
    # `claude --resume` brings the same session id back: the count starts over
    # with a fresh main agent, and the log goes on
    answers = [served.post("/hooks/claude-code", p).json() for p in [*ls(2), *ls(3)]]
    assert answers == [{}] * 4
    with read_log(served.state_dir / f"{SESSION}.jsonl") as reader:
        statuses = [e.status for e in reader if type(e) is AgentStatus]
    assert statuses == ["started", "disposed", "started"]


def test_a_hook_event_sent_twice_is_answered_twice_and_recorded_once(make_served: MakeServed) -> None:
    served = make_served(RECOMMENDED)
    script = repeated_session()
    twice = [served.post("/hooks/claude-code", p).json() for payload in script for p in (payload, payload)]
    assert twice[0::2] == twice[1::2], "each copy gets the answer the first one got"
    with read_log(served.state_dir / f"{SESSION}.jsonl") as reader:
        calls = [e.call_id for e in reader if type(e) is ToolCall]
    assert calls == ["toolu_00", "toolu_01", "toolu_02", "toolu_03"]
    assert any("deny" in json.dumps(answer) for answer in twice), "the repeat is still caught"


def test_a_hook_copy_after_a_restart_gets_its_answer_and_is_recorded_once(make_served: MakeServed) -> None:
    """The answers kept for copies are rebuilt with a session restored from
    its log: a copy of a result hook (its reminder included) and of a denied
    pre hook, sent after the server restarted, is answered as before and
    recorded nothing."""
    config = Config(turns=TurnsConfig(threshold=2, deny_after=1, halt_after=2))
    first = make_served(config)
    script = remind_session()[:-1]  # the session does not end
    for n in range(20, 24):
        script += list(ls(n))
    sent = []
    denied = set()
    for payload in script:
        if payload["tool_use_id"] in denied if "tool_use_id" in payload else False:
            continue  # a denied call runs no tool: Claude Code sends no post hook for it
        sent.append((payload, first.post("/hooks/claude-code", payload).json()))
        if "permissionDecision" in json.dumps(sent[-1][1]):
            denied.add(payload["tool_use_id"])
    first.stop()
    log = first.state_dir / f"{SESSION}.jsonl"
    with read_log(log) as reader:
        before = [(type(e), e.call_id) for e in reader if isinstance(e, ToolCall | ToolResult)]
    copies = [
        (payload, answer)
        for payload, answer in sent
        if payload["hook_event_name"] in ("PostToolUse", "PostToolUseFailure")
        or "permissionDecision" in json.dumps(answer)
    ]
    said = [answer.get("hookSpecificOutput", {}) for _, answer in copies]
    assert any("additionalContext" in out for out in said), "a copy carries a reminder"
    assert any(out.get("permissionDecision") == "deny" for out in said), "a copy carries a denial"

    second = make_served(config)
    assert [second.post("/hooks/claude-code", payload).json() for payload, _ in copies] == [a for _, a in copies]
    with read_log(log) as reader:
        after = [(type(e), e.call_id) for e in reader if isinstance(e, ToolCall | ToolResult)]
    assert after == before


def _reused_id() -> list[dict[str, Any]]:
    """``ls`` denied under an id, then a new turn in which ``cat`` takes the
    id, then ``ls`` under it again: a new call, decided afresh."""
    payloads = [hook_payload(SESSION, "UserPromptSubmit", prompt="list src")]
    for n in range(3):
        payloads += list(ls(n))[: 2 if n < 2 else 1]
    payloads.append(hook_payload(SESSION, "UserPromptSubmit", prompt="now show cfg.py"))
    cat = {"tool_name": "Read", "tool_input": {"file_path": "cfg.py"}, "tool_use_id": "toolu_02"}
    payloads += [
        hook_payload(SESSION, "PreToolUse", **cat),
        hook_payload(SESSION, "PostToolUse", tool_response="x=1", **cat),
    ]
    return [*payloads, *ls(2)]


def _batch_then_post() -> list[dict[str, Any]]:
    """A response's batch reports a call's result; the call's own post hook follows."""
    pre, post = ls(0)
    batch = hook_payload(
        SESSION, "PostToolBatch", tool_calls=[{"tool_use_id": "toolu_00", "tool_response": post["tool_response"]}]
    )
    return [pre, batch, post]


def _subagent_of_a_reporting_main() -> list[dict[str, Any]]:
    """The main agent's responses end with PostToolBatch; its subagent sends none."""
    payloads = [*ls(0), hook_payload(SESSION, "PostToolBatch", tool_calls=[])]
    for n in range(10, 14):
        payloads += ls(n, "sub-1")
    return payloads


REBUILT_SCRIPTS = {
    "reused id": _reused_id,
    "batch then post": _batch_then_post,
    "subagent": _subagent_of_a_reporting_main,
}


@pytest.mark.parametrize("script", REBUILT_SCRIPTS)
def test_a_session_rebuilt_before_every_hook_answers_and_records_as_one_kept_in_memory(
    make_served: MakeServed, tmp_path: Path, script: str
) -> None:
    config = Config(turns=TurnsConfig(threshold=2, deny_after=1, halt_after=2))
    kept = make_served(config, state_dir=tmp_path / "kept")
    hours = itertools.count(0, 3600)  # the rebuilt server's clock: every session is idle when asked
    rebuilt = make_served(config, state_dir=tmp_path / "rebuilt", store_options={"clock": lambda: float(next(hours))})
    answers: dict[str, list[dict[str, Any]]] = {"kept": [], "rebuilt": []}
    for payload in REBUILT_SCRIPTS[script]():
        answers["kept"].append(kept.post("/hooks/claude-code", payload).json())
        assert rebuilt.store.evict_idle() <= 1  # restored from its log for this hook
        answers["rebuilt"].append(rebuilt.post("/hooks/claude-code", payload).json())
    assert answers["rebuilt"] == answers["kept"]
    recorded = {}
    for name in answers:
        with read_log(tmp_path / name / f"{SESSION}.jsonl") as reader:
            recorded[name] = [(type(e).__name__, e.agent and e.agent.id, getattr(e, "call_id", None)) for e in reader]
    assert recorded["rebuilt"] == recorded["kept"]
    calls = [call_id for kind, _, call_id in recorded["kept"] if kind == "ToolCall"]
    if script == "reused id":
        assert "permissionDecision" not in json.dumps(answers["kept"][-2]), "ls under the reused id is a new call"
        assert calls == ["toolu_00", "toolu_01", "toolu_02", "toolu_02", "toolu_02"]
    if script == "batch then post":
        assert [kind for kind, _, _ in recorded["kept"] if kind.startswith("Tool")] == ["ToolCall", "ToolResult"]


@pytest.mark.parametrize("restart", [False, True], ids=["in memory", "after a restart"])
def test_a_copy_after_its_agent_ended_gets_its_answer_and_starts_no_agent(
    make_served: MakeServed, tmp_path: Path, restart: bool
) -> None:
    served = make_served(state_dir=tmp_path / "state")
    main_post = list(ls(0))[1]
    sub_post = list(ls(10, "sub-1"))[1]
    script = [*ls(0), *ls(1), *ls(2), *ls(10, "sub-1"), hook_payload(SESSION, "SubagentStop", agent_id="sub-1")]
    answers = [served.post("/hooks/claude-code", payload).json() for payload in script]
    served.post("/hooks/claude-code", hook_payload(SESSION, "SessionEnd", reason="exit"))
    log = tmp_path / "state" / f"{SESSION}.jsonl"
    recorded = log.read_bytes()
    if restart:
        served.stop()
        served = make_served(state_dir=tmp_path / "state")
    copies = [served.post("/hooks/claude-code", payload).json() for payload in (sub_post, main_post, script[5])]
    assert copies == [answers[7], answers[1], answers[5]]
    assert "additionalContext" in json.dumps(copies[2]), "the third ls's reminder, again"
    assert log.read_bytes() == recorded, "no agent started again, nothing recorded"
    assert SESSION not in served.store


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"not json", "hook input is not JSON (JSON is malformed: invalid character (byte 4))"),
        (b"[1, 2]", "hook input must be a JSON object, got list"),
        (
            b'{"hook_event_name": "PreToolUse"}',
            f"hook input session_id = None: {SESSION_ID_RULE}",
        ),
        (
            b'{"session_id": "../etc", "hook_event_name": "PreToolUse"}',
            f"hook input session_id = '../etc': {SESSION_ID_RULE}",
        ),
        (
            b'{"session_id": "s", "hook_event_name": "PreToolUse", "tool_input": '
            + b"[" * 100_000
            + b"]" * 100_000
            + b"}",
            "hook input nests too deeply to read (maximum recursion depth exceeded while deserializing an object)",
        ),
    ],
)
def test_a_payload_that_is_not_a_hook_payload_is_400_with_one_line(
    make_served: MakeServed, body: bytes, error: str
) -> None:
    served = make_served()
    response = served.post("/hooks/claude-code", content=body, headers={"content-type": "application/json"})
    assert (response.status_code, response.json()) == (400, {"error": error})


@pytest.mark.parametrize("route", ["/hooks/claude-code", "/hooks/codex", "/hooks/gemini-cli"])
def test_an_event_name_that_is_no_string_is_no_event(make_served: MakeServed, route: str) -> None:
    served = make_served()
    for name in (["PreToolUse"], {"a": 1}, 7):
        response = served.post(route, {"session_id": "odd", "hook_event_name": name, "tool_name": "ls"})
        assert (response.status_code, response.json()) == (200, {})
    assert not (served.state_dir / "odd.jsonl").exists()  # not even opened


def test_the_sessions_own_id_as_agent_id_is_its_main_agent(make_served: MakeServed) -> None:
    served = make_served()
    for payload in ls(0, agent_id=SESSION):
        assert served.post("/hooks/claude-code", payload).status_code == 200
    with read_log(served.state_dir / f"{SESSION}.jsonl") as reader:
        started = [(e.agent.id if e.agent else None, e.parent) for e in reader if type(e) is AgentStatus]
    assert started == [(SESSION, None)]


def shadow_session(calls: int) -> list[dict[str, Any]]:
    """The same call again and again, every one run (a shadow guard denies nothing)."""
    payloads = [hook_payload(SESSION, "UserPromptSubmit", prompt="list src until it changes")]
    for n in range(calls):
        payloads += ls(n)
    return payloads


def test_a_shadow_run_delivers_nothing_and_its_log_lists_every_action(make_served: MakeServed, tmp_path: Path) -> None:
    config = shadowed(RECOMMENDED)
    served = make_served(config)
    answers = [served.post("/hooks/claude-code", payload).json() for payload in shadow_session(6)]
    assert answers == [{}] * len(answers)
    outcome = anyio.run(replay_log, served.state_dir / f"{SESSION}.jsonl", config)
    assert outcome.differences == []
    assert [v.action for v in outcome.verdicts] == ["deny", "deny", "deny", "halt", "deny"]
    assert all(v.shadow for v in outcome.verdicts)
    (tmp_path / "guard.toml").write_text('[remind]\nenabled = false\n[loops]\nmode = "shadow"\n')
    # the command hook with --shadow answers the same: nothing
    done = [
        subprocess.run(
            [sys.executable, "-m", "guard", "hook", "--shadow", "--config", "recommended",
             "--state-dir", str(tmp_path)],
            input=json.dumps(payload), capture_output=True, text=True, cwd=REPO, check=True,
        ).stdout.strip()
        for payload in shadow_session(4)
    ]  # fmt: skip
    assert done == [""] * len(done)
    replayed = subprocess.run(
        [sys.executable, "-m", "guard", "replay", "--json", "--check", "--config", str(tmp_path / "guard.toml"),
         str(tmp_path / f"{SESSION}.jsonl")],
        capture_output=True, text=True, cwd=REPO, check=True,
    ).stdout  # fmt: skip
    lines = [json.loads(line) for line in replayed.splitlines()]
    assert [(line["action"], line["shadow"]) for line in lines] == [("deny", True), ("deny", True)]


@pytest.fixture
def slow_ask(tmp_path: Path) -> Path:
    """An ask command that takes 30 s to answer, and notes each start."""
    ask = tmp_path / "ask.sh"
    ask.write_text(f'#!/bin/sh\necho started >> "{tmp_path / "asked"}"\nsleep 30\necho "Read the file instead."\n')
    ask.chmod(0o755)
    return ask


def _rescue_until_the_ask(served: Any, wait: str) -> dict[str, Any]:
    """The same call made until ``rescue`` asks (its fifth occurrence), that
    hook posted saying the client waits ``wait`` seconds; its answer."""
    answer: dict[str, Any] = {}
    for n in range(5):
        payloads = list(ls(n))
        headers = {"Repeat-Tool-Guard-Wait": wait} if n == 4 else {}
        response = served.post("/hooks/claude-code", payloads[0], headers=headers, timeout=float(wait))
        assert response.status_code == 200, response.text
        answer = response.json()
        if "permissionDecision" not in json.dumps(answer):
            served.post("/hooks/claude-code", payloads[1])
    return answer


def test_a_rescue_ask_ends_in_time_for_the_hook_that_waits_for_it(
    make_served: MakeServed, slow_ask: Path, tmp_path: Path
) -> None:
    """The ask would take 30 s; the hook waits 3 (a client timeout past
    which the post fails): the denial comes in time, without advice, and the
    call is recorded once, as the hook got it."""
    served = make_served(Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(slow_ask))))
    answer = _rescue_until_the_ask(served, "3")
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert (tmp_path / "asked").read_text() == "started\n", "asked, and given up on"
    events = list(read_log(served.state_dir / f"{SESSION}.jsonl"))
    calls = [e.call_id for e in events if isinstance(e, ToolCall)]
    assert calls == ["toolu_00", "toolu_01", "toolu_02", "toolu_03", "toolu_04"]
    (denial,) = [e for e in events if isinstance(e, ToolResult) and e.call_id == "toolu_04"]
    assert denial.denied_by == "loop-rescue"
    assert denial.advice is msgspec.UNSET


def test_an_ask_with_no_time_left_is_not_started(make_served: MakeServed, slow_ask: Path, tmp_path: Path) -> None:
    served = make_served(Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(slow_ask))))
    answer = _rescue_until_the_ask(served, "1")
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert not (tmp_path / "asked").exists()


@pytest.mark.parametrize("wait", ["0", "-3", "soon", "nan", "inf", "1e999"])
def test_a_wait_that_is_no_number_of_seconds_is_refused(make_served: MakeServed, wait: str) -> None:
    served = make_served()
    (payload, _) = ls(0)
    response = served.post("/hooks/claude-code", payload, headers={"Repeat-Tool-Guard-Wait": wait})
    assert response.status_code == 400
    assert response.json()["error"].startswith("Repeat-Tool-Guard-Wait: ")
    assert "must be a number of seconds > 0" in response.json()["error"]
