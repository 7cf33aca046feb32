"""Shared fixtures. Bus-touching tests run under both anyio backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from bus import Agent, Bus
from bus.testing import Capture, FakeClock


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


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
