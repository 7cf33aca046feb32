"""Whether a repeated call's result brought news: the one rule ``audit`` and
the live page count waste by."""

from __future__ import annotations

import pytest

import guard.news as news_module
from guard.news import LastResult, News


def test_a_first_result_brings_no_news() -> None:
    assert not News().brought(LastResult(), "1 failed", repeated=False)


def test_a_result_brings_news_when_more_than_its_noise_changed() -> None:
    news, last = News(), LastResult()
    news.brought(last, "2 failed in 0.51s", repeated=False)
    assert not news.brought(last, "2 failed in 0.51s", repeated=True)  # the same text
    assert not news.brought(last, "2 failed in 0.48s", repeated=True)  # only its timing changed
    assert news.brought(last, "1 failed in 0.48s", repeated=True)
    assert not news.brought(last, "1 failed in 0.30s", repeated=True)


def test_a_second_result_is_compared_with_the_first_exactly() -> None:
    """The first result is kept as a hash of its text only: a timing that
    changed between the first and the second reads as news."""
    news, last = News(), LastResult()
    news.brought(last, "2 failed in 0.51s", repeated=False)
    assert news.brought(last, "2 failed in 0.48s", repeated=True)


def test_the_patterns_given_say_what_noise_is() -> None:
    news, last = News([r"run \d+"]), LastResult()
    news.brought(last, "run 1: ok", repeated=True)
    assert not news.brought(last, "run 2: ok", repeated=True)
    assert news.brought(last, "run 2: ok in 0.5s", repeated=True)  # durations are not noise here


@pytest.mark.parametrize("size", [10, 20_000])
def test_digests_stay_right_past_what_is_remembered(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    monkeypatch.setattr(news_module, "_DIGESTS_KEPT", 4)
    news = News()
    lasts = [LastResult() for _ in range(10)]
    for n, last in enumerate(lasts):
        news.brought(last, f"{n}:" + "x" * size, repeated=True)
    for n, last in enumerate(lasts):
        assert not news.brought(last, f"{n}:" + "x" * size, repeated=True)
        assert news.brought(last, f"{n}:" + "y" * size, repeated=True)
