"""Guard actions as OpenTelemetry spans, events and metrics, through the
documented Python hook (your own providers), on the SDK's in-memory exporter."""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import structlog.testing
from opentelemetry import metrics, trace

from bus import Agent, Bus, ToolCall, ToolResult, UserMessage
from guard import Action, Config, Guard
from guard.config import RemindConfig
from guard.sessions.link import GuardLink
from guard.sessions.live import LiveTable
from guard.telemetry import (
    FINISH_REASON,
    OPERATION,
    OTHER_TOOLS,
    GuardTelemetry,
    TelemetryUnavailable,
    export_requested,
    otel,
    telemetry_from_environment,
)
from guard.telemetry.otel import SPAN_NAME, global_providers, providers_from_environment
from tests.guard.telemetry.conftest import Collector, Recorded


class ShadowAction(Action, frozen=True, kw_only=True):
    """An action a policy in shadow mode recorded and did not deliver."""

    shadow: bool = True


def _action(kind: Any = "remind", **fields: Any) -> Action:
    values: dict[str, Any] = {
        "policy": "remind", "action": kind, "agent": "main", "tool": "grep", "count": 3,
        "text": "you repeat yourself", "call_id": "c3", "threshold": 3,
    }  # fmt: skip
    values.update(fields)
    return Action(**values)


def _result(content: str = "x" * 400, call_id: str = "c3") -> ToolResult:
    return ToolResult(
        agent=Agent("main"), call_id=call_id, step=3, tool="grep", args={"pattern": "load"}, content=content,
        is_error=False, denied_by=None,
    )  # fmt: skip


def _call(call_id: str = "c4", tool: str = "grep") -> ToolCall:
    return ToolCall(agent=Agent("main"), call_id=call_id, step=4, tool=tool, args={"pattern": "load"})


AGENT_PROGRAM = (
    "import anyio\n"
    "from guard.sessions.link import GuardLink\n"
    "async def main():\n"
    "    agent = GuardLink().agent('main')\n"
    "    await agent.start()\n"
    "    for n in range(4):\n"
    "        if (await agent.call(f'c{n}', 'grep', {'q': 1})).allowed:\n"
    "            await agent.result(f'c{n}', 'same')\n"
    "anyio.run(main)\n"
)
"""An agent guarded in process (a ``GuardLink`` from the environment) making a loop of calls."""


def test_an_action_outside_any_span_is_a_span_of_its_own_with_genai_names(recorded: Recorded) -> None:
    recorded.telemetry.on_action(_action(), _result())
    (span,) = recorded.spans.get_finished_spans()
    assert span.name == SPAN_NAME
    attributes = dict(span.attributes or {})
    args_and_output = len(b'{"pattern":"load"}') + 400
    assert attributes == {
        "gen_ai.operation.name": OPERATION,
        "gen_ai.tool.name": "grep",
        "gen_ai.tool.call.id": "c3",
        "gen_ai.agent.id": "main",
        "gen_ai.conversation.id": "conv-1",
        "repeat_tool_guard.policy": "remind",
        "repeat_tool_guard.action": "remind",
        "repeat_tool_guard.count": 3,
        "repeat_tool_guard.threshold": 3,
        "repeat_tool_guard.wasted_calls": 2,
        "repeat_tool_guard.estimated_tokens": -(-2 * args_and_output // 4),
        "repeat_tool_guard.runtime": "test",
        "repeat_tool_guard.shadow": False,
        "openinference.span.kind": "GUARDRAIL",
    }


def test_an_action_inside_the_runtimes_span_is_an_event_on_it(recorded: Recorded) -> None:
    tracer = recorded.tracer_provider.get_tracer("agent-runtime")
    with tracer.start_as_current_span("execute_tool grep"):
        recorded.telemetry.on_action(_action(agent=None, threshold=None), _result())
    (span,) = recorded.spans.get_finished_spans()
    assert span.name == "execute_tool grep"
    (event,) = span.events
    assert event.name == "repeat_tool_guard.remind"
    attributes = dict(event.attributes or {})
    assert attributes["gen_ai.tool.name"] == "grep"
    assert attributes["repeat_tool_guard.policy"] == "remind"
    assert "gen_ai.agent.id" not in attributes
    assert "repeat_tool_guard.threshold" not in attributes
    assert "gen_ai.agent.finish_reason" not in dict(span.attributes or {})


def test_the_runtimes_span_says_what_the_guard_did_there_for_span_filters(recorded: Recorded) -> None:
    """Phoenix's span filter reads a span's attributes, not its events: a
    denied call is found by ``repeat_tool_guard.action == 'deny'``."""
    tracer = recorded.tracer_provider.get_tracer("agent-runtime")
    with tracer.start_as_current_span("execute_tool grep"):
        recorded.telemetry.on_action(_action("deny", policy="loops"), _call())
    with tracer.start_as_current_span("execute_tool grep"):
        recorded.telemetry.on_action(ShadowAction(**_action("deny").reported(), call_id="c4"), _call())
    denied, shadowed = recorded.spans.get_finished_spans()
    assert dict(denied.attributes or {}) == {"repeat_tool_guard.action": "deny", "repeat_tool_guard.policy": "loops"}
    assert dict(shadowed.attributes or {}) == {}, "a shadow action did nothing there"


def test_a_halt_sets_the_guardrail_finish_reason_on_its_span_or_the_current_one(recorded: Recorded) -> None:
    recorded.telemetry.on_action(_action("halt"), _result())
    tracer = recorded.tracer_provider.get_tracer("agent-runtime")
    with tracer.start_as_current_span("invoke_agent main"):
        recorded.telemetry.on_action(_action("halt"), _result())
    own, runtimes = recorded.spans.get_finished_spans()
    assert (own.attributes or {})["gen_ai.agent.finish_reason"] == FINISH_REASON == "guardrail"
    assert (runtimes.attributes or {})["gen_ai.agent.finish_reason"] == "guardrail"
    assert runtimes.events[0].attributes is not None
    assert runtimes.events[0].attributes["gen_ai.agent.finish_reason"] == "guardrail"


def test_a_shadow_action_is_recorded_as_shadow_and_saves_nothing(recorded: Recorded) -> None:
    recorded.telemetry.on_action(ShadowAction(**_action("halt").reported(), call_id="c3"), _result())
    recorded.telemetry.on_action(ShadowAction(**_action("deny").reported(), call_id="c4"), _call())
    spans = recorded.spans.get_finished_spans()
    assert [dict(s.attributes or {})["repeat_tool_guard.shadow"] for s in spans] == [True, True]
    assert all("gen_ai.agent.finish_reason" not in (s.attributes or {}) for s in spans)
    assert sum(recorded.metric("repeat_tool_guard.actions").values()) == 2
    assert recorded.metric("repeat_tool_guard.calls.saved") == {}
    assert recorded.metric("repeat_tool_guard.loops") == {}


def test_metrics_count_actions_loops_and_what_denials_saved(recorded: Recorded) -> None:
    telemetry = recorded.telemetry
    telemetry.on_event(_result(content="y" * 100, call_id="c2"))
    telemetry.on_event(UserMessage(agent=Agent("main"), text="go on"))
    telemetry.on_action(_action(), _result())
    telemetry.on_action(_action("deny", count=4, call_id="c4"), _call())
    telemetry.on_action(_action("deny", count=5, call_id="c5", tool="read"), _call("c5", "read"))
    telemetry.on_action(_action("remind", tool="ls"), UserMessage(agent=Agent("main"), text="?"))
    actions = recorded.metric("repeat_tool_guard.actions")
    key = (
        ("gen_ai.tool.name", "grep"), ("repeat_tool_guard.action", "deny"), ("repeat_tool_guard.policy", "remind"),
        ("repeat_tool_guard.runtime", "test"), ("repeat_tool_guard.shadow", False),
    )  # fmt: skip
    assert actions[key] == 1
    assert sum(actions.values()) == 4
    assert sum(recorded.metric("repeat_tool_guard.loops").values()) == 3  # grep, read, ls: once each
    assert sum(recorded.metric("repeat_tool_guard.calls.saved").values()) == 2
    # grep's denial: its arguments and the last output of grep (100 bytes); read's: its arguments alone
    args = len(b'{"pattern":"load"}')
    assert sum(recorded.metric("repeat_tool_guard.tokens.saved").values()) == -(-(args + 100) // 4) + -(-args // 4)


def test_loops_caught_are_remembered_for_a_bounded_number_of_tools(
    recorded: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("guard.telemetry.otel._REMEMBERED", 1)
    for tool in ("grep", "read", "grep"):
        recorded.telemetry.on_action(_action(tool=tool), _result())
    assert sum(recorded.metric("repeat_tool_guard.loops").values()) == 3  # grep was forgotten, so caught again


def test_hook_latency_is_a_histogram_by_route(recorded: Recorded) -> None:
    recorded.telemetry.observe_hook("claude-code", 0.002)
    recorded.telemetry.observe_hook("claude-code", 0.004)
    assert recorded.metric("repeat_tool_guard.hook.duration") == {(("repeat_tool_guard.route", "claude-code"),): 2}


def test_output_sizes_are_remembered_for_a_bounded_number_of_tools(recorded: Recorded) -> None:
    telemetry = recorded.telemetry
    for n in range(4100):
        telemetry.remember(_result(call_id=f"c{n}"), conversation_id=f"s{n}")
    denial = ToolResult(
        agent=Agent("main"), call_id="d", step=1, tool="deny-me", args={}, content="no", is_error=True,
        denied_by="repeat-tool-guard",
    )  # fmt: skip
    telemetry.remember(denial)
    assert len(telemetry._last_output) == 4096
    assert ("conv-1", "main", "deny-me") not in telemetry._last_output


@pytest.mark.anyio
async def test_a_guard_on_a_bus_reports_its_loop_through_the_listener(recorded: Recorded) -> None:
    bus = Bus()
    guard = Guard(Config(remind=RemindConfig(thresholds=(3,))), on_action=recorded.telemetry.on_action).attach(bus)
    recorded.telemetry.attach(bus)
    agent = Agent("main")
    for n in range(3):
        call = ToolCall(agent=agent, call_id=f"c{n}", step=n + 1, tool="grep", args={"pattern": "x"})
        assert (await bus.decide(call)).allowed
        await bus.publish(ToolResult.answering(call, "nothing found"))
    guard.detach()
    (span,) = recorded.spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert (attributes["gen_ai.tool.name"], attributes["repeat_tool_guard.action"]) == ("grep", "remind")
    assert attributes["repeat_tool_guard.count"] == 3
    assert attributes["gen_ai.tool.call.id"] == "c2"


def test_shutdown_stops_the_providers_it_was_given(recorded: Recorded) -> None:
    recorded.telemetry.shutdown()
    recorded.telemetry.on_action(_action(), _result())
    assert recorded.spans.get_finished_spans() == ()
    GuardTelemetry().shutdown()  # the global providers are left alone


@pytest.mark.parametrize(
    ("environ", "requested"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "True"}, False),
    ],
)
def test_export_is_requested_by_an_otlp_endpoint_unless_the_sdk_is_disabled(
    environ: dict[str, str], requested: bool
) -> None:
    assert export_requested(environ) is requested


@pytest.fixture
def otel_environ(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_SERVICE_NAME",
                 "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    return monkeypatch


def test_no_endpoint_no_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", raising=False)
    assert telemetry_from_environment(runtime="serve") is None


def test_the_environment_builds_otlp_providers_named_for_the_service(otel_environ: pytest.MonkeyPatch) -> None:
    telemetry = telemetry_from_environment(runtime="serve", conversation_id="s1")
    assert telemetry is not None
    assert (telemetry.runtime, telemetry.conversation_id) == ("serve", "s1")
    provider = telemetry.tracer_provider
    assert provider is not None
    assert provider.resource.attributes["service.name"] == "repeat-tool-guard"  # type: ignore[attr-defined]
    telemetry.shutdown()


def test_console_and_none_exporters_and_the_services_own_name(otel_environ: pytest.MonkeyPatch) -> None:
    otel_environ.setenv("OTEL_TRACES_EXPORTER", "console")
    otel_environ.setenv("OTEL_METRICS_EXPORTER", "console")
    otel_environ.setenv("OTEL_SERVICE_NAME", "my-agents")
    tracer_provider, meter_provider = providers_from_environment()
    assert tracer_provider.resource.attributes["service.name"] == "my-agents"  # type: ignore[attr-defined]
    tracer_provider.shutdown()  # type: ignore[attr-defined]
    meter_provider.shutdown()  # type: ignore[attr-defined]
    otel_environ.setenv("OTEL_TRACES_EXPORTER", "none")
    otel_environ.setenv("OTEL_METRICS_EXPORTER", "none")
    tracer_provider, meter_provider = providers_from_environment()
    tracer_provider.shutdown()  # type: ignore[attr-defined]
    meter_provider.shutdown()  # type: ignore[attr-defined]


def test_a_list_of_exporters_exports_to_each(otel_environ: pytest.MonkeyPatch, collector: Collector) -> None:
    program = (
        "from guard.telemetry import providers_from_environment\n"
        "traces, meters = providers_from_environment()\n"
        "traces.get_tracer('test').start_span('guard-listed').end()\n"
        "traces.shutdown(); meters.shutdown()\n"
    )
    otel_environ.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    otel_environ.setenv("OTEL_TRACES_EXPORTER", " otlp, Console ")
    otel_environ.setenv("OTEL_METRICS_EXPORTER", "none")
    otel_environ.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", " GZIP ")  # as the SDK reads it: any case, blanks around
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True)
    assert collector.posted == ["/v1/traces"]
    assert '"name": "guard-listed"' in run.stdout


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("OTEL_TRACES_EXPORTER", "zipkin", "OTEL_TRACES_EXPORTER=zipkin: repeat-tool-guard exports to otlp"),
        ("OTEL_TRACES_EXPORTER", "otlp,jaeger", "OTEL_TRACES_EXPORTER=otlp,jaeger: repeat-tool-guard exports to otlp"),
        ("OTEL_METRICS_EXPORTER", "otlp,none", "OTEL_METRICS_EXPORTER=otlp,none: 'none' cannot be listed"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTLP protocol 'grpc' for traces"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "exports over http/protobuf"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd", "OTEL_EXPORTER_OTLP_COMPRESSION='zstd': .* gzip or deflate"),
        ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "br", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION='br'"),
    ],
)
def test_export_the_package_cannot_do_is_a_clear_error(
    otel_environ: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    otel_environ.setenv(variable, value)
    with pytest.raises(TelemetryUnavailable, match=message.replace("(", r"\(")):
        telemetry_from_environment(runtime="serve")


def test_only_the_compression_an_exported_signal_uses_is_checked(otel_environ: pytest.MonkeyPatch) -> None:
    """The exporter reads a signal's own variable before the general one;
    a signal not exported reads neither."""
    otel_environ.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd")
    otel_environ.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
    otel_environ.setenv("OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", "br")
    otel_environ.setenv("OTEL_METRICS_EXPORTER", "none")
    telemetry = telemetry_from_environment(runtime="serve")
    assert telemetry is not None
    telemetry.shutdown()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_ATTRIBUTE_COUNT_LIMIT", "abc"),
        ("OTEL_SPAN_EVENT_COUNT_LIMIT", "-1"),
        ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "1k"),
    ],
)
def test_a_value_the_sdk_refuses_is_a_clear_error_naming_the_variables_set(
    otel_environ: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    otel_environ.setenv(variable, value)
    with pytest.raises(TelemetryUnavailable, match=f"OpenTelemetry's SDK refuses a value of .*{variable}"):
        telemetry_from_environment(runtime="serve")


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector:4318", "OTEL_EXPORTER_OTLP_ENDPOINT has scheme 'ftp'"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318", "OTEL_EXPORTER_OTLP_ENDPOINT has no scheme"),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:99999/v1/traces", "Port out of range"),
        ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "https://user:secret@:4318", "METRICS_ENDPOINT names no host"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:0", "names port 0"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://[::1", "OTEL_EXPORTER_OTLP_ENDPOINT is no URL"),
    ],
)
def test_an_endpoint_no_export_could_reach_is_refused_at_start_without_its_value(
    otel_environ: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    otel_environ.setenv(variable, value)
    with pytest.raises(TelemetryUnavailable, match=message) as refused:
        telemetry_from_environment(runtime="serve")
    assert "secret" not in str(refused.value)


@pytest.mark.parametrize(
    ("variable", "value", "entry"),
    [
        ("OTEL_EXPORTER_OTLP_HEADERS", "Authorization: Bearer phx_9f8e7d6c5b4a3928170", 1),
        ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-team=a, api-key phx_9f8e7d6c5b4a3928170", 2),
        ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", 'api-key=phx_9f8e7d6c5b4a3928170,"quoted"', 2),
    ],
)
def test_headers_the_exporter_would_drop_are_refused_without_their_text(
    otel_environ: pytest.MonkeyPatch, variable: str, value: str, entry: int
) -> None:
    otel_environ.setenv(variable, value)
    with pytest.raises(TelemetryUnavailable, match=f"{variable}: entry {entry} is not name=value") as refused:
        telemetry_from_environment(runtime="serve")
    assert "phx_" not in str(refused.value)


def test_headers_the_exporter_takes_are_kept(otel_environ: pytest.MonkeyPatch) -> None:
    otel_environ.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20phx_1, x-team = a b ,")
    telemetry = telemetry_from_environment(runtime="serve")
    assert telemetry is not None
    telemetry.shutdown()


def test_a_program_whose_guard_installed_the_providers_exits_though_the_collector_never_answers(
    tmp_path: Path,
) -> None:
    """The SDK's own stop at exit waits out the exporter's timeout and its
    retries; the guard's waits at most ``EXPORT_FLUSH_SECONDS``."""
    program = AGENT_PROGRAM + "print('done', flush=True)\n"
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{silent.getsockname()[1]}",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "60",
            "OTEL_BSP_SCHEDULE_DELAY": "60000",  # the batch is still held at exit
        }
        env.pop("OTEL_SDK_DISABLED", None)
        started = time.monotonic()
        finished = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
        took = time.monotonic() - started
    assert (finished.returncode, finished.stdout.endswith("done\n")) == (0, True), finished.stderr
    assert took < 40, "not the exporter's 60 s timeout"


def test_a_bounded_shutdown_returns_though_the_collector_never_answers(otel_environ: pytest.MonkeyPatch) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        otel_environ.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        otel_environ.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "3")  # short: the stop left behind ends soon after
        telemetry = telemetry_from_environment(runtime="serve")
        assert telemetry is not None
        telemetry.on_action(_action(), _result())
        started = time.monotonic()
        telemetry.shutdown(timeout=0.5)
        assert time.monotonic() - started < 2.5, "not the SDK's 3 s export timeout and its retries"


def test_without_the_otel_extra_the_error_says_what_to_install(otel_environ: pytest.MonkeyPatch) -> None:
    otel_environ.setitem(sys.modules, "guard.telemetry.otel", None)
    with pytest.raises(TelemetryUnavailable, match=r"OTEL_EXPORTER_OTLP_ENDPOINT is set .*repeat-tool-guard\[otel\]"):
        telemetry_from_environment(runtime="serve")


def test_the_lazy_names_resolve_and_unknown_ones_fail() -> None:
    import guard.telemetry as package

    assert package.GuardTelemetry is GuardTelemetry
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        package.nothing  # noqa: B018


@pytest.fixture
def global_otel(otel_environ: pytest.MonkeyPatch) -> list[tuple[str, object]]:
    """OpenTelemetry's global setters and getters, replaced for the test (they are set-once per process)."""
    installed: list[tuple[str, object]] = []
    otel_environ.setattr(trace, "set_tracer_provider", lambda p: installed.append(("tracer", p)))
    otel_environ.setattr(metrics, "set_meter_provider", lambda p: installed.append(("meter", p)))
    register = atexit.register

    def at_exit(stop: Any, *args: Any) -> Any:
        if getattr(stop, "__module__", None) != "guard.telemetry.otel":
            return register(stop, *args)  # the SDK's and other libraries' own
        installed.append(("at exit", args))
        return stop

    otel_environ.setattr(atexit, "register", at_exit)
    otel_environ.setattr(otel, "_OWN", LiveTable(otel._OWN_KEPT))  # the process's own providers: none yet
    return installed


def test_in_process_the_guard_keeps_its_providers_and_follows_the_programs_once_set(
    global_otel: list[tuple[str, object]], recorded: Recorded
) -> None:
    assert global_providers() == (None, None)
    telemetry = telemetry_from_environment(runtime="python", in_process=True)
    another = telemetry_from_environment(runtime="python", in_process=True)
    assert telemetry is not None
    assert another is not None
    providers = (telemetry.tracer_provider, telemetry.meter_provider)
    assert (another.tracer_provider, another.meter_provider) == providers, "one set for the process"
    assert global_otel == [("at exit", ())], "the global place is left for the program to take, one flush at exit"
    with pytest.MonkeyPatch().context() as patch:  # the program configures its tracing after the guard started
        patch.setattr(trace, "get_tracer_provider", lambda: recorded.tracer_provider)
        patch.setattr(metrics, "get_meter_provider", lambda: recorded.meter_provider)
        telemetry.on_action(_action(), _result())
        telemetry.observe_hook("pre", 0.01)
        another.on_action(_action(), _result())
    assert [span.name for span in recorded.spans.get_finished_spans()] == [SPAN_NAME, SPAN_NAME]
    assert recorded.metric("repeat_tool_guard.actions")
    assert recorded.metric("repeat_tool_guard.hook.duration")
    for thread in [t for t in threading.enumerate() if t.name == "repeat-tool-guard-telemetry-handover"]:
        thread.join(10)
    own_meter = providers[1]
    assert getattr(own_meter, "_shutdown", None) is True, "the guard's own stopped once the program's took over"
    otel._close_own()  # what is still going stops at exit, once


def test_the_guards_own_providers_are_kept_for_a_few_environments_the_oldest_stopped(
    global_otel: list[tuple[str, object]], otel_environ: pytest.MonkeyPatch
) -> None:
    """A program that builds links under ever new ``OTEL_*`` values (a
    collector per tenant) holds the threads and connections of a few."""
    made = []
    for tenant in range(otel._OWN_KEPT + 2):
        otel_environ.setenv("OTEL_SERVICE_NAME", f"tenant-{tenant}")
        telemetry = telemetry_from_environment(runtime="python", in_process=True)
        assert telemetry is not None
        made.append(telemetry.meter_provider)
    assert len(otel._OWN) == otel._OWN_KEPT
    for thread in [t for t in threading.enumerate() if t.name == "repeat-tool-guard-telemetry-handover"]:
        thread.join(10)
    assert [getattr(p, "_shutdown", None) for p in made] == [True, True] + [False] * otel._OWN_KEPT
    otel._close_own()


def test_a_program_that_sets_its_providers_after_its_guard_started_gets_them_and_the_guards_actions(
    tmp_path: Path,
) -> None:
    program = (
        "import anyio, json\n"
        "from opentelemetry import metrics, trace\n"
        "from opentelemetry.sdk.metrics import MeterProvider\n"
        "from opentelemetry.sdk.metrics.export import InMemoryMetricReader\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "from guard import Config, RemindConfig\n"
        "from guard.sessions.link import GuardLink\n"
        "link = GuardLink(config=Config(remind=RemindConfig(thresholds=(2,))))\n"
        "spans, reader = InMemorySpanExporter(), InMemoryMetricReader()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(spans))\n"
        "trace.set_tracer_provider(provider)\n"
        "metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))\n"
        "async def main():\n"
        "    agent = link.agent('main')\n"
        "    await agent.start()\n"
        "    with trace.get_tracer('app').start_as_current_span('invoke_agent main'):\n"
        "        for n in range(2):\n"
        "            await agent.call(f'c{n}', 'grep', {'q': 1})\n"
        "            await agent.result(f'c{n}', 'same')\n"
        "anyio.run(main)\n"
        "(span,) = spans.get_finished_spans()\n"
        "data = reader.get_metrics_data().resource_metrics\n"
        "names = [m.name for r in data for s in r.scope_metrics for m in s.metrics]\n"
        "print(json.dumps({'mine': trace.get_tracer_provider() is provider, 'span': span.name,\n"
        "    'events': [e.name for e in span.events], 'metrics': names}))\n"
    )
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    env.pop("OTEL_SDK_DISABLED", None)
    finished = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0, finished.stderr
    assert "Overriding of current" not in finished.stderr
    seen = json.loads(finished.stdout.splitlines()[-1])
    assert seen["mine"] is True, "the program's own provider is the global one"
    assert (seen["span"], seen["events"]) == ("invoke_agent main", ["repeat_tool_guard.remind"])
    assert "repeat_tool_guard.actions" in seen["metrics"]


def test_in_process_the_programs_own_providers_are_used(
    global_otel: list[tuple[str, object]], recorded: Recorded
) -> None:
    global_otel_env = pytest.MonkeyPatch()
    with global_otel_env.context() as patch:
        patch.setattr(trace, "get_tracer_provider", lambda: recorded.tracer_provider)
        patch.setattr(metrics, "get_meter_provider", lambda: recorded.meter_provider)
        telemetry = telemetry_from_environment(runtime="python", in_process=True)
    assert telemetry is not None
    assert telemetry.tracer_provider is recorded.tracer_provider
    assert global_otel == []


@pytest.mark.anyio
async def test_a_link_that_builds_its_guard_exports_as_the_environment_asks(
    global_otel: list[tuple[str, object]], recorded: Recorded
) -> None:
    with pytest.MonkeyPatch().context() as patch:
        patch.setattr(trace, "get_tracer_provider", lambda: recorded.tracer_provider)
        patch.setattr(metrics, "get_meter_provider", lambda: recorded.meter_provider)
        link = GuardLink(config=Config(remind=RemindConfig(thresholds=(2,))), runtime="pydantic-ai")
    agent = link.agent("main")
    await agent.start()
    for n in range(2):
        assert (await agent.call(f"c{n}", "grep", {"q": 1})).allowed
        await agent.result(f"c{n}", "same")
    (span,) = recorded.spans.get_finished_spans()
    assert (span.attributes or {})["repeat_tool_guard.runtime"] == "pydantic-ai"


@pytest.mark.anyio
async def test_a_links_session_log_is_named_as_the_session_not_as_the_conversation(
    global_otel: list[tuple[str, object]], recorded: Recorded, tmp_path: Path
) -> None:
    """A runtime sets its own ``gen_ai.conversation.id`` on its spans; the
    session log's id is another thing and must not contradict it there."""
    with pytest.MonkeyPatch().context() as patch:
        patch.setattr(trace, "get_tracer_provider", lambda: recorded.tracer_provider)
        patch.setattr(metrics, "get_meter_provider", lambda: recorded.meter_provider)
        link = GuardLink(config=Config(remind=RemindConfig(thresholds=(2,))), log=tmp_path / "s.jsonl")
    agent = link.agent("main")
    await agent.start()
    for n in range(2):
        await agent.call(f"c{n}", "grep", {"q": 1})
        await agent.result(f"c{n}", "same")
    link.close()
    (span,) = recorded.spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert link.log is not None
    assert attributes["repeat_tool_guard.session"] == link.log.session
    assert "gen_ai.conversation.id" not in attributes


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("OTEL_TRACES_EXPORTER", "zipkin", "zipkin"),  # export the package cannot do
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "abc", "OTEL_EXPORTER_OTLP_TIMEOUT"),  # a value every export would fail with
        ("OTEL_ATTRIBUTE_COUNT_LIMIT", "abc", "OTEL_ATTRIBUTE_COUNT_LIMIT"),  # refused as the provider is built
        ("OTEL_EXPORTER_OTLP_HEADERS", "Authorization: Bearer x", "OTEL_EXPORTER_OTLP_HEADERS: entry 1"),
    ],
)
def test_a_link_logs_export_it_cannot_do_and_guards_anyway(
    otel_environ: pytest.MonkeyPatch, variable: str, value: str, named: str
) -> None:
    otel_environ.setenv(variable, value)
    with structlog.testing.capture_logs() as logs:
        link = GuardLink()
    assert link.bus is not None
    assert [(e["event"], e["log_level"]) for e in logs] == [("guard.telemetry_unavailable", "warning")]
    assert named in logs[0]["reason"]


def test_off_nothing_imports_opentelemetry(tmp_path: Path) -> None:
    program = (
        "import sys\n"
        "from guard.sessions.link import GuardLink\n"
        "from guard.server import FileSessionStore, create_app\n"
        "GuardLink()\n"
        "create_app(FileSessionStore(sys.argv[1]))\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "assert not loaded, loaded\n"
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path)], env=environ, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "abc", "OTEL_EXPORTER_OTLP_TIMEOUT is not a number of seconds above 0"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "0", "OTEL_EXPORTER_OTLP_TIMEOUT is not a number of seconds above 0"),
        ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "-1", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT is not a number of seconds"),
        ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "nan", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT is not a number of seconds"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "inf", "and at most 1000000000"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "1e308", "and at most 1000000000"),
        ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "10s", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT is not a number of seconds"),
        ("OTEL_BSP_SCHEDULE_DELAY", "-1", "OTEL_BSP_SCHEDULE_DELAY is not a whole number from 1 to 86400000"),
        ("OTEL_BSP_SCHEDULE_DELAY", "99999999999999999999", "OTEL_BSP_SCHEDULE_DELAY is not a whole number"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "abc", "OTEL_BSP_MAX_QUEUE_SIZE is not a whole number"),
        ("OTEL_BSP_EXPORT_TIMEOUT", "nan", "OTEL_BSP_EXPORT_TIMEOUT is not a whole number"),
        ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE is not a whole number"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "1e30", "OTEL_METRIC_EXPORT_INTERVAL is not a number from 1 to 86400000"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "0", "OTEL_METRIC_EXPORT_INTERVAL is not a number"),
        ("OTEL_METRIC_EXPORT_TIMEOUT", "nan", "OTEL_METRIC_EXPORT_TIMEOUT is not a number"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318 ", "OTEL_EXPORTER_OTLP_ENDPOINT holds white space"),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "\thttp://ho st:4318", "TRACES_ENDPOINT holds white space"),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "Authorization=Bearer%20abc%E2%80%A6",
            "OTEL_EXPORTER_OTLP_HEADERS: entry 1 has a value HTTP cannot carry",
        ),
        (
            "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
            "x-team=a,Authorization=Bearer%20abc%0D%0AX-Evil=1",
            "OTEL_EXPORTER_OTLP_METRICS_HEADERS: entry 2 has a value HTTP cannot carry",
        ),
    ],
)
def test_values_that_would_fail_every_export_are_refused_at_start_without_their_text(
    otel_environ: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    otel_environ.setenv(variable, value)
    with pytest.raises(TelemetryUnavailable, match=message) as refused:
        telemetry_from_environment(runtime="serve")
    said = str(refused.value)
    assert said.startswith(variable)
    assert "\n" not in said
    assert not any(text in said for text in ("abc", "127.0.0.1", "ho st")), "the value is never shown"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem", "names nothing this process can read"),
        ("OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", "/nonexistent/c.pem", "names nothing this process can read"),
        ("OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY", "/", "names nothing this process can read"),  # a key is a file
        ("OTEL_PYTHON_METER_PROVIDER", "bogus", "names no installed provider: 'bogus' \\(installed: .*sdk_meter"),
        ("OTEL_PYTHON_TRACER_PROVIDER", "", "names no installed provider: ''"),
        ("OTEL_EXPERIMENTAL_RESOURCE_DETECTORS", "os, bogus", "names no installed resource detector: 'bogus'"),
        ("OTEL_METRICS_EXEMPLAR_FILTER", "Always_On", "is none of always_off, always_on, trace_based"),
    ],
)
def test_names_the_sdk_would_not_find_are_refused_at_start_in_one_line(
    otel_environ: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], variable: str, value: str, message: str
) -> None:
    """A TLS file that is not there fails every export with a traceback and
    exports nothing; a provider or a resource detector that is not
    installed prints a traceback at start: each is refused in one line."""
    otel_environ.setenv(variable, value)
    with pytest.raises(TelemetryUnavailable, match=message) as refused:
        telemetry_from_environment(runtime="serve")
    assert str(refused.value).startswith(variable)
    assert "\n" not in str(refused.value)
    assert "Traceback" not in capfd.readouterr().err


def test_installed_names_and_readable_files_are_taken(otel_environ: pytest.MonkeyPatch, tmp_path: Path) -> None:
    certificate = tmp_path / "ca.pem"
    certificate.write_text("-----BEGIN CERTIFICATE-----\n")
    for variable, value in [
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", str(certificate)),
        ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", str(tmp_path)),  # a directory of certificates, as requests takes
        ("OTEL_EXPORTER_OTLP_CLIENT_KEY", " "),  # blank: unset
        ("OTEL_METRICS_EXPORTER", "none"),
        ("OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY", "/nonexistent/k.pem"),  # of a signal not exported: never read
        ("OTEL_EXPERIMENTAL_RESOURCE_DETECTORS", "os, process,,*"),
        ("OTEL_METRICS_EXEMPLAR_FILTER", "always_off"),
    ]:
        otel_environ.setenv(variable, value)
    telemetry = telemetry_from_environment(runtime="serve")
    assert telemetry is not None
    telemetry.shutdown(timeout=1)
    # an installed provider is taken too; only checked here, since OpenTelemetry's API would make
    # the one it names the process's global provider for good
    otel_environ.setenv("OTEL_PYTHON_METER_PROVIDER", "sdk_meter_provider")
    otel._check_choices()


def test_values_in_range_are_taken(otel_environ: pytest.MonkeyPatch) -> None:
    for variable, value in [
        ("OTEL_EXPORTER_OTLP_TIMEOUT", " 2.5 "),
        ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "3600"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "10000"),  # the specification's default, milliseconds read as seconds
        ("OTEL_METRIC_EXPORT_TIMEOUT", "1.5"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "1000.0"),
        ("OTEL_BSP_SCHEDULE_DELAY", "86400000"),
        ("OTEL_METRIC_EXPORT_INTERVAL", " 60000 "),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-name=Zo%C3%AB"),  # é-like Latin-1 text
    ]:
        otel_environ.setenv(variable, value)
    telemetry = telemetry_from_environment(runtime="serve")
    assert telemetry is not None
    telemetry.shutdown()


@pytest.mark.parametrize("blank_general", [False, True], ids=["alone", "with-a-blank-general-endpoint"])
def test_a_traces_endpoint_alone_exports_no_metrics(collector: Collector, blank_general: bool) -> None:
    """No metrics go to a local collector that was not asked for, and the
    exit does not wait on it."""
    program = AGENT_PROGRAM
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"{collector.url}/v1/traces"
    if blank_general:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = " "
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert collector.posted == ["/v1/traces"]
    assert not done.stderr, "no export failed, to a local collector or to a blank endpoint"


def test_an_otlp_exporter_named_explicitly_is_built_without_an_endpoint_for_it(
    otel_environ: pytest.MonkeyPatch,
) -> None:
    otel_environ.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    otel_environ.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
    otel_environ.setenv("OTEL_METRICS_EXPORTER", "otlp")
    _, meter_provider = providers_from_environment()
    (reader,) = meter_provider._metric_readers  # type: ignore[attr-defined]
    assert reader._exporter._endpoint == "http://localhost:4318/v1/metrics"
    meter_provider.shutdown(timeout_millis=100)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("endpoint", "posted"),
    [
        ("/", ["/v1/metrics", "/v1/traces"]),
        # some vendors take an API key in the query: the signal's path goes before it, not into the key
        ("/otlp/?api_key=KEY123", ["/otlp/v1/metrics?api_key=KEY123", "/otlp/v1/traces?api_key=KEY123"]),
    ],
)
def test_the_general_endpoint_gets_each_signals_path(
    otel_environ: pytest.MonkeyPatch, collector: Collector, endpoint: str, posted: list[str]
) -> None:
    otel_environ.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"{collector.url}{endpoint}")
    telemetry = telemetry_from_environment(runtime="serve")
    assert telemetry is not None
    telemetry.on_action(_action(), _result())
    telemetry.shutdown()
    assert sorted(collector.posted) == posted


def _run_link(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    program = (
        "import anyio\n"
        "from guard.sessions.link import GuardLink\n"
        "async def main():\n"
        "    agent = GuardLink().agent('main')\n"
        "    await agent.start()\n"
        "    print('allowed', (await agent.call('c1', 'grep', {})).allowed, flush=True)\n"
        "anyio.run(main)\n"
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environ.update(env, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    return subprocess.run([sys.executable, "-c", program], env=environ, capture_output=True, text=True, timeout=60)


_REFUSED_AS_BUILT = [
    ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "-1"),  # refused as the SDK is imported
    ("OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER", "nope"),  # refused as the exporter is built
]


@pytest.mark.parametrize(("variable", "value"), _REFUSED_AS_BUILT)
def test_a_value_the_sdk_refuses_as_it_is_imported_or_built_leaves_the_agent_guarded(variable: str, value: str) -> None:
    done = _run_link({variable: value})
    assert done.returncode == 0, done.stderr
    assert "guard.telemetry_unavailable" in done.stdout
    assert "OpenTelemetry's SDK refuses a value of" in done.stdout
    assert variable in done.stdout
    assert "allowed True" in done.stdout


@pytest.mark.parametrize(("variable", "value"), _REFUSED_AS_BUILT)
def test_serve_refuses_a_value_the_sdk_refuses_as_it_is_built_in_one_line(
    tmp_path: Path, variable: str, value: str
) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environ.update({variable: value, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    done = subprocess.run(
        [sys.executable, "-m", "guard", "serve", "--port", "0", "--state-dir", str(tmp_path)],
        env=environ, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert "OpenTelemetry's SDK refuses a value of" in line
    assert variable in line


def test_without_the_sdk_the_error_says_what_to_install(otel_environ: pytest.MonkeyPatch) -> None:
    otel_environ.setitem(sys.modules, "opentelemetry.sdk.resources", None)
    with pytest.raises(TelemetryUnavailable, match=r"not installed .*repeat-tool-guard\[otel\]"):
        telemetry_from_environment(runtime="serve")


def test_metric_series_stay_bounded_however_many_tools_are_named(recorded: Recorded) -> None:
    for n in range(1005):
        recorded.telemetry.on_action(_action(tool=f"tool-{n}", call_id=f"c{n}"), _call(f"c{n}", f"tool-{n}"))
    tools = [dict(key)["gen_ai.tool.name"] for key in recorded.metric("repeat_tool_guard.actions")]
    assert len(tools) == 1001
    assert "tool-999" in tools
    assert "tool-1000" not in tools
    other = (
        ("gen_ai.tool.name", OTHER_TOOLS), ("repeat_tool_guard.action", "remind"),
        ("repeat_tool_guard.policy", "remind"), ("repeat_tool_guard.runtime", "test"),
        ("repeat_tool_guard.shadow", False),
    )  # fmt: skip
    assert recorded.metric("repeat_tool_guard.actions")[other] == 5
    spans = recorded.spans.get_finished_spans()
    assert dict(spans[-1].attributes or {})["gen_ai.tool.name"] == "tool-1004"  # spans keep the name


def test_a_huge_tool_name_is_cut_in_metric_labels_and_span_attributes(recorded: Recorded) -> None:
    name = "t" * 1_000_000
    recorded.telemetry.on_action(_action(tool=name, call_id="c" * 5000), _call(tool=name))
    recorded.telemetry.on_action(_action(tool=name + "x", call_id="c2"), _call(tool=name))
    (key,) = recorded.metric("repeat_tool_guard.actions")
    assert dict(key)["gen_ai.tool.name"] == "t" * 128
    attributes = dict(recorded.spans.get_finished_spans()[0].attributes or {})
    assert (attributes["gen_ai.tool.name"], attributes["gen_ai.tool.call.id"]) == ("t" * 1024, "c" * 1024)


def test_a_secret_in_an_agent_id_or_a_tool_name_is_not_exported(recorded: Recorded) -> None:
    """As on the live page and in ``watch``: an agent named after its token,
    an MCP tool whose name carries its server's URL with a password."""
    agent, tool = (
        "worker-ghp_R7kX2mQ9vL4nP8sT1wY6zB3cF5hJ0dG7aK2eW",
        "mcp__https://deploy:Tr0ub4dor@mcp.example.com__fetch",
    )
    shown = ("worker-[REDACTED]", "mcp__https://deploy:[REDACTED]@mcp.example.com__fetch")
    recorded.telemetry.on_action(_action(agent=agent, tool=tool), _call(tool=tool))
    with recorded.tracer_provider.get_tracer("agent-runtime").start_as_current_span("execute_tool fetch"):
        recorded.telemetry.on_action(_action(agent=agent, tool=tool, call_id="c4"), _call(tool=tool))
    own, runtimes = recorded.spans.get_finished_spans()
    for attributes in (dict(own.attributes or {}), dict(runtimes.events[0].attributes or {})):
        assert (attributes["gen_ai.agent.id"], attributes["gen_ai.tool.name"]) == shown
    (key,) = recorded.metric("repeat_tool_guard.actions")
    assert dict(key)["gen_ai.tool.name"] == shown[1]


def test_a_session_named_after_a_token_is_not_exported_by_any_of_its_ids() -> None:
    """In ``serve`` a session's id is its main agent's and the conversation's:
    redacted as the one, so as the other, as is a call id and the session
    log's id."""
    token = "ghp_R7kX2mQ9vL4nP8sT1wY6zB3cF5hJ0dG7aK2eW"
    recorded = Recorded(session_id=token)
    recorded.telemetry.record(_action(agent=token, call_id=f"{token}-1"), _call(), conversation_id=token)
    (span,) = recorded.spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    for name in ("gen_ai.agent.id", "gen_ai.conversation.id", "repeat_tool_guard.session", "gen_ai.tool.call.id"):
        assert token not in str(attributes[name]), name
        assert "[REDACTED]" in str(attributes[name]), name


def test_what_is_remembered_of_huge_names_stays_small(recorded: Recorded) -> None:
    import tracemalloc

    telemetry = recorded.telemetry
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for n in range(20):
            name = f"{n:02d}" + "t" * 1_000_000
            telemetry.remember(msgspec.structs.replace(_result(), tool=name), conversation_id="c" * 1_000_000)
            telemetry.on_action(_action(tool=name, agent="a" * 1_000_000), _call(tool=name))
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 5_000_000, "not a copy of each 1 MB name"


def test_a_tool_name_with_a_lone_surrogate_is_exported_with_a_replacement_character(
    recorded: Recorded, caplog: pytest.LogCaptureFixture
) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    recorded.telemetry.on_action(_action(tool="grep\ud800"), _call(tool="grep\ud800"))
    encoded = encode_spans(recorded.spans.get_finished_spans())
    (span,) = encoded.resource_spans[0].scope_spans[0].spans
    names = {a.key: a.value.string_value for a in span.attributes}
    assert names["gen_ai.tool.name"].startswith("grep\ufffd")
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    (key,) = recorded.metric("repeat_tool_guard.actions")
    assert dict(key)["gen_ai.tool.name"].startswith("grep\ufffd")


def test_remembering_a_large_output_makes_no_copy_of_it(recorded: Recorded) -> None:
    import tracemalloc

    content = "x" * 20_000_000
    result = _result(content=content)
    tracemalloc.start()
    try:
        recorded.telemetry.remember(result)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000
    recorded.telemetry.on_action(_action("deny", count=2), _call())
    args = len(b'{"pattern":"load"}')
    assert sum(recorded.metric("repeat_tool_guard.tokens.saved").values()) == -(-(args + 20_000_000) // 4)


def test_the_exporters_warnings_hide_the_endpoints_query(
    otel_environ: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there once closed
    otel_environ.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    otel_environ.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{port}/v1/traces?api_key=SECRETX01")
    otel_environ.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2.5")  # a retry, and its warning, fit in
    tracer_provider, meter_provider = providers_from_environment()
    tracer_provider.get_tracer("test").start_span("lost").end()
    tracer_provider.shutdown()  # type: ignore[attr-defined]
    meter_provider.shutdown()  # type: ignore[attr-defined]
    said = [record.getMessage() for record in caplog.records if record.name.startswith("opentelemetry.exporter")]
    assert any("/v1/traces?[REDACTED]" in message for message in said), said
    assert not any("SECRETX01" in message for message in said)


def test_a_bounded_shutdown_gives_traces_and_metrics_the_same_wait(
    otel_environ: pytest.MonkeyPatch, collector: Collector
) -> None:
    """A collector that takes 3 s per request gets both signals within a
    5 s bound: a slow trace flush does not use up the metrics' share."""
    collector.delay = 3.0
    otel_environ.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    telemetry = telemetry_from_environment(runtime="serve")
    assert telemetry is not None
    telemetry.on_action(_action(), _result())
    telemetry.shutdown(timeout=5.0)
    assert sorted(collector.posted) == ["/v1/metrics", "/v1/traces"]


def test_links_built_in_threads_at_once_share_the_guards_own_providers(global_otel: list[tuple[str, object]]) -> None:
    ready = threading.Barrier(8)
    got: list[object] = []

    def build() -> None:
        ready.wait()
        got.append(otel.own_providers()[0])

    threads = [threading.Thread(target=build) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len({id(provider) for provider in got}) == 1, "one set, flushed at exit with the rest"
    otel._close_own()


def test_each_signal_is_followed_on_its_own_and_the_guards_own_stopped_once(
    global_otel: list[tuple[str, object]], recorded: Recorded
) -> None:
    """A program that sets only a tracer provider (as ``phoenix.otel.register()``
    does) gets the guard's spans; the guard's metrics stay its own until the
    program sets a meter provider too."""
    telemetry = telemetry_from_environment(runtime="python", in_process=True)
    again = telemetry_from_environment(runtime="python", in_process=True)
    assert telemetry is not None
    assert again is not None
    own_meter = telemetry.meter_provider
    with pytest.MonkeyPatch().context() as patch:
        patch.setattr(trace, "get_tracer_provider", lambda: recorded.tracer_provider)
        telemetry.on_action(_action(), _result())
        assert recorded.metric("repeat_tool_guard.actions") == {}, "no meter provider of the program's yet"
        patch.setattr(metrics, "get_meter_provider", lambda: recorded.meter_provider)
        telemetry.on_action(_action(), _result())
        again.on_action(_action(), _result())  # the same own set, handed over again: stopped once
    assert len(recorded.spans.get_finished_spans()) == 3
    assert sum(recorded.metric("repeat_tool_guard.actions").values()) == 2
    otel._hand_over(recorded.tracer_provider)  # the program's own: never stopped by the guard
    for thread in [t for t in threading.enumerate() if t.name == "repeat-tool-guard-telemetry-handover"]:
        thread.join(10)
    assert getattr(own_meter, "_shutdown", None) is True
    with recorded.tracer_provider.get_tracer("agent-runtime").start_as_current_span("after"):
        pass
    assert recorded.spans.get_finished_spans()[-1].name == "after", "the program's provider still exports"
    otel._close_own()
