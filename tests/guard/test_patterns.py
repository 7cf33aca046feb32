"""Tool-name patterns: ``*`` is the only wildcard (seed 000)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks._transcripts import CORPUS
from bus import ToolResult
from guard import LoopsConfig, LoopsPolicy
from guard.audit import find_transcripts
from guard.importers import open_sessions
from guard.normalize import DEFAULT_RESULT_NORMALIZE
from guard.patterns import (
    PATTERN_INPUT_LIMIT,
    CommandPatterns,
    Glob,
    PatternError,
    RegexSet,
    RegexSets,
    Substitutions,
    ToolFilter,
    compile_regex,
    shell_command,
)


@pytest.mark.parametrize(
    ("pattern", "tool", "matches"),
    [
        ("grep", "grep", True),
        ("grep", "grep2", False),
        ("grep", "xgrep", False),
        ("mcp_*", "mcp_fs_read", True),
        ("mcp_*", "mcp_", True),
        ("mcp_*", "xmcp_fs", False),
        ("*_write", "todo_write", True),
        ("a*b*c", "a-b-c", True),
        ("a*b*c", "a-c", False),
        ("*", "", True),
        ("mcp.fs[*", "mcp.fs[1]+", True),
        ("mcp.fs[*", "mcpXfs[1]", False),  # "." is a literal dot
        ("a+", "aa", False),  # "+" is a literal plus
        ("a+", "a+", True),
        ("(x|y)", "x", False),
        ("(x|y)", "(x|y)", True),
        ("a?", "a", False),
        ("^a$", "^a$", True),
        ("a\\d", "a\\d", True),
        ("a\\d", "a1", False),
        ("Grep", "grep", False),  # case matters
        ("line*", "line\nbreak", True),
    ],
)
def test_star_is_the_only_wildcard(pattern: str, tool: str, matches: bool) -> None:
    assert Glob(pattern).matches(tool) is matches


def test_empty_include_tracks_every_tool() -> None:
    tools = ToolFilter()
    assert tools.tracks("grep")
    assert tools.tracks("anything.at[all]")


def test_include_limits_tracking_and_exclude_wins() -> None:
    tools = ToolFilter(include=["mcp_*", "grep"], exclude=["mcp_*_write"])
    assert tools.tracks("grep")
    assert tools.tracks("mcp_fs_read")
    assert not tools.tracks("mcp_fs_write")
    assert not tools.tracks("read")
    assert [tools.tracks("mcp_fs_write"), tools.tracks("grep")] == [False, True]  # answered again from memory


def test_with_own_names_an_mcp_servers_tool_is_also_matched_by_its_own_name() -> None:
    tools = ToolFilter(include=["edit_file", "write_*"], own_names=True)
    assert tools.tracks("edit_file")
    assert tools.tracks("mcp__filesystem__edit_file")
    assert tools.tracks("developer__write_text")
    assert not tools.tracks("mcp__filesystem__read_file")
    assert not tools.tracks("__edit_file")  # no server before the separator
    assert not ToolFilter(include=["edit_file"]).tracks("mcp__filesystem__edit_file")


def test_with_own_names_an_mcp_servers_tool_is_excluded_by_either_name() -> None:
    tools = ToolFilter(exclude=["wait", "mcp__github__*"], own_names=True)
    assert not tools.tracks("mcp__wait-timer__wait")
    assert not tools.tracks("mcp__github__create_issue")
    assert tools.tracks("mcp__browser__wait_for")
    assert ToolFilter(exclude=["wait"]).tracks("mcp__wait-timer__wait")


def test_pattern_matching_no_tool_is_valid() -> None:
    tools = ToolFilter(exclude=["mcp_*"])  # a deployment that loads no MCP tools
    assert tools.tracks("grep")


def test_many_distinct_tool_names_keep_answering_correctly() -> None:
    tools = ToolFilter(exclude=["skip_*"])
    for i in range(ToolFilter._MEMO_LIMIT + 10):
        assert tools.tracks(f"tool_{i}")
        assert not tools.tracks(f"skip_{i}")
    assert len(tools._memo) <= ToolFilter._MEMO_LIMIT


@given(st.text(max_size=12), st.text(max_size=12))
def test_a_pattern_without_star_matches_only_itself(pattern: str, tool: str) -> None:
    pattern = pattern.replace("*", "")
    assert Glob(pattern).matches(tool) is (pattern == tool)


def _backtracking_glob(pattern: str) -> re.Pattern[str]:
    """The old way: a regex with ``.*`` for each star (exponential with many stars)."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


@given(st.text(alphabet="ab*", max_size=8), st.text(alphabet="ab", max_size=10))
def test_glob_agrees_with_the_regex_it_replaces(pattern: str, tool: str) -> None:
    assert Glob(pattern).matches(tool) is (_backtracking_glob(pattern).fullmatch(tool) is not None)


def test_a_glob_with_many_stars_answers_a_long_name() -> None:
    assert not Glob("*a" * 60 + "*b").matches("a" * 20_000)
    assert Glob("*a" * 60 + "*b").matches("a" * 20_000 + "b")
    assert repr(Glob("mcp_*")) == "Glob('mcp_*')"


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"sleep(?= \d)", "lookahead is not supported"),
        (r"(?!gh)run", "lookahead is not supported"),
        (r"(?<=gh )run", "lookbehind is not supported"),
        (r"(?<!x)y", "lookbehind is not supported"),
        (r"(a)\1", "backreferences are not supported"),
        (r"a++", "must be a valid RE2 regular expression (bad repetition operator: ++)"),
        (r"(", "must be a valid RE2 regular expression (missing ): ()"),
        (
            r"\x{110000}",
            "must be a valid RE2 regular expression (invalid escape sequence: \\x{110000)",
        ),  # no backreference
    ],
)
def test_a_pattern_re2_refuses_is_rejected_naming_the_setting(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError) as info:
        compile_regex(pattern, setting="turns.exempt_commands")
    assert (info.value.setting, info.value.pattern) == ("turns.exempt_commands", pattern)
    assert reason in info.value.reason
    assert str(info.value).startswith(f"turns.exempt_commands = {pattern!r}: must be a valid RE2 regular expression")


def test_a_non_string_pattern_is_rejected() -> None:
    with pytest.raises(PatternError, match="each entry must be a string"):
        RegexSet([3], setting="x.y")  # type: ignore[list-item]


def test_nested_quantifiers_run_in_linear_time() -> None:
    assert not compile_regex(r"(a+)+$").search("a" * 50_000 + "!")
    assert not RegexSet([r"(x+x+)+y", r"(\w|\d)*z"]).search("x" * 50_000)


def test_patterns_see_only_the_head_of_a_long_input() -> None:
    tail = compile_regex(r"needle")
    assert tail.search("x" * (PATTERN_INPUT_LIMIT - 6) + "needle")
    assert not tail.search("x" * PATTERN_INPUT_LIMIT + "needle")


def test_sub_replaces_in_the_head_and_keeps_the_tail() -> None:
    digits = compile_regex(r"\d+")
    assert digits.sub("N", "pid 4242 took 17 ms") == "pid N took N ms"
    text = "1" * PATTERN_INPUT_LIMIT + "22"
    assert digits.sub("N", text) == "N22"
    unchanged = "no digits"
    assert digits.sub("N", unchanged) is unchanged
    assert compile_regex(r"(?P<word>\w+)=\d+").sub(r"\g<word>=N", "a=1 b=2") == "a=N b=N"
    assert repr(digits) == "Regex('\\\\d+')"


def test_lone_surrogates_are_matched_and_survive() -> None:
    assert compile_regex("b").search("\ud800b")
    assert compile_regex("b").sub("c", "\ud800b") == "\ud800c"
    assert compile_regex(r"^\C").sub("X", "\ud800b") == "X\ufffd\ufffdb"  # a cut inside the surrogate


def test_ignore_case_and_named_groups() -> None:
    assert compile_regex("kubectl get", ignore_case=True).search("KUBECTL GET pods")
    assert compile_regex(r"(?P<secret>\d+)").group_index("secret") == 1
    assert compile_regex(r"\d+").group_index("secret") == 0


def test_an_empty_set_matches_nothing() -> None:
    empty = RegexSet()
    assert not empty
    assert not empty.search("anything")
    assert not empty.match("anything")
    assert Substitutions([]).sub("#", "anything") == "anything"


def test_a_set_matches_at_the_start_only_when_asked() -> None:
    errors = RegexSet([r"ERROR:\s", r"<tool_use_error>"])
    assert errors.match("ERROR: no such file")
    assert not errors.match("build log\nERROR: no such file")
    assert errors.search("build log\nERROR: no such file")


@given(
    st.sampled_from([r"x*", r"\b", r"[ab]+", r"(?m)$", r"\d{2}", r"é?", r"a|"]),
    st.text(alphabet="abx é\n12", max_size=16),
    st.sampled_from(["", "-", "\x00"]),
)
def test_a_literal_replacement_finds_the_matches_the_re2_wrapper_finds(pattern: str, text: str, by: str) -> None:
    regex = compile_regex(pattern)
    wrapper = regex._regexp.sub(by.encode(), text.encode()).decode("utf-8", "replace")  # google-re2 own sub
    assert regex.sub(by, text) == wrapper


def test_an_empty_match_at_the_end_is_replaced_once() -> None:
    assert compile_regex("x*").sub("-", "ab") == "-a-b-"


def test_substitutions_run_in_order_and_see_what_earlier_ones_wrote() -> None:
    # the second entry matches only the marker the first one wrote
    chain = Substitutions([r"\d\d:\d\d", r"# UTC"])
    assert chain.sub("#", "at 10:11 UTC, again at 12:13 UTC") == "at #, again at #"
    assert chain.sub("#", "no clock here") == "no clock here"
    assert Substitutions([r"x"]).sub("x", "a x b") == "a x b"


@given(st.text(alphabet="0123456789:- TZabcdefPpMms.\n", max_size=80))
def test_substitutions_agree_with_each_sub_in_turn(text: str) -> None:
    regexes = [compile_regex(p) for p in DEFAULT_RESULT_NORMALIZE]
    expected = text
    for regex in regexes:
        expected = regex.sub("\x00", expected)
    assert Substitutions(DEFAULT_RESULT_NORMALIZE).sub("\x00", text) == expected


def test_command_patterns_search_only_the_command_read_from_the_arguments() -> None:
    polls = CommandPatterns([r"^gh run watch\b", r"\btail -f\b"])
    found = {
        "gh run watch 42": True,
        "cd app && tail -f log": True,
        "make test": False,
    }
    for command, expected in found.items():
        assert polls.search(shell_command({"command": command})) is expected
    for args in ({"command": ["gh", "run", "watch"]}, {"path": "gh run watch"}, "gh run watch"):
        assert not polls.search(shell_command(args))
        assert not polls.match(args)
    assert polls.match({"command": "gh run watch 42"})
    assert not polls.search(None)
    assert not CommandPatterns().match({"command": "anything"})
    assert not CommandPatterns().search("anything")


@pytest.mark.parametrize(
    ("args", "command"),
    [
        ({"command": "git status"}, "git status"),
        ({"command": ["bash", "-lc", "git status && ls"], "workdir": "/w"}, "git status && ls"),  # Codex shell
        ({"command": ["/bin/sh", "-c", "make"]}, "make"),
        ({"command": ["ls", "-la", "src"]}, None),  # an argv without a shell: no shell command
        ({"command": ["sleep", "3600"]}, None),  # a container's command
        ({"cmd": "sed -i s/a/b/ x.py", "workdir": "/w"}, "sed -i s/a/b/ x.py"),  # Codex exec_command
        ({"command": ["bash", "-lc", 3]}, None),
        ({"command": [3, "-c", "ls"]}, None),
        ({"command": []}, None),
        ({"command": 7, "cmd": "ls"}, None),
        ({"path": "a.py"}, None),
        ("ls", None),
        # Windows: Codex's argv for PowerShell or cmd, and a script handed to either in a command string
        ({"command": ["powershell.exe", "-NoProfile", "-Command", "Get-Content a.txt"]}, "Get-Content a.txt"),
        ({"command": ["C:\\Windows\\System32\\cmd.exe", "/c", "dir"]}, "dir"),
        ({"command": ["pwsh", "-c", "ls"]}, "ls"),
        ({"command": ["powershell.exe", "-File", "build.ps1"]}, None),  # a script file: no script given
        ({"command": 'powershell -Command "Start-Sleep -Seconds 20"'}, "Start-Sleep -Seconds 20"),
        (
            {"command": "powershell.exe -ExecutionPolicy Bypass -Command (Get-Service X).Status"},
            "(Get-Service X).Status",
        ),
        ({"command": "cmd //c timeout /t 15 /nobreak"}, "timeout /t 15 /nobreak"),  # Git Bash's //c
        ({"command": "powershell -File x.ps1 -c 3"}, "powershell -File x.ps1 -c 3"),
        ({"command": "poweroff"}, "poweroff"),
    ],
)
def test_a_shell_command_is_read_in_each_form_a_runtime_writes(args: object, command: str | None) -> None:
    assert shell_command(args) == command


def test_group_names_may_repeat_across_a_settings_entries() -> None:
    assert RegexSet([r"(?P<n>gh) run", r"(?P<n>kubectl) get"]).search("kubectl get pods")


_ASKED = [
    (RegexSet([r"ERROR:\s", r"<tool_use_error>"]), True),
    (RegexSet([r"(?i)\bstill running\b", r"(?i)^\W*(?:pending|queued)\W*$"]), False),
    (RegexSet(), False),
    (RegexSet([r"(?P<n>\d+) ms", r"(?P<n>x)$"]), True),
]


def _each_alone(sets: list[tuple[RegexSet, bool]], text: str) -> int:
    return sum(
        1 << i for i, (regexes, anchored) in enumerate(sets) if (regexes.match if anchored else regexes.search)(text)
    )


@given(
    st.lists(
        st.sampled_from(["ERROR: ", "<tool_use_error>", "still running", "Pending", "queued", "12 ms", "x", "\n", " "]),
        max_size=6,
    ).map("".join)
)
def test_sets_asked_together_answer_as_each_asked_alone(text: str) -> None:
    assert RegexSets(_ASKED).matching(text) == _each_alone(_ASKED, text)


def test_sets_asked_together_say_which_matched() -> None:
    together = RegexSets(_ASKED)
    assert together.matching("ERROR: build is still running") == 0b11
    assert together.matching("build log\nERROR: no such file") == 0  # anchored: at the start only
    assert together.matching("12 ms") == 0b1000
    assert RegexSets([]).matching("anything") == 0
    assert RegexSets([(RegexSet(), False)]).matching("anything") == 0


def test_sets_too_large_to_ask_together_are_each_asked_alone() -> None:
    large = [(RegexSet([f"[a-z]{{1,1000}}y{n}" for n in range(300)]), False), (RegexSet([r"\d+ ms"]), True)]
    together = RegexSets(large)
    assert together._set is None
    for text in ("abcy7", "12 ms", "abcy7 12 ms", "none"):
        assert together.matching(text) == _each_alone(large, text)


def test_loops_result_checks_asked_together_agree_on_every_real_short_result() -> None:
    loops = LoopsPolicy(LoopsConfig())
    checks = [(regexes, anchored) for regexes, _, anchored in loops._checks]
    texts = [
        event.content
        for path, _ in find_transcripts([CORPUS])
        for session in open_sessions(path)
        for event in session.events()
        if isinstance(event, ToolResult) and len(event.content) <= 300
    ]
    assert len(texts) > 500
    answers = [loops._all_checks.matching(text) for text in texts]
    assert answers == [_each_alone(checks, text) for text in texts]
    assert sum(1 for found in answers if found) > 10  # the checks do say yes on real results
