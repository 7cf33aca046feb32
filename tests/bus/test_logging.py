"""structlog is imported when something is first logged, and a configuration
can wait for that moment."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from structlog.testing import capture_logs

from bus import _logging


def test_a_configuration_waits_for_the_first_log_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_logging, "sys", SimpleNamespace(modules={}))  # as in a process that never imported structlog
    ran: list[str] = []
    _logging.configure_when_imported(lambda: ran.append("configured"))
    assert ran == [], "nothing logged yet: structlog not needed"
    with capture_logs() as logged:
        _logging.LazyLogger("bus").warning("first line")
        _logging.LazyLogger("bus").warning("second line")
    assert ran == ["configured"], "configured once, before the first line"
    assert [entry["event"] for entry in logged] == ["first line", "second line"]


def test_a_configuration_runs_at_once_once_structlog_is_imported() -> None:
    ran: list[str] = []
    _logging.configure_when_imported(lambda: ran.append("configured"))
    assert ran == ["configured"]
