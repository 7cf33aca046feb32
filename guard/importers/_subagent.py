"""What Claude Code and gemini-cli share: a session's subagents kept in files
of their own, any of which may be missing or unreadable."""

from __future__ import annotations

from collections.abc import Iterator

from bus import AnyEvent
from guard._text import one_line
from guard.importers._session import ImportReport, TranscriptError

__all__ = ["subagent_events"]


def subagent_events(events: Iterator[AnyEvent], report: ImportReport) -> Iterator[AnyEvent]:
    """``events``, the events of one subagent's transcript file. A file
    that cannot be opened (gone since the folder was listed, a dangling
    link, a FIFO, a directory) costs that subagent, not the session: it is
    counted as ``unreadable-subagent`` and named in ``report.problems``
    (once, however often the import runs again)."""
    try:
        yield from events
    except TranscriptError as exc:
        report.skip("unreadable-subagent")
        problem = f"subagent not read: {one_line(str(exc), 1000)}"
        if problem not in report.problems:
            report._problem(problem)
