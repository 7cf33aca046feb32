"""The ``[loops]`` section, the ``recommended`` preset and starting a file from it."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from guard import (
    RECOMMENDED,
    Config,
    ConfigError,
    Guard,
    LoopsConfig,
    LoopsPolicy,
    LoopsToolConfig,
    load_config,
    parse_config,
)
from guard.cli import main
from guard.config import to_toml


@pytest.fixture(autouse=True)
def _restore_structlog() -> Iterator[None]:
    """``main`` configures structlog for the process, as a command does; undo it."""
    yield
    structlog.reset_defaults()


def test_no_config_still_runs_remind_alone() -> None:
    assert [p.name for p in Guard().policies] == ["remind"]
    assert Config().loops.enabled is False


def test_recommended_is_a_preset_wherever_a_config_file_is_named() -> None:
    assert load_config("recommended") is RECOMMENDED
    assert [p.name for p in Guard(RECOMMENDED).policies] == ["loops"]
    assert isinstance(Guard(load_config("recommended")).policies[0], LoopsPolicy)


def test_a_file_named_like_a_preset_needs_a_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "recommended")


def test_check_config_prints_the_preset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", "recommended"]) == 0
    effective = json.loads(capsys.readouterr().out)
    assert effective["loops"]["enabled"] is True
    assert effective["remind"]["enabled"] is False
    assert effective["loops"]["deny_at"] == 3


def test_a_file_started_from_the_preset_loads_back_to_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", "recommended", "--toml"]) == 0
    text = capsys.readouterr().out
    path = tmp_path / "guard.toml"
    path.write_text(text.replace("deny_at = 3", "deny_at = 4"), encoding="utf-8")
    loaded = load_config(path)
    assert loaded.loops.deny_at == 4
    assert loaded.loops.result_normalize == RECOMMENDED.loops.result_normalize
    assert parse_config(tomllib.loads(to_toml(RECOMMENDED))) == RECOMMENDED


def test_a_tool_table_can_be_added_to_a_file_started_from_the_preset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check-config", "recommended", "--toml"]) == 0
    path = tmp_path / "guard.toml"
    path.write_text(capsys.readouterr().out + '\n[loops.tools."update_topic"]\nkind = "exclude"\n', encoding="utf-8")
    assert load_config(path).loops.tools["update_topic"].kind == "exclude"
    tools = parse_config({"loops": {"tools": {"Bash": {"deny_at": 4, "ignored_args": ["timeout"]}, "x": {}}}})
    assert parse_config(tomllib.loads(to_toml(tools))) == tools


def test_a_section_of_lists_becomes_tuples() -> None:
    config = parse_config({"loops": {"exclude": ["todo_write"], "poll_waits": [1, 2]}})
    assert config.loops.exclude == ("todo_write",)
    assert config.loops.poll_waits == (1, 2)


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"error_deny_at": 3}, "loops.error_deny_at"),
        ({"poll_waits": []}, "loops.poll_waits"),
        ({"poll_waits": [0]}, "loops.poll_waits"),
        ({"deny_at": 1}, "loops.deny_at"),
        ({"window": 2}, "loops.window"),
        ({"poll_deny_after": 2}, "loops.poll_deny_after"),
        ({"result_normalize": ["("]}, "loops.result_normalize"),
        ({"poll_tools": [""]}, "loops.poll_tools"),
        ({"read_only_tools": ["-_-"]}, "loops.read_only_tools"),
        ({"mutating_tools": [" "]}, "loops.mutating_tools"),
        ({"ignored_args": [1]}, "loops.ignored_args"),
        ({"enabled": "yes"}, "loops.enabled"),
    ],
)
def test_a_bad_value_names_its_key(settings: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        LoopsConfig(**settings)
    assert info.value.key == key


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"deny_at": 40}, "loops.deny_at = 40: must be at most loops.window (30)"),
        ({"window": 2}, "loops.window = 2: must be at least loops.deny_at (3)"),
        ({"deny_at": 12, "window": 10}, "loops.deny_at = 12: must be at most loops.window (10)"),
    ],
)
def test_deny_at_past_the_window_names_the_setting_that_was_set(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        LoopsConfig(**settings)


def test_streak_denial_can_be_off() -> None:
    assert LoopsConfig(error_deny_at=0).error_deny_at == 0


@pytest.mark.anyio
@pytest.mark.parametrize("section", ["remind", "turns", "rescue"])
async def test_every_policy_lets_an_interjection_through_when_told(
    section: str, make_script: Any, missing_ask_command: str, anyio_backend: str
) -> None:
    """``interjections`` is one key in every section: such a message resets
    nothing, any other message still does."""
    settings: dict[str, Any] = {"interjections": [r"(?i)done"]}
    if section == "rescue":
        settings["ask_command"] = missing_ask_command
    off = {"remind": {"enabled": False}} if section != "remind" else {}
    config = parse_config({**off, section: settings})
    script = make_script(config)
    actions: list[str] = []
    script.guard.add_listener(lambda action, _trigger: actions.append(action.action))
    grep = {"pattern": "x", "command": "grep x"}
    for text in ["Done", "keep looking"]:
        for _ in range(3):
            await script.call("main", "grep", grep, "none")
        await script.user("main", text)
    before = len(actions)
    await script.call("main", "grep", grep, "none")
    assert before > 0  # six calls across "Done" made one run
    assert len(actions) == before  # the real message reset it


@pytest.mark.anyio
async def test_remind_excludes_commands_and_ignores_arguments_when_told(make_script: Any, anyio_backend: str) -> None:
    config = parse_config({"remind": {"exclude_commands": ["^sleep"], "ignored_args": ["description"]}})
    script = make_script(config)
    summaries: list[str] = []
    script.guard.add_listener(lambda action, _trigger: summaries.append(f"{action.tool} × {action.count}"))
    for n in range(3):
        await script.call("main", "Bash", {"command": "sleep 1"}, "")
        await script.call("main", "Bash", {"command": "ls", "description": f"list {n}"}, "a")
    assert summaries == ["Bash × 3"]


@pytest.mark.anyio
async def test_turns_names_its_exclusions_like_every_section(make_script: Any, anyio_backend: str) -> None:
    """``turns`` takes ``include``/``exclude``/``exclude_commands`` as the
    other sections do; its older ``exempt`` keys still apply too."""
    config = parse_config(
        {"remind": {"enabled": False}, "turns": {"exclude": ["poll"], "exclude_commands": ["^sleep"], "exempt": ["w"]}}
    )
    script = make_script(config)
    actions: list[str] = []
    script.guard.add_listener(lambda action, _trigger: actions.append(action.action))
    for _ in range(5):
        await script.call("main", "grep", {"q": 1}, "none")
        await script.call("main", "poll", {}, "running", step=script._steps["main"])
        await script.call("main", "Bash", {"command": "sleep 1"}, "", step=script._steps["main"])
        await script.call("main", "w", {}, "", step=script._steps["main"])
    assert actions == ["remind"]
    only = parse_config({"turns": {"include": ["Bash"]}}).turns
    assert only.include == ("Bash",)


@pytest.mark.parametrize(
    ("section", "key", "rule"),
    [
        ({"transient_at": 5, "transient_deny_at": 4}, "loops.transient_deny_at", "more than loops.transient_at"),
        ({"grind_at": 1}, "loops.grind_at", "0 (off) or an integer >= 2"),
        ({"streak_deny_at": 2}, "loops.streak_deny_at", "more than loops.error_at"),
        ({"tools": {"Bash": {"mutating": "yes"}}}, 'loops.tools."Bash".mutating', "Expected `bool | null`"),
        ({"tools": {"": {"deny_at": 3}}}, "loops.tools", "non-empty tool-name glob"),
        ({"tools": {"Bash": {"identity_args": [""]}}}, 'loops.tools."Bash".identity_args', "non-empty string"),
        ({"paging_args": "offset"}, "loops.paging_args", "Expected `array`"),
        ({"paging_args": [""]}, "loops.paging_args", "non-empty string"),
        ({"tools": {"A": {}, "search_*": {"deny_at": "3"}}}, 'loops.tools."search_*".deny_at', "Expected `int | null`"),
        # an unknown key is named in the table that holds it, not the first table
        (
            {"tools": {"Bash": {"deny_at": 4}, "search_*": {"identity_arg": ["query"]}}},
            'loops.tools."search_*".identity_arg',
            "unknown field `identity_arg`",
        ),
        # a tool's thresholds keep the section's rules, against the section's values it leaves out
        ({"tools": {"Bash": {"error_deny_at": 2}}}, 'loops.tools."Bash".error_deny_at', "more than error_at (3)"),
        ({"tools": {"Bash": {"error_at": 6}}}, 'loops.tools."Bash".error_deny_at', "more than error_at (6)"),
        ({"tools": {"Bash": {"streak_deny_at": 2}}}, 'loops.tools."Bash".streak_deny_at', "more than error_at"),
        ({"tools": {"Bash": {"transient_deny_at": 3}}}, 'loops.tools."Bash".transient_deny_at', "than transient_at"),
        ({"tools": {"Bash": {"poll_deny_after": 3}}}, 'loops.tools."Bash".poll_deny_after', "than poll_nudge_at"),
        ({"tools": {"Bash": {"grind_at": 1}}}, 'loops.tools."Bash".grind_at', "0 (off) or an integer >= 2"),
        ({"tools": {"Bash": {"deny_at": 40}}}, 'loops.tools."Bash".deny_at', "at most loops.window (30)"),
    ],
)
def test_new_loops_keys_are_checked(section: dict[str, Any], key: str, rule: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"loops": section})
    assert info.value.key == key
    assert rule in info.value.rule


def test_tools_built_in_python_are_checked_too() -> None:
    with pytest.raises(ConfigError, match="must be a table of tool-name globs"):
        LoopsConfig(tools=[("Bash", {})])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="must be a table of settings"):
        LoopsConfig(tools={"Bash": {"deny_at": 4}})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r'loops.tools."Bash".mutating'):
        LoopsConfig(tools={"Bash": LoopsToolConfig(mutating="yes")})  # type: ignore[arg-type]


def test_per_tool_tables_survive_printing_as_toml(tmp_path: Path) -> None:
    config = parse_config(
        {
            "loops": {
                "tools": {"mcp__jobs__*": {"kind": "poll", "poll_deny_after": 30}, "search": {"identity_args": ["q"]}}
            }
        }
    )
    printed = to_toml(config)
    assert printed.endswith(
        '\n[loops.tools."mcp__jobs__*"]\nkind = "poll"\npoll_deny_after = 30\n\n[loops.tools."search"]\n'
        'identity_args = ["q"]\n'
    )
    assert parse_config(tomllib.loads(printed)) == config


def test_printed_toml_reads_back_whatever_characters_a_value_holds() -> None:
    config = parse_config({"loops": {"poll_commands": ["a\x7fb", "tab\there", 'quote " and \\ and \x01', "é ✓"]}})
    assert parse_config(tomllib.loads(to_toml(config))) == config
