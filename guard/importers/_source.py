"""Reading transcript files: a bounded sample for format detection, JSON
Lines streamed with bad lines skipped and counted, whole JSON documents."""

from __future__ import annotations

import codecs
import heapq
import io
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from bus import MAX_NESTING, AnyEvent, NotRegularFileError, block_lines, read_regular, too_deep
from bus._codec import lenient_json
from guard.importers._session import ImportedSession, ImportReport, TranscriptError

__all__ = [
    "Format",
    "Sample",
    "first_object",
    "merge_by_time",
    "read_document",
    "read_documents",
    "read_jsonl",
    "sample",
]

_SAMPLE_LINES = 40
_SAMPLE_BYTES = 1 << 20
_SQLITE = b"SQLite format 3\x00"


def _decode(data: bytes) -> Any:
    """A JSON value; escaped lone surrogates (a JavaScript tool's string cut
    mid-character) are read as the session log writes them
    (``lenient_json``), not refused. ``msgspec.DecodeError`` for no JSON."""
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError:
        value = lenient_json(data)
        if value is None:
            raise
        return value


class Records(list[Any]):
    """A list of a JSON document (the document itself, or a list directly
    under its top level: ``messages``, ``history``) whose items are records
    like the lines of a JSON Lines file: iterating it marks the item being
    imported in the bound report, and passes over the items a re-run was
    told to (see ``ImportedSession.events``) and the ones that hold no
    record (``null``, a number, a string), counting those as
    ``not-an-object``, as a JSON Lines reader counts such a line. Unbound, it
    is a plain list."""

    def __init__(self, items: list[Any], name: str) -> None:
        super().__init__(items)
        self.name = name
        self.report: ImportReport | None = None

    def __iter__(self) -> Iterator[Any]:
        report = self.report
        if report is None:
            yield from super().__iter__()
            return
        for index, item in enumerate(super().__iter__()):
            key = (self.name, index)
            if key in report._passed:
                continue
            report._at = key
            if item is None or isinstance(item, (str, int, float)):
                report.skip("not-an-object")
                continue
            yield item


def _records(document: Any, path: Path) -> Any:
    """``document`` with its top-level lists as ``Records``."""
    if isinstance(document, list):
        return Records(document, f"{path}#")
    if isinstance(document, dict):
        for key, value in document.items():
            if isinstance(value, list):
                document[key] = Records(value, f"{path}#{key}")
    return document


class Sample:
    """What detection looks at: the first lines of a JSON Lines file decoded
    (``lines``), or the whole file when it is one JSON document
    (``document``; the importer reuses it rather than parsing twice).
    ``sqlite`` marks an SQLite database, which holds no JSON to sample: a
    format that keeps its sessions in one reads it itself."""

    def __init__(self, path: Path, lines: list[dict[str, Any]], document: Any = None, *, sqlite: bool = False) -> None:
        self.path = path
        self.lines = lines
        self.document = _records(document, path)
        self.sqlite = sqlite

    def bind(self, report: ImportReport) -> None:
        """Let ``report`` follow the document's records (``Records``)."""
        document = self.document
        lists = document.values() if isinstance(document, dict) else (document,)
        for value in lists:
            if isinstance(value, Records):
                value.report = report


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
        return read_regular(path, what="transcript")
    except FileNotFoundError:
        raise TranscriptError(f"no such file: {str(path)!r}") from None
    except NotRegularFileError as exc:
        raise TranscriptError(str(exc)) from None
    except OSError as exc:
        raise TranscriptError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None


def _line(data: bytes) -> Any:
    """One JSON value, or ``None`` when ``data`` is not one (or nests deeper
    than ``MAX_NESTING``, which the decoder would not survive)."""
    if too_deep(data):
        return None
    try:
        return _decode(data)
    except msgspec.DecodeError:
        return None


def _more(lines: Iterable[bytes], head: list[dict[str, Any]]) -> bool:
    """Add the JSON objects among ``lines`` to ``head``, up to the sample's
    bounds; whether any of them was not blank."""
    budget = _SAMPLE_BYTES
    more = False
    for line in lines:
        more = more or bool(line.strip())
        budget -= len(line)
        if len(head) >= _SAMPLE_LINES or budget < 0:
            break
        obj = _line(line)
        if isinstance(obj, dict):
            head.append(obj)
    return more


def sample(path: Path) -> Sample:
    """Read enough of ``path`` to tell its format.

    A file whose first line is a JSON object is JSON Lines (a file of one
    such line is also offered as a document). Otherwise it is a single JSON
    document, parsed whole; if it is not one either, but some of its first
    lines are JSON objects, it is JSON Lines with a damaged first line (the
    import skips and counts that line). A UTF-8 byte order mark is ignored.
    """
    with _open(path) as file:
        first = file.readline().removeprefix(codecs.BOM_UTF8)
        if first.startswith(_SQLITE):
            return Sample(path, [], sqlite=True)
        if not first.strip():
            rest = file.read(1)
            if not rest:
                raise TranscriptError(f"{str(path)!r} is empty")
            first = b""
        head = _line(first) if first.strip() else None
        if isinstance(head, dict):
            lines: list[dict[str, Any]] = [head]
            more = _more(file, lines)
            return Sample(path, lines, None if more else head)
        file.seek(0)
        data = file.read().removeprefix(codecs.BOM_UTF8)
    try:
        if too_deep(data):
            raise TranscriptError(f"{str(path)!r} nests arrays or objects deeper than {MAX_NESTING} levels")
        return Sample(path, [], _decode(data))
    except (msgspec.DecodeError, TranscriptError) as exc:
        lines = []
        rest = io.BytesIO(data)
        rest.readline()
        _more(rest, lines)
        if lines:
            return Sample(path, lines)
        if isinstance(exc, TranscriptError):
            raise
        raise TranscriptError(f"{str(path)!r} is neither JSON Lines nor a JSON document ({exc})") from None


def read_jsonl(path: Path, report: ImportReport) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON Lines file, one at a time.

    A line that does not decode is skipped and counted: ``torn`` when it is
    the unterminated last line of a file still being written,
    ``invalid-json`` otherwise; a line nested deeper than ``MAX_NESTING``
    levels is ``too-deep``; a line that is not an object is ``not-an-object``.
    Each object is a record ``ImportedSession.events`` can pass over when
    the importer fails on it. Blocks of lines are decoded in one call where
    that stands for decoding each line alone (``bus.block_lines``).
    """
    name = str(path)
    passed = report._passed
    number = 0
    with _open(path) as file:
        first = file.readline()
        while block := first or file.read(_BLOCK):
            if first:
                block, first = first.removeprefix(codecs.BOM_UTF8), b""
            elif not block.endswith(b"\n"):
                block += file.readline()
            objects = None if passed else _objects(block)
            if objects is not None:
                for obj in objects:
                    number += 1
                    report._at = (name, number)
                    yield obj
                continue
            for line in io.BytesIO(block):
                number += 1
                if line.isspace() or not line or (passed and (name, number) in passed):  # blank: as strip() tells
                    continue
                if too_deep(line):
                    report.skip("too-deep")
                    continue
                try:
                    obj = _decode(line)
                except msgspec.DecodeError:
                    report.skip("invalid-json" if line.endswith(b"\n") else "torn")
                    continue
                if isinstance(obj, dict):
                    report._at = (name, number)
                    yield obj
                else:
                    report.skip("not-an-object")


_BLOCK = 1 << 16
_lines_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()


def _objects(block: bytes) -> list[dict[str, Any]] | None:
    """The objects of ``block``'s lines, one a line, decoded in one call; or
    ``None`` when its lines must be read one by one."""
    lines = block_lines(block)
    if lines is None:
        return None
    try:
        objects = _lines_decoder.decode_lines(block)
    except msgspec.DecodeError:
        return None
    if len(objects) != lines or not all(type(obj) is dict for obj in objects):
        return None
    return objects


def first_object(path: Path) -> dict[str, Any]:
    """The JSON object on the first line of ``path``, or ``{}`` when there is
    none (unreadable, not a regular file, not an object): a peek that never
    raises and never blocks."""
    try:
        with _open(path) as file:
            obj = _line(file.readline().removeprefix(codecs.BOM_UTF8))
    except TranscriptError:
        return {}
    return obj if isinstance(obj, dict) else {}


def read_document(path: Path) -> Any:
    """The JSON document in ``path``; ``TranscriptError`` when it cannot be
    read, is not JSON, or nests deeper than ``MAX_NESTING`` levels."""
    with _open(path) as file:
        data = file.read().removeprefix(codecs.BOM_UTF8)
    obj = _line(data)
    if obj is None and data.strip() != b"null":
        raise TranscriptError(f"{str(path)!r} is not a JSON document (or nests deeper than {MAX_NESTING} levels)")
    return obj


def read_documents(paths: Iterable[Path], report: ImportReport) -> Iterator[Any]:
    """The JSON documents of ``paths`` (a format that writes one event per
    file), each a record like a JSON Lines line; one that ``read_document``
    refuses is skipped and counted as ``invalid-json``."""
    for path in paths:
        key = (str(path), 1)
        if key in report._passed:
            continue
        try:
            document = read_document(path)
        except TranscriptError:
            report.skip("invalid-json")
            continue
        report._at = key
        yield document


def merge_by_time(streams: Iterable[Iterator[AnyEvent]]) -> Iterator[AnyEvent]:
    """Interleave several agents' event streams by timestamp.

    Each stream keeps its own order (a stream whose clock goes back is never
    reordered); between streams the earlier event comes first, and on a tie
    the stream listed first.
    """
    streams = list(streams)
    if len(streams) == 1:
        return streams[0]
    return heapq.merge(*streams, key=_ts)


def _ts(event: AnyEvent) -> float:
    return event.ts
