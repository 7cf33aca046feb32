"""POST /v1/sessions/{session}/events over real HTTP: what a runtime in any
language posts and what it gets back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from bus import AgentStatus, ContextMessage, ToolCall, ToolResult, UserMessage, read_log
from guard import GENTLE_REMINDER, TURNS_HALT_REASON, Config, RemindConfig, RescueConfig, TurnsConfig
from guard.actions import SHADOW_FORM
from guard.config import load_config
from guard.server.sessions import Session
from guard.verdicts import replay_log
from tests.guard.adapters.conftest import RESCUE_DENIED, TURNS_DENIED
from tests.guard.server.conftest import MakeServed, Served

GREP = {"tool": "grep", "args": {"pattern": "load_config"}}
JSON = {"content-type": "application/json"}


def call_and_result(served: Served, session: str, call_id: str, agent: str = "main") -> dict[str, Any]:
    """A tool call the guard allows and its result; the result's answer."""
    answer = served.event(session, type="tool/call", agent=agent, call_id=call_id, **GREP)
    assert answer["allowed"] is True
    return served.event(session, type="tool/result", agent=agent, call_id=call_id, content="src/cfg.py:12")


def events_of(path: Path) -> list[Any]:
    with read_log(path) as reader:
        return list(reader)


def check_replays(path: Path, config: Config | None = None) -> None:
    outcome = anyio.run(replay_log, path, config)
    assert outcome.report.skipped == 0
    assert outcome.differences == []


def test_the_third_identical_result_answers_with_the_reminder_to_show_the_model(served: Served) -> None:
    answers = [call_and_result(served, "s1", f"c{n}") for n in range(1, 4)]
    assert [a["messages"] for a in answers[:2]] == [[], []]
    (message,) = answers[2]["messages"]
    assert message["type"] == "context/message"
    assert message["text"] == GENTLE_REMINDER
    assert message["call_id"] == "c3"
    assert message["agent"] == "main"
    assert message["source"] == {
        "kind": "plugin",
        "plugin": "repeat-tool-reminder",
        "form": "notice",
        "summary": "grep × 3",
    }
    assert answers[2]["allowed"] is None
    assert answers[2]["halt"] is None
    # the answer's seqs are the events' places in the session log
    log = served.state_dir / "s1.jsonl"
    by_seq = {e.seq: e for e in events_of(log)}
    assert type(by_seq[answers[2]["seq"]]) is ToolResult
    assert type(by_seq[message["seq"]]) is ContextMessage
    check_replays(log)


def test_every_event_lands_in_the_session_log_and_replay_check_passes(served: Served) -> None:
    served.event("s2", type="agent/status", agent="main", status="started")
    served.event("s2", type="user/message", agent="main", text="find the config loader")
    for n in range(5):
        call_and_result(served, "s2", f"c{n}")
    served.event("s2", type="agent/status", agent="main", status="idle")
    log = served.state_dir / "s2.jsonl"
    kinds = [(type(e).__name__, getattr(e, "status", None)) for e in events_of(log)]
    assert kinds[:2] == [("AgentStatus", "started"), ("UserMessage", None)]
    assert kinds[-1] == ("AgentStatus", "idle")
    assert kinds.count(("ContextMessage", None)) == 2  # reminders at 3 and 5
    check_replays(log)


def test_a_denied_call_is_answered_not_allowed_and_its_denial_is_its_recorded_result(
    make_served: MakeServed, missing_ask_command: str
) -> None:
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=missing_ask_command))
    served = make_served(config)
    answers = [served.event("s", type="tool/call", agent="main", call_id=f"c{n}", **GREP) for n in range(1, 4)]
    for n in (1, 2):
        served.event("s", type="tool/result", agent="main", call_id=f"c{n}", content="src/cfg.py:12")
    denied = answers[2]
    assert denied["allowed"] is False
    assert denied["reason"].startswith(RESCUE_DENIED)
    results = [e for e in events_of(served.state_dir / "s.jsonl") if type(e) is ToolResult]
    assert [(r.call_id, r.denied_by) for r in results] == [("c3", "loop-rescue"), ("c1", None), ("c2", None)]
    assert results[0].content == denied["reason"]
    # posting a result for the denied call would count it twice
    response = served.post("/v1/sessions/s/events", {"type": "tool/result", "agent": "main", "call_id": "c3"})
    assert response.status_code == 409
    assert response.json() == {"error": "call 'c3' of agent 'main' was denied; its denial is already its result"}
    check_replays(served.state_dir / "s.jsonl", config)


def test_a_denied_calls_id_is_free_for_a_new_call_and_a_copy_of_the_denied_call_gets_its_denial(
    make_served: MakeServed, missing_ask_command: str
) -> None:
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=missing_ask_command))
    served = make_served(config)
    for n in (1, 2):
        served.event("r", type="tool/call", agent="main", call_id=f"c{n}", **GREP)
        served.event("r", type="tool/result", agent="main", call_id=f"c{n}", content="src/cfg.py:12")
    denied = served.event("r", type="tool/call", agent="main", call_id="call_0", **GREP)
    assert denied["allowed"] is False
    assert served.event("r", type="tool/call", agent="main", call_id="call_0", **GREP) == denied  # a copy
    fresh = served.event("r", type="tool/call", agent="main", call_id="call_0", tool="ls", args={"path": "."})
    assert fresh["allowed"] is True  # a runtime numbering calls per response uses call_0 again
    assert fresh["seq"] > denied["seq"]
    assert served.event("r", type="tool/call", agent="main", call_id="call_0", tool="ls", args={"path": "."}) == fresh
    served.event("r", type="tool/result", agent="main", call_id="call_0", content="a.py b.py")
    again = served.event("r", type="tool/call", agent="main", call_id="call_1", **GREP)
    assert again["allowed"] is False
    log = served.state_dir / "r.jsonl"
    calls = [(e.call_id, e.tool) for e in events_of(log) if type(e) is ToolCall]
    assert calls == [("c1", "grep"), ("c2", "grep"), ("call_0", "grep"), ("call_0", "ls"), ("call_1", "grep")]
    check_replays(log, config)

    served.stop()  # a new server recalls the denials from the log
    restarted = make_served(config, state_dir=served.state_dir)
    assert restarted.event("r", type="tool/call", agent="main", call_id="call_1", **GREP) == again
    reused = restarted.event("r", type="tool/call", agent="main", call_id="call_1", tool="ls", args={"path": "src"})
    assert reused["allowed"] is True
    assert [e.tool for e in events_of(log) if type(e) is ToolCall][-1] == "ls"
    check_replays(log, config)


def test_halt_is_answered_until_the_next_user_message(make_served: MakeServed) -> None:
    config = Config(remind=RemindConfig(enabled=False), turns=TurnsConfig(threshold=2, deny_after=1, halt_after=1))
    served = make_served(config)
    answers = []
    for n in range(1, 5):  # one call per model response: the same call on consecutive turns
        answers.append(served.event("t", type="tool/call", agent="main", call_id=f"c{n}", **GREP))
        if answers[-1]["allowed"]:
            served.event("t", type="tool/result", agent="main", call_id=f"c{n}", content="no match")
    assert [a["allowed"] for a in answers] == [True, True, False, False]
    assert answers[2]["reason"].startswith(TURNS_DENIED)
    assert answers[2]["halt"] is None
    halt = answers[3]["halt"]
    assert halt is not None
    assert halt["reason"] == TURNS_HALT_REASON.format(tool="grep", count=4, denials=" and 2 denied calls")
    # the halt stays in force for whatever the runtime still posts, until the user speaks
    assert served.event("t", type="agent/status", agent="main", status="idle")["halt"] == halt
    assert served.event("t", type="user/message", agent="main", text="try the docs instead")["halt"] is None
    check_replays(served.state_dir / "t.jsonl", config)


def test_a_retry_after_a_restore_carries_no_halt_an_agents_new_life_ended(make_served: MakeServed) -> None:
    config = Config(remind=RemindConfig(enabled=False), turns=TurnsConfig(threshold=2, deny_after=1, halt_after=1))
    served = make_served(config)
    for n in range(1, 5):
        if served.event("h", type="tool/call", agent="main", call_id=f"c{n}", **GREP)["allowed"]:
            served.event("h", type="tool/result", agent="main", call_id=f"c{n}", content="no match")
    served.event("h", type="agent/status", agent="main", status="disposed")
    served.event("h", type="agent/status", agent="main", status="started")
    first = served.event("h", type="tool/call", agent="main", call_id="n1", tool="ls", args={})
    assert first["halt"] is None
    served.stop()  # a new server rebuilds the session's answers from its log
    restarted = make_served(config, state_dir=served.state_dir)
    assert restarted.event("h", type="tool/call", agent="main", call_id="n1", tool="ls", args={}) == first


def test_parallel_calls_share_a_step_and_an_explicit_step_is_kept(served: Served) -> None:
    for call_id in ("a", "b"):
        served.event("p", type="tool/call", agent="main", call_id=call_id, tool="read", args={"path": call_id})
    for call_id in ("a", "b"):
        served.event("p", type="tool/result", agent="main", call_id=call_id, content="text")
    served.event("p", type="tool/call", agent="main", call_id="c", tool="read", args={"path": "c"})
    served.event("p", type="tool/call", agent="main", call_id="d", step=7, tool="read", args={"path": "d"})
    calls = [e for e in events_of(served.state_dir / "p.jsonl") if type(e) is ToolCall]
    assert [(c.call_id, c.step) for c in calls] == [("a", 1), ("b", 1), ("c", 2), ("d", 7)]


def test_a_result_whose_call_was_never_posted_counts_as_its_call(served: Served) -> None:
    answers = [
        served.event("r", type="tool/result", agent="main", call_id=f"c{n}", content="x", **GREP) for n in range(3)
    ]
    assert [len(a["messages"]) for a in answers] == [0, 0, 1]
    events = events_of(served.state_dir / "r.jsonl")
    assert [type(e).__name__ for e in events[1:3]] == ["ToolCall", "ToolResult"]
    check_replays(served.state_dir / "r.jsonl")


def test_results_whose_calls_were_never_posted_are_late_calls_never_denied_and_replay_alike(
    make_served: MakeServed,
) -> None:
    config = load_config("recommended")
    served = make_served(config)
    answers = [
        served.event("late", type="tool/result", agent="main", call_id=f"c{n}", content="x", **GREP) for n in range(6)
    ]
    assert all(a["allowed"] is None for a in answers), "a result is answered, never allowed or denied"
    events = events_of(served.state_dir / "late.jsonl")
    assert [c.late for c in events if type(c) is ToolCall] == [True] * 6
    shadowed = [e for e in events if type(e) is ContextMessage and e.source.form == SHADOW_FORM]
    assert shadowed, "what would have been denied is recorded"
    check_replays(served.state_dir / "late.jsonl", config)


@pytest.mark.parametrize("restart", [False, True])
def test_a_call_posted_after_its_own_result_is_that_call_not_another(make_served: MakeServed, restart: bool) -> None:
    served = make_served()
    answers = []
    for n in range(3):  # a pipeline that delivers each result before its call
        served.event("ooo", type="tool/result", agent="main", call_id=f"c{n}", content="same", **GREP)
        if restart:
            served.stop()
            served = make_served(state_dir=served.state_dir)
        answers.append(served.event("ooo", type="tool/call", agent="main", call_id=f"c{n}", **GREP))
    assert [a["allowed"] for a in answers] == [True] * 3, "it ran already"
    events = events_of(served.state_dir / "ooo.jsonl")
    assert [(type(e).__name__, e.call_id) for e in events if type(e) in (ToolCall, ToolResult)] == [
        (kind, f"c{n}") for n in range(3) for kind in ("ToolCall", "ToolResult")
    ], "each call recorded once, from its result"
    [reminder] = [e for e in events if type(e) is ContextMessage]
    assert reminder.source.summary == "grep × 3"
    assert served.event("ooo", type="tool/call", agent="main", call_id="c2", **GREP) == answers[-1], "a retry too"
    served.event("ooo", type="tool/call", agent="main", call_id="d1", tool="ls", args={})
    served.event("ooo", type="tool/result", agent="main", call_id="d1", content="x")
    again = served.event("ooo", type="tool/call", agent="main", call_id="c2", **GREP)  # after other events: new
    assert again["seq"] > answers[-1]["seq"]
    check_replays(served.state_dir / "ooo.jsonl")


def test_a_result_denied_by_the_runtime_itself_is_recorded_as_such(served: Served) -> None:
    served.event("d", type="tool/call", agent="main", call_id="c1", tool="rm", args={"path": "/"})
    served.event("d", type="tool/result", agent="main", call_id="c1", content="permission denied", denied_by="sandbox")
    (result,) = [e for e in events_of(served.state_dir / "d.jsonl") if type(e) is ToolResult]
    assert (result.denied_by, result.content, result.is_error) == ("sandbox", "permission denied", True)


@pytest.mark.parametrize("by", ["repeat-tool-reminder", "repeat-tool-guard/halted", ""])
def test_a_result_may_not_claim_a_denial_of_the_guards_own(served: Served, by: str) -> None:
    served.event("spoof", type="tool/call", agent="main", call_id="c1", tool="grep", args={})
    response = served.client.post(
        "/v1/sessions/spoof/events",
        json={"type": "tool/result", "agent": "main", "call_id": "c1", "content": "blocked", "denied_by": by},
    )
    assert response.status_code == 422
    assert "denied_by" in response.json()["error"]
    served.event("spoof", type="tool/result", agent="main", call_id="c1", content="ok")  # the call is still open
    check_replays(served.state_dir / "spoof.jsonl", Config())
    ghost = served.client.post(  # an agent the session never saw: refused before it is started
        "/v1/sessions/spoof/events",
        json={"type": "tool/result", "agent": "ghost", "call_id": "c9", "content": "x", "denied_by": by},
    )
    assert ghost.status_code == 422
    assert all(e.agent is None or e.agent.id != "ghost" for e in events_of(served.state_dir / "spoof.jsonl"))


def test_a_subagent_has_its_own_counts_and_its_disposal_drops_them(served: Served) -> None:
    served.event("sub", type="agent/status", agent="main", status="started")
    served.event("sub", type="agent/status", agent="helper", status="started", parent="main")
    for n in range(2):
        call_and_result(served, "sub", f"m{n}", agent="main")
        call_and_result(served, "sub", f"h{n}", agent="helper")
    assert call_and_result(served, "sub", "h2", agent="helper")["messages"][0]["agent"] == "helper"
    served.event("sub", type="agent/status", agent="helper", status="disposed")
    events = events_of(served.state_dir / "sub.jsonl")
    statuses = [(e.agent and e.agent.id, e.status, e.parent) for e in events if type(e) is AgentStatus]
    assert statuses == [("main", "started", None), ("helper", "started", "main"), ("helper", "disposed", None)]
    # a new agent of the same id starts from nothing
    assert call_and_result(served, "sub", "h3", agent="helper")["messages"] == []


def test_a_session_whose_agents_are_all_disposed_leaves_memory_and_comes_back_from_its_log(served: Served) -> None:
    call_and_result(served, "end", "c1")
    served.event("end", type="agent/status", agent="main", status="disposed")
    assert "end" not in served.store
    assert served.client.get("/healthz").json() == {"status": "ok", "sessions": 0}
    served.event("end", type="user/message", agent="main", text="again")
    assert "end" in served.store
    check_replays(served.state_dir / "end.jsonl")


def test_a_lone_surrogate_is_read_as_the_log_writes_it(served: Served) -> None:
    body = b'{"type": "user/message", "agent": "main", "text": "cut mid-emoji \\ud83d"}'
    response = served.client.post("/v1/sessions/cut/events", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    (message,) = [e for e in events_of(served.state_dir / "cut.jsonl") if type(e) is UserMessage]
    assert message.text == "cut mid-emoji \\ud83d"
    bad = b'{"type": "user/message", "text": "\\ud83d", "agent": ""}'
    response = served.client.post("/v1/sessions/cut/events", content=bad, headers={"content-type": "application/json"})
    assert response.status_code == 422, "read leniently, then checked as strictly"


def test_a_number_out_of_range_is_refused_whatever_else_the_body_holds(served: Served) -> None:
    """A lone surrogate takes a body through the lenient reader, which must
    not take what the strict one refuses (1e999 would be logged as null)."""
    answers = []
    for tool in (b"grep", b"grep \\ud83d"):
        body = b'{"type": "tool/call", "agent": "main", "call_id": "c1", "tool": "%s", "args": {"x": 1e999}}' % tool
        response = served.client.post(
            "/v1/sessions/big/events", content=body, headers={"content-type": "application/json"}
        )
        answers.append((response.status_code, "out of range" in response.json()["error"].lower()))
    assert answers == [(422, True), (422, True)]
    body = b'{"type": "tool/call", "agent": "main", "call_id": "c1", "tool": "grep \\ud83d", "args": {"x": 1.5}}'
    response = served.client.post("/v1/sessions/big/events", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200, "a number in range is taken"
    log = served.state_dir / "big.jsonl"
    assert [e.args for e in events_of(log) if type(e) is ToolCall] == [{"x": 1.5}], "nothing else recorded"


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b"{nope", 400, "body is not JSON: JSON is malformed: object keys must be strings (byte 1)"),
        (b'{"type": "tool/call"}', 422, "invalid event: Object missing required field `agent`"),
        (
            b'{"type": "context/message", "agent": "main"}',
            422,
            "invalid event: Invalid value 'context/message' - at `$.type`",
        ),
        (
            b'{"type": "user/message", "agent": "", "text": "hi"}',
            422,
            "invalid event: Expected `str` of length >= 1 - at `$.agent`",
        ),
        (
            b'{"type": "user/message", "agent": "main", "text": "hi", "seq": 3}',
            422,
            "invalid event: Object contains unknown field `seq`",
        ),
        (
            b'{"type": "agent/status", "agent": "main", "status": "halt-requested"}',
            422,
            "invalid event: Invalid enum value 'halt-requested' - at `$.status`",
        ),
        (
            b'{"type": "tool/call", "agent": "main", "call_id": "c", "tool": "grep", "step": 0}',
            422,
            "invalid event: Expected `int` >= 1 - at `$.step`",
        ),
        (
            b'{"type": "tool/result", "agent": "main", "call_id": "c9", "content": "x"}',
            422,
            "result of call 'c9' was never posted as a call: it needs its tool",
        ),
        (
            b'{"type": "agent/status", "agent": "ghost", "status": "disposed"}',
            409,
            "agent 'ghost' is not live in session 'bad'",
        ),
        (
            b'{"type": "agent/status", "agent": "sub", "status": "started", "parent": "ghost"}',
            409,
            "parent agent 'ghost' is not live in session 'bad'",
        ),
    ],
)
def test_malformed_or_contradicting_events_get_a_4xx_with_one_line_saying_why(
    served: Served, body: bytes, status: int, error: str
) -> None:
    response = served.post("/v1/sessions/bad/events", content=body, headers=JSON)
    assert (response.status_code, response.json()) == (status, {"error": error})
    assert response.headers["content-type"] == "application/json"


def test_conflicts_with_the_sessions_state_are_409(served: Served) -> None:
    served.event("k", type="agent/status", agent="main", status="started")
    again = served.post("/v1/sessions/k/events", {"type": "agent/status", "agent": "main", "status": "started"})
    assert again.status_code == 409
    assert again.json() == {"error": "agent 'main' is already started in session 'k'"}
    served.event("k", type="tool/call", agent="main", call_id="c1", tool="ls")
    served.store._live["k"].answers.clear()  # a retry too late to be recognised as one
    twice = served.post("/v1/sessions/k/events", {"type": "tool/call", "agent": "main", "call_id": "c1", "tool": "ls"})
    assert twice.status_code == 409
    assert twice.json() == {"error": "call 'c1' of agent 'main' is already open"}


def test_a_retried_call_or_result_gets_the_original_answer_and_is_published_once(served: Served) -> None:
    answers = []
    for n in range(1, 4):
        call = {"type": "tool/call", "agent": "main", "call_id": f"c{n}", **GREP}
        result = {"type": "tool/result", "agent": "main", "call_id": f"c{n}", "content": "none"}
        answers += [served.event("retry", **call), served.event("retry", **call)]
        answers += [served.event("retry", **result), served.event("retry", **result)]
    assert all(first == again for first, again in zip(answers[::2], answers[1::2], strict=True))
    assert [m["text"] for m in answers[-1]["messages"]] == [GENTLE_REMINDER]
    events = events_of(served.state_dir / "retry.jsonl")
    assert [type(e).__name__ for e in events].count("ToolCall") == 3
    assert [type(e).__name__ for e in events].count("ContextMessage") == 1
    # an id used again for a new call, once its result is in, is a new call
    again = served.event("retry", type="tool/call", agent="main", call_id="c1", **GREP)
    assert again["seq"] > answers[-1]["seq"]
    served.event("retry", type="tool/result", agent="main", call_id="c1", content="none")
    calls = [e for e in events_of(served.state_dir / "retry.jsonl") if type(e) is ToolCall]
    assert [c.call_id for c in calls] == ["c1", "c2", "c3", "c1"]
    check_replays(served.state_dir / "retry.jsonl")


def test_an_unusable_session_id_is_400(served: Served) -> None:
    response = served.post("/v1/sessions/..hidden/events", {"type": "user/message", "agent": "main", "text": "x"})
    assert response.status_code == 400
    assert response.json()["error"].startswith("session '..hidden': must be 1-128 letters")
    assert not list(served.state_dir.glob("*hidden*"))


def test_a_session_id_with_a_line_end_is_quoted_with_it_escaped(served: Served) -> None:
    response = served.post("/v1/sessions/abc%0A/events", {"type": "user/message", "agent": "main", "text": "x"})
    assert response.status_code == 400
    assert response.json()["error"].startswith("session 'abc\\n': must be 1-128 letters")


def test_an_error_about_a_long_id_quotes_its_start_and_still_says_what_was_wrong(served: Served) -> None:
    long_id = "c" * 1000
    orphan = served.post("/v1/sessions/ids/events", {"type": "tool/result", "agent": "main", "call_id": long_id})
    assert orphan.status_code == 422
    error = orphan.json()["error"]
    assert error.endswith("was never posted as a call: it needs its tool")
    assert len(error) < 300
    gone = served.post("/v1/sessions/ids/events", {"type": "agent/status", "agent": "a" * 1000, "status": "idle"})
    assert gone.status_code == 409
    assert gone.json()["error"].endswith("is not live in session 'ids'")


def test_a_body_over_the_limit_is_413(make_served: MakeServed) -> None:
    served = make_served(max_body=200)
    text = "x" * 300
    response = served.post("/v1/sessions/big/events", {"type": "user/message", "agent": "main", "text": text})
    assert response.status_code == 413
    assert response.json() == {"error": "body of 348 bytes is larger than the limit of 200 bytes"}

    def chunks() -> Any:  # no Content-Length: the limit holds on the stream too
        yield b'{"type": "user/message", "agent": "main", "text": "'
        yield text.encode()
        yield b'"}'

    streamed = served.client.post("/v1/sessions/big/events", content=chunks(), headers=JSON)
    assert streamed.status_code == 413
    assert streamed.json() == {"error": "body is larger than the limit of 200 bytes"}
    assert "big" not in served.store


def test_unknown_routes_and_methods_answer_one_json_line(served: Served) -> None:
    missing = served.client.get("/v2/nothing")
    assert (missing.status_code, missing.json()) == (404, {"error": "GET /v2/nothing: Not Found"})
    wrong = served.client.get("/v1/sessions/s/events")
    assert (wrong.status_code, wrong.json()) == (405, {"error": "GET /v1/sessions/s/events: Method Not Allowed"})
    assert wrong.headers["allow"] == "POST"


def test_an_unusable_state_dir_is_a_503_with_one_line_not_a_traceback(make_served: MakeServed, tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the state directory should be")
    served = make_served(state_dir=blocked)
    response = served.post("/v1/sessions/s/events", {"type": "user/message", "agent": "main", "text": "hi"})
    assert response.status_code == 503
    assert response.json() == {"error": f"state dir {str(blocked)!r}: not a directory"}
    assert response.headers["retry-after"] == "1"
    health = served.client.get("/healthz")
    assert health.status_code == 503
    assert health.json()["status"] == "unavailable"


def test_a_failure_inside_the_server_is_a_500_with_one_line_not_a_traceback(served: Served) -> None:
    async def broken(session_id: str) -> Session:
        raise RuntimeError("a defect\nover two lines")

    served.store.restore = broken  # type: ignore[method-assign]
    response = served.post("/v1/sessions/s/events", {"type": "user/message", "agent": "main", "text": "hi"})
    assert response.status_code == 500
    assert response.json() == {"error": "internal error: RuntimeError: a defect over two lines"}
    assert "Traceback" not in response.text


def test_openapi_describes_the_event_union_and_the_answer(served: Served) -> None:
    document = served.client.get("/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    post = document["paths"]["/v1/sessions/{session}/events"]["post"]
    schema = post["requestBody"]["content"]["application/json"]["schema"]
    assert {ref["$ref"].rsplit("/", 1)[1] for ref in schema["anyOf"]} == {
        "UserMessageIn",
        "ToolCallIn",
        "ToolResultIn",
        "AgentStatusIn",
    }
    assert schema["discriminator"]["propertyName"] == "type"
    answer = document["components"]["schemas"]["EventAnswer"]
    assert answer["required"] == ["seq", "allowed", "reason", "messages", "halt"]
    assert set(document["paths"]) == {
        "/v1/sessions/{session}/events",
        "/hooks/claude-code",
        "/hooks/codex",
        "/hooks/gemini-cli",
        "/healthz",
        "/metrics",
        "/openapi.json",
    }
    # every example answer the server gives decodes as the schema's type
    answer_raw = served.client.post(
        "/v1/sessions/o/events", json={"type": "tool/call", "agent": "main", "call_id": "c", "tool": "ls"}
    ).content
    from guard.server import EventAnswer

    assert msgspec.json.decode(answer_raw, type=EventAnswer).allowed is True
