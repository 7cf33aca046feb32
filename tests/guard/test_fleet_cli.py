"""The fleet's command line against a real redis-server: export, replay and
audit of Redis-held sessions, and watch. Commands run as real processes."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from redis.asyncio import Redis

from bus import Agent, ToolCall, ToolResult
from guard.cli import main
from guard.sessions.fleet import FleetGuard

GREP = {"pattern": "load_config"}


async def _populate(url: str) -> None:
    client = Redis.from_url(url)
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


@pytest.fixture
def fleet_sessions(redis_url: str) -> list[str]:
    """Two sessions of five identical greps each, guarded by the default
    config (reminders at the 3rd and 5th)."""
    asyncio.run(_populate(redis_url))
    return ["alpha", "beta"]


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_export_writes_a_log_that_replays_and_checks(redis_url: str, fleet_sessions: list[str], tmp_path: Path) -> None:
    out = tmp_path / "alpha.jsonl"
    done = _cli("export", redis_url, "--session", "alpha", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "12 events" in done.stderr  # 10 calls and results, 2 reminders
    replayed = _cli("replay", str(out), "--check", "--json")
    assert replayed.returncode == 0, replayed.stderr
    assert [json.loads(line)["count"] for line in replayed.stdout.splitlines()] == [3, 5]


def test_replay_reads_a_redis_session_directly(
    redis_url: str, fleet_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _main(capsys, "replay", redis_url, "--session", "beta", "--check", "--json")
    assert code == 0, err
    assert len(out.splitlines()) == 2
    code, _, err = _main(capsys, "replay", redis_url, "--check")
    assert code == 2
    assert "needs --session" in err


def test_audit_reads_every_session_of_a_fleet(
    redis_url: str, fleet_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _main(capsys, "audit", redis_url, "--json")
    assert code == 0, err
    assert len(json.loads(out)["sessions"]) == 2
    code, out, err = _main(capsys, "audit", redis_url, "--session", "alpha", "--json")
    assert len(json.loads(out)["sessions"]) == 1


def test_a_listed_session_whose_keys_expired_is_skipped_and_the_rest_audited(
    redis_url: str, fleet_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    async def expire() -> None:  # FleetGuard(ttl=...) lets a session's keys expire; its index entry stays
        client = Redis.from_url(redis_url)
        try:
            await client.delete("rtg:{alpha}:events", "rtg:{alpha}:meta", "rtg:{alpha}:keys")
        finally:
            await client.aclose()

    asyncio.run(expire())
    code, out, err = _main(capsys, "audit", redis_url, "--json")
    assert code == 0, err
    assert len(json.loads(out)["sessions"]) == 1
    assert err.startswith("repeat-tool-guard: skipped session 'alpha' of redis://")
    code, _, err = _main(capsys, "audit", redis_url, "--session", "alpha")
    assert code == 2
    assert "no session 'alpha'" in err


def test_an_unknown_session_is_a_one_line_error(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _main(capsys, "export", redis_url, "--session", "nobody", "-o", str(tmp_path / "x.jsonl"))
    assert code == 2
    assert err.strip().splitlines() == [
        "repeat-tool-guard: no session 'nobody' under prefix 'rtg' in Redis",
    ]


def test_file_sources_are_refused_where_a_fleet_is_needed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(capsys, "export", str(tmp_path / "a.jsonl"), "--session", "s", "-o", str(tmp_path / "b.jsonl"))
    assert code == 2
    assert "reads a Redis URL" in err
    code, _, err = _main(capsys, "watch", str(tmp_path / "a.jsonl"))
    assert code == 2
    assert "follows a Redis URL" in err


def test_an_unreachable_redis_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(capsys, "export", "redis://127.0.0.1:9/0", "--session", "s", "-o", str(tmp_path / "b.jsonl"))
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "cannot export session 's'" in err


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("redis://[::1", "'redis://<malformed>': it does not parse (Invalid IPv6 URL)"),
        ("redis://:secret@[::1", "'redis://<malformed>': it does not parse (Invalid IPv6 URL)"),
        ("redis://127.0.0.1:99999/0", "it does not parse (Port out of range 0-65535)"),
        ("redis://127.0.0.1:6379/abc", "its database 'abc' is not a number"),
        ("redis://127.0.0.1:0/0", "'redis://127.0.0.1:0/0': its port is 0"),
        ("redis://:Wr/ongsecret@127.0.0.1/0", "'redis://:***@127.0.0.1/0': its password holds '/', '?' or '#'"),
        ("redis://:Wr#ongsecret@127.0.0.1/0", "'redis://:***@127.0.0.1/0': its password holds '/', '?' or '#'"),
        ("redis://:secret@127.0.0.1/0?foo=1", "its query does not suit the Redis client (got an unexpected keyword"),
        ("redis://:secret@127.0.0.1/0?protocol=9", "its query does not suit the Redis client (protocol must be"),
        ("rediss://:secret@127.0.0.1/0?ssl_cert_reqs=bogus", "(Invalid SSL Certificate Requirements Flag: bogus)"),
    ],
)
def test_a_redis_url_that_names_no_server_or_database_is_one_line_naming_why(
    url: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _main(capsys, "export", url, "--session", "s", "-o", str(tmp_path / "b.jsonl"))
    assert code == 2
    assert err.startswith("repeat-tool-guard: not a usable Redis URL ")
    assert why in err
    assert "secret" not in err
    assert not (tmp_path / "b.jsonl").exists()


def test_watch_prints_every_action_of_the_fleet(
    redis_url: str, fleet_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _main(capsys, "watch", redis_url, "--from-start", "--json", "--count", "4", "--group", "g1")
    assert code == 0, err
    actions = [json.loads(line) for line in out.splitlines()]
    assert sorted((a["session"], a["count"]) for a in actions) == [("alpha", 3), ("alpha", 5), ("beta", 3), ("beta", 5)]
    code, out, _ = _main(capsys, "watch", redis_url, "--from-start", "--count", "4", "--group", "g2")
    assert "remind/remind  grep × 3  [w1]" in out
    with pytest.raises(SystemExit):
        _main(capsys, "watch", redis_url, "--count", "0", "--group", "g1")
    assert "--count: must be an integer >= 1, got '0'" in capsys.readouterr().err


def test_watch_prints_no_secret_an_actions_text_quotes(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    async def leak() -> None:
        client = Redis.from_url(redis_url)
        worker = FleetGuard(client, worker="w1", prefix="leak")
        try:
            agent = Agent("main")
            args = {"command": "curl -H 'Authorization: Bearer ghp_0123456789abcdefghijABCDEFGHIJ012345' x"}
            for step in range(1, 6):  # the 5th call's reminder quotes the arguments
                call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool="Bash", args=args)
                await worker.handle("s", call)
                await worker.handle("s", ToolResult.answering(call, "same"))
        finally:
            await client.aclose()

    asyncio.run(leak())
    for form in ((), ("--json",)):
        code, out, err = _main(capsys, "watch", redis_url, "--prefix", "leak", "--from-start", "--count", "2", *form)
        assert code == 0, err
        assert "ghp_0123456789" not in out


async def _groups(url: str, stream: str = "rtg:actions") -> list[str]:
    client = Redis.from_url(url)
    try:
        if not await client.exists(stream):
            return []
        return sorted(group["name"].decode() for group in await client.xinfo_groups(stream))
    finally:
        await client.aclose()


def test_a_watchers_own_group_is_removed_when_it_ends_and_a_named_one_is_kept(
    redis_url: str, fleet_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _main(capsys, "watch", redis_url, "--from-start", "--count", "2")
    assert (code, len(out.splitlines())) == (0, 2)
    _main(capsys, "watch", redis_url, "--from-start", "--count", "1", "--group", "dashboard")
    assert asyncio.run(_groups(redis_url)) == ["dashboard"]
    interrupted = subprocess.Popen(
        [sys.executable, "-m", "guard", "watch", redis_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(200):
            if len(asyncio.run(_groups(redis_url))) == 2:
                break
            time.sleep(0.05)
        assert len(asyncio.run(_groups(redis_url))) == 2, "the watcher never made its group"
        interrupted.send_signal(signal.SIGINT)  # Ctrl-C
        _, err = interrupted.communicate(timeout=30)
    finally:
        interrupted.kill()
    assert interrupted.returncode == 0, err
    assert asyncio.run(_groups(redis_url)) == ["dashboard"]


def test_a_watch_under_a_prefix_no_fleet_wrote_says_so_and_waits(
    redis_url: str, fleet_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    later = threading.Timer(1.5, lambda: asyncio.run(_garbage(redis_url, {"action": b"{broken"}, stream="rgt:actions")))
    later.start()
    try:
        code, _, err = _main(capsys, "watch", redis_url, "--prefix", "rgt", "--count", "1")
    finally:
        later.join()
    assert code == 0
    assert err.startswith("watch: no fleet has written under the prefix 'rgt' yet (is it the fleet's --prefix?)")
    assert "skipped an unreadable action entry" in err  # it waited, and read what came
    code, _, err = _main(capsys, "watch", redis_url, "--from-start", "--count", "1")
    assert (code, err) == (0, "")


def test_watchers_sharing_a_group_split_its_actions_and_lose_none(
    redis_url: str, fleet_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, first, _ = _main(capsys, "watch", redis_url, "--from-start", "--json", "--count", "1", "--group", "shared")

    def lost(signum: int, frame: object) -> None:
        raise TimeoutError("the second watcher waits for actions the first one took and never printed")

    previous = signal.signal(signal.SIGALRM, lost)
    signal.alarm(30)
    try:
        _, rest, _ = _main(capsys, "watch", redis_url, "--json", "--count", "3", "--group", "shared")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    actions = [json.loads(line) for line in (first + rest).splitlines()]
    assert sorted((a["session"], a["count"]) for a in actions) == [("alpha", 3), ("alpha", 5), ("beta", 3), ("beta", 5)]


def test_watch_follows_actions_as_they_happen(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(_garbage(redis_url, {"action": b"{broken"}))
    later = threading.Timer(1.5, lambda: asyncio.run(_populate(redis_url)))
    later.start()
    try:
        code, out, err = _main(capsys, "watch", redis_url, "--json", "--from-start", "--count", "5", "--group", "live")
    finally:
        later.join()
    assert code == 0
    assert [json.loads(line)["count"] for line in out.splitlines()] == [3, 5, 3, 5]
    assert "skipped an unreadable action entry" in err


async def _garbage(url: str, *entries: dict[str, bytes], stream: str = "rtg:actions") -> None:
    client = Redis.from_url(url)
    try:
        for entry in entries:
            await client.xadd(stream, entry)  # type: ignore[arg-type]
    finally:
        await client.aclose()


def test_watch_skips_an_unreadable_action(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(_garbage(redis_url, {"action": b"{broken"}, {"other": b"x"}))
    code, out, err = _main(capsys, "watch", redis_url, "--from-start", "--count", "2")
    assert (code, out) == (0, "")
    assert err.count("skipped an unreadable action entry") == 2


def test_watch_names_a_key_that_is_not_a_stream(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    async def wrong() -> None:
        client = Redis.from_url(redis_url)
        try:
            await client.set("rtg:actions", "a string")
        finally:
            await client.aclose()

    asyncio.run(wrong())
    code, _, err = _main(capsys, "watch", redis_url, "--count", "1")
    assert code == 2
    assert "cannot create consumer group" in err


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["watch", "redis://127.0.0.1:9/0", "--count", "1"], "cannot watch redis://127.0.0.1:9/0"),
        (["audit", "redis://127.0.0.1:9/0"], "cannot read Redis at redis://127.0.0.1:9/0"),
        (["export", "redis://127.0.0.1:notaport/0", "--session", "s", "-o", "x"], "not a usable Redis URL"),
    ],
)
def test_unusable_redis_is_a_one_line_error(
    command: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _main(capsys, *command)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_audit_takes_files_and_a_fleet_together(
    redis_url: str, fleet_sessions: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _main(capsys, "export", redis_url, "--session", "alpha", "-o", str(tmp_path / "a.jsonl"))
    assert code == 0, err
    code, out, err = _main(capsys, "audit", str(tmp_path / "a.jsonl"), redis_url, "--json")
    assert code == 0, err
    assert len(json.loads(out)["sessions"]) == 3
