"""Reading transcript files: a bounded sample for format detection, JSON
Lines streamed with bad lines skipped and counted, whole JSON documents."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from bus import AnyEvent
from guard.importers._session import ImportedSession, ImportReport, TranscriptError

__all__ = ["Format", "Sample", "merge_by_time", "read_jsonl", "sample"]

_SAMPLE_LINES = 40
_SAMPLE_BYTES = 1 << 20
_decode = msgspec.json.decode


class Sample:
    """What detection looks at: the first lines of a JSON Lines file decoded
    (``lines``), or the whole file when it is one JSON document
    (``document``; the importer reuses it rather than parsing twice)."""

    def __init__(self, path: Path, lines: list[dict[str, Any]], document: Any = None) -> None:
        self.path = path
        self.lines = lines
        self.document = document


class Format:
    """One transcript format: ``sniff`` returns ``None`` when a sample is this
    format and otherwise why not; ``sessions`` imports the file."""

    def __init__(
        self,
        name: str,
        sniff: Callable[[Sample], str | None],
        sessions: Callable[[Sample], Iterator[ImportedSession]],
    ) -> None:
        self.name = name
        self.sniff = sniff
        self.sessions = sessions


def _open(path: Path) -> Any:
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise TranscriptError(f"no such file: {str(path)!r}") from None
    except IsADirectoryError:
        raise TranscriptError(f"{str(path)!r} is a directory, not a transcript file") from None
    except OSError as exc:
        raise TranscriptError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None


def sample(path: Path) -> Sample:
    """Read enough of ``path`` to tell its format.

    A file whose first line is a JSON object is JSON Lines (a file of one
    such line is also offered as a document); anything else must be a single
    JSON document, parsed whole.
    """
    with _open(path) as file:
        first = file.readline()
        if not first.strip():
            rest = file.read(1)
            if not rest:
                raise TranscriptError(f"{str(path)!r} is empty")
            first = b""
        try:
            head = _decode(first) if first.strip() else None
        except msgspec.DecodeError:
            head = None
        if isinstance(head, dict):
            lines: list[dict[str, Any]] = [head]
            budget = _SAMPLE_BYTES
            more = False
            for line in file:
                more = more or bool(line.strip())
                budget -= len(line)
                if len(lines) >= _SAMPLE_LINES or budget < 0:
                    break
                try:
                    obj = _decode(line)
                except msgspec.DecodeError:
                    continue
                if isinstance(obj, dict):
                    lines.append(obj)
            return Sample(path, lines, None if more else head)
        file.seek(0)
        data = file.read()
    try:
        document = _decode(data)
    except msgspec.DecodeError as exc:
        raise TranscriptError(f"{str(path)!r} is neither JSON Lines nor a JSON document ({exc})") from None
    return Sample(path, [], document)


def read_jsonl(path: Path, report: ImportReport) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON Lines file, one at a time.

    A line that does not decode is skipped and counted: ``torn`` when it is
    the unterminated last line of a file still being written,
    ``invalid-json`` otherwise; a line that is not an object is ``not-an-object``.
    """
    with _open(path) as file:
        for line in file:
            if not line.strip():
                continue
            try:
                obj = _decode(line)
            except msgspec.DecodeError:
                report.skip("invalid-json" if line.endswith(b"\n") else "torn")
                continue
            if isinstance(obj, dict):
                yield obj
            else:
                report.skip("not-an-object")


def merge_by_time(streams: Iterable[Iterator[AnyEvent]]) -> Iterator[AnyEvent]:
    """Interleave several agents' event streams by timestamp.

    Each stream keeps its own order (a stream whose clock goes back is never
    reordered); between streams the earlier event comes first, and on a tie
    the stream listed first.
    """
    return heapq.merge(*streams, key=_ts)


def _ts(event: AnyEvent) -> float:
    return event.ts
