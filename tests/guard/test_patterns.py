"""Tool-name patterns: ``*`` is the only wildcard (seed 000)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard import Glob, ToolFilter


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
