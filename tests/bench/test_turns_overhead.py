"""Smoke test of the turns benchmark at a tiny size: it runs and reports
every variant. No timing is asserted."""

from __future__ import annotations

import pytest

from tests.bench.turns_overhead import VARIANTS, main


def test_the_benchmark_reports_every_variant_for_both_streams(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--calls", "30", "--repeat", "1", "--agents", "10"])
    out = capsys.readouterr().out
    for stream in ("varied", "loop"):
        for name in VARIANTS:
            assert f"{stream:6} {name:13}" in out
    assert "bytes per agent after one call (10 agents)" in out
