"""The real Codex CLI and Gemini CLI, offline: scripted model APIs on loopback.

``FakeResponses`` serves the OpenAI Responses API (streamed, as Codex reads it
through a ``model_providers`` entry with ``wire_api = "responses"``);
``FakeGemini`` serves the Gemini API (``streamGenerateContent?alt=sse``, as
Gemini CLI reads it from ``$GOOGLE_GEMINI_BASE_URL`` with an API key). Each
answers a request with the next scripted turn (lists of ``text``/``tool_use``
blocks from ``tests.claude_cli``) and records every request body, so a test
asserts on what reached the model next: the tool output, a denial, a reminder.
Requests that offer no tools (titles, summaries, routing) are side requests,
answered with a short text and kept apart.

``run(prompt, hooks=...)`` runs the CLI non-interactively (``codex exec`` /
``gemini -p``) in ``home/work`` with ``home`` as its HOME (and
``CODEX_HOME``), the hooks written where the CLI reads them, and traffic
beyond loopback sent to a closed port. ``installed()`` finds the CLIs: on
``$PATH``, under ``$REPEAT_TOOL_GUARD_NPM_CLIS`` or ``/work/npm-clis`` (where
``.ci/run`` installs the pinned versions).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.claude_cli import Block, ScriptedServer, text

__all__ = ["CODEX_VERSION", "GEMINI_VERSION", "FakeGemini", "FakeResponses", "cli_path", "printed_settings", "shell"]

CODEX_VERSION = "0.171.0"
GEMINI_VERSION = "0.61.0"
EXHAUSTED = "(script exhausted)"
_NPM_DIRS = (os.environ.get("REPEAT_TOOL_GUARD_NPM_CLIS", ""), "/work/npm-clis", str(Path.home() / ".npm-clis"))


def cli_path(name: str) -> Path | None:
    """The ``codex`` or ``gemini`` executable: a pinned npm install first, else ``$PATH``."""
    for base in _NPM_DIRS:
        if base:
            candidate = Path(base) / "node_modules" / ".bin" / name
            if candidate.exists():
                return candidate
    found = shutil.which(name)
    return Path(found) if found else None


def shell(command: str, runtime: str) -> Block:
    """A call of the CLI's shell tool with ``command``."""
    if runtime == "codex":  # its exec_command tool, which its hooks call Bash
        return {"type": "tool_use", "id": None, "name": "exec_command", "input": {"cmd": command}}
    return {"type": "tool_use", "id": None, "name": "run_shell_command", "input": {"command": command}}


def replays_cleanly(log: Path, *config: str) -> None:
    """``repeat-tool-guard replay LOG --check CONFIG`` agrees with every guard action ``log`` holds."""
    done = subprocess.run(
        [sys.executable, "-m", "guard", "replay", str(log), "--check", *config],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def printed_settings(agent: str, *options: str) -> dict[str, Any]:
    """What ``repeat-tool-guard hook-settings --agent AGENT OPTIONS`` prints."""
    done = subprocess.run(
        [sys.executable, "-m", "guard", "hook-settings", "--agent", agent, *options],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"hook-settings failed: {done.stderr}")
    printed: dict[str, Any] = json.loads(done.stdout)
    return printed


def _offline_env(home: Path) -> dict[str, str]:
    """The CLI's environment: ``home`` as HOME, no traffic beyond loopback, and
    this checkout's ``PYTHONPATH`` (the hook commands import the guard under test)."""
    inherited = {key: os.environ[key] for key in ("PYTHONPATH",) if key in os.environ}
    return {
        **inherited,
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
        "NO_COLOR": "1",
        "TERM": "dumb",
    }


class _FakeCLIAPI(ScriptedServer):
    agent = ""
    """The CLI's name for ``--agent``."""

    def __init__(self, name: str, id_prefix: str, home: Path) -> None:
        super().__init__(name, id_prefix)
        self.home = home
        self.work = home / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.side_requests: list[dict[str, Any]] = []
        self.overruns = 0

    def shell_calls(self, command: str, times: int) -> list[list[Block]]:
        """``times`` model turns, each one call of the shell tool with ``command``."""
        return [[shell(command, self.agent)] for _ in range(times)]

    def run_hooks(self, settings: Mapping[str, Any], prompt: str = "go") -> subprocess.CompletedProcess[str]:
        """Run the CLI with ``settings`` as ``hook-settings`` printed them."""
        raise NotImplementedError

    def runs(self, trace: str = "ran.txt") -> int:
        """Lines in ``work/<trace>``: how many times a command that appends one ran."""
        path = self.work / trace
        return len(path.read_text().splitlines()) if path.exists() else 0

    def _run(self, command: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        """``command`` in ``work`` with ``env`` alone, no stdin, output captured."""
        return subprocess.run(
            command, cwd=self.work, env=env, capture_output=True, text=True, timeout=timeout, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def _seen(self, path: str) -> None:
        with self._lock:
            self.paths.append(path)

    def _next(self, body: dict[str, Any], offers_tools: bool) -> list[Block]:
        with self._lock:
            if not offers_tools:
                self.side_requests.append(body)
                return [text("ok")]
            self.requests.append(body)
            if self._turns:
                return self._turns.pop(0)
            self.overruns += 1
            return [text(EXHAUSTED)]

    def _serial(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids


class FakeResponses(_FakeCLIAPI):
    """The OpenAI Responses API for Codex."""

    agent = "codex"

    def __init__(self, home: Path) -> None:
        super().__init__("fake-responses", "call_fake_", home)

    def run_hooks(self, settings: Mapping[str, Any], prompt: str = "go") -> subprocess.CompletedProcess[str]:
        return self.run(prompt, hooks=settings)

    def service_checks(self, services: list[str]) -> list[list[Block]]:
        """One model turn per service: ``sh check.sh`` run in its directory
        (``exec_command``'s ``workdir``), each check leaving ``checked`` there."""
        for service in services:
            (self.work / service).mkdir()
            (self.work / service / "check.sh").write_text("touch checked; echo 'All checks passed'\n")
        return [
            [
                {
                    "type": "tool_use",
                    "id": None,
                    "name": "exec_command",
                    "input": {"cmd": "sh check.sh", "workdir": str(self.work / service)},
                }
            ]
            for service in services
        ]

    def config_toml(self, extra: str = "") -> str:
        return (
            'model = "gpt-5.1-codex"\nmodel_provider = "fake"\napproval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\n\n'
            f'[model_providers.fake]\nname = "fake"\nbase_url = "{self.url}/v1"\n'
            'wire_api = "responses"\nenv_key = "FAKE_OPENAI_KEY"\nrequest_max_retries = 0\n'
            "stream_max_retries = 0\n\n" + extra
        )

    def tool_outputs(self, index: int) -> list[dict[str, Any]]:
        """The ``function_call_output`` items request ``index`` carried."""
        return [i for i in self.requests[index].get("input", []) if i.get("type") == "function_call_output"]

    def texts_after_last_call(self, index: int) -> str:
        """Every text request ``index`` carried after its last ``function_call``: the
        tool output and what the hooks added next to it."""
        items = self.requests[index].get("input", [])
        last = max((n for n, i in enumerate(items) if i.get("type") == "function_call"), default=-1)
        return "\n".join(_response_texts(items[last + 1 :]))

    def run(
        self,
        prompt: str,
        *,
        hooks: Mapping[str, Any] | None = None,
        config: str = "",
        env: Mapping[str, str] | None = None,
        timeout: float = 180,
        trust: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """``codex exec`` with ``hooks`` (a ``hooks.json`` body) in ``CODEX_HOME``."""
        codex = cli_path("codex")
        if codex is None:
            raise RuntimeError("the codex CLI is not installed")
        codex_home = self.home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(self.config_toml(config))
        if hooks is not None:
            (codex_home / "hooks.json").write_text(json.dumps(hooks))
        command = [str(codex), "exec", "--skip-git-repo-check", "--json"]
        if trust:
            command.append("--dangerously-bypass-hook-trust")
        full_env = {**_offline_env(self.home), "CODEX_HOME": str(codex_home), "FAKE_OPENAI_KEY": "sk-fake"}
        return self._run([*command, prompt], {**full_env, **(env or {})}, timeout)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(_Handler):
            def answer(self, path: str, body: dict[str, Any]) -> bytes | None:
                api._seen(path)
                if not path.rstrip("/").endswith("/responses"):
                    return None
                blocks = api._next(body, bool(body.get("tools")))
                return _sse(_response_events(api._numbered(blocks), api._serial(), body))

        return Handler


class FakeGemini(_FakeCLIAPI):
    """The Gemini API for Gemini CLI. A subagent's requests (``invoke_agent``)
    are answered from turns of their own (``script_subagent``), so one
    running beside the main agent cannot take the main agent's turns."""

    agent = "gemini-cli"

    def __init__(self, home: Path) -> None:
        super().__init__("fake-gemini", "unused_", home)
        self.subagent_requests: list[dict[str, Any]] = []
        self._subagent_turns: dict[str, list[list[Block]]] = {}

    def run_hooks(self, settings: Mapping[str, Any], prompt: str = "go") -> subprocess.CompletedProcess[str]:
        return self.run(prompt, hooks=settings["hooks"])

    def script_subagent(self, task: str, *turns: Sequence[Block]) -> None:
        """Turns for the subagent whose task (its first user turn, the
        ``invoke_agent`` call's ``prompt``) contains ``task``: its requests
        are answered from these, in order, and kept in ``subagent_requests``."""
        with self._lock:
            self._subagent_turns.setdefault(task, []).extend(self._numbered(turn) for turn in turns)

    def function_responses(self, index: int) -> list[dict[str, Any]]:
        """The ``functionResponse`` parts of request ``index``'s last user turn."""
        contents = self.requests[index].get("contents", [])
        parts = contents[-1].get("parts", []) if contents else []
        return [p["functionResponse"] for p in parts if "functionResponse" in p]

    def texts_after_last_call(self, index: int, *, subagent: bool = False) -> str:
        """Every text of request ``index``'s last turn (function responses
        included): of the main agent's requests, or the subagents'."""
        contents = (self.subagent_requests if subagent else self.requests)[index].get("contents", [])
        parts = contents[-1].get("parts", []) if contents else []
        return "\n".join(_gemini_texts(parts))

    def _next(self, body: dict[str, Any], offers_tools: bool) -> list[Block]:
        first = json.dumps(body.get("contents", [])[:1])
        with self._lock:
            for task, turns in self._subagent_turns.items():
                if offers_tools and task in first:
                    self.subagent_requests.append(body)
                    if turns:
                        return turns.pop(0)
                    self.overruns += 1
                    return [text(EXHAUSTED)]
        return super()._next(body, offers_tools)

    def run(
        self,
        prompt: str,
        *,
        hooks: Mapping[str, Any] | None = None,
        settings: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 180,
    ) -> subprocess.CompletedProcess[str]:
        """``gemini -p`` with ``hooks`` (the ``hooks`` block) in ``~/.gemini/settings.json``."""
        gemini = cli_path("gemini")
        if gemini is None:
            raise RuntimeError("the gemini CLI is not installed")
        config = self.home / ".gemini"
        config.mkdir(parents=True, exist_ok=True)
        body: dict[str, Any] = {
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "tools": {"sandbox": False},
            # its own detector would end the run at the 5th identical call: the guard is under test
            "model": {"disableLoopDetection": True},
            **(settings or {}),
        }
        if hooks is not None:
            body["hooks"] = dict(hooks)
        (config / "settings.json").write_text(json.dumps(body))
        full_env = {
            **_offline_env(self.home),
            "GEMINI_API_KEY": "fake-key",
            "GOOGLE_GEMINI_BASE_URL": self.url,
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        }
        command = [str(gemini), "-p", prompt, "--yolo", "--output-format", "json", "-m", "gemini-2.5-flash"]
        return self._run(command, {**full_env, **(env or {})}, timeout)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(_Handler):
            def answer(self, path: str, body: dict[str, Any]) -> bytes | None:
                api._seen(path)
                if "generatecontent" not in path.lower():
                    return None
                blocks = api._next(body, bool(body.get("tools")))
                chunk = _gemini_chunk(blocks, api._serial())
                if "streamGenerateContent" in path:
                    return _sse([("", chunk)])
                return json.dumps(chunk).encode()

        return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, path: str, body: dict[str, Any]) -> bytes | None:
        raise NotImplementedError

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._send(200, b'{"models": [], "data": []}', "application/json")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        payload = self.answer(self.path, body)
        if payload is None:
            self._send(404, b'{"error": {"message": "not scripted"}}', "application/json")
        elif payload.startswith(b"{"):
            self._send(200, payload, "application/json")
        else:
            self._send(200, payload, "text/event-stream")

    def _send(self, status: int, payload: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _sse(events: Sequence[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(
        ((f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n").encode() for name, data in events
    )


def _response_events(blocks: list[Block], number: int, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    output: list[dict[str, Any]] = []
    for n, block in enumerate(blocks):
        if block["type"] == "tool_use":
            arguments = json.dumps(block["input"])
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{number}_{n}",
                    "call_id": block["id"],
                    "name": block["name"],
                    "arguments": arguments,
                    "status": "completed",
                }
            )
        else:
            content = [{"type": "output_text", "text": block["text"], "annotations": []}]
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{number}_{n}",
                    "role": "assistant",
                    "status": "completed",
                    "content": content,
                }
            )
    response: dict[str, Any] = {
        "id": f"resp_{number:02d}",
        "object": "response",
        "created_at": 1764489600,
        "status": "in_progress",
        "model": body.get("model", "gpt-5.1-codex"),
        "output": [],
    }
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": response})
    ]
    for index, item in enumerate(output):
        events.append(
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": index, "item": item})
        )
        events.append(
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": index, "item": item})
        )
    done = {**response, "status": "completed", "output": output, "usage": usage}
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return events


def _response_texts(items: Sequence[dict[str, Any]]) -> Iterator[str]:
    for item in items:
        if item.get("type") == "function_call_output":
            output = item.get("output")
            if isinstance(output, str):
                yield output
            elif isinstance(output, list):
                yield from (part.get("text", "") for part in output if isinstance(part, dict))
        elif item.get("type") == "message":
            content = item.get("content")
            if isinstance(content, str):
                yield content
            else:
                yield from (part.get("text", "") for part in content or [] if isinstance(part, dict))


def _gemini_chunk(blocks: list[Block], number: int) -> dict[str, Any]:
    parts = [
        {"text": b["text"]} if b["type"] == "text" else {"functionCall": {"name": b["name"], "args": b["input"]}}
        for b in blocks
    ]
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "gemini-2.5-flash",
        "responseId": f"resp-{number:02d}",
    }


def _gemini_texts(parts: Sequence[dict[str, Any]]) -> Iterator[str]:
    for part in parts:
        if "text" in part:
            yield part["text"]
        elif "functionResponse" in part:
            yield json.dumps(part["functionResponse"].get("response"))
