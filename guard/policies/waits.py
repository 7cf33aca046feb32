"""How long a wait lasts, by its own word: a ``sleep`` command or a wait
tool's duration (``sleep 30``, ``Start-Sleep -Milliseconds 500``,
``timeout /t 15``, ``{"seconds": 10}``), and the wait a failure asks for
before a retry ("Retry-After: 30", "try again in 2 minutes"). ``loops``
counts the first as time waited where a transcript has no times, and
denies a retry made before the second is over.
"""

from __future__ import annotations

from typing import Any

from guard._regex import lazy_compile

__all__ = ["declared_wait", "stated_wait"]

# how long a transient failure says to wait: "Retry-After: 30", "retry after 60s", "Please try again in 20s",
# "try again in 1.5 seconds", "retry in 2 minutes"
_RETRY_AFTER = lazy_compile(
    r"(?i)\b(?:retry[ _-]after|(?:try again|retry) in)[\s:=\"']*(\d{1,5}(?:\.\d+)?)[ \t]*"
    r"(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?)?\b"
)
_UNIT_SECONDS = {"ms": 0.001, "m": 60.0}


# how long a wait says it waits: `sleep 30`, `sleep 2m`, PowerShell's `Start-Sleep -Milliseconds 500`,
# cmd's `timeout /t 15`, alone or first in a command that then checks (`sleep 60 && kubectl get pods`)
_WAIT_COMMAND = lazy_compile(
    r"(?i)^\s*(?:sleep\s+(\d{1,7}(?:\.\d+)?)([smhd]?)|start-sleep(?:\s+-(seconds|s|milliseconds|ms))?\s+(\d{1,7}(?:\.\d+)?)"
    r"|timeout(?:\.exe)?\s+/t\s+(\d{1,7}))\s*(?:;|&&|/nobreak|>|$)"
)
_SLEEP_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_KEYS = {
    **dict.fromkeys(("seconds", "secs", "duration", "time", "delay", "wait", "sleep", "wait_seconds"), 1.0),
    **dict.fromkeys(("ms", "milliseconds", "duration_ms", "delay_ms", "wait_ms", "sleep_ms", "time_ms"), 0.001),
    **dict.fromkeys(("durationMs", "delayMs", "waitMs", "sleepMs", "timeMs"), 0.001),
}
"""A sleep or wait tool's arguments naming how long it waits, and their unit in seconds."""


def declared_wait(args: Any, command: str | None) -> float:
    """How long, in seconds, a wait (a ``sleep`` command or tool, or the
    ``sleep`` a command opens with) says it waits; 0 when it names no
    duration. A transcript without times (every ``ts`` 0) still shows how
    long the agent waited between two checks this way."""
    if command is not None:
        found = _WAIT_COMMAND.match(command)
        if found is None:
            return 0.0
        if found.group(1) is not None:
            return float(found.group(1)) * _SLEEP_UNITS[found.group(2).lower()]
        if found.group(4) is not None:
            unit = (found.group(3) or "s").lower()
            return float(found.group(4)) * (0.001 if unit.startswith("m") else 1.0)
        return float(found.group(5))
    if not isinstance(args, dict):
        return 0.0
    for key, value in args.items():
        unit = _DURATION_KEYS.get(key)
        if unit is not None and isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return min(float(value) * unit, 86400.0 * 365)
    return 0.0


def stated_wait(content: str, end: int) -> float:
    """The wait in seconds a failure says to keep before a retry (in its
    first ``end`` characters); 0 when it names none."""
    found = _RETRY_AFTER.search(content, 0, end)
    if found is None:
        return 0.0
    unit = (found.group(2) or "s").lower()
    return float(found.group(1)) * _UNIT_SECONDS.get("ms" if unit == "ms" or unit.startswith("mil") else unit[:1], 1.0)
