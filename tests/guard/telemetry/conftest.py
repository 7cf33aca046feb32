"""Fixtures for the OpenTelemetry export: the SDK's in-memory exporter and
reader behind the documented Python hook, and a real Arize Phoenix process
as the OTLP receiver of the end-to-end tests."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guard.telemetry import GuardTelemetry
from tests.guard.server.conftest import start_server as start_server  # the serve process fixture, shared

PHOENIX_VARIABLE = "REPEAT_TOOL_GUARD_PHOENIX"
"""The path of a ``phoenix`` executable (``pip install arize-phoenix`` in a
venv of its own; ``.ci/run`` makes one and sets this)."""


class Recorded:
    """A ``GuardTelemetry`` over in-memory SDK providers, and what it recorded."""

    def __init__(self, **options: Any) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.telemetry = GuardTelemetry(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )

    def metric(self, name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
        """Each data point of metric ``name``: its sorted attributes -> its value (a sum, or a histogram's count)."""
        points: dict[tuple[tuple[str, Any], ...], Any] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            value = getattr(point, "value", None)
                            points[tuple(sorted((point.attributes or {}).items()))] = (
                                value if value is not None else point.count  # type: ignore[union-attr]
                            )
        return points


@pytest.fixture
def recorded() -> Recorded:
    return Recorded(runtime="test", conversation_id="conv-1")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Phoenix:
    """Arize Phoenix running as a process of its own: an OTLP receiver (HTTP
    on ``url``/v1/traces) whose REST API returns the spans it stored."""

    def __init__(self, executable: str, workdir: Path) -> None:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "PHOENIX_WORKING_DIR": str(workdir),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(port),
            "PHOENIX_GRPC_PORT": str(_free_port()),
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        for name in [n for n in env if n.startswith("OTEL_")]:
            del env[name]
        self.log = workdir / "phoenix.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [executable, "serve"], env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"Phoenix did not start: {self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.5)

    def spans(self, project: str, want: int = 1, timeout: float = 60) -> list[dict[str, Any]]:
        """The spans of ``project`` once at least ``want`` are stored (or all there are at ``timeout``)."""
        deadline = time.monotonic() + timeout
        found: list[dict[str, Any]] = []
        while True:
            response = httpx.get(f"{self.url}/v1/projects/{project}/spans", params={"limit": 1000}, timeout=10)
            if response.status_code == 200:
                found = response.json()["data"]
                if len(found) >= want:
                    return found
            if time.monotonic() > deadline:
                return found
            time.sleep(0.3)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Collector:
    """An OTLP/HTTP receiver on a free loopback port: it answers every POST
    with 200 after ``delay`` seconds, and keeps the path of each one
    answered, in order, in ``posted``."""

    def __init__(self) -> None:
        self.posted: list[str] = []
        self.delay = 0.0
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                time.sleep(collector.delay)
                self.send_response(200)
                self.end_headers()
                collector.posted.append(self.path)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector() -> Iterator[Collector]:
    receiver = Collector()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    executable = os.environ.get(PHOENIX_VARIABLE)
    if not executable or not os.access(executable, os.X_OK):
        pytest.skip(
            f"{PHOENIX_VARIABLE} names no phoenix executable (python3 -m venv V && V/bin/pip install arize-phoenix; "
            f"{PHOENIX_VARIABLE}=V/bin/phoenix): the end-to-end export was not run"
        )
    server = Phoenix(executable, tmp_path_factory.mktemp("phoenix"))
    yield server
    server.stop()


@pytest.fixture
def project() -> str:
    """A Phoenix project of this test's own (``openinference.project.name``)."""
    return f"rtg-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def otlp_env(phoenix: Phoenix, project: str) -> dict[str, str]:
    """The standard variables pointing a process at ``phoenix``, traces only
    (Phoenix takes no metrics), batches sent after 100 ms."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url,
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
        "OTEL_SERVICE_NAME": "repeat-tool-guard-test",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
