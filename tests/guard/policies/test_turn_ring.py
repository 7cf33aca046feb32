"""The pure cross-turn detector and the bounded turn ring it reads."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard import fingerprint
from guard.policies.turn_ring import TurnRing, detect_loop

GREP = fingerprint("grep", {"pattern": "load_config", "path": "src"}).digest
READ = fingerprint("read", {"path": "README.md"}).digest


def _turns(*turns: set[bytes]) -> list[set[bytes]]:
    return list(turns)


def test_fires_when_the_pair_is_in_each_of_the_last_n_turns() -> None:
    assert detect_loop(_turns({READ}, {GREP}, {GREP}, {GREP}), GREP, 3)


def test_silent_at_n_minus_one_turns() -> None:
    assert not detect_loop(_turns({READ}, {GREP}, {GREP}), GREP, 3)


def test_one_byte_of_difference_is_another_pair() -> None:
    near = fingerprint("grep", {"pattern": "load_confiG", "path": "src"}).digest
    assert near != GREP
    assert not detect_loop(_turns({GREP}, {near}, {GREP}), GREP, 3)


def test_key_order_is_not_a_difference() -> None:
    reordered = fingerprint("grep", {"path": "src", "pattern": "load_config"}).digest
    assert detect_loop(_turns({GREP}, {reordered}, {GREP}), GREP, 3)


def test_alternating_pairs_never_fire() -> None:
    turns = _turns({GREP}, {READ}, {GREP}, {READ}, {GREP}, {READ})
    assert not detect_loop(turns, GREP, 2)
    assert not detect_loop(turns, READ, 2)


def test_an_empty_turn_ends_the_run() -> None:
    assert not detect_loop(_turns({GREP}, set(), {GREP}, {GREP}), GREP, 4)
    assert detect_loop(_turns({GREP}, set(), {GREP}, {GREP}), GREP, 2)


def test_other_pairs_in_a_turn_do_not_matter() -> None:
    assert detect_loop(_turns({GREP, READ}, {GREP}, {READ, GREP}), GREP, 3)


@pytest.mark.parametrize("threshold", [0, -1, -5])
def test_never_fires_at_threshold_zero_or_below(threshold: int) -> None:
    assert not detect_loop(_turns({GREP}, {GREP}, {GREP}), GREP, threshold)
    assert not detect_loop([], GREP, threshold)


@given(
    turns=st.lists(st.frozensets(st.sampled_from([b"a", b"b", b"c"])), max_size=12),
    pair=st.sampled_from([b"a", b"b"]),
    threshold=st.integers(min_value=-2, max_value=8),
)
def test_fires_exactly_when_the_running_count_reaches_the_threshold(
    turns: list[frozenset[bytes]], pair: bytes, threshold: int
) -> None:
    run = 0
    for turn in turns:
        run = run + 1 if pair in turn else 0
    assert detect_loop(turns, pair, threshold) == (threshold > 0 and run >= threshold)


def test_ring_keeps_only_the_last_size_turns() -> None:
    ring = TurnRing(3)
    for _ in range(10):
        ring.open()
        ring.add(GREP)
    assert len(ring) == 3
    assert detect_loop(ring.turns, GREP, 3)
    assert not detect_loop(ring.turns, GREP, 4)


def test_adding_to_an_empty_ring_opens_a_turn() -> None:
    ring = TurnRing(2)
    ring.add(GREP)
    ring.add(GREP)
    assert len(ring) == 1
    assert list(ring.turns) == [{GREP}]


def test_forget_restarts_one_pairs_run_only() -> None:
    ring = TurnRing(3)
    for _ in range(3):
        ring.open()
        ring.add(GREP)
        ring.add(READ)
    ring.forget(GREP)
    assert not detect_loop(ring.turns, GREP, 1)
    assert detect_loop(ring.turns, READ, 3)
    ring.open()
    ring.add(GREP)
    assert detect_loop(ring.turns, GREP, 1)
    assert not detect_loop(ring.turns, GREP, 2)


def test_clear_forgets_every_turn() -> None:
    ring = TurnRing(2)
    ring.add(GREP)
    ring.clear()
    assert len(ring) == 0
    assert not detect_loop(ring.turns, GREP, 1)


def test_a_ring_holds_at_least_one_turn() -> None:
    with pytest.raises(ValueError, match="size=0"):
        TurnRing(0)
