"""POST /hooks/codex, POST /hooks/gemini-cli and Codex's ``mcp_tool`` hooks at
POST /mcp: the answers ``repeat-tool-guard hook --agent`` gives, from one
resident guard."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guard import GENTLE_REMINDER
from guard.adapters.claude_hooks import answer_hook, forward_command
from guard.adapters.codex_hooks import CODEX
from guard.adapters.hook_install import add_toml_table, remove_toml_table
from guard.cli import main
from guard.server.mcp_hooks import CODEX_HOOK_TOOL, MCP_INPUTS, mcp_hook_settings
from tests.guard.server.conftest import MakeServed, Served, hook_payload

SESSION = "01a23210-2f69-7141-9454-d3db68144069"


def codex_calls(n: int) -> Iterator[dict[str, Any]]:
    tool = {"tool_name": "Bash", "tool_input": {"command": "ls src"}, "tool_use_id": f"call_{n:02d}"}
    yield hook_payload(SESSION, "PreToolUse", **tool)
    yield hook_payload(SESSION, "PostToolUse", tool_response="cfg.py\n", **tool)


def gemini_calls(n: int) -> Iterator[dict[str, Any]]:
    tool = {"tool_name": "run_shell_command", "tool_input": {"command": "ls src", "description": f"take {n}"}}
    yield hook_payload(SESSION, "BeforeTool", **tool)
    response = {"llmContent": f"Output: cfg.py\nProcess Group PGID: {n + 100}", "returnDisplay": "cfg.py"}
    yield hook_payload(SESSION, "AfterTool", tool_response=response, **tool)


def rpc(served: Served, method: str, params: dict[str, Any] | None = None, request_id: int = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    response = served.post("/mcp", body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def tool_answer(served: Served, payload: dict[str, Any]) -> dict[str, Any]:
    answer = rpc(served, "tools/call", {"name": CODEX_HOOK_TOOL, "arguments": payload})["result"]
    assert answer["isError"] is False
    parsed: dict[str, Any] = json.loads(answer["content"][0]["text"])
    return parsed


@pytest.mark.parametrize(("route", "calls"), [("codex", codex_calls), ("gemini-cli", gemini_calls)])
def test_each_clis_route_answers_what_its_command_hook_prints(
    served: Served, tmp_path: Path, route: str, calls: Any
) -> None:
    from guard.adapters.hook_runtimes import RUNTIMES

    payloads = [p for n in range(3) for p in calls(n)]
    over_http = [served.post(f"/hooks/{route}", p).json() for p in payloads]
    by_command = [answer_hook(p, tmp_path / "hook-state", runtime=RUNTIMES[route]) for p in payloads]
    assert over_http == by_command
    assert GENTLE_REMINDER in json.dumps(over_http[-1])
    assert served.post(f"/hooks/{route}", hook_payload(SESSION, "Notification")).json() == {}


def test_codex_mcp_tool_hooks_get_the_command_hooks_answers(served: Served, tmp_path: Path) -> None:
    init = rpc(served, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})["result"]
    assert init["protocolVersion"] == "2025-06-18"
    assert init["capabilities"] == {"tools": {}}
    assert served.post("/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
    (tool,) = rpc(served, "tools/list")["result"]["tools"]
    assert tool["name"] == CODEX_HOOK_TOOL
    assert rpc(served, "ping")["result"] == {}

    payloads = [hook_payload(SESSION, "UserPromptSubmit", prompt="list src")]
    payloads += [p for n in range(3) for p in codex_calls(n)]
    over_mcp = [tool_answer(served, p) for p in payloads]
    assert over_mcp == [answer_hook(p, tmp_path / "hook-state", runtime=CODEX) for p in payloads]
    assert over_mcp[-1]["hookSpecificOutput"]["additionalContext"] == GENTLE_REMINDER
    assert tool_answer(served, hook_payload(SESSION, "PermissionRequest")) == {}


def test_mcp_errors_are_json_rpc_errors_and_a_bad_payload_a_tool_error(served: Served) -> None:
    not_json = served.post("/mcp", content=b"{oops", headers={"Content-Type": "application/json"})
    assert not_json.json()["error"]["code"] == -32700
    assert served.post("/mcp", [1]).json()["error"]["code"] == -32600
    assert rpc(served, "resources/list")["error"]["code"] == -32601
    assert rpc(served, "tools/call", {"name": "other"})["error"]["message"] == (
        "unknown tool 'other'; the tool is 'codex_hook'"
    )
    bad = rpc(served, "tools/call", {"name": CODEX_HOOK_TOOL, "arguments": {"session_id": "../x"}})["result"]
    assert bad["isError"] is True
    assert "session_id '../x'" in bad["content"][0]["text"]
    assert rpc(served, "tools/call", {"name": CODEX_HOOK_TOOL})["result"]["isError"] is True
    for message in (
        rpc(served, "tools/call", {"name": "x" * 100_000})["error"]["message"],
        rpc(served, "y" * 100_000)["error"]["message"],
        rpc(served, "tools/call", {"name": CODEX_HOOK_TOOL, "arguments": {"session_id": "z" * 100_000}})["result"][
            "content"
        ][0]["text"],
    ):
        assert len(message) < 400  # the value quoted, cut short
    assert rpc(served, "initialize", {})["result"]["protocolVersion"] == "2025-06-18"
    odd = {"session_id": "s", "hook_event_name": ["PreToolUse"]}
    assert tool_answer(served, odd) == {}  # a name that is no string is no event
    deep = b"[" * 100_000 + b"]" * 100_000
    too_deep = served.post("/mcp", content=deep, headers={"Content-Type": "application/json"})
    assert (too_deep.status_code, too_deep.json()["error"]["code"]) == (200, -32700)
    assert too_deep.json()["error"]["message"].startswith("nests too deeply to read")


def test_mcp_settings_pass_each_event_only_the_fields_it_carries(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["hook-settings", "--agent", "codex", "--http", "http://127.0.0.1:8787/", "--mcp"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == mcp_hook_settings()
    assert '[mcp_servers.repeat_tool_guard]\nurl = "http://127.0.0.1:8787/mcp"\n' in err
    assert set(MCP_INPUTS) <= set(CODEX.seams)
    assert "${tool_response}" in json.dumps(MCP_INPUTS["PostToolUse"])
    assert "${tool_response}" not in json.dumps(MCP_INPUTS["PreToolUse"])
    assert main(["hook-settings", "--mcp"]) == 2
    assert "--mcp: Codex's mcp_tool hooks" in capsys.readouterr().err

    hooks = tmp_path / "codex" / "hooks.json"
    args = ["install", "--agent", "codex", "--file", str(hooks), "--http", "http://h:1", "--mcp", "--token-env", "T"]
    assert main(args) == 0
    config = (tmp_path / "codex" / "config.toml").read_text()
    assert config == '[mcp_servers.repeat_tool_guard]\nurl = "http://h:1/mcp"\nbearer_token_env_var = "T"\n'
    assert main(args) == 0
    assert "is there already (left as it is)" in capsys.readouterr().err
    assert main(["install", "--agent", "codex", "--file", str(hooks), "--uninstall"]) == 0
    assert json.loads(hooks.read_text()) == {}


def test_a_toml_table_is_appended_after_what_is_there(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('model = "x"')
    assert add_toml_table(config, "[t]\na = 1\n") == "[t] added"
    assert config.read_text() == 'model = "x"\n\n[t]\na = 1\n'
    config.write_text('model = "x"\n')
    add_toml_table(config, "[t]\na = 1\n")
    assert config.read_text() == 'model = "x"\n\n[t]\na = 1\n'


@pytest.mark.parametrize("token", ["s3cr3t-0123456789abcdef", None], ids=["token", "loopback-without-token"])
def test_the_curl_hook_sends_the_token_without_putting_it_on_curls_command_line(
    make_served: MakeServed, tmp_path: Path, token: str | None
) -> None:
    served = make_served(token=token)
    curl = shutil.which("curl")
    assert curl is not None, "curl is needed to run the forwarding hook"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "curl"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {shlex.quote(str(tmp_path / "argv"))}\nexec {curl} "$@"\n')
    wrapper.chmod(0o755)
    command = forward_command(f"{served.url}/hooks/codex", token_env="GUARD_TOKEN" if token else None)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "GUARD_TOKEN": token or ""}
    answers = []
    for _ in range(3):
        for payload in codex_calls(1):
            done = subprocess.run(
                ["sh", "-c", command], input=json.dumps(payload), capture_output=True, text=True, env=env, check=True
            )
            answers.append(done.stdout)
    assert "the loop guard is off" not in "".join(answers)
    assert len((tmp_path / "argv").read_text().splitlines()) == 6
    assert not token or token not in (tmp_path / "argv").read_text()
    log = (served.state_dir / f"{SESSION}.jsonl").read_text()
    assert log.count('"type":"tool/call"') == 3


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            'model = "o3"\n\n[mcp_servers.repeat_tool_guard]\nurl = "u"\n\n# docs: keep it pinned\n[docs]\nc = 1\n',
            'model = "o3"\n\n# docs: keep it pinned\n[docs]\nc = 1\n',
        ),
        ('[mcp_servers.repeat_tool_guard]\nurl = "u"\n\n\n[docs]\nc = 1\n', "[docs]\nc = 1\n"),
        ('a = 1\n[mcp_servers.repeat_tool_guard]\nurl = "u"\n# inside\nx = 2\n[docs]\n', "a = 1\n[docs]\n"),
    ],
)
def test_uninstalling_the_mcp_table_keeps_the_comments_of_the_next_table(
    tmp_path: Path, before: str, after: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(before)
    assert remove_toml_table(config, "[mcp_servers.repeat_tool_guard]") == "[mcp_servers.repeat_tool_guard] removed"
    assert config.read_text() == after
