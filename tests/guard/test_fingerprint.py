"""Canonical arguments and call fingerprints (seed 000: deep key sort + compact JSON)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import importlib
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bus import Agent, SessionLog, ToolCall, read_log
from guard import DEFAULT_IGNORED_ARGS, FingerprintCache, canonical_json, fingerprint

# the package re-exports the function ``fingerprint`` under the module's name
fingerprint_module = importlib.import_module("guard.fingerprint")

_numbers = st.integers() | st.floats(allow_nan=False, allow_infinity=False)
_json_leaves = st.none() | st.booleans() | _numbers | st.text(max_size=8)
json_values = st.recursive(
    _json_leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


def _reorder(value: Any, data: st.DataObject) -> Any:
    """The same value with every dict's keys in a random order, at every depth."""
    if isinstance(value, dict):
        keys = data.draw(st.permutations(list(value)))
        return {k: _reorder(value[k], data) for k in keys}
    if isinstance(value, list):
        return [_reorder(v, data) for v in value]
    return value


@given(json_values, st.data())
def test_canonical_form_is_invariant_under_key_order_at_any_depth(value: Any, data: st.DataObject) -> None:
    shuffled = _reorder(value, data)
    assert canonical_json(shuffled) == canonical_json(value)
    assert fingerprint("t", shuffled).digest == fingerprint("t", value).digest


@given(json_values)
def test_canonical_form_is_compact_sorted_json_of_the_same_value(value: Any) -> None:
    encoded = canonical_json(value)
    assert msgspec.json.decode(encoded) == value
    assert encoded == msgspec.json.encode(value, order="sorted")


def test_canonical_form_sorts_keys_at_depth_without_spaces() -> None:
    value = {"b": {"z": 1, "a": [{"y": 2, "x": 3}]}, "a": None}
    assert canonical_json(value) == b'{"a":null,"b":{"a":[{"x":3,"y":2}],"z":1}}'


def test_raw_string_args_compare_as_that_string() -> None:
    malformed = '{"pattern": "load_config", '
    assert canonical_json(malformed) == msgspec.json.encode(malformed)
    assert fingerprint("grep", malformed).digest == fingerprint("grep", str(malformed)).digest
    # a raw string is never confused with the object it failed to be, nor re-parsed
    assert fingerprint("grep", '{"a":1}').digest != fingerprint("grep", {"a": 1}).digest
    assert fingerprint("grep", '{"b":1,"a":2}').digest != fingerprint("grep", '{"a":2,"b":1}').digest


def test_tool_name_is_part_of_the_fingerprint() -> None:
    assert fingerprint("grep", {"a": 1}).digest != fingerprint("rg", {"a": 1}).digest
    assert len(fingerprint("grep", {"a": 1}).digest) == 16


@dataclasses.dataclass
class _Point:
    y: int
    x: int


class _Struct(msgspec.Struct):
    b: int
    a: int


class _Color(enum.Enum):
    RED = "red"


class _Plain:
    pass


class _WithFields:
    def __init__(self) -> None:
        self.name = "n"
        self.size = 2


class _Reprs:
    def __repr__(self) -> str:
        return "Reprs(7)"


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")


class _Model:
    """Shaped like a pydantic model."""

    def model_dump(self) -> dict[str, Any]:
        return {"k": 1}


class _BrokenModel:
    def model_dump(self) -> dict[str, Any]:
        raise RuntimeError("cannot dump")


def _cyclic_list() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


def _cyclic_object() -> _WithFields:
    obj = _WithFields()
    obj.me = obj  # type: ignore[attr-defined]
    return obj


_NON_JSON: list[tuple[str, Any, bytes]] = [
    ("bytes", b"ab", b'"YWI="'),
    ("bytearray", bytearray(b"ab"), b'"YWI="'),
    ("tuple", (1, "a"), b'[1,"a"]'),
    ("set", {3, 1, 2}, b"[1,2,3]"),
    ("mixed set", {1, "a"}, b'["a",1]'),
    ("frozenset in dict", {"s": frozenset({"b", "a"})}, b'{"s":["a","b"]}'),
    ("datetime", datetime.datetime(2024, 1, 2, 3, 4, 5), b'"2024-01-02T03:04:05"'),
    ("date", datetime.date(2024, 1, 2), b'"2024-01-02"'),
    ("nan", float("nan"), b"null"),
    ("inf", float("inf"), b"null"),
    ("decimal", decimal.Decimal("1.50"), b'"1.50"'),
    ("uuid", uuid.UUID(int=1), b'"00000000-0000-0000-0000-000000000001"'),
    ("enum", _Color.RED, b'"red"'),
    ("big int", 10**30, b"1000000000000000000000000000000"),
    ("int too long for decimal", 10**5000, f'"{hex(10**5000)}"'.encode()),
    ("int key too long for decimal", {10**5000: 1}, f'{{"{hex(10**5000)}":1}}'.encode()),
    ("dataclass", _Point(1, 2), b'{"x":2,"y":1}'),
    ("struct", _Struct(1, 2), b'{"a":2,"b":1}'),
    ("plain object", _Plain(), b'"<_Plain>"'),
    ("object with fields", _WithFields(), b'{"__type__":"_WithFields","name":"n","size":2}'),
    ("object with repr", _Reprs(), b'"<_Reprs: Reprs(7)>"'),
    ("object whose repr raises", _BadRepr(), b'"<_BadRepr>"'),
    ("pydantic-like model", _Model(), b'{"k":1}'),
    ("model whose dump raises", _BrokenModel(), b'"<_BrokenModel>"'),
    ("int keys sort as text", {10: "a", 9: "b"}, b'{"10":"a","9":"b"}'),
    ("mixed keys", {2: 1, "a": {3, "b"}}, b'{"2":1,"a":["b",3]}'),
    ("tuple key", {(1, 2): 3}, b'{"[1,2]":3}'),
    ("a date beside a number key", {1: datetime.date(2024, 1, 2)}, b'{"1":"2024-01-02"}'),
    ("None key", {None: 1}, b'{"null":1}'),
    ("lone surrogate", "\ud800x", b'"\\\\ud800x"'),
    ("lone surrogate at depth", {"k": ["\udfff"]}, b'{"k":["\\\\udfff"]}'),
    ("lone surrogate in a key", {"\ud800": 1}, b'{"\\\\ud800":1}'),
    ("cyclic list", _cyclic_list(), b'[1,"<recursive list>"]'),
    (
        "cyclic object",
        _cyclic_object(),
        b'{"__type__":"_WithFields","me":"<recursive _WithFields>","name":"n","size":2}',
    ),
    ("shared, not cyclic", {"a": [[1], [1]]}, b'{"a":[[1],[1]]}'),
    ("dataclass beside a mixed-key dict", [_Point(1, 2), {1: 1, "1": 2}], b'[{"x":2,"y":1},{"1":2}]'),
    ("struct beside a mixed-key dict", [_Struct(1, 2), {1: 1, "1": 2}], b'[{"a":2,"b":1},{"1":2}]'),
    ("two equal-looking keys", {_Plain(): 1, _Reprs(): 2}, b'{"\\"<_Plain>\\"":1,"\\"<_Reprs: Reprs(7)>\\"":2}'),
]


@pytest.mark.parametrize(("value", "expected"), [(v, e) for _, v, e in _NON_JSON], ids=[n for n, _, _ in _NON_JSON])
def test_values_json_cannot_carry_canonicalize_deterministically(value: Any, expected: bytes) -> None:
    assert canonical_json(value) == expected
    assert canonical_json(value) == expected  # and again: nothing depends on addresses or hash seeds


def test_values_json_cannot_carry_fingerprint_as_the_session_log_reads_them_back(tmp_path: Path) -> None:
    args = {"n": 10**5000, 7**6000: "key", "s": "cut \ud83d", "m": 2**80}
    with SessionLog(tmp_path / "s.jsonl") as log:
        log.write(ToolCall(agent=Agent("a"), seq=1, ts=1.0, call_id="c1", step=1, tool="t", args=args))
    [read_back] = list(read_log(tmp_path / "s.jsonl"))
    assert isinstance(read_back, ToolCall)
    assert fingerprint("t", read_back.args).digest == fingerprint("t", args).digest
    assert fingerprint("t", {**args, "n": 10**5000 + 1}).digest != fingerprint("t", args).digest


def test_distinct_lone_surrogate_strings_stay_distinct() -> None:
    assert fingerprint("t", {"k": "\ud800"}).digest != fingerprint("t", {"k": "\ud801"}).digest


def test_an_unencodable_value_falls_back_to_a_named_placeholder(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(value: Any, path: set[int]) -> Any:
        raise RecursionError("too deep")

    monkeypatch.setattr(fingerprint_module, "_normalize", refuse)
    assert canonical_json({1: "a", "b": 2}) == b'"<unencodable dict>"'


def test_ignored_top_level_keys_leave_the_fingerprint() -> None:
    with_note = fingerprint("bash", {"command": "ls", "description": "list"}, ignore=["description"])
    without = fingerprint("bash", {"command": "ls"})
    assert with_note == without
    assert fingerprint("bash", "raw", ignore=["description"]) == fingerprint("bash", "raw")
    # one name given as a str is that name, not its letters
    assert fingerprint("bash", {"command": "ls", "description": "list"}, ignore="description") == without
    assert fingerprint("bash", {"d": 1, "command": "ls"}, ignore="description") != without


def test_preview_is_head_truncated_with_the_omitted_count() -> None:
    fp = fingerprint("write", {"content": "x" * 400})
    text = fp.canonical.decode()
    assert len(text) == 414
    assert fp.preview(24) == '{"content":"xxxxxxxxxxxx… (+390 more chars)'
    assert fp.preview(414) == text
    assert fp.preview(500) == text


@pytest.fixture
def canonicalized(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The values canonicalized from here on, in order."""
    values: list[Any] = []
    real = fingerprint_module.canonical_json

    def counting(value: Any) -> bytes:
        values.append(value)
        encoded: bytes = real(value)
        return encoded

    monkeypatch.setattr(fingerprint_module, "canonical_json", counting)
    return values


def test_cache_canonicalizes_a_shared_args_object_once(canonicalized: list[Any]) -> None:
    calls = canonicalized
    big = {"content": "x" * 10_000_000}
    cache = FingerprintCache()
    first = cache.get("write", big, call_id="c1")
    assert cache.get("write", big, call_id="c1") is first
    assert len(calls) == 1
    assert cache.get("write", big, frozenset({"content"}), call_id="c1") is not first
    assert len(calls) == 2


def test_cache_canonicalizes_a_call_and_its_results_equal_copy_once(canonicalized: list[Any]) -> None:
    """A hook's PreToolUse and PostToolUse, or a replayed log's call and
    result lines, carry equal arguments in two objects."""
    cache = FingerprintCache()
    first = cache.get("Bash", {"command": "pytest -q", "description": "run the tests"}, call_id="c1")
    again = cache.get("Bash", {"command": "pytest -q", "description": "run the tests"}, call_id="c1")
    other = cache.get("Bash", {"command": "pytest -x", "description": "run the tests"}, call_id="c1")
    assert again is first
    assert other.digest != first.digest
    assert len(canonicalized) == 2


def test_arguments_whose_comparison_fails_are_fingerprinted_again() -> None:
    class Ambiguous:
        def __eq__(self, other: object) -> bool:
            raise ValueError("the truth value of an array is ambiguous")

        __hash__ = object.__hash__

    cache = FingerprintCache()
    first = cache.get("plot", {"data": Ambiguous()}, call_id="c1")
    again = cache.get("plot", {"data": Ambiguous()}, call_id="c1")
    assert again is not first
    assert again.canonical == first.canonical


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("think", {"thought": "the refund needs a supervisor"}),  # all the call says
        ("create_task", {"description": "rotate the keys"}),
        ("jira_add_comment", {"issue_key": "OPS-311", "comment": "deployed to staging"}),  # what its name names
        ("mcp__atlassian__jira_add_comment", {"issue_key": "OPS-311", "comment": "deployed to staging"}),
        ("setDescription", {"id": 7, "description": "rotate the keys"}),
        ("create_task", {"project": "ops", "description": "rotate the keys"}),  # what a writing tool writes
        ("mcp__jira__update_ticket", {"key": "OPS-1", "comment": "deployed"}),
    ],
)
def test_an_ignored_key_that_is_what_the_call_carries_is_compared(tool: str, args: dict[str, object]) -> None:
    """A reason field is left out only beside what the call does: as the
    only argument, or as the thing the tool's name says it writes, it is
    the call's payload, and other values make other calls."""
    other = {**args, next(k for k in args if k in DEFAULT_IGNORED_ARGS): "something else"}
    assert fingerprint(tool, args, ignore=DEFAULT_IGNORED_ARGS) != fingerprint(tool, other, ignore=DEFAULT_IGNORED_ARGS)


@pytest.mark.parametrize(
    ("tool", "args", "reason"),
    [
        ("Bash", {"command": "ls"}, {"description": "List files"}),
        ("write_to_file", {"path": "a.py", "content": "x"}, {"task_progress": "- [x] step 1"}),  # Cline's own
        ("run_shell_command", {"command": "ls"}, {"description": "List files"}),
        ("check_queue", {}, {"_i": "look at the queue again"}),  # a harness's own field, alone
        ("check_queue", {}, {"task_progress": "- [ ] wait"}),
    ],
)
def test_a_reason_beside_what_the_call_does_is_left_out(
    tool: str, args: dict[str, object], reason: dict[str, object]
) -> None:
    assert fingerprint(tool, {**args, **reason}, ignore=DEFAULT_IGNORED_ARGS) == fingerprint(tool, args)


def test_an_ignored_key_the_arguments_do_not_hold_shares_the_plain_fingerprint() -> None:
    cache = FingerprintCache()
    plain = cache.get("Read", {"file_path": "a.py"}, call_id="c1")
    assert cache.get("Read", {"file_path": "a.py"}, frozenset({"description"}), call_id="c1") is plain
    ignoring = cache.get("Bash", {"command": "ls", "description": "list"}, frozenset({"description"}), call_id="c2")
    assert ignoring == fingerprint("Bash", {"command": "ls"})
    assert cache.get("Bash", {"command": "ls", "description": "list"}, call_id="c2") != ignoring


def test_cache_does_not_trust_a_reused_args_object_across_calls() -> None:
    args = {"i": 1}
    cache = FingerprintCache()
    first = cache.get("poll", args, call_id="c1")
    args["i"] = 2  # a runtime that mutates one dict between calls
    second = cache.get("poll", args, call_id="c2")
    assert first.digest != second.digest
    assert second == fingerprint("poll", {"i": 2})


def test_cache_memory_is_bounded() -> None:
    cache = FingerprintCache(size=2)
    values = [{"i": i} for i in range(5)]
    for i, v in enumerate(values):
        cache.get("t", v, call_id=f"c{i}")
    assert len(cache._entries) <= 2
    assert cache.get("t", values[4], call_id="c4") == fingerprint("t", {"i": 4})


@pytest.mark.parametrize("depth", [97, 98, 99, 150, 5000])
def test_arguments_nested_deeper_than_a_log_line_keeps_are_fingerprinted_as_it_keeps_them(depth: int) -> None:
    from bus import Agent, ToolCall
    from bus._codec import encode_line, logged_args

    def nested(leaf: str) -> Any:
        value: Any = leaf
        for _ in range(depth):
            value = [value]
        return value

    args = {"a": nested("leaf"), "b": {1, 2}}
    line = bytearray()
    encode_line(ToolCall(agent=Agent("main"), call_id="c1", step=1, tool="t", args=args), line)
    read_back = msgspec.json.decode(bytes(line))["args"]

    assert canonical_json(args) == canonical_json(read_back), "a replay of the log fingerprints what the guard saw"
    assert logged_args(args) == read_back if depth > 98 else logged_args(args) is args
    differing_deep_down = {"a": nested("other leaf"), "b": {1, 2}}
    assert (canonical_json(args) == canonical_json(differing_deep_down)) is (depth > 98)


def test_arguments_json_cannot_carry_are_logged_args_as_the_log_writes_them() -> None:
    from bus._codec import logged_args

    assert logged_args({"a": "cut\ud800"}) == {"a": "cut\\ud800"}


@pytest.mark.parametrize("size", ["x", -1, True, 2.5])
def test_a_cache_size_that_is_no_count_is_refused_naming_it(size: Any) -> None:
    with pytest.raises(ValueError, match=r"FingerprintCache\(size=\.\.\.\) must be an integer >= 0, got "):
        FingerprintCache(size=size)
