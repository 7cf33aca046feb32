"""OpenTelemetry export of the guard's actions, optional (the ``otel`` extra).

Nothing here imports OpenTelemetry until export is switched on: by the
standard ``OTEL_*`` environment variables at an edge (``serve``, an adapter's
``GuardLink``), or by building ``GuardTelemetry`` yourself with your own
``TracerProvider`` and ``MeterProvider``. Off, it costs one look at the
environment per edge and nothing per call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from guard.telemetry.otel import (
        FINISH_REASON,
        OPERATION,
        OTHER_TOOLS,
        GuardTelemetry,
        providers_from_environment,
    )

__all__ = [
    "ENDPOINT_VARIABLES",
    "EXPORT_FLUSH_SECONDS",
    "FINISH_REASON",
    "OPERATION",
    "OTHER_TOOLS",
    "GuardTelemetry",
    "TelemetryUnavailable",
    "export_requested",
    "providers_from_environment",
    "telemetry_from_environment",
]

ENDPOINT_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)
"""Any of these set (and ``OTEL_SDK_DISABLED`` not ``true``) switches export on."""

EXPORT_FLUSH_SECONDS = 5.0
"""How long a stopping ``serve``, or a program whose guard built providers
of its own, waits at exit for export to take what its batches still
hold: a collector that is down or never answers must not hold it for the
SDK's own timeouts and retries (what it has not taken by then is dropped)."""


class TelemetryUnavailable(RuntimeError):
    """Export was asked for but cannot run as asked; the message says why."""


def export_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for OTLP export: an OTLP endpoint is set
    and the SDK is not disabled."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(env.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def telemetry_from_environment(
    *, runtime: str, conversation_id: str | None = None, session_id: str | None = None, in_process: bool = False
) -> GuardTelemetry | None:
    """A ``GuardTelemetry`` exporting where the ``OTEL_*`` variables say, or
    ``None`` when they ask for no export.

    ``in_process`` (an adapter inside the agent's own program): where the
    program has set OpenTelemetry's global providers, the guard records
    through them, into the program's own traces; where it has not yet, it
    records through providers built from the environment, kept its own and
    shared by every link of the process (``own_providers``: the global place
    stays the program's to take, and from the moment it does the guard
    records there too and stops its own). Raises ``TelemetryUnavailable`` when the variables ask for
    export the installed packages cannot do (no ``otel`` extra, an exporter
    or protocol this package does not speak)."""
    if not export_requested():
        return None
    try:
        from guard.telemetry.otel import GuardTelemetry, global_providers, own_providers, providers_from_environment

        tracers: TracerProvider | None
        meters: MeterProvider | None
        if not in_process:
            tracers, meters = providers_from_environment()
            follow = False
        else:
            tracers, meters = global_providers()
            follow = tracers is None or meters is None
            if follow:
                own = own_providers()
                tracers, meters = tracers or own[0], meters or own[1]
    except ImportError as exc:
        named = ", ".join(name for name in ENDPOINT_VARIABLES if os.environ.get(name, "").strip())
        raise TelemetryUnavailable(
            f"{named} is set but OpenTelemetry's SDK or OTLP exporter is not installed ({exc.name or exc}): "
            "pip install 'repeat-tool-guard[otel]'"
        ) from None
    return GuardTelemetry(
        tracer_provider=tracers,
        meter_provider=meters,
        runtime=runtime,
        conversation_id=conversation_id,
        session_id=session_id,
        follow_global=follow,
    )


def __getattr__(name: str) -> Any:
    if name in ("GuardTelemetry", "providers_from_environment", "FINISH_REASON", "OPERATION", "OTHER_TOOLS"):
        from guard.telemetry import otel

        return getattr(otel, name)
    raise AttributeError(f"module 'guard.telemetry' has no attribute {name!r}")
