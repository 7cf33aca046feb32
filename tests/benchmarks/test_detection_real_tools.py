"""The real benchmark's tools, on the repository's own scenario logs: the scan
finds repeated calls and says whether their results changed; the builder
trims a log to its stretches, renumbers them and the runner scores them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.detection.real import load_real, split
from benchmarks.detection.real_build import build
from benchmarks.detection.run import CONFIGS, HERE, score_stretches
from benchmarks.detection.scan import calls_of, scan_session

pytestmark = pytest.mark.anyio

SCENARIOS = HERE / "scenarios"


async def test_scan_finds_a_call_repeated_with_the_same_result(anyio_backend: str) -> None:
    log = SCENARIOS / "same_grep_ten_times.jsonl"
    calls, found = await scan_session("scenario", log.name, "same_grep_ten_times", log)
    assert calls == 11
    (grep,) = [c for c in found if c.kind == "repeat"]
    assert len(grep.members) == 10
    assert grep.same_results
    assert not grep.writes_between
    assert grep.suggestion == "loop"
    assert grep.actions, "recommended acts on ten identical greps"


async def test_scan_sees_results_change_between_edits(anyio_backend: str) -> None:
    log = SCENARIOS / "edit_run_cycle_sed.jsonl"
    _, found = await scan_session("scenario", log.name, "edit_run_cycle_sed", log)
    runs = [c for c in found if c.kind == "repeat" and len(c.members) >= 3]
    assert runs
    assert all(not c.same_results and c.writes_between and c.suggestion == "legit" for c in runs)


async def test_build_trims_renumbers_and_the_runner_scores(tmp_path: Path, anyio_backend: str) -> None:
    log = SCENARIOS / "same_grep_ten_times.jsonl"
    full = calls_of(log)
    members = [n for n in range(1, len(full) + 1) if full[n - 1].tool == "Grep"][3:7]
    draft = tmp_path / "draft.jsonl"
    draft.write_text(
        json.dumps(
            {
                "log": str(log),
                "file": "scenario/grep.jsonl",
                "origin": "example/repo:grep.jsonl",
                "commit": "0" * 40,
                "licence": "MIT",
                "members": members,
                "label": "loop",
                "kind": "repeat",
                "reason": "the same grep again and again",
            }
        )
        + "\n"
    )
    labels = tmp_path / "stretches.toml"
    data = tmp_path / "data"
    assert build(draft, data, labels) == 1
    (stretch,) = load_real(labels)
    trimmed = calls_of(data / stretch.file)
    assert len(trimmed) < len(full)
    assert [trimmed[n - 1].key for n in stretch.members({})] == [full[n - 1].key for n in members]
    assert "| scenario/grep.jsonl | example/repo | grep.jsonl |" in labels.with_name("DATA.md").read_text()
    (scored,) = await score_stretches([stretch], {"recommended": CONFIGS["recommended"]}, real=data)
    assert (scored.loops, scored.caught) == (1, 1)
    assert sum(len(half) for half in split([stretch]).values()) == 1
