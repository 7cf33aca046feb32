"""structlog is imported when something is first logged, and a configuration
can wait for that moment."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import structlog
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


def test_a_record_its_stream_cannot_encode_is_written_with_its_text_escaped(tmp_path: Path) -> None:
    with (tmp_path / "log").open("w", encoding="utf-8") as stream:  # strict: a lone surrogate cannot be written
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(stream))
        _logging.LazyLogger("bus").error("bus.subscriber_failed", handler="on_\ud800call")
        actions = _logging.InfoLog("guard")
        assert actions.enabled()
        actions.info("guard.deny", tool="caf\udce9")
    lines = (tmp_path / "log").read_text().splitlines()
    assert len(lines) == 2
    assert "on_\\ud800call" in lines[0]
    assert "caf\\udce9" in lines[1]


@pytest.mark.usefixtures("logging_to_a_full_disk")
def test_a_stream_that_takes_no_record_never_raises_into_what_is_reported() -> None:
    try:
        raise RuntimeError("the fault being reported")
    except RuntimeError:
        _logging.LazyLogger("bus").exception("bus.subscriber_failed")
    actions = _logging.InfoLog("guard")
    assert actions.enabled()
    actions.info("guard.deny", tool="grep")
