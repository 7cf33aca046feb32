"""docs/serve.md shows what the server really does: every ``console`` block's
commands run, in order, against a real ``repeat-tool-guard serve`` process,
and print exactly what the page shows; its settings.json snippet is what
``http_hook_settings`` returns."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from guard.adapters.claude_hooks import http_hook_settings
from tests.guard.server.conftest import REPO, StartServer

PAGE = REPO / "docs" / "serve.md"
CONSOLE = re.compile(r"^```console\n(.*?)^```$", re.DOTALL | re.MULTILINE)
TS = re.compile(r'"ts":[0-9.e+]+')


def console_blocks() -> list[list[tuple[str, str]]]:
    """Each console block as (command, expected output) pairs."""
    found = []
    for block in CONSOLE.findall(PAGE.read_text(encoding="utf-8")):
        pairs: list[tuple[str, str]] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                pairs.append((line[2:], ""))
            else:
                command, output = pairs[-1]
                pairs[-1] = (command, f"{output}{line}\n")
        found.append(pairs)
    return found


def test_the_curl_examples_print_what_the_page_shows(start_server: StartServer, tmp_path: Path) -> None:
    blocks = console_blocks()
    assert len(blocks) >= 2
    server = start_server()
    env = {**os.environ, "GUARD": server.url}
    for pairs in blocks:
        for command, expected in pairs:
            done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, cwd=tmp_path)
            assert done.returncode == 0, f"{command}\n{done.stderr}"
            assert TS.sub('"ts":0', done.stdout.strip()) == TS.sub('"ts":0', expected.strip()), command
    assert server.stop() == 0
    checked = subprocess.run(
        ["repeat-tool-guard", "replay", "--check", str(server.state_dir / "demo.jsonl")],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr


def test_the_settings_snippet_is_what_http_hook_settings_returns() -> None:
    text = PAGE.read_text(encoding="utf-8")
    snippets = re.findall(r"^```json\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)
    settings = json.loads(snippets[0])
    assert settings == http_hook_settings("http://127.0.0.1:8787/hooks/claude-code")
    (handler,) = http_hook_settings("http://x/hooks/claude-code", token_env="GUARD_TOKEN")["hooks"]["Stop"][0]["hooks"]
    assert json.loads(snippets[1]) == {**handler, "url": "http://127.0.0.1:8787/hooks/claude-code"}


@pytest.mark.parametrize("command", ["repeat-tool-guard serve --help"])
def test_the_options_table_lists_every_option(command: str) -> None:
    helped = subprocess.run(command.split(), capture_output=True, text=True, check=True).stdout
    options = set(re.findall(r"(--[a-z-]+)", helped)) - {"--help"}
    table = PAGE.read_text(encoding="utf-8").split("## Running it", 1)[1].split("##", 1)[0]
    assert options <= set(re.findall(r"`(--[a-z-]+)", table))
