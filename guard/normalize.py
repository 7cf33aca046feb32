"""Result normalisation: what a tool result says once the noise is gone.

Two results of the same call are "the same result" when their normalised
texts are equal. Normalisation strips what changes between runs without
meaning anything: ANSI escape codes, text a carriage return overwrote
(spinners, progress bars redrawn in place), timestamps, dates and clock
times, durations, process, session and output chunk ids, hex digests and UUIDs, and
trailing whitespace. A short one-line result that is a time or a date and
nothing else (``date``, ``date +%s``, ``stat -c %y``) is a *reading*
(``is_reading``): of a clock, which moves by itself. The patterns are
settings (``result_normalize``), so a runtime's own noise can be added; each
match is replaced by one marker, so ``12 ms`` and ``3.4 s`` normalise alike
while ``3 failed`` and ``2 failed`` do not.

An error's *kind* (``error_kind``) goes further: the first meaningful line of
the error text with paths, quoted strings and numbers stripped, so the same
failure with different arguments has one kind.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import msgspec

from guard._regex import lazy_compile
from guard.fingerprint import blake2b  # without hashlib's OpenSSL import, as fingerprints are made
from guard.patterns import Substitutions, compile_regex

__all__ = ["DEFAULT_RESULT_NORMALIZE", "ResultNormalizer", "Shape", "error_head", "error_kind"]

DEFAULT_RESULT_NORMALIZE: tuple[str, ...] = (
    # ISO 8601 dates and timestamps, with optional time, fraction and zone (`stat` puts a space before it)
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:Z| ?[+-]\d{2}:?\d{2})?)?",
    # clock times (00:11:10, 9:05 PM)
    r"\b\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:\s?[AaPp][Mm])?\b",
    # day and month names as `date`, `ls -l` and HTTP headers print them
    r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?\s",
    r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+\d{1,2}\b",
    # the year `date` prints after the time (with or without a zone)
    r"\x00\s+(?:[A-Z]{2,5}\s+)?(?:19|20)\d{2}\b",
    # Unix epoch seconds or milliseconds
    r"\b1[6-9]\d{8}(?:\d{3})?(?:\.\d+)?\b",
    # durations in several units as Go and kubectl print them: 2m5s, 1h2m3s, 3d4h, 1m23.456s (not the end of
    # a name, api-7d9f8b6c5d-24m5s)
    r"(?:^|[\s(\[{:=,;\"'])\d+(?:\.\d+)?(?:d|h|m|s|ms|us|µs|ns)(?:\d+(?:\.\d+)?(?:h|m|s|ms|us|µs|ns))+\b",
    # durations: 12ms, 3.4 s, 5 seconds, took 1.2s
    r"\b\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hr|hrs|hours?)\b",
    # durations as a bare number under a key that says so ("duration_seconds": 0.83, elapsed_ms=12, "took": 35)
    r"(?i)\b(?:[a-z_]*(?:duration|elapsed|latency|runtime|exec(?:ution)?_?time|wall_?time|time_?taken)"
    r"(?:_?(?:s|ms|us|ns|sec|secs|seconds|millis|milliseconds))?|took)"
    r"[\"']?[ \t]*[:=][ \t]*[\"']?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?",
    # where a runtime saved an output too large to show (Gemini CLI: "Full output available at: <path>")
    r"(?i)\b(?:full )?output (?:is )?(?:available|saved|written|stored) (?:at|to|in):?[ \t]*\S+",
    # ... and the path as Claude Code's hooks are told it
    r"(?i)\"persisted_?output_?path\"[ \t]*:[ \t]*\"[^\"\n]*\"",
    # process, process group, session and job ids (Gemini CLI: "Process Group PGID: 4242")
    r"(?i)\b(?:pid|pgid|process(?: group)?(?: pgid| id)?|session(?: id)?|session_id|job(?: id)?)\b[\s:=#]*\d+",
    # output chunk ids (Codex CLI: "Chunk ID: 6e403a")
    r"(?i)\bchunk id:[ \t]*[\w-]+",
    # message, request, trace and event ids a service stamps on every answer
    r"(?i)\b(?:(?:message|msg|request|req|trace|span|correlation|event|response|run|thread)[ _-]?id|ts|thread_ts|etag)"
    r"[\"']?[ \t]*[:=][ \t]*[\"']?[\w.:-]*\d[\w.:-]*",
    # prefixed random ids (msg_01HQ2X..., req_8f3a..., chatcmpl-9xY...): a short prefix, then letters and
    # digits with a digit and at least 8 more characters before or after it
    r"\b[A-Za-z]{2,12}[_-](?:[A-Za-z0-9]{8,}[0-9][A-Za-z0-9]*|[A-Za-z0-9]*[0-9][A-Za-z0-9]{8,})\b",
    # UUIDs, hex digests and long numbers (7 digits or more)
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
    r"\b(?:0x)?[0-9a-fA-F]{7,}\b",
    # handles into a browser page's accessibility snapshot (Playwright MCP's [ref=e44]), renumbered as it re-renders
    r"\[ref=(?:[fs]\d+)?e\d+\]",
    # bar glyphs of progress bars
    r"[█▉▊▋▌▍▎▏░▒▓■□▰▱⣿⣀]+",
    r"\[[#=>\-.\s]{4,}\]",
    # braille and line-drawing spinner frames
    r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏⠁⠂⠄⡀⢀⠠⠐⠈]",
)
"""The built-in ``result_normalize`` patterns, in the order they apply."""

# RE2 like every pattern here: linear in the text, whatever the text holds.
_ANSI = compile_regex(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# What a carriage return overwrote: up to the last \r of a line that is not a line end.
_OVERWRITTEN = compile_regex(r"[^\n]*\r([^\n]|\z)")
_TRAILING = compile_regex(r"(?m)[ \t]+$")
_BLANK_RUNS = compile_regex(r"\n{3,}")
_NOISE_ONLY = "\x00 \t"
"""What is left of a reading once its noise is masked: markers and blanks."""
_READING_CHARS = 80
_CLOCK = lazy_compile(r"\d:\d\d|\d{4}-\d\d-\d\d|\b1[6-9]\d{8}(?:\d{3})?\b")  # a time, a date, epoch seconds or ms
_MARKS = compile_regex(r"\x00(?:[\s\x00]*\x00)?")
# Two markers with only whitespace between them: without one, _MARKS changes nothing.
_MARK_RUN = compile_regex(r"\x00[\s\x00]*\x00")
_DIGITS = lazy_compile(r"[0-9]+")
# a date, a time of day, both (ISO 8601, with a zone or not), epoch seconds or milliseconds, an age
# ("42 seconds ago") or how long it has been up ("running for 1m30s", "uptime 3h2m"); not an ETA, a time
# remaining or a measurement, which are progress
_STAMPS = compile_regex(
    r"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?"
    r"|\b\d{1,2}:\d\d(?::\d\d(?:[.,]\d+)?)?\b|\b1[6-9]\d{8}(?:\d{3})?(?:\.\d+)?\b"
    r"|\b\d+(?:\.\d+)?\s*(?:ms|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?)\s+ago\b"
    r"|(?i:\b(?:running for|up for|uptime|up)[\s:=\"']+)(?:\d+d)?(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?(?:ms|s|m|h)?\b"
)
# what follows a number counted toward a total: "2 of 6", "2/6", "2 out of 6", "46%"
_TOWARD = lazy_compile(r"\s*(?:(?:/|of|out\s+of)\s*[0-9]|%)")
# what comes before a number that names a unit of work done or a queue's item: "batch 2", "page 3", "task 41"
_UNIT = lazy_compile(
    r"(?i)\b(?:batch|page|chunk|part|shard|partition|segment|block|offset|cursor"
    r"|task|item)\s*(?:#|no\.?)?\s*$"
)
_UNIT_REACH = 24
# a key that names what follows as an item's id or number: "id": 7, "number": 102
_MADE_KEY = lazy_compile(r"(?i)\b(?:id|number)[\"']?[ \t]*[:=][ \t]*$")
# what comes before "#" in a count of tries, not the number of an item ("attempt #3")
_TRIES = ("attempt ", "retry ", "try ", "tick ")
_TOTAL = lazy_compile(r"(?i)\btotal\b")
_COUNTED = 32
_COUNTED_CHARS = 2048
_HEAD = 4096
_TAIL = 4096


@functools.lru_cache(maxsize=16)
def _substitutions(patterns: tuple[str, ...]) -> Substitutions:
    """The patterns compiled once per process and shared: every session's
    guard has a normaliser, and their RE2 set is about three quarters of a
    session's memory with ``recommended`` (an unchanging object, like the
    compiled regular expressions google-re2 itself caches)."""
    return Substitutions(patterns, setting="result_normalize")


class ResultNormalizer:
    """Normalises tool results and digests them for comparison.

    ``patterns`` are regular expressions; every match becomes one marker.
    """

    def __init__(self, patterns: Iterable[str] = DEFAULT_RESULT_NORMALIZE) -> None:
        self._patterns = _substitutions(tuple(patterns))

    def normalize(self, text: str) -> str:
        """``text`` without its noise (each pattern reads the first
        ``PATTERN_INPUT_LIMIT`` characters; ``digest`` passes at most 8 KiB).
        A cleanup pass runs only when its text holds what it removes."""
        if "\x1b" in text:
            text = _ANSI.sub("", text)
        if "\r" in text:
            text = _OVERWRITTEN.sub(r"\1", text.replace("\r\n", "\n"))
        text = self._patterns.sub("\x00", text)
        if "\x00" in text and _MARK_RUN.search(text):
            text = _MARKS.sub("\x00", text)
        if " \n" in text or "\t\n" in text or text[-1:] in (" ", "\t"):
            text = _TRAILING.sub("", text)
        if "\n\n\n" in text:
            text = _BLANK_RUNS.sub("\n\n", text)
        return text.strip()

    def digest(self, text: str) -> bytes:
        """A 16-byte digest of the normalised ``text``. Of a result longer
        than 8 KiB only the first and last 4 KiB are normalised; the middle
        is compared as it is, so noise there reads as a change (the safe
        side: a change is never taken for a repeat), and a long output costs
        no more than a short one."""
        hasher = blake2b(digest_size=16)
        if len(text) > _HEAD + _TAIL:
            hasher.update(self.normalize(text[:_HEAD]).encode("utf-8", "surrogatepass"))
            hasher.update(b"\x00\x01")
            hasher.update(text[_HEAD:-_TAIL].encode("utf-8", "surrogatepass"))
            hasher.update(b"\x00\x01")
            text = text[-_TAIL:]
        hasher.update(self.normalize(text).encode("utf-8", "surrogatepass"))
        return hasher.digest()

    def shape(self, text: str) -> Shape:
        """``text``'s digest (as ``digest``), and for a short result (up to
        ``_COUNTED_CHARS`` once normalised) its normalised form, from which
        ``Shape.counts_on`` tells a counter (``tick 4``, ``tick 5``) from a
        change. Normalises once."""
        if len(text) > _HEAD + _TAIL:
            return Shape(self.digest(text))
        normalized = self.normalize(text)
        digest = blake2b(normalized.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        if len(normalized) > _COUNTED_CHARS:
            return Shape(digest)
        return Shape(digest, normalized)

    def is_reading(self, text: str) -> bool:
        """Whether ``text`` is a clock read on its own: one short line that
        holds a time or a date (``date``, ``date +%s``, ``stat -c %y``) and
        nothing comparison keeps. An id or a digest alone is no reading."""
        if len(text) > 2 * _READING_CHARS:  # not even stripped: most results are far longer
            return False
        line = text.strip()
        if len(line) > _READING_CHARS or "\n" in line or _CLOCK.search(line) is None:
            return False
        return not self._patterns.sub("\x00", line).strip(_NOISE_ONLY)

    @staticmethod
    def exact(text: str) -> Shape:
        """``text`` compared exactly, with no counter: a file's content,
        where any change, a number or a date included, is a change."""
        hasher = blake2b(digest_size=16)
        hasher.update(text.encode("utf-8", "surrogatepass"))
        return Shape(hasher.digest())

    @staticmethod
    def timeless(text: str) -> Shape:
        """``text`` compared exactly but for its times and dates: a status
        file polled, whose job stamping its heartbeat is no news and whose
        step moving on (``job 4 of 40``) is."""
        return ResultNormalizer.exact(_STAMPS.sub("\x00", text))


def _names_item(text: str, start: int) -> bool:
    """Whether the number at ``start`` of ``text`` names an item (``order
    #10234``, ``qa_user_4``, ``job-17``; not ``attempt #3``)."""
    before = text[start - 1 : start] if start else ""
    if before == "#":
        return not text[max(0, start - 9) : start - 1].lower().endswith(_TRIES)
    return before in ("_", "-") and start > 1 and text[start - 2].isalpha()


def _names_made(text: str, start: int) -> bool:
    """Whether the number at ``start`` of ``text`` names what a call made:
    an item (``_names_item``), or, in the answer of a tool that makes
    things, a URL's ``/issues/102``, an ``"id": 7`` or a ``"number": 102``.
    Only there: elsewhere a retried request's ``/attempt/5`` or a JSON-RPC
    ``"id"`` counts calls."""
    if _names_item(text, start):
        return True
    before = text[start - 1 : start] if start else ""
    if before == "/" and start > 1 and text[start - 2].isalpha():
        return True
    return _MADE_KEY.search(text, max(0, start - 12), start) is not None


def _names_work(text: str, start: int) -> bool:
    """Whether the number at ``start`` of ``text`` names a unit of work
    (``batch 2``, ``page 3``, ``chunk #4``) or an item (``_names_item``):
    work done when it grows."""
    return _names_item(text, start) or _UNIT.search(text, max(0, start - _UNIT_REACH), start) is not None


class Shape:
    """A result as ``loops`` compares it: ``digest`` of the normalised text
    and, for a short result that holds a number, that text (``counted``),
    kept to tell a counter from a change. Its numbers and its skeleton (the
    text without them) are taken only when a comparison needs them: most
    results are never compared that way."""

    __slots__ = ("_counted", "_items", "_numbers", "_skeleton", "_toward", "digest")

    def __init__(self, digest: bytes, counted: str | None = None) -> None:
        self.digest = digest
        self._counted = counted if counted is not None and _DIGITS.search(counted) else None
        self._skeleton: bytes | None = None
        self._numbers: tuple[int, ...] = ()
        self._toward: frozenset[int] = frozenset()
        self._items: frozenset[int] = frozenset()

    def _counter(self) -> tuple[bytes, tuple[int, ...]] | None:
        if self._skeleton is None:
            text = self._counted
            if text is None:
                return None
            found = [m for m in _DIGITS.finditer(text) if len(m.group()) < 19][:_COUNTED]
            self._numbers = tuple(int(m.group()) for m in found)
            self._items = frozenset(i for i, m in enumerate(found) if _names_made(text, m.start()))
            if _TOTAL.search(text):
                self._toward = frozenset(range(len(found)))
            else:
                self._toward = frozenset(
                    i for i, m in enumerate(found) if _TOWARD.match(text, m.end()) or _names_work(text, m.start())
                )
            self._skeleton = blake2b(_DIGITS.sub("#", text).encode("utf-8", "surrogatepass"), digest_size=16).digest()
            self._counted = None
        return self._skeleton, self._numbers

    def counts_on(self, previous: Shape) -> bool:
        """Whether this result is ``previous`` with a counter moved on: the
        same text but for one number, grown by exactly one (a call counting
        its own runs, not work done). A number counted toward a total (``2
        of 6``, ``2/6``, ``46%``, or beside a ``total``) is work done, and so
        is the number of a unit of work (``batch 2``, ``page 3``, ``chunk
        #4``) or of an item (``order #10234``, ``qa_user_4``): a script run
        again on the next batch, or on the next job of a queue."""
        mine, theirs = self._counter(), previous._counter()
        if mine is None or theirs is None or mine[0] != theirs[0] or len(mine[1]) != len(theirs[1]):
            return False
        changed = 0
        for index, (now, before) in enumerate(zip(mine[1], theirs[1], strict=True)):
            if now == before:
                continue
            if now != before + 1 or index in self._toward:
                return False
            changed += 1
        return changed == 1

    def makes_next(self, previous: Shape) -> bool:
        """Whether this result is ``previous`` with the number of an item
        grown (``Created issue #102`` after ``#101``, ``marker_8`` after
        ``marker_7``), whatever other numbers grew with it (its URL's): the
        same call made one more of something."""
        mine, theirs = self._counter(), previous._counter()
        if mine is None or theirs is None or mine[0] != theirs[0] or len(mine[1]) != len(theirs[1]):
            return False
        grown = [i for i, (now, before) in enumerate(zip(mine[1], theirs[1], strict=True)) if now != before]
        return bool(grown) and all(mine[1][i] > theirs[1][i] for i in grown) and not self._items.isdisjoint(grown)


_ERROR_NOISE = compile_regex(
    r""""[^"\n]*"|'[^'\n]*'|`[^`\n]*`"""  # quoted text: names, values, snippets
    r"|(?:[A-Za-z]:)?[~.]?/[^\s:,;)]*"  # paths
    r"|\b[\w.-]+\.[A-Za-z]{1,5}\b"  # file names
    r"|0x[0-9a-fA-F]+|\d+(?:\.\d+)?"  # numbers
)
_ERROR_SKIP = compile_regex(
    r"(?i)^\s*(?:traceback|error:?\s*$|<[^>]+>\s*$|<\w+>[^<]*</\w+>\s*$|```|-{3,}|={3,}"
    r"|(?:exit|return|status) ?(?:code|status)\W*\d*\s*$|[\w ]{1,40}:\s*\((?:none|empty)\)\s*$"
    r"|(?:command|directory|cwd|process group pgid|background pids|chunk id|wall time|original token count|signal)\s*:"
    r"|process (?:exited|running) with)"
)
# A line that opens an error report: "error: ...", "fatal: ...", "bash: syntax error ...", "NameError: ...".
_ERROR_OPENS = compile_regex(
    r"(?i)^\s*(?:[\w.-]{1,40}:\s*(?:line \d+:\s*)?)?(?:[a-z]+\s)?"
    r"(?:error|fatal|exception|panic|traceback|[a-z_.]*(?:error|exception))\b"
)
_ERROR_WORDS = compile_regex(
    r"(?i)(?:error|exception)\b|\b(?:failed|failure|fatal|not found|no such|denied|invalid|cannot|can't|could not|"
    r"unable|refused|timed? ?out|unknown|missing|required|not allowed|forbidden|unauthori[sz]ed)\b"
)
# A logfmt line (Go's logrus and slog, golangci-lint): its fields are read as a JSON record's (its error
# before a generic msg), and quoted, as the rest of it would be stripped:
# `level=error msg="context loading failed: ..."`, `level=error msg="request failed" error="dial tcp ..."`
_LOGFMT_ERROR = lazy_compile(r"(?i)(?:^|\s)level=(?:error|err|fatal|panic|crit\w*)\b")
_LOGFMT_FIELD = lazy_compile(r'(?i)(?:^|\s)(msg|message|error|err)=("(?:[^"\\]|\\.)*"|[^\s"]+)')
_KIND_CHARS = 160
_KIND_READ = 4096
_KIND_LINES = 200


def error_kind(text: str) -> str:
    """The kind of an error: its first line that reads like an error (or,
    without one, its first meaningful line), lower-cased, with quoted text,
    paths, file names and numbers stripped (``ERROR: No replacement was
    performed, old_str `x` did not appear verbatim in /a/b.py.`` and the same
    with other values are one kind). Bare status lines (``Exit code 1``) and
    banners are skipped: they say that something failed, not what. A JSON
    object's kind is its message's (``error``, ``message``,
    ``error_message``, ``msg``, ``detail``, ``stderr`` or ``output``; none:
    no kind), and a logfmt
    line's (``level=error msg="..."``) is its message's too."""
    if text[:1] == "{" and len(text) <= _KIND_READ:
        message = _json_message(text)
        if message is not None:
            text = message
    first = ""
    for number, line in enumerate(text.splitlines()):
        if number >= _KIND_LINES:
            break
        if not line.strip() or _ERROR_SKIP.match(line):
            continue
        if not first:
            first = line
        if _ERROR_WORDS.search(line):
            first = line
            break
    if "level=" in first and _LOGFMT_ERROR.search(first[:_KIND_READ]):
        fields = {name.lower(): value for name, value in reversed(_LOGFMT_FIELD.findall(first[:_KIND_READ]))}
        said = next((fields[key] for key in _RECORD_KEYS if fields.get(key)), None)
        if said is not None:
            first = said.strip('"').replace('\\"', '"')
    # The kind is short: a long line is read only as far as it can matter.
    return " ".join(_ERROR_NOISE.sub("#", first[:_KIND_READ]).lower().split())[:_KIND_CHARS]


# an answer's specific message first: Spring's {"error": "Bad Request", "message": "..."}, OAuth's
# error_description, Google ADK tools' error_message; a generic "msg" after an "error" ({"msg":
# "internal error", "error": "<the cause>"})
_MESSAGE_KEYS = (
    "message",
    "error_message",
    "errorMessage",
    "error_description",
    "detail",
    "error",
    "errors",
    "err",
    "msg",
    "stderr",
    "output",
    "content",
)
# a log record's (one with a level, logfmt's or JSON's) error first: its message names the event that
# failed ("request failed"), its error why (zap, zerolog, slog, logrus' WithError)
_RECORD_KEYS = (
    "error",
    "err",
    "error_message",
    "errorMessage",
    "error_description",
    "detail",
    "errors",
    "message",
    "msg",
    "stderr",
    "output",
    "content",
)


def _json_message(text: str) -> str | None:
    """The message of an error written as a JSON object (``""`` when its
    message keys are all empty or absent), or ``None`` when ``text`` is no
    JSON object; a log record (one with a ``level``) is read error first."""
    try:
        value = msgspec.json.decode(text)
    except (ValueError, RecursionError):  # not JSON, a lone surrogate, nested past the decoder
        return None
    for key in _RECORD_KEYS if "level" in value else _MESSAGE_KEYS:  # text that opens with "{" decodes to an object
        message = _said(value.get(key))
        if message:
            return message
    return ""


def _said(value: Any) -> str:
    """What a message field says: its text, a nested message's (``{"message":
    ...}``, FastAPI's ``{"msg": ...}``, MCP's ``{"text": ...}``), or a list's
    first item's (GraphQL's ``errors``)."""
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, dict):
        value = value.get("message") or value.get("msg") or value.get("text")
    return value.strip() if isinstance(value, str) else ""


def error_head(text: str) -> str:
    """``text`` cut after the line that says what failed, when ``text`` is
    an error report (its first meaningful line opens one, or a traceback
    leads to one): what follows (a stack, help text, a stray prompt) is
    noise that changes between runs of the same failure. Any other text is
    returned whole."""
    position = 0
    traceback = False
    head = text[:_KIND_READ]
    for _ in range(_KIND_LINES):
        if position > len(head):
            break
        cut = head.find("\n", position)
        line = head[position:] if cut < 0 else head[position:cut]
        end = position + len(line) + 1
        stripped = line.strip()
        if not stripped:
            position = end
            continue
        if traceback:
            if not line[:1].isspace() and _ERROR_WORDS.search(line):
                return text[:end]
        elif stripped.lower().startswith("traceback"):
            traceback = True
        elif _ERROR_SKIP.match(line):
            pass
        elif _ERROR_OPENS.match(line):
            return text[:end]
        else:
            return text
        position = end
    return text
