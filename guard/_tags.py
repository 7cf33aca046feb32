"""Finding ``<name>…</name>`` spans and fenced blocks in the text of a
transcript or a prompt in linear time, and removing such spans (a harness's
own blocks inside a user's message).

The obvious regular expression, ``<(name)>(.*?)</\\1>`` with a lazy body,
retries every opening tag that has no closing tag after it by scanning to
the end of the text: thousands of unclosed tags in one message (a model
that looped, a hostile transcript) make it quadratic, seconds per message.
These helpers find the same spans from an index of the closing tags.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Collection, Iterator

from guard._regex import lazy_compile

__all__ = ["IDE_CONTEXT", "fenced", "tagged", "untagged", "without_ide_context"]

_OPEN = lazy_compile(r"<([\w-]+)>")
_CLOSE = lazy_compile(r"</([\w-]+)>")
_WORD = lazy_compile(r"\w+")

IDE_CONTEXT = frozenset({"ide_opened_file", "ide_selection", "ide_diagnostics"})
"""What an IDE integration (Claude Code's VS Code and JetBrains extensions)
puts in the user's message: the file open in the editor, the selected lines,
the editor's diagnostics. A closed list, so a tag the user typed stays."""


def tagged(text: str, names: Collection[str] | None = None) -> Iterator[tuple[str, str]]:
    """``(name, body)`` of each ``<name>body</name>`` in ``text``, leftmost
    first and not overlapping, the body ending at the first closing tag of
    its name: what ``re.finditer(r"<(name)>(.*?)</\\1>", text, re.DOTALL)``
    gives, for tag names among ``names`` (which may hold a ``-``, as
    ``command-name`` does), any ``\\w+`` name when ``None``."""
    for name, _, body, close, _ in _spans(text, names):
        yield name, text[body:close]


def untagged(text: str, names: Collection[str]) -> str:
    """``text`` without the spans ``tagged`` finds for tag names among
    ``names``: what ``re.sub(r"<(name)>.*?</\\1>", "", text, flags=re.DOTALL)``
    gives."""
    kept: list[str] = []
    pos = 0
    for _, start, _, _, end in _spans(text, names):
        kept.append(text[pos:start])
        pos = end
    kept.append(text[pos:])
    return "".join(kept)


def _spans(text: str, names: Collection[str] | None) -> Iterator[tuple[str, int, int, int, int]]:
    """``(name, start, body start, body end, end)`` of each span ``tagged``
    finds, from an index of the closing tags."""
    closes: dict[str, list[int]] = {}
    for close in _CLOSE.finditer(text):
        closes.setdefault(close.group(1), []).append(close.start())
    pos = 0
    while (match := _OPEN.search(text, pos)) is not None:
        name = match.group(1)
        wanted = _WORD.fullmatch(name) if names is None else name in names
        ends = closes.get(name, []) if wanted else []
        index = bisect_left(ends, match.end())
        if index == len(ends):
            pos = match.start() + 1
            continue
        pos = ends[index] + len(name) + 3
        yield name, match.start(), match.end(), ends[index], pos


def without_ide_context(text: str) -> str:
    """``text`` without the blocks an IDE integration adds to a message
    (``IDE_CONTEXT``), trimmed of the space they leave: they are the
    harness's words, not the user's."""
    if "<ide_" not in text:
        return text
    said = untagged(text, IDE_CONTEXT)
    return text if said == text else said.strip()


def fenced(pattern: re.Pattern[str], text: str) -> list[str]:
    """``pattern.findall(text)`` for a pattern that must end with a closing
    fence ``\\n```\\``: no match can end after the text's last fence, so the
    search stops there instead of retrying every unclosed opening fence."""
    return pattern.findall(text, 0, text.rfind("\n```") + 4)
