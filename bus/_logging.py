"""structlog, imported when something is first logged."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["LazyLogger", "configure_when_imported"]

_pending: list[Callable[[], None]] = []
"""Configurations waiting for structlog's import (see ``configure_when_imported``):
process-wide, as structlog's own configuration is."""


def configure_when_imported(configure: Callable[[], None]) -> None:
    """Run ``configure`` (a ``structlog.configure`` call) right before a
    ``LazyLogger`` first imports structlog, or now if it is imported already.
    For a short process that logs only when something goes wrong (the
    command hook): it configures logging without paying for structlog."""
    if "structlog" in sys.modules:
        configure()
    else:
        _pending.append(configure)


class LazyLogger:
    """Stands in for ``structlog.get_logger(name)`` and imports structlog on
    its first call.

    Importing structlog costs more than a Claude Code command hook's whole
    answer, and most processes that load the bus (that hook among them) never
    log: errors are rare and action records are usually filtered out. Every
    call goes through ``structlog.get_logger``, so the logger follows
    ``structlog.configure`` and ``structlog.testing.capture_logs``.
    """

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, method: str) -> Any:
        import structlog

        while _pending:
            _pending.pop(0)()
        return getattr(structlog.get_logger(self._name), method)
