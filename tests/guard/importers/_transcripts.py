"""Small synthetic transcripts, written the way each tool writes them, for
what the real corpus lacks (parallel calls, errors, subagents, loops, torn
lines). Not a test module."""

from __future__ import annotations

import itertools
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bus import ToolCall, ToolResult
from guard import canonical_json
from guard.importers import open_sessions

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
CORPUS = Path(
    os.environ.get("REPEAT_TOOL_GUARD_CORPUS") or Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus"
)
"""The real transcripts: ``../shared/corpus`` beside the repository, or the
folder ``REPEAT_TOOL_GUARD_CORPUS`` names (see ``DATA.md``)."""


def write_lines(path: Path, objects: list[Any], *, torn: str = "") -> Path:
    """One JSON object per line; ``torn`` is appended unterminated, as a
    writer killed mid-line leaves it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(o) + "\n" for o in objects) + torn, encoding="utf-8")
    return path


class ClaudeCodeSession:
    """Lines of a Claude Code session (or subagent) file, one second apart."""

    def __init__(self, session: str = "s1", *, agent_id: str | None = None, start: int = 0) -> None:
        self.session = session
        self.agent_id = agent_id
        self.lines: list[dict[str, Any]] = []
        self._clock = itertools.count(start)
        self._ids = itertools.count(1)

    def _entry(self, kind: str, **fields: Any) -> dict[str, Any]:
        moment = _EPOCH + timedelta(seconds=next(self._clock))
        entry = {
            "type": kind,
            "sessionId": self.session,
            "uuid": f"u{next(self._ids)}",
            "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "isSidechain": self.agent_id is not None,
            **fields,
        }
        if self.agent_id is not None:
            entry["agentId"] = self.agent_id
        self.lines.append(entry)
        return entry

    def skip_to(self, second: int) -> None:
        """Let time pass: the next entry is ``second`` seconds after the start."""
        self._clock = itertools.count(second)

    def prompt(self, text: Any, **fields: Any) -> None:
        """A typed prompt: a string, or content blocks."""
        self._entry("user", message={"role": "user", "content": text}, **fields)

    def respond(self, *calls: tuple[str, Any], text: str = "") -> list[str]:
        """One model response: each call its own line, as Claude Code writes
        parallel calls; returns the call ids."""
        message_id = f"msg_{next(self._ids)}"
        if text:
            self._entry(
                "assistant",
                message={
                    "id": message_id,
                    "role": "assistant",
                    "model": "m",
                    "content": [{"type": "text", "text": text}],
                },
            )
        ids = []
        for name, args in calls:
            call_id = f"toolu_{next(self._ids)}"
            ids.append(call_id)
            self._entry(
                "assistant",
                message={
                    "id": message_id,
                    "role": "assistant",
                    "model": "m",
                    "content": [{"type": "tool_use", "id": call_id, "name": name, "input": args}],
                },
            )
        return ids

    def result(self, call_id: str, content: Any, *, is_error: bool = False) -> None:
        block = {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}
        self._entry("user", message={"role": "user", "content": [block]}, toolUseResult={})

    def call(self, name: str, args: Any, content: Any = "ok", *, is_error: bool = False) -> str:
        """A response with one call, and its result."""
        (call_id,) = self.respond((name, args))
        self.result(call_id, content, is_error=is_error)
        return call_id

    def attachment(self, **attachment: Any) -> None:
        self._entry("attachment", attachment=attachment)

    def write(self, path: Path, *, torn: str = "") -> Path:
        return write_lines(path, self.lines, torn=torn)


def looping_claude_code(path: Path) -> Path:
    """A session stuck in the seed's cycle: ``grep X`` five times then
    ``read Y``, three times over, then a fix and a test run that fails twice."""
    s = ClaudeCodeSession("loop")
    s.prompt("find where the config is loaded")
    for _ in range(3):
        for _ in range(5):
            s.call("Grep", {"pattern": "load_config", "path": "src"}, "src/cfg.py:12: def load_config():")
        s.call("Read", {"file_path": "src/cfg.py"}, "def load_config():\n    return {}\n" * 20)
    s.call("Edit", {"file_path": "src/cfg.py", "old_string": "{}", "new_string": "{'a': 1}"})
    for _ in range(2):
        s.call("Bash", {"command": "pytest -q"}, "1 failed", is_error=True)
    s.call("Bash", {"command": "pytest -q"}, "3 passed")
    return s.write(path)


def corpus_file(relative: str) -> Path:
    """A file of the shared corpus, or skip the test when the corpus is absent."""
    path = CORPUS / relative
    if not path.is_file():
        pytest.skip(f"real transcript {relative} not found under {CORPUS.resolve()} (shared corpus absent)")
    return path


def events(path: Path, format: str | None = None) -> dict[str, list[Any]]:
    """Every session's events, by session id."""
    return {s.session: list(s.events()) for s in open_sessions(path, format)}


def only(path: Path, format: str | None = None) -> list[Any]:
    """The events of a single-session transcript."""
    (session,) = events(path, format).values()
    return session


def calls(evts: list[Any], agent: str | None = None) -> list[Any]:
    return [e for e in evts if type(e) is ToolCall and e.agent is not None and agent in (None, e.agent.id)]


def of(evts: list[Any], kind: type) -> list[Any]:
    return [e for e in evts if type(e) is kind]


def longest_run(evts: list[Any]) -> int:
    """The longest run of identical consecutive calls within one agent, as
    SOURCES.md counts it (tool and canonical args)."""
    best = 0
    last: dict[str, tuple[Any, int]] = {}
    for call in calls(evts):
        key = (call.tool, canonical_json(call.args))
        previous = last.get(call.agent.id)
        run = previous[1] + 1 if previous and previous[0] == key else 1
        last[call.agent.id] = (key, run)
        best = max(best, run)
    return best


def counts(evts: list[Any]) -> tuple[int, int, int]:
    """What the data notes count for a real transcript: calls, failed
    results, and the longest run of identical calls."""
    return len(calls(evts)), sum(e.is_error for e in evts if type(e) is ToolResult), longest_run(evts)


def iso(text: str) -> float:
    from datetime import datetime

    moment = datetime.fromisoformat(text)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
