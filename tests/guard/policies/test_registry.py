"""The registry is the one list of policies: config sections, the guard's
policies and the audit's all come from it."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from guard import Config, ConfigError, Guard, build_policies, parse_config
from guard.audit import audit_config
from guard.config import every_policy, load_config, to_toml
from guard.policies.registry import BUILTIN, ENTRY_POINT_GROUP, build_plugin, builtin_names
from guard.section import Section


def test_every_builtin_policy_has_its_section_on_config_under_its_name() -> None:
    assert [name for name in Config.__struct_fields__ if name != "plugins"] == list(builtin_names())
    for policy in BUILTIN:
        assert issubclass(policy.section, Section)
        assert isinstance(getattr(Config(), policy.name), policy.section)


def test_guard_consults_policies_in_registry_order() -> None:
    names = [p.name for p in build_policies(every_policy())]
    assert names == list(builtin_names())
    assert [p.name for p in Guard(every_policy()).policies] == names


def test_audit_without_config_runs_every_registered_policy_loops_included() -> None:
    assert [p.name for p in build_policies(audit_config())] == ["remind", "turns", "rescue", "loops"]


def test_a_section_of_no_policy_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"^nope = .*unknown section \(known: remind, turns, rescue, loops"):
        parse_config({"nope": {}})


def test_every_section_round_trips_through_toml(tmp_path: Path) -> None:
    path = tmp_path / "all.toml"
    path.write_text(to_toml(every_policy()))
    assert load_config(path) == every_policy()


class _Slotted:
    """A policy class whose instances take no attribute it does not declare."""

    __slots__ = ()
    name = "slotted"
    plugin = "slotted-plugin"
    intercepts = False

    def watch(self) -> None:  # never called: building it fails first
        raise AssertionError


def test_a_plugin_that_cannot_take_shadow_is_a_config_error() -> None:
    found = {"slotted": EntryPoint("slotted", f"{__name__}:_Slotted", ENTRY_POINT_GROUP)}
    with pytest.raises(ConfigError, match=r"^slotted = .*_Slotted'?: does not take a 'shadow' attribute \(mode\)$"):
        build_plugin("slotted", {"enabled": True}, found)


def test_a_shareable_policy_is_taken_from_share_and_the_rest_built_anew() -> None:
    config = every_policy()
    first = build_policies(config)
    again = build_policies(config, share=first)
    assert {p.name: getattr(p, "shareable", False) for p in first} == {
        "remind": True,
        "turns": True,
        "rescue": False,  # its replaying swaps in a restore's recorded answers
        "loops": True,
    }
    assert [new is old for old, new in zip(first, again, strict=True)] == [True, True, False, True]
