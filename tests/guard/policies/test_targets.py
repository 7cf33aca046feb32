"""What a call acts on: shell programs, named files and URLs, written files."""

from __future__ import annotations

import pytest

from guard.patterns import shell_command
from guard.policies.targets import call_target, shell_program, write_target


@pytest.mark.parametrize(
    ("command", "program"),
    [
        ("make", "make"),
        ("rm -rf build && cd app && make -j4", "make"),
        ("sudo FOO=1 /usr/bin/pytest -q", "pytest"),
        ("  ", None),
    ],
)
def test_the_program_is_the_last_steps(command: str, program: str | None) -> None:
    assert shell_program(command) == program


@pytest.mark.parametrize(
    ("command", "program"),
    [
        ('python -c "import wrapt\nprint(wrapt.__version__); print(1)"', "python"),
        ("cd /w && python -c 'import os\nprint(os.getcwd())'", "python"),
        ('echo "a && b" ; grep -n "x|y" f.py', "grep"),
        ("cat > test_fix.py << 'EOF'\nimport a\nprint(a.b)\nEOF", "cat"),
        ("python3 - <<'PY'\nimport sys; print(sys.path)\nPY", "python3"),
        ("cat > t.py <<EOF\nx = 1\nEOF\npython t.py", "python"),
        ("cat <<-EOF | grep x\n\tfoo\n\tEOF", "cat"),
        ("git commit -m \"$(cat <<'EOF'\nfix: a; b\nEOF\n)\"", "git"),
        ("cat << EOF\nnever closed\nrm -rf x", "cat"),  # the body runs to the end
        ("cat <<EOF", "cat"),  # no body at all
        ("python -c 'never closed; make", "make"),  # an unclosed quote: read as it was written
        ("edit 118:150\n    if x:\n        return y\nend_of_edit\n", "edit"),  # SWE-agent's edit: its text is data
        ("edit 3:3\nend_of_edit", "edit"),
        ("\nedit 1:2\nfoo\nend_of_edit\n", "edit"),
        ("echo end_of_edit", "echo"),
        ("cd /repo\ncat <<end_of_patch | git apply\n+x\nend_of_patch", "cat"),  # a heredoc named so is one
        ("export X=1\nmake test <<end_of_input\ny\nend_of_input\n", "make"),
    ],
)
def test_no_step_starts_inside_a_quoted_argument_or_a_heredoc(command: str, program: str) -> None:
    assert shell_program(command) == program


def _target(args: object) -> tuple[str | None, bool]:
    return call_target(args, shell_command(args))


def test_the_target_is_a_program_a_file_or_a_url_without_its_query() -> None:
    assert _target({"command": "cd a && grep -rn x ."})[0] == "grep"
    assert call_target({"command": "cd a && grep -rn x ."}, "cd a && grep -rn x .", "grep -rn")[0] == "grep -rn"
    assert _target({"url": "https://x.example/a?page=2#top"})[0] == "https://x.example/a"
    assert _target({"command": "view", "path": "/w/a.py"})[0] == "/w/a.py"
    assert _target({"command": "  ", "path": "/w/a.py"})[0] == "/w/a.py"
    assert _target({"query": "x"})[0] is None
    assert _target({"command": "  "})[0] is None
    assert _target("raw arguments")[0] is None


@pytest.mark.parametrize(
    ("command", "target"),
    [
        ("cat > fix.patch <<'EOF'\n--- a > b\nEOF", "fix.patch"),
        ("cd /w && cat <<'EOF' > a.py\nprint(1 > 2)\nEOF", "a.py"),
        ("tee -a notes.md <<EOF\nx\nEOF", "notes.md"),
        ("echo 'x = 1' >> cfg.py", "cfg.py"),
        ("python - <<'EOF' > out.txt\nprint(1)\nEOF", None),
        ("git diff > patch.txt && cat patch.txt", None),
        ("echo $HOME > where.txt", None),
        ("make > /dev/null 2>&1", None),
    ],
)
def test_a_write_counts_only_when_the_command_text_is_the_content(command: str, target: str | None) -> None:
    assert write_target({"command": command}, by_tool=False) == target


def test_an_editing_tool_writes_the_file_it_names() -> None:
    assert write_target({"file_path": "a.py", "content": "x"}, by_tool=True) == "a.py"
    assert write_target({"content": "x"}, by_tool=False) is None


def test_a_page_given_as_a_url_is_no_file_written() -> None:
    """A page opened again, a request sent again: its answer says what it
    did. A URL given as the file to write (a WebDAV upload) is one."""
    assert write_target({"url": "http://127.0.0.1/status"}, by_tool=True) is None
    assert write_target({"url": "file:///w/notes.md", "content": "x"}, by_tool=True) == "file:///w/notes.md"
    assert write_target({"path": "https://dav.example.com/notes.md", "content": "x"}, by_tool=True) == (
        "https://dav.example.com/notes.md"
    )


def test_files_listed_together_are_read_as_files_unless_searched() -> None:
    def read(args: dict[str, object], tool: str = "read_multiple_files") -> tuple[str | None, bool]:
        return call_target(args, None, tool=tool)

    assert read({"paths": ["a.py", " b.py "]}) == ("a.py, b.py", True)
    assert read({"paths": ["tests/test_auth.py"]}, "run_tests") == (None, False)  # a runner's report
    assert read({"paths": ["tests"]}, "run_tests_multithreaded") == (None, False)
    assert read({"paths": ["a.json"]}, "get_file_contents") == ("a.json", True)
    assert read({"paths": ["a.json"]}, "viewFiles") == ("a.json", True)
    assert read({"paths": ["src"], "pattern": "TODO"}) == (None, False)  # a search in them
    assert read({"paths": ["src"], "query": "TODO"}) == (None, False)
    assert read({"paths": ["https://x.example/a"]}) == (None, False)
    assert read({"paths": ["a.py", 7]}) == (None, False)
    assert read({"paths": []}) == (None, False)
    assert read({"paths": "a.py"}) == (None, False)


_PATCH = "*** Begin Patch\n*** Update File: src/price.py\n@@\n-round(x, 2)\n+Decimal(x)\n*** End Patch"


def test_a_codex_patch_writes_the_files_it_names() -> None:
    assert write_target(_PATCH, by_tool=True) == "src/price.py"  # a rollout's custom tool call: the text alone
    assert write_target({"input": _PATCH.replace("Update File: src/price.py", "Add File: a.md")}, by_tool=True) == (
        "a.md"
    )
    two = _PATCH.replace("*** End Patch", "*** Delete File: old.py\n*** End Patch")
    assert write_target({"input": two}, by_tool=True) == "src/price.py, old.py"
    shell = {"command": ["bash", "-lc", f"apply_patch <<'EOF'\n{_PATCH}\nEOF"]}
    assert write_target(shell, by_tool=False) == "src/price.py"
    assert write_target({"input": "no patch here"}, by_tool=True) is None
    assert write_target({"command": "apply_patch --help"}, by_tool=False) is None


def test_a_tool_names_a_file_when_it_reads_one() -> None:
    assert _target({"file_path": "a.py"})[1]
    assert _target({"command": "view", "path": "/w/a.py"})[1]
    assert not _target({"command": "grep -n x a.py", "path": "a.py"})[1]
    assert not _target({"url": "https://x.example/a"})[1]
    assert not _target({"query": "x"})[1]
    assert not _target({"command": "cat a.py"})[1]
