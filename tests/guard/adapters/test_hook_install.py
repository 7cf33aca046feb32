"""``hook-settings --agent`` and ``install``: what each CLI's settings get, a
preset kept by name, a merge that leaves other hooks alone, a backup, an
install that is idempotent, an uninstall, and a file that is no JSON refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from guard.adapters.claude_hooks import CLAUDE_CODE, HOOK_EVENTS
from guard.adapters.codex_hooks import CODEX
from guard.adapters.gemini_hooks import GEMINI_CLI
from guard.adapters.hook_install import SettingsFileError, install, settings_file
from guard.cli import main

OTHER_HOOK = {"type": "command", "command": "notify-send done"}


def printed(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["hook-settings", *args]) == 0
    settings: dict[str, Any] = json.loads(capsys.readouterr().out)
    return settings


def commands(settings: dict[str, Any]) -> set[str]:
    return {
        h.get("command") or h.get("url") for groups in settings["hooks"].values() for g in groups for h in g["hooks"]
    }


@pytest.mark.parametrize(
    ("agent", "runtime"), [("claude-code", CLAUDE_CODE), ("codex", CODEX), ("gemini-cli", GEMINI_CLI)]
)
def test_each_cli_gets_its_events_and_one_fail_open_command(
    capsys: pytest.CaptureFixture[str], agent: str, runtime: Any
) -> None:
    settings = printed(capsys, "--agent", agent, "--config", "recommended")
    assert tuple(settings["hooks"]) == runtime.events
    (command,) = commands(settings)
    assert " hook " in command
    assert command.split(" || ")[0].endswith("--config recommended"), "a preset stays a preset"
    assert ("--agent" in command) == (agent != "claude-code")
    assert '|| printf \'{"systemMessage":"repeat-tool-guard hook failed' in command
    matchers = {g.get("matcher") for groups in settings["hooks"].values() for g in groups}
    assert matchers == ({None} if agent == "codex" else {None, "*"})


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini-cli"])
def test_a_shadow_hook_is_passed_shadow(capsys: pytest.CaptureFixture[str], agent: str) -> None:
    (command,) = commands(printed(capsys, "--agent", agent, "--config", "recommended", "--shadow"))
    assert command.split(" || ")[0].endswith("--config recommended --shadow")
    assert main(["hook-settings", "--http", "http://x", "--shadow"]) == 2
    assert "--shadow" in capsys.readouterr().err


def test_claude_codes_events_are_its_runtimes() -> None:
    assert CLAUDE_CODE.events == HOOK_EVENTS


def test_a_config_file_is_passed_by_its_absolute_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "guard.toml").write_text("[remind]\nthresholds = [4]\n")
    monkeypatch.chdir(tmp_path)
    (command,) = commands(printed(capsys, "--agent", "gemini-cli", "--config", "guard.toml"))
    assert f"--config {tmp_path / 'guard.toml'}" in command


def test_http_settings_point_each_cli_at_its_route(capsys: pytest.CaptureFixture[str]) -> None:
    (url,) = commands(printed(capsys, "--http", "http://127.0.0.1:8787/"))
    assert url == "http://127.0.0.1:8787/hooks/claude-code"
    (forward,) = commands(printed(capsys, "--agent", "codex", "--http", "http://127.0.0.1:8787", "--token-env", "T"))
    assert forward.startswith("curl -sSf --max-time 10 ")
    assert '-H "Authorization: Bearer $T" http://127.0.0.1:8787/hooks/codex || printf' in forward
    assert main(["hook-settings", "--http", "http://x", "--config", "recommended"]) == 2
    assert "the server's own --config, --shadow and --state-dir apply" in capsys.readouterr().err


def test_install_merges_backs_up_is_idempotent_and_uninstalls(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "settings.json"
    original = {"theme": "dark", "hooks": {"BeforeTool": [{"matcher": "*", "hooks": [OTHER_HOOK]}]}}
    path.write_text(json.dumps(original))
    path.chmod(0o640)
    assert main(["install", "--agent", "gemini-cli", "--file", str(path), "--config", "recommended"]) == 0
    assert "guard hooks installed (backup: settings.json.bak-" in capsys.readouterr().err
    installed = json.loads(path.read_text())
    assert installed["theme"] == "dark"
    assert path.stat().st_mode & 0o777 == 0o640
    assert installed["hooks"]["BeforeTool"][0]["hooks"] == [OTHER_HOOK]
    assert tuple(installed["hooks"]) == ("BeforeTool", "BeforeAgent", "AfterTool", "AfterAgent", "SessionEnd")
    assert json.loads(next(tmp_path.glob("settings.json.bak-*")).read_text()) == original

    assert main(["install", "--agent", "gemini-cli", "--file", str(path), "--config", "recommended"]) == 0
    assert capsys.readouterr().err.endswith(": unchanged\n")
    assert main(["install", "--agent", "gemini-cli", "--file", str(path)]) == 0  # another config replaces ours
    assert not any("--config recommended" in c for c in commands(json.loads(path.read_text())))
    assert len(commands(json.loads(path.read_text()))) == 2

    assert main(["install", "--agent", "gemini-cli", "--file", str(path), "--uninstall"]) == 0
    assert json.loads(path.read_text()) == original


def test_install_into_a_new_file_and_out_again(tmp_path: Path) -> None:
    path = tmp_path / "codex" / "hooks.json"
    assert (
        install(path, CODEX.settings({"type": "command", "command": "repeat-tool-guard hook"}))
        == "guard hooks installed"
    )
    assert (
        install(path, {}, uninstall=True)
        == "guard hooks removed (backup: " + next(path.parent.glob("*.bak-*")).name + ")"
    )
    assert json.loads(path.read_text()) == {}
    http = CLAUDE_CODE.settings({"type": "http", "url": "http://h/hooks/claude-code/"})
    path.write_text("")
    assert install(path, http) == "guard hooks installed (backup: " + sorted(path.parent.glob("*.bak-*"))[-1].name + ")"
    assert install(path, {}, uninstall=True).startswith("guard hooks removed")


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{not json", "is not JSON"),
        ("[1, 2]", "holds a JSON list, not an object"),
        ('{"hooks": {"Stop": {}}}', '"hooks" must map each event to a list of hook groups'),
    ],
)
def test_a_settings_file_it_cannot_read_is_refused_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, why: str
) -> None:
    path = tmp_path / "settings.json"
    path.write_text(content)
    with pytest.raises(SettingsFileError, match=why):
        install(path, CLAUDE_CODE.settings({"type": "command", "command": "repeat-tool-guard hook"}))
    assert main(["install", "--file", str(path)]) == 2
    assert why in capsys.readouterr().err
    assert path.read_text() == content


def test_groups_that_are_not_hook_lists_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    odd = {"hooks": {"Stop": ["a string", {"matcher": "x"}], "SessionEnd": [{"hooks": []}, {"hooks": ["h"]}]}}
    path.write_text(json.dumps(odd))
    install(path, CLAUDE_CODE.settings({"type": "command", "command": "repeat-tool-guard hook"}))
    assert install(path, {}, uninstall=True).startswith("guard hooks removed")
    assert json.loads(path.read_text()) == odd


def test_where_each_cli_keeps_its_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert settings_file("claude-code", "user") == tmp_path / "home" / ".claude" / "settings.json"
    assert settings_file("codex", "user") == tmp_path / "home" / ".codex" / "hooks.json"
    assert settings_file("gemini-cli", "user") == tmp_path / "home" / ".gemini" / "settings.json"
    assert settings_file("claude-code", "project") == tmp_path / ".claude" / "settings.json"
    assert settings_file("codex", "project") == tmp_path / ".codex" / "hooks.json"
    assert settings_file("gemini-cli", "project") == tmp_path / ".gemini" / "settings.json"
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "ch"))
    assert settings_file("codex", "user") == tmp_path / "ch" / "hooks.json"
    assert main(["install", "--agent", "codex"]) == 0
    assert (tmp_path / "ch" / "hooks.json").exists()
