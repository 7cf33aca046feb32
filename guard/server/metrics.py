"""The resident server's Prometheus metrics, kept in a registry of its own
(never the process-wide default), so two servers in one process count apart."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from bus import EVENT_TYPES, Event
from guard.actions import Action
from guard.server.sessions import SessionStore
from guard.sessions.fleet import FleetCounts

__all__ = ["CONTENT_TYPE", "LATENCY_BUCKETS", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Request latency buckets in seconds: fine below 10 ms, where a hook should answer."""


class _StoreCollector(Collector):
    """Reads the store's own counts when scraped (no bookkeeping on the hot path)."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        store = self._store
        yield GaugeMetricFamily("repeat_tool_guard_live_sessions", "Sessions whose state is in memory.", len(store))
        yield CounterMetricFamily(
            "repeat_tool_guard_sessions_restored", "Sessions rebuilt from their persisted events.", store.restored
        )
        yield CounterMetricFamily(
            "repeat_tool_guard_sessions_evicted",
            "Sessions dropped from memory (idle, too many, or ended).",
            store.evicted,
        )
        yield CounterMetricFamily(
            "repeat_tool_guard_sessions_caught_up",
            "Requests that brought a live session up to what other replicas appended.",
            store.caught_up,
        )


class Metrics:
    """Counters the server updates and ``render`` exposes in Prometheus text:
    events by type, guard actions (and shadow actions) by policy and kind, responses by route and
    status, request latency by route, and the store's session counts."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._events = Counter(
            "repeat_tool_guard_events", "Events published on the sessions' buses, by type.", ["type"],
            registry=self.registry,
        )  # fmt: skip
        self._by_class = {cls: self._events.labels(name) for name, cls in EVENT_TYPES.items()}
        self._actions = Counter(
            "repeat_tool_guard_actions", "Guard actions, by policy and kind.", ["policy", "action"],
            registry=self.registry,
        )  # fmt: skip
        self._shadow_actions = Counter(
            "repeat_tool_guard_shadow_actions",
            "Actions of policies in shadow mode: recorded, not delivered; by policy and kind.",
            ["policy", "action"], registry=self.registry,
        )  # fmt: skip
        self._responses = Counter(
            "repeat_tool_guard_responses", "HTTP responses, by route and status code.", ["route", "status"],
            registry=self.registry,
        )  # fmt: skip
        self._latency = Histogram(
            "repeat_tool_guard_request_duration_seconds", "Time to answer a request, by route.", ["route"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip

    def watch(self, store: SessionStore) -> None:
        """Expose ``store``'s live, restored and evicted session counts."""
        self.registry.register(_StoreCollector(store))

    def on_event(self, event: Event) -> None:
        """A bus recorder: count the event by its type."""
        self._by_class[type(event)].inc()

    def on_action(self, action: Action, trigger: Event) -> None:
        """A guard action listener: count the action by policy and kind (a
        shadow action in a counter of its own: it was not taken)."""
        counter = self._shadow_actions if action.shadow else self._actions
        counter.labels(action.policy, action.action).inc()

    def observe(self, route: str, status: int, seconds: float) -> None:
        self._responses.labels(route, str(status)).inc()
        self._latency.labels(route).observe(seconds)

    def render(self, fleet: FleetCounts | None = None) -> bytes:
        """The metrics in Prometheus text; with ``fleet`` (a store shared by
        several replicas), also every replica's events and actions."""
        text = generate_latest(self.registry)
        if fleet is None:
            return text
        lines = [
            "# HELP repeat_tool_guard_fleet_events_total Events appended to the fleet's sessions, by every replica.",
            "# TYPE repeat_tool_guard_fleet_events_total counter",
            f"repeat_tool_guard_fleet_events_total {fleet.events}",
            "# HELP repeat_tool_guard_fleet_actions_total Guard actions of the fleet, by policy and kind.",
            "# TYPE repeat_tool_guard_fleet_actions_total counter",
        ]
        for (policy, kind), count in sorted(fleet.actions.items()):
            lines.append(f'repeat_tool_guard_fleet_actions_total{{policy="{policy}",action="{kind}"}} {count}')
        return text + ("\n".join(lines) + "\n").encode()
