"""Smoke tests of the fleet benchmarks at tiny sizes, as real processes: a
redis-server, worker processes, ``serve --redis`` replicas killed under
load. What is asserted is what the runs check (every row reported, nothing
lost, every session replays the same); no timing is asserted."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed"),
]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_fleet_benchmark_reports_every_routing_against_the_bare_baseline() -> None:
    done = _run("benchmarks.fleet", "--workers", "2", "--sessions", "6", "--calls", "4", "--latency-sessions", "2")
    assert done.returncode == 0, done.stderr
    assert "bare pipelined XADD:" in done.stdout
    for run in ("random routing", "sticky routing", "latency (random)", "latency (sticky)"):
        line = next(line for line in done.stdout.splitlines() if line.strip().startswith(f"{run}:"))
        assert re.search(r"x bare XADD\); per event p50 [\d.]+ ms, p99 [\d.]+ ms; CPU per tool call", line), line


def test_the_chaos_run_kills_replicas_and_loses_nothing() -> None:
    done = _run(
        "benchmarks.fleet_chaos",
        *("--replicas", "3", "--sessions", "60", "--clients", "4", "--calls", "8", "--kill-every", "0.2"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    kills = re.search(r"(\d+) kills;", done.stdout)
    assert kills is not None, done.stdout
    assert int(kills.group(1)) >= 1, done.stdout
    assert "lost events: 0; replay --check differences over every session: 0" in done.stdout
    assert "requests that never got an answer 0" in done.stdout


def test_python_dash_m_benchmarks_runs_both_fleet_sections() -> None:
    done = _run(
        "benchmarks",
        *("--only", "fleet", "--only", "fleet-chaos", "--format", "json", "--fleet-workers", "2"),
        *("--fleet-sessions", "4", "--fleet-calls", "3", "--chaos-replicas", "2", "--chaos-sessions", "12"),
        *("--chaos-clients", "3", "--chaos-kill-every", "0.3"),
    )
    assert done.returncode == 0, done.stderr
    _, *rows = (json.loads(line) for line in done.stdout.splitlines() if line)
    fleet = [row for row in rows if row["section"].startswith("fleet:")]
    assert fleet[0]["name"] == "bare pipelined XADD (2 events a call)"
    assert all(row["rate"] > 0 and row["baseline"] == "bare pipelined XADD" for row in fleet)
    chaos = [row for row in rows if row["section"].startswith("serve --redis")]
    assert [row["name"].split(",")[0] for row in chaos] == ["no kills", "a replica killed every 0.3 s"]
    assert all(row["met"] is True and "lost events 0" in row["extra"] for row in chaos)
