"""Transcripts for the benchmarks and the tests alike: the real ones kept
in the repository, and a writer of synthetic Claude Code sessions. Standard
library only, so ``python -m benchmarks`` runs without the test tools."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["CORPUS", "ClaudeCodeSession", "write_lines"]

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "transcripts"
"""The real transcripts kept in the repository, trimmed; their sources and
licences are in ``DATA.md`` there."""

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


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

        def line(block: dict[str, Any]) -> None:
            self._entry("assistant", message={"id": message_id, "role": "assistant", "model": "m", "content": [block]})

        if text:
            line({"type": "text", "text": text})
        ids = []
        for name, args in calls:
            call_id = f"toolu_{next(self._ids)}"
            ids.append(call_id)
            line({"type": "tool_use", "id": call_id, "name": name, "input": args})
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
