"""The bounded table of live entries (sessions, threads, conversations,
agents) every front end keeps: the least recently used goes first once there
are more than ``max_sessions``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from itertools import islice
from typing import Generic, TypeVar

__all__ = ["LiveTable", "check_max_sessions"]

K = TypeVar("K")
V = TypeVar("V")


def check_max_sessions(max_sessions: object) -> int:
    """``max_sessions`` if it is an integer >= 1; a ``ValueError`` naming it otherwise."""
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ValueError(f"max_sessions = {max_sessions!r}: must be an integer >= 1")
    return max_sessions


class LiveTable(Generic[K, V]):
    """Live entries by key, in order of last use. ``get`` counts as a use;
    ``add`` returns the entries it pushed out (oldest first), which the
    caller disposes of."""

    __slots__ = ("_entries", "max_sessions")

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = check_max_sessions(max_sessions)
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The entry under ``key`` (now the most recently used), or ``None``."""
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def add(self, key: K, value: V, *, in_use: Callable[[V], bool] | None = None) -> list[V]:
        """Put ``value`` under ``key`` as the most recently used; the entries
        beyond ``max_sessions``, removed, least recently used first. An entry
        ``in_use`` says is busy (a run still going) is passed over and stays:
        the table then holds more until those are done."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        return self.trim(in_use=in_use)

    def trim(self, *, in_use: Callable[[V], bool] | None = None) -> list[V]:
        """The entries beyond ``max_sessions``, removed, least recently used
        first, but for those ``in_use`` says are busy: a table an ``add`` left
        over its bound is trimmed again once they are done."""
        entries = self._entries
        excess = len(entries) - self.max_sessions
        if excess <= 0:
            return []
        # only the oldest entries are read: an add to a full table costs the one it pushes out
        gone: list[K] = []
        for key, value in islice(entries.items(), len(entries) - 1):  # never the most recently used
            if len(gone) == excess:
                break
            if in_use is None or not in_use(value):
                gone.append(key)
        return [entries.pop(key) for key in gone]

    def restore(self, key: K, value: V) -> None:
        """Put ``value`` under ``key`` as the most recently used without
        pushing anything out (entries a restored state brings back); the
        next ``add`` trims the table."""
        self._entries[key] = value

    def peek(self, key: K) -> V | None:
        """The entry under ``key``, or ``None``, without counting as a use."""
        return self._entries.get(key)

    def pop(self, key: K) -> V | None:
        return self._entries.pop(key, None)

    def values(self) -> list[V]:
        return list(self._entries.values())

    def items(self) -> list[tuple[K, V]]:
        """The entries, least recently used first."""
        return list(self._entries.items())

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)
