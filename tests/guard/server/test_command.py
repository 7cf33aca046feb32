"""The ``serve`` command run in this process (``main([...])``): its checks
before binding, and a whole run ended by a real SIGTERM."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from guard.cli import main
from guard.server.runner import is_loopback
from tests.guard.server.conftest import REPO, wait_listening


def serve(tmp_path: Path, *args: str) -> list[str]:
    return ["serve", "--state-dir", str(tmp_path / "state"), *args]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.mark.parametrize(
    ("backend", "where"), [("asyncio", "uds"), ("trio", "uds"), ("trio", "tcp"), ("asyncio", "tcp-otel")]
)
def test_a_run_of_the_command_serves_until_sigterm(
    tmp_path: Path, backend: str, where: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if where == "tcp-otel":  # export on, to nowhere: the exporters are switched off one by one
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
        monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    sock = tmp_path / "guard.sock"
    port = 0
    if where == "uds":
        bind, transport, url = ["--uds", str(sock)], httpx.HTTPTransport(uds=str(sock)), "http://guard"
        (tmp_path / "token").write_text("abc")  # and a token, read and required
        (tmp_path / "token").chmod(0o600)
        bind += ["--token-file", str(tmp_path / "token")]
    else:
        port = free_port()
        bind, transport, url = ["--port", str(port)], httpx.HTTPTransport(), f"http://127.0.0.1:{port}"
    answers: list[int] = []

    def client() -> None:
        wait_listening(sock if where == "uds" else port)
        with httpx.Client(transport=transport, base_url=url, headers={"Authorization": "Bearer abc"}) as http:
            answers.append(http.get("/healthz").status_code)
            event = {"type": "user/message", "agent": "main", "text": "hi"}
            answers.append(http.post("/v1/sessions/cli/events", json=event).status_code)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=client)
    thread.start()
    code = main(serve(tmp_path, *bind, "--backend", backend))
    thread.join(30)
    assert code == 0
    assert answers == [200, 200]
    err = capsys.readouterr().err
    if where == "uds":
        assert f"listening on unix:{sock} (state dir {tmp_path / 'state'}, bearer token required, {backend})" in err
    elif where == "tcp":
        assert f"listening on {url} (state dir {tmp_path / 'state'}, no token, {backend})" in err
    else:
        assert f"no token, {backend}, OpenTelemetry export on)" in err
    assert "stopped; every session log is closed" in err
    assert (tmp_path / "state" / "cli.jsonl").exists()
    assert not sock.exists()


def token_file(tmp_path: Path, text: str, mode: int = 0o600) -> str:
    path = tmp_path / "token"
    path.write_text(text)
    path.chmod(mode)
    return str(path)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["--host", "0.0.0.0"],
            "--host 0.0.0.0 is not a loopback address: give --token-file so clients must authenticate",
        ),
        (
            ["--shadow", "--host", "0.0.0.0"],
            "--host 0.0.0.0 is not a loopback address: give --token-file so clients must authenticate",
        ),
        (["--port", "70000"], "--port 70000: must be 0-65535"),
        (["--max-body", "0"], "max_body = 0: must be an integer >= 1"),
        (["--idle-timeout", "0"], "idle_seconds = 0.0: must be > 0"),
        (["--max-sessions", "0"], "max_sessions = 0: must be an integer >= 1"),
        (["--max-live-pages", "0"], "max_live_pages = 0: must be an integer >= 1"),
        (["--graceful-timeout", "-1"], "--graceful-timeout -1.0: must be >= 0"),
        (["--body-timeout", "inf"], "body_timeout = inf: must be a number of seconds > 0"),
        (["--body-timeout", "nan"], "body_timeout = nan: must be a number of seconds > 0"),
        (["--redis-ttl", "60"], "--redis-ttl and --redis-maxlen bound a fleet's Redis: they need --redis"),
        *(
            (
                ["--allow-origin", origin],
                f"allowed origin {origin!r}: must be scheme://host[:port], as a browser sends it"
                " (no path, an international name as punycode, xn--...; not 'null', which any sandboxed page"
                " or local file sends)",
            )
            for origin in (
                "null",
                "not an origin",
                "https://x.example/path",
                "dash.example",
                "https://a:b@x.example",
                "https://bücher.example",
            )
        ),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(serve(tmp_path, *args)) == 2
    assert capsys.readouterr().err == f"repeat-tool-guard serve: {error}\n"


@pytest.mark.parametrize(("value", "said"), [("-1", "'-1' must be 0 or more"), ("1h", "'1h' is not a whole number")])
def test_a_redis_bound_that_is_no_whole_number_is_a_usage_error(
    tmp_path: Path, value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(serve(tmp_path, "--redis-ttl", value))
    assert exited.value.code == 2
    assert f"argument --redis-ttl: {said}" in capsys.readouterr().err


def test_token_files_must_be_private_and_hold_one_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared = token_file(tmp_path, "abc", 0o644)
    assert main(serve(tmp_path, "--token-file", shared)) == 2
    assert capsys.readouterr().err == (
        f"repeat-tool-guard serve: token file {shared!r} is readable by others (mode 644): chmod 600 it\n"
    )
    for text in ("", "two words"):
        path = token_file(tmp_path, text)
        assert main(serve(tmp_path, "--token-file", path)) == 2
        assert "must hold one token: no whitespace inside, not empty" in capsys.readouterr().err
    for text in ("t\u00e9", "a\x07b"):  # a client could never send the first as UTF-8 and match it
        path = token_file(tmp_path, text)
        assert main(serve(tmp_path, "--token-file", path)) == 2
        assert "must hold printable ASCII only" in capsys.readouterr().err
    missing = str(tmp_path / "missing")
    assert main(serve(tmp_path, "--token-file", missing)) == 2
    assert capsys.readouterr().err.startswith(f"repeat-tool-guard serve: token file {missing!r}: [Errno 2]")


def test_a_state_dir_that_is_a_file_is_named_as_not_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = tmp_path / "taken"
    taken.write_text("")
    assert main(["serve", "--state-dir", str(taken), "--port", "0"]) == 2
    assert capsys.readouterr().err == f"repeat-tool-guard serve: state dir {str(taken)!r}: not a directory\n"


def test_no_state_dir_and_no_home_to_keep_it_under_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("REPEAT_TOOL_GUARD_STATE", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "")
    assert main(["serve", "--port", "0"]) == 2
    assert capsys.readouterr().err.startswith("repeat-tool-guard serve: HOME = '' is no absolute path")


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(serve(tmp_path, "--port", str(port))) == 2
    assert (
        capsys.readouterr().err
        == f"repeat-tool-guard serve: cannot listen on 127.0.0.1:{port}: Address already in use "
        f"(while attempting to bind on address ('127.0.0.1', {port}))\n"
    )


def test_a_state_dir_held_by_another_server_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "state").mkdir()
    with open(tmp_path / "state" / "serve.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert main(serve(tmp_path, "--port", "0")) == 2
    assert "is in use by another server (pid another process)" in capsys.readouterr().err


def test_a_bad_config_is_the_clis_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "guard.toml"
    config.write_text("[remind]\nthresholds = [0]\n")
    assert main(serve(tmp_path, "--config", str(config))) == 2
    assert "thresholds" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("[::1]", True), ("localhost", True),
     ("0.0.0.0", False), ("192.168.1.5", False), ("example.com", False)],
)  # fmt: skip
def test_only_loopback_hosts_go_without_a_token(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_other_commands_never_load_the_server(tmp_path: Path) -> None:
    (tmp_path / "guard.toml").write_text("[turns]\n")
    probe = (
        "import sys\n"
        "from guard.cli import main\n"
        f"assert main(['check-config', {str(tmp_path / 'guard.toml')!r}]) == 0\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'hypercorn', 'prometheus_client')"
        " or (m.startswith('guard.server') and m not in ('guard.server', 'guard.server.command')))\n"
        "print(loaded, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_a_unix_socket_a_server_listens_on_is_not_taken_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "guard.sock"
    with socket.socket(socket.AF_UNIX) as live:
        live.bind(str(path))
        live.listen()
        assert main(serve(tmp_path, "--uds", str(path))) == 2
    assert capsys.readouterr().err == (
        f"repeat-tool-guard serve: cannot listen on unix:{path}: a server is listening on it\n"
    )


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_a_unix_socket_path_where_something_else_is_leaves_it_be(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    path = tmp_path / "guard.sock"
    if kind == "file":
        path.write_text("mine")
    else:
        path.mkdir()
    assert main(serve(tmp_path, "--uds", str(path))) == 2
    assert capsys.readouterr().err == (
        f"repeat-tool-guard serve: cannot listen on unix:{path}: something that is no socket is there (left as it is)\n"
    )
    assert path.read_text() == "mine" if kind == "file" else path.is_dir()


def test_a_unix_socket_left_by_a_dead_server_is_replaced(tmp_path: Path) -> None:
    from guard.server.runner import hypercorn_config

    path = tmp_path / "guard.sock"
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(path))  # bound, never listening, closed: what a killed server leaves
    config = hypercorn_config(f"unix:{path}")
    assert config.listen("asyncio") == f"unix:{path}"
    (sock,) = config.create_sockets().insecure_sockets
    sock.close()


def test_a_unix_socket_where_none_can_be_made_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "no-such-dir" / "guard.sock"
    assert main(serve(tmp_path, "--uds", str(path))) == 2
    assert (
        capsys.readouterr().err == f"repeat-tool-guard serve: cannot listen on unix:{path}: No such file or directory\n"
    )


def test_a_sigterm_waits_for_the_request_in_flight_and_no_longer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    answers: list[bytes] = []
    body = b'{"type": "user/message", "agent": "main", "text": "in flight"}'

    def client() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.02)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
            raw.sendall(
                b"POST /v1/sessions/late/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body[:10])
            )
            time.sleep(0.3)  # the request is in flight, its body half there
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.3)
            raw.sendall(body[10:])
            answers.append(raw.recv(4096))

    thread = threading.Thread(target=client)
    thread.start()
    started = time.monotonic()
    code = main(serve(tmp_path, "--port", str(port), "--graceful-timeout", "20"))
    thread.join(30)
    assert code == 0
    assert time.monotonic() - started < 15
    assert answers[0].startswith(b"HTTP/1.1 200")
    assert "in flight" in (tmp_path / "state" / "late.jsonl").read_text()
    assert "Traceback" not in capsys.readouterr().err


def test_a_low_open_files_limit_is_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from guard.server import runner

    monkeypatch.setattr(runner, "_LOW_OPEN_FILES", 1 << 62)
    assert main(serve(tmp_path, "--max-sessions", "0")) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("repeat-tool-guard serve: warning: only ")
    assert err[0].endswith(" open files allowed (ulimit -n): that bounds concurrent connections")
    assert err[1] == "repeat-tool-guard serve: max_sessions = 0: must be an integer >= 1"
