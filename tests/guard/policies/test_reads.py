"""Which calls only read (``guard.policies.reads``): anything else may change
what the next check returns."""

from __future__ import annotations

import pytest

from guard.policies.reads import DEFAULT_READ_ONLY_COMMANDS, DEFAULT_READ_ONLY_TOOLS, ReadOnlyRule


@pytest.fixture
def rule() -> ReadOnlyRule:
    return ReadOnlyRule(DEFAULT_READ_ONLY_TOOLS, DEFAULT_READ_ONLY_COMMANDS)


@pytest.mark.parametrize(
    "command",
    [
        "ls -la dist",
        "cd /w && git log -1 --oneline",
        'grep -n "DECL(pattern);" src/parser.c 2>&1 | head -5',
        "find . -name '*.py' | xargs wc -l",
        "sudo FOO=1 cat /etc/hosts;",
        "git --no-pager diff HEAD~1",
        "kubectl get pods -n web",
        "view",
    ],
)
def test_read_only_commands_only_read(rule: ReadOnlyRule, command: str) -> None:
    assert rule.reads("Bash", command)


@pytest.mark.parametrize(
    "command",
    ["git pull --rebase", "npm run build", "ls && make", "cat a | python fix.py", "pytest -q", "docker compose up -d"],
)
def test_a_command_with_any_other_step_may_change_something(rule: ReadOnlyRule, command: str) -> None:
    assert not rule.reads("Bash", command)


@pytest.mark.parametrize(
    "tool", ["Read", "Grep", "WebFetch", "browser_get_state", "mcp__github__get_issue", "file_read"]
)
def test_read_tools_only_read(rule: ReadOnlyRule, tool: str) -> None:
    assert rule.reads(tool, None)


@pytest.mark.parametrize("tool", ["browser_click", "send_email", "sql", "mcp__github__create_issue", "deploy"])
def test_other_tools_may_change_something(rule: ReadOnlyRule, tool: str) -> None:
    assert not rule.reads(tool, None)


def test_with_nothing_listed_every_call_may_change_something() -> None:
    rule = ReadOnlyRule((), ())
    assert not rule.reads("Read", None)
    assert not rule.reads("Bash", "ls")


def test_many_distinct_commands_are_answered_alike(rule: ReadOnlyRule) -> None:
    answers = {rule.reads("Bash", f"cat file{n}.txt") for n in range(5000)}
    assert answers == {True}
    assert not rule.reads("Bash", "make 5001")
