"""``hook-settings --agent`` and ``install``: what each CLI's settings get, a
preset kept by name, a merge that leaves other hooks alone, a backup, an
install that is idempotent, an uninstall, and a file that is no JSON refused."""

from __future__ import annotations

import json
import os
import shlex
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from guard.adapters.claude_hooks import CLAUDE_CODE, HOOK_EVENTS, forward_command, hook_command, path_command
from guard.adapters.codex_hooks import CODEX
from guard.adapters.gemini_hooks import GEMINI_CLI
from guard.adapters.hook_install import SettingsFileError, add_toml_table, install, remove_toml_table, settings_file
from guard.cli import main
from guard.hook_forward import forwarding_argv
from guard.server.mcp_hooks import mcp_server_toml

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
    assert forward.startswith("curl -sSf --max-time 30 ")
    assert "-H 'Repeat-Tool-Guard-Wait: 30'" in forward
    assert "-H @/dev/fd/3 http://127.0.0.1:8787/hooks/codex 3<<REPEAT_TOOL_GUARD_TOKEN || printf" in forward
    assert forward.endswith("\nAuthorization: Bearer $T\nREPEAT_TOOL_GUARD_TOKEN")
    assert main(["hook-settings", "--http", "http://x", "--config", "recommended"]) == 2
    assert "the server's own --config, --shadow and --state-dir apply" in capsys.readouterr().err
    assert main(["hook-settings", "--agent", "codex", "--http", "http://x", "--serve", "http://127.0.0.1:8787"]) == 2
    assert "--serve with --http" in capsys.readouterr().err


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


def test_a_users_own_hook_that_mentions_the_guard_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "hooks.json"
    report = {"type": "command", "command": "repeat-tool-guard audit ~/.codex/sessions --html ~/guard-report.html"}
    old_guard = {"type": "command", "command": "/opt/venv/bin/repeat-tool-guard hook --agent codex"}
    module_guard = {"type": "command", "command": "'/usr/bin/python3' -m guard hook --agent codex"}
    path.write_text(
        json.dumps({"hooks": {"Stop": [{"hooks": [report, old_guard]}], "SessionEnd": [{"hooks": [module_guard]}]}})
    )
    assert main(["install", "--agent", "codex", "--file", str(path)]) == 0
    installed = json.loads(path.read_text())
    assert report in installed["hooks"]["Stop"][0]["hooks"]
    assert old_guard["command"] not in commands(installed), "a guard hook of an older install is replaced"
    assert module_guard["command"] not in commands(installed)
    assert main(["install", "--agent", "codex", "--file", str(path), "--uninstall"]) == 0
    assert json.loads(path.read_text()) == {"hooks": {"Stop": [{"hooks": [report]}]}}


USERS_OWN = [
    "repeat-tool-guard hook-settings --agent codex > /tmp/rtg-hooks.json",
    'grep -q "repeat-tool-guard hook" ~/.claude/settings.json || echo guard missing >&2',
    "echo repeat-tool-guard hook",
    "/usr/bin/python3 -m guard hook-settings",
    "python3 -c 'import guard' -m guard hook",
    "printf '%s' 'repeat-tool-guard hook failed (exit 1): the loop guard is off for this event'",
    "echo 'an unclosed quote",
]
GUARDS_OWN = [
    hook_command(["/opt/venv/bin/repeat-tool-guard", "hook", "--agent", "codex"]),
    hook_command(["/home/me/my tools/bin/repeat-tool-guard", "hook", "--config", "/home/me/guard\nrules.toml"]),
    hook_command(["/usr/bin/python3", "-m", "guard", "hook", "--agent", "codex"]),
    hook_command(["/usr/bin/python3.11", "-P", "-m", "guard", "hook", "--agent", "gemini-cli"]),
    path_command(["repeat-tool-guard", "hook"]),
    forward_command("http://127.0.0.1:8787/hooks/codex"),
    forward_command("http://127.0.0.1:8787/hooks/codex", token_env="GUARD_TOKEN"),
    forward_command("http://127.0.0.1:8787/hooks/codex").replace(  # as written before curl read its token from fd 3
        " --data-binary @- ", ' --data-binary @- -H "Authorization: Bearer $GUARD_TOKEN" '
    ),
    "repeat-tool-guard hook",
    "REPEAT_TOOL_GUARD_SHADOW=1 '/opt/my venv/bin/repeat-tool-guard' hook --agent codex",
    "python3 -I -P -m guard hook --agent codex 2>>/tmp/guard.err",
    hook_command([*forwarding_argv(), "hook", "--agent", "codex", "--serve", "unix:/run/rtg.sock"]),
    shlex.join(["python3", *forwarding_argv()[1:], "hook", "--serve", "unix:/run/rtg.sock"]) + " 2>>/tmp/guard.err",
]


def test_only_the_guards_own_hook_commands_are_taken_out(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A command is the guard's when it runs the guard's ``hook`` command
    (``repeat-tool-guard`` by any path, quoted or not, ``python -m
    guard`` or the forwarding hook's ``python -P -c ...``, after variable
    assignments and interpreter flags) or ends as
    every command the guard writes ends; a user's command that only
    mentions it, in a word of its own or in quotes, stays."""
    path = tmp_path / "hooks.json"
    groups = [{"hooks": [{"type": "command", "command": command}]} for command in USERS_OWN + GUARDS_OWN]
    path.write_text(json.dumps({"hooks": {"SessionStart": groups}}))
    assert main(["install", "--agent", "codex", "--file", str(path), "--uninstall"]) == 0
    assert "guard hooks removed" in capsys.readouterr().err
    assert commands(json.loads(path.read_text())) == set(USERS_OWN)


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


@pytest.mark.parametrize(
    ("variable", "value", "agent"),
    [
        ("HOME", "", "claude-code"),
        ("HOME", "rel/home", "gemini-cli"),
        ("HOME", "", "codex"),
        ("CODEX_HOME", "ch", "codex"),
        ("CLAUDE_CONFIG_DIR", "cfg", "claude-code"),
        ("GEMINI_CLI_HOME", "gh", "gemini-cli"),
    ],
)
def test_a_home_that_is_no_absolute_path_is_refused_rather_than_the_root_or_the_working_directory(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    agent: str,
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, value)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SettingsFileError, match=f"{variable} = {value!r} is no absolute path"):
        settings_file(agent, "user")
    assert main(["install", "--agent", agent]) == 2
    said = capsys.readouterr().err
    assert f"{variable} = {value!r} is no absolute path" in said
    assert "--file" in said
    assert list(tmp_path.iterdir()) == [], "nothing written under the working directory"


def test_where_each_cli_keeps_its_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    assert settings_file("claude-code", "user") == tmp_path / "home" / ".claude" / "settings.json"
    assert settings_file("codex", "user") == tmp_path / "home" / ".codex" / "hooks.json"
    assert settings_file("gemini-cli", "user") == tmp_path / "home" / ".gemini" / "settings.json"
    assert settings_file("claude-code", "project") == tmp_path / ".claude" / "settings.json"
    assert settings_file("codex", "project") == tmp_path / ".codex" / "hooks.json"
    assert settings_file("gemini-cli", "project") == tmp_path / ".gemini" / "settings.json"
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "ch"))
    assert settings_file("codex", "user") == tmp_path / "ch" / "hooks.json"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    assert settings_file("claude-code", "user") == tmp_path / "cfg" / "settings.json"
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "gh"))
    assert settings_file("gemini-cli", "user") == tmp_path / "gh" / ".gemini" / "settings.json"
    assert settings_file("claude-code", "project") == tmp_path / ".claude" / "settings.json", "the project's stays"
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    monkeypatch.delenv("GEMINI_CLI_HOME")
    monkeypatch.setenv("CODEX_HOME", "")  # empty is unset, as Codex reads it
    assert settings_file("codex", "user") == tmp_path / "home" / ".codex" / "hooks.json"
    monkeypatch.delenv("HOME")
    assert settings_file("claude-code", "user") == Path.home() / ".claude" / "settings.json"
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "ch"))
    assert main(["install", "--agent", "codex"]) == 0
    assert (tmp_path / "ch" / "hooks.json").exists()


GUARD_HOOKS = CLAUDE_CODE.settings({"type": "command", "command": "repeat-tool-guard hook"})


def test_what_is_not_a_settings_file_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(SettingsFileError, match="is a FIFO"):  # at once: nothing waits for a writer
        install(fifo, GUARD_HOOKS)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    with pytest.raises(SettingsFileError, match="is a directory"):
        install(tmp_path, GUARD_HOOKS)
    with pytest.raises(SettingsFileError, match="is a FIFO"):
        add_toml_table(fifo, "[mcp_servers.x]\n")
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert not list(tmp_path.glob("*.bak-*"))


def test_a_linked_settings_file_stays_a_link_and_its_target_gets_the_hooks(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"theme": "dark"}')
    link = tmp_path / "settings.json"
    link.symlink_to(dotfiles)
    assert install(link, GUARD_HOOKS).startswith("guard hooks installed (backup: settings.json.bak-")
    assert link.is_symlink()
    assert json.loads(dotfiles.read_text())["hooks"] == GUARD_HOOKS["hooks"]
    assert [b.read_text() for b in dotfiles.parent.glob("settings.json.bak-*")] == ['{"theme": "dark"}']


def test_a_settings_file_past_16_mib_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    with path.open("wb") as file:
        file.truncate(16 * 1024 * 1024 + 1)
    with pytest.raises(SettingsFileError, match="is larger than 16 MiB"):
        install(path, GUARD_HOOKS)


def test_every_change_keeps_its_own_backup(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"theme": "dark", "scale": 1.5}')
    path.chmod(0o600)
    install(path, GUARD_HOOKS)
    install(path, {}, uninstall=True)
    install(path, GUARD_HOOKS)  # the same second, most likely: none overwrites another
    backups = sorted(tmp_path.glob("settings.json.bak-*"), key=lambda p: p.stat().st_mtime_ns)
    assert len(backups) == 3
    assert backups[0].read_text() == '{"theme": "dark", "scale": 1.5}'
    assert json.loads(path.read_text())["scale"] == 1.5
    assert all(b.stat().st_mode & 0o777 == 0o600 for b in backups)


@pytest.mark.parametrize(("content", "why"), [('{"a": NaN}', "NaN is not JSON"), ('{"a": 1e999}', "too large")])
def test_numbers_json_has_not_are_refused(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(content)
    with pytest.raises(SettingsFileError, match=why):
        install(path, GUARD_HOOKS)
    assert path.read_text() == content


def test_a_settings_file_nested_past_reason_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SettingsFileError, match="nested too deeply"):
        install(path, GUARD_HOOKS)


def test_an_unreadable_settings_file_is_named(tmp_path: Path) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    with pytest.raises(SettingsFileError, match=r"loop\.json.: Too many levels of symbolic links"):
        install(loop, GUARD_HOOKS)


def test_the_token_variable_and_the_servers_url_must_be_safe_in_a_shell_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for bad in ('X"; touch pwned; "', "A B", "$(id)", "1ST", "TOKEN_É", ""):
        assert main(["hook-settings", "--agent", "codex", "--http", "http://127.0.0.1:8787", "--token-env", bad]) == 2
        assert "not an environment variable's name" in capsys.readouterr().err
    assert main(["hook-settings", "--agent", "codex", "--token-env", "T"]) == 2
    assert "--token-env VAR goes with --http URL" in capsys.readouterr().err
    for url in ("notaurl", 'http://h:1/a"b', "http://h:1/$(id)", "http://h:1/a b"):
        assert main(["hook-settings", "--agent", "codex", "--http", url]) == 2
        assert "must be the server's http:// or https:// URL" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not an environment variable's name"):
        forward_command("http://127.0.0.1:8787/hooks/codex", token_env="X;id")
    with pytest.raises(ValueError, match="not an environment variable's name"):
        mcp_server_toml("http://127.0.0.1:8787/mcp", 'T"\nx = "')
    assert not list(tmp_path.iterdir())


def test_a_config_toml_that_is_not_text_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    hooks = tmp_path / "hooks.json"
    (tmp_path / "config.toml").write_bytes(b"\xff\xfe binary")
    assert main(["install", "--agent", "codex", "--file", str(hooks), "--http", "http://h:1", "--mcp"]) == 2
    assert "config.toml' is not UTF-8 text" in capsys.readouterr().err
    assert (tmp_path / "config.toml").read_bytes() == b"\xff\xfe binary"


@pytest.mark.parametrize("uninstall", [False, True], ids=["install", "uninstall"])
def test_a_config_toml_that_cannot_be_read_leaves_the_hooks_file_as_it_was(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, uninstall: bool
) -> None:
    hooks = tmp_path / "hooks.json"
    assert main(["install", "--agent", "codex", "--file", str(hooks)]) == 0
    installed = hooks.read_text()
    (tmp_path / "config.toml").mkdir()
    args = ["--uninstall"] if uninstall else ["--http", "http://h:1", "--mcp"]
    capsys.readouterr()
    assert main(["install", "--agent", "codex", "--file", str(hooks), *args]) == 2
    err = capsys.readouterr().err
    assert "config.toml beside the hooks file" in err
    assert "--file" not in err
    assert hooks.read_text() == installed


_MCP_TABLE = '\n[mcp_servers.repeat_tool_guard]\nurl = "http://h:1/mcp"\n'


@pytest.mark.parametrize("table", ["", _MCP_TABLE], ids=["added", "there before"])
def test_mcp_hooks_the_disk_cannot_hold_take_their_server_table_out_again(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, file_size_limit: Callable[[int], None], table: str
) -> None:
    """Codex's MCP hooks call tools of the server ``config.toml`` declares:
    when the hooks file cannot be written, the table added for them goes
    again, so both files are as they were (a table that was there before
    stays)."""
    hooks = tmp_path / "hooks.json"
    hooks.write_text(json.dumps({"hooks": {}, "notes": "n" * 6000}))
    config = tmp_path / "config.toml"
    config.write_text('model = "gpt-5.1-codex"\n' + table)
    before = hooks.read_text()
    file_size_limit(5000)  # the small config.toml fits, the hooks file does not
    try:
        code = main(["install", "--agent", "codex", "--file", str(hooks), "--http", "http://h:1", "--mcp"])
    finally:
        file_size_limit(1 << 30)
    err = capsys.readouterr().err
    assert code == 2
    assert ("[mcp_servers.repeat_tool_guard] added" in err) is not bool(table)
    assert ("[mcp_servers.repeat_tool_guard] removed" in err) is not bool(table)
    assert "File too large" in err
    assert hooks.read_text() == before
    assert config.read_text() == 'model = "gpt-5.1-codex"\n' + table


_TABLE = '[mcp_servers.repeat_tool_guard]\nurl = "http://127.0.0.1:8787/mcp"\n'


@pytest.mark.parametrize(
    "present",
    [
        '[mcp_servers.repeat_tool_guard] # mine\nurl = "http://127.0.0.1:9/mcp"\n',
        '[ mcp_servers.repeat_tool_guard ]\nurl = "http://127.0.0.1:9/mcp"\n',
        '[mcp_servers."repeat_tool_guard"]\nurl = "http://127.0.0.1:9/mcp"\n',
        '[mcp_servers]\nrepeat_tool_guard = { url = "http://127.0.0.1:9/mcp" }\n',
        'mcp_servers.repeat_tool_guard.url = "http://127.0.0.1:9/mcp"\n',
    ],
    ids=["comment", "spaces", "quoted", "inline", "dotted"],
)
def test_a_table_the_file_defines_however_spelled_is_left_as_it_is(tmp_path: Path, present: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(present)
    assert add_toml_table(config, _TABLE).endswith("is there already (left as it is)")
    assert config.read_text() == present
    assert not [f for f in tmp_path.iterdir() if f != config], "no backup of a file left as it was"


def test_a_table_named_only_inside_a_string_is_added(tmp_path: Path) -> None:
    import tomllib

    config = tmp_path / "config.toml"
    config.write_text('notes = """\n[mcp_servers.repeat_tool_guard]\n"""\n')
    assert add_toml_table(config, _TABLE).endswith("added")
    assert tomllib.loads(config.read_text())["mcp_servers"]["repeat_tool_guard"]["url"].endswith("/mcp")


@pytest.mark.parametrize(
    ("content", "why"),
    [("model = [unclosed\n", "is not valid TOML"), ('mcp_servers = "off"\n', "would make it invalid TOML")],
)
def test_a_config_toml_it_cannot_add_to_is_refused_and_left_as_it_is(tmp_path: Path, content: str, why: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(content)
    with pytest.raises(SettingsFileError, match=why):
        add_toml_table(config, _TABLE)
    assert config.read_text() == content
    assert not [f for f in tmp_path.iterdir() if f != config]


@pytest.mark.parametrize("existing", [True, False])
def test_a_rewrite_that_fails_leaves_the_file_as_it_was_and_no_copy_behind(tmp_path: Path, existing: bool) -> None:
    settings = tmp_path / "settings.json"
    if existing:
        settings.write_text('{"model": "opus"}\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("not yours")
    planted = tmp_path / f".settings.json.{os.getpid()}.tmp"
    planted.symlink_to(elsewhere)  # the new file cannot be made where it goes: nothing is written through the link
    with pytest.raises(SettingsFileError, match=r"settings\.json' left as it was: File exists"):
        install(settings, CLAUDE_CODE.settings({"type": "command", "command": "repeat-tool-guard hook"}))
    if existing:
        assert settings.read_text() == '{"model": "opus"}\n'
    else:
        assert not settings.exists()
    assert planted.is_symlink()
    assert elsewhere.read_text() == "not yours"
    assert {f.name for f in tmp_path.iterdir()} <= {planted.name, "settings.json", "elsewhere"}, "no backup left"


@pytest.mark.parametrize("rewrite", ["settings", "config.toml"])
def test_a_backup_the_disk_cannot_hold_is_taken_away_again(
    tmp_path: Path, rewrite: str, file_size_limit: Callable[[int], None]
) -> None:
    """The file size limit stands for a full disk: the backup of a file
    larger than it fails part-way, and what was written of it goes too."""
    path = tmp_path / ("settings.json" if rewrite == "settings" else "config.toml")
    content = (
        json.dumps({"env": {f"K{i}": "v" * 50 for i in range(200)}}, indent=2)
        if rewrite == "settings"
        else "".join(f'[profiles.p{i}]\nmodel = "{"m" * 60}"\n' for i in range(100))
    )
    path.write_text(content)
    file_size_limit(4000)
    try:
        with pytest.raises(SettingsFileError, match="left as it was: File too large"):
            install(path, GUARD_HOOKS) if rewrite == "settings" else add_toml_table(path, _TABLE)
    finally:
        file_size_limit(1 << 30)
    assert path.read_text() == content
    assert [f.name for f in tmp_path.iterdir()] == [path.name], "no backup, whole or partial, left behind"


@pytest.mark.parametrize(
    ("umask", "mode"), [(0o022, None), (0o077, 0o644), (0o022, 0o600)], ids=["new", "narrow-umask", "private"]
)
def test_the_new_file_is_made_with_the_mode_it_ends_with_whatever_the_umask(
    tmp_path: Path, umask: int, mode: int | None
) -> None:
    """The new settings file is made with the permissions it ends with,
    before anything (settings may hold keys) is in it: 0600 for a file that
    was not there, the old file's exactly for one that was."""
    path = tmp_path / "settings.json"
    if mode is not None:
        path.write_text('{"env": {"ANTHROPIC_API_KEY": "sk-ant-secret"}}')
        path.chmod(mode)
    before = os.umask(umask)
    try:
        install(path, GUARD_HOOKS)
    finally:
        os.umask(before)
    assert stat.S_IMODE(path.stat().st_mode) == (0o600 if mode is None else mode)


def test_one_settings_file_is_named_at_a_time(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["install", "--project", "--file", str(tmp_path / "settings.json")])
    assert exited.value.code == 2
    assert "argument --file: not allowed with argument --project" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_uninstalling_codex_takes_the_mcp_server_table_out_again(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    hooks, config = tmp_path / "hooks.json", tmp_path / "config.toml"
    config.write_text('model = "gpt-5.1-codex"\n\n[mcp_servers.docs]\nurl = "http://docs/mcp"\n')
    original = config.read_text()
    assert main(["install", "--agent", "codex", "--file", str(hooks), "--http", "http://127.0.0.1:8787", "--mcp"]) == 0
    assert "[mcp_servers.repeat_tool_guard]" in config.read_text()
    assert main(["install", "--agent", "codex", "--file", str(hooks), "--uninstall"]) == 0
    assert config.read_text() == original
    assert "[mcp_servers.repeat_tool_guard] removed" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ('model = "x"\n', "[mcp_servers.repeat_tool_guard] is not there: left as it is"),
        ('[mcp_servers]\nrepeat_tool_guard = { url = "http://h/mcp" }\n', "is not there as a table of its own"),
        ('notes = """\n[mcp_servers.repeat_tool_guard]\nurl = "x"\n"""\n', "is not there as a table of its own"),
        ("[mcp_servers.repeat_tool_guard]\nurl = \n", "is not valid TOML"),
    ],
    ids=["absent", "inline", "in-a-string", "invalid"],
)
def test_a_table_not_written_as_the_guard_writes_it_is_left_as_it_is(tmp_path: Path, content: str, said: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(content)
    try:
        answer = remove_toml_table(config, "[mcp_servers.repeat_tool_guard]")
    except SettingsFileError as exc:
        answer = str(exc)
    assert said in answer
    assert config.read_text() == content
    assert remove_toml_table(tmp_path / "none.toml", "[t]").startswith("no such file")
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe")
    with pytest.raises(SettingsFileError, match="is not UTF-8 text"):
        remove_toml_table(tmp_path / "binary.toml", "[t]")


def test_the_table_is_taken_out_wherever_it_stands(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'model = "x"\n{_TABLE}[mcp_servers.docs]\nurl = "http://docs/mcp"\n')
    assert remove_toml_table(config, "[mcp_servers.repeat_tool_guard]").endswith("removed")
    assert config.read_text() == 'model = "x"\n[mcp_servers.docs]\nurl = "http://docs/mcp"\n'
    config.write_text(_TABLE)
    assert remove_toml_table(config, "[mcp_servers.repeat_tool_guard]").endswith("removed")
    assert config.read_text() == ""
    notes = "# TODO: the github server, once its token is rotated\n# [mcp_servers.github]\n"
    config.write_text(f'model = "x"\n\n{_TABLE}\n{notes}')  # the user's notes after it, at the end
    assert remove_toml_table(config, "[mcp_servers.repeat_tool_guard]").endswith("removed")
    assert config.read_text() == f'model = "x"\n\n{notes}'


@pytest.mark.parametrize("comment", ["// the theme\n", "/* the theme */\n"])
def test_a_settings_file_with_comments_is_left_as_it_is_and_the_refusal_says_why(tmp_path: Path, comment: str) -> None:
    path = tmp_path / "settings.json"
    content = "{\n  " + comment + '  "theme": "dark"\n}\n'
    path.write_text(content)
    with pytest.raises(SettingsFileError, match=r"has comments .* install would drop them"):
        install(path, GUARD_HOOKS)
    assert path.read_text() == content


def test_an_uninstall_that_finds_no_guard_hooks_leaves_the_file_as_it_was(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "settings.json"
    for content in (
        '{"hooks": {"Stop": []}, "model": "opus"}\n',
        '{"hooks": {}}',
        '{"hooks": {"Stop": [{"hooks": []}]}}',
    ):
        path.write_text(content)
        assert main(["install", "--file", str(path), "--uninstall"]) == 0
        assert capsys.readouterr().err.endswith(": no guard hooks found: left as it is\n")
        assert path.read_text() == content
        assert [f.name for f in tmp_path.iterdir()] == ["settings.json"], "no backup of a file left as it was"
    path.unlink()
    assert install(path, {}, uninstall=True) == "no guard hooks found: left as it is"
    assert not path.exists()


def test_only_what_taking_the_guards_hooks_out_empties_goes(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    mine: dict[str, Any] = {
        "hooks": {"SessionStart": [], "Notification": [{"matcher": "", "hooks": []}]},
        "model": "opus",
    }
    path.write_text(json.dumps(mine))
    install(path, GUARD_HOOKS)
    installed = json.loads(path.read_text())
    assert installed["hooks"]["Notification"] == mine["hooks"]["Notification"], "the user's empty group stays"
    assert installed["hooks"]["SessionStart"] == [], "the user's empty event stays"
    assert install(path, {}, uninstall=True).startswith("guard hooks removed")
    assert json.loads(path.read_text()) == mine
    path.write_text(json.dumps({"model": "opus", "hooks": {"Stop": GUARD_HOOKS["hooks"]["Stop"]}}))
    install(path, {}, uninstall=True)
    assert json.loads(path.read_text()) == {"model": "opus"}, (
        "the events and hooks table the guard's hooks left empty go"
    )


def test_install_keeps_the_users_text_and_numbers_as_written(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    content = (
        '{\n  "env": {\n    "GREETING": "Grüße, 世界",\n    "CUT": "\\ud83d"\n  },\n  "cleanupPeriodDays": 1e1,\n'
        '  "scale": 1.50,\n  "offset": -0,\n  "big": 123456789012345678901234567890,\n  "small": 2.5E-3\n}\n'
    )
    path.write_text(content, encoding="utf-8")
    assert install(path, GUARD_HOOKS).startswith("guard hooks installed")
    text = path.read_text(encoding="utf-8")
    assert '"GREETING": "Grüße, 世界"' in text
    for literal in ('"\\ud83d"', "1e1", "1.50", "-0", "123456789012345678901234567890", "2.5E-3"):
        assert literal in text
    assert json.loads(text)["hooks"] == GUARD_HOOKS["hooks"]
    assert install(path, {}, uninstall=True).startswith("guard hooks removed")
    assert path.read_text(encoding="utf-8") == content, "install then uninstall gives the file back as written"


@pytest.fixture
def in_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder as the working directory, under a home of its own
    (``tmp_path / "home"``), no CLI's folder moved by the environment."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME"):
        monkeypatch.delenv(name, raising=False)
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    return project


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini-cli"])
def test_the_guard_installed_at_the_other_scope_with_other_options_is_refused(
    capsys: pytest.CaptureFixture[str], in_project: Path, agent: str
) -> None:
    """The CLI runs the user's hooks and the project's: the guard in both
    with other options would count every call twice (Gemini CLI gives a
    call no id, so the second of two identical reads was denied)."""
    assert main(["install", "--agent", agent]) == 0
    project = settings_file(agent, "project")
    assert main(["install", "--agent", agent, "--project", "--config", "recommended"]) == 2
    said = capsys.readouterr().err
    assert f"{settings_file(agent, 'user')} already runs the guard's hooks, with other options" in said
    assert f"install --agent {agent} --user --uninstall" in said
    assert not project.exists()
    assert main(["install", "--agent", agent, "--project"]) == 0, "the same hooks: the CLI runs them once"
    assert main(["install", "--agent", agent, "--uninstall"]) == 0
    assert main(["install", "--agent", agent, "--config", "recommended"]) == 2, "and the other way round"


@pytest.mark.parametrize(
    ("agent", "told"),
    [
        (
            "codex",
            [
                "Codex runs a project's hooks once the project is trusted",
                '[projects."{project}"] trust_level = "trusted"',
            ],
        ),
        (
            "gemini-cli",
            ["Gemini CLI runs a project's hooks only in a trusted folder", "GEMINI_CLI_TRUST_WORKSPACE=true"],
        ),
    ],
)
def test_a_project_install_says_the_cli_runs_it_only_once_the_project_is_trusted(
    capsys: pytest.CaptureFixture[str], in_project: Path, agent: str, told: list[str]
) -> None:
    """Until the project is trusted the CLI runs without its hooks and says
    nothing of them (Gemini CLI under ``--skip-trust``): the guard is off."""
    assert main(["install", "--agent", agent, "--project"]) == 0
    said = capsys.readouterr().err
    assert "guard hooks installed; " in said
    for words in told:
        assert words.format(project=in_project) in said
    assert main(["install", "--agent", agent]) == 0
    assert "project is trusted" not in capsys.readouterr().err, "a user install is read in every folder"


@pytest.mark.parametrize("scope", ["--user", "--project"])
def test_a_codex_install_says_codex_runs_the_hooks_only_once_they_are_trusted(
    capsys: pytest.CaptureFixture[str], in_project: Path, scope: str
) -> None:
    """``codex exec`` skips hooks not trusted in ``/hooks`` without a word: the guard is off."""
    assert main(["install", "--agent", "codex", scope]) == 0
    said = capsys.readouterr().err
    assert "Codex runs new or changed hooks only once you trust them: open /hooks in the Codex TUI" in said
    assert main(["install", "--agent", "codex", scope, "--uninstall"]) == 0
    assert "open /hooks" not in capsys.readouterr().err
    assert main(["install", "--agent", "claude-code", scope]) == 0
    assert "open /hooks" not in capsys.readouterr().err


def test_the_other_scope_is_judged_by_its_guard_commands_with_comments_or_fewer_events(
    capsys: pytest.CaptureFixture[str], in_project: Path
) -> None:
    assert main(["install", "--agent", "gemini-cli"]) == 0
    user = settings_file("gemini-cli", "user")
    installed = json.loads(user.read_text())
    del installed["hooks"]["SessionEnd"]  # as an earlier version installed it: one event fewer
    user.write_text(json.dumps(installed))
    assert main(["install", "--agent", "gemini-cli", "--project"]) == 0, "the same command: run once"
    assert main(["install", "--agent", "gemini-cli", "--project", "--uninstall"]) == 0
    user.write_text("// my settings\n" + json.dumps(installed, indent=2))  # Gemini CLI reads comments
    assert main(["install", "--agent", "gemini-cli", "--project"]) == 0, "the comments read past"
    assert main(["install", "--agent", "gemini-cli", "--project", "--uninstall"]) == 0
    capsys.readouterr()
    assert main(["install", "--agent", "gemini-cli", "--project", "--config", "recommended"]) == 2
    assert f"{user} already runs the guard's hooks" in capsys.readouterr().err


def test_an_other_scope_file_that_cannot_be_read_is_judged_by_what_it_holds(in_project: Path) -> None:
    user = settings_file("claude-code", "user")
    user.parent.mkdir(parents=True)
    own = {"type": "command", "command": "notify-send done"}
    user.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [own]}]}}))  # the user's own hooks: no guard's
    assert main(["install", "--project", "--config", "recommended"]) == 0
    assert main(["install", "--project", "--uninstall"]) == 0
    user.write_text('{"hooks": {"Stop": [{"hooks": [{"command": "x || printf repeat-tool-guard hook failed"}]}]},')
    assert main(["install", "--project", "--config", "recommended"]) == 2, "not JSON, but the guard's is in it"
    user.write_text("{not json")
    assert main(["install", "--project", "--config", "recommended"]) == 0, "nothing of the guard's in it"
    assert main(["install", "--project", "--uninstall"]) == 0
    user.unlink()
    user.mkdir()  # not a file at all: holds nothing
    assert main(["install", "--project", "--config", "recommended"]) == 0


def test_in_the_home_directory_the_project_file_is_the_users_and_is_simply_replaced(
    in_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = in_project.parent / "home"
    home.mkdir()
    monkeypatch.chdir(home)
    assert settings_file("claude-code", "project") == settings_file("claude-code", "user")
    assert main(["install"]) == 0
    assert main(["install", "--project", "--config", "recommended"]) == 0
    text = settings_file("claude-code", "user").read_text()
    assert "--config recommended" in text
