"""Guard actions as OpenTelemetry spans, span events and metrics.

The attribute names follow the GenAI semantic conventions where they have
one (``gen_ai.operation.name``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``gen_ai.agent.id``, ``gen_ai.conversation.id``, and the proposed
``gen_ai.agent.finish_reason`` = ``guardrail`` on a halt); the rest are this
package's own, under ``repeat_tool_guard.``.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from opentelemetry import metrics, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import SpanKind, TracerProvider
from opentelemetry.util.types import AttributeValue

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricReader
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

from bus import Bus, Event, ToolCall, ToolResult
from guard.actions import DENYING, Action
from guard.fingerprint import canonical_json
from guard.redact import REDACT_SLACK, REDACTED, Redactor
from guard.sessions.live import LiveTable

__all__ = [
    "FINISH_REASON",
    "OPERATION",
    "OTHER_TOOLS",
    "SPAN_NAME",
    "GuardTelemetry",
    "global_providers",
    "own_providers",
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


_OPENINFERENCE_KIND = "openinference.span.kind"
_ATTRIBUTE_LENGTH = 1024
"""Characters kept of a string attribute of a span or event: a collector
refuses a batch past its body limit, and one huge tool name would take the
whole batch with it."""
_TOOL_LABEL_LENGTH = 128
"""Characters kept of the tool name a metric series is labelled with."""
_TOOL_LABELS = 1000
"""Distinct tool names the metrics keep a series of; the ones past it are
counted under ``OTHER_TOOLS``. The SDK keeps every series for the life of
the process and exports each one at every interval."""
OTHER_TOOLS = "other"
"""The ``gen_ai.tool.name`` label of the tools past the first 1,000 distinct ones."""


def _tokens(size: int) -> int:
    return -(-size // _BYTES_PER_TOKEN)


def _utf8_size(text: str) -> int:
    """The bytes of ``text`` in UTF-8 (lone surrogates as three), without
    a copy of it when it is ASCII."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _text(value: str, limit: int) -> str:
    """``value`` cut to ``limit`` characters, lone surrogates as U+FFFD: the
    OTLP encoder drops an attribute that is not valid UTF-8 (with a
    traceback per span)."""
    value = value[:limit]
    return value if value.isascii() else value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("repeat-tool-guard")
    except PackageNotFoundError:  # pragma: no cover - a bare checkout without the package installed
        return "0"


def _remembered_key(conversation: str | None, agent: str | None, tool: str) -> tuple[str | None, str | None, str]:
    """What the telemetry remembers of a tool of an agent of a session: each
    name cut short, so the ``_REMEMBERED`` entries stay small however long
    the names are."""
    return (
        conversation and conversation[:_ATTRIBUTE_LENGTH],
        agent and agent[:_ATTRIBUTE_LENGTH],
        tool[:_ATTRIBUTE_LENGTH],
    )


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
    every session through one instance). ``session_id`` names the session
    log the actions are recorded in (a ``GuardLink``'s), exported as
    ``repeat_tool_guard.session``: it is no conversation id, which a runtime
    sets on its own spans. ``follow_global``: record through OpenTelemetry's
    global providers from the moment the program sets them. Never raises
    into the guard: the guard isolates listeners, and export runs in the
    SDK's background.
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        runtime: str = "python",
        conversation_id: str | None = None,
        session_id: str | None = None,
        follow_global: bool = False,
    ) -> None:
        self.runtime = runtime
        self.conversation_id = conversation_id
        self.session_id = session_id
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self._release = _package_version()
        self._tracer = trace.get_tracer(_SCOPE, self._release, tracer_provider)
        self._instruments(metrics.get_meter(_SCOPE, self._release, meter_provider))
        # until the program sets a global provider of its own (after the guard started), the given ones
        self._follow_traces = follow_global and not _tracing_set()
        self._follow_metrics = follow_global and not _metering_set()
        self._last_output: OrderedDict[tuple[str | None, str | None, str], int] = OrderedDict()
        self._caught: OrderedDict[tuple[str | None, str | None, str], None] = OrderedDict()
        self._tool_labels: set[str] = set()
        self._redact = Redactor()

    def _instruments(self, meter: metrics.Meter) -> None:
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

    def _follow(self) -> None:
        """Record through the program's global providers from the moment it
        sets them (``follow_global``): a guard built before the program
        configured its tracing still lands in the program's traces and
        metrics, and never took the global place the program wanted."""
        if self._follow_traces and _tracing_set():
            self._follow_traces = False
            self._tracer = trace.get_tracer(_SCOPE, self._release, trace.get_tracer_provider())
            _hand_over(self.tracer_provider)
        if self._follow_metrics and _metering_set():
            self._follow_metrics = False
            self._instruments(metrics.get_meter(_SCOPE, self._release, metrics.get_meter_provider()))
            _hand_over(self.meter_provider)

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
        key = _remembered_key(conversation_id or self.conversation_id or self.session_id, agent, event.tool)
        self._last_output[key] = _utf8_size(event.content)
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
        if self._follow_traces or self._follow_metrics:
            self._follow()
        runtime = runtime or self.runtime
        conversation = conversation_id or self.conversation_id
        shadow = bool(getattr(action, "shadow", False))
        call_bytes = self._call_bytes(trigger, conversation or self.session_id)
        wasted = max(action.count - 1, 0)
        tool = self._shown(action.tool)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": OPERATION,
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": self._shown(action.call_id),
            "repeat_tool_guard.policy": action.policy,
            "repeat_tool_guard.action": action.action,
            "repeat_tool_guard.count": action.count,
            "repeat_tool_guard.wasted_calls": wasted,
            "repeat_tool_guard.estimated_tokens": _tokens(wasted * call_bytes),
            "repeat_tool_guard.runtime": runtime,
            "repeat_tool_guard.shadow": shadow,
        }
        if action.agent is not None:
            attributes["gen_ai.agent.id"] = self._shown(action.agent)
        if conversation is not None:
            attributes["gen_ai.conversation.id"] = self._shown(conversation)
        if self.session_id is not None:
            attributes["repeat_tool_guard.session"] = self._shown(self.session_id)
        if action.threshold is not None:
            attributes["repeat_tool_guard.threshold"] = action.threshold
        if action.action == "halt" and not shadow:
            attributes["gen_ai.agent.finish_reason"] = FINISH_REASON
        attributes = {
            name: _text(value, _ATTRIBUTE_LENGTH) if isinstance(value, str) else value
            for name, value in attributes.items()
        }
        current = trace.get_current_span()
        if current.is_recording():
            current.add_event(f"repeat_tool_guard.{action.action}", attributes)
            if not shadow:  # a span filter reads attributes, not events: what the guard did there, the latest
                current.set_attribute("repeat_tool_guard.action", action.action)
                current.set_attribute("repeat_tool_guard.policy", action.policy)
            if "gen_ai.agent.finish_reason" in attributes:
                current.set_attribute("gen_ai.agent.finish_reason", FINISH_REASON)
        else:
            attributes[_OPENINFERENCE_KIND] = "GUARDRAIL"  # how Phoenix tells a guardrail's span apart
            with self._tracer.start_as_current_span(SPAN_NAME, kind=SpanKind.INTERNAL, attributes=attributes):
                pass
        labels: dict[str, AttributeValue] = {
            "repeat_tool_guard.policy": action.policy,
            "repeat_tool_guard.action": action.action,
            "gen_ai.tool.name": self._tool_label(tool),
            "repeat_tool_guard.runtime": runtime,
            "repeat_tool_guard.shadow": shadow,
        }
        self._actions.add(1, labels)
        if shadow:
            return
        loop = _remembered_key(conversation or self.session_id, action.agent, action.tool)
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

    def _shown(self, name: str) -> str:
        """A tool's name or an id (an agent's, a session's, a call's) as the
        exported data shows it: redacted, as on the live page and in
        ``watch`` (an MCP tool's name may carry its server's URL, an id may
        be named after a token, and a session's is its main agent's), as
        far as an attribute keeps it and the slack the rules need past it."""
        return self._redact(name[: _ATTRIBUTE_LENGTH + REDACT_SLACK])

    def _tool_label(self, tool: str) -> str:
        """The ``gen_ai.tool.name`` label of ``tool``'s series: its name cut
        short, or ``OTHER_TOOLS`` once ``_TOOL_LABELS`` others have a series."""
        label = _text(tool, _TOOL_LABEL_LENGTH)
        if label in self._tool_labels:
            return label
        if len(self._tool_labels) >= _TOOL_LABELS:
            return OTHER_TOOLS
        self._tool_labels.add(label)
        return label

    def _call_bytes(self, trigger: Event, conversation: str | None) -> int:
        """Bytes one more identical call costs: its arguments and its output
        (the trigger's own, or for a call the last output of its tool)."""
        if not isinstance(trigger, ToolCall | ToolResult):
            return 0
        size = len(canonical_json(trigger.args))
        if isinstance(trigger, ToolResult):
            return size + _utf8_size(trigger.content)
        agent = trigger.agent.id if trigger.agent is not None else None
        return size + self._last_output.get(_remembered_key(conversation, agent, trigger.tool), 0)

    def observe_hook(self, route: str, seconds: float) -> None:
        """One hook request of ``route`` took ``seconds`` to answer."""
        self._follow()
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
    """Shut ``providers`` down, waiting at most ``timeout`` seconds for them
    all. They stop side by side, so a slow flush of one does not use up the
    others' share of the wait; what is still going on at the deadline goes
    on in daemon threads that the exit does not wait for."""
    stops = [stop for stop in (getattr(provider, "shutdown", None) for provider in providers) if callable(stop)]
    if timeout is None:
        for stop in stops:
            stop()
        return
    import threading
    import time

    threads = [
        threading.Thread(target=stop, name="repeat-tool-guard-telemetry-shutdown", daemon=True) for stop in stops
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0))


def global_providers() -> tuple[TracerProvider | None, MeterProvider | None]:
    """OpenTelemetry's global tracer and meter providers, each where the
    program has set it (``None`` while it is still the API's placeholder)."""
    return (
        trace.get_tracer_provider() if _tracing_set() else None,
        metrics.get_meter_provider() if _metering_set() else None,
    )


class _Own:
    """The providers the guard builds from the environment in process where
    the program has set none of its own (``own_providers``), and which of
    them were stopped when the program's took over."""

    def __init__(self, providers: tuple[TracerProvider, MeterProvider]) -> None:
        self.providers = providers
        self._stopped: list[object] = []
        self._lock = threading.Lock()

    def stop(self, provider: object) -> None:
        """Stop ``provider``, once, in the background: what it holds is
        exported while the guard goes on (a collector that does not answer
        must not hold a tool call)."""
        with self._lock:
            if any(provider is stopped for stopped in self._stopped):
                return
            self._stopped.append(provider)
        stop: Callable[[], object] = getattr(provider, "shutdown", lambda: None)
        threading.Thread(target=stop, name="repeat-tool-guard-telemetry-handover", daemon=True).start()

    def going(self) -> tuple[object, ...]:
        """The providers not stopped yet, taken to be stopped now."""
        with self._lock:
            going = tuple(p for p in self.providers if not any(p is stopped for stopped in self._stopped))
            self._stopped.extend(going)
        return going


_OWN_KEPT = 4
_OWN: LiveTable[tuple[tuple[str, str], ...], _Own] = LiveTable(_OWN_KEPT)
"""The guard's own providers, by the ``OTEL_*`` environment they were built
from: one set for the whole process, as OpenTelemetry's global providers are
one (every link shares their exporters and their one bounded flush at exit,
rather than two threads and a flush each). Kept for at most ``_OWN_KEPT``
environments: the least recently used set is stopped for a new one past
them (each holds threads and connections until stopped)."""
_OWN_LOCK = threading.Lock()


def own_providers() -> tuple[TracerProvider, MeterProvider]:
    """The providers the ``OTEL_*`` variables describe, kept the guard's own
    (never OpenTelemetry's global ones) and shared by every caller in the
    process with the same variables; they export what they still hold at
    exit, waiting at most ``EXPORT_FLUSH_SECONDS``. Raises as
    ``providers_from_environment``."""
    key = tuple(sorted((name, value) for name, value in os.environ.items() if name.startswith("OTEL_")))
    with _OWN_LOCK:  # links built in threads at once share one set
        own = _OWN.get(key)
        if own is None:
            if not _OWN:
                import atexit

                atexit.register(_close_own)
            own = _Own(providers_from_environment())
            for oldest in _OWN.add(key, own):
                for provider in oldest.providers:
                    oldest.stop(provider)
    return own.providers


def _close_own() -> None:
    """At exit: stop the guard's own providers still going, every set side
    by side, waiting at most ``EXPORT_FLUSH_SECONDS`` for them all."""
    from guard.telemetry import EXPORT_FLUSH_SECONDS

    _stop(tuple(provider for own in _OWN.values() for provider in own.going()), EXPORT_FLUSH_SECONDS)


def _hand_over(provider: object) -> None:
    """The program's own provider took over from ``provider``: stop it if it
    is one of the guard's own, so it does not go on exporting what it held."""
    for own in _OWN.values():
        if any(provider is mine for mine in own.providers):
            own.stop(provider)


def _tracing_set() -> bool:
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _metering_set() -> bool:
    return type(metrics.get_meter_provider()).__name__ != "_ProxyMeterProvider"  # the API's placeholder


def providers_from_environment() -> tuple[TracerProvider, MeterProvider]:
    """The SDK providers the ``OTEL_*`` variables describe: OTLP over
    http/protobuf, a batching span processor and a periodic metric reader,
    the resource from ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``
    (service name ``repeat-tool-guard`` by default). ``OTEL_TRACES_EXPORTER``
    and ``OTEL_METRICS_EXPORTER`` may be ``otlp`` (default), ``console``, a
    list of both (``otlp,console``) or ``none``. A signal gets its OTLP
    exporter by default only when an endpoint is set for it (its own or the
    general one). The exporters read their headers, timeout and compression
    from the standard variables themselves.

    Raises ``TelemetryUnavailable`` for a value that would make export fail
    (checked here, at start, rather than at every export) or that the SDK
    refuses while it is imported or built; ``ImportError`` when the SDK or
    the exporter is not installed."""
    from guard.telemetry import TelemetryUnavailable

    _check_endpoints()
    _check_headers()
    _check_numbers()
    _check_choices()
    traced = _exporter_choices("TRACES")
    measured = _exporter_choices("METRICS")
    _check_files(tuple(signal for signal, chosen in (("TRACES", traced), ("METRICS", measured)) if "otlp" in chosen))
    tracer_provider: SdkTracerProvider | None = None
    readers: list[MetricReader] = []
    try:
        from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        resource = Resource.create({} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "repeat-tool-guard"})
        # The SDK's own stop at exit waits out the exporter's timeout and retries (10 s and more with a
        # collector that is down); global providers are stopped at exit with a bound instead.
        tracer_provider = SdkTracerProvider(resource=resource, shutdown_on_exit=False)
        for chosen in traced:
            tracer_provider.add_span_processor(BatchSpanProcessor(_span_exporter(chosen)))
        for chosen in measured:
            readers.append(PeriodicExportingMetricReader(_metric_exporter(chosen)))
        meter_provider = SdkMeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)
    except ImportError:
        raise
    except Exception as exc:  # a value the SDK refuses: a limit, a credential provider, ...
        if tracer_provider is not None:
            tracer_provider.shutdown()
        for reader in readers:
            reader.shutdown()
        named = ", ".join(sorted(name for name in os.environ if name.startswith("OTEL_")))
        said = " ".join(str(exc).split())
        raise TelemetryUnavailable(
            f"OpenTelemetry's SDK refuses a value of {named}: {type(exc).__name__}: {said}"
        ) from None
    return tracer_provider, meter_provider


def _check_endpoints() -> None:
    """Refuse an OTLP endpoint the exporter could never post to (a scheme
    other than http or https, no host, a port out of range, white space
    anywhere, as a blank copied from a .env file) at start, rather than at
    every export. A blank value counts as unset. The message names the
    variable, not the value, which may hold credentials."""
    from urllib.parse import urlsplit

    from guard.telemetry import ENDPOINT_VARIABLES, TelemetryUnavailable

    for variable in ENDPOINT_VARIABLES:
        value = os.environ.get(variable, "")
        if not value.strip():
            continue
        if any(character.isspace() for character in value):
            raise TelemetryUnavailable(f"{variable} holds white space: a URL has none, at either end included")
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


def _check_compression(signal: str) -> None:
    """Refuse, at start, a compression the OTLP exporter of ``signal`` would
    be given and does not do (its own variable, else the general one, as the
    exporter reads them): some releases of the SDK refuse it, later ones
    only log it and send uncompressed, which a collector expecting it may
    then reject."""
    from guard.telemetry import TelemetryUnavailable

    variable = f"OTEL_EXPORTER_OTLP_{signal}_COMPRESSION"
    if variable not in os.environ:
        variable = "OTEL_EXPORTER_OTLP_COMPRESSION"
    value = os.environ.get(variable, "").strip()
    if value and value.lower() not in ("gzip", "deflate", "none"):
        raise TelemetryUnavailable(
            f"{variable}={value!r}: the OTLP exporter compresses with gzip or deflate, or not at all (none)"
        )


def _check_headers() -> None:
    """Refuse OTLP headers the exporter would drop (``Authorization: Bearer x``,
    as curl takes it, instead of ``Authorization=Bearer x``): the SDK warns
    with the whole entry, credentials included, and exports without it. So
    is a value HTTP cannot carry once percent-decoded (text that is not
    Latin-1, a line break), which would fail every export. The message
    names the variable and the entry's place, not its text."""
    from urllib.parse import unquote

    from guard.telemetry import TelemetryUnavailable

    for variable in _HEADER_VARIABLES:
        entries = [entry for entry in os.environ.get(variable, "").split(",") if entry.strip()]
        for number, entry in enumerate(entries, 1):
            if not _HEADER.fullmatch(entry):
                raise TelemetryUnavailable(
                    f"{variable}: entry {number} is not name=value (as Authorization=Bearer%20...); "
                    "its text is not shown, as it may hold credentials"
                )
            if not _carried_by_http(unquote(entry.partition("=")[2])):
                raise TelemetryUnavailable(
                    f"{variable}: entry {number} has a value HTTP cannot carry once percent-decoded "
                    "(text that is not Latin-1, or a line break); its text is not shown, as it may hold credentials"
                )


def _carried_by_http(value: str) -> bool:
    """Whether ``value`` can be an HTTP header's value: Latin-1 text without a line break."""
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return "\r" not in value and "\n" not in value


_MAX_TIMEOUT_SECONDS = 1e9
"""Past this (about 31 years) an export's deadline overflows the platform's
clock: a bound on nonsense, not a policy (``10000``, the specification's
milliseconds read as the SDK reads them, in seconds, is taken)."""
_MAX_BATCHING_VALUE = 86_400_000
"""The largest delay, timeout or interval (a day, in milliseconds) or size taken."""


def _timeout(seconds: float) -> bool:
    return 0 < seconds <= _MAX_TIMEOUT_SECONDS


def _batching(value: float) -> bool:
    return 1 <= value <= _MAX_BATCHING_VALUE


_NUMBERS: dict[str, tuple[Callable[[str], float], Callable[[float], bool], str]] = {
    **dict.fromkeys(
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"),
        (float, _timeout, f"a number of seconds above 0 and at most {_MAX_TIMEOUT_SECONDS:.0f}"),
    ),
    **dict.fromkeys(
        (
            "OTEL_BSP_SCHEDULE_DELAY",
            "OTEL_BSP_EXPORT_TIMEOUT",
            "OTEL_BSP_MAX_QUEUE_SIZE",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
        ),
        (int, _batching, f"a whole number from 1 to {_MAX_BATCHING_VALUE}"),
    ),
    **dict.fromkeys(
        ("OTEL_METRIC_EXPORT_INTERVAL", "OTEL_METRIC_EXPORT_TIMEOUT"),
        (float, _batching, f"a number from 1 to {_MAX_BATCHING_VALUE}"),
    ),
}
"""Each numeric setting: how the SDK reads it, the values that work, and
the rule a refusal states."""


def _check_numbers() -> None:
    """Refuse an export timeout, a span batching setting or a metric export
    setting that the SDK cannot read as its number, or that is out of
    range (``0``, ``-1``, ``nan``, ``inf``): the SDK fails every export with
    such a timeout, prints a traceback for a setting it cannot parse and
    goes on with its default, and its export thread dies at once on one too
    large, so that signal is never exported."""
    import math

    from guard.telemetry import TelemetryUnavailable

    for variable, (read, works, rule) in _NUMBERS.items():
        value = os.environ.get(variable)
        if value is None:
            continue
        try:
            number = read(value)
        except ValueError:
            number = math.nan
        if not works(number):
            raise TelemetryUnavailable(f"{variable} is not {rule}")


_TLS_FILES = ("CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY")
"""The TLS files an OTLP exporter reads at every export (the certificates
it trusts, a client certificate and its key), under ``OTEL_EXPORTER_OTLP_``
and each signal's own prefix."""


def _check_files(signals: tuple[str, ...]) -> None:
    """Refuse a TLS variable of a signal exported over OTLP (``signals``)
    that names nothing this process can read: the exporter opens it at
    every export, and fails each one with a traceback, so nothing is ever
    exported. The certificates trusted may be a directory of them (as
    ``requests`` takes it); a blank value counts as unset."""
    from guard.telemetry import TelemetryUnavailable

    prefixes = ["", *(f"_{signal}" for signal in signals)] if signals else []
    for prefix in prefixes:
        for kind in _TLS_FILES:
            variable = f"OTEL_EXPORTER_OTLP{prefix}_{kind}"
            path = os.environ.get(variable, "").strip()
            readable = os.path.isfile(path) or (kind == "CERTIFICATE" and os.path.isdir(path))
            if path and not (readable and os.access(path, os.R_OK)):
                raise TelemetryUnavailable(f"{variable} names nothing this process can read: {_text(path, 200)}")


_PROVIDER_VARIABLES = {
    "OTEL_PYTHON_TRACER_PROVIDER": "opentelemetry_tracer_provider",
    "OTEL_PYTHON_METER_PROVIDER": "opentelemetry_meter_provider",
}
_EXEMPLAR_FILTERS = ("always_off", "always_on", "trace_based")


def _check_choices() -> None:
    """Refuse a provider, a resource detector or an exemplar filter the SDK
    would not find: it prints a traceback for each (a provider or a
    detector, at start; every detector then skipped), or refuses to build
    the meter provider."""
    from importlib.metadata import entry_points

    from guard.telemetry import TelemetryUnavailable

    for variable, group in _PROVIDER_VARIABLES.items():
        name = os.environ.get(variable)
        if name is not None and name not in entry_points(group=group).names:
            raise TelemetryUnavailable(
                f"{variable} names no installed provider: {_text(name, 100)!r}"
                f" (installed: {', '.join(sorted(entry_points(group=group).names)) or 'none'})"
            )
    detectors = entry_points(group="opentelemetry_resource_detector").names
    for name in os.environ.get("OTEL_EXPERIMENTAL_RESOURCE_DETECTORS", "").split(","):
        if name.strip() and name.strip() != "*" and name.strip() not in detectors:
            raise TelemetryUnavailable(
                f"OTEL_EXPERIMENTAL_RESOURCE_DETECTORS names no installed resource detector:"
                f" {_text(name.strip(), 100)!r} (installed: {', '.join(sorted(detectors)) or 'none'})"
            )
    chosen = os.environ.get("OTEL_METRICS_EXEMPLAR_FILTER")
    if chosen is not None and chosen not in _EXEMPLAR_FILTERS:
        raise TelemetryUnavailable(f"OTEL_METRICS_EXEMPLAR_FILTER is none of {', '.join(_EXEMPLAR_FILTERS)}")


def _endpoint(signal: str) -> str | None:
    """Where ``signal`` (``TRACES``, ``METRICS``) is exported: its own
    endpoint variable, else the general one with the signal's path
    (``/v1/traces``) added to its path, before any query (a vendor's
    ``?api_key=...`` stays the query), else ``None``. Blank values count
    as unset."""
    own = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT", "").strip()
    if own:
        return own
    general = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if not general:
        return None
    address, mark, query = general.partition("?")
    return f"{address.removesuffix('/')}/v1/{signal.lower()}{mark}{query}"


def _exporter_choices(signal: str) -> tuple[str, ...]:
    """The exporters ``OTEL_{signal}_EXPORTER`` names: a comma-separated
    list, as the specification allows (``otlp,console``), none for ``none``.
    Unset, ``otlp`` when an endpoint is set for the signal (``_endpoint``),
    else none: a traces endpoint alone asks for no metrics, which would go
    to a local collector that is usually not there and hold every exit."""
    from guard.telemetry import TelemetryUnavailable

    variable = f"OTEL_{signal}_EXPORTER"
    value = os.environ.get(variable, "").strip()
    if not value and _endpoint(signal) is None:
        return ()
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
        _check_compression(signal)
    return names


_LOCAL_COLLECTOR = "http://localhost:4318"
"""The OTLP exporter's default endpoint, for a signal given none."""


def _span_exporter(chosen: str) -> SpanExporter:
    if chosen == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    _hide_queries_in_exporter_logs()
    return OTLPSpanExporter(endpoint=_endpoint("TRACES") or f"{_LOCAL_COLLECTOR}/v1/traces")


def _metric_exporter(chosen: str) -> MetricExporter:
    if chosen == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    _hide_queries_in_exporter_logs()
    return OTLPMetricExporter(endpoint=_endpoint("METRICS") or f"{_LOCAL_COLLECTOR}/v1/metrics")


_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
)
# A URL's query string, as the exporter's messages quote the URL it failed to post to.
_QUERY = re.compile(r"(?<=[\w/])\?[^\s'\"()<>]+")


class _QueryHidden(logging.Filter):
    """Hides the query strings in the OTLP exporter's own log records: it
    quotes the URL of an export that failed, and an endpoint's query may
    hold an API key (``?api_key=...``, as some vendors take it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        hidden = _QUERY.sub(f"?{REDACTED}", message)
        if hidden != message:
            record.msg, record.args = hidden, None
        return True


def _hide_queries_in_exporter_logs() -> None:
    """Put ``_QueryHidden`` on the OTLP exporter's loggers, once per process."""
    for name in _EXPORTER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, _QueryHidden) for existing in logger.filters):
            logger.addFilter(_QueryHidden())
