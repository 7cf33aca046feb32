"""The fleet's command line against a real redis-server: export, replay and
audit of Redis-held sessions, and watch. Commands run as real processes."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from bus import Agent, ToolCall, ToolResult, UserMessage
from bus.reader import LogError
from bus.redis_log import RedisSessionLog
from guard.cli import main
from guard.fleet_cli import local_logs
from guard.sessions.fleet import FleetGuard

GREP = {"pattern": "load_config"}


async def _populate(url: str, sessions: tuple[str, ...] = ("alpha", "beta")) -> None:
    client = Redis.from_url(url)
    worker = FleetGuard(client, worker="w1")
    try:
        for session in sessions:
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


def test_the_password_may_come_from_rediscli_auth_as_redis_cli_reads_it(
    redis_url: str, fleet_sessions: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A password on the command line is in ``ps`` for every local user;
    from ``$REDISCLI_AUTH`` it is not, and a URL's own password wins."""
    user = f"u{os.getpid()}"
    acl = ("ACL", "SETUSER", user, "on", ">pw", "~*", "+@all")
    asyncio.run(_redis(redis_url, lambda c: c.execute_command(*acl)))  # type: ignore[no-untyped-call]
    try:
        url = redis_url.replace("redis://", f"redis://{user}@")
        out = tmp_path / "alpha.jsonl"
        monkeypatch.setenv("REDISCLI_AUTH", "pw")
        assert _cli("export", url, "--session", "alpha", "-o", str(out)).returncode == 0
        assert out.stat().st_size > 0
        monkeypatch.setenv("REDISCLI_AUTH", "wrong")
        refused = _cli("export", url, "--session", "alpha", "-o", str(tmp_path / "refused.jsonl"))
        assert refused.returncode == 2
        assert "invalid username-password pair" in refused.stderr
        assert "wrong" not in refused.stderr
        given = redis_url.replace("redis://", f"redis://{user}:pw@")
        assert _cli("export", given, "--session", "alpha", "-o", str(tmp_path / "given.jsonl")).returncode == 0
    finally:
        asyncio.run(_redis(redis_url, lambda c: c.execute_command("ACL", "DELUSER", user)))  # type: ignore[no-untyped-call]


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


_TOKEN = "ghp_0123456789abcdefghijABCDEFGHIJ012345"


@pytest.mark.parametrize(
    ("agent_id", "tool", "args"),
    [
        ("main", "Bash", {"command": f"curl -H 'Authorization: Bearer {_TOKEN}' x"}),
        ("main", f"mcp__https://api.example.com/?token={_TOKEN}", {"q": "x"}),
        (f"worker token={_TOKEN}", "Grep", {"q": "x"}),
    ],
    ids=["in-the-arguments", "in-the-tool-name", "in-the-agent-id"],
)
def test_watch_prints_no_secret_an_action_quotes(
    agent_id: str, tool: str, args: dict[str, str], redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def leak() -> None:
        client = Redis.from_url(redis_url)
        worker = FleetGuard(client, worker="w1", prefix=f"leak-{tool[:4]}")
        try:
            agent = Agent(agent_id)
            for step in range(1, 6):  # the 5th call's reminder quotes the arguments
                call = ToolCall(agent=agent, call_id=f"c{step}", step=step, tool=tool, args=args)
                await worker.handle("s", call)
                await worker.handle("s", ToolResult.answering(call, "same"))
        finally:
            await client.aclose()

    asyncio.run(leak())
    capsys.readouterr()  # the workers' own logging
    for form in ((), ("--json",)):
        code, out, err = _main(
            capsys, "watch", redis_url, "--prefix", f"leak-{tool[:4]}", "--from-start", "--count", "2", *form
        )
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


def test_a_watch_stopped_by_sigterm_in_this_process_cleans_up_and_restores_the_handler(
    redis_url: str, fleet_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    previous = signal.getsignal(signal.SIGTERM)
    made: list[bool] = []

    def stop_once_watching() -> None:
        for _ in range(200):
            if asyncio.run(_groups(redis_url)):
                made.append(True)
                break
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM if made else signal.SIGINT)  # SIGINT: never leave the test hanging

    stopper = threading.Thread(target=stop_once_watching)
    stopper.start()
    try:
        code, _, err = _main(capsys, "watch", redis_url)
    finally:
        stopper.join()
    assert made, "the watcher never made its group"
    assert code == 0, err
    assert asyncio.run(_groups(redis_url)) == []
    assert signal.getsignal(signal.SIGTERM) is previous


def test_a_watch_under_a_prefix_no_fleet_wrote_says_so_and_waits(
    redis_url: str, fleet_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    later = threading.Timer(1.5, lambda: asyncio.run(_garbage(redis_url, {"action": b"{broken"}, stream="rgt:actions")))
    first = asyncio.run(_first_action(redis_url))
    then = threading.Timer(2.0, lambda: asyncio.run(_garbage(redis_url, first, stream="rgt:actions")))
    then.start()
    later.start()
    try:
        code, out, err = _main(capsys, "watch", redis_url, "--prefix", "rgt", "--count", "1")
    finally:
        later.join()
        then.join()
    assert (code, len(out.splitlines())) == (0, 1)
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
        code, out, err = _main(capsys, "watch", redis_url, "--json", "--from-start", "--count", "4", "--group", "live")
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


async def _first_action(url: str) -> dict[str, bytes]:
    client = Redis.from_url(url)
    try:
        rows: Any = await client.xrange("rtg:actions", count=1)
        fields: dict[str, bytes] = rows[0][1]
        return fields
    finally:
        await client.aclose()


def test_watch_skips_an_unreadable_action_and_counts_only_the_actions_it_prints(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_garbage(redis_url, {"action": b"{broken"}, {"other": b"x"}))
    asyncio.run(_populate(redis_url))
    capsys.readouterr()  # the guard's own log of its actions
    code, out, err = _main(capsys, "watch", redis_url, "--from-start", "--count", "2")
    assert (code, len(out.splitlines())) == (0, 2)
    skipped = err.splitlines()
    assert len(skipped) == 2
    for line in skipped:  # the entry's id as Redis shows it, not as Python bytes
        assert re.fullmatch(r"watch: skipped an unreadable action entry \d+-\d+", line), line


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP])
def test_a_watcher_stopped_by_sigterm_or_sighup_removes_its_own_group(
    redis_url: str, fleet_sessions: list[str], stop: signal.Signals
) -> None:
    watcher = subprocess.Popen(
        [sys.executable, "-m", "guard", "watch", redis_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(200):
            if asyncio.run(_groups(redis_url)):
                break
            time.sleep(0.05)
        assert asyncio.run(_groups(redis_url)), "the watcher never made its group"
        watcher.send_signal(stop)  # a service manager's stop, a closed terminal
        _, err = watcher.communicate(timeout=30)
    finally:
        watcher.kill()
    assert watcher.returncode == 0, err
    assert asyncio.run(_groups(redis_url)) == []


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


async def _redis(url: str, *changes: Callable[[Redis], Awaitable[object]]) -> None:
    client = Redis.from_url(url)
    try:
        for change in changes:
            await change(client)
    finally:
        await client.aclose()


def test_an_audit_of_the_fleet_reads_every_session_when_ids_make_odd_file_names(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    long = "L" * 300  # longer than a file name may be
    asyncio.run(_populate(redis_url, ("a/b", "a_b", long)))
    asyncio.run(_redis(redis_url, lambda c: c.zadd("rtg:sessions", {b"odd\xff": 1})))  # not UTF-8: no fleet writes one
    capsys.readouterr()  # the guard's own log of its actions
    code, out, err = _main(capsys, "audit", redis_url, "--json")
    assert code == 0, err
    assert sorted(session["session"] for session in json.loads(out)["sessions"]) == sorted(["a/b", "a_b", long])
    assert err.startswith("repeat-tool-guard: skipped session 'odd\\\\xff' of redis://")


def test_a_damaged_session_of_the_fleet_is_told_as_unreadable_naming_the_url_and_the_session(
    redis_url: str, fleet_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(
        _redis(
            redis_url,
            lambda c: c.hset("rtg:{bad}:meta", mapping={"v": "abc", "ts": "1.0"}),
            lambda c: c.set("rtg:{typed}:meta", "a string"),
            lambda c: c.delete("rtg:{beta}:meta"),
            lambda c: c.zadd("rtg:sessions", {"bad": 1, "typed": 2, "gone": 3}),
        )
    )
    unreadable: list[tuple[str, str]] = []
    with local_logs(redis_url, None, on_unreadable=lambda where, why: unreadable.append((where, why))) as paths:
        assert [path.read_bytes().count(b"\n") for path in paths] == [13]  # alpha: its header and 12 events
    assert sorted(unreadable) == [
        (f"session 'bad' of {redis_url}", "session 'bad' in Redis has a damaged header: {b'v': b'abc', b'ts': b'1.0'}"),
        (
            f"session 'beta' of {redis_url}",
            "session 'beta' in Redis has events but no header (rtg:{beta}:meta is gone)",
        ),
        (f"session 'typed' of {redis_url}", "session 'typed' in Redis: rtg:{typed}:meta holds a string, not a hash"),
    ]
    assert capsys.readouterr().err == (  # expired (a ttl) is no error: its keys are all gone
        f"repeat-tool-guard: skipped session 'gone' of {redis_url}: "
        "no session 'gone' under prefix 'rtg' in Redis (its keys expired)\n"
    )
    with pytest.raises(LogError, match="has a damaged header"), local_logs(redis_url, "bad"):
        pass


def test_a_session_that_cannot_be_written_out_is_told_as_unreadable_and_the_others_read(
    redis_url: str, fleet_sessions: list[str], file_size_limit: Callable[[int], None]
) -> None:
    asyncio.run(
        _redis(redis_url, lambda c: RedisSessionLog(c, "tiny").append(UserMessage(agent=Agent("main"), text="go")))
    )
    unreadable: list[tuple[str, str]] = []
    file_size_limit(1000)  # the tiny session fits, the others do not
    try:
        with local_logs(redis_url, None, on_unreadable=lambda where, why: unreadable.append((where, why))) as paths:
            exported = len(paths)
    finally:
        file_size_limit(1 << 30)
    assert exported == 1
    assert sorted(unreadable) == [
        (f"session 'alpha' of {redis_url}", "File too large"),  # not the temporary file's name: it is gone
        (f"session 'beta' of {redis_url}", "File too large"),
    ]


def test_export_says_how_many_entries_it_skipped_and_why(
    redis_url: str, fleet_sessions: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(
        _redis(
            redis_url,
            lambda c: c.xadd("rtg:{alpha}:events", {"line": "garbage{"}),
            lambda c: c.xadd("rtg:{alpha}:events", {"line": '{"type":"user/message"}\n{"x":1}'}),
        )
    )
    out = tmp_path / "alpha.jsonl"
    code, _, err = _main(capsys, "export", redis_url, "--session", "alpha", "-o", str(out))
    assert code == 0, err
    assert err.splitlines() == [
        f"{out}: session alpha: 12 events, 2 entries skipped (invalid-json 1, schema 1)",
        "  skipped entry 13 (invalid-json): JSON is malformed: invalid character (byte 0)",
        "  skipped entry 14 (schema): Object missing required field `agent`",
    ]
    assert len(out.read_bytes().splitlines()) == 13  # the header and the 12 events
    code, _, err = _main(capsys, "replay", str(out), "--check")
    assert (code, err.splitlines()[0]) == (0, "12 events, 0 lines skipped; actions: remind 2")
    code, _, err = _main(capsys, "replay", redis_url, "--session", "alpha", "--check")
    assert code == 0, err
    assert err.splitlines()[0] == (
        f"repeat-tool-guard: session 'alpha' of {redis_url}: 12 events, 2 entries skipped (invalid-json 1, schema 1)"
    )


def test_an_audit_of_the_fleet_names_each_session_by_url_and_id_and_counts_what_its_export_skipped(
    redis_url: str, fleet_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_redis(redis_url, lambda c: c.xadd("rtg:{alpha}:events", {"line": "garbage{"})))
    code, out, err = _main(capsys, "audit", redis_url, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert [(s["label"], s["path"], s["skipped"]) for s in report["sessions"]] == [
        (f"{redis_url}#alpha", f"{redis_url}#alpha", {"invalid-json": 1}),
        (f"{redis_url}#beta", f"{redis_url}#beta", {}),
    ]
    assert (report["totals"]["skipped"], report["totals"]["sessions_with_skips"]) == ({"invalid-json": 1}, 1)
    code, out, err = _main(capsys, "audit", redis_url)
    assert code == 0, err
    assert f"  {redis_url}#alpha: invalid-json 1" in out.splitlines()  # the table names it whole


def test_an_audit_of_the_fleet_lists_a_damaged_session_among_its_errors_and_exits_1(
    redis_url: str, fleet_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_redis(redis_url, lambda c: c.hset("rtg:{bad}:meta", mapping={"v": "abc", "ts": "1.0"})))
    asyncio.run(_redis(redis_url, lambda c: c.zadd("rtg:sessions", {"bad": 1})))
    code, out, err = _main(capsys, "audit", redis_url, "--json")
    report = json.loads(out)
    assert code == 1, err
    assert len(report["sessions"]) == 2
    assert report["errors"] == [
        {
            "path": f"session 'bad' of {redis_url}",
            "reason": "session 'bad' in Redis has a damaged header: {b'v': b'abc', b'ts': b'1.0'}",
        }
    ]
    assert report["totals"]["unreadable"] == 1
