"""What counts as progress for ``rescue``: editing tools however they are
spelled, and shell commands that edit files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from guard import Config, RemindConfig, RescueConfig
from guard.policies.progress import DEFAULT_MUTATING_COMMANDS, ProgressRule, loose_tool_name
from tests.scenarios._script import Script

DEFAULT_TOOLS = RescueConfig().mutating_tools


@pytest.fixture
def rule() -> ProgressRule:
    return ProgressRule(DEFAULT_TOOLS, DEFAULT_MUTATING_COMMANDS)


@pytest.mark.parametrize(
    ("name", "loose"),
    [("MultiEdit", "multiedit"), ("multi_edit", "multiedit"), ("multi-edit", "multiedit"), ("mcp__fs__*", "mcpfs*")],
)
def test_loose_names_ignore_case_and_separators(name: str, loose: str) -> None:
    assert loose_tool_name(name) == loose


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"}),  # Claude Code
        ("MultiEdit", {"file_path": "a.py", "edits": []}),
        ("Write", {"file_path": "a.py", "content": ""}),
        ("NotebookEdit", {"notebook_path": "n.ipynb"}),
        ("apply_patch", "*** Begin Patch"),  # Codex custom tool: raw string input
        ("str_replace_editor", {"command": "str_replace", "path": "a.py"}),  # OpenHands
        ("str_replace_editor", {"command": "create", "path": "a.py"}),
        ("write_file", {"file_path": "a.ts", "content": ""}),  # gemini-cli
        ("replace", {"file_path": "a.ts", "old_string": "x", "new_string": "y"}),
        ("str_replace_based_edit_tool", {"command": "str_replace", "path": "a.py"}),  # Claude API text editor
        ("file_editor", {"command": "insert", "path": "a.py"}),  # OpenHands SDK
        ("mcp__filesystem__edit_file", {"path": "a.py", "edits": []}),  # an MCP server's tool in Claude Code
        ("developer__text_editor", {"command": "str_replace", "path": "a.py"}),  # Goose
    ],
)
def test_editing_tools_are_progress_however_spelled(rule: ProgressRule, tool: str, args: Any) -> None:
    assert rule.is_progress(tool, args)


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("mcp__filesystem__read_file", {"path": "a.py"}),
        ("developer__text_editor", {"command": "view", "path": "a.py"}),
        ("mcp__github__", {}),
    ],
)
def test_an_mcp_tool_that_only_reads_is_not_progress(rule: ProgressRule, tool: str, args: Any) -> None:
    assert not rule.is_progress(tool, args)


@pytest.mark.parametrize("sub", ["view", "VIEW ", "read"])
@pytest.mark.parametrize("tool", ["str_replace_editor", "str_replace_based_edit_tool", "file_editor"])
def test_a_read_only_subcommand_of_an_editing_tool_is_not_progress(rule: ProgressRule, tool: str, sub: str) -> None:
    assert not rule.is_progress(tool, {"command": sub, "path": "a.py"})
    assert not rule.edits_by_tool(tool, sub)


def test_only_an_editing_tool_edits_by_tool(rule: ProgressRule) -> None:
    """An editing tool's arguments say what it changes; a shell command's
    effect depends on more than its text (``curl url > page.html``)."""
    assert rule.edits_by_tool("Write", None)
    assert not rule.edits_by_tool("bash", "sed -i s/a/b/ f")
    assert rule.is_progress("bash", {"command": "sed -i s/a/b/ f"})
    assert not ProgressRule((), DEFAULT_MUTATING_COMMANDS).edits_by_tool("Write", None)


@pytest.mark.parametrize(
    "command",
    [
        "sed -i 's/a/b/' f.py",
        "sed -i.bak -e 's/a/b/' f.py",
        "perl -pi -e 's/a/b/' f.py",
        "cat <<'EOF' > reproduce.py\nprint(1)\nEOF",
        "echo x >> notes.txt",
        "git apply fix.patch",
        "git checkout -- src/a.py",
        "patch -p1 < fix.diff",
        "mkdir -p build && cd build",
        "rm reproduce.py test_none.py",
        "pip install -e .",
        "printf 'a' | tee out.txt",
        "echo x >/dev/stdout",
        "echo hi > файл.txt",
        ">out.log make",
        "python3 -c \"\nwith open(path, 'w') as f:\n    f.writelines(lines)\n\"",
        "python -c \"open('a.py', mode='a').write('x')\"",
        "python -c \"from pathlib import Path; Path('a.py').write_text(s)\"",
        "node -e \"require('fs').writeFileSync('a.js', src)\"",
        "echo 'x = 1' 1>> settings.py",
        "cat header.txt 1> out.txt",
    ],
)
def test_shell_commands_that_edit_are_progress(rule: ProgressRule, command: str) -> None:
    assert rule.is_progress("bash", {"command": command})


@pytest.mark.parametrize(
    "command",
    [
        "python3 reproduce_issue.py",
        "sed -n '1830,1870p' django/db/models/sql/compiler.py",
        "pytest -x 2>&1 | tail -5",
        "make > /dev/null",
        "make >/dev/null 2>&1",
        "make 2> errors.txt",
        "make &> /dev/null",
        "ls -la",
        "grep -rn 'form' src/",
        "cargo clippy",
        "python3 -c \"print(open('a.py', 'r').read()[:200])\"",
        'python -c "print(repr(open(p).readlines()[41]))"',
    ],
)
def test_shell_commands_that_only_read_are_not_progress(rule: ProgressRule, command: str) -> None:
    assert not rule.is_progress("bash", {"command": command})


@pytest.mark.parametrize("command", ["sed " * 15_500, "perl " * 12_400, "a-" * 31_000, "> " * 31_000])
def test_long_pathological_commands_are_answered(rule: ProgressRule, command: str) -> None:
    # The old sed -i pattern backtracked: 17.5 s on the first of these (benchmarks/patterns.py measures).
    assert rule.kind("bash", command) is None


def test_a_tool_outside_both_lists_is_not_progress(rule: ProgressRule) -> None:
    assert not rule.is_progress("grep", {"pattern": "x"})
    assert not rule.is_progress("bash", "sed -i s/a/b/ f")  # raw-string args carry no command field


def test_empty_lists_make_nothing_progress() -> None:
    rule = ProgressRule((), ())
    assert not rule.is_progress("Edit", {"file_path": "a.py"})
    assert not rule.is_progress("bash", {"command": "sed -i s/a/b/ f"})


@pytest.mark.anyio
async def test_shell_edit_and_rerun_cycle_is_never_denied(
    tmp_path: Path, missing_ask_command: str, anyio_backend: str
) -> None:
    """mini-swe-agent's real pattern: edit with sed -i, rerun the script, six times."""
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=missing_ask_command))
    s = Script(tmp_path / "s.jsonl", config)
    results = []
    for n in range(6):
        await s.call("main", "bash", {"command": f"sed -i '12c\\    x = {n}' django/db/models/query.py"}, "")
        results.append(await s.call("main", "bash", {"command": "python3 reproduce_issue.py"}, "FAIL"))
    s.close()
    assert [r.denied_by for r in results] == [None] * 6


@pytest.mark.anyio
async def test_rerun_without_an_edit_is_still_denied(
    tmp_path: Path, missing_ask_command: str, anyio_backend: str
) -> None:
    config = Config(remind=RemindConfig(enabled=False), rescue=RescueConfig(ask_command=missing_ask_command))
    s = Script(tmp_path / "s.jsonl", config)
    results = [await s.call("main", "bash", {"command": "python3 reproduce_issue.py"}, "FAIL") for _ in range(3)]
    s.close()
    assert [r.denied_by for r in results] == [None, None, "loop-rescue"]
