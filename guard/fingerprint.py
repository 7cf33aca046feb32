"""Canonical arguments and call fingerprints, shared by every policy.

Two calls are "the same call" when their tool names are equal and their
arguments have the same canonical form: a deep key sort and compact JSON.
Detection compares a fixed-size digest of that form, so per-agent memory does
not grow with argument size; the canonical text itself is only rendered when
a message quotes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from typing import Any

import msgspec

__all__ = ["Fingerprint", "FingerprintCache", "canonical_json", "fingerprint"]


def _stand_in(obj: Any) -> Any:
    """A JSON-able stand-in for a value JSON cannot carry, stable across runs."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    dump = getattr(obj, "model_dump", None)  # pydantic models
    if callable(dump):
        return dump()
    fields = getattr(obj, "__dict__", None)
    if isinstance(fields, dict) and fields:
        return {"__type__": type(obj).__qualname__, **{str(k): v for k, v in fields.items()}}
    # The default repr carries a memory address, which is not stable.
    if getattr(type(obj), "__repr__", None) is getattr(object, "__repr__", None):
        return f"<{type(obj).__qualname__}>"
    return f"<{type(obj).__qualname__}: {obj!r}>"


_sorted_encoder = msgspec.json.Encoder(order="sorted", enc_hook=_stand_in)


def _normalize(value: Any) -> Any:
    """Rewrite what the fast encoder refuses (non-string keys, mixed sets)
    into plain JSON shapes, deterministically."""
    if isinstance(value, dict):
        items = sorted(((_key(k), type(k).__name__, v) for k, v in value.items()), key=lambda t: (t[0], t[1]))
        return {k: _normalize(v) for k, _, v in items}
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return [_normalize(v) for v in sorted(value, key=canonical_json)]
    return value


def _key(key: Any) -> str:
    return key if isinstance(key, str) else canonical_json(key).decode()


def canonical_json(value: Any) -> bytes:
    """The canonical JSON of ``value``: keys sorted at every depth, no spaces.

    A raw string (the runtime's fallback for malformed argument JSON) is
    encoded as a JSON string. Values JSON cannot carry (bytes, tuples, sets,
    datetimes, NaN, arbitrary objects) get a deterministic form; this never
    raises.
    """
    try:
        return _sorted_encoder.encode(value)
    except (TypeError, ValueError, msgspec.EncodeError):
        pass
    try:
        return _sorted_encoder.encode(_normalize(value))
    except (TypeError, ValueError, msgspec.EncodeError, RecursionError):
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
        return f"{text[:limit]}… (+{len(text) - limit} more chars)"


def fingerprint(tool: str, args: Any, ignore: Iterable[str] = ()) -> Fingerprint:
    """Fingerprint a call; top-level keys in ``ignore`` are left out of it."""
    ignored = frozenset(ignore)
    if ignored and isinstance(args, dict):
        args = {k: v for k, v in args.items() if k not in ignored}
    canonical = canonical_json(args)
    digest = hashlib.blake2b(tool.encode("utf-8", "surrogatepass"), digest_size=16)
    digest.update(b"\x00")
    digest.update(canonical)
    return Fingerprint(digest.digest(), canonical)


class FingerprintCache:
    """Remembers the last few fingerprints by argument identity, so a call and
    its result (which share one ``args`` object) are canonicalized once even
    when several policies look at both."""

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._entries: dict[tuple[str, int, frozenset[str]], tuple[Any, Fingerprint]] = {}

    def get(self, tool: str, args: Any, ignore: frozenset[str] = frozenset()) -> Fingerprint:
        key = (tool, id(args), ignore)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is args:
            return entry[1]
        result = fingerprint(tool, args, ignore)
        if len(self._entries) >= self._size:
            self._entries.clear()
        self._entries[key] = (args, result)
        return result
