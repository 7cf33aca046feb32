"""Which calls only read (``guard.policies.reads``): anything else may change
what the next check returns."""

from __future__ import annotations

import pytest

from guard.policies.reads import (
    DEFAULT_READ_ONLY_COMMANDS,
    DEFAULT_READ_ONLY_TOOLS,
    ReadOnlyRule,
    keeps_books,
    without_prefixes,
)


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
        "kubectl -n web get pods",
        "kubectl --context=prod describe deploy web",
        "docker --context prod ps -a",
        "gh -R org/app pr view 12",
        "cd /repo && grep -rn TODO src",
        "export",
        "export -p",
        "set -o",
        "ulimit -a",
        "umask",
        "view",
        "grep -in todo src/a.py",
        "Get-Content build.log | Select-String error",
        "get-childitem -Recurse *.cs | Measure-Object",
        "type config.ini",
        "grep -o 'v[0-9]*' VERSION",
        "sort names.txt | uniq -c",
        "git branch -a",
        "git branch -vv 2>&1",
        "git tag -l 'v1.*'",
        "git remote -v",
        "npm version",
        "go env GOPATH",
        "find . -name '*.pyc'",
        "find . -name '*.py' -exec grep -l '_VLF' {} \\;",
        "find src -type f -exec wc -l {} + | sort -n",
        "python -m json.tool data.json",
        "python -m json.tool --indent 2 data.json",
    ],
)
def test_read_only_commands_only_read(rule: ReadOnlyRule, command: str) -> None:
    assert rule.reads("Bash", command)


@pytest.mark.parametrize(
    "command",
    [
        "git pull --rebase",
        "npm run build",
        "ls && make",
        "cat a | python fix.py",
        "pytest -q",
        "docker compose up -d",
        "sed --in-place 's/a/b/' f.py",
        "awk -i inplace '{print}' f",
        "find . -name '*.pyc' -delete",
        "find . -name x -exec rm {} +",
        "sort -o names.txt names.txt",
        "git branch -D old",
        "git branch feature-x",
        'git branch "feature-x"',
        "git tag 'v1.2'",
        "git tag v1.2",
        "git tag -a v1.2 -m release",
        "git remote add upstream https://example.com/r.git",
        "npm version minor",
        "go env -w GOFLAGS=-mod=mod",
        "date -s '2026-01-01'",
        "python -m json.tool in.json out.json",
        "source ./setup.sh",
        ". ./setup.sh",
        "echo $(./bump.sh)",
        'echo "$(rm -rf build)"',
        "cat `./make-list.sh`",
        "diff <(./gen a) b",
        "Get-Content a.txt | Set-Content b.txt",
        "Remove-Item build -Recurse",
        "cd packages/web",
        "export DJANGO_SETTINGS_MODULE=app.settings",
        "cd /repo; export CI=1",
        "set -e",
        "set -o pipefail",
        "unset PYTHONPATH",
        "ulimit -n 4096",
        "umask 022",
        "kubectl -n web apply -f web.yaml",
        "env -i make test",
        "env -0 npm test",
        "sudo -u deploy rm -rf build",
    ],
)
def test_a_command_with_any_other_step_may_change_something(rule: ReadOnlyRule, command: str) -> None:
    assert not rule.reads("Bash", command)


@pytest.mark.parametrize(
    "tool",
    [
        "Read",
        "Grep",
        "WebFetch",
        "browser_get_state",
        "mcp__github__get_issue",
        "file_read",
        "TodoWrite",
        "write_todos",
        "TaskUpdate",
        "tracker_update_task",
        "update_topic",
        "browser_snapshot",
        "browser_take_screenshot",
        # an MCP server's tool by the words of its own name, the thing named first
        "mcp__issues__directive_get",
        "mcp__atlassian__jira_get_issue",
        "mcp__slack__slack_get_channel_history",
        "mcp__notion__notion_retrieve_page",
        "mcp__issues__issue_list",
    ],
)
def test_read_tools_only_read(rule: ReadOnlyRule, tool: str) -> None:
    assert rule.reads(tool, None)


@pytest.mark.parametrize(
    "tool",
    [
        "browser_click",
        "send_email",
        "sql",
        "mcp__github__create_issue",
        "deploy",
        "slack_reply_to_thread",
        "mark_all_notifications_read",
        "search_and_replace",
        "find_and_replace",
        "mcp__github__create_pending_pull_request_review",
        "getOrCreateUser",
        "mcp__asana__task_update",  # another service's task, not the agent's own list
        "mcp__todoist__complete_task",
        "mcp__proxmox__restore_snapshot",
        "mcp__cache__cache_get_or_create",  # a word that acts
        "mcp__issues__issue_ready",  # no word that reads
        "directive_get",  # not a server's tool: judged by read_only_tools alone
    ],
)
def test_other_tools_may_change_something(rule: ReadOnlyRule, tool: str) -> None:
    assert not rule.reads(tool, None)


def test_a_tool_named_in_another_script_is_matched_by_its_letters() -> None:
    rule = ReadOnlyRule(["读*"], ())
    assert rule.reads("读取文件", None)
    assert not rule.reads("发送邮件", None)
    assert not rule.reads("send_mail", None)


def test_with_nothing_listed_every_call_may_change_something() -> None:
    rule = ReadOnlyRule((), ())
    assert not rule.reads("Read", None)
    assert not rule.reads("mcp__atlassian__jira_get_issue", None)
    assert not rule.reads("Bash", "ls")


def test_a_tool_and_a_command_of_one_name_are_answered_apart(rule: ReadOnlyRule) -> None:
    assert rule.reads("search_code", None)
    assert not rule.reads("Bash", "search_code")


@pytest.mark.parametrize(
    ("tool", "command", "reads"),
    [
        ("open", "open src/Deser.java\n", True),
        ("goto", "goto 2110", True),
        ("search_dir", 'search_dir "Nulls.SKIP" src', True),
        ("find_file", 'find_file "Repro.java"', True),
        ("scroll_down", "scroll_down", True),
        ("git", "git status", True),
        ("sed", "sed -n 10,40p a.py", True),
        ("cd", "cd /w && grep -rn x src", True),
        ("find", "find . -name '*.pyc' -delete", False),
        ("create", "create Repro.java", False),
        ("python", "python repro.py", False),
        ("open", "open a.py && rm -rf build", False),
    ],
)
def test_swe_agents_calls_are_judged_by_their_command(rule: ReadOnlyRule, tool: str, command: str, reads: bool) -> None:
    """SWE-agent's text interface names each call after its first word and
    runs the line as a shell command: its own read commands (``open``,
    ``goto``, ``search_dir``) are read-only commands; the tool's name
    decides nothing (``find`` may delete)."""
    assert rule.reads(tool, command) is reads


@pytest.mark.parametrize(
    ("command", "reads"),
    [
        ("# reinstall the JDK", True),
        ("# one\n# two\n", True),
        ("ls  # the files", True),
        ("# let's deploy\ngit push origin main\n# that's it", False),
        ("# check; then push\ngit push", False),
        ("grep -n '# not a comment' a.py", True),
        ("echo a#b; make", False),
    ],
)
def test_a_comment_runs_nothing_and_hides_no_step(rule: ReadOnlyRule, command: str, reads: bool) -> None:
    assert rule.reads("Bash", command) is reads


def test_many_distinct_commands_are_answered_alike(rule: ReadOnlyRule) -> None:
    answers = {rule.reads("Bash", f"cat file{n}.txt") for n in range(5000)}
    assert answers == {True}
    assert not rule.reads("Bash", "make 5001")
    answers = {rule.reads(f"get_item_{n}", None) for n in range(5000)}
    assert answers == {True}
    assert not rule.reads("post_item_5001", None)


@pytest.mark.parametrize(
    ("tool", "books"),
    [
        ("TodoWrite", True),
        ("update_plan", True),
        ("write_todos", True),
        ("TaskUpdate", True),
        ("think", True),
        ("tracker_update_task", True),
        ("Read", False),
        ("create_issue", False),
        ("mcp__linear__update_plan", False),  # another service's plan
    ],
)
def test_only_the_agents_own_todo_list_plan_or_thoughts_keep_its_books(tool: str, books: bool) -> None:
    assert keeps_books(tool) is books


def test_the_words_that_only_run_a_step_are_dropped_but_not_from_a_huge_command() -> None:
    assert without_prefixes("sudo -u postgres pg_isready; FOO=1 nice -n 5 make") == "pg_isready; make"
    huge = "sudo -u postgres pg_isready " + "x" * 17_000
    assert without_prefixes(huge) is huge
