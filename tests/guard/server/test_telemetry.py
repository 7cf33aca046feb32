"""``serve`` with OpenTelemetry export: each action exported with the
session and route of the request that caused it, and the hooks' latency."""

from __future__ import annotations

import pytest

from guard.config import Config, RemindConfig
from guard.server import runner
from guard.server.runner import ServeError
from tests.guard.server.conftest import MakeServed, hook_payload
from tests.guard.telemetry.conftest import Recorded


def test_actions_carry_the_session_and_route_and_hooks_are_timed(make_served: MakeServed) -> None:
    recorded = Recorded(runtime="serve")
    served = make_served(Config(remind=RemindConfig(thresholds=(3,))), telemetry=recorded.telemetry)
    for n in range(3):
        call = {"tool_name": "Read", "tool_input": {"file_path": "a.py"}, "tool_use_id": f"t{n}"}
        served.post("/hooks/claude-code", hook_payload("tele-1", "PreToolUse", **call))
        served.post("/hooks/claude-code", hook_payload("tele-1", "PostToolUse", **call, tool_response="same"))
    served.client.get("/healthz")
    (span,) = recorded.spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.conversation.id"] == "tele-1"
    assert attributes["repeat_tool_guard.runtime"] == "claude-code"
    assert attributes["gen_ai.tool.name"] == "Read"
    assert recorded.metric("repeat_tool_guard.hook.duration") == {(("repeat_tool_guard.route", "claude-code"),): 6}


def test_export_the_server_cannot_do_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(ServeError, match="http/protobuf"):
        runner._telemetry()
