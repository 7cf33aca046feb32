"""A policy published by another installed package (the example under
docs/examples/budget-policy, pip-installed for real into a directory of its
own) runs wherever a config is accepted, configured by its section, and
``replay --check`` verifies what it did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from bus import Agent, ToolCall, ToolResult
from guard import Config, ConfigError, Guard, build_policies, load_config, parse_config, replay_log, shadowed
from guard.adapters import GuardLink
from guard.policies.registry import ENTRY_POINT_GROUP, installed_plugins
from tests.guard.server.conftest import ServerProcess

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "docs" / "examples" / "budget-policy"
SESSION = "budget-session"
DENIED = "Grep is over its budget of 2 calls; use what you have."


def _can_build_offline() -> bool:
    """Whether this environment's setuptools builds a wheel without fetching
    a build environment (setuptools >= 70.1 has ``bdist_wheel`` built in)."""
    import importlib.util

    return importlib.util.find_spec("setuptools.command.bdist_wheel") is not None


@pytest.fixture(scope="session")
def budget_dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example package, installed by pip into a directory of its own."""
    target = tmp_path_factory.mktemp("budget-dist")
    isolation = ["--no-build-isolation"] if _can_build_offline() else []
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            *isolation,
            "--target",
            str(target),
            str(EXAMPLE),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert list(target.glob("budget_policy-*.dist-info"))
    return target


@pytest.fixture
def budget(budget_dist: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The package importable here and in child processes (their environment)."""
    monkeypatch.syspath_prepend(str(budget_dist))
    yield {"PYTHONPATH": os.pathsep.join([str(budget_dist), str(REPO)])}
    sys.modules.pop("budget_policy", None)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "guard.toml"
    path.write_text('[remind]\nenabled = false\n\n[budget]\nlimit = 2\ntools = ["Grep"]\n')
    return path


def cli(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env={**os.environ, **env},
    )


def hook_payloads(n: int) -> Iterator[dict[str, Any]]:
    tool = {"tool_name": "Grep", "tool_input": {"pattern": f"p{n}"}, "tool_use_id": f"toolu_{n:02d}"}
    base = {"session_id": SESSION, "cwd": "/w", "transcript_path": "/t"}
    yield {**base, "hook_event_name": "PreToolUse", **tool}
    yield {**base, "hook_event_name": "PostToolUse", "tool_response": "src/cfg.py:12", **tool}


def test_the_installed_package_publishes_its_policy_under_its_section_name(budget: dict[str, str]) -> None:
    entry = installed_plugins()["budget"]
    assert entry.group == ENTRY_POINT_GROUP
    assert entry.dist is not None
    assert entry.dist.name == "budget-policy"


def test_a_section_builds_the_class_with_its_keys(budget: dict[str, str]) -> None:
    config = parse_config({"budget": {"limit": 2, "tools": ["Grep"]}})
    assert config.plugins == {"budget": {"enabled": True, "limit": 2, "tools": ["Grep"]}}
    (policy,) = [p for p in build_policies(config) if p.name == "budget"]
    assert (vars(policy)["limit"], vars(policy)["tools"]) == (2, frozenset({"Grep"}))
    assert [p.name for p in build_policies(parse_config({"budget": {"enabled": False}}))] == ["remind"]


def test_a_plugins_mode_puts_it_in_shadow_and_is_no_keyword_of_its_class(budget: dict[str, str]) -> None:
    config = parse_config({"budget": {"limit": 2, "tools": ["Grep"], "mode": "shadow"}})
    (policy,) = [p for p in build_policies(config) if p.name == "budget"]
    assert policy.shadow
    (enforcing,) = [p for p in build_policies(parse_config({"budget": {"limit": 2}})) if p.name == "budget"]
    assert not enforcing.shadow
    (shadowed_too,) = [
        p for p in build_policies(shadowed(parse_config({"budget": {"limit": 2}}))) if p.name == "budget"
    ]
    assert shadowed_too.shadow


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"limt": 2}, r"^budget\.limt = 2: unknown key \(known: enabled, mode, limit, tools\)$"),
        ({"mode": "log"}, r"^budget\.mode = 'log': must be \"enforce\" or \"shadow\"$"),
        ({"limit": 0}, r"^budget = .*refused by the policy \(limit must be an integer >= 1, got 0\)$"),
        ({"enabled": "yes"}, r"^budget\.enabled = 'yes': must be true or false$"),
        ({1: 2}, r"^budget\.1 = 2: keys must be strings$"),
    ],
)
def test_a_bad_section_names_the_key_and_the_rule(
    budget: dict[str, str], section: dict[Any, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"budget": section})


def test_python_plugin_sections_are_checked_as_file_ones(budget: dict[str, str]) -> None:
    assert Config(plugins={"budget": {"limit": 3}}).plugins == {"budget": {"limit": 3}}
    with pytest.raises(ConfigError, match=r"^budget = \[1\]: must be a table of settings$"):
        Config(plugins={"budget": [1]})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"^budget\.1 = 2: keys must be strings$"):
        Config(plugins={"budget": {1: 2}})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"^plugins = 'budget': must be a table of sections, one per plugin policy$"):
        Config(plugins="budget")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^plugins = 3: a section's name must be a string$"):
        Config(plugins={3: {}})  # type: ignore[dict-item]


def test_an_unknown_section_is_still_an_error_naming_the_installed_ones(budget: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"unknown section \(known: remind, turns, rescue, loops, budget\)"):
        parse_config({"budgett": {}})
    with pytest.raises(ConfigError, match="no installed package publishes a policy 'budgett'"):
        Config(plugins={"budgett": {}})


def test_without_the_package_its_section_is_unknown() -> None:
    with pytest.raises(ConfigError, match=r"^budget = \{\}: unknown section \(known: remind, turns, rescue, loops\)"):
        parse_config({"budget": {}})


def test_check_config_lists_the_policies_found_and_validates_their_sections(
    budget: dict[str, str], config_file: Path, tmp_path: Path
) -> None:
    done = cli(budget, "check-config", str(config_file))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "policy remind (built in): off",
        "policy turns (built in): off",
        "policy rescue (built in): off",
        "policy loops (built in): off",
        "policy budget (budget-policy 0.1.0): on",
    ]
    assert json.loads(done.stdout)["plugins"] == {"budget": {"enabled": True, "limit": 2, "tools": ["Grep"]}}
    toml = cli(budget, "check-config", str(config_file), "--toml")
    assert '[budget]\nenabled = true\nlimit = 2\ntools = ["Grep"]\n' in toml.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text("[budget]\nlimit = -1\n")
    refused = cli(budget, "check-config", str(bad))
    assert refused.returncode != 0
    assert "limit must be an integer >= 1, got -1" in refused.stderr


def test_the_hook_runs_it_and_replay_check_verifies_its_denial(
    budget: dict[str, str], config_file: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    answers = []
    payloads = [*hook_payloads(1), *hook_payloads(2), next(hook_payloads(3))]  # no PostToolUse once denied
    for hook_payload in payloads:
        done = cli(
            budget, "hook", "--config", str(config_file), "--state-dir", str(state), stdin=json.dumps(hook_payload)
        )
        assert done.returncode == 0, done.stderr
        answers.append(json.loads(done.stdout or "{}"))
    denial = answers[4]["hookSpecificOutput"]
    assert (denial["permissionDecision"], denial["permissionDecisionReason"]) == ("deny", DENIED)
    log = state / f"{SESSION}.jsonl"
    replayed = cli(budget, "replay", str(log), "--config", str(config_file), "--check", "--json")
    assert replayed.returncode == 0, replayed.stderr
    (verdict,) = [json.loads(line) for line in replayed.stdout.splitlines()]
    assert (verdict["policy"], verdict["action"], verdict["call_number"], verdict["text"]) == (
        "budget",
        "deny",
        3,
        DENIED,
    )
    assert "every guard action matches the log (1 denial)" in replayed.stderr
    outcome = anyio.run(replay_log, log, load_config(config_file))
    assert outcome.differences == []
    assert [(v.policy, v.action) for v in outcome.verdicts] == [("budget", "deny")]
    without = cli(budget, "replay", str(log), "--check")
    assert without.returncode == 0, "a policy the replay does not run leaves its denials as recorded"

    audited = cli(budget, "audit", str(log), "--json")
    assert audited.returncode == 0, audited.stderr
    report = json.loads(audited.stdout)
    assert "budget" in report["policies"]
    configured = json.loads(cli(budget, "audit", str(log), "--json", "--config", str(config_file)).stdout)
    assert configured["policies"] == ["budget"]


def test_serve_runs_it_and_its_session_log_replays(budget: dict[str, str], config_file: Path, tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "state", "--port", "0", "--config", str(config_file), env=budget)
    try:
        with server.client() as client:
            allowed = []
            for n in range(1, 4):
                call = {
                    "type": "tool/call",
                    "agent": "main",
                    "call_id": f"c{n}",
                    "step": n,
                    "tool": "Grep",
                    "args": {"n": n},
                }
                answer = client.post(f"/v1/sessions/{SESSION}/events", json=call).json()
                allowed.append((answer["allowed"], answer["reason"]))
                if answer["allowed"]:  # a denied call's result is the server's to record
                    result = {**call, "type": "tool/result", "content": "ok", "is_error": False, "denied_by": None}
                    assert client.post(f"/v1/sessions/{SESSION}/events", json=result).status_code == 200
    finally:
        server.stop()
        assert server.proc.stderr is not None
        server.proc.stderr.close()
    assert allowed == [(True, None), (True, None), (False, DENIED)]
    replayed = cli(
        budget, "replay", str(tmp_path / "state" / f"{SESSION}.jsonl"), "--config", str(config_file), "--check"
    )
    assert replayed.returncode == 0, replayed.stderr


def test_in_process_guards_and_adapters_build_it_from_the_config(budget: dict[str, str], config_file: Path) -> None:
    config = load_config(config_file)
    assert [p.name for p in Guard(config).policies] == ["budget"]
    link = GuardLink(config=config)

    async def three_calls() -> list[bool]:
        agent = Agent("main")
        decided = []
        for n in range(1, 4):
            call = ToolCall(agent=agent, call_id=f"c{n}", step=n, tool="Grep", args={"n": n})
            decision = await link.bus.decide(call)
            decided.append(decision.allowed)
            await link.bus.publish(ToolResult.answering(call, "ok"))
        return decided

    assert anyio.run(three_calls) == [True, True, False]


BROKEN = """
from guard import Policy


class Needs(Policy[None]):
    name = "needs"
    plugin = "needs"

    def __init__(self, level: int) -> None:
        self.level = level

    def new_state(self) -> None:
        return None


class Misnamed(Needs):
    name = "other"

    def __init__(self) -> None:
        pass


class NotAPolicy:
    def __init__(self) -> None:
        pass


class Anything(Needs):
    name = "anything"

    def __init__(self, **settings: object) -> None:
        self.settings = settings
"""


@pytest.fixture
def broken_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A distribution on ``sys.path`` whose entry points are each wrong in one way."""
    (tmp_path / "broken_plugins.py").write_text(BROKEN)
    info = tmp_path / "broken_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n"
        "needs = broken_plugins:Needs\n"
        "misnamed = broken_plugins:Misnamed\n"
        "notapolicy = broken_plugins:NotAPolicy\n"
        "missing = broken_plugins_gone:Policy\n"
        "remind = broken_plugins:Needs\n"
        "anything = broken_plugins:Anything\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("broken_plugins", None)


def test_check_config_names_each_installed_policy_with_its_distribution(
    broken_plugins: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from guard.cli import main

    config = tmp_path / "guard.toml"
    config.write_text("[remind]\n")
    assert main(["check-config", str(config)]) == 0
    listed = capsys.readouterr().err.splitlines()
    assert "policy remind (built in): on" in listed
    assert "policy anything (broken-plugins 0.1): off" in listed


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"needs": {}}, r"^needs\.level = None: is required$"),
        ({"misnamed": {}}, r"^misnamed = .*Misnamed': names itself 'other': a policy's name must be its section's$"),
        ({"notapolicy": {}}, r"^notapolicy = .*NotAPolicy': is not a policy \(it has no 'plugin'\)$"),
        ({"missing": {}}, r"^missing = 'broken_plugins_gone:Policy': the policy's entry point does not load \("),
    ],
)
def test_a_plugin_that_cannot_be_built_is_a_config_error(
    broken_plugins: None, section: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(section)


def test_a_class_taking_any_keyword_gets_every_key(broken_plugins: None) -> None:
    (policy,) = build_policies(parse_config({"remind": {"enabled": False}, "anything": {"a": 1, "b": [2]}}))
    assert vars(policy)["settings"] == {"a": 1, "b": [2]}


def test_a_plugins_table_settings_survive_printing_as_toml(broken_plugins: None) -> None:
    import tomllib

    from guard.config import to_toml

    config = parse_config({"anything": {"limits": {"Grep": 2}, "none": {}}})
    printed = to_toml(config)
    assert printed.endswith('[anything]\nenabled = true\nlimits = {"Grep" = 2}\nnone = {}\n')
    assert parse_config(tomllib.loads(printed)) == config


def test_a_package_cannot_take_over_a_builtin_section(broken_plugins: None) -> None:
    assert "remind" not in installed_plugins()
    assert [type(p).__name__ for p in build_policies(parse_config({"remind": {}, "needs": {"level": 1}}))] == [
        "RemindPolicy",
        "Needs",
    ]
