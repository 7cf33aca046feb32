"""Codex and Gemini CLI against a real ``repeat-tool-guard serve``: the command
hooks ``hook-settings --agent NAME --http URL`` prints forward every hook
payload to ``/hooks/<cli>``; each CLI runs offline against its scripted model
API (``tests/agent_clis.py``)."""

from __future__ import annotations

import pytest

from bus import ToolCall, read_log
from tests.agent_clis import FakeGemini, FakeResponses, printed_settings, replays_cleanly, shell
from tests.claude_cli import text
from tests.guard.server.conftest import StartServer

pytestmark = pytest.mark.slow

LOOP_DENIED = "loop-detector denied this call; it did not run."
LEAVES_A_TRACE = """python3 -c 'open("ran.txt", "a").write("ran\\n")'; echo same"""


@pytest.fixture(params=["codex", "gemini-cli"])
def cli(request: pytest.FixtureRequest) -> FakeResponses | FakeGemini:
    api: FakeResponses | FakeGemini = request.getfixturevalue(
        "fake_responses" if request.param == "codex" else "fake_gemini"
    )
    return api


def test_recommended_denies_a_repeat_through_serve(cli: FakeResponses | FakeGemini, start_server: StartServer) -> None:
    server = start_server("--config", "recommended")
    cli.script(*cli.shell_calls(LEAVES_A_TRACE, 6), [text("done")])
    cli.run_hooks(printed_settings(cli.agent, "--http", server.url))

    denied = [n for n in range(1, len(cli.requests)) if LOOP_DENIED in cli.texts_after_last_call(n)]
    assert denied, "a repeat was denied"
    assert cli.runs() == denied[0] - 1
    assert server.stop() == 0
    (log,) = server.state_dir.glob("*.jsonl")
    replays_cleanly(log, "--config", "recommended")


def test_a_server_that_is_down_lets_every_call_run(cli: FakeResponses | FakeGemini) -> None:
    cli.script(*cli.shell_calls(LEAVES_A_TRACE, 6), [text("done")])
    cli.run_hooks(printed_settings(cli.agent, "--http", "http://127.0.0.1:9"))

    assert cli.runs() == 6


def mcp_config(url: str) -> str:
    return f'[mcp_servers.repeat_tool_guard]\nurl = "{url}/mcp"\n'


def test_codex_mcp_tool_hooks_deny_a_repeat_through_serve(
    fake_responses: FakeResponses, start_server: StartServer
) -> None:
    server = start_server("--config", "recommended")
    fake_responses.script(*fake_responses.shell_calls(LEAVES_A_TRACE, 6), [text("done")])
    hooks = printed_settings("codex", "--http", server.url, "--mcp")
    fake_responses.run("go", hooks=hooks, config=mcp_config(server.url))

    denied = [
        n for n in range(1, len(fake_responses.requests)) if LOOP_DENIED in fake_responses.texts_after_last_call(n)
    ]
    assert denied, "a repeat was denied"
    assert fake_responses.runs() == denied[0] - 1
    assert server.stop() == 0
    (log,) = server.state_dir.glob("*.jsonl")
    replays_cleanly(log, "--config", "recommended")


def test_codex_mcp_tool_hooks_run_the_same_command_in_other_directories_as_other_calls(
    fake_responses: FakeResponses, start_server: StartServer
) -> None:
    """The directory the model chose reaches the server as the hook's
    ``cwd``, as it does a command hook: four services checked alike are
    four calls, none denied."""
    server = start_server("--config", "recommended")
    services = ["svc-a", "svc-b", "svc-c", "svc-d"]
    steps = fake_responses.service_checks(services)
    fake_responses.script(*steps, [text("done")])
    hooks = printed_settings("codex", "--http", server.url, "--mcp")
    fake_responses.run("go", hooks=hooks, config=mcp_config(server.url))

    assert sorted(p.parent.name for p in fake_responses.work.glob("*/checked")) == services
    assert server.stop() == 0


def test_codex_mcp_tool_hooks_let_every_call_run_when_serve_is_down(fake_responses: FakeResponses) -> None:
    fake_responses.script(*fake_responses.shell_calls(LEAVES_A_TRACE, 6), [text("done")])
    hooks = printed_settings("codex", "--http", "http://127.0.0.1:9", "--mcp")
    fake_responses.run("go", hooks=hooks, config=mcp_config("http://127.0.0.1:9"))

    assert fake_responses.runs() == 6


def test_a_gemini_subagents_calls_count_apart_from_the_main_agents_through_serve(
    fake_gemini: FakeGemini, start_server: StartServer
) -> None:
    """As the command hook does (``tests/guard/adapters/test_agent_cli_hooks.py``):
    the main agent runs a command once, its subagent (``invoke_agent``) twice."""
    server = start_server("--config", "recommended")
    same = shell(LEAVES_A_TRACE, "gemini-cli")
    delegate = {"type": "tool_use", "id": None, "name": "invoke_agent"}
    fake_gemini.script([same], [{**delegate, "input": {"agent_name": "generalist", "prompt": "SUBTASK: check it"}}])
    fake_gemini.script([text("done")])
    done = {"type": "tool_use", "id": None, "name": "complete_task", "input": {"result": {"response": "ok"}}}
    fake_gemini.script_subagent("SUBTASK", [same], [same], [done])
    fake_gemini.run_hooks(printed_settings("gemini-cli", "--http", server.url))

    assert fake_gemini.runs() == 3
    said = [fake_gemini.texts_after_last_call(n, subagent=True) for n in range(1, len(fake_gemini.subagent_requests))]
    assert len(said) == 2
    assert not [text for text in said if "loop-detector" in text]
    assert server.stop() == 0
    (log,) = server.state_dir.glob("*.jsonl")
    calls = [(e.agent.parent_id is not None, e.tool) for e in read_log(log) if isinstance(e, ToolCall) and e.agent]
    assert calls == [
        (False, "run_shell_command"),
        (False, "invoke_agent"),
        (True, "run_shell_command"),
        (True, "run_shell_command"),
        (True, "complete_task"),
    ]
    replays_cleanly(log, "--config", "recommended")
