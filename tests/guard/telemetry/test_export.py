"""End to end: guard actions exported over OTLP to a real Arize Phoenix
process, and read back from its REST API, as a user would see them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.guard.server.conftest import StartServer, hook_payload
from tests.guard.telemetry.conftest import Phoenix

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]


def _guard_spans(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each guard action found: the attributes of an action span, or of an action event on another span."""
    found = [s["attributes"] for s in spans if s["attributes"].get("repeat_tool_guard.action")]
    found += [e["attributes"] for s in spans for e in s["events"] if e["name"].startswith("repeat_tool_guard.")]
    return found


def test_a_loop_through_serves_claude_code_hook_reaches_phoenix(
    phoenix: Phoenix, project: str, otlp_env: dict[str, str], start_server: StartServer
) -> None:
    server = start_server("--config", "recommended", env=otlp_env)
    assert "OpenTelemetry export on" in server.stderr
    kinds: list[str] = []
    with server.client() as client:
        client.post("/hooks/claude-code", json=hook_payload("otel-s1", "UserPromptSubmit", prompt="fix the build"))
        for n in range(8):
            call = {"tool_name": "Bash", "tool_input": {"command": "make"}, "tool_use_id": f"toolu_{n}"}
            before = client.post("/hooks/claude-code", json=hook_payload("otel-s1", "PreToolUse", **call)).json()
            if before.get("hookSpecificOutput", {}).get("permissionDecision") == "deny":
                kinds.append("deny")  # Claude Code runs no denied tool, so sends no PostToolUse
                continue
            result = hook_payload("otel-s1", "PostToolUse", **call, tool_response={"stdout": "error: no rule"})
            if client.post("/hooks/claude-code", json=result).json().get("hookSpecificOutput"):
                kinds.append("remind")
    assert server.stop() == 0  # a graceful stop exports what the batch still held
    assert "deny" in kinds
    actions = _guard_spans(phoenix.spans(project, want=len(kinds)))
    assert len(actions) >= len(kinds), "not every guard action reached Phoenix"  # an answer may carry two
    for attributes in actions:
        assert attributes["gen_ai.tool.name"] == "Bash"
        assert attributes["gen_ai.conversation.id"] == "otel-s1"
        assert attributes["gen_ai.operation.name"] == "apply_guardrail"
        assert attributes["repeat_tool_guard.runtime"] == "claude-code"
        assert attributes["repeat_tool_guard.policy"] == "loops"
    assert [a["repeat_tool_guard.action"] for a in actions].count("deny") == len(kinds)
    (halt,) = [a for a in actions if a["repeat_tool_guard.action"] == "halt"]  # after its denials, loops halts
    guardrails = [s for s in phoenix.spans(project) if s["name"].startswith("apply_guardrail")]
    assert {s.get("span_kind") for s in guardrails} == {"GUARDRAIL"}, "Phoenix shows them as guardrails"
    assert halt["gen_ai.agent.finish_reason"] == "guardrail"


_PROGRAM = """
import anyio
from guard.sessions.link import GuardLink

async def main() -> None:
    link = GuardLink(runtime="my-runtime")
    agent = link.agent("researcher")
    await agent.start()
    for n in range(4):
        decision = await agent.call(f"c{n}", "web_search", {"q": "same query"})
        if decision.allowed:
            await agent.result(f"c{n}", "no results")
        else:
            await agent.denied(f"c{n}", decision)

anyio.run(main)
"""

_PROGRAM_WITH_ITS_OWN_TRACING = """
import anyio
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from bus import Bus
from guard import Config, Guard
from guard.sessions.link import GuardLink
from guard.telemetry import GuardTelemetry

provider = TracerProvider(resource=Resource.create({"service.name": "my-agent"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
tracer = provider.get_tracer("my-agent")
telemetry = GuardTelemetry(tracer_provider=provider, runtime="my-runtime", conversation_id="conv-7")

async def main() -> None:
    bus = Bus()
    Guard(Config(), on_action=telemetry.on_action).attach(bus)
    link = GuardLink(bus)
    agent = link.agent("researcher")
    await agent.start()
    with tracer.start_as_current_span("invoke_agent researcher"):
        for n in range(4):
            with tracer.start_as_current_span("execute_tool web_search"):
                await agent.call(f"c{n}", "web_search", {"q": "same query"})
                await agent.result(f"c{n}", "no results")

anyio.run(main)
provider.shutdown()
"""


def _run(program: str, env: dict[str, str]) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environ.update(env, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)], env=environ, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_a_loop_in_process_configured_by_the_environment_reaches_phoenix(
    phoenix: Phoenix, project: str, otlp_env: dict[str, str]
) -> None:
    _run(_PROGRAM, otlp_env)
    actions = _guard_spans(phoenix.spans(project))
    assert actions, "no guard action reached Phoenix"
    assert {(a["gen_ai.tool.name"], a["gen_ai.agent.id"], a["repeat_tool_guard.runtime"]) for a in actions} == {
        ("web_search", "researcher", "my-runtime")
    }
    assert {a["repeat_tool_guard.policy"] for a in actions} == {"remind"}


def test_in_process_actions_land_inside_the_programs_own_trace(
    phoenix: Phoenix, project: str, otlp_env: dict[str, str]
) -> None:
    _run(_PROGRAM_WITH_ITS_OWN_TRACING, otlp_env)
    spans = phoenix.spans(project, want=5)
    assert all(not s["name"].startswith("apply_guardrail") for s in spans), "the guard started spans of its own"
    (tool_span,) = [s for s in spans if s["events"]]
    assert tool_span["name"] == "execute_tool web_search"
    (event,) = tool_span["events"]
    assert event["name"] == "repeat_tool_guard.remind"
    assert event["attributes"]["gen_ai.tool.name"] == "web_search"
    assert event["attributes"]["repeat_tool_guard.policy"] == "remind"
    assert event["attributes"]["gen_ai.conversation.id"] == "conv-7"
    parent = {s["context"]["span_id"]: s for s in spans}[tool_span["parent_id"]]
    assert parent["name"] == "invoke_agent researcher"


def test_the_export_benchmark_runs_against_phoenix(phoenix: Phoenix) -> None:
    from benchmarks.http_hook import _export_markdown, export_overhead

    result = export_overhead(rounds=2, loops=1, endpoint=phoenix.url)
    assert result["export_on"]["invocations"] == result["export_off"]["invocations"] > 0
    assert result["export_on"]["actions"] == result["export_off"]["actions"] > 0
    assert result["ratio"] > 0
    assert "export on / off (median)" in _export_markdown(result)
