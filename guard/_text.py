"""Text a message may quote: one line, bounded."""

from __future__ import annotations

import reprlib
from typing import Any

from guard._regex import lazy_compile

__all__ = ["CUT_NOTE", "cut_note", "error_text", "one_line", "shown", "terminal_text"]

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 100
_repr.maxlevel = 3


# Control characters but a tab and a line end (an ESC starts a terminal's escape sequence), shown
# escaped as Python writes them; so are the bidirectional controls, which reorder what follows them
# on screen (a right-to-left override makes "gpj.exe" read "exe.jpg").
_LINE_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0)) if c not in (0x09, 0x0A)}
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_LINE_CONTROLS.update({c: f"\\u{c:04x}" for c in _BIDI})


CUT_NOTE = lazy_compile(r"… \(\+(\d+) more chars\)")
"""What ``cut_note`` writes; group 1 is the number of characters left out."""


def cut_note(hidden: int) -> str:
    """What ends a text cut short: ``… (+N more chars)``, ``N`` = ``hidden``."""
    return f"… (+{hidden} more chars)"


def terminal_text(text: str) -> str:
    """``text`` as a command prints it to a terminal: lines and tabs kept,
    every other control character (an ESC, a carriage return) shown escaped,
    ``\\x1b``, and so every bidirectional control (``\\u202e``), so what a
    transcript, a tool or a model wrote can neither steer the terminal,
    overwrite what was printed before it, nor reorder it on screen."""
    return text.translate(_LINE_CONTROLS)


def one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line (runs of whitespace, newlines among them, become
    one space; other control characters are shown escaped, ``\\x1b``) and
    at most ``limit`` characters, cut with an ellipsis: an error message
    quotes what was wrong without flooding, or steering, the terminal."""
    text = terminal_text(" ".join(text.split()))  # the whitespace controls went with the split
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_text(exc: BaseException, limit: int = 300) -> str:
    """``exc``'s message for an error line (``one_line``), or its type's
    name when it has none."""
    return one_line(str(exc), limit) or type(exc).__name__


def shown(value: Any, limit: int = 120) -> str:
    """``repr(value)`` for an error message: long strings, deep and long
    containers cut short (``'xxx...xxx'``, ``[0, 1, 2, 3, 4, 5, ...]``)
    before they are formatted, so a huge value costs nothing, on one line."""
    return one_line(_repr.repr(value), limit)
