"""Telling a transcript's format, and opening it as sessions."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from guard._text import one_line
from guard.importers import (
    claude_code,
    cline,
    codex,
    gemini_cli,
    goose,
    mini_swe_agent,
    opencode,
    openhands,
    pi,
    session_log,
    swe_agent,
)
from guard.importers._session import ImportedSession, TranscriptError, UnknownFormatError
from guard.importers._source import Format, Sample, sample

__all__ = ["FORMATS", "belongs_to_session", "detect_format", "open_sessions"]

FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        claude_code.FORMAT,
        codex.FORMAT,
        gemini_cli.FORMAT,
        openhands.FORMAT,
        swe_agent.FORMAT,
        cline.FORMAT,
        goose.FORMAT,
        mini_swe_agent.FORMAT,
        opencode.FORMAT,
        pi.FORMAT,
        session_log.FORMAT,
    )
}
"""Every format, by the name ``--from`` takes, in the order detection tries them."""


def detect_format(path: str | os.PathLike[str]) -> str:
    """The name of the format of the file at ``path``.

    Raises ``UnknownFormatError`` listing each format tried and why it did
    not match, or ``TranscriptError`` for a file that cannot be read.
    """
    return _detect(Path(path))[0].name


def _detect(path: Path) -> tuple[Format, Sample]:
    seen = sample(path)
    tried: list[tuple[str, str]] = []
    for fmt in FORMATS.values():
        why = _sniff(fmt, seen)
        if why is None:
            return fmt, seen
        tried.append((fmt.name, why))
    raise UnknownFormatError(path, tried)


def _sniff(fmt: Format, seen: Sample) -> str | None:
    """``fmt.sniff``, where a sample whose fields have types the format never
    writes is simply not that format."""
    try:
        return fmt.sniff(seen)
    except Exception as exc:
        return f"fields of unexpected types ({type(exc).__name__}: {one_line(str(exc), 80)})"


def _guarded(fmt: Format, seen: Sample) -> Iterator[ImportedSession]:
    """``fmt.sessions``, raising nothing but ``TranscriptError``: a session's
    events guard themselves (``ImportedSession.events``); this covers
    reading the sessions' headers."""
    try:
        for session in fmt.sessions(seen):
            seen.bind(session.report)
            yield session
    except TranscriptError:
        raise
    except Exception as exc:
        raise TranscriptError(
            f"{str(seen.path)!r} cannot be imported as {fmt.name}: {type(exc).__name__}: {one_line(str(exc))}"
        ) from None


def open_sessions(path: str | os.PathLike[str], format: str | None = None) -> Iterator[ImportedSession]:
    """The sessions in the transcript at ``path``, lazily.

    ``format`` forces a format by name (see ``FORMATS``); otherwise it is
    detected. Each session's events are read only when iterated.
    """
    file = Path(path)
    if format is None:
        fmt, seen = _detect(file)
        return _guarded(fmt, seen)
    forced = FORMATS.get(format)
    if forced is None:
        raise TranscriptError(f"unknown format {format!r} (known: {', '.join(FORMATS)})")
    seen = sample(file)
    why = _sniff(forced, seen)
    if why is not None:
        raise TranscriptError(f"{str(file)!r} is not {forced.name}: {why}")
    return _guarded(forced, seen)


def belongs_to_session(path: str | os.PathLike[str], siblings: Sequence[str] | None = None) -> bool:
    """Whether ``path`` is imported with another file, so a directory walk
    leaves it to that file's import: a subagent's transcript whose session
    file is present, or a later event file of an OpenHands V1 conversation.
    A walk passes ``siblings``, the sorted names of the files in ``path``'s
    folder, so a conversation whose first events are gone is imported from
    the earliest one left."""
    file = Path(path)
    return (
        claude_code.belongs_to_session(file)
        or gemini_cli.belongs_to_session(file)
        or openhands.belongs_to_session(file, siblings)
        or opencode.belongs_to_session(file)
        or cline.belongs_to_session(file)
    )
