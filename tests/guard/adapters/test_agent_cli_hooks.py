"""The real Codex CLI and Gemini CLI with the hooks ``hook-settings --agent``
prints, end to end: each CLI runs offline against its scripted model API
(``tests/agent_clis.py``), starts the hook command for every hook event, and
what the model reads next is recorded. Gemini CLI's own loop detection is
off: the guard alone is under test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bus import AgentStatus, ToolCall, ToolResult, read_log
from guard import GENTLE_REMINDER
from guard.adapters.claude_hooks import HALTED_BY
from tests.agent_clis import FakeGemini, FakeResponses, printed_settings, replays_cleanly, shell
from tests.claude_cli import Block, text

pytestmark = pytest.mark.slow

LOOP_DENIED = "loop-detector denied this call; it did not run."
LEAVES_A_TRACE = """python3 -c 'open("ran.txt", "a").write("ran\\n")'; echo same"""
HALTING = "[remind]\nenabled = false\n\n[turns]\nthreshold = 2\ndeny_after = 1\nhalt_after = 1\n"

FakeCLI = FakeResponses | FakeGemini


@pytest.fixture(params=["codex", "gemini-cli"])
def cli(request: pytest.FixtureRequest) -> FakeCLI:
    api: FakeCLI = request.getfixturevalue("fake_responses" if request.param == "codex" else "fake_gemini")
    return api


def one_log(state: Path) -> Path:
    (log,) = state.glob("*.jsonl")
    return log


def test_the_reminder_reaches_the_model_by_the_fourth_call(cli: FakeCLI, tmp_path: Path) -> None:
    state = tmp_path / "state"
    cli.script(*cli.shell_calls(LEAVES_A_TRACE, 6), [text("done")])
    cli.run_hooks(cli_settings := printed_settings(cli.agent, "--state-dir", str(state)))

    assert "repeat-tool-guard" in json.dumps(cli_settings)
    assert cli.runs() == 6
    assert GENTLE_REMINDER not in cli.texts_after_last_call(2)
    assert GENTLE_REMINDER in cli.texts_after_last_call(3), "the third call's result carried it"
    replays_cleanly(one_log(state))


def test_recommended_denies_a_repeat_before_it_runs(cli: FakeCLI, tmp_path: Path) -> None:
    state = tmp_path / "state"
    cli.script(*cli.shell_calls(LEAVES_A_TRACE, 6), [text("done")])
    cli.run_hooks(printed_settings(cli.agent, "--config", "recommended", "--state-dir", str(state)))

    denied = [n for n in range(1, len(cli.requests)) if LOOP_DENIED in cli.texts_after_last_call(n)]
    assert denied, "a repeat was denied"
    assert cli.runs() == denied[0] - 1, "the denied call did not run"
    replays_cleanly(one_log(state), "--config", "recommended")


def test_a_gemini_shell_command_failing_is_recorded_as_a_failure(fake_gemini: FakeGemini, tmp_path: Path) -> None:
    """Gemini CLI wraps what the model reads of a command in
    ``<untrusted_context>`` and reports a non-zero exit only inside it."""
    state = tmp_path / "state"
    failing = """python3 -c 'import sys; open("ran.txt", "a").write("ran\\n"); sys.exit(3)'"""
    fake_gemini.script(*fake_gemini.shell_calls(failing, 3), [text("done")])
    fake_gemini.run_hooks(printed_settings("gemini-cli", "--state-dir", str(state)))

    results = [e for e in read_log(one_log(state)) if isinstance(e, ToolResult)]
    assert [(r.content.startswith("<untrusted_context>"), r.is_error) for r in results] == [(True, True)] * 3
    replays_cleanly(one_log(state))


def test_a_halt_ends_the_gemini_run(fake_gemini: FakeGemini, tmp_path: Path) -> None:
    state, config = tmp_path / "state", tmp_path / "guard.toml"
    config.write_text(HALTING)
    fake_gemini.script(*fake_gemini.shell_calls(LEAVES_A_TRACE, 6), [text("never asked")])
    fake_gemini.run_hooks(printed_settings("gemini-cli", "--config", str(config), "--state-dir", str(state)))

    log = one_log(state)
    (halt,) = [e for e in read_log(log) if isinstance(e, AgentStatus) and e.status == "halt-requested"]
    asked = len(fake_gemini.requests)
    assert fake_gemini.remaining == 7 - asked > 0, "no model request after the halt"
    assert not [e for e in read_log(log) if isinstance(e, ToolResult) and (e.seq or 0) > (halt.seq or 0)]
    replays_cleanly(log, "--config", str(config))


def test_a_halt_is_contained_in_codex(fake_responses: FakeResponses, tmp_path: Path) -> None:
    state, config = tmp_path / "state", tmp_path / "guard.toml"
    config.write_text(HALTING)
    other = """python3 -c 'open("ran.txt", "a").write("other\\n")'"""
    fake_responses.script(
        *fake_responses.shell_calls(LEAVES_A_TRACE, 4), *fake_responses.shell_calls(other, 2), [text("stopped")]
    )
    fake_responses.run_hooks(printed_settings("codex", "--config", str(config), "--state-dir", str(state)))

    log = one_log(state)
    events = list(read_log(log))
    (halt,) = [e for e in events if isinstance(e, AgentStatus) and e.status == "halt-requested"]
    after = [e for e in events if isinstance(e, ToolResult) and (e.seq or 0) > (halt.seq or 0)]
    assert [e.denied_by for e in after] == [HALTED_BY, HALTED_BY], "the calls after the halt did not run"
    assert "other" not in (fake_responses.work / "ran.txt").read_text()
    assert halt.reason
    assert halt.reason in fake_responses.texts_after_last_call(len(fake_responses.requests) - 1)
    replays_cleanly(log, "--config", str(config))


def test_a_missing_guard_lets_every_call_run(cli: FakeCLI, tmp_path: Path) -> None:
    printed = printed_settings(cli.agent, "--state-dir", str(tmp_path / "state"))
    binary = next(iter(printed["hooks"].values()))[0]["hooks"][0]["command"].split(" ")[0]
    missing = json.loads(json.dumps(printed).replace(binary, "/nonexistent/bin/repeat-tool-guard"))
    cli.script(*cli.shell_calls(LEAVES_A_TRACE, 6), [text("done")])
    cli.run_hooks(missing)

    assert cli.runs() == 6
    assert all("blocked" not in cli.texts_after_last_call(n) for n in range(1, 7))
    assert not (tmp_path / "state").exists()


def test_codex_edits_by_apply_patch_count_as_progress(fake_responses: FakeResponses, tmp_path: Path) -> None:
    """Codex applies a patch with a pre hook and no post hook: the patch is
    an edit all the same, so the same failing test after each one runs."""
    state = tmp_path / "state"
    (fake_responses.work / "mod.py").write_text("x = 0\n")
    (fake_responses.work / "test.py").write_text("import sys; print('FAIL: expected 42'); sys.exit(1)\n")
    patch = (
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: mod.py\n@@\n-x = {0}\n+x = {1}\n*** End Patch\nEOF\n"
    )
    steps = [[shell(command, "codex")] for n in range(4) for command in (patch.format(n, n + 1), "python3 test.py")]
    fake_responses.script(*steps, [text("done")])
    fake_responses.run_hooks(printed_settings("codex", "--config", "recommended", "--state-dir", str(state)))

    assert (fake_responses.work / "mod.py").read_text() == "x = 4\n"
    after_tests = [fake_responses.texts_after_last_call(n) for n in range(2, 9, 2)]
    assert all("FAIL: expected 42" in said for said in after_tests), "every test run ran"
    patched = [e for e in read_log(one_log(state)) if isinstance(e, ToolResult) and "apply_patch" in str(e.args)]
    assert len(patched) == 4
    replays_cleanly(one_log(state), "--config", "recommended")


def test_codex_runs_the_same_command_in_other_directories_as_other_calls(
    fake_responses: FakeResponses, tmp_path: Path
) -> None:
    """Codex sends the directory the model chose (``workdir``) as the hook
    payload's ``cwd`` only: the guard adds it to the call."""
    state = tmp_path / "state"
    services = ["svc-a", "svc-b", "svc-c", "svc-d"]
    steps = fake_responses.service_checks(services)
    fake_responses.script(*steps, [text("done")])
    fake_responses.run_hooks(printed_settings("codex", "--config", "recommended", "--state-dir", str(state)))

    assert sorted(p.parent.name for p in fake_responses.work.glob("*/checked")) == services
    assert not any(LOOP_DENIED in fake_responses.texts_after_last_call(n) for n in range(1, 5))
    replays_cleanly(one_log(state), "--config", "recommended")


def invoke_agent(prompt: str) -> Block:
    """Gemini CLI's main agent running its ``generalist`` subagent on ``prompt``."""
    return {
        "type": "tool_use",
        "id": None,
        "name": "invoke_agent",
        "input": {"agent_name": "generalist", "prompt": prompt},
    }


COMPLETE_TASK: Block = {
    "type": "tool_use",
    "id": None,
    "name": "complete_task",
    "input": {"result": {"response": "ok"}},
}


def guard_said(api: FakeGemini) -> list[str]:
    """What the model read of the guard's, main agent and subagent alike."""
    said = [api.texts_after_last_call(n) for n in range(1, len(api.requests))]
    said += [api.texts_after_last_call(n, subagent=True) for n in range(1, len(api.subagent_requests))]
    return [text for text in said if LOOP_DENIED in text or GENTLE_REMINDER in text or "loop-detector" in text]


def agents_of_calls(log: Path) -> list[tuple[str, str | None, str]]:
    """Each recorded call's agent (the session's main agent as ``main``), that agent's parent, and tool."""
    events = list(read_log(log))
    session = next(e.agent.id for e in events if isinstance(e, AgentStatus) and e.agent is not None)
    named = {session: "main"}
    return [
        (named.get(e.agent.id, e.agent.id.partition("@")[0]), e.agent.parent_id and named[e.agent.parent_id], e.tool)
        for e in events
        if isinstance(e, ToolCall) and e.agent is not None
    ]


@pytest.mark.parametrize("config", [(), ("--config", "recommended")], ids=["remind", "recommended"])
def test_a_gemini_subagents_calls_count_apart_from_the_main_agents(
    fake_gemini: FakeGemini, tmp_path: Path, config: tuple[str, ...]
) -> None:
    """The main agent runs a command, then delegates (``invoke_agent``) to a
    subagent that runs it twice: the subagent's hooks carry the main agent's
    session id and no agent id, yet its calls are a child agent's."""
    state = tmp_path / "state"
    same = shell(LEAVES_A_TRACE, "gemini-cli")
    fake_gemini.script([same], [invoke_agent("SUBTASK: check it")], [text("done")])
    fake_gemini.script_subagent("SUBTASK", [same], [same], [COMPLETE_TASK])
    fake_gemini.run_hooks(printed_settings("gemini-cli", *config, "--state-dir", str(state)))

    assert fake_gemini.runs() == 3
    assert len(fake_gemini.subagent_requests) == 3
    assert guard_said(fake_gemini) == []
    assert agents_of_calls(one_log(state)) == [
        ("main", None, "run_shell_command"),
        ("main", None, "invoke_agent"),
        ("generalist", "main", "run_shell_command"),
        ("generalist", "main", "run_shell_command"),
        ("generalist", "main", "complete_task"),
    ]
    replays_cleanly(one_log(state), *config)


def test_the_main_agents_calls_beside_its_invoke_agent_stay_the_main_agents(
    fake_gemini: FakeGemini, tmp_path: Path
) -> None:
    """Calls of the response that delegates run beside the subagent (in
    parallel): they are the main agent's, the subagent's the child's."""
    state = tmp_path / "state"
    same = shell(LEAVES_A_TRACE, "gemini-cli")
    fake_gemini.script([shell("echo before", "gemini-cli")], [same, invoke_agent("SUBTASK: check it"), same])
    fake_gemini.script([text("done")])
    fake_gemini.script_subagent("SUBTASK", [same], [same], [COMPLETE_TASK])
    fake_gemini.run_hooks(printed_settings("gemini-cli", "--config", "recommended", "--state-dir", str(state)))

    assert fake_gemini.runs() == 4
    assert guard_said(fake_gemini) == []
    assert sorted(agents_of_calls(one_log(state))) == sorted(
        [("main", None, "run_shell_command")] * 3
        + [("main", None, "invoke_agent")]
        + [("generalist", "main", "run_shell_command")] * 2
        + [("generalist", "main", "complete_task")]
    )
    replays_cleanly(one_log(state), "--config", "recommended")
