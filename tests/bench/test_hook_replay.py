"""Smoke test of the hook benchmark at a tiny size: it runs and reports every
size. No timing is asserted."""

from __future__ import annotations

import pytest

from tests.bench.hook_replay import main


def test_the_benchmark_reports_every_session_size(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--sizes", "0,12", "--repeat", "1", "--processes", "1"])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [row.split()[0] for row in rows] == ["0", "12"]
    assert all(row.count("ms") == 2 for row in rows)
