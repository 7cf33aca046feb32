"""The session log reader: streams events, skips and counts bad lines."""

from __future__ import annotations

import codecs
import io
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal

import msgspec

from bus._codec import MAX_NESTING, block_lines, event_decoder, header_decoder, mistyped_event, too_deep
from bus.agent import Agent
from bus.events import AgentStatus, AnyEvent, SessionStart
from bus.files import NotRegularFileError, read_regular
from bus.log import LOG_VERSION

__all__ = ["LogError", "LogReader", "ReadReport", "SkippedLine", "read_log"]

SkipReason = Literal["torn", "invalid-json", "unknown-type", "schema", "too-deep"]

_MAX_SAMPLES = 100

_BLOCK = 1 << 16
"""How much of the log is decoded in one call (then up to the end of its last line)."""


class LogError(Exception):
    """The file cannot be read as a session log at all (missing, not a
    regular file, no header, unknown version). Bad lines inside a log never
    raise; they are skipped."""


class SkippedLine(msgspec.Struct, frozen=True):
    """One line the reader could not use, and why."""

    line: int
    reason: SkipReason
    detail: str


class ReadReport:
    """What a read saw: counts of lines, events and skipped lines by reason.

    ``samples`` keeps the first hundred skipped lines with their line numbers;
    the counts cover all of them, so memory stays constant on a garbage file.
    ``mistyped`` counts the events read from lines whose fields had the
    wrong JSON type (``bus._codec.mistyped_event``): they are events, not
    skipped lines. ``missing`` counts the events whose line is not there at
    all: numbers ``seq`` skips, beyond the lines skipped in between (a
    write that failed, a stream trimmed at its start). A ``seq`` back at or
    below the one before begins a new run of the log, and misses nothing.
    """

    def __init__(self) -> None:
        self.session = ""
        self.lines = 0
        self.events = 0
        self.mistyped = 0
        self.missing = 0
        self._skipped_at = 0
        self.skipped_by_reason: Counter[str] = Counter()
        self.samples: list[SkippedLine] = []

    @property
    def skipped(self) -> int:
        return sum(self.skipped_by_reason.values())

    def _skip(self, line: int, reason: SkipReason, detail: str) -> None:
        self.skipped_by_reason[reason] += 1
        if len(self.samples) < _MAX_SAMPLES:
            self.samples.append(SkippedLine(line, reason, detail))

    def _refused(
        self, line: int, data: bytes, decoder: msgspec.json.Decoder[Any], error: msgspec.ValidationError
    ) -> AnyEvent | None:
        """What a line ``decoder`` refused for its schema becomes: the event
        its mistyped fields give (``mistyped_event``), counted, or a skip."""
        if "`$.type`" in str(error):
            self._skip(line, "unknown-type", str(error))
            return None
        event = mistyped_event(data, decoder)
        if event is None:
            self._skip(line, "schema", str(error))
        else:
            self.mistyped += 1
        return event

    def _gap(self, last: int, seq: int) -> None:
        """An event numbered ``seq`` follows one numbered ``last``, not
        ``last + 1``."""
        if seq > last + 1:
            skipped = self.skipped
            self.missing += max(0, seq - last - 1 - (skipped - self._skipped_at))
            self._skipped_at = skipped

    def summary(self) -> str:
        """One line for humans, e.g. ``120 events, 2 lines skipped (torn 1, schema 1)``."""
        text = f"{self.events} events, {self.skipped} lines skipped"
        if self.skipped:
            text += " (" + ", ".join(f"{r} {n}" for r, n in sorted(self.skipped_by_reason.items())) + ")"
        if self.mistyped:
            text += f"; {self.mistyped} read with fields of the wrong type"
        if self.missing:
            text += f"; {self.missing} missing (numbers their seq skips)"
        return text


class LogReader:
    """Iterates the events of one session log with constant memory.

    Events carry ``Agent`` handles, one per agent id, kept in ``agents``; a
    subagent's handle gets its ``parent_id`` from its ``started`` status.
    Opening raises ``LogError`` for a missing file, one that is not a regular
    file (a directory, a FIFO, a device) or a bad header; a UTF-8 byte order
    mark before the header is allowed. Iterating never raises for a bad line,
    it records it in ``report``: a line nested deeper than ``MAX_NESTING``
    levels is ``too-deep``.

    The file stays open from construction until iteration ends; a reader
    that is not iterated to the end should be closed, with ``close()`` or by
    using it as a context manager. A reader streams its file once.

    ``containing``, when given, limits the reader to the lines that hold
    those bytes: the others are passed over undecoded (neither events nor
    skipped lines; they still count in ``report.lines``). A reader that
    wants only the events naming something (a policy's own denials, say)
    reads a log at the speed of a byte search.
    """

    def __init__(self, path: str | os.PathLike[str], *, containing: bytes | None = None) -> None:
        self.path = Path(path)
        self._containing = containing
        self.report = ReadReport()
        self.agents: dict[str, Agent] = {}
        self._decoder = event_decoder(self.agents)
        try:
            self._file: IO[bytes] = read_regular(self.path, what="session log")
        except FileNotFoundError:
            raise LogError(f"no session log at {str(self.path)!r}") from None
        except NotRegularFileError as exc:
            raise LogError(str(exc)) from None
        except OSError as exc:
            raise LogError(f"cannot read session log {str(self.path)!r}: {exc.strerror or exc}") from None
        try:
            first = self._file.readline().removeprefix(codecs.BOM_UTF8)
        except OSError as exc:  # opened, but not readable (a directory's file system, /proc/self/mem)
            self._file.close()
            raise LogError(f"cannot read session log {str(self.path)!r}: {exc.strerror or exc}") from None
        self.report.lines = 1
        try:
            if too_deep(first):
                raise msgspec.DecodeError(f"nested deeper than {MAX_NESTING} levels")
            header = header_decoder.decode(first)
        except msgspec.DecodeError as exc:
            self._file.close()
            raise LogError(
                f"{str(self.path)!r} is not a session log: line 1 is not a session/start header ({exc})"
            ) from None
        if header.v != LOG_VERSION:
            self._file.close()
            raise LogError(
                f"{str(self.path)!r} has session log version {header.v}; this reader knows version {LOG_VERSION}"
            )
        self.report.session = header.session

    def close(self) -> None:
        """Release the file; iterating afterwards is a ``ValueError``. Idempotent."""
        self._file.close()

    def __enter__(self) -> LogReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[AnyEvent]:
        if self._file.closed:
            raise ValueError(f"the reader of {str(self.path)!r} is closed; a LogReader streams its file once")
        return self._events()

    def _events(self) -> Iterator[AnyEvent]:
        report = self.report
        number = report.lines
        containing = self._containing
        counting = containing is None  # a reader of some lines sees gaps that miss nothing
        last = 0
        with self._file as file:
            while block := file.read(_BLOCK):
                if block[-1] != 10:  # b"\n": end the block with its last line, read whole
                    block += file.readline()
                lines: Iterator[AnyEvent | SessionStart | None]
                if containing is not None:
                    if containing not in block:
                        number += block.count(b"\n") + (block[-1] != 10)
                        report.lines = number
                        continue
                    lines = (self._line(line) if containing in line else None for line in io.BytesIO(block))
                elif (events := self._decode_block(block)) is not None:
                    lines = iter(events)
                else:
                    lines = map(self._line, io.BytesIO(block))
                for event in lines:
                    number += 1
                    report.lines = number
                    kind = type(event)
                    if kind is SessionStart or event is None:
                        continue  # a skipped line, or an appended session's header: a resume marker
                    if kind is AgentStatus and event.parent is not None and event.agent is not None:  # type: ignore[union-attr]
                        event.agent.parent_id = event.agent.parent_id or event.parent  # type: ignore[union-attr]
                    report.events += 1
                    seq = event.seq  # type: ignore[union-attr]
                    if seq == last + 1:
                        last = seq
                    elif seq > 0:  # 0 (or below, which no writer numbers): a line without a seq
                        if counting:
                            report._gap(last, seq)
                        last = seq
                    yield event  # type: ignore[misc]  # a SessionStart and None went on above

    def _decode_block(self, block: bytes) -> list[AnyEvent | SessionStart] | None:
        """The events of ``block``'s lines decoded in one call, or ``None``
        when some line needs ``_line``: one that is torn, bad, blank, holds
        two values or a value that goes on over the next line, or nests too
        deeply. Each of those is told before anything is decoded (so a
        too-deep line makes no agent handle, as in ``_line``) or by the
        decoder failing, or by the count of values differing from the count
        of lines."""
        lines = block_lines(block)
        if lines is None:
            return None
        try:
            events = self._decoder.decode_lines(block)
        except msgspec.DecodeError:
            return None
        return events if len(events) == lines else None

    def _line(self, line: bytes) -> AnyEvent | SessionStart | None:
        """One line decoded alone, or ``None`` with the reason recorded."""
        report = self.report
        number = report.lines + 1
        if too_deep(line):
            report._skip(number, "too-deep", f"nested deeper than {MAX_NESTING} levels")
            return None
        try:
            return self._decoder.decode(line)
        except msgspec.ValidationError as exc:
            return report._refused(number, line, self._decoder, exc)
        except msgspec.DecodeError as exc:
            torn = not line.endswith(b"\n")
            report._skip(number, "torn" if torn else "invalid-json", str(exc))
        return None


def read_log(path: str | os.PathLike[str]) -> LogReader:
    """Open a session log for streaming; see ``LogReader``."""
    return LogReader(path)
