"""The ``[rescue]`` section: defaults from seed 003, and every bad value named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from guard import DEFAULT_IGNORED_ARGS, Config, ConfigError, RescueConfig, load_config, parse_config


def test_defaults_are_the_seeds() -> None:
    config = RescueConfig()
    assert (config.window, config.nudge_at, config.rescue_at, config.stall_at) == (12, 3, 5, 40)
    assert (config.max_rescues, config.cooldown_ms, config.ask_timeout_ms) == (3, 45_000, 45_000)
    assert config.exclude == ("todo_write", "ask_user", "mcp__claude__*")
    # the seed's names, within the one list every section shares
    assert {"description", "explanation", "reasoning", "thought", "comment"} <= set(config.ignored_args)
    assert config.ignored_args == DEFAULT_IGNORED_ARGS
    assert config.mutating_tools == (
        "edit",
        "write",
        "multi_edit",
        "str_replace_editor",
        "apply_patch",
        "create_file",
        "notebook_edit",
        # beyond the seed: the editing tools of gemini-cli, the Claude API text editor, the OpenHands SDK
        "write_file",
        "replace",
        "str_replace_based_edit_tool",
        "file_editor",
        # Cursor and Cline
        "edit_file",
        "search_replace",
        "replace_in_file",
        "write_to_file",
        "apply_diff",
        "insert_content",
        # Goose, Continue, Windsurf
        "text_editor",
        "create_new_file",
        "edit_existing_file",
        "replace_file_content",
    )
    assert (config.ask_command, config.ask_model, config.log_file) == ("~/.local/bin/ask-claude", "opus", "")
    assert Config().rescue.enabled is False


def test_a_rescue_section_in_a_file_enables_it(tmp_path: Path) -> None:
    path = tmp_path / "guard.toml"
    path.write_text('[remind]\nenabled = false\n\n[rescue]\nask_command = "/usr/local/bin/ask-model"\nwindow = 20\n')
    config = load_config(path)
    assert (config.remind.enabled, config.rescue.enabled, config.rescue.window) == (False, True, 20)
    assert config.rescue.ask_command == "/usr/local/bin/ask-model"


@pytest.mark.parametrize(
    ("settings", "key", "value", "rule"),
    [
        ({"enabled": "yes"}, "rescue.enabled", "yes", "must be true or false"),
        ({"nudge_at": 1}, "rescue.nudge_at", 1, "must be an integer >= 2"),
        ({"nudge_at": 2.5}, "rescue.nudge_at", 2.5, "must be an integer >= 2"),
        ({"rescue_at": True}, "rescue.rescue_at", True, "must be an integer >= 3"),
        ({"rescue_at": 3}, "rescue.rescue_at", 3, "must exceed rescue.nudge_at (3)"),
        ({"window": 2}, "rescue.window", 2, "must be an integer >= 3"),
        ({"window": 4}, "rescue.window", 4, "must be at least rescue.rescue_at (5)"),
        ({"stall_at": -1}, "rescue.stall_at", -1, "must be an integer >= 0"),
        ({"stall_at": 4}, "rescue.stall_at", 4, "must be 0 (disabled) or at least rescue.rescue_at (5)"),
        ({"max_rescues": -1}, "rescue.max_rescues", -1, "must be an integer >= 0"),
        ({"cooldown_ms": -5}, "rescue.cooldown_ms", -5, "must be an integer >= 0"),
        ({"ask_timeout_ms": 0}, "rescue.ask_timeout_ms", 0, "must be an integer >= 1"),
        ({"include": "bash"}, "rescue.include", "bash", "must be a list of tool-name patterns"),
        ({"exclude": [""]}, "rescue.exclude", "", "each pattern must be a non-empty string"),
        ({"exclude_commands": ["docker ("]}, "rescue.exclude_commands", "docker (", "must be a valid RE2 regular"),
        ({"exclude_commands": [3]}, "rescue.exclude_commands", 3, "each entry must be a string"),
        ({"exclude_commands": "^ls$"}, "rescue.exclude_commands", "^ls$", "must be a list of regular expressions"),
        ({"ignored_args": "description"}, "rescue.ignored_args", "description", "must be a list of names"),
        ({"ignored_args": [""]}, "rescue.ignored_args", "", "each entry must be a non-empty string"),
        ({"mutating_tools": [None]}, "rescue.mutating_tools", None, "each pattern must be a non-empty string"),
        ({"escalation_tools": "mcp__*"}, "rescue.escalation_tools", "mcp__*", "must be a list of tool-name"),
        ({"redact_patterns": ["[a-"]}, "rescue.redact_patterns", "[a-", "must be a valid RE2 regular expression"),
        ({"redact_patterns": [""]}, "rescue.redact_patterns", "", "an empty regular expression matches everywhere"),
        ({"ask_command": ""}, "rescue.ask_command", "", "must be a non-empty string"),
        ({"ask_command": "  "}, "rescue.ask_command", "  ", "must be a non-empty string"),
        ({"ask_model": 4}, "rescue.ask_model", 4, "must be a non-empty string"),
        ({"log_file": None}, "rescue.log_file", None, "must be a string ('' disables the trip log)"),
        ({"log_file": "/tmp/a\x00b"}, "rescue.log_file", "/tmp/a\x00b", "must not hold a NUL character"),
        ({"ask_command": "ask\x00"}, "rescue.ask_command", "ask\x00", "must not hold a NUL character"),
        ({"ask_model": "o\x00"}, "rescue.ask_model", "o\x00", "must not hold a NUL character"),
    ],
)
def test_bad_values_name_key_value_and_rule(settings: dict[str, Any], key: str, value: Any, rule: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RescueConfig(**settings)
    assert (caught.value.key, caught.value.value) == (key, value)
    assert caught.value.rule.startswith(rule)


@pytest.mark.parametrize(
    ("toml", "key", "rule"),
    [
        ("rescue_at = 3", "rescue.rescue_at", "must exceed rescue.nudge_at (3)"),
        ("window = 4", "rescue.window", "must be at least rescue.rescue_at (5)"),
        ('exclude_commands = ["("]', "rescue.exclude_commands", "must be a valid RE2 regular expression"),
        ('window = "12"', "rescue.window", "Expected `int`, got `str`"),
        ("nudge_at_count = 3", "rescue.nudge_at_count", "unknown key"),
    ],
)
def test_bad_values_in_a_file_name_key_and_rule(tmp_path: Path, toml: str, key: str, rule: str) -> None:
    path = tmp_path / "guard.toml"
    path.write_text(f"[rescue]\n{toml}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.key == key
    assert caught.value.rule.startswith(rule)


def test_lists_become_tuples() -> None:
    config = parse_config({"rescue": {"include": ["bash"], "redact_patterns": ["x"], "exclude_commands": ["y"]}})
    assert (config.rescue.include, config.rescue.redact_patterns, config.rescue.exclude_commands) == (
        ("bash",),
        ("x",),
        ("y",),
    )


def test_relative_paths_in_a_file_resolve_against_its_directory(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    path = folder / "guard.toml"
    path.write_text('[rescue]\nask_command = "bin/ask"\nlog_file = "logs/trips.jsonl"\n')
    rescue = load_config(path).rescue
    assert rescue.ask_command == str(folder / "bin" / "ask")
    assert rescue.log_file == str(folder / "logs" / "trips.jsonl")


@pytest.mark.parametrize(
    ("ask_command", "log_file"),
    [
        ("ask-claude", ""),  # a bare name is looked up on PATH
        ("~/.local/bin/ask-claude", "~/.llmbox/loop-rescue.jsonl"),
        ("/usr/local/bin/ask-model", "/var/log/loop-rescue.jsonl"),
    ],
)
def test_bare_home_and_absolute_paths_are_kept(tmp_path: Path, ask_command: str, log_file: str) -> None:
    path = tmp_path / "guard.toml"
    path.write_text(f'[rescue]\nask_command = "{ask_command}"\nlog_file = "{log_file}"\n')
    rescue = load_config(path).rescue
    assert (rescue.ask_command, rescue.log_file) == (ask_command, log_file)


def test_yaml_uses_the_same_keys(tmp_path: Path) -> None:
    path = tmp_path / "guard.yaml"
    path.write_text("rescue:\n  nudge_at: 4\n  rescue_at: 6\n  exclude_commands: ['^docker ps$']\n")
    rescue = load_config(path).rescue
    assert (rescue.nudge_at, rescue.rescue_at, rescue.exclude_commands) == (4, 6, ("^docker ps$",))
