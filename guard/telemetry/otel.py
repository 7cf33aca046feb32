"""Guard actions as OpenTelemetry spans, span events and metrics.

The attribute names follow the GenAI semantic conventions where they have
one (``gen_ai.operation.name``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``gen_ai.agent.id``, ``gen_ai.conversation.id``, and the proposed
``gen_ai.agent.finish_reason`` = ``guardrail`` on a halt); the rest are this
package's own, under ``repeat_tool_guard.``.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from typing import TYPE_CHECKING

from opentelemetry import metrics, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import SpanKind, TracerProvider
from opentelemetry.util.types import AttributeValue

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter
    from opentelemetry.sdk.trace.export import SpanExporter

from bus import Bus, Event, ToolCall, ToolResult
from guard.actions import DENYING, Action
from guard.fingerprint import canonical_json

__all__ = [
    "FINISH_REASON",
    "OPERATION",
    "SPAN_NAME",
    "GuardTelemetry",
    "global_providers",
    "providers_from_environment",
]

OPERATION = "apply_guardrail"
"""``gen_ai.operation.name`` of a guard action (the conventions' proposed guardrail operation)."""

FINISH_REASON = "guardrail"
"""``gen_ai.agent.finish_reason`` of a run the guard asked to halt."""

SPAN_NAME = "apply_guardrail repeat-tool-guard"
"""The name of the span an action gets when there is no current span to attach it to."""

_SCOPE = "repeat_tool_guard"
_BYTES_PER_TOKEN = 4
_REMEMBERED = 4096
"""Tools whose last output size is kept (for the tokens a denial saved), and
loops remembered as caught; the oldest go first."""


def _tokens(size: int) -> int:
    return -(-size // _BYTES_PER_TOKEN)


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("repeat-tool-guard")
    except PackageNotFoundError:  # pragma: no cover - a bare checkout without the package installed
        return "0"


class GuardTelemetry:
    """Records every guard action it is told of (``on_action``, a guard's
    action listener) as OpenTelemetry data.

    An action becomes an event named ``repeat_tool_guard.<action>`` on the
    current span when one is recording (so it sits inside the runtime's own
    trace), else a span of its own named ``SPAN_NAME``. A halt also sets
    ``gen_ai.agent.finish_reason`` = ``guardrail`` on that span. Counters:
    actions, loops caught, calls and estimated tokens saved; a histogram:
    hook latency (``observe_hook``).

    ``tracer_provider`` and ``meter_provider`` default to OpenTelemetry's
    global ones. ``runtime`` and ``conversation_id`` label what this
    instance records unless ``record`` is given others (the server records
    every session through one instance). Never raises into the guard: the
    guard isolates listeners, and export runs in the SDK's background.
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        runtime: str = "python",
        conversation_id: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.conversation_id = conversation_id
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        release = _package_version()
        self._tracer = trace.get_tracer(_SCOPE, release, tracer_provider)
        meter = metrics.get_meter(_SCOPE, release, meter_provider)
        self._actions = meter.create_counter(
            "repeat_tool_guard.actions",
            unit="{action}",
            description="Guard actions, by policy, action, tool and runtime.",
        )
        self._loops = meter.create_counter(
            "repeat_tool_guard.loops", unit="{loop}",
            description="Loops caught: a tool of an agent the guard acted on for the first time.",
        )  # fmt: skip
        self._calls_saved = meter.create_counter(
            "repeat_tool_guard.calls.saved", unit="{call}", description="Tool calls the guard denied, so never ran."
        )
        self._tokens_saved = meter.create_counter(
            "repeat_tool_guard.tokens.saved", unit="{token}",
            description="Estimated tokens of the denied calls: (argument + last output bytes) / 4.",
        )  # fmt: skip
        self._hook_duration = meter.create_histogram(
            "repeat_tool_guard.hook.duration", unit="s", description="Time to answer a hook request, by route."
        )
        self._last_output: OrderedDict[tuple[str | None, str | None, str], int] = OrderedDict()
        self._caught: OrderedDict[tuple[str | None, str | None, str], None] = OrderedDict()

    def attach(self, bus: Bus) -> GuardTelemetry:
        """Follow ``bus``'s tool results, for the output size a denial saves."""
        bus.record(self.on_event)
        return self

    def on_event(self, event: Event) -> None:
        """A bus recorder: remember the output size of each tool result."""
        self.remember(event)

    def remember(self, event: Event, *, conversation_id: str | None = None) -> None:
        if type(event) is not ToolResult or event.denied_by is not None:
            return
        agent = event.agent.id if event.agent is not None else None
        key = (conversation_id or self.conversation_id, agent, event.tool)
        self._last_output[key] = len(event.content.encode("utf-8", "surrogatepass"))
        self._last_output.move_to_end(key)
        if len(self._last_output) > _REMEMBERED:
            self._last_output.popitem(last=False)

    def on_action(self, action: Action, trigger: Event) -> None:
        """A guard action listener (``Guard(on_action=...)`` or ``guard.add_listener``)."""
        self.record(action, trigger)

    def record(
        self, action: Action, trigger: Event, *, runtime: str | None = None, conversation_id: str | None = None
    ) -> None:
        """Record ``action``, which ``trigger`` caused, for ``runtime`` and
        ``conversation_id`` (this instance's own when not given)."""
        runtime = runtime or self.runtime
        conversation = conversation_id or self.conversation_id
        shadow = bool(getattr(action, "shadow", False))
        call_bytes = self._call_bytes(trigger, conversation)
        wasted = max(action.count - 1, 0)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": OPERATION,
            "gen_ai.tool.name": action.tool,
            "gen_ai.tool.call.id": action.call_id,
            "repeat_tool_guard.policy": action.policy,
            "repeat_tool_guard.action": action.action,
            "repeat_tool_guard.count": action.count,
            "repeat_tool_guard.wasted_calls": wasted,
            "repeat_tool_guard.estimated_tokens": _tokens(wasted * call_bytes),
            "repeat_tool_guard.runtime": runtime,
            "repeat_tool_guard.shadow": shadow,
        }
        if action.agent is not None:
            attributes["gen_ai.agent.id"] = action.agent
        if conversation is not None:
            attributes["gen_ai.conversation.id"] = conversation
        if action.threshold is not None:
            attributes["repeat_tool_guard.threshold"] = action.threshold
        if action.action == "halt" and not shadow:
            attributes["gen_ai.agent.finish_reason"] = FINISH_REASON
        current = trace.get_current_span()
        if current.is_recording():
            current.add_event(f"repeat_tool_guard.{action.action}", attributes)
            if "gen_ai.agent.finish_reason" in attributes:
                current.set_attribute("gen_ai.agent.finish_reason", FINISH_REASON)
        else:
            with self._tracer.start_as_current_span(SPAN_NAME, kind=SpanKind.INTERNAL, attributes=attributes):
                pass
        labels: dict[str, AttributeValue] = {
            "repeat_tool_guard.policy": action.policy,
            "repeat_tool_guard.action": action.action,
            "gen_ai.tool.name": action.tool,
            "repeat_tool_guard.runtime": runtime,
            "repeat_tool_guard.shadow": shadow,
        }
        self._actions.add(1, labels)
        if shadow:
            return
        loop = (conversation, action.agent, action.tool)
        if loop in self._caught:
            self._caught.move_to_end(loop)
        else:
            self._caught[loop] = None
            if len(self._caught) > _REMEMBERED:
                self._caught.popitem(last=False)
            self._loops.add(1, labels)
        if action.action in DENYING:
            self._calls_saved.add(1, labels)
            self._tokens_saved.add(_tokens(call_bytes), labels)

    def _call_bytes(self, trigger: Event, conversation: str | None) -> int:
        """Bytes one more identical call costs: its arguments and its output
        (the trigger's own, or for a call the last output of its tool)."""
        if not isinstance(trigger, ToolCall | ToolResult):
            return 0
        size = len(canonical_json(trigger.args))
        if isinstance(trigger, ToolResult):
            return size + len(trigger.content.encode("utf-8", "surrogatepass"))
        agent = trigger.agent.id if trigger.agent is not None else None
        return size + self._last_output.get((conversation, agent, trigger.tool), 0)

    def observe_hook(self, route: str, seconds: float) -> None:
        """One hook request of ``route`` took ``seconds`` to answer."""
        self._hook_duration.record(seconds, {"repeat_tool_guard.route": route})

    def shutdown(self, timeout: float | None = None) -> None:
        """Flush and stop the providers this instance was given (what the
        edges built from the environment); harmless for the global ones.
        With ``timeout``, return after at most that many seconds: a
        collector that never answers must not hold a stopping server for
        the SDK's own timeouts and retries (what it has not taken by then
        is dropped)."""
        _stop((self.tracer_provider, self.meter_provider), timeout)


def _stop(providers: tuple[object, ...], timeout: float | None) -> None:
    """Shut ``providers`` down, waiting at most ``timeout`` seconds (the
    rest goes on in a daemon thread that the exit does not wait for)."""
    stops = [getattr(provider, "shutdown", None) for provider in providers]

    def stop_all() -> None:
        for stop in stops:
            if callable(stop):
                stop()

    if timeout is None:
        stop_all()
        return
    import threading

    stopping = threading.Thread(target=stop_all, name="repeat-tool-guard-telemetry-shutdown", daemon=True)
    stopping.start()
    stopping.join(timeout)


def global_providers() -> tuple[TracerProvider, MeterProvider] | None:
    """OpenTelemetry's global providers when the program has set its tracer
    provider (``None`` while it is still the API's placeholder)."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        return None
    return provider, metrics.get_meter_provider()


def providers_from_environment(*, install: bool = False) -> tuple[TracerProvider, MeterProvider]:
    """The SDK providers the ``OTEL_*`` variables describe: OTLP over
    http/protobuf, a batching span processor and a periodic metric reader,
    the resource from ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``
    (service name ``repeat-tool-guard`` by default). ``OTEL_TRACES_EXPORTER``
    and ``OTEL_METRICS_EXPORTER`` may be ``otlp`` (default), ``console``, a
    list of both (``otlp,console``) or ``none``. The exporters read their endpoint, headers, timeout and
    compression from the standard variables themselves. With ``install``,
    they become OpenTelemetry's global providers."""
    from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from guard.telemetry import EXPORT_FLUSH_SECONDS, TelemetryUnavailable

    tracer_provider: SdkTracerProvider | None = None
    readers: list[MetricReader] = []
    try:
        _check_endpoints()
        _check_headers()
        resource = Resource.create({} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "repeat-tool-guard"})
        # The SDK's own stop at exit waits out the exporter's timeout and retries (10 s and more with a
        # collector that is down); global providers are stopped at exit with a bound instead.
        tracer_provider = SdkTracerProvider(resource=resource, shutdown_on_exit=False)
        for chosen in _exporter_choices("TRACES"):
            tracer_provider.add_span_processor(BatchSpanProcessor(_span_exporter(chosen)))
        for chosen in _exporter_choices("METRICS"):
            readers.append(PeriodicExportingMetricReader(_metric_exporter(chosen)))
        meter_provider = SdkMeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)
    except (ValueError, TypeError) as exc:  # a value the SDK refuses: a timeout, an interval, a limit, ...
        if tracer_provider is not None:
            tracer_provider.shutdown()
        for reader in readers:
            reader.shutdown()
        named = ", ".join(sorted(name for name in os.environ if name.startswith("OTEL_")))
        raise TelemetryUnavailable(
            f"OpenTelemetry's SDK refuses a value of {named}: {type(exc).__name__}: {exc}"
        ) from None
    if install:
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(meter_provider)
        import atexit

        atexit.register(_stop, (tracer_provider, meter_provider), EXPORT_FLUSH_SECONDS)
    return tracer_provider, meter_provider


def _check_endpoints() -> None:
    """Refuse an OTLP endpoint the exporter could never post to (a scheme
    other than http or https, no host, a port out of range) at start, rather
    than at every export. The message names the variable, not the value,
    which may hold credentials."""
    from urllib.parse import urlsplit

    from guard.telemetry import ENDPOINT_VARIABLES, TelemetryUnavailable

    for variable in ENDPOINT_VARIABLES:
        value = os.environ.get(variable, "").strip()
        if not value:
            continue
        try:
            parts = urlsplit(value)
            port = parts.port
        except ValueError as exc:
            raise TelemetryUnavailable(f"{variable} is no URL the OTLP exporter can post to: {exc}") from None
        if parts.scheme.lower() not in ("http", "https"):
            scheme = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
            raise TelemetryUnavailable(f"{variable} has {scheme}: the OTLP exporter posts to http:// or https://")
        if not parts.hostname:
            raise TelemetryUnavailable(f"{variable} names no host")
        if port == 0:
            raise TelemetryUnavailable(f"{variable} names port 0")


_HEADER_VARIABLES = (
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
)
# A header entry as the SDK takes one (``name=value``, the value URL-encoded or plain text without commas).
_HEADER = re.compile(
    r"[ \t]*[\x21\x23-\x27\x2a\x2b\x2d\x2e\x30-\x39\x41-\x5a\x5e-\x7a\x7c\x7e]+[ \t]*="
    r"[\x20\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*"
)


def _check_headers() -> None:
    """Refuse OTLP headers the exporter would drop (``Authorization: Bearer x``,
    as curl takes it, instead of ``Authorization=Bearer x``): the SDK warns
    with the whole entry, credentials included, and exports without it.
    The message names the variable and the entry's place, not its text."""
    from guard.telemetry import TelemetryUnavailable

    for variable in _HEADER_VARIABLES:
        entries = [entry for entry in os.environ.get(variable, "").split(",") if entry.strip()]
        for number, entry in enumerate(entries, 1):
            if not _HEADER.fullmatch(entry):
                raise TelemetryUnavailable(
                    f"{variable}: entry {number} is not name=value (as Authorization=Bearer%20...); "
                    "its text is not shown, as it may hold credentials"
                )


def _exporter_choices(signal: str) -> tuple[str, ...]:
    """The exporters ``OTEL_{signal}_EXPORTER`` names: a comma-separated
    list, as the specification allows (``otlp,console``), ``otlp`` when
    unset, none for ``none``."""
    from guard.telemetry import TelemetryUnavailable

    variable = f"OTEL_{signal}_EXPORTER"
    value = os.environ.get(variable, "").strip()
    names = tuple(dict.fromkeys(name.strip().lower() for name in value.split(",") if name.strip())) or ("otlp",)
    for name in names:
        if name not in ("otlp", "console", "none"):
            raise TelemetryUnavailable(f"{variable}={value}: repeat-tool-guard exports to otlp, console or none")
    if "none" in names:
        if len(names) > 1:
            raise TelemetryUnavailable(f"{variable}={value}: 'none' cannot be listed with an exporter")
        return ()
    if "otlp" in names:
        protocol = (
            os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL")
            or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or ""
        ).strip().lower() or "http/protobuf"
        if protocol != "http/protobuf":
            raise TelemetryUnavailable(
                f"OTLP protocol {protocol!r} for {signal.lower()}: repeat-tool-guard exports over http/protobuf "
                "(set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf and the receiver's HTTP port, 4318 by default)"
            )
    return names


def _span_exporter(chosen: str) -> SpanExporter:
    if chosen == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _metric_exporter(chosen: str) -> MetricExporter:
    if chosen == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter()
