"""Smoke test of the audit-scale benchmark at a tiny size. No timing is asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.audit_scale import main


def test_the_benchmark_audits_the_session_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["--calls", "40", "--corpus", str(tmp_path / "no-corpus")])
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 2
    assert rows[1].startswith("synthetic Claude session")
    assert rows[1].split()[5] == "40"
