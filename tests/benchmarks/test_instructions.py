"""Smoke test of the instruction counts: the measured program runs every
policy's config; with valgrind installed, a tiny count is reported. No count
is asserted."""

from __future__ import annotations

import re
import shutil

import pytest

from benchmarks.instructions import POLICIES, main


@pytest.mark.parametrize("policy", POLICIES)
def test_the_measured_program_runs_each_policy(policy: str) -> None:
    assert main(["--run", policy, "30"]) == 0


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_instructions_a_call_are_reported_against_the_first_policy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--calls", "40", "--warmup", "20", "remind", "loops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"remind   \+ log +[\d,]+ instructions a call  1\.00x", lines[0])
    assert re.fullmatch(r"loops    \+ log +[\d,]+ instructions a call  [\d.]+x", lines[1])


def test_an_unknown_policy_or_too_few_calls_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bogus"])
    assert "unknown policy 'bogus'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--calls", "10", "--warmup", "10"])
    assert "--calls must be more than --warmup" in capsys.readouterr().err
