"""Smoke test of the audit section at a tiny size. No timing is asserted."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from benchmarks.cli import main


def test_the_audit_section_audits_the_session_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    options = ["--only", "audit", "--audit-calls", "40", "--corpus", str(tmp_path / "no-corpus"), "--format", "json"]
    assert main(options) == 0
    _, *rows = (msgspec.json.decode(line) for line in capsys.readouterr().out.splitlines() if line)
    assert [row["name"] for row in rows] == [
        "replay_log of its imported log",
        "repeat-tool-guard audit",
        "--jobs 1",
        "--jobs 2",
        "audit, one failing call repeated 4 times",
        "replay, one failing call repeated 4 times",
        "audit, one failing call repeated 40 times",
        "replay, one failing call repeated 40 times",
    ]
    assert rows[0]["section"].endswith(" session of 40 calls, every policy")
    assert "x the replay's" in rows[1]["extra"]
    assert rows[3]["section"] == "audit, a folder of 4 sessions, 40 calls in all"
    peaks = [float(row["extra"].rpartition("peak RSS ")[2].removesuffix(" MB")) for row in rows[4:]]
    assert all(peak > 0 for peak in peaks), "each child's own peak, as it reported it"
