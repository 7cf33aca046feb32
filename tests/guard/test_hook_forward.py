"""The command hook's forwarding client against real sockets: what it sends,
the answers it accepts (a length or chunks), the ones it refuses with a
reason, and where it looks for a server."""

from __future__ import annotations

import io
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from guard import hook_forward
from guard.cli import EXIT_HOOK_FAULT, main
from guard.hook_forward import SERVE_ENV, ForwardError, check_target, forward, serve_target


class RawServer:
    """A one-connection HTTP server on a Unix socket that sends ``answer``
    verbatim (or nothing, with ``answer`` None) and keeps the request."""

    def __init__(self, path: Path, answer: bytes | None, trickle: float = 0.0) -> None:
        self.url = f"unix:{path}"
        self.request = b""
        self._answer = answer
        self._trickle = trickle
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(1)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self._listener.accept()
        with conn:
            while b"\r\n\r\n" not in self.request:
                self.request += conn.recv(65536)
            head, _, body = self.request.partition(b"\r\n\r\n")
            length = int(next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))[15:])
            while len(body) < length:
                body += conn.recv(65536)
            self.request = head + b"\r\n\r\n" + body
            if self._answer is None:
                self._done.wait(10)
                return
            if not self._trickle:
                conn.sendall(self._answer)
                return
            for byte in self._answer:  # a byte at a time, never quite silent
                if self._done.wait(self._trickle):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:  # the client gave up
                    return

    def close(self) -> None:
        self._done.set()
        self._thread.join(10)
        self._listener.close()


RawServe = Callable[..., RawServer]


@pytest.fixture
def raw_server(tmp_path: Path) -> Iterator[RawServe]:
    servers: list[RawServer] = []

    def start(answer: bytes | None, trickle: float = 0.0) -> RawServer:
        server = RawServer(tmp_path / f"raw{len(servers)}.sock", answer, trickle)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def ok(body: bytes, *headers: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body


def test_the_payload_is_posted_to_the_hook_route_and_the_body_comes_back(raw_server: RawServe) -> None:
    server = raw_server(ok(b'{"continue":false}', b"content-length: 18", b"content-type: application/json"))
    assert forward(server.url, b'{"session_id":"s"}') == b'{"continue":false}'
    head, _, body = server.request.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /hooks/claude-code HTTP/1.1\r\n")
    assert b"Content-Length: 18" in head
    assert b"Repeat-Tool-Guard-Wait: 30\r\n" in head, "the server is told how long the hook waits"
    assert body == b'{"session_id":"s"}'


def test_a_chunked_answer_is_joined(raw_server: RawServe) -> None:
    server = raw_server(ok(b'3\r\n{"a\r\n5;x=1\r\n":1}\n\r\n0\r\n\r\n', b"Transfer-Encoding: chunked"))
    assert forward(server.url, b"{}") == b'{"a":1}\n'


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n", "answered 503"),
        (b"SSH-2.0-OpenSSH\r\n", "not an HTTP answer"),
        (ok(b"{}", b"content-length: 10"), "cut short"),
        (ok(b"{}"), "cut short"),
        (ok(b"5\r\n{}", b"transfer-encoding: chunked"), "cut short"),
        (ok(b"zz\r\n{}\r\n0\r\n\r\n", b"transfer-encoding: chunked"), "cut short"),
        (ok(b"<html>hello</html>", b"content-length: 18"), "not one JSON object"),
        (ok(b"", b"content-length: 0"), "not one JSON object"),
        (ok(b'{"a":1}{"b":2}', b"content-length: 14"), "not one JSON object"),
        (ok(b"[{}]", b"content-length: 4"), "not one JSON object"),
        (ok(b'{"a":NaN}', b"content-length: 9"), "not one JSON object"),
        (ok(b'{"a":"\xff"}', b"content-length: 9"), "not one JSON object"),
    ],
)
def test_an_answer_that_is_not_a_whole_200_is_an_error_naming_why(
    raw_server: RawServe, answer: bytes, reason: str
) -> None:
    server = raw_server(answer)
    with pytest.raises(ForwardError, match=reason):
        forward(server.url, b"{}")


def test_a_server_that_does_not_answer_in_time_is_an_error(
    raw_server: RawServe, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hook_forward, "ANSWER_TIMEOUT", 0.2)
    server = raw_server(None)
    with pytest.raises(ForwardError, match=r"no whole answer within 0\.2 s"):
        forward(server.url, b"{}")


def test_a_server_that_trickles_its_answer_is_cut_off_at_the_deadline(
    raw_server: RawServe, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hook_forward, "ANSWER_TIMEOUT", 0.5)
    server = raw_server(ok(b"{}" + b" " * 100, b"content-length: 102"), trickle=0.1)
    started = time.monotonic()
    with pytest.raises(ForwardError, match=r"no whole answer within 0\.5 s"):
        forward(server.url, b"{}")
    assert time.monotonic() - started < 5, "not a read timeout per byte"


def test_an_answer_larger_than_the_limit_is_an_error(raw_server: RawServe, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hook_forward, "_MAX_ANSWER", 100)
    server = raw_server(ok(b"x" * 1000, b"content-length: 1000"))
    with pytest.raises(ForwardError, match="answer too large"):
        forward(server.url, b"{}")


def test_nothing_listening_is_no_answer_not_an_error(tmp_path: Path) -> None:
    assert forward(f"unix:{tmp_path / 'none.sock'}", b"{}") is None
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    assert forward(f"http://127.0.0.1:{port}", b"{}") is None


def test_a_tcp_server_on_loopback_is_reached_by_host_and_port() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        got: list[bytes] = []

        def serve() -> None:
            conn, _ = listener.accept()
            with conn:
                got.append(conn.recv(65536))
                conn.sendall(ok(b"{}", b"content-length: 2"))

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        assert forward(f"http://localhost:{port}/custom/path", b"{}") == b"{}"
        thread.join(10)
    assert got[0].startswith(b"POST /custom/path HTTP/1.1\r\nHost: localhost:")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://127.0.0.1:8787", "must be unix:PATH or http://HOST:PORT"),
        ("http://127.0.0.1", "must name a port"),
        ("http://127.0.0.1:port", "must name a port"),
        ("http://127.0.0.1:99999", "from 1 to 65535"),
        ("http://127.0.0.1:0", "from 1 to 65535"),
        ("http://10.0.0.5:8787", "this machine only"),
    ],
)
def test_an_address_that_is_no_local_server_is_refused(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        check_target(url)


@pytest.mark.parametrize(
    "url", ["http://user:s3cret@10.0.0.5:8787", "https://user:s3cret@127.0.0.1:8787/x", "http://:s3cret@127.0.0.1"]
)
def test_a_password_in_the_address_is_never_shown(url: str) -> None:
    with pytest.raises(ValueError, match=r"^--serve") as refused:
        check_target(url)
    assert "s3cret" not in str(refused.value)
    assert "***@" in str(refused.value)


def test_an_error_about_a_long_address_quotes_its_start() -> None:
    with pytest.raises(ValueError, match=r"^--serve 'http://aaa") as refused:
        check_target("http://" + "a" * 100_000)
    assert len(str(refused.value)) < 400


def test_ipv6_loopback_is_a_local_server() -> None:
    assert check_target("http://[::1]:8787") == "http://[::1]:8787"


def test_the_target_is_the_option_else_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SERVE_ENV, raising=False)
    assert serve_target(["hook"]) is None
    assert serve_target(["hook", "--serve", "unix:/a"]) == "unix:/a"
    assert serve_target(["hook", "--serve=unix:/b"]) == "unix:/b"
    assert serve_target(["hook", "--serve"]) is None
    assert serve_target(["-v", "hook", "--config", "g.toml", "--state-dir=/s", "--serve", "unix:/c"]) == "unix:/c"
    monkeypatch.setenv(SERVE_ENV, "unix:/env")
    assert serve_target(["hook"]) == "unix:/env"
    assert serve_target(["hook", "--serve="]) is None  # turns the variable off
    assert serve_target(["hook", "--serve", ""]) is None


@pytest.mark.parametrize("argv", [["hook", "--help"], ["hook", "-h"], ["hook", "--confg", "g.toml"], ["hook", "extra"]])
def test_a_command_line_the_hook_would_refuse_is_never_forwarded(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SERVE_ENV, "unix:/env")
    assert serve_target([*argv, "--serve", "unix:/a"]) is None


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))


PAYLOAD = b'{"session_id":"s1","hook_event_name":"PreToolUse","tool_use_id":"t1","tool_name":"Read","tool_input":{}}'


@pytest.mark.parametrize(("agent", "route"), [("codex", b"/hooks/codex"), ("gemini-cli", b"/hooks/gemini-cli")])
def test_a_hook_for_another_cli_is_posted_to_that_clis_route(
    raw_server: RawServe,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
    agent: str,
    route: bytes,
) -> None:
    server = raw_server(ok(b'{"decision":"deny"}', b"content-length: 19"))
    _stdin(monkeypatch, PAYLOAD)
    assert main(["hook", "--agent", agent, "--serve", server.url]) == 0
    assert capsysbinary.readouterr().out == b'{"decision":"deny"}\n'
    assert server.request.startswith(b"POST " + route + b" HTTP/1.1\r\n")
    assert serve_target(["hook", "--agent", "other", "--serve", server.url]) is None, "the hook's parser names it"


def test_the_hook_prints_the_servers_answer_and_nothing_for_an_empty_one(
    raw_server: RawServe, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    server = raw_server(ok(b'{"continue":false}', b"content-length: 18"))
    _stdin(monkeypatch, PAYLOAD)
    assert main(["hook", "--serve", server.url, "--state-dir", str(tmp_path / "state")]) == 0
    assert capsysbinary.readouterr().out == b'{"continue":false}\n'
    assert server.request.endswith(PAYLOAD)
    assert not (tmp_path / "state").exists()  # answered by the server alone

    empty = raw_server(ok(b"{}", b"content-length: 2"))
    monkeypatch.setenv(SERVE_ENV, empty.url)
    _stdin(monkeypatch, PAYLOAD)
    assert main(["hook", "--state-dir", str(tmp_path / "state")]) == 0
    assert capsysbinary.readouterr().out == b""


def test_the_hook_answers_in_process_when_no_server_answers(
    raw_server: RawServe, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    state = tmp_path / "state"
    _stdin(monkeypatch, PAYLOAD)
    assert main(["hook", "--serve", f"unix:{tmp_path / 'none.sock'}", "--state-dir", str(state)]) == 0
    assert capsysbinary.readouterr().err == b""  # nothing running there is no fault
    assert (state / "s1.jsonl").exists()

    failing = raw_server(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n")
    _stdin(monkeypatch, PAYLOAD)
    assert main(["hook", "--serve", failing.url, "--state-dir", str(state)]) == 0
    err = capsysbinary.readouterr().err.decode()
    assert f"{failing.url} answered 500; answering in-process" in err

    _stdin(monkeypatch, PAYLOAD)
    assert main(["hook", "--serve", "http://192.0.2.1:80", "--state-dir", str(state)]) == 0
    assert "this machine only" in capsysbinary.readouterr().err.decode()


def test_the_hook_answers_in_process_whatever_goes_wrong_on_the_way(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    state = tmp_path / "state"
    _stdin(monkeypatch, PAYLOAD)
    assert main(["hook", "--serve", "http://127.0.0.1:99999", "--state-dir", str(state)]) == 0
    assert "from 1 to 65535 (http://127.0.0.1:8787); answering in-process" in capsysbinary.readouterr().err.decode()
    assert (state / "s1.jsonl").exists()

    def broken(url: str, body: bytes, route: str) -> bytes | None:
        raise RuntimeError("the client broke")

    monkeypatch.setattr("guard.hook_forward.forward", broken)
    _stdin(monkeypatch, PAYLOAD.replace(b'"t1"', b'"t2"'))
    assert main(["hook", "--serve", "unix:/nowhere", "--state-dir", str(state)]) == 0
    err = capsysbinary.readouterr().err.decode()
    assert "--serve unix:/nowhere: RuntimeError: the client broke; answering in-process" in err
    assert b'"call_id":"t2"' in (state / "s1.jsonl").read_bytes()


def test_a_closed_stdin_is_a_hook_fault_naming_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", None)
    assert main(["hook", "--serve", "unix:/nowhere"]) == EXIT_HOOK_FAULT
    assert "stdin is closed" in capsys.readouterr().err
    assert main(["hook", "--state-dir", "/nonexistent/never-made"]) == EXIT_HOOK_FAULT
    assert "stdin is closed" in capsys.readouterr().err


def test_help_is_never_forwarded(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SERVE_ENV, "unix:/nowhere")
    with pytest.raises(SystemExit):
        main(["hook", "--help"])
    assert "--serve URL" in capsys.readouterr().out


def test_hook_settings_puts_the_server_in_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hook-settings", "--serve", "unix:/run/rtg.sock"]) == 0
    assert "hook --serve unix:/run/rtg.sock ||" in capsys.readouterr().out
    assert main(["hook-settings", "--serve", "http://example.com:80"]) == 2
    assert "this machine only" in capsys.readouterr().err
    assert main(["hook-settings", "--agent", "codex", "--serve", "unix:/run/rtg.sock"]) == 0
    assert "hook --agent codex --serve unix:/run/rtg.sock ||" in capsys.readouterr().out
    assert main(["hook-settings", "--shadow", "--serve", "unix:/run/rtg.sock"]) == 2
    assert "start it with serve --shadow" in capsys.readouterr().err


def test_the_hooks_agents_are_the_runtimes_serve_answers() -> None:
    from guard.adapters.hook_runtimes import RUNTIMES
    from guard.hook_forward import HOOK_AGENTS

    assert tuple(RUNTIMES) == HOOK_AGENTS
