"""The fake Anthropic API really drives the bundled Claude Code CLI: scripted
turns become tool calls the CLI runs, and what the CLI sends next is recorded."""

from __future__ import annotations

import json

import pytest

from tests.claude_cli import EXHAUSTED, FakeAnthropic, text, tool_use

pytestmark = pytest.mark.anyio


async def test_sdk_query_runs_scripted_tool_calls_and_the_next_request_carries_their_results(
    fake_anthropic: FakeAnthropic,
) -> None:
    from claude_agent_sdk import AssistantMessage, ResultMessage, TextBlock, query

    fake_anthropic.script(
        [text("Looking."), tool_use("Bash", {"command": "echo first"}), tool_use("Bash", {"command": "echo second"})],
        [text("All done.")],
    )
    messages = [m async for m in query(prompt="run two commands", options=fake_anthropic.options())]

    assert isinstance(messages[-1], ResultMessage)
    assert messages[-1].result == "All done."
    said = [b.text for m in messages if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, TextBlock)]
    assert said == ["Looking.", "All done."]
    assert len(fake_anthropic.requests) == 2
    assert fake_anthropic.remaining == 0
    assert fake_anthropic.overruns == 0
    results = {r["tool_use_id"]: r["content"] for r in fake_anthropic.tool_results(1)}
    assert results["toolu_fake_01"].startswith("first")
    assert results["toolu_fake_02"].startswith("second")
    assert "run two commands" in fake_anthropic.texts_after_tool_results(0)
    assert {json.dumps(t["name"]) for t in fake_anthropic.requests[0]["tools"]} >= {'"Bash"'}


def test_cli_print_mode_with_settings_and_an_exhausted_script(fake_anthropic: FakeAnthropic) -> None:
    marker = fake_anthropic.home / "hook-ran"
    settings = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": f"touch {marker}"}]}]}}
    fake_anthropic.script([tool_use("Bash", {"command": "true"})])
    done = fake_anthropic.run_cli("go", settings=settings)

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert (result["type"], result["result"]) == ("result", EXHAUSTED)
    assert fake_anthropic.overruns == 1
    assert marker.exists(), "the settings file's hook ran"
    assert all(p.startswith("/v1/messages") for p in fake_anthropic.paths), fake_anthropic.paths
