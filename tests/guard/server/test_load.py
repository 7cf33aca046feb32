"""The server under load: 1,000 sessions driven by 50 concurrent clients over
real HTTP, with no error, and every session log passing ``replay --check``."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from guard import GENTLE_REMINDER
from guard.verdicts import replay_log
from tests.guard.server.conftest import StartServer

pytestmark = pytest.mark.slow

SESSIONS = 1000
CLIENTS = 50
CALLS = 3


async def drive(client: httpx.AsyncClient, session: str) -> list[str]:
    """One agent's session: a prompt, then the same call three times (the
    third result draws the reminder). The reminders it was answered with."""

    async def post(**event: Any) -> dict[str, Any]:
        response = await client.post(f"/v1/sessions/{session}/events", json=event)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    reminders: list[str] = []
    await post(type="user/message", agent="main", text=f"task of {session}")
    for n in range(CALLS):
        call = await post(type="tool/call", agent="main", call_id=f"c{n}", tool="grep", args={"pattern": "load_config"})
        assert call["allowed"] is True
        answer = await post(type="tool/result", agent="main", call_id=f"c{n}", content=f"{session} result {n}")
        reminders += [m["text"] for m in answer["messages"]]
    return reminders


def test_a_thousand_sessions_from_fifty_concurrent_clients(start_server: StartServer) -> None:
    server = start_server()
    reminded: dict[str, list[str]] = {}

    async def main() -> None:
        sessions = [f"load-{n:04d}" for n in range(SESSIONS)]
        send, receive = anyio.create_memory_object_stream[str](SESSIONS)
        with send:
            for session in sessions:
                send.send_nowait(session)
        limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
        with receive:
            async with server.async_client(limits=limits) as client, anyio.create_task_group() as tasks:

                async def worker() -> None:
                    async with receive.clone() as sessions_left:
                        async for session in sessions_left:
                            reminded[session] = await drive(client, session)

                for _ in range(CLIENTS):
                    tasks.start_soon(worker)

    anyio.run(main)
    assert len(reminded) == SESSIONS
    assert all(texts == [GENTLE_REMINDER] for texts in reminded.values())
    with server.client() as client:
        assert client.get("/healthz").json() == {"status": "ok", "sessions": SESSIONS}
        metrics = client.get("/metrics").text
    requests = SESSIONS * (1 + 2 * CALLS)
    assert f'repeat_tool_guard_responses_total{{route="events",status="200"}} {float(requests)}' in metrics
    assert server.stop() == 0
    assert "Traceback" not in server.stderr

    async def check_all() -> None:
        for session in reminded:
            outcome = await replay_log(server.state_dir / f"{session}.jsonl")
            assert outcome.report.skipped == 0, session
            assert outcome.differences == [], session
            assert [v.action for v in outcome.verdicts] == ["remind"], session

    anyio.run(check_all)
