"""The fleet's command line against a real redis-server: export, replay and
audit of Redis-held sessions, and watch. Commands run as real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from redis.asyncio import Redis

from bus import Agent, ToolCall, ToolResult
from guard.fleet import FleetGuard

pytestmark = pytest.mark.anyio

GREP = {"pattern": "load_config"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def fleet_sessions(redis_url: str) -> list[str]:
    """Two sessions of five identical greps each, guarded by the default
    config (reminders at the 3rd and 5th)."""
    client = Redis.from_url(redis_url)
    worker = FleetGuard(client, worker="w1")
    try:
        for session in ("alpha", "beta"):
            agent = Agent("main")
            for step in range(1, 6):
                call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool="grep", args=GREP)
                await worker.handle(session, call)
                await worker.handle(session, ToolResult.answering(call, "no matches"))
    finally:
        await client.aclose()
    return ["alpha", "beta"]


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


async def test_export_writes_a_log_that_replays_and_checks(
    redis_url: str, fleet_sessions: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "alpha.jsonl"
    done = _cli("export", redis_url, "--session", "alpha", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "12 events" in done.stderr  # 10 calls and results, 2 reminders
    replayed = _cli("replay", str(out), "--check", "--json")
    assert replayed.returncode == 0, replayed.stderr
    assert [json.loads(line)["count"] for line in replayed.stdout.splitlines()] == [3, 5]


async def test_replay_reads_a_redis_session_directly(redis_url: str, fleet_sessions: list[str]) -> None:
    done = _cli("replay", redis_url, "--session", "beta", "--check", "--json")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 2
    missing = _cli("replay", redis_url, "--check")
    assert missing.returncode == 2
    assert "needs --session" in missing.stderr


async def test_audit_reads_every_session_of_a_fleet(redis_url: str, fleet_sessions: list[str]) -> None:
    done = _cli("audit", redis_url, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert len(report["sessions"]) == 2


async def test_an_unknown_session_is_a_one_line_error(redis_url: str, tmp_path: Path) -> None:
    done = _cli("export", redis_url, "--session", "nobody", "-o", str(tmp_path / "x.jsonl"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "repeat-tool-guard: no session 'nobody' under prefix 'rtg' in Redis",
    ]


async def test_export_refuses_a_file_source(tmp_path: Path) -> None:
    done = _cli("export", str(tmp_path / "a.jsonl"), "--session", "s", "-o", str(tmp_path / "b.jsonl"))
    assert done.returncode == 2
    assert "reads a Redis URL" in done.stderr


async def test_watch_prints_every_action_of_the_fleet(redis_url: str, fleet_sessions: list[str]) -> None:
    done = _cli("watch", redis_url, "--from-start", "--json", "--count", "4", "--group", "g1")
    assert done.returncode == 0, done.stderr
    actions = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted((a["session"], a["count"]) for a in actions) == [("alpha", 3), ("alpha", 5), ("beta", 3), ("beta", 5)]
    human = _cli("watch", redis_url, "--from-start", "--count", "4", "--group", "g2")
    assert "remind/remind  grep × 3  [w1]" in human.stdout
