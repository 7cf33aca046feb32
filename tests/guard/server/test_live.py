"""The live page of ``serve``: its data, its stream, its auth, and the page
itself rendered in headless Chromium as hooks arrive."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from guard.config import RECOMMENDED, Config, RemindConfig
from guard.server.live import COOKIE
from tests.guard.server.conftest import MakeServed, Served, StartServer, hook_payload

ARTIFACTS = "REPEAT_TOOL_GUARD_ARTIFACTS"
"""A directory the browser test copies its screenshot to (else it stays in the test's tmp dir)."""


def _loop(
    client: httpx.Client,
    session: str,
    calls: int,
    *,
    tool: str = "Bash",
    command: str = "make",
    each: Callable[[dict[str, Any]], None] = lambda answer: None,
) -> list[dict[str, Any]]:
    """``calls`` identical Claude Code tool calls in ``session``; the answers
    to their results (or to the call, when it was denied), each also handed
    to ``each`` as soon as it came."""

    def post(path: str, body: dict[str, Any]) -> httpx.Response:
        return client.post(path, json=body)

    answers = []
    post("/hooks/claude-code", hook_payload(session, "UserPromptSubmit", prompt="build it"))
    for n in range(calls):
        call = {"tool_name": tool, "tool_input": {"command": command}, "tool_use_id": f"{session}-{n}"}
        before = post("/hooks/claude-code", hook_payload(session, "PreToolUse", **call)).json()
        if before.get("hookSpecificOutput", {}).get("permissionDecision") == "deny":
            answers.append(before)  # Claude Code runs no denied tool, so sends no PostToolUse
            each(before)
            continue
        answer = post("/hooks/claude-code", hook_payload(session, "PostToolUse", **call, tool_response={"stdout": "E"}))
        answers.append(answer.json())
        each(answers[-1])
    return answers


@pytest.fixture
def live_served(make_served: MakeServed) -> Served:
    return make_served(Config(remind=RemindConfig(thresholds=(3,))))


def test_the_page_is_one_self_contained_document(live_served: Served) -> None:
    response = live_served.client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert 'new EventSource("live/events")' in page
    assert "--remind:#e69b00" in page
    assert "http://" not in page, "the page fetches nothing from elsewhere"
    assert "https://" not in page


def test_the_state_holds_each_session_with_its_timeline_and_actions(live_served: Served) -> None:
    _loop(live_served.client, "live-a", 4)
    live_served.event("api-b", type="agent/status", agent="bot", status="started")
    live_served.event("api-b", type="tool/call", agent="bot", call_id="x1", tool="fetch", args={"u": 1})
    live_served.event("api-b", type="tool/result", agent="bot", call_id="x1", tool="fetch", args={"u": 1}, content="ok")
    live_served.event("api-b", type="tool/result", agent="bot", call_id="x2", tool="fetch", args={"u": 2}, content="")
    sessions = {s["id"]: s for s in live_served.client.get("/live/state").json()["sessions"]}
    a, b = sessions["live-a"], sessions["api-b"]
    assert (a["runtime"], a["project"], b["runtime"], b["project"]) == ("claude-code", "app", "events", None)
    assert (a["calls"], a["repeats"], len(a["cells"])) == (4, 3, 4)
    assert a["signatures"] == [["Bash", '{"command":"make"}', 4]]
    assert [(m[0], m[1], m[2], m[5], m[6]) for m in a["marks"]] == [(2, "remind", "remind", "Bash", 3)]
    assert a["wasted_calls"] == 1
    assert a["wasted_tokens"] > 0
    assert a["actions"] == {"remind": 1}
    assert (b["calls"], b["repeats"], b["marks"]) == (2, 0, [])  # a result without its call counts as a call


def test_the_page_shows_no_secret_the_calls_and_actions_held(make_served: MakeServed) -> None:
    served = make_served(Config(remind=RemindConfig(thresholds=(2, 3))))  # the second reminder quotes the arguments
    command = "curl -H 'Authorization: Bearer ghp_0123456789abcdefghijABCDEFGHIJ012345' https://api.github.com"
    _loop(served.client, "secret", 3, command=command)
    state = served.client.get("/live/state").text
    assert "ghp_0123456789" not in state
    (session,) = served.client.get("/live/state").json()["sessions"]
    assert "[REDACTED]" in session["signatures"][0][1]
    assert "[REDACTED]" in session["marks"][-1][3]


def test_the_page_shows_no_part_of_a_secret_an_actions_quote_cut(make_served: MakeServed) -> None:
    """A policy quotes the arguments cut to a length; the cut that halves a
    key leaves nothing of it on the page."""
    served = make_served(Config(remind=RemindConfig(thresholds=(2, 3), arguments_preview_chars=80)))
    token = "ghp_R7kX2mQ9vL4nP8sT1wY6zB3cF5hJ0dG7aK2eW"
    command = f"cd /srv/acme-app/services/apis && printf %s {token} | gh auth login --with-token"
    assert 11 + command.index(token) < 80 < 11 + command.index(token) + len(token)  # the quote's cut halves it
    _loop(served.client, "cut", 3, command=command)
    state = served.client.get("/live/state").text
    assert token[:8] not in state
    (session,) = served.client.get("/live/state").json()["sessions"]
    assert "printf %s … (+" in session["marks"][-1][3]


def test_the_page_shows_no_word_of_a_quoted_passphrase_an_actions_quote_cut(make_served: MakeServed) -> None:
    """The cut falls inside a quoted passphrase with spaces: the words
    before it are part of the secret too, and none of them is shown."""
    served = make_served(Config(remind=RemindConfig(thresholds=(2, 3), arguments_preview_chars=80)))
    command = "cd /srv/acme-app/services && mysql --password='correct horse battery staple' app"
    assert 12 + command.index("horse") < 80 < 12 + command.index("staple")  # the quote's cut falls in the passphrase
    _loop(served.client, "quoted", 3, command=command)
    state = served.client.get("/live/state").text
    assert "correct" not in state
    (session,) = served.client.get("/live/state").json()["sessions"]
    assert "--password='… (+" in session["marks"][-1][3]


def test_a_hook_payload_without_a_working_directory_has_no_project(live_served: Served) -> None:
    payload = hook_payload("no-cwd", "PreToolUse", tool_name="Read", tool_input={"file_path": "a"}, tool_use_id="t1")
    del payload["cwd"]
    assert live_served.client.post("/hooks/claude-code", json=payload).status_code == 200
    (session,) = live_served.client.get("/live/state").json()["sessions"]
    assert (session["id"], session["runtime"], session["project"]) == ("no-cwd", "claude-code", None)


def test_a_denial_counts_what_it_saved(make_served: MakeServed) -> None:
    served = make_served(RECOMMENDED)
    served.event("d", type="agent/status", agent="a", status="started")
    denied = 0
    for n in range(12):
        answer = served.event("d", type="tool/call", agent="a", call_id=f"c{n}", tool="grep", args={"p": "x"})
        if answer["allowed"] is False:  # the server records the denial as the call's result
            denied += 1
        else:
            served.event("d", type="tool/result", agent="a", call_id=f"c{n}", tool="grep", args={"p": "x"}, content="0")
    (session,) = served.client.get("/live/state").json()["sessions"]
    assert session["saved_calls"] == denied
    assert denied > 0
    assert session["saved_tokens"] > 0
    assert session["actions"]["deny"] == denied


def test_the_stream_sends_a_snapshot_then_each_changed_session(live_served: Served) -> None:
    _loop(live_served.client, "before", 1)
    with httpx.Client(base_url=live_served.url, timeout=10) as client, client.stream("GET", "/live/events") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        assert next(lines) == "retry: 1000"
        assert next(lines) == "event: snapshot"
        snapshot = json.loads(next(lines).removeprefix("data: "))
        assert [s["id"] for s in snapshot["sessions"]] == ["before"]
        _loop(live_served.client, "during", 3)
        for line in lines:
            if line.startswith("data: "):
                session = json.loads(line.removeprefix("data: "))
                if session["id"] == "during" and session["marks"]:
                    break
    assert session["marks"][0][2] == "remind"


def test_live_pages_past_the_limit_are_refused_until_one_closes(make_served: MakeServed) -> None:
    served = make_served(max_live_pages=2)
    _loop(served.client, "s", 1)
    with contextlib.ExitStack() as pages, httpx.Client(base_url=served.url, timeout=10) as client:
        reading = []  # an iterator of lines dropped would close its page
        for _ in range(2):
            page = pages.enter_context(client.stream("GET", "/live/events"))
            assert page.status_code == 200
            reading.append(page.iter_lines())
            assert next(reading[-1]) == "retry: 1000"
        refused = served.client.get("/live/events")
        assert (refused.status_code, refused.headers["retry-after"]) == (503, "5")
        assert refused.json() == {
            "error": "2 live pages are open, the most this server serves at once (serve --max-live-pages): "
            "close one, or try again later"
        }
        assert served.client.get("/live/state").status_code == 200  # the state is no page
    deadline = time.monotonic() + 10
    while served.app.state.live_pages.open and time.monotonic() < deadline:  # the server sees the pages close
        time.sleep(0.02)
    with served.client.stream("GET", "/live/events") as page:
        assert page.status_code == 200
        lines = page.iter_lines()
        assert next(lines) == "retry: 1000"


def test_with_a_token_the_page_wants_it_and_a_browser_keeps_it_in_a_cookie(make_served: MakeServed) -> None:
    served = make_served(token="s3cret-token")
    for path in ("/", "/live/events", "/live/state"):
        refused = served.client.get(path)
        assert refused.status_code == 401
        assert "Token required" in refused.text
    assert served.client.get("/?token=wrong").status_code == 401
    opened = served.client.get("/?token=s3cret-token", follow_redirects=False)
    assert opened.status_code == 303
    assert opened.headers["location"] == "/"
    cookie = opened.headers["set-cookie"]
    assert f"{COOKIE}=s3cret-token" in cookie
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    with httpx.Client(base_url=served.url, cookies={COOKIE: "s3cret-token"}) as browser:
        assert browser.get("/").status_code == 200
        assert browser.get("/live/state").json() == {"sessions": []}
    bearer = {"Authorization": "Bearer s3cret-token"}
    assert served.client.get("/live/state", headers=bearer).status_code == 200


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (no port, no extra package)."""

    def __init__(self, browser: str, profile: Path, url: str) -> None:
        commands_read, self._commands = os.pipe()
        self._answers, answers_write = os.pipe()
        high = [os.dup(commands_read), os.dup(answers_write)]
        os.close(commands_read)
        os.close(answers_write)

        def wire() -> None:  # the protocol's fixed descriptors: 3 to read commands, 4 to answer
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [
                browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--hide-scrollbars", "--window-size=1280,900", f"--user-data-dir={profile}",
                "--remote-debugging-pipe", url,
            ],
            pass_fds=(3, 4), preexec_fn=wire, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for fd in high:
            os.close(fd)
        self._next = 0
        self._buffer = b""
        page = next(t for t in self._wait_for_page() if t["type"] == "page")
        self._session = self.send("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]

    def _wait_for_page(self) -> list[dict[str, Any]]:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            targets: list[dict[str, Any]] = self.send("Target.getTargets")["targetInfos"]
            if any(t["type"] == "page" for t in targets):
                return targets
            time.sleep(0.1)
        raise AssertionError("chromium opened no page")

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 30
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                answer = json.loads(raw)
                if answer.get("id") == self._next:
                    if "error" in answer:
                        raise AssertionError(f"{method}: {answer['error']}")
                    result: dict[str, Any] = answer["result"]
                    return result
            ready, _, _ = select.select([self._answers], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                raise AssertionError(f"chromium did not answer {method}")
            chunk = os.read(self._answers, 1 << 20)
            if not chunk:
                raise AssertionError("chromium closed the pipe")
            self._buffer += chunk

    def evaluate(self, expression: str) -> Any:
        answer = self.send("Runtime.evaluate", self._session, expression=expression, returnByValue=True)
        return answer["result"].get("value")

    def until(self, expression: str, within: float) -> float:
        """Seconds until ``expression`` is true in the page (it must be within ``within``)."""
        started = time.monotonic()
        while not self.evaluate(expression):
            waited = time.monotonic() - started
            assert waited < within, f"not true within {within} s: {expression}"
            time.sleep(0.01)
        return time.monotonic() - started

    def screenshot(self, path: Path) -> bytes:
        data = base64.b64decode(self.send("Page.captureScreenshot", self._session, format="png")["data"])
        path.write_bytes(data)
        return data

    def close(self) -> None:
        with contextlib.suppress(AssertionError):
            self.send("Browser.close")
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self._commands)
        os.close(self._answers)


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Any]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium); the live page was not rendered")
    opened: list[Chromium] = []

    def open_page(url: str) -> Chromium:
        opened.append(Chromium(browser, tmp_path / f"profile-{len(opened)}", url))
        return opened[-1]

    yield open_page
    for page in opened:
        page.close()


@pytest.mark.slow
def test_the_page_in_chromium_shows_a_loops_actions_within_a_second_of_the_hook(
    chromium: Any, start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server("--config", "recommended")
    page = chromium(f"{server.url}/")
    page.until("document.body.dataset.connected === '1'", within=30)
    with server.client() as client:
        session = "section[data-session='live-loop']"
        seen: list[str] = []

        def shown_within_a_second(answer: dict[str, Any]) -> None:
            """The first action must be on the page within a second of the hook that answered it."""
            output = answer.get("hookSpecificOutput")
            if output and not seen:
                seen.append("deny" if output.get("permissionDecision") == "deny" else "remind")
                page.until(f'!!document.querySelector("{session} .c i.{seen[0]}")', within=1.0)
                page.until(f"!!document.querySelector(\"{session} .act[data-action='{seen[0]}']\")", within=1.0)

        answers = _loop(client, "live-loop", 6, command="npm test", each=shown_within_a_second)
        assert seen, "the loop drew no guard action"
        acted = next(n for n, a in enumerate(answers) if a.get("hookSpecificOutput"))
        cells = page.evaluate(f'document.querySelectorAll("{session} .c").length')
        assert cells >= acted + 1
        assert page.evaluate(f'document.querySelector("{session} .shead").textContent').count("claude-code") == 1
        # a second session from another runtime, then the filters
        client.post("/v1/sessions/api-1/events", json={"type": "agent/status", "agent": "bot", "status": "started"})
        client.post("/v1/sessions/api-1/events", json={"type": "tool/call", "agent": "bot", "call_id": "k1",
                                                       "tool": "fetch", "args": {"u": 1}})  # fmt: skip
        page.until("!!document.querySelector(\"section[data-session='api-1']\")", within=1.0)
    select_runtime = (
        "(() => { const s = document.getElementById('f-runtime'); s.value = 'events';"
        " s.dispatchEvent(new Event('change')); return [...document.querySelectorAll('section.session')]"
        ".map((n) => n.dataset.session); })()"
    )
    assert page.evaluate(select_runtime) == ["api-1"]
    select_action = (
        "(() => { document.getElementById('f-runtime').value = ''; const s = document.getElementById('f-action');"
        " s.value = 'deny'; s.dispatchEvent(new Event('change')); return [...document.querySelectorAll("
        "'section.session')].map((n) => n.dataset.session); })()"
    )
    assert page.evaluate(select_action) == ["live-loop"]
    page.evaluate(
        "(() => { document.getElementById('f-action').value = ''; "
        "document.getElementById('f-action').dispatchEvent(new Event('change')); })()"
    )
    shot = page.screenshot(tmp_path / "live-page.png")
    assert shot.startswith(b"\x89PNG")
    assert len(shot) > 20_000
    keep = os.environ.get(ARTIFACTS)
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / "live-page.png", Path(keep) / "live-page.png")


def test_sigterm_ends_open_live_pages_so_the_server_stops(start_server: StartServer) -> None:
    server = start_server("--graceful-timeout", "120")
    with server.client() as client, client.stream("GET", "/live/events") as stream:
        lines = stream.iter_lines()
        assert next(lines) == "retry: 1000"
        server.proc.send_signal(signal.SIGTERM)
        rest = list(lines)  # the stream ends: the server closed it, not the graceful timeout
    assert rest[0] == "event: snapshot"
    assert server.proc.wait(60) == 0
