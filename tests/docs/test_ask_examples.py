"""The example ask commands in docs/examples keep the ask command contract.

They are run for real, through ``AskCommand``, against stand-ins for the
services they call: a local HTTP server speaking the chat completions
protocol, and a ``claude`` executable on ``PATH`` that records how it was
invoked. No test reaches a real model.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from guard import AskCommand, AskOutcome
from tests.conftest import AskScript

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
QUESTION = "An AI agent is stuck.\n## The agent's task\nfix `serve --config` and don't touch $HOME"

pytestmark = pytest.mark.anyio


class _Endpoint:
    """A chat completions endpoint on localhost: replies with ``reply``
    (status, JSON body) and remembers each request."""

    def __init__(self) -> None:
        self.reply: tuple[int, Any] = (200, {"choices": [{"message": {"role": "assistant", "content": " Edit it. "}}]})
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append((self.path, dict(self.headers), body))
                status, payload = endpoint.reply
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Endpoint]:
    endpoint = _Endpoint()
    thread = threading.Thread(target=endpoint.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    monkeypatch.setenv("OPENAI_BASE_URL", endpoint.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    yield endpoint
    endpoint.server.shutdown()
    endpoint.server.server_close()
    thread.join()


async def _ask_openai(model: str = "gpt-test") -> AskOutcome:
    return await AskCommand(str(EXAMPLES / "ask-openai.py"), model=model, timeout_ms=30_000).ask(QUESTION)


async def test_openai_example_prints_the_reply(endpoint: _Endpoint, anyio_backend: str) -> None:
    outcome = await _ask_openai()

    assert (outcome.advice, outcome.reason) == ("Edit it.", "ok")
    [(path, headers, body)] = endpoint.requests
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test-not-a-real-key"
    assert body["model"] == "gpt-test"
    assert body["messages"][-1] == {"role": "user", "content": QUESTION}


async def test_openai_example_prefers_openai_model(
    endpoint: _Endpoint, monkeypatch: pytest.MonkeyPatch, anyio_backend: str
) -> None:
    monkeypatch.setenv("OPENAI_MODEL", "local-llama")
    await _ask_openai(model="opus")
    assert endpoint.requests[0][2]["model"] == "local-llama"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ((500, {"error": "overloaded"}), 'exit status 1: ask-openai: HTTP 500: {"error": "overloaded"}'),
        ((200, {"choices": [{"message": {"content": "  "}}]}), "exit status 1: ask-openai: empty reply"),
        ((200, {"nothing": True}), 'exit status 1: ask-openai: unexpected reply: {"nothing": true}'),
    ],
)
async def test_openai_example_failures_are_unavailable(
    endpoint: _Endpoint, reply: tuple[int, Any], reason: str, anyio_backend: str
) -> None:
    endpoint.reply = reply
    outcome = await _ask_openai()
    assert (outcome.advice, outcome.reason) == (None, reason)


async def test_openai_example_unreachable_endpoint_is_unavailable(
    endpoint: _Endpoint, monkeypatch: pytest.MonkeyPatch, anyio_backend: str
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    outcome = await _ask_openai()
    assert outcome.advice is None
    assert outcome.reason.startswith("exit status 1: ask-openai: ")


@pytest.fixture
def fake_claude(ask_script: AskScript, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``claude`` on PATH that records its argv, cwd and stdin, then answers."""
    record = tmp_path / "claude-call.json"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ask_script(
        "import json, os, sys\n"
        "call = {'argv': sys.argv[1:], 'cwd': os.getcwd(), 'stdin': sys.stdin.read()}\n"
        f"json.dump(call, open({str(record)!r}, 'w'))\n"
        "print('Run cargo build after editing src/main.rs.')\n"
        "sys.exit(int(os.environ.get('FAKE_CLAUDE_EXIT', '0')))",
        name="bin/claude",
        shebang=f"#!{sys.executable}",
    )
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return record


async def test_claude_example_disables_every_tool_and_passes_the_question(
    fake_claude: Path, anyio_backend: str
) -> None:
    outcome = await AskCommand(str(EXAMPLES / "ask-claude.sh"), model="opus", timeout_ms=30_000).ask(QUESTION)

    assert (outcome.advice, outcome.reason) == ("Run cargo build after editing src/main.rs.", "ok")
    call = json.loads(fake_claude.read_text())
    argv = call["argv"]
    assert argv[-1] == QUESTION
    assert argv[argv.index("--model") + 1] == "opus"
    assert argv[argv.index("--tools") + 1] == ""
    denied = set(argv[argv.index("--disallowedTools") + 1].split(","))
    assert {"Bash", "Read", "Write", "Edit", "Glob", "Grep", "WebFetch", "WebSearch", "Task"} <= denied
    assert "--strict-mcp-config" in argv
    assert json.loads(argv[argv.index("--mcp-config") + 1]) == {"mcpServers": {}}
    assert call["stdin"] == ""
    assert Path(call["cwd"]).name.startswith("ask-claude.")
    assert not Path(call["cwd"]).exists()  # the scratch directory is removed


async def test_claude_example_failure_is_unavailable(
    fake_claude: Path, monkeypatch: pytest.MonkeyPatch, anyio_backend: str
) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_EXIT", "1")
    outcome = await AskCommand(str(EXAMPLES / "ask-claude.sh"), model="opus", timeout_ms=30_000).ask(QUESTION)
    assert (outcome.advice, outcome.reason) == (None, "exit status 1")
