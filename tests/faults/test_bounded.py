"""The suite's own hang bound: a trial stopped for using too much CPU fails
with a traceback pytest can print, wherever the signal caught it."""

from __future__ import annotations

import signal
import traceback

import pytest

from tests.faults.conftest import Hang


def _drop_stale(keys: dict[int, int], index: int) -> None:
    for level in list(keys):
        key = keys[level]
        if key < index:
            del keys[level]  # the loop's jump back after this line has no line number


def _spin() -> None:
    signal.setitimer(signal.ITIMER_PROF, 0.002)
    while True:
        _drop_stale({n: n for n in range(200)}, 100)


def test_a_spinning_trial_fails_as_a_hang_with_a_line_for_every_frame() -> None:
    for _ in range(20):  # the signal lands on a jump with no line number about half the time
        with pytest.raises(Hang, match="of CPU") as caught:
            _spin()
        entries = traceback.walk_tb(caught.value.__traceback__)
        assert all(lineno is not None for _, lineno in entries)
