"""structlog, imported when something is first logged."""

from __future__ import annotations

from typing import Any

__all__ = ["LazyLogger"]


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

        return getattr(structlog.get_logger(self._name), method)
