"""Whether a repeated call's result brought news.

A call repeated after a policy stepped in is wasted only when it learned
nothing: its result is the one the call returned before. Results are
compared as ``loops`` compares them, normalised (``ResultNormalizer``), so a
new timestamp or duration is no news while ``1 failed`` after ``2 failed``
is. ``audit`` and the live page count waste by this one rule.
"""

from __future__ import annotations

from collections.abc import Iterable

from guard.normalize import DEFAULT_RESULT_NORMALIZE, ResultNormalizer

__all__ = ["LastResult", "News"]

_DIGESTS_KEPT = 1024
"""Short outputs whose normalised digest is remembered."""
_DIGESTED_CHARS = 16_384
"""Outputs at most this long are remembered; a longer one is digested each time."""


class LastResult:
    """The previous result of one signature, as ``News`` compares it."""

    __slots__ = ("digest", "raw")

    def __init__(self) -> None:
        self.raw: int | None = None
        self.digest: bytes | None = None


class News:
    """Tells whether a result differs from its signature's previous one.

    A signature's first result is kept only as a hash of its text: most
    calls are never repeated, and normalising costs more than hashing. So a
    second result is compared with the first exactly, and from the second
    on results are compared normalised, the digests of recent short outputs
    remembered (a loop returns the same text again and again).
    """

    def __init__(self, patterns: Iterable[str] = DEFAULT_RESULT_NORMALIZE) -> None:
        self._normalizer = ResultNormalizer(patterns)
        self._digests: dict[str, bytes] = {}

    def brought(self, last: LastResult, content: str, repeated: bool) -> bool:
        """Whether ``content`` differs from ``last`` (which it then replaces);
        ``repeated`` says the signature was called before. A first result
        brings none: there is nothing it could differ from."""
        raw = hash(content)
        previous_raw, previous_digest = last.raw, last.digest
        digest = self._digest(content) if repeated else None
        last.raw, last.digest = raw, digest
        if previous_raw is None or raw == previous_raw:
            return False
        return previous_digest is None or digest != previous_digest

    def _digest(self, content: str) -> bytes:
        digests = self._digests
        found = digests.get(content)
        if found is None:
            found = self._normalizer.digest(content)
            if len(content) <= _DIGESTED_CHARS:
                if len(digests) >= _DIGESTS_KEPT:
                    digests.clear()
                digests[content] = found
        return found
