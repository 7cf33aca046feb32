"""Fixtures for the resident server's tests: real servers, real HTTP.

- ``served``: the application on Hypercorn in this process (a thread running
  its own event loop, on asyncio and on trio), listening on a free loopback
  port; the test talks to it with a real ``httpx.Client``.
- ``ServerProcess``: ``repeat-tool-guard serve`` as a separate process on a
  free port or a Unix socket, stopped with SIGTERM like a service manager
  stops it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import httpx
import pytest

from guard.config import Config
from guard.server import FileSessionStore, create_app
from guard.server.runner import hypercorn_config, serve_app

REPO = Path(__file__).resolve().parents[3]


class Served:
    """The application served by Hypercorn on a thread of this process."""

    def __init__(self, store: FileSessionStore, backend: str, **app_options: Any) -> None:
        self.store = store
        self.state_dir = store.state_dir
        self.backend = backend
        self.app = create_app(store, **{"disconnects_queued": backend == "asyncio", **app_options})  # as serve runs it
        self._config = hypercorn_config("127.0.0.1:0", graceful_timeout=5)
        self.url = self._config.listen(backend)
        self.client = httpx.Client(base_url=self.url, timeout=30)
        self._started = threading.Event()
        self._thread = threading.Thread(target=anyio.run, args=(self._main,), kwargs={"backend": backend})
        self._thread.start()
        self._started.wait(10)

    async def _main(self) -> None:
        self._stop = anyio.Event()
        self._token = anyio.lowlevel.current_token()
        self._started.set()
        await serve_app(self.app, self._config, self.backend, shutdown_trigger=self._stop.wait)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> httpx.Response:
        return self.client.post(path, json=body, **kwargs) if body is not None else self.client.post(path, **kwargs)

    def event(self, session: str, **event: Any) -> dict[str, Any]:
        """Post one event; the answer, which must be a 200."""
        response = self.client.post(f"/v1/sessions/{session}/events", json=event)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    def stop(self) -> None:
        if self._thread.is_alive():
            self.client.close()
            anyio.from_thread.run_sync(self._stop.set, token=self._token)
            self._thread.join(30)


MakeServed = Callable[..., Served]


@pytest.fixture(params=["asyncio", "trio"])
def server_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_served(tmp_path: Path, server_backend: str) -> Iterator[MakeServed]:
    """``make_served(config=None, state_dir=None, **options)``: a served
    application over a file store in ``tmp_path/state``; stopped at teardown."""
    made: list[Served] = []

    def make(
        config: Config | None = None, *, state_dir: Path | None = None, store_options: dict[str, Any] | None = None,
        **app_options: Any,
    ) -> Served:  # fmt: skip
        store = FileSessionStore(state_dir or tmp_path / "state", config, **(store_options or {}))
        served = Served(store, server_backend, **app_options)
        made.append(served)
        return served

    yield make
    for served in made:
        served.stop()


@pytest.fixture
def served(make_served: MakeServed) -> Served:
    """The default server: ``remind`` alone, no token."""
    return make_served()


class ServerProcess:
    """``repeat-tool-guard serve`` in a process of its own."""

    def __init__(
        self,
        state_dir: Path,
        *args: str,
        env: dict[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.argv = [sys.executable, "-m", "guard", "serve", "--state-dir", str(state_dir), *args]
        self.proc = subprocess.Popen(
            self.argv,
            cwd=REPO,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **(env or {})},
            preexec_fn=preexec_fn,
        )
        assert self.proc.stderr is not None
        first = self.proc.stderr.readline()
        said = ""
        while "warning:" in first:  # said before it listens
            said += first
            first = self.proc.stderr.readline()
        if "listening on " not in first:
            self.proc.wait(10)
            raise AssertionError(f"server did not start: {said}{first}{self.proc.stderr.read()}")
        self.where = first.split("listening on ", 1)[1].split(" ", 1)[0]
        if self.where.startswith("unix:"):
            self.uds: str | None = self.where[len("unix:") :]
            self.url = "http://guard"
        else:
            self.uds = None
            self.url = self.where
        self.stderr = said + first

    def client(self, **kwargs: Any) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=self.uds) if self.uds else None
        return httpx.Client(base_url=self.url, transport=transport, timeout=30, **kwargs)

    def async_client(self, **kwargs: Any) -> httpx.AsyncClient:
        transport = httpx.AsyncHTTPTransport(uds=self.uds) if self.uds else None
        return httpx.AsyncClient(base_url=self.url, transport=transport, timeout=60, **kwargs)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal the server and wait for it; its exit code. ``stderr`` holds all it wrote."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        assert self.proc.stderr is not None
        self.stderr += self.proc.stderr.read()
        return self.proc.wait(60)


StartServer = Callable[..., ServerProcess]


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """``start_server(*serve_args, state_dir=None)``: a server process on a
    free loopback port unless the args say otherwise; stopped at teardown."""
    started: list[ServerProcess] = []

    def start(
        *args: str,
        state_dir: Path | None = None,
        env: dict[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> ServerProcess:
        where = () if any(a in ("--uds", "--port") for a in args) else ("--port", "0")
        server = ServerProcess(state_dir or tmp_path / "state", *where, *args, env=env, preexec_fn=preexec_fn)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(10)
        if server.proc.stderr is not None:
            server.proc.stderr.close()


def wait_listening(address: Path | int, seconds: float = 30) -> None:
    """Wait until a server accepts connections on the Unix socket or the
    loopback port ``address``. It probes with a socket of its own, closed at
    once: a client that polls with failed connections can leave their
    sockets to the garbage collector."""
    family, target = (
        (socket.AF_INET, ("127.0.0.1", address)) if isinstance(address, int) else (socket.AF_UNIX, str(address))
    )
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket(family) as probe:
            if probe.connect_ex(target) == 0:
                return
        time.sleep(0.02)


def hook_payload(session: str, event: str, **fields: Any) -> dict[str, Any]:
    """A Claude Code hook payload as Claude Code posts it."""
    return {
        "session_id": session,
        "transcript_path": f"/home/dev/.claude/projects/app/{session}.jsonl",
        "cwd": "/home/dev/app",
        "permission_mode": "default",
        "hook_event_name": event,
        **fields,
    }
