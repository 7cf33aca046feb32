"""The turn ring and the pure cross-turn loop detector of policy ``turns``.

A turn is one model response, the ``step`` of its tool calls. It is kept as
the set of (tool, canonical arguments) pairs it called, each pair as its
16-byte fingerprint digest (the tool name is part of the digest), so a turn
that calls the same thing twice in parallel holds it once. The ring keeps
only the last ``size`` turns: detection never needs more than the threshold,
so memory is bounded whatever the session length.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

__all__ = ["Pair", "TurnRing", "detect_loop"]

Pair = bytes
"""A (tool, canonical arguments) pair: ``fingerprint(tool, args).digest``."""


def detect_loop(turns: Sequence[Collection[Pair]], pair: Pair, threshold: int) -> bool:
    """Whether ``pair`` appears in each of the last ``threshold`` turns.

    ``turns`` is oldest first. Never true at ``threshold <= 0`` or with fewer
    turns than the threshold; any turn without the pair (an empty turn
    included) ends the run. Pure: reads ``turns``, changes nothing.
    """
    count = len(turns)
    if threshold <= 0 or count < threshold:
        return False
    return all(pair in turns[index] for index in range(count - 1, count - 1 - threshold, -1))


class TurnRing:
    """The last ``size`` turns of one agent, newest last: live state for
    ``detect_loop``. The newest turn is the one being filled."""

    __slots__ = ("_size", "_turns")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a turn ring holds at least one turn, got size={size}")
        self._size = size
        # A short list, not a deque: a deque's first block alone is ~700
        # bytes per agent, and the ring is a handful of turns.
        self._turns: list[set[Pair]] = []

    @property
    def turns(self) -> Sequence[Collection[Pair]]:
        """The kept turns, oldest first."""
        return self._turns

    def open(self) -> None:
        """Start a new, empty newest turn; the oldest falls off when full."""
        turns = self._turns
        turns.append(set())
        if len(turns) > self._size:
            del turns[0]

    def add(self, pair: Pair) -> None:
        """Record ``pair`` in the newest turn (opening one if there is none)."""
        if not self._turns:
            self._turns.append(set())
        self._turns[-1].add(pair)

    def forget(self, pair: Pair) -> None:
        """Drop ``pair`` from every kept turn, so its run starts over: the
        reset after an advisory, after which the next needs a full run again."""
        for turn in self._turns:
            turn.discard(pair)

    def clear(self) -> None:
        """Forget every turn: something ended every run at once."""
        self._turns.clear()

    def __len__(self) -> int:
        return len(self._turns)
