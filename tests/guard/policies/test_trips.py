"""Rescue's trip log: a line per trip in its file, and a ``rescue.trip``
event while structlog lets ``info`` through."""

from __future__ import annotations

import logging
from pathlib import Path

import msgspec
import pytest
import structlog
from structlog.testing import capture_logs

from guard.policies.trips import Trip, TripLog


def _trip(count: int) -> Trip:
    return Trip(
        ts=1.0, kind="deny", agent="main", tool="grep", call_id=f"c{count}", signature="ab", count=count,
        epoch=0, trigger="repeat", redundant=0, rescues_used=0,
    )  # fmt: skip


def test_trips_are_written_whether_or_not_info_is_logged(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    request.addfinalizer(structlog.reset_defaults)
    trips = TripLog(str(tmp_path / "trips.jsonl"))
    with capture_logs() as logged:
        trips.record(_trip(1))
    assert [(e["event"], e["count"]) for e in logged] == [("rescue.trip", 1)]

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with capture_logs() as filtered:
        trips.record(_trip(2))
    assert filtered == []

    lines = (tmp_path / "trips.jsonl").read_bytes().splitlines()
    assert [msgspec.json.decode(line)["count"] for line in lines] == [1, 2]
