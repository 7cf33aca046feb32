"""The CLIs whose hooks the guard answers, by the name ``--agent`` and ``serve``'s routes use."""

from __future__ import annotations

from collections.abc import Mapping

from guard.adapters.claude_hooks import CLAUDE_CODE, HookRuntime
from guard.adapters.codex_hooks import CODEX
from guard.adapters.gemini_hooks import GEMINI_CLI

__all__ = ["RUNTIMES", "check_event", "runtime_named"]

RUNTIMES: Mapping[str, HookRuntime] = {runtime.name: runtime for runtime in (CLAUDE_CODE, CODEX, GEMINI_CLI)}
"""Each CLI's ``HookRuntime`` by name: ``claude-code``, ``codex``, ``gemini-cli``."""


def runtime_named(name: str) -> HookRuntime:
    """The runtime called ``name``; a ``ValueError`` naming the known ones otherwise."""
    runtime = RUNTIMES.get(name) if isinstance(name, str) else None
    if runtime is None:
        raise ValueError(f"unknown agent CLI {name!r}; one of {', '.join(RUNTIMES)}")
    return runtime


def check_event(runtime: HookRuntime, payload: Mapping[str, object]) -> None:
    """A ``ValueError`` when the payload's ``hook_event_name`` is one only
    another CLI's hooks send, a CLI whose events are named unlike
    ``runtime``'s (Gemini CLI's ``BeforeTool`` to Claude Code's hook): the
    hook was set up for the wrong CLI (its ``--agent``), and would answer
    every event with nothing. Claude Code and Codex name their events
    alike, so one's event the other's guard does not follow is no sign."""
    if runtime.seam(payload) is not None:
        return
    others = [
        name
        for name, other in RUNTIMES.items()
        if other.seam(payload) is not None and _pre_event(other) != _pre_event(runtime)
    ]
    if others:
        raise ValueError(
            f"hook event {payload.get('hook_event_name')!r} is one {' and '.join(others)} "
            f"{'sends' if len(others) == 1 else 'send'}, not "
            f"{runtime.name}: run the hook with --agent {others[0]} (hook-settings --agent {others[0]} prints it)"
        )


def _pre_event(runtime: HookRuntime) -> str:
    """The name of ``runtime``'s event before a tool runs: CLIs that name
    it alike (``PreToolUse``) name their events alike."""
    return next(event for event, seam in runtime.seams.items() if seam == "pre")
