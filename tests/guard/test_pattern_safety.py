"""Every built-in pattern answers input built to make a backtracking engine
hang (each took seconds to minutes before it ran on RE2; the timings are in
benchmarks/patterns.py, not here), and still answers correctly."""

from __future__ import annotations

import pytest

from guard import RECOMMENDED, load_config
from guard.calls import DEFAULT_INTERJECTIONS, Interjections
from guard.normalize import ResultNormalizer, error_kind
from guard.policies.progress import DEFAULT_MUTATING_COMMANDS, ProgressRule
from guard.redact import Redactor

PATHOLOGICAL = {
    "sed": "sed " * 15_500,
    "dashes": "a-" * 30_000,
    "spaces": " " * 60_000 + "x",
    "carriage return then a long line": "\r" + "a" * 60_000,
    "quotes": '"' * 60_000,
    "redirects": "> " * 30_000,
    "stars": "*" * 60_000,
}


@pytest.mark.parametrize("text", PATHOLOGICAL.values(), ids=PATHOLOGICAL.keys())
def test_every_default_pattern_answers_pathological_input(text: str) -> None:
    assert ProgressRule((), DEFAULT_MUTATING_COMMANDS).kind("bash", text) is None
    assert not Interjections(DEFAULT_INTERJECTIONS)(text)
    normalizer = ResultNormalizer()
    assert len(normalizer.digest(text)) == 16
    assert normalizer.normalize(text) == normalizer.normalize(text)
    assert len(error_kind("error: " + text)) <= 160
    assert Redactor()(text) == text


def test_carriage_returns_keep_what_was_drawn_last() -> None:
    normalize = ResultNormalizer(()).normalize
    assert normalize("50%\r75%\r100% done\r\nnext") == "100% done\nnext"
    assert normalize("build\r") == ""
    assert normalize("spinner|\r/\r-\rdone") == "done"


def test_error_kinds_ignore_tags_and_values() -> None:
    assert error_kind("<error>\nValueError: bad value 42 in /a/b.py") == "valueerror: bad value # in #"
    assert error_kind("<tool_use_error>x</tool_use_error>\nfailed: 'x' missing") == "failed: # missing"


def test_the_recommended_preset_loads_with_every_pattern_on_re2() -> None:
    assert load_config("recommended") == RECOMMENDED


def test_patterns_too_large_to_run_as_one_set_still_each_apply() -> None:
    # together they pass RE2's memory bound for a set; each alone compiles
    patterns = [f"[a-z]{{1,1000}}y{n}" for n in range(300)] + [r"\d+"]
    assert ResultNormalizer(patterns).normalize("abcy7 took 42 ms") == "\x00 took \x00 ms"
