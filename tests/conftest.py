"""Shared fixtures. Bus-touching tests run under both anyio backends."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import structlog

from benchmarks._redis import RedisServer
from benchmarks._redis import start_redis_server as _start_redis_server
from bus import Agent, Bus
from bus.testing import Capture, FakeClock
from tests.claude_cli import FakeAnthropic, bundled_cli

if TYPE_CHECKING:
    from redis.asyncio import Redis


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    """A command run in-process (``main([...])``) configures structlog for
    the whole process, as a command does; every test starts from the defaults."""
    yield
    structlog.reset_defaults()


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
    """Set this process's file size limit (``RLIMIT_FSIZE``, soft) for the
    rest of the test: a write past it fails for real, part-way if it
    straddles the limit (Python ignores ``SIGXFSZ``, so it is ``EFBIG``)."""
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
