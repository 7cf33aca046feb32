"""This project's own session logs, offered beside the foreign formats so
``audit`` and ``import`` take every log a runtime wrote with ``SessionLog``."""

from __future__ import annotations

from collections.abc import Iterator

from bus import AnyEvent, LogError, LogReader
from guard.importers._session import Builder, ImportedSession, TranscriptError
from guard.importers._source import Format, Sample

__all__ = ["FORMAT"]

NAME = "session-log"


def _sniff(sample: Sample) -> str | None:
    if sample.lines and sample.lines[0].get("type") == "session/start" and "v" in sample.lines[0]:
        return None
    return "line 1 is not a session/start header"


def _sessions(sample: Sample) -> Iterator[ImportedSession]:
    try:
        session = LogReader(sample.path)
    except LogError as exc:
        raise TranscriptError(str(exc)) from None
    name = session.report.session or sample.path.stem
    session.close()

    def produce(b: Builder) -> Iterator[AnyEvent]:
        report, name = b.report, str(sample.path)
        with LogReader(sample.path) as reader:
            lines, events = reader.report, iter(reader)
            while True:
                report._at = None  # reading fails outside any record: the session ends there, once
                event = next(events, None)
                if event is None:
                    break
                # each line a record, so its events are handed on as read, not held to the end
                report._at = (name, lines.lines)
                yield event
            for reason, count in reader.report.skipped_by_reason.items():
                for _ in range(count):
                    b.report.skip(reason)

    yield ImportedSession(format=NAME, session=name, path=sample.path, label=str(sample.path), produce=produce)


FORMAT = Format(NAME, _sniff, _sessions)
