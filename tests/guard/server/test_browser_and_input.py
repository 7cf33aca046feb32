"""What a web page, a careless client or a hostile one can send the server:
foreign origins and hosts, bodies that are not declared JSON, nest too deep,
trickle in, or carry huge values. Each is refused with one JSON line,
and nothing is recorded."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest

from bus import MAX_NESTING, read_log
from guard.server.runner import allowed_hosts
from tests.guard.server.conftest import MakeServed, Served

EVENT = {"type": "user/message", "agent": "main", "text": "hi"}


def _recorded(state_dir: Path, session: str) -> list[Any]:
    path = state_dir / f"{session}.jsonl"
    if not path.exists():
        return []
    with read_log(path) as reader:
        return list(reader)


def test_a_cross_site_post_is_refused_whatever_its_content_type(served: Served) -> None:
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/json"):
        response = served.client.post(
            "/v1/sessions/web/events",
            content=b'{"type": "user/message", "agent": "main", "text": "from a page"}',
            headers={"Origin": "http://evil.example", "Content-Type": content_type},
        )
        assert response.status_code == 403
        assert response.json() == {"error": "origin 'http://evil.example' is not allowed (serve --allow-origin)"}
    assert _recorded(served.state_dir, "web") == []


def test_an_allowed_origin_may_post(make_served: MakeServed) -> None:
    served = make_served(allowed_origins=["https://dash.example/"])
    ok = served.client.post("/v1/sessions/o/events", json=EVENT, headers={"Origin": "https://DASH.example"})
    assert ok.status_code == 200
    other = served.client.post("/v1/sessions/o/events", json=EVENT, headers={"Origin": "https://dash.example:8443"})
    assert other.status_code == 403


@pytest.mark.parametrize(
    ("allowed", "sent"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://[::1]:3000", "http://[::1]:3000"),
        ("https://dash.example:443", "https://dash.example"),  # browsers leave the default port out
        ("https://xn--bcher-kva.example", "https://xn--bcher-kva.example"),
    ],
)
def test_an_origin_as_a_browser_sends_it_may_post(make_served: MakeServed, allowed: str, sent: str) -> None:
    served = make_served(allowed_origins=[allowed])
    ok = served.client.post("/v1/sessions/o/events", json=EVENT, headers={"Origin": sent})
    assert ok.status_code == 200


def test_a_body_not_declared_json_is_415(served: Served) -> None:
    for headers, said in (
        ({"Content-Type": "text/plain"}, "content type 'text/plain': send application/json"),
        ({}, "no content type: send application/json"),
    ):
        response = served.client.post("/v1/sessions/t/events", content=b'{"type": "user/message"}', headers=headers)
        assert response.status_code == 415
        assert response.json()["error"] == said
    declared = served.client.post(
        "/v1/sessions/t/events",
        content=b'{"type": "user/message", "agent": "main", "text": "x"}',
        headers={"Content-Type": "Application/JSON; charset=utf-8"},
    )
    assert declared.status_code == 200


def test_a_foreign_host_is_refused_as_dns_rebinding(make_served: MakeServed) -> None:
    served = make_served(allowed_hosts=allowed_hosts("127.0.0.1", ["guard.internal"]))
    for host in ("evil.example", "evil.example:8787", "127.0.0.1.evil.example"):
        response = served.client.post("/v1/sessions/h/events", json=EVENT, headers={"Host": host})
        assert response.status_code == 403, host
        assert "is not a name this server answers to" in response.json()["error"]
    for host in ("127.0.0.1:8787", "localhost", "LOCALHOST:1", "[::1]:8787", "guard.internal"):
        response = served.client.post("/v1/sessions/h/events", json=EVENT, headers={"Host": host})
        assert response.status_code == 200, host
    assert len([e for e in _recorded(served.state_dir, "h") if type(e).__name__ == "UserMessage"]) == 5


@pytest.mark.parametrize(
    ("host", "names", "accepts", "refuses"),
    [
        ("127.0.0.1", [], {"127.0.0.1", "localhost", "[::1]"}, {"example.com"}),
        ("::1", [], {"[::1]", "localhost"}, {"example.com"}),
        ("0.0.0.0", [], None, set()),
        ("::", ["guard.lan", "fd00::1"], {"guard.lan", "[fd00::1]"}, {"other.lan"}),
        ("10.0.0.5", [], {"10.0.0.5"}, {"localhost", "evil.example"}),
    ],
)
def test_the_hosts_a_bound_server_answers_to(
    host: str, names: list[str], accepts: set[str] | None, refuses: set[str]
) -> None:
    allowed = allowed_hosts(host, names)
    if accepts is None:
        assert allowed is None
        return
    assert allowed is not None
    assert accepts <= allowed
    assert not refuses & allowed


def test_a_body_nested_deeper_than_the_log_allows_is_400_not_a_500(served: Served) -> None:
    deep = b'{"type": "tool/call", "agent": "main", "call_id": "c", "tool": "t", "args": ' + b"[" * 1100
    deep += b"]" * 1100 + b"}"
    response = served.client.post("/v1/sessions/n/events", content=deep, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json() == {"error": f"body nests deeper than {MAX_NESTING} levels"}
    assert _recorded(served.state_dir, "n") == []


def test_an_invalid_value_is_not_echoed_whole(served: Served) -> None:
    event = {"type": "agent/status", "agent": "main", "status": "x" * 500_000}
    response = served.client.post("/v1/sessions/e/events", json=event)
    assert response.status_code == 422
    assert len(response.content) < 400
    assert response.json()["error"].startswith("invalid event: Invalid enum value 'xxx")


def test_a_body_that_trickles_in_is_timed_out_with_408(make_served: MakeServed) -> None:
    served = make_served(body_timeout=0.3)
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(
            b"POST /v1/sessions/slow/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 60\r\n\r\n{"
        )
        started = time.monotonic()
        answer = b""
        while not answer.endswith(b"}"):
            chunk = raw.recv(4096)
            if not chunk:
                break
            answer += chunk
        assert time.monotonic() - started < 5
    assert answer.startswith(b"HTTP/1.1 408")
    assert answer.endswith(b'{"error":"body not complete within 0.3 s"}')
    with pytest.raises(ValueError, match="body_timeout"):
        make_served(body_timeout=0)


def test_a_request_head_that_trickles_in_is_cut_off_at_the_keep_alive_timeout(
    make_served: MakeServed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A head sent a byte at a time never completes a request, so the
    connection's idle deadline (``KEEP_ALIVE_SECONDS``) still runs and
    closes it, while other clients are answered meanwhile."""
    monkeypatch.setattr("guard.server.runner.KEEP_ALIVE_SECONDS", 1.0)
    served = make_served()
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    head = b"POST /v1/sessions/slow/events HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 200
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.settimeout(0.1)
        started = time.monotonic()
        closed = False
        for sent, byte in enumerate(head):
            if sent == 3:
                assert served.client.get("/healthz").status_code == 200
            try:
                raw.sendall(bytes([byte]))
                closed = raw.recv(4096) == b""
            except TimeoutError:
                continue
            except OSError:  # reset while sending: closed too
                closed = True
            if closed:
                break
        assert closed, "the server still waited for the head after every byte of it"
        assert 0.9 <= time.monotonic() - started < 10
    assert _recorded(served.state_dir, "slow") == []


def test_a_body_framed_two_ways_is_refused_not_read_one_of_them(served: Served) -> None:
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    body = b'{"type": "user/message", "agent": "main", "text": "smuggled"}'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(
            b"POST /v1/sessions/two/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunked
        )
        answer = b""
        while chunk := raw.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400")
    assert answer.endswith(b'{"error":"a body framed by both Content-Length and Transfer-Encoding: send one"}')
    assert not (served.state_dir / "two.jsonl").exists()


def test_a_refused_request_leaves_its_connection_usable(make_served: MakeServed) -> None:
    served = make_served(max_body=200)
    for text in ("short", "x" * 1000):  # the body of the second is over the limit: read no further than it
        refused = served.client.post(
            "/v1/sessions/k/events",
            json={"type": "user/message", "agent": "main", "text": text},
            headers={"Origin": "http://evil.example"},
        )
        assert refused.status_code == 403
        assert served.client.post("/v1/sessions/k/events", json=EVENT).status_code == 200
