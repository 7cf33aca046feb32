"""The real benchmark's tools, on the repository's own scenario logs: the scan
finds repeated calls and says whether their results changed, in the sessions
``audit`` finds; the builder trims a log to its stretches, renumbers them and
the runner scores them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from benchmarks.detection.real import load_real, split
from benchmarks.detection.real_build import build
from benchmarks.detection.run import CONFIGS, HERE, score_stretches
from benchmarks.detection.scan import calls_of, scan, scan_session
from guard.audit import audit

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


def _v1_conversation_folder(conversation: Path, commands: list[str]) -> None:
    """An OpenHands V1 conversation as the agent server keeps it: one event
    per file under ``events/``, beside ``base_state.json`` and ``meta.json``;
    each command a call answered ``a.py``."""
    folder = conversation / "events"
    folder.mkdir(parents=True)
    for companion in ("base_state.json", "meta.json"):
        (conversation / companion).write_text(json.dumps({"id": conversation.name, "agent": {}}))
    stream: list[dict[str, Any]] = []
    for n, command in enumerate(commands):
        call = {"id": f"c{n}", "name": "terminal", "arguments": json.dumps({"command": command})}
        answer = {"content": [{"type": "text", "text": "a.py"}], "kind": "TerminalObservation"}
        stream += [
            {
                "kind": "ActionEvent",
                "source": "agent",
                "tool_name": "terminal",
                "tool_call_id": f"c{n}",
                "tool_call": call,
            },
            {"kind": "ObservationEvent", "source": "environment", "tool_call_id": f"c{n}", "observation": answer},
        ]
    for index, event in enumerate(stream):
        event |= {"id": f"{index:08x}-aaaa", "timestamp": f"2026-06-16T05:39:{index:02d}"}
        (folder / f"event-{index:05d}-{event['id']}.json").write_text(json.dumps(event))


def test_scan_takes_each_conversation_once_as_audit_does(tmp_path: Path) -> None:
    """A V1 conversation folder holds one event per file: the scan walks it
    as ``audit`` does, so the conversation is one session, not one per event file."""
    root = tmp_path / "transcripts"
    _v1_conversation_folder(root / "b2688296", ["ls", "ls", "ls"])
    out = tmp_path / "out.jsonl"
    totals = anyio.run(scan, root, out, tmp_path / "logs", "v1")
    assert totals == {"files": 1, "sessions": 1, "calls": 3, "candidates": 1, "failed": 0}
    (candidate,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert (candidate["session"], candidate["members"]) == ("b2688296", [1, 2, 3])
    report = audit([root])
    assert (report.totals.files, report.totals.sessions, report.totals.calls) == (1, 1, 3)
