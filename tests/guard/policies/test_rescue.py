"""Policy ``rescue`` on a real bus: detection, epochs, denial, escalation, cost control."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from structlog.testing import capture_logs

from bus import Agent, ToolCall, ToolResult, read_log
from guard import Config, FingerprintCache, Guard, RemindConfig, RescueConfig, RescuePolicy, fingerprint, replay_log
from guard.actions import Action
from guard.adapters import GuardLink
from guard.adapters.claude_hooks import run_to_completion
from guard.policies.rescue import RecordedAnswers
from guard.policies.trips import Trip, TripLog
from tests.conftest import AskScript
from tests.scenarios._script import Script

pytestmark = pytest.mark.anyio

GREP = {"pattern": "load_config", "path": "src"}
READ = {"path": "src/cfg.py"}
_NEVER = 60

Session = Callable[..., Script]


@pytest.fixture
def session(tmp_path: Path, missing_ask_command: str) -> Iterator[Session]:
    """A scripted runtime with only ``rescue`` enabled; ``ask_command``
    points at a missing file unless a test passes a real one."""
    made: list[Script] = []

    def make(**rescue: Any) -> Script:
        rescue.setdefault("ask_command", missing_ask_command)
        config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(**rescue))
        made.append(Script(tmp_path / f"session-{len(list(tmp_path.glob('session-*')))}.jsonl", config))
        return made[-1]

    yield make
    for script in made:  # each holds its session log open
        script.close()


def _invocations(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _counting_advisor(ask_script: AskScript, tmp_path: Path, advice: str = "Stop grepping; edit src/cfg.py.") -> Path:
    """An ask command that records each question and prints ``advice``."""
    calls = tmp_path / "asked"
    return ask_script(f"echo x >> {calls}\necho '{advice}'")


# ---------------------------------------------------------------- detection


async def test_third_identical_call_is_denied_before_it_runs(session: Session, anyio_backend: str) -> None:
    s = session()
    await s.start("main")
    results = [await s.call("main", "grep", GREP, "no matches") for _ in range(3)]

    assert [r.denied_by for r in results] == [None, None, "loop-rescue"]
    assert results[2].is_error
    assert results[2].content == (
        "loop-rescue denied this call; it did not run.\n"
        "You have made this exact call 3 times in your last 3 tool calls, with nothing changed in between:\n"
        "- tool: grep\n"
        '- arguments: {"path":"src","pattern":"load_config"}\n'
        "Repeating it would return the output you already have. Re-read that output and act on it: use what it "
        "tells you, try a different approach or different arguments, or finish the task if you have enough "
        "evidence. Only this exact call is blocked; other calls still run."
    )


async def test_period_six_cycle_is_caught_although_every_read_breaks_the_run(
    session: Session, anyio_backend: str
) -> None:
    s = session()
    await s.start("main")
    outcomes = []
    for _ in range(3):
        for _ in range(5):
            outcomes.append((await s.call("main", "grep", GREP, "src/cfg.py:12")).denied_by)
        outcomes.append((await s.call("main", "read", READ, "def load_config(): ...")).denied_by)

    assert outcomes[:2] == [None, None]
    assert all(outcome == "loop-rescue" for i, outcome in enumerate(outcomes[2:], 2) if i % 6 != 5)
    assert [outcomes[i] for i in (5, 11, 17)] == [None, None, None]  # read Y: twice per window at most


async def test_call_older_than_the_window_no_longer_counts(session: Session, anyio_backend: str) -> None:
    s = session(window=5)
    await s.start("main")
    for i in range(2):
        await s.call("main", "grep", GREP)
        for n in range(4):
            await s.call("main", "read", {"path": f"f{i}{n}"})

    assert (await s.call("main", "grep", GREP)).denied_by is None  # the first grep left the window


async def test_numbered_descriptions_are_one_signature(session: Session, anyio_backend: str) -> None:
    s = session()
    await s.start("main")
    results = [
        await s.call("main", "bash", {"command": "cargo test -q", "description": f"Run the tests (run {n})"})
        for n in range(1, 7)
    ]
    assert [r.denied_by for r in results] == [None, None] + ["loop-rescue"] * 4


async def test_ignored_args_only_strip_top_level_keys(session: Session, anyio_backend: str) -> None:
    s = session()
    await s.start("main")
    results = [await s.call("main", "task", {"spec": {"description": f"v{n}"}}) for n in range(3)]
    assert [r.denied_by for r in results] == [None, None, None]


async def test_key_order_does_not_make_a_different_call(session: Session, anyio_backend: str) -> None:
    s = session()
    await s.start("main")
    await s.call("main", "grep", {"pattern": "x", "path": "src"})
    await s.call("main", "grep", {"path": "src", "pattern": "x"})
    assert (await s.call("main", "grep", {"pattern": "x", "path": "src"})).denied_by == "loop-rescue"


async def test_denial_blocks_only_that_signature(session: Session, anyio_backend: str) -> None:
    s = session()
    await s.start("main")
    ps = {"command": "docker ps"}
    assert [(await s.call("main", "bash", ps)).denied_by for _ in range(3)] == [None, None, "loop-rescue"]
    assert (await s.call("main", "bash", {"command": "sleep 10 && docker ps"})).denied_by is None


async def test_exclude_commands_are_never_denied_and_do_not_count(session: Session, anyio_backend: str) -> None:
    s = session(exclude_commands=[r"^curl -fsS http://localhost:\d+/health$"])
    await s.start("main")
    health = {"command": "curl -fsS http://localhost:8080/health"}
    results = []
    for _ in range(10):
        results.append(await s.call("main", "bash", health, "503"))
        results.append(await s.call("main", "bash", {"command": "make status"}))
    assert all(r.denied_by is None for r in results[::2])
    assert [r.denied_by for r in results[1::2]][:3] == [None, None, "loop-rescue"]


async def test_exclude_commands_read_a_shell_script_but_not_other_argv_or_bare_arguments(
    session: Session, anyio_backend: str
) -> None:
    s = session(exclude_commands=["docker"])
    await s.start("main")
    results = [await s.call("main", "bash", {"command": ["bash", "-lc", "docker ps"]}) for _ in range(3)]
    results += [await s.call("main", "bash", {"command": ["docker", "ps"]}) for _ in range(3)]
    results += [await s.call("main", "bash", "docker ps") for _ in range(3)]
    assert [r.denied_by for r in results] == [None] * 5 + ["loop-rescue", None, None, "loop-rescue"]


async def test_excluded_tools_are_transparent(session: Session, anyio_backend: str) -> None:
    s = session()
    await s.start("main")
    results = []
    for _ in range(3):
        results.append(await s.call("main", "grep", GREP))
        results.append(await s.call("main", "todo_write", {"todos": []}))
    assert [r.denied_by for r in results] == [None, None, None, None, "loop-rescue", None]


async def test_include_limits_tracking(session: Session, anyio_backend: str) -> None:
    s = session(include=["bash"])
    await s.start("main")
    assert [(await s.call("main", "grep", GREP)).denied_by for _ in range(6)] == [None] * 6


async def test_escalation_tool_is_never_blocked_even_when_exclude_is_emptied(
    session: Session, anyio_backend: str
) -> None:
    s = session(exclude=[])
    await s.start("main")
    ask = {"question": "where is load_config?"}
    assert [(await s.call("main", "mcp__claude__ask", ask)).denied_by for _ in range(8)] == [None] * 8


async def test_agents_are_counted_separately(session: Session, anyio_backend: str) -> None:
    s = session()
    await s.start("main")
    await s.start("sub", parent="main")
    results = [await s.call(agent, "grep", GREP) for agent in ("main", "sub", "main", "sub")]
    assert all(r.denied_by is None for r in results)


async def test_calls_without_an_agent_are_ignored(session: Session, anyio_backend: str) -> None:
    s = session()
    assert [(await s.call(None, "grep", GREP)).denied_by for _ in range(5)] == [None] * 5


# ---------------------------------------------------------------- progress epochs


async def test_successful_edit_voids_earlier_observations(session: Session, anyio_backend: str) -> None:
    s = session()
    await s.start("main")
    clippy = {"command": "cargo clippy"}
    results = []
    for n in range(2):
        results.append(await s.call("main", "bash", clippy, "warning: unused variable"))
        results.append(await s.call("main", "bash", clippy, "warning: unused variable"))
        await s.call("main", "edit", {"path": "src/lib.rs", "old": f"x{n}", "new": f"_x{n}"}, "applied")
    results.append(await s.call("main", "bash", clippy, "clean"))
    assert all(r.denied_by is None for r in results)


async def test_failed_edit_is_not_progress(session: Session, anyio_backend: str) -> None:
    s = session()
    await s.start("main")
    await s.call("main", "bash", {"command": "cargo build"})
    await s.call("main", "bash", {"command": "cargo build"})
    await s.call("main", "edit", {"path": "a.rs", "old": "nope"}, "old string not found", is_error=True)
    assert (await s.call("main", "bash", {"command": "cargo build"})).denied_by == "loop-rescue"


async def test_denied_edit_is_not_progress(session: Session, anyio_backend: str) -> None:
    s = session()
    await s.start("main")
    edit = {"path": "a.rs", "old": "x", "new": "y"}
    results = [await s.call("main", "edit", edit, "old string not found", is_error=True) for _ in range(3)]
    assert results[2].denied_by == "loop-rescue"
    assert (await s.call("main", "edit", edit)).denied_by == "loop-rescue"  # the denied one changed nothing


async def test_mutating_tools_accept_wildcards(session: Session, anyio_backend: str) -> None:
    s = session(mutating_tools=["fs_*"])
    await s.start("main")
    await s.call("main", "grep", GREP)
    await s.call("main", "grep", GREP)
    await s.call("main", "fs_write", {"path": "a"})
    assert (await s.call("main", "grep", GREP)).denied_by is None


async def test_no_mutating_tools_means_only_user_messages_make_progress(session: Session, anyio_backend: str) -> None:
    s = session(mutating_tools=[])
    await s.start("main")
    await s.call("main", "grep", GREP)
    await s.call("main", "edit", {"path": "a"})
    await s.call("main", "grep", GREP)
    await s.call("main", "edit", {"path": "b"})
    assert (await s.call("main", "grep", GREP)).denied_by == "loop-rescue"
    await s.user("main", "try the tests directory instead")
    assert (await s.call("main", "grep", GREP)).denied_by is None


async def test_the_same_edit_again_is_not_progress(session: Session, anyio_backend: str) -> None:
    """Writing the same content again changed nothing: the build it feeds is
    a loop (all three policies missed it before; see docs/policies/peers.md)."""
    s = session()
    await s.start("main")
    write = {"file_path": "a.py", "content": "print(1)\n"}
    outcomes = []
    for _ in range(3):
        outcomes.append((await s.call("main", "Write", write)).denied_by)
        outcomes.append((await s.call("main", "bash", {"command": "pytest -q"}, "1 failed")).denied_by)
    assert outcomes == [None, None, None, None, None, "loop-rescue"]


async def test_a_different_edit_after_the_same_one_is_progress_again(session: Session, anyio_backend: str) -> None:
    s = session()
    await s.start("main")
    first, second = {"file_path": "a.py", "content": "x = 1\n"}, {"file_path": "a.py", "content": "x = 2\n"}
    for write in (first, first, second, first, second):
        await s.call("main", "Write", write)
        assert (await s.call("main", "bash", {"command": "pytest -q"}, "1 failed")).denied_by is None


async def test_the_same_shell_edit_again_is_still_progress(session: Session, anyio_backend: str) -> None:
    """A shell command's effect depends on more than its text (a redirected
    download, a generator): only editing tools are compared."""
    s = session()
    await s.start("main")
    for _ in range(4):
        await s.call("main", "bash", {"command": "curl -s http://localhost/status > status.json"})
        assert (await s.call("main", "read", {"path": "status.json"})).denied_by is None


async def test_user_message_starts_a_new_epoch(session: Session, anyio_backend: str) -> None:
    s = session()
    await s.start("main")
    await s.call("main", "grep", GREP)
    await s.call("main", "grep", GREP)
    await s.user("main", "look again, I just pushed a fix")
    assert (await s.call("main", "grep", GREP)).denied_by is None
    assert (await s.call("main", "grep", GREP)).denied_by is None
    assert (await s.call("main", "grep", GREP)).denied_by == "loop-rescue"


# ---------------------------------------------------------------- escalation


async def test_fifth_occurrence_escalates_and_advice_rides_the_denial(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    command = _counting_advisor(ask_script, tmp_path)
    s = session(ask_command=str(command))
    await s.start("main")
    results = [await s.call("main", "grep", GREP, "no matches") for _ in range(5)]

    assert [r.denied_by for r in results] == [None, None, "loop-rescue", "loop-rescue", "loop-rescue"]
    assert results[4].content == (
        "loop-rescue denied this call; it did not run.\n"
        "You have made this exact call 5 times in your last 5 tool calls, with nothing changed in between:\n"
        "- tool: grep\n"
        '- arguments: {"path":"src","pattern":"load_config"}\n'
        "A stronger model reviewed your task, this call and the output you already have, and advises:\n\n"
        "Stop grepping; edit src/cfg.py.\n\n"
        "Follow that advice instead of repeating the call. Only this exact call is blocked; other calls still run."
    )
    assert _invocations(tmp_path / "asked") == 1


def test_an_escalation_driven_without_an_event_loop_gets_its_advice(
    ask_script: AskScript, tmp_path: Path, agent: Agent
) -> None:
    policy = RescuePolicy(RescueConfig(ask_command=str(_counting_advisor(ask_script, tmp_path))))
    state = policy.new_state()
    cache = FingerprintCache()
    actions = [
        run_to_completion(
            policy.on_call(state, ToolCall(agent=agent, call_id=f"c{n}", step=n, tool="grep", args=GREP), cache)
        )
        for n in range(5)
    ]  # as the command hook drives the guard

    assert [a.action if a else None for a in actions] == [None, None, "deny", "deny", "rescue"]
    assert actions[4] is not None
    assert actions[4].advice == "Stop grepping; edit src/cfg.py."


async def test_a_late_call_buys_no_advice_and_is_not_denied(
    ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    command = _counting_advisor(ask_script, tmp_path)
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(command)))
    link = GuardLink(config=config, log=tmp_path / "s.jsonl")
    agent = link.agent("main")
    await agent.start()
    allowed = []
    for n in range(6):  # each reported only with its result: it had run already
        agent.begin_step()
        allowed.append((await agent.call(f"c{n}", "grep", GREP, late=True)).allowed)
        await agent.result(f"c{n}", "no matches")
    link.close()

    assert allowed == [True] * 6
    assert _invocations(tmp_path / "asked") == 0, "advice could have stopped nothing"
    outcome = await replay_log(tmp_path / "s.jsonl", config)
    assert [(v.action, v.shadow) for v in outcome.verdicts] == [("deny", True)] * 4
    assert outcome.differences == []


async def test_question_holds_task_call_output_and_recent_calls_with_secrets_redacted(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    question = tmp_path / "question"
    command = ask_script(f"printf '%s' \"$1\" > {question}\necho advice")
    s = session(ask_command=str(command), redact_patterns=[r"ACME-\d{6}"])
    await s.start("main")
    await s.user("main", "Find the config loader. Our key is sk-ant-abcdefghijklmnopqrstuvwx and ticket ACME-123456.")
    await s.call("main", "read", READ)
    for _ in range(5):
        await s.call("main", "grep", GREP, "src/cfg.py:12: def load_config(): # postgres://app:s3cret@db/app")

    text = question.read_text()
    assert "## The agent's task\nFind the config loader." in text
    assert "## The repeated call (made 5 times in its last 6 tool calls)\ntool: grep\n" in text
    assert 'arguments: {"path":"src","pattern":"load_config"}' in text
    assert "src/cfg.py:12: def load_config(): # postgres://app:[REDACTED]@db/app" in text
    assert '1. read {"path":"src/cfg.py"}\n2. grep {"path":"src","pattern":"load_config"}' in text
    for secret in ("sk-ant-abcdefghijklmnopqrstuvwx", "ACME-123456", "s3cret"):
        assert secret not in text


async def test_question_without_task_or_output_says_so(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    question = tmp_path / "question"
    command = ask_script(f"printf '%s' \"$1\" > {question}\necho advice")
    s = session(ask_command=str(command))
    await s.start("main")
    for _ in range(5):
        await s.call("main", "grep", GREP, "")

    text = question.read_text()
    assert "## The agent's task\n(no user message recorded)\n" in text
    assert "## The output the agent already has from this call\n(none: every earlier attempt" in text


async def test_long_output_is_capped_in_the_question(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    question = tmp_path / "question"
    command = ask_script(f"printf '%s' \"$1\" > {question}\necho advice")
    s = session(ask_command=str(command))
    await s.start("main")
    output = ("x" * 99 + " ") * 100
    for _ in range(5):
        await s.call("main", "grep", GREP, output)

    assert output[:6000] + "… (+4000 more chars)" in question.read_text()


async def test_a_long_window_of_wide_calls_still_fits_the_one_argument_the_ask_gets(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    question = tmp_path / "question"
    command = ask_script(f"printf '%s' \"$1\" > {question}\necho advice")
    s = session(ask_command=str(command), window=200)
    await s.start("main")
    for n in range(195):  # calls of 300 three-byte characters each: 175 KB, past Linux's 128 KiB for one argument
        await s.call("main", "search", {"n": n, "text": "ü" * 300}, "ok")
    tool = "grep " + "ß" * 100_000
    results = [await s.call("main", tool, GREP, "no matches") for _ in range(5)]

    assert results[-1].advice == "advice"
    text = question.read_text()
    assert len(text.encode()) <= 100_000
    assert "earlier calls left out: the question is capped at 100000 bytes)\n" in text
    # the tool's name cut where no rule saw its end: what the cut left of the word is dropped too
    latest = "200. grep … (+100000 more chars) " + '{"path":"src","pattern":"load_config"}\n'
    assert text.endswith(latest)


async def test_a_question_whose_recent_calls_are_cut_never_passes_its_cap(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    sizes = []
    for pad in range(0, 600, 50):  # a task 50 bytes longer each time: the cut falls at every place in a call's line
        question = tmp_path / f"question-{pad}"
        s = session(ask_command=str(ask_script(f"printf '%s' \"$1\" > {question}\necho advice")), window=200)
        await s.start("main")
        await s.user("main", "x" * (1000 + pad))
        for n in range(195):  # lines of about 610 bytes each, 119 KB in all
            await s.call("main", "search", {"n": n, "text": "ü" * 300}, "ok")
        results = [await s.call("main", "grep", GREP, "no matches") for _ in range(5)]
        assert results[-1].advice == "advice"
        assert b"earlier calls left out: the question is capped at 100000 bytes)\n" in question.read_bytes()
        sizes.append(len(question.read_bytes()))
    assert max(sizes) <= 100_000, sizes


async def test_a_question_full_of_text_cut_mid_character_still_fits_the_one_argument_the_ask_gets(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    question = tmp_path / "question"
    command = ask_script(f"printf '%s' \"$1\" > {question}\necho advice")
    s = session(ask_command=str(command), window=200, stall_at=0)
    await s.start("main")
    cut = "\udc80"  # a lone surrogate: three bytes as UTF-8 would take it, six as the argument carries it
    await s.user("main", cut * 4000)
    for n in range(120):
        await s.call("main", f"t{n}{cut * 200}", {}, "ok")
    results = [await s.call("main", "grep", GREP, cut * 6000) for _ in range(5)]

    assert results[-1].advice == "advice"
    text = question.read_bytes()
    assert len(text) <= 100_000
    assert b"earlier calls left out: the question is capped at 100000 bytes)\n" in text
    assert b"\\udc80" * 200 in text  # as the session log writes it


async def test_advice_is_cached_per_signature_for_the_epoch(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    command = _counting_advisor(ask_script, tmp_path)
    s = session(ask_command=str(command), cooldown_ms=0)
    await s.start("main")
    results = [await s.call("main", "grep", GREP) for _ in range(9)]

    assert _invocations(tmp_path / "asked") == 1
    assert all("Stop grepping; edit src/cfg.py." in r.content for r in results[4:])

    await s.call("main", "edit", {"path": "src/cfg.py"})  # new epoch: the cache is void
    for _ in range(5):
        await s.call("main", "grep", GREP)
    assert _invocations(tmp_path / "asked") == 2


async def test_cooldown_spaces_escalations_on_event_time(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    command = _counting_advisor(ask_script, tmp_path)
    s = session(ask_command=str(command), cooldown_ms=45_000)
    await s.start("main")
    for _ in range(5):
        await s.call("main", "grep", GREP)  # ask 1 at t=5s
    for _ in range(5):
        await s.call("main", "read", READ, seconds=2)  # due at t=15s: inside the cooldown
    read = await s.call("main", "read", READ, seconds=40)  # t=55s, 50 s after the last ask
    assert _invocations(tmp_path / "asked") == 2
    assert "advises" in read.content


async def test_cooldown_denial_is_local_and_logged_with_its_reason(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    command = _counting_advisor(ask_script, tmp_path)
    trips = tmp_path / "trips.jsonl"
    s = session(ask_command=str(command), log_file=str(trips))
    await s.start("main")
    for _ in range(5):
        await s.call("main", "grep", GREP)
    results = [await s.call("main", "read", READ) for _ in range(5)]

    assert "advises" not in results[4].content
    last = msgspec.json.decode(trips.read_bytes().splitlines()[-1])
    assert (last["kind"], last["reason"]) == ("deny", "cooldown (40.0 s left)")


async def test_max_rescues_caps_the_session_and_a_user_message_does_not_reset_it(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    command = _counting_advisor(ask_script, tmp_path)
    s = session(ask_command=str(command), max_rescues=2, cooldown_ms=0)
    await s.start("main")
    for n in range(4):
        await s.user("main", f"try again ({n})")
        results = [await s.call("main", "grep", GREP) for _ in range(5)]

    assert _invocations(tmp_path / "asked") == 2
    assert results[4].denied_by == "loop-rescue"
    assert "advises" not in results[4].content


async def test_zero_max_rescues_never_asks(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    command = _counting_advisor(ask_script, tmp_path)
    s = session(ask_command=str(command), max_rescues=0)
    await s.start("main")
    results = [await s.call("main", "grep", GREP) for _ in range(6)]
    assert _invocations(tmp_path / "asked") == 0
    assert results[5].denied_by == "loop-rescue"


async def test_failed_ask_falls_back_to_local_denial_and_refunds_the_budget(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    flag = tmp_path / "working"
    calls = tmp_path / "asked"
    command = ask_script(f"echo x >> {calls}\n[ -f {flag} ] || exit 1\necho 'Edit src/cfg.py.'")
    s = session(ask_command=str(command), max_rescues=1, cooldown_ms=0)
    verdicts: list[str] = []
    s.guard.add_listener(lambda action, _: verdicts.append(action.action))
    await s.start("main")
    failed = [await s.call("main", "grep", GREP) for _ in range(6)]
    flag.touch()
    rescued = await s.call("main", "grep", GREP)

    assert verdicts == ["deny", "deny", "escalation-failed", "escalation-failed", "rescue"]
    assert "advises" not in failed[5].content
    assert "Edit src/cfg.py." in rescued.content
    assert _invocations(calls) == 3  # both failures refunded the single rescue


async def test_hanging_ask_times_out_falls_back_and_refunds(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    command = ask_script("sleep 300")
    trips = tmp_path / "trips.jsonl"
    s = session(ask_command=str(command), ask_timeout_ms=300, max_rescues=1, cooldown_ms=0, log_file=str(trips))
    await s.start("main")
    with anyio.fail_after(_NEVER):
        results = [await s.call("main", "grep", GREP) for _ in range(6)]

    assert results[4].denied_by == "loop-rescue"
    records = [msgspec.json.decode(line) for line in trips.read_bytes().splitlines()]
    failed = [r for r in records if r["kind"] == "escalation-failed"]
    assert len(failed) == 2  # the second attempt ran: the first was refunded
    assert failed[0]["reason"] == "timed out after 300 ms (process group killed)"
    assert failed[0]["rescues_used"] == 0
    assert failed[0]["ask_ms"] >= 300


async def test_missing_ask_command_falls_back_to_local_denial(session: Session, anyio_backend: str) -> None:
    s = session()
    verdicts: list[str] = []
    s.guard.add_listener(lambda action, _: verdicts.append(action.action))
    await s.start("main")
    results = [await s.call("main", "grep", GREP) for _ in range(5)]
    assert verdicts == ["deny", "deny", "escalation-failed"]
    assert results[4].content.endswith("Only this exact call is blocked; other calls still run.")
    assert "advises" not in results[4].content


async def test_stall_escalates_on_redundant_calls_whatever_their_signature(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    question = tmp_path / "question"
    command = ask_script(f"printf '%s' \"$1\" > {question}\necho 'Summarize and stop.'")
    s = session(ask_command=str(command), window=6, rescue_at=5, stall_at=6)
    verdicts: list[tuple[str, int, int | None]] = []
    s.guard.add_listener(lambda a, _: verdicts.append((a.action, a.count, a.threshold)))
    await s.start("main")
    files = [{"path": f"f{n}"} for n in range(4)]
    results = [await s.call("main", "read", f) for _ in range(3) for f in files]  # period 4: 2 per window

    assert verdicts == [("rescue", 6, 6)]
    assert results[9].content.startswith(
        "loop-rescue denied this call; it did not run.\n"
        "You have made 6 redundant tool calls since anything last changed (no successful edit, no new user "
        'message), and this call repeats one of them:\n- tool: read\n- arguments: {"path":"f1"}\n'
    )
    assert "Summarize and stop." in results[9].content
    assert "## The repeated call (the latest of 6 redundant calls since anything last changed)" in question.read_text()


async def test_stall_without_budget_denies_locally(session: Session, anyio_backend: str) -> None:
    s = session(window=6, rescue_at=5, stall_at=6, max_rescues=0)
    await s.start("main")
    files = [{"path": f"f{n}"} for n in range(4)]
    results = [await s.call("main", "read", f) for _ in range(3) for f in files]
    assert [i for i, r in enumerate(results) if r.denied_by] == [9]


async def test_stall_at_zero_disables_stall_detection(session: Session, anyio_backend: str) -> None:
    s = session(window=6, rescue_at=5, stall_at=0)
    await s.start("main")
    files = [{"path": f"f{n}"} for n in range(4)]
    assert [(await s.call("main", "read", f)).denied_by for _ in range(20) for f in files] == [None] * 80


# ---------------------------------------------------------------- concurrency


class HeldAsk:
    """A real ask command that records each question in ``asked``, then
    waits until the test calls ``release`` before printing its last line."""

    def __init__(self, ask_script: AskScript, tmp_path: Path, last_line: str) -> None:
        self.asked = tmp_path / "asked"
        self._release = tmp_path / "release"
        script = f"echo x >> {self.asked}\nwhile [ ! -f {self._release} ]; do sleep 0.02; done\n{last_line}"
        self.command = str(ask_script(script))

    async def until_asked(self) -> None:
        while self.invocations == 0:  # the file exists before its line is written
            await anyio.sleep(0.01)

    def release(self) -> None:
        self._release.touch()

    @property
    def invocations(self) -> int:
        return _invocations(self.asked)


@pytest.fixture
def held_ask(ask_script: AskScript, tmp_path: Path) -> Callable[[str], HeldAsk]:
    return lambda last_line: HeldAsk(ask_script, tmp_path, last_line)


async def test_ask_in_flight_for_one_agent_never_stalls_another(
    session: Session, held_ask: Callable[[str], HeldAsk], anyio_backend: str
) -> None:
    ask = held_ask("echo 'slow advice'")
    s = session(ask_command=ask.command)
    await s.start("main")
    await s.start("other")
    for _ in range(4):
        await s.call("main", "grep", GREP)
    main_done = anyio.Event()
    other: list[ToolResult] = []

    async def stuck_main() -> None:
        await s.call("main", "grep", GREP)
        main_done.set()

    with anyio.fail_after(_NEVER):
        async with anyio.create_task_group() as group:
            group.start_soon(stuck_main)
            await ask.until_asked()
            for _ in range(4):
                other.append(await s.call("other", "read", READ))
            assert not main_done.is_set()  # other's four calls went through while main's ask ran
            ask.release()

    assert [r.denied_by for r in other] == [None, None, "loop-rescue", "loop-rescue"]
    assert main_done.is_set()


async def test_parallel_calls_share_one_ask(
    session: Session, held_ask: Callable[[str], HeldAsk], anyio_backend: str
) -> None:
    ask = held_ask("echo 'shared advice'")
    s = session(ask_command=ask.command, cooldown_ms=0)
    await s.start("main")
    for _ in range(3):
        await s.call("main", "grep", GREP)
    results: list[ToolResult] = []

    async def parallel(step: int) -> None:
        results.append(await s.call("main", "grep", GREP, step=step))

    with anyio.fail_after(_NEVER):
        async with anyio.create_task_group() as group:
            group.start_soon(parallel, 9)
            group.start_soon(parallel, 9)
            group.start_soon(parallel, 9)
            await ask.until_asked()
            await anyio.sleep(0.1)
            ask.release()

    assert ask.invocations == 1
    assert sum("shared advice" in r.content for r in results) == 2  # the 5th and 6th; the 4th is a plain deny


async def test_parallel_call_waiting_on_a_failed_ask_is_denied_locally(
    session: Session, held_ask: Callable[[str], HeldAsk], anyio_backend: str
) -> None:
    ask = held_ask("exit 1")
    s = session(ask_command=ask.command, cooldown_ms=0)
    verdicts: list[str] = []
    s.guard.add_listener(lambda action, _: verdicts.append(action.action))
    await s.start("main")
    for _ in range(4):
        await s.call("main", "grep", GREP)

    with anyio.fail_after(_NEVER):
        async with anyio.create_task_group() as group:
            group.start_soon(s.call, "main", "grep", GREP)
            await ask.until_asked()
            group.start_soon(s.call, "main", "grep", GREP)
            await anyio.sleep(0.1)
            ask.release()

    assert ask.invocations == 1
    assert sorted(verdicts[2:]) == ["deny", "escalation-failed"]


async def test_advice_arriving_after_progress_is_delivered_but_not_cached(
    session: Session, held_ask: Callable[[str], HeldAsk], anyio_backend: str
) -> None:
    ask = held_ask("echo 'late advice'")
    s = session(ask_command=ask.command, cooldown_ms=0)
    await s.start("main")
    for _ in range(4):
        await s.call("main", "grep", GREP)
    rescued: list[ToolResult] = []

    async def fifth() -> None:
        rescued.append(await s.call("main", "grep", GREP))

    with anyio.fail_after(_NEVER):
        async with anyio.create_task_group() as group:
            group.start_soon(fifth)
            await ask.until_asked()
            await s.call("main", "edit", {"path": "src/cfg.py"})
            ask.release()
    assert "late advice" in rescued[0].content
    for _ in range(5):
        await s.call("main", "grep", GREP)
    assert ask.invocations == 2


@pytest.mark.parametrize(
    "settings",
    [{"max_rescues": 1, "cooldown_ms": 0}, {}],  # one rescue in all; the default cooldown of 45 s
    ids=["budget", "cooldown"],
)
async def test_a_cancelled_ask_gives_back_its_budget_and_its_cooldown(
    settings: dict[str, Any], ask_script: AskScript, tmp_path: Path, agent: Agent, anyio_backend: str
) -> None:
    calls, answer = tmp_path / "asked", tmp_path / "answer"
    command = ask_script(f"echo x >> {calls}\n[ -f {answer} ] && exec echo 'Edit src/cfg.py.'\nsleep 300")
    policy = RescuePolicy(RescueConfig(ask_command=str(command), **settings))
    state = policy.new_state()
    cache = FingerprintCache()

    def call(n: int) -> ToolCall:
        return ToolCall(agent=agent, call_id=f"c{n}", step=n, tool="grep", args=GREP, ts=1000.0 + n)

    for n in range(4):
        await policy.on_call(state, call(n), cache)
    with anyio.fail_after(_NEVER):
        async with anyio.create_task_group() as group:
            group.start_soon(policy.on_call, state, call(4), cache)  # the agent is cancelled mid-ask
            while _invocations(calls) == 0:  # the file exists before its line is written
                await anyio.sleep(0.01)
            group.cancel_scope.cancel()
        answer.touch()
        action = await policy.on_call(state, call(5), cache)  # 1 s later: asks again

    assert action is not None
    assert (action.action, action.advice, _invocations(calls)) == ("rescue", "Edit src/cfg.py.", 2)
    assert state.used == 1


async def test_a_cancelled_ask_leaves_the_cooldown_of_a_later_ask_in_place(
    held_ask: Callable[[str], HeldAsk], agent: Agent, anyio_backend: str
) -> None:
    ask = held_ask("echo 'Read src/cfg.py.'")
    policy = RescuePolicy(RescueConfig(ask_command=ask.command, window=20, cooldown_ms=1000))
    state = policy.new_state()
    cache = FingerprintCache()

    def call(n: int, tool: str, ts: float) -> ToolCall:
        return ToolCall(agent=agent, call_id=f"c{n}", step=n, tool=tool, args=GREP, ts=ts)

    for n, tool in enumerate(["grep", "read", "find"] * 4):
        await policy.on_call(state, call(n, tool, n / 10), cache)
    first = anyio.CancelScope()
    later: list[Action | None] = []

    async def cancelled() -> None:
        with first:
            await policy.on_call(state, call(20, "grep", 10.0), cache)

    async def answered() -> None:
        later.append(await policy.on_call(state, call(21, "read", 12.0), cache))  # past the first ask's cooldown

    with anyio.fail_after(_NEVER):
        async with anyio.create_task_group() as group:
            group.start_soon(cancelled)
            await ask.until_asked()
            group.start_soon(answered)
            while ask.invocations < 2:
                await anyio.sleep(0.01)
            first.cancel()
            ask.release()
        action = await policy.on_call(state, call(22, "find", 12.5), cache)  # 0.5 s after the later ask

    assert later[0] is not None
    assert later[0].action == "rescue"
    assert action is not None
    assert (action.action, ask.invocations) == ("deny", 2)


async def test_output_of_a_call_outside_the_window_is_not_kept(agent: Agent, anyio_backend: str) -> None:
    policy = RescuePolicy(RescueConfig(ask_command="/nonexistent"))
    state = policy.new_state()
    cache = FingerprintCache()
    await policy.on_call(state, ToolCall(agent=agent, call_id="c1", step=1, tool="ls", args={}), cache)
    result = ToolResult(agent=agent, call_id="c0", step=1, tool="grep", args=GREP, content="old output")

    assert policy.on_result(state, result, cache) is None
    assert state.outputs == {}


@pytest.mark.parametrize("mode", ["shadow", "enforce"])
async def test_a_shadow_log_whose_ask_answered_replays_as_it_ran(
    mode: str, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    calls = tmp_path / "asked"
    advice = "Stop grepping; edit src/cfg.py."
    command = ask_script(f"echo x >> {calls}\n[ $(wc -l < {calls}) -gt 1 ] || exit 1\necho '{advice}'")  # fails once
    config = Config(
        remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(command), cooldown_ms=0, mode=mode)
    )
    log = tmp_path / "s.jsonl"
    s = Script(log, config)
    await s.start("main")
    results = [await s.call("main", "grep", GREP, "no matches") for _ in range(7)]
    s.close()
    assert [r.denied_by is None for r in results] == [True, True] + [mode == "shadow"] * 5

    outcome = await replay_log(log, config)
    assert outcome.differences == []
    assert [(v.action, v.shadow) for v in outcome.verdicts] == [
        (action, mode == "shadow") for action in ("deny", "deny", "escalation-failed", "rescue", "rescue")
    ]
    assert _invocations(calls) == 2, "the replay answered from the log, not the ask command"
    answers = RecordedAnswers.from_log(log)
    assert answers.answers == {("main", "c6"): advice, ("main", "c7"): advice}
    with read_log(log) as reader:
        assert RecordedAnswers.from_events(list(reader)).answers == answers.answers


async def test_a_replay_told_to_ask_runs_the_ask_command_again(
    ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    command = _counting_advisor(ask_script, tmp_path)
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(command), mode="shadow"))
    s = Script(tmp_path / "s.jsonl", config)
    await s.start("main")
    for _ in range(5):
        await s.call("main", "grep", GREP, "no matches")
    s.close()

    outcome = await replay_log(tmp_path / "s.jsonl", config, live_asks=True)
    assert outcome.differences == []
    assert _invocations(tmp_path / "asked") == 2


# ---------------------------------------------------------------- observability


async def test_trip_log_has_one_line_per_trip(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    trips = tmp_path / "logs" / "loop-rescue.jsonl"
    s = session(ask_command=str(_counting_advisor(ask_script, tmp_path)), log_file=str(trips))
    await s.start("main")
    for _ in range(6):
        await s.call("main", "grep", GREP)

    records = [msgspec.json.decode(line) for line in trips.read_bytes().splitlines()]
    signature = fingerprint("grep", GREP).digest.hex()
    assert [(r["kind"], r["count"], r["cached"], r["trigger"]) for r in records] == [
        ("deny", 3, False, "repeat"),
        ("deny", 4, False, "repeat"),
        ("rescue", 5, False, "repeat"),
        ("rescue", 6, True, "repeat"),
    ]
    assert {(r["agent"], r["tool"], r["signature"], r["epoch"]) for r in records} == {("main", "grep", signature, 0)}
    assert [r["ts"] for r in records] == [1_764_489_603.0, 1_764_489_604.0, 1_764_489_605.0, 1_764_489_606.0]
    assert records[2]["ask_ms"] > 0
    assert records[3]["ask_ms"] is None
    assert trips.stat().st_mode & 0o777 == 0o600


async def test_text_cut_mid_character_stops_neither_the_ask_nor_the_trip_log(
    session: Session, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    question = tmp_path / "question"
    command = ask_script(f"printf '%s' \"$1\" > {question}\necho 'Read src/cfg.py instead.'")
    trips = tmp_path / "trips.jsonl"
    s = session(ask_command=str(command), log_file=str(trips))
    agent = "worker-\udce9"  # a lone surrogate, as surrogateescape decoding or a JavaScript cut leaves one
    await s.start(agent)
    results = [await s.call(agent, "grep", GREP, "build log: done \ud83d") for _ in range(6)]

    assert [r.denied_by for r in results] == [None, None, "loop-rescue", "loop-rescue", "loop-rescue", "loop-rescue"]
    assert "Read src/cfg.py instead." in results[4].content
    assert "build log: done \\ud83d" in question.read_text()  # as the session log writes it
    records = [msgspec.json.decode(line) for line in trips.read_bytes().splitlines()]
    assert [r["kind"] for r in records] == ["deny", "deny", "rescue", "rescue"]
    assert {r["agent"] for r in records} == {"worker-\\udce9"}


@pytest.mark.parametrize("room", [0, 10])
def test_a_trip_the_log_has_no_room_for_is_reported_and_never_torn(
    room: int, tmp_path: Path, file_size_limit: Callable[[int], None]
) -> None:
    path = tmp_path / "trips.jsonl"
    trips = TripLog(str(path))
    trip = Trip(
        ts=1.0, kind="deny", agent="main", tool="grep", call_id="c3", signature="00", count=3, epoch=0,
        trigger="repeat", redundant=2, rescues_used=0,
    )  # fmt: skip
    trips.record(trip)
    size = path.stat().st_size
    with capture_logs() as logs:
        file_size_limit(size + room)  # the next line fits not at all, or only its first bytes
        try:
            trips.record(trip)
        finally:
            file_size_limit(1 << 40)

    assert "rescue.trip_log_failed" in [e["event"] for e in logs]
    assert path.stat().st_size == size


async def test_trips_are_structlog_events_too(session: Session, anyio_backend: str) -> None:
    s = session()
    await s.start("main")
    with capture_logs() as logs:
        for _ in range(3):
            await s.call("main", "grep", GREP)
    trips = [e for e in logs if e["event"] == "rescue.trip"]
    assert [(t["kind"], t["agent"], t["tool"], t["count"]) for t in trips] == [("deny", "main", "grep", 3)]


async def test_empty_log_file_writes_nothing(session: Session, tmp_path: Path, anyio_backend: str) -> None:
    s = session(log_file="")
    await s.start("main")
    before = set(tmp_path.iterdir())
    for _ in range(3):
        await s.call("main", "grep", GREP)
    assert set(tmp_path.iterdir()) == before


async def test_unwritable_log_file_never_breaks_the_denial(
    session: Session, tmp_path: Path, anyio_backend: str
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    s = session(log_file=str(blocker / "trips.jsonl"))
    await s.start("main")
    with capture_logs() as logs:
        results = [await s.call("main", "grep", GREP) for _ in range(3)]
    assert results[2].denied_by == "loop-rescue"
    assert any(e["event"] == "rescue.trip_log_failed" for e in logs)


async def test_verdicts_name_policy_threshold_and_count(session: Session, anyio_backend: str) -> None:
    s = session()
    actions: list[tuple[str, str, int, int | None]] = []
    s.guard.add_listener(lambda a, _: actions.append((a.policy, a.action, a.count, a.threshold)))
    await s.start("main")
    for _ in range(6):
        await s.call("main", "grep", GREP)
    assert actions == [
        ("rescue", "deny", 3, 3),
        ("rescue", "deny", 4, 3),
        ("rescue", "escalation-failed", 5, 5),
        ("rescue", "deny", 6, 5),  # inside the cooldown after the failed ask
    ]


async def test_guard_builds_rescue_only_when_enabled(missing_ask_command: str) -> None:
    assert [p.name for p in Guard().policies] == ["remind"]
    config = Config(rescue=RescueConfig(ask_command=missing_ask_command))
    assert [p.name for p in Guard(config).policies] == ["remind", "rescue"]


def test_default_ask_command_is_ask_claude_in_the_home_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    assert RescuePolicy(RescueConfig()).command.command == "/home/someone/.local/bin/ask-claude"


@pytest.mark.anyio
async def test_every_call_waiting_on_one_ask_is_released_when_it_finishes(anyio_backend: str) -> None:
    import anyio

    from guard.policies.rescue import _Pending

    pending = _Pending()
    released: list[int] = []

    async def wait(n: int) -> None:
        await pending.wait()
        released.append(n)

    async with anyio.create_task_group() as group:
        for n in range(3):
            group.start_soon(wait, n)
        await anyio.wait_all_tasks_blocked()
        assert released == []
        pending.advice = "read the file"
        pending.finish()
    assert sorted(released) == [0, 1, 2]


def test_an_epoch_of_endless_new_calls_remembers_the_latest_distinct_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    import guard.policies.rescue as rescue

    monkeypatch.setattr(rescue, "_SEEN_KEPT", 3)
    state = RescuePolicy(RescueConfig()).new_state()
    for n in range(5):
        state.observe("grep", fingerprint("grep", {"n": n}), 10)
    assert not state.observe("grep", fingerprint("grep", {"n": 0}), 10)[1], "too long ago: forgotten"
    assert state.observe("grep", fingerprint("grep", {"n": 4}), 10)[1], "a recent one is redundant"
