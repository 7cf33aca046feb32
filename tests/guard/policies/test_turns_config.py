"""The ``[turns]`` config section and its environment override."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from guard import (
    TURNS_THRESHOLD_ENV,
    Config,
    ConfigError,
    Guard,
    RemindConfig,
    TurnsConfig,
    TurnsPolicy,
    apply_environment,
    build_policies,
    load_config,
    parse_config,
)
from guard.adapters import GuardLink


def test_defaults_advise_at_five_then_deny_and_halt_two_turns_apart() -> None:
    turns = TurnsConfig()
    assert (turns.enabled, turns.threshold, turns.deny_after, turns.halt_after) == (True, 5, 2, 2)
    assert turns.exempt == ()
    assert turns.exempt_commands == ()
    assert turns.summary_chars == 200


def test_absent_section_keeps_the_policy_off_and_a_present_one_turns_it_on() -> None:
    assert not any(isinstance(p, TurnsPolicy) for p in build_policies(Config()))
    config = parse_config({"turns": {}})
    assert config.turns.enabled
    assert any(isinstance(p, TurnsPolicy) for p in build_policies(config))


def test_threshold_zero_builds_no_turns_policy() -> None:
    config = parse_config({"turns": {"threshold": 0}})
    assert not any(isinstance(p, TurnsPolicy) for p in build_policies(config))


def test_a_toml_section_sets_every_key(tmp_path: Path) -> None:
    path = tmp_path / "guard.toml"
    path.write_text('[turns]\nthreshold = 4\ndeny_after = 0\nhalt_after = 3\nexempt = ["poll_*"]\nsummary_chars = 80\n')
    turns = load_config(path).turns
    assert (turns.threshold, turns.deny_after, turns.halt_after, turns.exempt, turns.summary_chars) == (
        4,
        0,
        3,
        ("poll_*",),
        80,
    )


@pytest.mark.parametrize(
    ("settings", "key", "value", "rule"),
    [
        ({"threshold": 1}, "turns.threshold", 1, "every call would be a loop"),
        ({"threshold": -1}, "turns.threshold", -1, "integer >= 0"),
        ({"deny_after": -1}, "turns.deny_after", -1, "integer >= 0"),
        ({"halt_after": -2}, "turns.halt_after", -2, "integer >= 0"),
        ({"summary_chars": 0}, "turns.summary_chars", 0, "integer >= 1"),
        ({"exempt": ["poll", ""]}, "turns.exempt", "", "non-empty string"),
        (
            {"exempt_commands": ["gh run (view"]},
            "turns.exempt_commands",
            "gh run (view",
            "valid RE2 regular expression",
        ),
    ],
)
def test_a_bad_value_names_key_value_and_rule(settings: dict[str, Any], key: str, value: Any, rule: str) -> None:
    for build in (lambda: parse_config({"turns": settings}), lambda: TurnsConfig(**settings)):
        with pytest.raises(ConfigError) as caught:
            build()
        assert (caught.value.key, caught.value.value) == (key, value)
        assert rule in caught.value.rule


@pytest.mark.parametrize(
    ("settings", "key", "value", "expected"),
    [
        ({"threshold": "5"}, "turns.threshold", "5", "int"),
        ({"threshold": True}, "turns.threshold", True, "int"),
        ({"deny_after": 1.5}, "turns.deny_after", 1.5, "int"),
        ({"halt_after": None}, "turns.halt_after", None, "int"),
        ({"enabled": "yes"}, "turns.enabled", "yes", "bool"),
        ({"exempt": "poll"}, "turns.exempt", "poll", "array"),
    ],
)
def test_a_value_of_the_wrong_type_in_a_file_names_key_and_value(
    settings: dict[str, Any], key: str, value: Any, expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"turns": settings})
    assert (caught.value.key, caught.value.value) == (key, value)
    assert f"Expected `{expected}`" in caught.value.rule


@pytest.mark.parametrize(
    ("settings", "key", "rule"),
    [
        ({"threshold": "5"}, "turns.threshold", "must be an integer >= 0"),
        ({"halt_after": 2.0}, "turns.halt_after", "must be an integer >= 0"),
        ({"enabled": 1}, "turns.enabled", "must be true or false"),
        ({"exempt": "poll"}, "turns.exempt", "must be a list of tool-name patterns"),
    ],
)
def test_a_value_of_the_wrong_type_from_python_names_key_and_rule(
    settings: dict[str, Any], key: str, rule: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        TurnsConfig(**settings)
    assert caught.value.key == key
    assert caught.value.rule == rule


def test_an_unknown_key_is_named_with_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"turns": {"deny_at": 3}})
    assert caught.value.key == "turns.deny_at"
    assert "deny_after" in caught.value.rule
    assert "halt_after" in caught.value.rule


def test_without_the_variable_the_config_is_unchanged() -> None:
    config = Config(turns=TurnsConfig(threshold=7))
    assert apply_environment(config, {}) is config


@pytest.mark.parametrize(("raw", "threshold"), [("0", 0), ("3", 3), (" 12 ", 12), ("05", 5)])
def test_the_variable_overrides_the_configured_threshold(raw: str, threshold: int) -> None:
    config = Config(turns=TurnsConfig(threshold=7, deny_after=4))
    applied = apply_environment(config, {TURNS_THRESHOLD_ENV: raw})
    assert applied.turns.threshold == threshold
    assert applied.turns.deny_after == 4
    assert applied.remind == config.remind


def test_the_variable_does_not_switch_on_a_disabled_section() -> None:
    applied = apply_environment(Config(), {TURNS_THRESHOLD_ENV: "3"})
    assert not applied.turns.enabled
    assert applied.turns.threshold == 3


@pytest.mark.parametrize("raw", ["", "  ", "five", "-1", "1", "+5", "5.0", "5_0", "٣", "9" * 5000])
def test_a_bad_variable_value_is_an_error_naming_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        apply_environment(Config(), {TURNS_THRESHOLD_ENV: raw})
    assert caught.value.key == TURNS_THRESHOLD_ENV
    assert caught.value.value == raw
    assert "turns.threshold" in caught.value.rule


def test_a_guard_built_directly_runs_its_config_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TURNS_THRESHOLD_ENV, "3")
    guard = Guard(Config(turns=TurnsConfig(threshold=9)))
    assert guard.config.turns.threshold == 9
    policy = next(p for p in guard.policies if isinstance(p, TurnsPolicy))
    assert policy.config.threshold == 9


@pytest.mark.anyio
async def test_an_adapter_link_applies_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TURNS_THRESHOLD_ENV, "2")
    link = GuardLink(config=Config(remind=RemindConfig(enabled=False), turns=TurnsConfig(threshold=9)))
    agent = link.agent("main")
    await agent.start()
    advised: list[list[str]] = []
    for n in range(3):
        agent.begin_step()
        assert (await agent.call(f"c{n}", "grep", {"pattern": "x"})).allowed
        await agent.result(f"c{n}", "no match")
        advised.append(agent.take_context())
    assert [len(texts) for texts in advised] == [0, 1, 0], "advised at the 2nd turn, as the variable says, not the 9th"
    assert advised[1][0].startswith("Tool-call loop detected")


def test_an_adapter_link_refuses_a_bad_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TURNS_THRESHOLD_ENV, "often")
    with pytest.raises(ConfigError, match=TURNS_THRESHOLD_ENV):
        GuardLink()
