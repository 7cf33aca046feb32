"""Helpers for the importer tests: the real transcripts kept in the
repository (``tests/data/transcripts``, see ``DATA.md`` there), the
synthetic Claude Code writer shared with the benchmarks, and counts over
imported events. Not a test module."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path
from typing import Any

from benchmarks._transcripts import CORPUS, ClaudeCodeSession, write_lines
from bus import AgentStatus, ToolCall, ToolResult
from guard import canonical_json
from guard.importers import open_sessions

__all__ = [
    "CORPUS",
    "ClaudeCodeSession",
    "calls",
    "codex_rollout",
    "corpus_file",
    "counts",
    "events",
    "iso",
    "longest_run",
    "looping_claude_code",
    "of",
    "only",
    "openhands_runs",
    "write_lines",
]


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


def codex_rollout(path: Path, *kinds: Any) -> Path:
    """A Codex rollout of one shell call per entry of ``kinds``, its payload
    type: one Codex never writes (an object) makes a record the importer
    cannot use."""
    lines: list[dict[str, Any]] = [
        {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "r"}}
    ]
    for n, kind in enumerate(kinds):
        call = {"type": kind, "name": "shell", "arguments": "{}", "call_id": f"c{n}"}
        lines.append({"timestamp": "2026-01-01T00:00:01Z", "type": "response_item", "payload": call})
    return write_lines(path, lines)


def openhands_runs(runs: int, *broken: int) -> list[Any]:
    """An OpenHands V0 ``history``: a prompt, then ``runs`` runs of ``ls <n>``
    answered (call ids ``t<n>``); the runs numbered in ``broken`` record a
    model response whose ``choices`` is a number, which makes their action
    a record the importer cannot use."""
    history: list[Any] = [{"id": 0, "source": "user", "action": "message", "args": {"content": "fix"}}]
    for n in range(1, runs + 1):
        response: dict[str, Any] = {"id": f"r{n}", "choices": 5 if n in broken else []}
        tcm = {"function_name": "execute_bash", "tool_call_id": f"t{n}", "model_response": response}
        action = {"id": 2 * n - 1, "source": "agent", "action": "run", "args": {"command": f"ls {n}"}}
        history.append(action | {"tool_call_metadata": tcm})
        history.append({"id": 2 * n, "source": "agent", "observation": "run", "cause": 2 * n - 1, "content": "ok"})
    return history


def corpus_file(relative: str) -> Path:
    """A real transcript kept in the repository; a missing one fails the
    test, naming it (the data ships with the tests)."""
    path = CORPUS / relative
    assert path.is_file(), f"real transcript {relative} is not in {CORPUS}"
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


def compactions(evts: list[Any]) -> list[str]:
    """The tools called and the context compactions between them, in order
    (``"compacted"`` for each compaction)."""
    return [
        e.tool if type(e) is ToolCall else "compacted"
        for e in evts
        if type(e) is ToolCall or (type(e) is AgentStatus and e.status == "compacted")
    ]


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
