"""Canonical arguments and call fingerprints, shared by every policy.

Two calls are "the same call" when their tool names are equal and their
arguments have the same canonical form: a deep key sort and compact JSON.
Detection compares a fixed-size digest of that form, so per-agent memory does
not grow with argument size; the canonical text itself is only rendered when
a message quotes it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import msgspec

from bus._codec import ARGS_NESTING, NATIVE_LEAVES, as_logged, encoded, logged_key, ordered, stand_in, too_deep
from guard._regex import lazy_compile
from guard._text import cut_note

__all__ = ["Fingerprint", "FingerprintCache", "canonical_json", "fingerprint"]


# Values JSON cannot carry read as the session log writes them (``stand_in``).
_sorted_encoder = msgspec.json.Encoder(order="sorted", enc_hook=stand_in)

_LEAVES = (bool, int, float, type(None), *NATIVE_LEAVES)
"""Values the encoder writes natively and that hold no other value."""


def _normalize(value: Any, path: set[int]) -> Any:
    """Rewrite what the fast encoder refuses into plain JSON shapes,
    deterministically and as the session log writes them, so a replay of
    the log fingerprints what the guard saw: a key that is not text
    (``logged_key``), a set (a list, ``ordered``), a string with lone
    surrogates (``\\uXXXX`` text), an integer too long for decimal (hex
    text), any other object (``stand_in``). A container met again inside
    itself becomes ``"<recursive list>"`` (its type), as the log writes it."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return as_logged(value)  # too many digits for decimal: the hex text the session log writes
    if isinstance(value, _LEAVES):
        return value
    if id(value) in path:
        return f"<recursive {type(value).__qualname__}>"
    path.add(id(value))
    try:
        if isinstance(value, dict):
            items = sorted(((logged_key(k), type(k).__name__, v) for k, v in value.items()), key=lambda t: t[:2])
            return {k: _normalize(v, path) for k, _, v in items}
        if isinstance(value, (list, tuple)):
            return [_normalize(v, path) for v in value]
        if isinstance(value, (set, frozenset)):
            return ordered([_normalize(v, path) for v in value])
        return _normalize(stand_in(value), path)
    finally:
        path.discard(id(value))


def _text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: the backslash text the session log writes
        return str(as_logged(text))
    return text


def canonical_json(value: Any) -> bytes:
    """The canonical JSON of ``value``, a call's arguments: keys sorted at
    every depth, no spaces.

    A raw string (the runtime's fallback for malformed argument JSON) is
    encoded as a JSON string. Values JSON cannot carry (bytes, tuples, sets,
    datetimes, NaN, arbitrary objects) get a deterministic form, and what
    nests deeper than a log line keeps arguments (``ARGS_NESTING``) is cut
    as the log cuts it, so a replay fingerprints what the guard saw; this
    never raises.
    """
    try:
        data = encoded(value, _sorted_encoder)
    except MemoryError:  # no stand-in for what the guard could not read: the caller says so
        raise
    except Exception:
        data = _normalized(value)
    if len(data) > 2 * ARGS_NESTING and too_deep(data, ARGS_NESTING):
        data = _normalized(value, cut=True)
    return data


def _normalized(value: Any, *, cut: bool = False) -> bytes:
    """The canonical JSON of ``value`` through ``_normalize``; when that
    fails (too deep, a value that raises on being looked at), of the value
    the log writes for it (``as_logged``)."""
    try:
        if cut:
            value = as_logged(value, depth=1)
        return encoded(_normalize(value, set()), _sorted_encoder)
    except MemoryError:
        raise
    except Exception:
        if not cut:
            return _normalized(value, cut=True)
    return _sorted_encoder.encode(f"<unencodable {type(value).__qualname__}>")


class Fingerprint(msgspec.Struct, frozen=True):
    """A call's identity: ``digest`` for comparing, ``canonical`` for quoting."""

    digest: bytes
    canonical: bytes

    def preview(self, limit: int) -> str:
        """The canonical arguments, head-truncated to ``limit`` characters
        with a ``… (+N more chars)`` marker when cut."""
        text = self.canonical.decode("utf-8", "replace")
        if len(text) <= limit:
            return text
        return text[:limit] + cut_note(len(text) - limit)


def fingerprint(tool: str, args: Any, ignore: Iterable[str] = ()) -> Fingerprint:
    """Fingerprint a call; top-level keys in ``ignore`` (names, or one name
    given as a ``str``) are left out of it (``_compared``)."""
    if ignore and isinstance(args, dict):
        ignored = frozenset((ignore,)) if isinstance(ignore, str) else ignore
        args = _compared(tool, args, ignored if isinstance(ignored, (frozenset, set)) else frozenset(ignored))
    canonical = canonical_json(args)
    name = tool.encode("utf-8", "surrogatepass")
    digest = _BLAKE2B_16.copy()  # copying a prepared hasher is cheaper than building one
    if len(canonical) <= _JOIN_LIMIT:  # one short buffer hashes faster than three updates
        digest.update(b"%s\x00%s" % (name, canonical))
    else:  # no copy of a large argument
        digest.update(name)
        digest.update(b"\x00")
        digest.update(canonical)
    return Fingerprint(digest.digest(), canonical)


def _compared(tool: str, args: dict[Any, Any], ignored: frozenset[str] | set[str]) -> dict[Any, Any]:
    """``args`` without the keys in ``ignored``, which say why a call is
    made (a Bash ``description``, a ``thought``), unless they are what it
    carries: the only keys it has (``think``'s ``thought``; not a harness's
    own ``_i`` or ``task_progress``), one the tool's
    own name names (``jira_add_comment``'s ``comment``,
    ``set_description``'s ``description``), or a ``description``,
    ``comment`` or ``metadata`` given to a tool whose name says it writes
    (``create_task``, ``update_ticket``)."""
    kept = {k: v for k, v in args.items() if k not in ignored}
    if len(kept) == len(args):
        return args
    if not kept and _CARRIED_ALONE.issuperset(args):
        return args
    named = _name_words(tool)
    writes = not named.isdisjoint(_WRITING_WORDS)
    carried = {k for k in args if k in ignored and (k.strip("_").lower() in named or (writes and k in _PAYLOAD_KEYS))}
    return {k: v for k, v in args.items() if k not in ignored or k in carried} if carried else kept


_WRITING_WORDS = frozenset(
    {"add", "append", "comment", "create", "edit", "insert", "new", "post", "publish", "put", "reply", "send", "set"}
    | {"submit", "update", "upload", "write"}
)
"""Words of a tool's name that say it writes what it is given."""
_PAYLOAD_KEYS = frozenset({"description", "comment", "metadata"})
"""Reason fields that are also what such a tool writes; a harness's own
(``task_progress``, ``__intent``) never are."""
_CARRIED_ALONE = _PAYLOAD_KEYS | {"thought", "reasoning"}
"""Reason fields that, as all a call holds, are what it carries (``think``'s
``thought``); a harness's own field alone (``_i``) is still its noise."""


@functools.lru_cache(maxsize=1024)
def _name_words(tool: str) -> frozenset[str]:
    """The words of ``tool``'s own name, lower case, read once per name
    (an unchanging answer, like a compiled pattern)."""
    return frozenset(word.lower() for word in _NAME_WORDS.findall(tool.rpartition("__")[2] or tool))


_NAME_WORDS = lazy_compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_JOIN_LIMIT = 1 << 16
try:
    # hashlib's own BLAKE2; importing hashlib itself also loads OpenSSL, about
    # 2 ms of every command hook start.
    from _blake2 import blake2b as blake2b
except ImportError:  # pragma: no cover - an interpreter without CPython's _blake2
    from hashlib import blake2b as blake2b

_BLAKE2B_16 = blake2b(digest_size=16)
_NO_KEYS: frozenset[str] = frozenset()


def _equal(cached: Any, args: Any) -> bool:
    """Whether two copies of a call's arguments are equal; a value whose
    comparison fails (an array's ambiguous truth) is no match."""
    try:
        return bool(cached == args)
    except Exception:
        return False


class FingerprintCache:
    """Remembers the last few fingerprints by call, so a call and its result
    are canonicalized once even when several policies look at both: whether
    they share one ``args`` object (a runtime's own loop) or hold equal
    copies (a hook's two payloads, a replayed log's two lines).

    Pass the event's ``call_id``: a runtime may reuse one ``args`` object and
    mutate it between calls, and only a call and its own result are certain
    to hold the same arguments. An ``ignore`` set none of whose keys the
    arguments hold gives the fingerprint of ignoring nothing, and shares its
    entry. Memory is bounded by ``size`` entries; a cache of size 0 keeps
    none and fingerprints every time (where no lookup could hit, it costs
    only the fingerprint).
    """

    def __init__(self, size: int = 8) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"FingerprintCache(size=...) must be an integer >= 0, got {size!r}")
        self._size = size
        self._entries: dict[tuple[str, str | None, frozenset[str]], tuple[Any, Fingerprint]] = {}

    def get(
        self, tool: str, args: Any, ignore: frozenset[str] = _NO_KEYS, *, call_id: str | None = None
    ) -> Fingerprint:
        if not self._size:
            return fingerprint(tool, args, ignore)
        if ignore and (not isinstance(args, dict) or ignore.isdisjoint(args)):
            ignore = _NO_KEYS
        key = (tool, call_id, ignore)
        entry = self._entries.get(key)
        if entry is not None and (entry[0] is args or _equal(entry[0], args)):
            return entry[1]
        result = fingerprint(tool, args, ignore)
        if len(self._entries) >= self._size:
            self._entries.clear()
        self._entries[key] = (args, result)
        return result
