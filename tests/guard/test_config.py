"""Config: one Struct, from Python, TOML or YAML; every bad value is a ConfigError
naming the key, the value and the rule; nothing falls back silently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from guard import Config, ConfigError, RemindConfig, RescueConfig, TurnsConfig, load_config, parse_config


def test_defaults_run_remind_alone_with_the_seed_values() -> None:
    config = Config()
    assert config.remind == RemindConfig(
        enabled=True,
        thresholds=(3, 5, 8),
        include=(),
        exclude=("todo_write",),
        arguments_preview_chars=500,
        repeat_every=0,
    )
    assert not config.turns.enabled
    assert not config.rescue.enabled
    assert parse_config({}) == config


@pytest.mark.parametrize("thresholds", [[4, 2], (4, 2), [2, 4]])
def test_thresholds_are_normalized_ascending(thresholds: Any) -> None:
    assert RemindConfig(thresholds=thresholds).thresholds == (2, 4)
    assert parse_config({"remind": {"thresholds": list(thresholds)}}).remind.thresholds == (2, 4)


_BAD_THRESHOLDS: list[tuple[str, Any, Any, str]] = [
    ("empty", [], [], "non-empty list"),
    ("not a list", 3, 3, "non-empty list"),
    ("bool", [3, True], True, "integer >= 2"),
    ("float", [3, 4.0], 4.0, "integer >= 2"),
    ("string", [3, "5"], "5", "integer >= 2"),
    ("below 2", [1, 3], 1, "integer >= 2"),
    ("negative", [-3], -3, "integer >= 2"),
    ("past 2**53", [3, 2**80], 2**80, "integer from 2 to 9007199254740992"),
    ("duplicate", [3, 5, 3], 3, "must not repeat"),
]


@pytest.mark.parametrize(
    ("thresholds", "value", "rule"), [c[1:] for c in _BAD_THRESHOLDS], ids=[c[0] for c in _BAD_THRESHOLDS]
)
def test_python_construction_rejects_bad_thresholds_naming_the_value(thresholds: Any, value: Any, rule: str) -> None:
    with pytest.raises(ConfigError) as info:
        RemindConfig(thresholds=thresholds)
    assert info.value.key == "remind.thresholds"
    assert info.value.value == value
    assert rule in info.value.rule
    assert str(info.value).startswith(f"remind.thresholds = {value!r}: ")


@pytest.mark.parametrize(
    ("thresholds", "key", "value", "rule"),
    [
        ([], "remind.thresholds", (), "non-empty list"),
        ([3, True], "remind.thresholds[1]", True, "Expected `int`, got `bool`"),
        ([3, 4.5], "remind.thresholds[1]", 4.5, "Expected `int`, got `float`"),
        ("3,5", "remind.thresholds", "3,5", "Expected `array`, got `str`"),
        ([1], "remind.thresholds", 1, "integer >= 2"),
        ([5, 5], "remind.thresholds", 5, "must not repeat"),
    ],
)
def test_file_values_reject_bad_thresholds_naming_key_value_and_rule(
    thresholds: Any, key: str, value: Any, rule: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"remind": {"thresholds": thresholds}})
    assert (info.value.key, info.value.value) == (key, value)
    assert rule in info.value.rule


_BAD_VALUES: list[tuple[dict[str, Any], str, Any, str]] = [
    ({"remind": {"enabled": "no"}}, "remind.enabled", "no", "Expected `bool`"),
    ({"remind": {"arguments_preview_chars": 0}}, "remind.arguments_preview_chars", 0, "integer >= 1"),
    ({"remind": {"arguments_preview_chars": "500"}}, "remind.arguments_preview_chars", "500", "Expected `int`"),
    ({"remind": {"repeat_every": -1}}, "remind.repeat_every", -1, "integer >= 0"),
    ({"remind": {"include": "grep"}}, "remind.include", "grep", "Expected `array`"),
    ({"remind": {"include": [""]}}, "remind.include", "", "non-empty string"),
    ({"remind": {"exclude": [3]}}, "remind.exclude[0]", 3, "Expected `str`"),
    ({"remind": {"foo": 1}}, "remind.foo", 1, "unknown key (known: enabled, mode, thresholds, include"),
    ({"remind": {"argumentsPreviewChars": 80}}, "remind.argumentsPreviewChars", 80, "did you mean arguments_pre"),
    ({"remind": {1: 2}}, "remind.1", 2, "keys must be strings"),
    ({"remind": 3}, "remind", 3, "must be a table of settings"),
    ({"remind": None}, "remind", None, "must be a table of settings"),
    ({"reminder": {}}, "reminder", {}, "unknown section (known: remind, turns, rescue, loops)"),
    ({"remind ": {}}, "'remind '", {}, "unknown section (known: remind, turns, rescue, loops)"),
    ({"rescue": {"ask_model": "m\ud800"}}, "rescue.ask_model", "m\ud800", "valid Unicode text"),
    ({"loops": {"tools": {"B\udc80": {}}}}, "loops.tools", "B\udc80", "valid Unicode text"),
    ({"rescue": {"ask_timeout_ms": 2**60}}, "rescue.ask_timeout_ms", 2**60, "from 1 to 9007199254740992"),
    ({"turns": {"threshold": -1}}, "turns.threshold", -1, "integer >= 0"),
    ({"turns": {"exempt": [""]}}, "turns.exempt", "", "non-empty string"),
    ({"turns": {"nudgeAt": 3}}, "turns.nudgeAt", 3, "known: enabled, mode, threshold"),
    ({"turns": {"a.b`c": 3}}, "turns.a.b`c", 3, "unknown key"),
    ({"rescue": {"window": 0}}, "rescue.window", 0, "integer >= 3"),
    ({"rescue": {"nudge_at": 1}}, "rescue.nudge_at", 1, "integer >= 2"),
    ({"rescue": {"rescue_at": 1}}, "rescue.rescue_at", 1, "integer >= 3"),
    ({"rescue": {"stall_at": -1}}, "rescue.stall_at", -1, "integer >= 0"),
    ({"rescue": {"max_rescues": -1}}, "rescue.max_rescues", -1, "integer >= 0"),
    ({"rescue": {"cooldown_ms": -5}}, "rescue.cooldown_ms", -5, "integer >= 0"),
    ({"rescue": {"ask_timeout_ms": 0}}, "rescue.ask_timeout_ms", 0, "integer >= 1"),
    ({"rescue": {"nudge_at": 5, "rescue_at": 5}}, "rescue.rescue_at", 5, "must exceed rescue.nudge_at (5)"),
    ({"rescue": {"window": 4, "rescue_at": 5}}, "rescue.window", 4, "at least rescue.rescue_at (5)"),
    ({"rescue": {"exclude": [""]}}, "rescue.exclude", "", "non-empty string"),
    ({"rescue": {"exclude_commands": ["("]}}, "rescue.exclude_commands", "(", "valid RE2 regular expression"),
    ({"rescue": {"ignored_args": [""]}}, "rescue.ignored_args", "", "non-empty string"),
    ({"rescue": {"mutating_tools": [""]}}, "rescue.mutating_tools", "", "non-empty string"),
    ({"rescue": {"ask_command": 7}}, "rescue.ask_command", 7, "Expected `str`"),
    ({"rescue": {"maxRescues": 2}}, "rescue.maxRescues", 2, "did you mean max_rescues?"),
    ({"loops": {"tools": {5: {}}}}, "loops.tools", {5: {}}, "a key: Expected `str`, got `int`"),
]


@pytest.mark.parametrize(("data", "key", "value", "rule"), _BAD_VALUES, ids=[c[1] for c in _BAD_VALUES])
def test_every_bad_value_names_key_value_and_rule(data: dict[str, Any], key: str, value: Any, rule: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert (info.value.key, info.value.value) == (key, value)
    assert rule in info.value.rule
    assert str(info.value) == f"{key} = {value!r}: {info.value.rule}"


def test_a_config_that_is_not_a_table_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"^my\.yaml = \[1, 2\]: must be a table of policy sections$"):
        parse_config([1, 2], origin="my.yaml")  # type: ignore[arg-type]


_BAD_PYTHON: list[tuple[type[Any], dict[str, Any], str, Any, str]] = [
    (RemindConfig, {"enabled": "yes"}, "remind.enabled", "yes", "true or false"),
    (RemindConfig, {"include": "grep"}, "remind.include", "grep", "list of tool-name patterns"),
    (RemindConfig, {"exclude": [None]}, "remind.exclude", None, "non-empty string"),
    (RemindConfig, {"arguments_preview_chars": True}, "remind.arguments_preview_chars", True, "integer >= 1"),
    (RemindConfig, {"arguments_preview_chars": 2.5}, "remind.arguments_preview_chars", 2.5, "integer >= 1"),
    (TurnsConfig, {"enabled": 1}, "turns.enabled", 1, "true or false"),
    (TurnsConfig, {"exclude_commands": None}, "turns.exclude_commands", None, "list of regular expressions"),
    (RescueConfig, {"exclude_commands": None}, "rescue.exclude_commands", None, "list of regular expressions"),
    (RescueConfig, {"enabled": None}, "rescue.enabled", None, "true or false"),
    (RescueConfig, {"exclude_commands": "x"}, "rescue.exclude_commands", "x", "list of regular expressions"),
    (RescueConfig, {"exclude_commands": [3]}, "rescue.exclude_commands", 3, "must be a string"),
    (RescueConfig, {"ignored_args": "description"}, "rescue.ignored_args", "description", "list of names"),
    (RescueConfig, {"ask_model": None}, "rescue.ask_model", None, "must be a non-empty string"),
    (RescueConfig, {"log_file": 3}, "rescue.log_file", 3, "must be a string"),
    (RescueConfig, {"ask_model": "opus\ud800"}, "rescue.ask_model", "opus\ud800", "lone surrogate"),
    (Config, {"remind": TurnsConfig()}, "remind", TurnsConfig(), "must be a RemindConfig"),
    (Config, {"rescue": {"enabled": True}}, "rescue", {"enabled": True}, "must be a RescueConfig"),
]


@pytest.mark.parametrize(("cls", "kwargs", "key", "value", "rule"), _BAD_PYTHON, ids=[c[2] for c in _BAD_PYTHON])
def test_python_construction_validates_too(
    cls: type[Any], kwargs: dict[str, Any], key: str, value: Any, rule: str
) -> None:
    with pytest.raises(ConfigError) as info:
        cls(**kwargs)
    assert (info.value.key, info.value.value) == (key, value)
    assert rule in info.value.rule


def test_python_construction_normalizes_lists_to_tuples() -> None:
    grep: Any = ["grep"]
    todo: Any = ["todo_*"]
    remind = RemindConfig(include=grep, exclude=todo)
    assert (remind.include, remind.exclude) == (("grep",), ("todo_*",))
    assert TurnsConfig(exempt=grep).exempt == ("grep",)
    rescue = RescueConfig(exclude_commands=grep, ignored_args=todo)
    assert (rescue.exclude_commands, rescue.ignored_args) == (("grep",), ("todo_*",))


def test_a_section_present_is_enabled_unless_it_says_otherwise() -> None:
    config = parse_config({"turns": {}, "rescue": {"ask_model": "opus"}})
    assert config.remind.enabled  # absent: keeps its default, on
    assert config.turns.enabled
    assert config.rescue.enabled
    only_rescue = parse_config({"remind": {"enabled": False}, "rescue": {}})
    assert not only_rescue.remind.enabled
    assert only_rescue.rescue.enabled
    assert not parse_config({"turns": {"enabled": False}}).turns.enabled


def test_toml_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "guard.toml"
    path.write_text(
        '[remind]\nthresholds = [4, 2]\ninclude = ["mcp_*"]\nexclude = []\n'
        "arguments_preview_chars = 24\nrepeat_every = 2\n"
    )
    assert load_config(path).remind == RemindConfig(
        thresholds=(2, 4), include=("mcp_*",), exclude=(), arguments_preview_chars=24, repeat_every=2
    )


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".YAML"])
def test_yaml_file_loads(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"guard{suffix}"
    path.write_text("remind:\n  thresholds: [4, 2]\nturns:\n  threshold: 6\n")
    config = load_config(str(path))
    assert config.remind.thresholds == (2, 4)
    assert config.turns == TurnsConfig(threshold=6)


def test_empty_yaml_file_is_the_default_config(tmp_path: Path) -> None:
    path = tmp_path / "guard.yaml"
    path.write_text("# nothing configured\n")
    assert load_config(path) == Config()


def test_file_errors_name_the_file_and_the_rule(tmp_path: Path) -> None:
    cases: list[tuple[Path, str]] = []
    missing = tmp_path / "missing.toml"
    cases.append((missing, "no such file"))
    directory = tmp_path / "dir.toml"
    directory.mkdir()
    cases.append((directory, "is a directory"))
    not_dir = tmp_path / "plain.toml"
    not_dir.write_text("")
    cases.append((not_dir / "inner.toml", "cannot be read (Not a directory)"))
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("[remind\n")
    cases.append((bad_toml, "is not valid TOML"))
    not_utf8 = tmp_path / "latin1.toml"
    not_utf8.write_bytes(b'[remind]\ninclude = ["caf\xe9"]\n')
    cases.append((not_utf8, "is not valid TOML"))
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("remind: [unclosed\n")
    cases.append((bad_yaml, "is not valid YAML"))
    json_file = tmp_path / "guard.json"
    json_file.write_text("{}")
    cases.append((json_file, "must end in .toml, .yaml or .yml"))
    for path, rule in cases:
        with pytest.raises(ConfigError) as info:
            load_config(path)
        assert (info.value.key, info.value.value) == ("config file", str(path))
        assert rule in info.value.rule


def test_errors_inside_a_file_name_the_key(tmp_path: Path) -> None:
    path = tmp_path / "guard.toml"
    path.write_text("[remind]\nthresholds = [3, 3]\n")
    with pytest.raises(ConfigError, match=r"^remind\.thresholds = 3: thresholds must not repeat$"):
        load_config(path)
    path.write_text("[remind]\nnudgeAt = 3\n")
    with pytest.raises(ConfigError, match=r"^remind\.nudgeAt = 3: unknown key"):
        load_config(path)
    path.write_text("[turn]\nthreshold = 3\n")
    with pytest.raises(ConfigError, match=r"^turn = \{'threshold': 3\}: unknown section"):
        load_config(path)


@pytest.mark.parametrize(
    "key",
    ["turns.exempt_commands", "rescue.exclude_commands", "rescue.mutating_commands", "rescue.redact_patterns"],
)
def test_every_regex_setting_refuses_a_pattern_re2_cannot_run(key: str) -> None:
    section, name = key.split(".")
    with pytest.raises(ConfigError) as info:
        parse_config({section: {name: ["ok", r"poll(?=ing)"]}})
    assert (info.value.key, info.value.value) == (key, r"poll(?=ing)")
    assert info.value.rule.startswith("must be a valid RE2 regular expression: lookahead is not supported")


def test_the_default_patterns_are_valid_re2() -> None:
    assert parse_config({"rescue": {}}).rescue.mutating_commands == RescueConfig().mutating_commands


def test_a_config_path_holding_a_nul_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"config file = 'a\\x00.toml': is no file name \(it holds a null byte\)"):
        load_config("a\x00.toml")
