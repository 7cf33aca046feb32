"""The repository's Claude Code plugin and marketplace, installed by the real
Claude Code CLI (bundled in ``claude-agent-sdk``) the way a user installs
them, then driven offline against the scripted fake Anthropic API."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from guard import GENTLE_REMINDER
from guard.adapters.claude_hooks import CLAUDE_CODE, path_command
from tests.claude_cli import FakeAnthropic, text, tool_use

REPOSITORY = Path(__file__).resolve().parents[3]
PLUGIN = REPOSITORY / "plugins" / "repeat-tool-guard"


def described_bash(command: str, description: str) -> dict[str, Any]:
    return tool_use("Bash", {"command": command, "description": description})


def install_plugin(api: FakeAnthropic) -> None:
    added = api.claude("plugin", "marketplace", "add", str(REPOSITORY))
    assert added.returncode == 0, added.stderr
    installed = api.claude("plugin", "install", "repeat-tool-guard@repeat-tool-guard")
    assert installed.returncode == 0, installed.stderr


def guard_on_path(state: Path, bin_dir: Path | None) -> dict[str, str]:
    """The environment the hooks run in: this checkout's guard as
    ``repeat-tool-guard`` on PATH (or, with ``bin_dir`` None, nowhere on it)."""
    path = "/usr/bin:/bin"
    if bin_dir is not None:
        bin_dir.mkdir()
        shim = bin_dir / "repeat-tool-guard"
        shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m guard "$@"\n')
        shim.chmod(0o755)
        path = f"{bin_dir}:{path}"
    return {
        "PATH": path,
        "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPOSITORY)),
        "REPEAT_TOOL_GUARD_STATE": str(state),
    }


def test_the_plugins_hooks_are_the_ones_the_guard_prints() -> None:
    hooks = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())
    expected = CLAUDE_CODE.settings({"type": "command", "command": path_command(["repeat-tool-guard", "hook"])})
    assert hooks["hooks"] == expected["hooks"]
    marketplace = json.loads((REPOSITORY / ".claude-plugin" / "marketplace.json").read_text())
    (entry,) = marketplace["plugins"]
    assert (REPOSITORY / entry["source"]).resolve() == PLUGIN
    assert json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())["name"] == entry["name"]


@pytest.mark.slow
def test_the_installed_plugin_reminds_through_reworded_descriptions(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    install_plugin(fake_anthropic)
    state = tmp_path / "state"
    fake_anthropic.script(
        [described_bash("ls src", "List the source directory")],
        [described_bash("ls src", "Show what is in src")],
        [described_bash("ls src", "Look at the files under src again")],
        [text("Found it.")],
    )
    done = fake_anthropic.run_cli(
        "find the config loader", env=guard_on_path(state, tmp_path / "bin"), setting_sources="user"
    )

    assert done.returncode == 0, done.stderr
    assert GENTLE_REMINDER not in fake_anthropic.texts_after_tool_results(2)
    assert GENTLE_REMINDER in fake_anthropic.texts_after_tool_results(3)
    assert list(state.glob("*.jsonl")), "the plugin's hooks ran the guard"


@pytest.mark.slow
def test_without_the_guard_on_path_every_call_runs(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    install_plugin(fake_anthropic)
    trace = """python3 -c 'open("ran.txt", "a").write("ran\\n")'"""
    fake_anthropic.script(*[[tool_use("Bash", {"command": trace})]] * 4, [text("done")])
    done = fake_anthropic.run_cli("record a run", env=guard_on_path(tmp_path / "state", None), setting_sources="user")

    assert done.returncode == 0, done.stderr
    assert (fake_anthropic.work / "ran.txt").read_text() == "ran\n" * 4
    assert "repeat-tool-guard is not on PATH: the loop guard is off" in done.stdout
