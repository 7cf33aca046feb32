"""Text a message may quote: one line, bounded."""

from __future__ import annotations

__all__ = ["one_line"]


def one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line (runs of whitespace, newlines among them, become
    one space) and at most ``limit`` characters, cut with an ellipsis: an
    error message quotes what was wrong without flooding the terminal."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
