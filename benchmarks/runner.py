"""Runs the selected sections in one process and collects their rows."""

from __future__ import annotations

import contextlib
import os
import platform
import sys
from collections.abc import Awaitable, Callable
from importlib import metadata
from pathlib import Path

import anyio

from benchmarks._measure import Row
from benchmarks.audit_scale import audit_scale
from benchmarks.command_hook import command_hook
from benchmarks.detection_speed import detection
from benchmarks.dispatch import dispatch, dispatch_on_trio
from benchmarks.fleet import fleet
from benchmarks.fleet_chaos import fleet_chaos
from benchmarks.fullpath import fullpath
from benchmarks.http_hook import http_hook
from benchmarks.logwrite import log_write
from benchmarks.memory import memory
from benchmarks.replay import replay
from benchmarks.settings import Settings

__all__ = ["machine", "run"]

_SECTIONS: dict[str, Callable[[Settings], Awaitable[list[Row]]]] = {
    "dispatch": dispatch,
    "fullpath": fullpath,
    "log": log_write,
    "replay": replay,
    "detection": detection,
    "memory": memory,
    "command-hook": command_hook,
    "audit": audit_scale,
    "http-hook": http_hook,
    "fleet": fleet,
    "fleet-chaos": fleet_chaos,
}


def run(settings: Settings, *, progress: Callable[[str], None] = lambda _: None) -> list[Row]:
    """Every selected section on asyncio, then (if asked) the bus on trio."""
    rows: list[Row] = []
    for name in settings.sections:
        progress(name)
        rows.extend(anyio.run(_SECTIONS[name], settings, backend="asyncio"))
        if name == "dispatch" and settings.trio:
            progress("dispatch on trio")
            rows.extend(anyio.run(dispatch_on_trio, settings, backend="trio"))
    return rows


def _cpu() -> str:
    text = ""
    with contextlib.suppress(OSError):
        text = Path("/proc/cpuinfo").read_text()
    names = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")]
    return names[0] if names else platform.processor() or platform.machine()


def machine() -> dict[str, str]:
    """What the numbers were measured on."""
    return {
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "platform": platform.platform(),
        "cpu": _cpu(),
        "cores": str(os.cpu_count()),
        "msgspec": metadata.version("msgspec"),
        "anyio": metadata.version("anyio"),
    }
