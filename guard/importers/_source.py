"""Reading transcript files: a bounded sample for format detection, JSON
Lines streamed with bad lines skipped and counted, whole JSON documents."""

from __future__ import annotations

import codecs
import heapq
import io
import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import msgspec

from bus import MAX_NESTING, AnyEvent, NotRegularFileError, block_lines, read_regular, too_deep
from bus._codec import as_logged, lenient_json
from guard.importers._session import EmptyTranscriptError, ImportedSession, ImportReport, TranscriptError

__all__ = [
    "Format",
    "Sample",
    "first_object",
    "is_pair",
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


def _document(data: bytes) -> Any:
    """A whole JSON document, read as ``_decode`` reads a line, except that
    ``NaN``, ``Infinity`` and ``-Infinity`` are ``null``: Python's
    ``json.dump``, which writes the trajectories of several agents, writes
    them for such floats (a cost that came out NaN), and an importer reads
    strings and structure, never them. ``msgspec.DecodeError`` naming the
    line and column where it is no JSON."""
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError:
        pass
    try:
        text = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise msgspec.DecodeError(f"not UTF-8: line {line} column {column}") from None
    try:
        return as_logged(json.loads(text, parse_constant=_null))
    except json.JSONDecodeError as exc:
        raise msgspec.DecodeError(str(exc)) from None


def _null(constant: str) -> None:
    return None


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
        return self.since(0)

    def since(self, start: int) -> Iterator[Any]:
        """The items from the ``start``-th on, given as iterating gives
        them: the items before it, which a format read in another pass, are
        neither marked nor counted again."""
        items = itertools.islice(super().__iter__(), start, None)
        report = self.report
        if report is None:
            yield from items
            return
        for index, item in enumerate(items, start):
            key = (self.name, index)
            if key in report._passed:
                continue
            report._at = key
            if not isinstance(item, dict) and not is_pair(item):
                report.skip("not-an-object")
                continue
            yield item


def is_pair(value: Any) -> bool:
    """Whether ``value`` is an ``[action, observation]`` pair, as older
    OpenHands evaluation output (2024) records its history: the one list a
    document's records may be."""
    return (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], dict)
        and "action" in value[0]
        and isinstance(value[1], dict)
        and "observation" in value[1]
    )


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


def _open(path: Path) -> IO[bytes]:
    """``path`` opened for reading, as UTF-8: a file that opens with a
    UTF-16 or UTF-32 byte order mark (Windows PowerShell's ``>`` writes
    UTF-16) is read through ``_Transcoded``."""
    try:
        file = read_regular(path, what="transcript")
    except FileNotFoundError:
        raise TranscriptError(f"no such file: {str(path)!r}") from None
    except NotRegularFileError as exc:
        raise TranscriptError(str(exc)) from None
    except OSError as exc:
        raise TranscriptError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    try:
        head = file.read(4)
        file.seek(0)
    except BaseException:
        file.close()
        raise
    encoding = next((name for mark, name in _WIDE_MARKS if head.startswith(mark)), None)
    return file if encoding is None else io.BufferedReader(_Transcoded(file, encoding))


# UTF-32's marks first: UTF-32LE's begins with UTF-16LE's (no JSON text begins with a NUL)
_WIDE_MARKS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


class _Transcoded(io.RawIOBase):
    """A UTF-16 or UTF-32 file (``encoding`` names which, its byte order
    mark which order) read as UTF-8, a block at a time, so it streams as any
    transcript does. Bytes that are no character (a lone surrogate, a file
    cut within a character) are read as U+FFFD, as text: a line holding
    them outside a string fails to decode and is counted, as a damaged
    line of a UTF-8 file is."""

    def __init__(self, file: IO[bytes], encoding: str) -> None:
        super().__init__()
        self._file = file
        self._decoder = codecs.getincrementaldecoder(encoding)("replace")
        self._ready = b""  # transcoded, from _taken on not read yet
        self._taken = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._taken == len(self._ready):
            block = self._file.read(_BLOCK)
            self._ready, self._taken = self._decoder.decode(block, final=not block).encode(), 0
            if not block:
                break
        size = min(len(buffer), len(self._ready) - self._taken)
        buffer[:size] = self._ready[self._taken : self._taken + size]
        self._taken += size
        return size

    def fileno(self) -> int:
        return self._file.fileno()

    def close(self) -> None:
        self._file.close()
        super().close()


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
    such line is also offered as a document). Otherwise (a first line that
    is damaged, blank or no object) the next lines tell, within the
    sample's bounds. When one of them is an object with members (a line no
    pretty-printer writes), the file is JSON Lines with a damaged first
    line (the import skips and counts that line), never read whole here;
    unless the whole file fits in those bounds, and parses as one JSON
    document. Otherwise it is a single JSON document, parsed whole, or,
    when it is none, JSON Lines if some of those lines are objects; a first
    line of text before a JSON document (a CLI's banner) is passed over. A
    UTF-8 byte order mark is ignored.
    """
    with _open(path) as file:
        first = file.readline().removeprefix(codecs.BOM_UTF8)
        if first.startswith(_SQLITE):
            return Sample(path, [], sqlite=True)
        head = _line(first) if first.strip() else None
        lines: list[dict[str, Any]] = []
        if isinstance(head, dict):
            lines.append(head)
            more = _more(file, lines)
            return Sample(path, lines, None if more else head)
        second = file.readline()
        if not (first.strip() or second):
            raise EmptyTranscriptError(f"{str(path)!r} is empty")
        _more(itertools.chain([second], file), lines)
        if any(lines) and os.fstat(file.fileno()).st_size > _SAMPLE_BYTES:
            return Sample(path, lines)
    data = _whole(path)
    try:
        if too_deep(data):
            raise TranscriptError(f"{str(path)!r} nests arrays or objects deeper than {MAX_NESTING} levels")
        return Sample(path, [], _document(data))
    except (msgspec.DecodeError, TranscriptError) as exc:
        banner = _after_banner(data)
        if lines or banner is not None:
            return Sample(path, lines, banner)
        if isinstance(exc, TranscriptError):
            raise
        raise TranscriptError(f"{str(path)!r} is neither JSON Lines nor a JSON document ({exc})") from None


def _after_banner(data: bytes) -> Any:
    """The JSON document after a first line of text, as a CLI's export
    prints one before it into the same output (``opencode export``:
    ``Exporting session: ses_...``); ``None`` when there is none."""
    first, _, rest = data.partition(b"\n")
    if not first.strip() or first.lstrip()[:1] in (b"{", b"[") or rest.lstrip()[:1] not in (b"{", b"["):
        return None
    if too_deep(rest):
        return None
    try:
        return _document(rest)
    except msgspec.DecodeError:
        return None


def _whole(path: Path) -> bytes:
    with _open(path) as file:
        return file.read().removeprefix(codecs.BOM_UTF8)


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
            obj = _line(file.readline(_SAMPLE_BYTES).removeprefix(codecs.BOM_UTF8))
    except TranscriptError:
        return {}
    return obj if isinstance(obj, dict) else {}


def read_document(path: Path) -> Any:
    """The JSON document in ``path`` (read as ``_document`` reads one);
    ``TranscriptError`` when it cannot be read, is not JSON, or nests deeper
    than ``MAX_NESTING`` levels."""
    data = _whole(path)
    if too_deep(data):
        raise TranscriptError(f"{str(path)!r} nests arrays or objects deeper than {MAX_NESTING} levels")
    try:
        return _document(data)
    except msgspec.DecodeError as exc:
        raise TranscriptError(f"{str(path)!r} is not a JSON document ({exc})") from None


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
