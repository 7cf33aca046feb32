"""The bounded table of live entries every front end keeps."""

from __future__ import annotations

import pytest

from guard.sessions.live import LiveTable


def test_the_least_recently_used_goes_first_once_over_the_bound() -> None:
    table: LiveTable[str, int] = LiveTable(2)
    assert table.add("a", 1) == []
    assert table.add("b", 2) == []
    assert table.get("a") == 1  # a use: "b" is now the oldest
    assert table.add("c", 3) == [2]
    assert ("a" in table, "b" in table, len(table)) == (True, False, 2)
    assert table.values() == [1, 3]


def test_peek_is_not_a_use_and_restore_trims_on_the_next_add() -> None:
    table: LiveTable[str, int] = LiveTable(1)
    table.restore("a", 1)
    table.restore("b", 2)
    assert len(table) == 2
    assert table.peek("a") == 1
    assert table.add("c", 3) == [1, 2]
    assert (table.pop("c"), table.pop("c"), table.get("c")) == (3, None, None)


@pytest.mark.parametrize("bound", [0, -1, True, 1.5, "2"])
def test_the_bound_is_an_integer_of_at_least_one(bound: object) -> None:
    with pytest.raises(ValueError, match=r"^max_sessions = .*: must be an integer >= 1$"):
        LiveTable(bound)  # type: ignore[arg-type]


def test_an_entry_in_use_is_passed_over_and_trimmed_once_done() -> None:
    table: LiveTable[str, str] = LiveTable(1)
    busy = {"a"}
    table.add("a", "a")
    assert table.add("b", "b", in_use=busy.__contains__) == []
    assert len(table) == 2, "over its bound while a is busy"
    busy.clear()
    assert table.trim(in_use=busy.__contains__) == ["a"]
    assert table.trim() == []
    assert table.values() == ["b"]
