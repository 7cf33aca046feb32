"""Property: whatever a session log writes, the reader gives back unchanged."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bus import (
    Agent,
    AgentStatus,
    ContextMessage,
    ContextSource,
    Event,
    SessionLog,
    ToolCall,
    ToolResult,
    UserMessage,
    read_log,
)

_names = itertools.count()

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)

agents = st.one_of(st.none(), st.sampled_from(["main", "sub-1", "é/agent ✓"]), st.text(min_size=1, max_size=12))
stamps = {
    "seq": st.integers(min_value=1, max_value=2**63 - 1),
    "ts": st.floats(min_value=0, max_value=4e9, allow_nan=False),
}


def _with_agent(agent_id: str | None) -> Agent | None:
    return None if agent_id is None else Agent(agent_id)


def _event(cls: type[Event], **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Event]:
    return st.builds(
        lambda agent_id, **kw: cls(agent=_with_agent(agent_id), **kw),
        agent_id=agents,
        **stamps,
        **fields,
    )


call_fields = {
    "call_id": st.text(max_size=20),
    "step": st.integers(min_value=0, max_value=10_000),
    "tool": st.text(max_size=20),
    "args": json_values | st.text(),  # parsed JSON, or the raw string of malformed JSON
}

events: st.SearchStrategy[Event] = st.one_of(
    _event(UserMessage, text=st.text()),
    _event(ToolCall, **call_fields),
    _event(
        ToolResult,
        **call_fields,
        content=st.text(),
        is_error=st.booleans(),
        denied_by=st.none() | st.text(max_size=20),
    ),
    _event(
        AgentStatus,
        status=st.sampled_from(["started", "idle", "disposed", "halt-requested"]) | st.text(max_size=12),
        parent=st.none() | st.text(min_size=1, max_size=12),
        reason=st.none() | st.text(),
    ),
    _event(
        ContextMessage,
        call_id=st.text(max_size=20),
        source=st.builds(ContextSource, plugin=st.text(max_size=20), form=st.text(max_size=10), summary=st.text()),
        text=st.text(),
    ),
)


def _fields(event: Event) -> dict[str, Any]:
    fields = msgspec.structs.asdict(event)
    fields["agent"] = None if event.agent is None else event.agent.id
    return fields


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(written=st.lists(events, max_size=12), session=st.text(min_size=1, max_size=20))
def test_log_round_trips_arbitrary_events_losslessly(tmp_path: Path, written: list[Event], session: str) -> None:
    path = tmp_path / f"roundtrip-{next(_names)}.jsonl"
    with SessionLog(path, session=session) as log:
        for event in written:
            log.write(event)
    reader = read_log(path)
    read = list(reader)
    assert reader.report.skipped == 0
    assert reader.report.session == session
    assert [type(e) for e in read] == [type(e) for e in written]
    for before, after in zip(written, read, strict=True):
        assert _fields(after) == _fields(before)
    handles = {e.agent.id: e.agent for e in read if e.agent is not None}
    assert handles == reader.agents
