"""The application's surface around the guard: bearer token, health,
Prometheus metrics, and its construction."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

import guard.server
from guard.server import FileSessionStore, create_app
from tests.guard.server.conftest import MakeServed, Served, hook_payload

TOKEN = "s3cret-t0ken"


def samples(served: Served) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = served.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_with_a_token_every_route_but_healthz_needs_it(make_served: MakeServed) -> None:
    served = make_served(token=TOKEN)
    event = {"type": "user/message", "agent": "main", "text": "hi"}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        for method, path in (("POST", "/v1/sessions/s/events"), ("POST", "/hooks/claude-code"), ("GET", "/metrics")):
            response = served.client.request(method, path, json=event, headers=headers)
            assert response.status_code == 401
            assert response.json() == {"error": "missing or wrong bearer token"}
            assert response.headers["www-authenticate"] == "Bearer"
    assert not (served.state_dir / "s.jsonl").exists()
    assert served.client.get("/healthz").status_code == 200
    good = {"Authorization": f"Bearer {TOKEN}"}
    assert served.client.post("/v1/sessions/s/events", json=event, headers=good).status_code == 200
    assert served.client.get("/openapi.json", headers=good).status_code == 200


def test_metrics_count_events_actions_sessions_and_latency(served: Served) -> None:
    for n in range(3):
        for event in ("PreToolUse", "PostToolUse"):
            payload = hook_payload("m1", event, tool_use_id=f"t{n}", tool_name="Read", tool_input={"file_path": "a"})
            served.post("/hooks/claude-code", payload, headers={})
    served.post("/v1/sessions/m2/events", {"type": "user/message", "agent": "main", "text": "hi"})
    served.post("/v1/sessions/m2/events", {"type": "nonsense"})
    seen = samples(served)
    assert seen[("repeat_tool_guard_events_total", (("type", "tool/call"),))] == 3
    assert seen[("repeat_tool_guard_events_total", (("type", "tool/result"),))] == 3
    assert seen[("repeat_tool_guard_events_total", (("type", "context/message"),))] == 1
    assert seen[("repeat_tool_guard_events_total", (("type", "agent/status"),))] == 2
    assert seen[("repeat_tool_guard_actions_total", (("action", "remind"), ("policy", "remind")))] == 1
    assert seen[("repeat_tool_guard_live_sessions", ())] == 2
    assert seen[("repeat_tool_guard_responses_total", (("route", "claude-code"), ("status", "200")))] == 6
    assert seen[("repeat_tool_guard_responses_total", (("route", "events"), ("status", "422")))] == 1
    assert seen[("repeat_tool_guard_request_duration_seconds_count", (("route", "claude-code"),))] == 6
    assert seen[("repeat_tool_guard_request_duration_seconds_bucket", (("le", "+Inf"), ("route", "events")))] == 2
    assert seen[("repeat_tool_guard_sessions_restored_total", ())] == 0
    assert seen[("repeat_tool_guard_sessions_caught_up_total", ())] == 0


def test_healthz_says_ready_and_how_many_sessions_are_live(served: Served) -> None:
    assert served.client.get("/healthz").json() == {"status": "ok", "sessions": 0}
    served.post("/v1/sessions/h/events", {"type": "user/message", "agent": "main", "text": "hi"})
    assert served.client.get("/healthz").json() == {"status": "ok", "sessions": 1}


def test_a_hook_event_the_guard_does_not_follow_opens_no_session(served: Served) -> None:
    response = served.post("/hooks/claude-code", hook_payload("n", "Notification", message="waiting for you"))
    assert (response.status_code, response.json()) == (200, {})
    assert "n" not in served.store
    assert not (served.state_dir / "n.jsonl").exists()


def test_another_clis_hook_event_is_refused_naming_the_route_to_use(served: Served) -> None:
    """A Gemini CLI hook posted to Claude Code's route would be answered
    with nothing, forever: refused, and the route named."""
    response = served.post("/hooks/claude-code", hook_payload("g", "BeforeTool", tool_name="read_file"))
    assert response.status_code == 400
    assert response.json()["error"].startswith("hook event 'BeforeTool' is one gemini-cli sends, not claude-code")
    assert "g" not in served.store
    compact = served.post("/hooks/claude-code", hook_payload("c", "PostCompact"))
    assert (compact.status_code, compact.json()) == (200, {}), "Codex names its events as Claude Code does"


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"max_body": 0}, "max_body = 0: must be an integer >= 1"),
        ({"max_body": True}, "max_body = True: must be an integer >= 1"),
        ({"token": "  "}, "token is empty"),
        ({"max_live_pages": 0}, "max_live_pages = 0: must be an integer >= 1"),
        ({"evict_every": 0}, "evict_every = 0: must be a number of seconds > 0"),
        ({"evict_every": math.nan}, "evict_every = nan: must be a number of seconds > 0"),
    ],
)
def test_bad_options_are_refused(tmp_path: Path, options: dict[str, object], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        create_app(FileSessionStore(tmp_path), **options)  # type: ignore[arg-type]


def test_the_package_names_its_public_api_and_nothing_else() -> None:
    assert all(getattr(guard.server, name) is not None for name in guard.server.__all__)
    with pytest.raises(AttributeError, match=r"module 'guard\.server' has no attribute 'nothing'"):
        guard.server.nothing  # noqa: B018
