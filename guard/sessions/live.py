"""The bounded table of live entries (sessions, threads, conversations,
agents) every front end keeps: the least recently used goes first once there
are more than ``max_sessions``."""

from __future__ import annotations

from collections import OrderedDict
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

    def add(self, key: K, value: V) -> list[V]:
        """Put ``value`` under ``key`` as the most recently used; the entries
        beyond ``max_sessions``, removed, least recently used first."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        evicted: list[V] = []
        while len(self._entries) > self.max_sessions:
            evicted.append(self._entries.popitem(last=False)[1])
        return evicted

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
