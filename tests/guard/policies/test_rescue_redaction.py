"""Every secret format is redacted in all four parts of the rescue question.

A real session on a real bus with a real ask command that records the
question it is given: the task (user message), the looping call's arguments
(JSON, so quotes and newlines arrive escaped), the output the agent already
has, and the recent calls (each capped at 300 characters, so a long key block
is cut there). Each sample's secret must be gone from the question, no eight
characters of it left, and the text around it must arrive as it was.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import pytest
from structlog.testing import capture_logs

from guard import REDACTED, Config, RemindConfig, RescueConfig
from tests.conftest import AskScript
from tests.guard.secret_samples import ALNUM, SAMPLES, Sample, token
from tests.scenarios._script import Script

pytestmark = pytest.mark.anyio


def _json_inner(text: str) -> str:
    return msgspec.json.encode(text).decode()[1:-1]


def _groups(limit: int = 1900) -> list[tuple[Sample, ...]]:
    """Samples in groups that fit the question's caps (arguments: 2000
    characters after JSON escaping)."""
    groups: list[tuple[Sample, ...]] = []
    current: list[Sample] = []
    for sample in SAMPLES:
        if current and len(_json_inner("\n".join(s.text for s in (*current, sample)))) > limit:
            groups.append(tuple(current))
            current = []
        current.append(sample)
    groups.append(tuple(current))
    return groups


GROUPS = _groups()


def _leaks(secret: str, question: str, context: str) -> list[str]:
    """Pieces of ``secret`` (the whole, and every 8-character window of a
    longer one) found in ``question``, as written or JSON-escaped, other
    than those the samples' context text holds too (`` secret `` in a
    passphrase and in ``kubectl create secret``)."""
    pieces = {secret} | {secret[i : i + 8] for i in range(len(secret) - 7)}
    return sorted(p for p in pieces if p.strip() and p not in context and (p in question or _json_inner(p) in question))


def test_the_corpus_has_at_least_sixty_formats() -> None:
    assert len({s.name for s in SAMPLES}) == len(SAMPLES) >= 60


@pytest.mark.parametrize("group", GROUPS, ids=[f"{g[0].name}..{g[-1].name}" for g in GROUPS])
async def test_every_format_is_redacted_in_all_four_parts_of_the_question(
    group: tuple[Sample, ...], ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    question = tmp_path / "question"
    command = ask_script(f"printf '%s' \"$1\" > {question}\necho advice")
    config = Config(
        remind=RemindConfig(enabled=False),
        rescue=RescueConfig(ask_command=str(command), window=len(group) + 8, stall_at=0),
    )
    s = Script(tmp_path / "session.jsonl", config)
    await s.start("main")
    joined = "\n".join(sample.text for sample in group)
    await s.user("main", joined)
    for sample in group:
        await s.call("main", "run", {"command": sample.text}, "ok")
    for _ in range(5):
        await s.call("main", "probe", {"input": joined}, joined)

    text = question.read_text()
    context = "\n".join(f"{sample.before}\0{sample.after}" for sample in group)
    task, rest = text.split("## The repeated call", 1)
    arguments, rest = rest.split("## The output the agent already has from this call", 1)
    output, recent = rest.split("## Its recent calls, oldest first", 1)
    for sample in group:
        assert _leaks(sample.secret, text, context) == [], sample.name
        redacted = sample.redacted(REDACTED)
        assert redacted in task, sample.name
        assert _json_inner(redacted) in arguments, sample.name
        assert redacted in output, sample.name
        assert f'run {{"command":"{_json_inner(redacted)}"}}' in recent, sample.name


async def test_a_secret_in_bytes_arguments_reaches_the_question_redacted(
    ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    """Bytes arguments are written as base64, which no secret rule reads:
    the secret inside is found in the decoded text and its encoding withheld."""
    question = tmp_path / "question"
    command = ask_script(f"printf '%s' \"$1\" > {question}\necho advice")
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(command)))
    s = Script(tmp_path / "session.jsonl", config)
    await s.start("main")
    secret = b"DB_PASSWORD=hunter2secret ghp_" + token(ALNUM, 36, "bytes").encode()
    for _ in range(5):
        await s.call("main", "upload", {"data": secret}, "ok")

    text = question.read_text()
    assert f'upload {{"data":"{REDACTED}"}}' in text
    assert base64.b64encode(secret).decode()[:12] not in text


async def _failed_ask(command: Path, tmp_path: Path) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """Five identical greps under ``rescue`` asking ``command``, which fails:
    the last trip the trip log holds, and its ``rescue.trip`` log event."""
    trips = tmp_path / "trips.jsonl"
    config = Config(
        remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(command), log_file=str(trips))
    )
    s = Script(tmp_path / "session.jsonl", config)
    await s.start("main")
    with capture_logs() as logs:
        for _ in range(5):
            await s.call("main", "grep", {"pattern": "x"}, "no matches")
    failed: Mapping[str, Any] = [msgspec.json.decode(line) for line in trips.read_text().splitlines()][-1]
    return failed, [e for e in logs if e["event"] == "rescue.trip"][-1]


@pytest.mark.parametrize("padding", [0, 150, 170, 185, 400])
async def test_a_failed_ask_leaks_no_secret_into_the_trip_log_or_its_log_event(
    padding: int, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    key = "sk-ant-api03-Zq3vR8pLm2Xw9Yt4Kd7Hs1Fb6Ng0Jc5"
    line = f"error: {'.' * padding} invalid key {key} (401)"  # the key wherever the reason's cap may fall
    command = ask_script(f"echo '{line}' >&2\nexit 1")
    failed, event = await _failed_ask(command, tmp_path)
    assert failed["kind"] == "escalation-failed"
    whole = f"exit status 1: {line}"
    redacted = whole.replace(key, REDACTED)
    if len(whole) <= 200:
        assert failed["reason"] == redacted
    else:  # cut to 200 characters of what was redacted, never inside the marker
        kept, note = failed["reason"].split("…")
        assert (redacted.startswith(kept), len(kept) >= 200, note) == (True, True, f" (+{len(whole) - 200} more chars)")
    assert not any(key[i : i + 8] in failed["reason"] for i in range(len(key) - 7))
    assert event["reason"] == failed["reason"]


async def test_the_trip_log_and_its_log_event_show_no_secret_in_an_agent_id_or_a_tool_name(
    ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    """As on the live page and in ``watch``: an agent named after its token,
    an MCP tool whose name carries its server's URL with a password."""
    key, password = "ghp_" + token(ALNUM, 36, "trip agent"), token(ALNUM, 14, "trip tool")
    agent, tool = f"worker-{key}", f"mcp__https://deploy:{password}@mcp.example.com__fetch"
    trips = tmp_path / "trips.jsonl"
    config = Config(
        remind=RemindConfig(enabled=False),
        rescue=RescueConfig(ask_command=str(ask_script("echo advice")), log_file=str(trips)),
    )
    s = Script(tmp_path / "session.jsonl", config)
    await s.start(agent)
    with capture_logs() as logs:
        for _ in range(5):
            await s.call(agent, tool, {"pattern": "x"}, "no matches")
    kept = [msgspec.json.decode(line) for line in trips.read_text().splitlines()]
    events = [e for e in logs if e["event"] == "rescue.trip"]
    shown = (f"worker-{REDACTED}", f"mcp__https://deploy:{REDACTED}@mcp.example.com__fetch")
    assert [t["kind"] for t in kept] == ["deny", "deny", "rescue"]
    assert {(t["agent"], t["tool"]) for t in (*kept, *events)} == {shown}
    assert key[:12] not in trips.read_text()


@pytest.mark.parametrize(
    ("last_line", "reason"),
    [
        ("", "exit status 1: (its last line of stderr is longer than 2048 bytes: not kept)"),
        ("error: giving up", "exit status 1: error: giving up"),
    ],
)
async def test_a_failed_ask_whose_stderr_outgrows_its_kept_tail_leaks_no_part_of_a_key(
    last_line: str, reason: str, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    key = "ghp_" + token(ALNUM, 36, "stderr tail")
    after = f"\n{last_line}\n" if last_line else "\n"
    rest = " " + "x" * (2048 - 30 - 1 - len(after)) + after  # the kept 2048 bytes start 10 characters into the key
    stderr = tmp_path / "stderr"
    stderr.write_text("A" * 3000 + f" auth failed with token {key}" + rest)
    command = ask_script(f"cat {stderr} >&2\nexit 1")
    failed, event = await _failed_ask(command, tmp_path)
    assert (failed["kind"], failed["reason"]) == ("escalation-failed", reason)
    assert event["reason"] == reason


async def test_a_secret_cut_by_a_question_cap_is_redacted_whole(
    ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    question = tmp_path / "question"
    command = ask_script(f"printf '%s' \"$1\" > {question}\necho advice")
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(command)))
    s = Script(tmp_path / "session.jsonl", config)
    await s.start("main")
    key = "sk_live_" + token(ALNUM, 24, "cut")
    output = "x" * 5994 + " " + key + " and more" * 100
    for _ in range(5):
        await s.call("main", "grep", {"pattern": "x"}, output)

    text = question.read_text()
    assert "x" * 5994 + f" {REDACTED}… (+{len(output) - 6000} more chars)" in text
    assert key[:10] not in text


@pytest.mark.parametrize("length", [1100, 3000])
async def test_a_credential_longer_than_the_slack_cut_by_a_question_cap_is_dropped_whole(
    length: int, ask_script: AskScript, tmp_path: Path, anyio_backend: str
) -> None:
    """The rules see a cap plus ``REDACT_SLACK`` of the output: a credential
    longer than that is never seen whole, so what the cap left of it goes too."""
    question = tmp_path / "question"
    command = ask_script(f"printf '%s' \"$1\" > {question}\necho advice")
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=str(command)))
    s = Script(tmp_path / "session.jsonl", config)
    await s.start("main")
    password = token(ALNUM, length, f"long credential {length}")
    output = "x" * 5960 + " remote: https://deploy:" + password + "@git.example.com/repo.git"
    for _ in range(5):
        await s.call("main", "grep", {"pattern": "x"}, output)

    text = question.read_text()
    assert f" remote: https://deploy:… (+{len(output) - 5984} more chars)" in text
    assert password[:8] not in text
