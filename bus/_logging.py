"""structlog, imported when something is first logged."""

from __future__ import annotations

import contextlib
import reprlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["InfoLog", "LazyLogger", "configure_when_imported", "name_of"]

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


def _structlog() -> Any:
    """structlog, imported, with the configurations waiting for it applied."""
    import structlog

    while _pending:
        _pending.pop(0)()
    return structlog


def _escaped(value: Any) -> Any:
    """``value`` with any text as ASCII and backslash escapes: a record every
    stream can take."""
    return value.encode("ascii", "backslashreplace").decode("ascii") if isinstance(value, str) else value


def _write(log: Callable[..., Any], args: tuple[Any, ...], fields: dict[str, Any]) -> None:
    """Call the logging method ``log``; a record its output cannot take
    (a lone surrogate, text its encoding lacks) is written again with its
    text escaped, and a stream that refuses it (a full disk, a closed pipe)
    loses that record. Logging runs where a fault or an action is being
    reported: it must never turn into a fault of the call it reports on."""
    try:
        log(*args, **fields)
    except UnicodeError:
        with contextlib.suppress(Exception):
            log(*map(_escaped, args), **{key: _escaped(value) for key, value in fields.items()})
    except Exception:
        pass


class LazyLogger:
    """Stands in for ``structlog.get_logger(name)`` and imports structlog on
    its first call. Its methods never raise (see ``_write``).

    Importing structlog costs more than a Claude Code command hook's whole
    answer, and most processes that load the bus (that hook among them) never
    log: errors are rare and action records are usually filtered out. Every
    call goes through ``structlog.get_logger``, so the logger follows
    ``structlog.configure`` and ``structlog.testing.capture_logs``.
    """

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, method: str) -> Callable[..., None]:
        log = getattr(_structlog().get_logger(self._name), method)
        return lambda *args, **fields: _write(log, args, fields)


class InfoLog:
    """A structlog logger for frequent ``info`` records (a guard's actions,
    rescue's trips), bound once per structlog configuration, and skipped
    whole while that configuration filters ``info`` out.

    structlog's lazy proxy binds a fresh logger on every call (about 2.5 µs);
    this one rebinds only when ``structlog.configure`` changed what a logger
    is made of, so it still follows a reconfiguration (and
    ``structlog.testing.capture_logs``, which edits the processor list in
    place). structlog itself is imported on the first record.
    """

    __slots__ = ("_bound", "_enabled", "_made_of", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._made_of: tuple[Any, ...] = ()
        self._bound: Any = None
        self._enabled = True

    def enabled(self) -> bool:
        """Rebind if structlog was reconfigured; whether ``info`` gets through."""
        import logging

        structlog = _structlog()
        config = structlog.get_config()
        made_of = self._made_of
        if (
            not made_of
            or made_of[0] is not config["processors"]
            or made_of[1] is not config["wrapper_class"]
            or made_of[2] is not config["logger_factory"]
            or made_of[3] is not config["context_class"]
        ):
            bound = self._bound = structlog.get_logger(self._name).bind()
            # Asked of the class: a generic BoundLogger proxies any attribute,
            # and would log a call of one it lacks.
            knows_level = callable(getattr(type(bound), "is_enabled_for", None))
            self._enabled = bound.is_enabled_for(logging.INFO) if knows_level else True
            self._made_of = (
                config["processors"],
                config["wrapper_class"],
                config["logger_factory"],
                config["context_class"],
            )
        return self._enabled

    def info(self, event: str, **fields: Any) -> None:
        """Log ``event`` at ``info``; call it once ``enabled`` said yes, so
        fields are built only for a record that gets through. Never raises
        (see ``_write``)."""
        _write(self._bound.info, (event,), fields)


_repr = reprlib.Repr()
_repr.maxother = 200


def name_of(obj: object) -> str:
    """What a log line calls ``obj`` (a handler, a value it returned): its
    qualified name, else a short ``repr``. Never raises, whatever its
    ``__repr__`` does: this runs where a fault is being reported."""
    try:
        name = getattr(obj, "__qualname__", None)
    except Exception:
        name = None
    return name if isinstance(name, str) else _repr.repr(obj)
