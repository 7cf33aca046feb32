"""Who hears of the server's events and guard actions: the Prometheus
metrics, the live page's feed and, when export is on, OpenTelemetry. One
listener each for the store, fanned out here, each told the session and
route the request is about."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bus import Event
from guard.actions import Action
from guard.server.live import LiveFeed
from guard.server.metrics import Metrics
from guard.server.scope import current
from guard.server.sessions import SessionStore

if TYPE_CHECKING:
    from guard.telemetry.otel import GuardTelemetry

__all__ = ["watch_store"]


def watch_store(store: SessionStore, metrics: Metrics, live: LiveFeed, telemetry: GuardTelemetry | None) -> None:
    """Make ``store`` tell ``metrics``, ``live`` and ``telemetry`` of every
    event and live guard action of every session."""
    if telemetry is None:

        def on_event(event: Event) -> None:
            metrics.on_event(event)
            live.on_event(event)

        def on_action(action: Action, trigger: Event) -> None:
            metrics.on_action(action, trigger)
            live.on_action(action, trigger)

    else:
        exported = telemetry

        def on_event(event: Event) -> None:
            metrics.on_event(event)
            live.on_event(event)
            scope = current()
            exported.remember(event, conversation_id=scope.session if scope is not None else None)

        def on_action(action: Action, trigger: Event) -> None:
            metrics.on_action(action, trigger)
            live.on_action(action, trigger)
            scope = current()
            route, session = (scope.route, scope.session) if scope is not None else (None, None)
            exported.record(action, trigger, runtime=route, conversation_id=session)

    store.on_event = on_event
    store.on_action = on_action
