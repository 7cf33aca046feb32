"""Shared fixtures. Bus-touching tests run under both anyio backends."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import structlog

from benchmarks._redis import RedisServer
from benchmarks._redis import start_redis_server as _start_redis_server
from bus import Agent, Bus
from bus.testing import Capture, FakeClock
from tests.agent_clis import CODEX_VERSION, GEMINI_VERSION, FakeGemini, FakeResponses, cli_path
from tests.claude_cli import FakeAnthropic, bundled_cli

if TYPE_CHECKING:
    from redis.asyncio import Redis


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    """A command run in-process (``main([...])``) configures structlog for
    the whole process, as a command does; every test starts from the defaults."""
    yield
    structlog.reset_defaults()


@pytest.fixture
def logging_to_a_full_disk() -> Iterator[None]:
    """structlog printing to ``/dev/full``: every record's write fails, as
    on a full disk or a closed pipe."""
    with open("/dev/full", "w") as full:
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(full))
        try:
            yield
        finally:
            structlog.reset_defaults()
            with contextlib.suppress(OSError):  # what is left in its buffer cannot be flushed either
                full.close()


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``asyncio_only`` (its library has no trio support:
    redis-py, the runtimes' own loops) runs on the asyncio backend alone:
    marked before pytest parametrizes, so the mark replaces the fixture's
    two backends."""
    if "anyio_backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker("asyncio_only"):
        metafunc.definition.add_marker(pytest.mark.parametrize("anyio_backend", ["asyncio"]))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that drives the real Claude Code CLI (it uses
    ``fake_anthropic``) is ``slow``: marked before ``-m`` selects."""
    for item in items:
        if "fake_anthropic" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def bus(clock: FakeClock) -> Bus:
    return Bus(clock=clock)


@pytest.fixture
def capture(bus: Bus) -> Capture:
    return Capture().attach(bus)


@pytest.fixture
def agent() -> Agent:
    return Agent("main")


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "session.jsonl"


AskScript = Callable[..., Path]


@pytest.fixture
def ask_script(tmp_path: Path) -> AskScript:
    """Writes a real executable ask command into ``tmp_path``: ``body`` is
    shell (``/bin/sh``) unless ``shebang`` says otherwise. Returns its path."""

    def make(body: str, *, name: str = "ask", shebang: str = "#!/bin/sh") -> Path:
        path = tmp_path / name
        path.write_text(f"{shebang}\n{body}\n")
        path.chmod(0o755)
        return path

    return make


@pytest.fixture
def missing_ask_command(tmp_path: Path) -> str:
    """An ask command path that does not exist: tests never reach a real model."""
    return str(tmp_path / "no-such-ask-command")


@pytest.fixture
def fake_responses(tmp_path: Path) -> Iterator[FakeResponses]:
    """A scripted OpenAI Responses API on loopback for the real Codex CLI (see
    ``tests/agent_clis.py``), its home ``tmp_path/codex-home``. Skips when the
    pinned CLI is not installed (``.ci/run`` installs it)."""
    if cli_path("codex") is None:
        pytest.skip(f"the Codex CLI (npm @openai/codex@{CODEX_VERSION}) is not installed")
    api = FakeResponses(tmp_path / "codex-home")
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def fake_gemini(tmp_path: Path) -> Iterator[FakeGemini]:
    """A scripted Gemini API on loopback for the real Gemini CLI (see
    ``tests/agent_clis.py``), its home ``tmp_path/gemini-home``. Skips when the
    pinned CLI is not installed (``.ci/run`` installs it)."""
    if cli_path("gemini") is None:
        pytest.skip(f"the Gemini CLI (npm @google/gemini-cli@{GEMINI_VERSION}) is not installed")
    api = FakeGemini(tmp_path / "gemini-home")
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def fake_anthropic(tmp_path: Path) -> Iterator[FakeAnthropic]:
    """A scripted Anthropic Messages API on loopback for the real Claude Code
    CLI bundled in ``claude-agent-sdk`` (see ``tests/claude_cli.py``); its
    home (settings, transcripts, the working directory ``work``) is
    ``tmp_path/claude-home``. Skips when the SDK or its CLI is not installed."""
    if bundled_cli() is None:
        pytest.skip("claude-agent-sdk with its bundled Claude Code CLI is not installed")
    api = FakeAnthropic(tmp_path / "claude-home")
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def file_size_limit() -> Iterator[Callable[[int], None]]:
    """Set this process's file size limit (``RLIMIT_FSIZE``, soft): a write
    past it fails for real, part-way if it straddles the limit (Python
    ignores ``SIGXFSZ``, so it is ``EFBIG``). Lift it (``limit(1 << 30)``)
    before the test can fail or end: pytest writes the test's progress while
    the limit holds, and into a file (a CI log) longer than the limit that
    write fails and ends the run. The fixture restores the limit afterwards."""
    import resource

    previous = resource.getrlimit(resource.RLIMIT_FSIZE)

    def limit(size: int) -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, previous[1]))

    try:
        yield limit
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, previous)


@pytest.fixture
def zero_umask() -> Iterator[None]:
    """Umask 0 for the test: a file's mode is then exactly what its creator asked for."""
    import os

    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def start_redis_server() -> RedisServer:
    """A fresh ``redis-server`` (see ``benchmarks/_redis.py``); skips the
    test when the binary is absent (``.ci/run`` installs it)."""
    try:
        return _start_redis_server()
    except FileNotFoundError as missing:
        pytest.skip(str(missing))


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = start_redis_server()
    try:
        yield server
    finally:
        server.process.terminate()
        server.process.wait(timeout=10)


RedisClients = Callable[..., "Redis"]


@pytest.fixture
async def redis_clients(redis_url: str) -> AsyncIterator[RedisClients]:
    """``redis_clients(**options)``: a new connection to the test server, one
    per worker or replica as separate processes would have; all are closed
    at teardown. asyncio only (redis-py has no trio support)."""
    from redis.asyncio import Redis

    made: list[Redis] = []

    def connect(**options: Any) -> Redis:
        client = Redis.from_url(redis_url, **options)
        made.append(client)
        return client

    yield connect
    for client in made:
        await client.aclose()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The shared test server's URL, emptied before each test."""
    with socket.create_connection(("127.0.0.1", redis_server.port), timeout=5) as sock:
        sock.sendall(b"FLUSHALL\r\n")
        sock.recv(16)
    return redis_server.url


class Proxy:
    """A TCP proxy to Redis. ``arm(mode, mark)`` cuts the next connection
    whose client sends ``mark``: ``"before"`` drops those bytes, ``"after"``
    passes them to Redis and drops its reply; both then close the
    connection; ``"blackhole"`` drops them and everything after on that
    connection, which stays open (a Redis that stopped answering). While
    ``refusing``, new connections are closed at once. Every other byte
    passes both ways unchanged. ``sent`` counts the client's sends that
    held the armed ``mark`` (a retry sends it again)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.mode: str | None = None
        self.mark = b""
        self.cuts = 0
        self.sent = 0
        self.refusing = False
        self._then_refuse = False
        self._lock = threading.Lock()
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, mode: str, mark: bytes, *, then_refuse: bool = False) -> None:
        """Cut at ``mark``; with ``then_refuse``, refuse every connection after the cut."""
        with self._lock:
            self.mode = mode
            self.mark = mark
            self._then_refuse = then_refuse

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()

    def _pipe(self, client: socket.socket, upstream: socket.socket) -> None:
        cut_after = holed = False
        # a selector, not select.select: a long test run's descriptors pass 1,024, which select refuses
        with client, upstream, selectors.DefaultSelector() as selector:
            selector.register(client, selectors.EVENT_READ)
            selector.register(upstream, selectors.EVENT_READ)
            while True:
                ready = [key.fileobj for key, _ in selector.select(0.5)]
                if self._closing:
                    return
                for sock in ready:
                    assert isinstance(sock, socket.socket)
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is client:
                        with self._lock:
                            marked = bool(self.mark) and self.mark in data
                            self.sent += marked
                            mode = self.mode if marked else None
                            if mode is not None:
                                self.mode = None
                                self.cuts += 1
                                self.refusing = self._then_refuse
                        if mode == "before":
                            return
                        holed = holed or mode == "blackhole"
                        if holed:
                            continue
                        upstream.sendall(data)
                        cut_after = cut_after or mode == "after"
                    elif cut_after:
                        return  # Redis ran it; its reply is lost in transit
                    elif holed:
                        continue
                    else:
                        client.sendall(data)

    def close(self) -> None:
        self._closing = True
        self.listener.close()


@pytest.fixture
def proxy(redis_url: str) -> Iterator[Proxy]:
    port = int(redis_url.rsplit(":", 1)[1].split("/", 1)[0])
    made = Proxy(port)
    yield made
    made.close()


@pytest.fixture
def redis_proxy(redis_url: str) -> Iterator[Proxy]:
    """A ``Proxy`` to the test's redis-server; its URL is ``redis://127.0.0.1:<port>/0``."""
    port = int(redis_url.rsplit(":", 1)[1].split("/", 1)[0])
    made = Proxy(port)
    yield made
    made.close()
