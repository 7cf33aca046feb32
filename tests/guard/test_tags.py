"""The linear tag and fence helpers give exactly what the lazy regular
expressions they replace give."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from guard._tags import fenced, tagged, untagged

_TAG_TOKENS = [
    "<a>",
    "</a>",
    "<b>",
    "</b>",
    "<ab>",
    "</ab>",
    "<a",
    "a>",
    "x",
    "\n",
    "<",
    ">",
    "</",
    "<<a>>",
    "<a-b>",
    "</a-b>",
    "-",
]
_FENCE_TOKENS = ["```bash\n", "```bash", "```mswea_bash_command \n", "\n```", "```", "x", "\n", " ", "`"]
_ANY = re.compile(r"<(\w+)>(.*?)</\1>", re.DOTALL)
_SOME = re.compile(r"<(a|b)>(.*?)</\1>", re.DOTALL)
_HYPHENED = re.compile(r"<(a-b|a)>(.*?)</\1>", re.DOTALL)
_FENCE = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)


@settings(max_examples=300, derandomize=True, database=None)
@given(st.lists(st.sampled_from(_TAG_TOKENS), max_size=30).map("".join))
def test_tagged_finds_what_the_lazy_backreference_finds(text: str) -> None:
    assert list(tagged(text)) == _ANY.findall(text)
    assert list(tagged(text, {"a", "b"})) == _SOME.findall(text)


@settings(max_examples=300, derandomize=True, database=None)
@given(st.lists(st.sampled_from(_FENCE_TOKENS), max_size=30).map("".join))
def test_fenced_finds_what_the_pattern_finds(text: str) -> None:
    assert fenced(_FENCE, text) == _FENCE.findall(text)


@settings(max_examples=300, derandomize=True, database=None)
@given(st.lists(st.sampled_from(_TAG_TOKENS), max_size=30).map("".join))
def test_untagged_removes_what_the_lazy_backreference_removes(text: str) -> None:
    assert untagged(text, {"a", "b"}) == _SOME.sub("", text)


@settings(max_examples=300, derandomize=True, database=None)
@given(st.lists(st.sampled_from(_TAG_TOKENS), max_size=30).map("".join))
def test_a_listed_tag_name_may_hold_a_hyphen(text: str) -> None:
    assert list(tagged(text, {"a-b", "a"})) == _HYPHENED.findall(text)
    assert untagged(text, {"a-b", "a"}) == _HYPHENED.sub("", text)
