"""The real Codex CLI and Gemini CLI with the hooks ``hook-settings --agent``
prints, end to end: each CLI runs offline against its scripted model API
(``tests/agent_clis.py``), starts the hook command (or forwards to a real
``serve``) for every hook event, and what the model reads next is recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bus import AgentStatus, ToolResult, read_log
from guard import GENTLE_REMINDER
from guard.adapters.claude_hooks import HALTED_BY
from tests.agent_clis import FakeGemini, FakeResponses, shell
from tests.claude_cli import text
from tests.guard.adapters.conftest import TURNS_DENIED
from tests.guard.server.conftest import StartServer

pytestmark = pytest.mark.slow

LOOP_DENIED = "loop-detector denied this call; it did not run."
LEAVES_A_TRACE = "echo ran >> ran.txt; echo same"
HALTING = "[remind]\nenabled = false\n\n[turns]\nthreshold = 2\ndeny_after = 1\nhalt_after = 1\n"

FakeCLI = FakeResponses | FakeGemini


def printed_settings(agent: str, *options: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "guard", "hook-settings", "--agent", agent, *options],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed: dict[str, Any] = json.loads(done.stdout)
    return printed


def run(api: FakeCLI, settings: dict[str, Any], prompt: str = "print same") -> subprocess.CompletedProcess[str]:
    done = api.run(prompt, hooks=settings if isinstance(api, FakeResponses) else settings["hooks"])
    assert done.returncode in (0, 1), done.stderr
    return done


def runs(api: FakeCLI) -> int:
    trace = api.work / "ran.txt"
    return len(trace.read_text().splitlines()) if trace.exists() else 0


def one_log(state: Path) -> Path:
    (log,) = state.glob("*.jsonl")
    return log


def replays_cleanly(log: Path, *config: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "guard", "replay", str(log), "--check", *config],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(params=["codex", "gemini-cli"])
def cli(request: pytest.FixtureRequest) -> FakeCLI:
    api: FakeCLI = request.getfixturevalue("fake_responses" if request.param == "codex" else "fake_gemini")
    return api


def agent_of(api: FakeCLI) -> str:
    return "codex" if isinstance(api, FakeResponses) else "gemini-cli"


def calls(api: FakeCLI, command: str, times: int) -> list[list[dict[str, Any]]]:
    runtime = "codex" if isinstance(api, FakeResponses) else "gemini"
    return [[shell(command, runtime)] for _ in range(times)]


def test_the_reminder_reaches_the_model_by_the_fourth_call(cli: FakeCLI, tmp_path: Path) -> None:
    state = tmp_path / "state"
    cli.script(*calls(cli, LEAVES_A_TRACE, 6), [text("done")])
    run(cli, printed_settings(agent_of(cli), "--state-dir", str(state)))

    assert runs(cli) == 6
    assert GENTLE_REMINDER not in cli.texts_after_last_call(2)
    assert GENTLE_REMINDER in cli.texts_after_last_call(3), "the third call's result carried it"
    replays_cleanly(one_log(state))


def test_recommended_denies_a_repeat_before_it_runs(cli: FakeCLI, tmp_path: Path) -> None:
    state = tmp_path / "state"
    cli.script(*calls(cli, LEAVES_A_TRACE, 6), [text("done")])
    run(cli, printed_settings(agent_of(cli), "--config", "recommended", "--state-dir", str(state)))

    assert runs(cli) < 6
    denied_at = next(n for n in range(len(cli.requests)) if LOOP_DENIED in cli.texts_after_last_call(n))
    assert runs(cli) == denied_at - 1 + (denied_at == 0), "no call ran once the first was denied"
    replays_cleanly(one_log(state), "--config", "recommended")


def test_a_halt_ends_the_gemini_run(fake_gemini: FakeGemini, tmp_path: Path) -> None:
    state, config = tmp_path / "state", tmp_path / "guard.toml"
    config.write_text(HALTING)
    fake_gemini.script(*calls(fake_gemini, LEAVES_A_TRACE, 6), [text("never asked")])
    run(fake_gemini, printed_settings("gemini-cli", "--config", str(config), "--state-dir", str(state)))

    assert fake_gemini.remaining > 0, "the run ended before the script did"
    log = one_log(state)
    assert [e.status for e in read_log(log) if isinstance(e, AgentStatus) and e.status == "halt-requested"]
    replays_cleanly(log, "--config", str(config))


def test_a_halt_is_contained_in_codex(fake_responses: FakeResponses, tmp_path: Path) -> None:
    state, config = tmp_path / "state", tmp_path / "guard.toml"
    config.write_text(HALTING)
    fake_responses.script(*calls(fake_responses, LEAVES_A_TRACE, 6), [text("stopped")])
    run(fake_responses, printed_settings("codex", "--config", str(config), "--state-dir", str(state)))

    log = one_log(state)
    events = list(read_log(log))
    (halt,) = [e for e in events if isinstance(e, AgentStatus) and e.status == "halt-requested"]
    contained = [e for e in events if isinstance(e, ToolResult) and e.denied_by == HALTED_BY]
    assert contained, "the calls after the halt were denied"
    assert all(e.content.startswith(halt.reason or "") for e in contained)
    assert TURNS_DENIED in "\n".join(fake_responses.texts_after_last_call(n) for n in range(len(fake_responses.requests)))
    assert halt.reason in fake_responses.texts_after_last_call(len(fake_responses.requests) - 1)
    replays_cleanly(log, "--config", str(config))


def test_a_missing_guard_lets_every_call_run(cli: FakeCLI, tmp_path: Path) -> None:
    printed = json.dumps(printed_settings(agent_of(cli), "--state-dir", str(tmp_path / "state")))
    binary = json.loads(printed)["hooks"]
    command = next(iter(binary.values()))[0]["hooks"][0]["command"]
    missing = json.loads(printed.replace(json.dumps(command.split(" ")[0])[1:-1], "/nonexistent/bin/repeat-tool-guard"))
    cli.script(*calls(cli, LEAVES_A_TRACE, 6), [text("done")])
    run(cli, missing)

    assert runs(cli) == 6
    assert "Tool execution blocked" not in cli.texts_after_last_call(6)
    assert not (tmp_path / "state").exists()


def test_the_same_through_serve(cli: FakeCLI, start_server: StartServer, tmp_path: Path) -> None:
    server = start_server("--config", "recommended")
    cli.script(*calls(cli, LEAVES_A_TRACE, 6), [text("done")])
    run(cli, printed_settings(agent_of(cli), "--http", server.url))

    assert runs(cli) < 6
    assert any(LOOP_DENIED in cli.texts_after_last_call(n) for n in range(len(cli.requests)))
    assert server.stop() == 0
    (log,) = server.state_dir.glob("*.jsonl")
    replays_cleanly(log, "--config", "recommended")
