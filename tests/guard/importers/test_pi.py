"""pi coding agent session files, synthetic (shaped like pi's own test
fixtures, see DATA.md) and real."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from bus import ToolResult, UserMessage
from guard.importers import UnknownFormatError, detect_format, open_sessions
from tests.guard.importers._transcripts import (
    calls,
    compactions,
    corpus_file,
    counts,
    iso,
    longest_run,
    of,
    only,
    write_lines,
)


class PiSession:
    """Entries of a pi session file, a second apart; ``tree`` writes the
    ``id``/``parentId`` links of version 2 and later."""

    def __init__(self, *, tree: bool) -> None:
        self.tree = tree
        self._clock = itertools.count(1)
        self._ids = itertools.count(1)
        self.last: str | None = None
        header: dict[str, Any] = {
            "type": "session",
            "id": "ffae836b-9420-4060-ac13-7745215f90ff",
            "timestamp": "2025-12-09T00:53:29.825Z",
            "cwd": "/Users/me/project",
        }
        if tree:
            header["version"] = 3
        else:
            header |= {"provider": "anthropic", "modelId": "claude-opus-4-5", "thinkingLevel": "off"}
        self.lines: list[dict[str, Any]] = [header]

    def entry(self, kind: str, *, parent: str | None = None, **fields: Any) -> str:
        second = next(self._clock)
        entry: dict[str, Any] = {"type": kind, "timestamp": f"2025-12-09T01:00:{second:02d}.000Z", **fields}
        entry_id = f"{next(self._ids):08x}"
        if self.tree:
            entry |= {"id": entry_id, "parentId": parent if parent is not None else self.last}
        self.lines.append(entry)
        self.last = entry_id
        return entry_id

    def user(self, content: Any) -> None:
        self.entry("message", message={"role": "user", "content": content, "timestamp": 1765242000000})

    def assistant(self, *calls: tuple[str, str, dict[str, Any]], stop: str = "toolUse") -> None:
        content: list[dict[str, Any]] = [
            {"type": "thinking", "thinking": "hm"},
            {"type": "text", "text": "Let me look."},
        ]
        content += [{"type": "toolCall", "id": i, "name": n, "arguments": a} for i, n, a in calls]
        message = {"role": "assistant", "content": content, "api": "anthropic-messages", "provider": "anthropic"}
        self.entry("message", message=message | {"model": "claude-opus-4-5", "stopReason": stop})

    def result(self, call_id: str, tool: str, text: str, *, error: bool = False) -> None:
        message = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": tool,
            "content": [{"type": "text", "text": text}],
            "isError": error,
            "timestamp": 1765242000000,
        }
        self.entry("message", message=message)


def _linear() -> PiSession:
    s = PiSession(tree=False)
    s.entry("thinking_level_change", thinkingLevel="high")
    s.user("fix the failing test")
    s.assistant(("toolu_1", "bash", {"command": "npm test"}), ("toolu_2", "read", {"path": "src/a.ts"}))
    s.result("toolu_1", "bash", "1 failing\n\nCommand exited with code 1", error=True)
    s.result("toolu_2", "read", "export const a = 1;")
    s.assistant(("toolu_3", "edit", {"path": "src/a.ts", "oldText": "1", "newText": "2"}))
    s.result("toolu_3", "edit", "Could not find the exact text in src/a.ts.", error=True)
    s.assistant(("toolu_4", "edit", {"path": "src/a.ts", "oldText": "1", "newText": "2"}))
    s.result("toolu_4", "edit", "Could not find the exact text in src/a.ts.", error=True)
    s.entry("model_change", provider="openai", modelId="gpt-5")
    s.user([{"type": "text", "text": "try again"}, {"type": "image", "data": "iVBOR", "mimeType": "image/png"}])
    bash = {"role": "bashExecution", "command": "ls", "output": "a.ts\n", "exitCode": 0, "timestamp": 1}
    s.entry("message", message=bash)  # the user's own `!ls`: not the agent's call
    s.assistant(("toolu_5", "bash", {"command": "npm test"}), stop="aborted")  # aborted: no result
    s.entry("compaction", summary="...", firstKeptEntryIndex=3, tokensBefore=50000)
    s.assistant(stop="stop")
    return s


def test_session_file_calls_errors_and_steps(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "s.jsonl", _linear().lines)
    assert detect_format(path) == "pi"
    (session,) = open_sessions(path)
    assert session.session == "ffae836b-9420-4060-ac13-7745215f90ff"
    evts = list(session.events())
    assert [(c.call_id, c.tool, c.step) for c in calls(evts)] == [
        ("toolu_1", "bash", 1),
        ("toolu_2", "read", 1),
        ("toolu_3", "edit", 2),
        ("toolu_4", "edit", 3),
        ("toolu_5", "bash", 4),
    ]
    assert calls(evts)[0].args == {"command": "npm test"}
    assert calls(evts)[0].ts == iso("2025-12-09T01:00:03")
    results = of(evts, ToolResult)
    assert [(r.call_id, r.is_error) for r in results] == [
        ("toolu_1", True),
        ("toolu_2", False),
        ("toolu_3", True),
        ("toolu_4", True),
    ]
    assert results[0].content == "1 failing\n\nCommand exited with code 1"
    assert [m.text for m in of(evts, UserMessage)] == ["fix the failing test", "try again\n[image]"]
    assert longest_run(evts) == 2  # the same failed edit twice
    assert not session.report.skipped


def test_tree_session_reads_every_branch_in_file_order(tmp_path: Path) -> None:
    """Since version 2 entries link to their parent; going back to an earlier
    entry starts a branch. Every branch the agent took is read."""
    s = PiSession(tree=True)
    s.user("add a flag")
    s.assistant(("c1", "read", {"path": "cli.ts"}))
    s.result("c1", "read", "...")
    fork = s.last
    s.assistant(("c2", "edit", {"path": "cli.ts"}))
    s.result("c2", "edit", "Could not find the exact text", error=True)
    s.entry("branch_summary", parent=fork, fromId=s.last, summary="the edit failed")
    s.assistant(("c3", "write", {"path": "cli.ts", "content": "x"}))
    s.result("c3", "write", "Successfully wrote 1 bytes")
    s.entry("label", targetId=fork, label="checkpoint")
    s.entry("custom", customType="my-ext", data={"n": 1})
    path = write_lines(tmp_path / "2025-12-09T00-53-29-825Z_ffae836b.jsonl", s.lines, torn='{"type":"mess')
    (session,) = open_sessions(path)
    evts = list(session.events())
    assert [c.call_id for c in calls(evts)] == ["c1", "c2", "c3"]
    assert [r.is_error for r in of(evts, ToolResult)] == [False, True, False]
    assert session.report.skipped == {"torn": 1}


def test_entries_without_a_header_and_odd_entries(tmp_path: Path) -> None:
    lines = [
        {"type": "message", "message": {"role": "user", "content": "   "}},
        {"type": "message", "timestamp": 5, "message": "junk"},
        {"type": "message", "message": {"role": "assistant", "content": "text only", "timestamp": 1765242000000}},
        {"type": "message", "message": {"role": "toolResult", "toolCallId": "nope", "content": "x"}},
    ]
    path = write_lines(tmp_path / "headless.jsonl", lines)
    (session,) = open_sessions(path)
    assert session.session == "headless"
    assert list(session.events()) == []
    assert session.report.skipped == {"orphan-result": 1}


def test_lines_that_are_not_pi_are_not_detected_as_pi(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "x.jsonl", [{"type": "message", "message": {"role": "system"}}])
    with pytest.raises(UnknownFormatError, match="pi: neither a"):
        detect_format(path)


REAL = {
    "pi/before-compaction.jsonl": (454, 12, 1),
    "pi/large-session.jsonl": (391, 19, 1),
}


@pytest.mark.parametrize(("relative", "expected"), REAL.items())
def test_real_sessions(relative: str, expected: tuple[int, int, int]) -> None:
    evts = only(corpus_file(relative))
    assert counts(evts) == expected
    assert {c.agent.id for c in calls(evts)} == {"main"}


def test_fixture_matches_the_real_shape() -> None:
    """The synthetic header keeps the keys of the real version-1 header."""
    with corpus_file("pi/large-session.jsonl").open() as file:
        real = json.loads(file.readline())
    assert set(_linear().lines[0]) == set(real)


def test_a_compaction_entry_is_imported_as_a_compaction(tmp_path: Path) -> None:
    s = PiSession(tree=True)
    s.user("fix it")
    for n in range(3):
        if n == 2:
            s.entry("compaction", summary="earlier work", firstKeptEntryId="00000001", tokensBefore=150000)
        s.assistant((f"c{n}", "read", {"path": "a.py"}))
        s.result(f"c{n}", "read", "x = 1")
    assert compactions(only(write_lines(tmp_path / "s.jsonl", s.lines))) == ["read", "read", "compacted", "read"]


@pytest.mark.parametrize("tree", [True, False], ids=["entry-ids", "version-1"])
def test_a_call_id_reused_after_its_call_was_answered_is_a_new_call(tmp_path: Path, tree: bool) -> None:
    """A model server that names every call ``call_0``: each answered call
    is its own call. An entry written again (its id, or before version 2
    its time, with it) is a copy, not one more call."""
    s = PiSession(tree=tree)
    s.user("list the files")
    for _ in range(3):
        s.assistant(("call_0", "bash", {"command": "ls"}))
        s.result("call_0", "bash", "a.ts")
    s.lines.append(s.lines[-2])  # the last call's entry again
    (session,) = open_sessions(write_lines(tmp_path / "s.jsonl", s.lines))
    evts = list(session.events())
    assert [(c.call_id, c.step) for c in calls(evts)] == [("call_0", 1), ("call_0@2", 2), ("call_0@3", 3)]
    assert [r.call_id for r in of(evts, ToolResult)] == ["call_0", "call_0@2", "call_0@3"]
    assert longest_run(evts) == 3
    assert session.report.skipped == {"duplicate-call": 1}


def test_a_call_id_reused_after_an_interrupted_call_is_a_new_call(tmp_path: Path) -> None:
    """An aborted response leaves its call unanswered; the next response's
    call under the same id is a call of its own, and the result answers it."""
    s = PiSession(tree=True)
    s.user("run the tests")
    s.assistant(("call_0", "bash", {"command": "npm test"}), stop="aborted")
    s.user("go on")
    s.assistant(("call_0", "bash", {"command": "npm test -- --bail"}))
    s.result("call_0", "bash", "1 failing", error=True)
    evts = only(write_lines(tmp_path / "s.jsonl", s.lines))
    assert [(c.call_id, c.args["command"]) for c in calls(evts)] == [
        ("call_0", "npm test"),
        ("call_0@2", "npm test -- --bail"),
    ]
    assert [(r.call_id, r.args["command"]) for r in of(evts, ToolResult)] == [("call_0@2", "npm test -- --bail")]
