"""One encoder and the decoder factory for the session log's JSON lines."""

from __future__ import annotations

import datetime
import decimal
import enum
import re
import reprlib
import uuid
from collections.abc import Iterable, Sequence
from itertools import accumulate
from typing import Any

import msgspec

from bus.agent import Agent
from bus.events import (
    EVENT_TYPES,
    AgentStatus,
    AnyEvent,
    ContextMessage,
    ContextSource,
    Event,
    SessionStart,
    ToolCall,
    ToolResult,
    UserMessage,
)

MAX_NESTING = 100
"""The deepest nesting of arrays and objects a log line or transcript record
may have: a deeper one is skipped and counted, and the writer replaces what
lies deeper with a readable stand-in, so a log it wrote always reads back."""

_MAX_DEPTH = MAX_NESTING - 1  # _plain's depth 0 is the event object itself
ARGS_NESTING = MAX_NESTING - 1
"""The deepest a call's arguments may nest and be written as they are: the
event's own object is the line's first level."""
NATIVE_LEAVES = (
    datetime.date,
    datetime.time,
    datetime.timedelta,
    uuid.UUID,
    decimal.Decimal,
    enum.Enum,
    bytes,
    bytearray,
    memoryview,
)
"""Values msgspec writes as they are that hold no other value (an ISO date,
a UUID's text, base64 bytes, ...): the log and the fingerprint take them as
they come."""
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_SHORT = 8192  # below this, counting every byte is quicker than finding each bracket
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def too_deep(data: bytes | bytearray, limit: int = MAX_NESTING) -> bool:
    """Whether the JSON text ``data`` nests arrays and objects deeper than
    ``limit``, told in linear time without decoding it (a decoder recurses,
    and a thousand levels exhaust Python's stack)."""
    if len(data) < _SHORT:
        if data.count(b"[") + data.count(b"{") <= limit:
            return False
    elif _count_to(data, b"[", limit) + _count_to(data, b"{", limit) <= limit:
        return False
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKET)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


_GLUED = re.compile(rb"\}[ \t\r]*\{")
_NOT_BRACKET_NOR_NEWLINE = bytes(b for b in range(256) if b not in b"[]{}\n")


def block_lines(block: bytes | bytearray) -> int | None:
    """How many lines ``block`` holds, when decoding it in one call
    (``Decoder.decode_lines``) can stand for decoding each of its lines
    alone; ``None`` when some line must be decoded alone: the block does not
    end a line, one JSON object ends and another begins on one line (or
    that text is in a string: needlessly, then), or a line nests deeper than
    ``MAX_NESTING`` (told before anything is decoded). The caller still
    checks that the decoder succeeded with as many values as lines, each an
    object: a blank line, or a value going on over the next line, shows
    there."""
    if not block.endswith(b"\n") or _GLUED.search(block) is not None:
        return None
    brackets = list(map(len, block.translate(None, _NOT_BRACKET_NOR_NEWLINE).split(b"\n")))
    if max(brackets) > MAX_NESTING:  # then look closer: brackets in strings do not nest
        lines = block.split(b"\n")
        if any(too_deep(lines[i]) for i, n in enumerate(brackets) if n > MAX_NESTING):
            return None
    return len(brackets) - 1


def _count_to(data: bytes | bytearray, byte: bytes, limit: int) -> int:
    """How often ``byte`` occurs in ``data``, counted no further than
    ``limit + 1``. A line holds few brackets, and ``find`` skips to each one
    far faster than ``count`` reads every byte."""
    count = 0
    at = data.find(byte)
    while at >= 0 and count <= limit:
        count += 1
        at = data.find(byte, at + 1)
    return count


def stand_in(obj: Any) -> Any:
    """What the session log writes for a value JSON cannot carry (a runtime
    may pass any object in ``args``), and what a call's fingerprint reads
    for it, so a replay of the log sees the call the live guard saw: an
    agent handle is its id; a dataclass, a pydantic model (``model_dump``)
    or an object with attributes is an object of its fields (the last with
    ``"__type__"``, its class name); any other object ``"<Type: repr>"``, or
    ``"<Type>"`` when its repr is the default one, whose memory address
    would make every copy a different value. What it gives is plain JSON
    values all the way down (an object met again inside itself is
    ``"<recursive Type>"``), and it never raises."""
    if type(obj) is Agent:  # every event's agent: the common case first
        return obj.id
    return _plain(obj, set(), 0)


def _fields(obj: Any) -> Any:
    """An object msgspec cannot write, as the value that stands for it."""
    try:
        if hasattr(type(obj), "__dataclass_fields__") and not isinstance(obj, type):
            import dataclasses  # imported already by whoever made the dataclass

            return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        dump = getattr(obj, "model_dump", None)  # pydantic models
        if callable(dump):
            try:
                return dump()
            except MemoryError:
                raise
            except Exception:  # a model that cannot dump itself: its fields, or its name, stand in
                pass
        fields = getattr(obj, "__dict__", None)
        if isinstance(fields, dict) and fields:
            return {"__type__": type(obj).__qualname__, **{str(k): v for k, v in fields.items()}}
        if getattr(type(obj), "__repr__", None) is getattr(object, "__repr__", None):
            return f"<{type(obj).__qualname__}>"
        return f"<{type(obj).__qualname__}: {obj!r}>"
    except MemoryError:
        raise
    except Exception:
        return f"<{type(obj).__qualname__}>"


# Sets are written in order (and so every dict's keys, which costs nothing to
# speak of): a set in ``args`` then reads back as the list the fingerprint saw.
encoder = msgspec.json.Encoder(enc_hook=stand_in, order="deterministic")


def encoded(value: Any, by: msgspec.json.Encoder | msgspec.msgpack.Encoder = encoder) -> bytes:
    """``by.encode(value)``, made with ``encode_into``: msgspec's ``encode``
    and ``encode_lines`` crash the process (a segmentation fault) when memory
    runs out as their buffer grows, where ``encode_into`` raises
    ``MemoryError``. What an agent's call carries, whatever its size, is
    encoded this way."""
    buffer = bytearray()
    by.encode_into(value, buffer)
    return bytes(buffer)


def ordered(members: list[Any]) -> list[Any]:
    """A set's members (plain JSON values) in the order the session log
    writes them and a fingerprint reads them: their natural order, or,
    for members that do not compare (``{1, "a"}``), by their JSON text."""
    try:
        return sorted(members)
    except TypeError:
        return sorted(members, key=encoder.encode)


def encode_line(item: msgspec.Struct, buffer: bytearray) -> None:
    """Encode ``item`` into ``buffer`` (replacing its contents); never raises
    for what an event carries, only ``MemoryError`` where memory runs out.

    The fast path is msgspec itself. Values it refuses (a string with lone
    surrogates, as ``json.loads`` or ``surrogateescape`` decoding produce; a
    self-containing list; nesting deeper than the recursion limit), and
    lines nested deeper than ``MAX_NESTING``, send the item through
    ``_plain`` first, which swaps only the offending values for readable
    stand-ins, so the event is still written whole and reads back.
    """
    try:
        encoder.encode_into(item, buffer)
    except MemoryError:  # no stand-in: the event is not written, and its writer says so
        raise
    except Exception:  # a lone surrogate, an integer too long to write, a set whose members do not compare,
        # a value that raises on being looked at: each stands in
        encoder.encode_into(_plain(item, set(), 0), buffer)
        return
    if too_deep(buffer):
        encoder.encode_into(_plain(item, set(), 0), buffer)


def encode_lines(items: Sequence[msgspec.Struct]) -> bytes:
    """The lines ``encode_line`` would write for ``items``, each ending in a
    newline, encoded in one call: the common case, where no item needs a
    stand-in and the block's lines are as a reader takes them in one call
    (``block_lines``: none nests too deeply); otherwise item by item."""
    block = bytearray()
    into = encoder.encode_into
    try:
        for item in items:  # ``encode_lines`` would crash where memory runs out (``encoded``)
            into(item, block, -1)
            block.append(10)  # b"\n"
    except MemoryError:
        raise
    except Exception:
        return _each(items)
    if block_lines(block) is None:
        return _each(items)
    return bytes(block)


def _each(items: Sequence[msgspec.Struct]) -> bytes:
    block = bytearray()
    line = bytearray()
    for item in items:
        encode_line(item, line)
        line.append(10)  # b"\n"
        block += line
    return bytes(block)


def _text(value: str) -> str:
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def as_logged(value: Any, *, depth: int = 0) -> Any:
    """``value`` as a log line carries it and a reader gives it back: the
    stand-ins ``encode_line`` writes (a lone surrogate as ``\\uXXXX`` text,
    and so on) in place of what JSON cannot hold. An input that may hold
    such values goes through it first, so what the guard saw live is what a
    replay of the log sees. ``depth`` is how deep in an event the value
    sits (1 for a call's arguments): what lies deeper than the log keeps
    becomes the writer's stand-in."""
    return _plain(value, set(), depth)


class NumberOutOfRange(ValueError):
    """A JSON number beyond a float's range (``1e999``), which msgspec
    refuses and the standard library reads as infinite."""


def lenient_json(raw: bytes, *, finite: bool = False) -> Any:
    """``raw`` read by the standard library's decoder, which takes escaped
    lone surrogates (``"\\ud83d"``, as JavaScript writes a string cut
    mid-character) as msgspec does not, each then written as the session
    log writes it (``as_logged``), so a replay sees what the guard saw;
    ``None`` when it is no JSON either (``NaN`` and ``Infinity`` are none).
    A number beyond a float's range is logged as ``null``, or, with
    ``finite``, is a ``NumberOutOfRange`` naming it, as msgspec refuses it
    (a server answers one body alike whatever else it holds).
    ``raw`` is read as UTF-8 (a byte order mark allowed), never as UTF-16
    or UTF-32 guessed from its first bytes, as ``json.loads`` reads bytes
    (a line of a UTF-16 file begins with a NUL byte)."""
    import json

    def refuse(constant: str) -> None:
        raise ValueError(constant)

    def in_range(text: str) -> float:
        number = float(text)
        if number - number != 0.0:
            raise NumberOutOfRange(f"number out of range: {text[:40]}")
        return number

    try:
        text = raw.decode("utf-8-sig", "surrogatepass")
        return as_logged(json.loads(text, parse_constant=refuse, parse_float=in_range if finite else float))
    except NumberOutOfRange:
        raise
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None


def logged_args(args: Any) -> Any:
    """A call's ``args`` as a log line holds them: ``args`` themselves,
    unless they nest deeper than ``ARGS_NESTING`` or hold what JSON cannot
    (then ``as_logged``). A process that keeps the arguments it was given
    (the command hook's snapshot) keeps nothing deeper than the log does."""
    try:
        data = encoded(args)
    except MemoryError:
        raise
    except Exception:
        return as_logged(args, depth=1)
    return as_logged(args, depth=1) if too_deep(data, ARGS_NESTING) else args


def _plain(obj: Any, active: set[int], depth: int) -> Any:
    """``obj`` as JSON-encodable builtins; see ``encode_line``. A value that
    raises on being looked at (a dead weak proxy, an object whose attribute
    access fails) stands as ``"<Type>"``."""
    try:
        return _plain_of(obj, active, depth)
    except MemoryError:
        raise
    except Exception:
        return f"<{type(obj).__qualname__}>"


def _plain_of(obj: Any, active: set[int], depth: int) -> Any:
    if isinstance(obj, str):
        return _text(obj)
    if isinstance(obj, Agent):
        return _text(obj.id)
    if isinstance(obj, int) and not isinstance(obj, bool):
        return _int(obj)
    if obj is None or isinstance(obj, bool | float):
        return obj
    if depth > _MAX_DEPTH:
        return f"<{type(obj).__qualname__} nested deeper than {_MAX_DEPTH}>"
    if id(obj) in active:
        return f"<recursive {type(obj).__qualname__}>"
    active.add(id(obj))
    try:
        if isinstance(obj, msgspec.Struct):
            config = obj.__struct_config__
            fields = {} if config.tag_field is None else {config.tag_field: config.tag}
            for name in obj.__struct_fields__:
                value = getattr(obj, name)
                if value is not msgspec.UNSET:  # left out, as msgspec leaves it out
                    fields[name] = _plain(value, active, depth + 1)
            return fields
        if isinstance(obj, dict):
            return {logged_key(k): _plain(v, active, depth + 1) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [_plain(v, active, depth + 1) for v in obj]
        if isinstance(obj, set | frozenset):
            return ordered([_plain(v, active, depth + 1) for v in obj])
        if isinstance(obj, NATIVE_LEAVES):
            return obj
        return _plain(_fields(obj), active, depth + 1)
    finally:
        active.discard(id(obj))


def _int(value: int) -> int | str:
    """``value``, or its hex form as a string when it has more digits than
    Python writes in decimal (``sys.get_int_max_str_digits``, 4300 by
    default): the hex form has no such limit, and tells any two apart."""
    try:
        encoder.encode(value)
    except ValueError:
        return hex(value)
    return value


def logged_key(key: Any) -> str:
    """A dict key as the session log writes it, and a fingerprint reads it:
    text as it is, a number as its JSON text, anything else the JSON text
    of what the log writes for it (``(1, 2)`` is ``"[1,2]"``, ``None``
    ``"null"``, an object its ``stand_in``)."""
    if isinstance(key, str):
        return _text(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return str(_int(key))
    return encoder.encode(_plain(key, set(), 0)).decode()


def event_decoder(agents: dict[str, Agent]) -> msgspec.json.Decoder[AnyEvent | SessionStart]:
    """A decoder whose events carry the handles in ``agents`` (id -> handle),
    one per id: an id not seen before gets a new handle, kept there. It
    decodes a resume header too (a ``SessionStart``), in the same pass."""

    def hook(type_: type, obj: Any) -> Any:
        # msgspec turns a ValueError here into a ValidationError for the line;
        # any other exception would escape the reader.
        if isinstance(obj, str) and obj:
            agent = agents.get(obj)
            if agent is None:
                agent = agents[obj] = Agent(obj)
            return agent
        raise ValueError(f"Expected a non-empty agent id string, got {reprlib.repr(obj)}")

    return msgspec.json.Decoder(AnyEvent | SessionStart, dec_hook=hook)


header_decoder = msgspec.json.Decoder(SessionStart)


_TEXT_TYPES = (str, str | None, str | msgspec.UnsetType)


def _text_fields() -> dict[str, frozenset[str]]:
    """Per event tag, the fields the schema types as text (``agent`` too:
    its id is text on disk)."""
    fields: dict[str, frozenset[str]] = {}
    for tag, kind in EVENT_TYPES.items():
        names = {"agent"}
        for field in msgspec.structs.fields(kind):
            if field.type in _TEXT_TYPES:
                names.add(field.name)
        fields[tag] = frozenset(names)
    return fields


_TEXT_FIELDS = _text_fields()
_PROSE = frozenset({"content", "text", "reason"})
"""Text fields a structured value may stand in for (a tool that returned
JSON); in a name or an id, an object or an array is no mistyped value."""
_LENIENT = msgspec.json.Decoder()


def mistyped_event(line: bytes, decoder: msgspec.json.Decoder[Any]) -> AnyEvent | None:
    """The event of a line ``decoder`` refused for its field types, read as
    the schema has them, or ``None`` when it cannot be: a number or a
    boolean in a text field becomes its JSON text (``"call_id": 7`` is call
    ``"7"``), and so does an object or an array in a prose field
    (``content``, ``text``, ``reason``); text holding a number in a number
    field becomes that number (``"step": "2"``); a call's ``hints`` keep
    only the hints declared true or false (MCP's annotations as a dict hold a
    ``title`` and unset hints as ``null``; no hints at all when they are no
    object). A program that published ``call_id=7`` wrote such lines; its
    events are read, not lost."""
    try:
        raw = _LENIENT.decode(line)
    except msgspec.DecodeError:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        return None
    _as_text(raw, _TEXT_FIELDS.get(raw["type"], ()))
    if raw["type"] == "tool/call" and "hints" in raw:
        _keep_declared_hints(raw)
    source = raw.get("source")
    if raw["type"] == "context/message" and isinstance(source, dict):
        _as_text(source, _SOURCE_TEXT)
    try:
        event: AnyEvent = msgspec.convert(raw, AnyEvent, strict=False, dec_hook=decoder.dec_hook)
    except msgspec.ValidationError:
        return None
    return event


_SOURCE_TEXT = frozenset(f.name for f in msgspec.structs.fields(ContextSource) if f.type in _TEXT_TYPES)


def _as_text(raw: dict[str, Any], names: Iterable[str]) -> None:
    """``raw``'s fields ``names`` as text where a number (or, in a prose
    field, an object or an array) stands: its JSON text."""
    for name in names:
        value = raw.get(name)
        if isinstance(value, int | float) or (name in _PROSE and isinstance(value, dict | list)):
            raw[name] = encoded(value).decode("utf-8")


def _keep_declared_hints(raw: dict[str, Any]) -> None:
    """``raw``'s ``hints`` as the hints it declares: those whose value is
    true or false, under text keys; none when that leaves none."""
    hints = raw["hints"]
    declared = {k: v for k, v in hints.items() if type(v) is bool} if isinstance(hints, dict) else {}
    if declared:
        raw["hints"] = declared
    else:
        del raw["hints"]


def _all_declared(hints: object) -> bool:
    """Whether ``hints`` is what a call's log line reads back as it is: a
    dict of text keys to booleans."""
    return type(hints) is dict and all(type(k) is str and type(v) is bool for k, v in hints.items())


_OWN = frozenset({"seq", "ts", "agent"})


def read_back(event: AnyEvent) -> None:
    """Give ``event`` the field values a reader of its log line gets, for
    an event built with a field of another type than its schema's (a number
    as a call id, a dict as a result's content): what the guard sees live is
    then what a replay of the log sees. ``TypeError`` naming the field when
    no reader could read the line (``step=None``): such an event would be
    lost to every replay."""
    line = bytearray()
    encode_line(event, line)
    decoder = event_decoder({})
    read: AnyEvent | SessionStart | None
    try:
        read = decoder.decode(line)
    except msgspec.ValidationError as exc:
        read = mistyped_event(bytes(line), decoder)
        if read is None:
            raise TypeError(f"{type(event).__name__} cannot be logged: {exc}") from None
    for name in event.__struct_fields__:
        if name not in _OWN:
            msgspec.structs.force_setattr(event, name, getattr(read, name))


def conform(event: Event) -> None:
    """Make ``event`` what a reader of its log line gets when a field holds
    another type than its schema's (``read_back``); an event whose fields
    are all of their types is left as it is, at the cost of a few type
    checks. ``TypeError`` naming the field when no reader could read it."""
    if isinstance(event, ToolResult):
        if (
            type(event.content) is not str
            or type(event.call_id) is not str
            or type(event.step) is not int
            or type(event.tool) is not str
            or type(event.is_error) is not bool
            or (event.denied_by is not None and type(event.denied_by) is not str)
            or (event.advice is not msgspec.UNSET and type(event.advice) is not str)
        ):
            read_back(event)
    elif isinstance(event, ToolCall):
        if (
            type(event.call_id) is not str
            or type(event.step) is not int
            or type(event.tool) is not str
            or (event.hints is not msgspec.UNSET and not _all_declared(event.hints))
            or (event.late is not msgspec.UNSET and type(event.late) is not bool)
        ):
            read_back(event)
    elif isinstance(event, UserMessage):
        if type(event.text) is not str:
            read_back(event)
    elif isinstance(event, ContextMessage):
        source = event.source
        if (
            type(event.text) is not str
            or type(event.call_id) is not str
            or type(source) is not ContextSource
            or source.kind != "plugin"
            or type(source.plugin) is not str
            or type(source.form) is not str
            or type(source.summary) is not str
        ):
            read_back(event)
    elif isinstance(event, AgentStatus) and (
        type(event.status) is not str
        or (event.parent is not None and type(event.parent) is not str)
        or (event.reason is not None and type(event.reason) is not str)
        or (event.by is not msgspec.UNSET and type(event.by) is not str)
    ):
        read_back(event)


def checked_time(ts: object, source: str) -> float:
    """``ts`` as an event's time: a finite number of seconds (an ``int`` is
    taken as it is); anything else would be logged as no time at all, and
    the event lost to every reader of the log. ``source`` names where it
    came from in the ``TypeError``."""
    if type(ts) is int or (type(ts) is float and ts - ts == 0.0):
        return float(ts)
    raise TypeError(f"{source} {ts!r}: an event's ts must be a finite number of seconds")
