"""The call stream every section is fed: deterministic, realistic runs.

An agent's calls come in runs: usually one call, sometimes the same call two
to six times in a row (so reminders fire now and then, as in a real loop).
Every call gets its own ``args`` object, equal in content within a run, the
way a runtime parses each model response afresh; a call and its result share
theirs, as ``ToolResult.answering`` does.
"""

from __future__ import annotations

import random
from typing import Any

from bus import Agent, ToolCall, ToolResult

__all__ = ["LARGE_ARGS_BYTES", "TOOLS", "calls", "grep_results", "results", "shell_calls"]

TOOLS = ("read_file", "grep", "run_tests", "list_dir", "edit_file")
LARGE_ARGS_BYTES = 100_000

_RUNS = (1, 1, 1, 1, 2, 2, 3, 3, 4, 5, 6)
_CONTENT = "src/config/loader.py:12: def load_config(path: str) -> Config:  # reads TOML and YAML\n" * 3
_LINE = "    value = compute(value, options)  # a line of a large file being written\n"


def _big_text(size: int) -> str:
    return (_LINE * (size // len(_LINE) + 1))[:size]


def calls(count: int, *, agent: Agent, arg_bytes: int = 0, seed: int = 7) -> list[ToolCall]:
    """``count`` tool calls for ``agent``; ``arg_bytes`` adds a payload of that
    size (one shared string, as a large file body would be) to every call."""
    rng = random.Random(seed)
    payload = _big_text(arg_bytes) if arg_bytes else None
    out: list[ToolCall] = []
    while len(out) < count:
        tool = rng.choice(TOOLS)
        target = rng.randrange(64)
        for _ in range(rng.choice(_RUNS)):
            args: dict[str, Any] = {"path": f"src/module_{target}.py", "pattern": "load_config", "limit": 20}
            if payload is not None:
                args["content"] = payload
            number = len(out) + 1
            out.append(ToolCall(agent=agent, call_id=f"c{number}", step=number, tool=tool, args=args))
    return out[:count]


def results(stream: list[ToolCall]) -> list[ToolResult]:
    """The result of each call, sharing its ``args``."""
    return [ToolResult.answering(call, _CONTENT) for call in stream]


def shell_calls(count: int, *, agent: Agent, seed: int = 7) -> list[ToolCall]:
    """``count`` shell calls (``{"command": "grep -rn ..."}``), in the same
    runs as ``calls``: the shape of a shell-only agent's session."""
    rng = random.Random(seed)
    out: list[ToolCall] = []
    while len(out) < count:
        target = rng.randrange(64)
        for _ in range(rng.choice(_RUNS)):
            args: dict[str, Any] = {"command": f"grep -rn 'load_config' src/module_{target}/ | head -24"}
            number = len(out) + 1
            out.append(ToolCall(agent=agent, call_id=f"c{number}", step=number, tool="bash", args=args))
    return out[:count]


def grep_results(stream: list[ToolCall]) -> list[ToolResult]:
    """About 2 KB of grep-like output per call: paths, line numbers and a
    timestamp per line that moves with every call (as a log being searched
    would show), so comparing results means normalising them."""
    out: list[ToolResult] = []
    for call in stream:
        minute, second = divmod(call.step % 3600, 60)
        lines = [
            f"src/config/loader_{i}.py:{12 + 7 * i}: 2026-12-01T10:{minute:02d}:{second:02d}.{i:03d}Z "
            f"def load_config(path: str) -> Config:  # reads TOML and YAML"
            for i in range(20)
        ]
        out.append(ToolResult.answering(call, "\n".join(lines) + "\n"))
    return out
