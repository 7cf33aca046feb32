"""Rebuild the session logs under ``scenarios/`` from their scripts.

    python -m tests.scenarios._build            # rewrite every log
    python -m tests.scenarios._build NAME ...   # only these (e.g. remind/gentle_then_detailed)
    python -m tests.scenarios._build --expected NAME
        # also write NAME.expected.jsonl from a replay: only after checking
        # by hand that the printed verdicts are what the seed specifies

Each script is an async function registered with ``@scenario("policy/name")``
and an optional config (written beside the log as NAME.toml).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import structlog

from bus import Decision, ToolCall
from guard import load_config, replay_log
from tests.scenarios._script import Script

ROOT = Path(__file__).resolve().parents[2] / "scenarios"

ScriptFn = Callable[[Script], Awaitable[None]]
_REGISTRY: dict[str, tuple[ScriptFn, str | None]] = {}


def scenario(name: str, config_toml: str | None = None) -> Callable[[ScriptFn], ScriptFn]:
    def register(fn: ScriptFn) -> ScriptFn:
        _REGISTRY[name] = (fn, config_toml)
        return fn

    return register


GREP = {"pattern": "load_config", "path": "src"}


@scenario("remind/gentle_then_detailed")
async def _gentle_then_detailed(s: Script) -> None:
    """Defaults [3, 5, 8]: the gentle text at the 3rd identical call, the
    detailed text at the 5th and 8th, nothing at 9 and 10."""
    await s.start("main")
    await s.user("main", "find where the config is loaded")
    for _ in range(10):
        await s.call("main", "grep", GREP, "no matches")


@scenario("remind/thresholds_normalized", "[remind]\nthresholds = [4, 2]\n")
async def _thresholds_normalized(s: Script) -> None:
    """Thresholds written [4, 2] act as [2, 4]: gentle at the 2nd identical
    call, detailed at the 4th, silent after."""
    await s.start("main")
    for _ in range(6):
        await s.call("main", "read", {"path": "src/cfg.py"}, "def load_config(): ...")


CONTENT = "abcdefghij" * 40  # a 400-char payload


@scenario("remind/preview_cap", "[remind]\nthresholds = [2, 3]\narguments_preview_chars = 24\n")
async def _preview_cap(s: Script) -> None:
    """The detailed reminder quotes 24 chars of the canonical arguments and
    counts the rest; detection still compares all of them: a payload that
    differs only in its last char starts a new chain."""
    await s.start("main")
    for _ in range(3):
        await s.call("main", "write", {"path": "src/app.py", "content": CONTENT}, "written")
    changed = CONTENT[:-1] + "J"
    for _ in range(3):
        await s.call("main", "write", {"path": "src/app.py", "content": changed}, "written")


@scenario("remind/different_call_resets")
async def _different_call_resets(s: Script) -> None:
    """Other arguments, or another tool with the same arguments, restart the
    chain at 1: only the third grep in a row after the last reset is reminded."""
    await s.start("main")
    await s.call("main", "grep", GREP, "no matches")
    await s.call("main", "grep", GREP, "no matches")
    await s.call("main", "grep", {"pattern": "load_config", "path": "lib"}, "no matches")
    await s.call("main", "grep", GREP, "no matches")
    await s.call("main", "grep", GREP, "no matches")
    await s.call("main", "glob", GREP, "src/cfg.py")
    await s.call("main", "grep", GREP, "no matches")
    await s.call("main", "grep", GREP, "no matches")
    await s.call("main", "grep", GREP, "no matches")


@scenario("remind/excluded_tool_transparent")
async def _excluded_tool_transparent(s: Script) -> None:
    """todo_write (excluded by default) between greps neither counts nor
    resets: grep X, todo_write, grep X, ... reminds at the 3rd and 5th grep;
    the repeated todo_write itself is never reminded."""
    await s.start("main")
    for i in range(5):
        await s.call("main", "grep", GREP, "no matches")
        await s.call("main", "todo_write", {"todos": [{"content": "find loader", "status": "in_progress"}]})
        if i == 1:
            await s.call("main", "todo_write", {"todos": [{"content": "find loader", "status": "in_progress"}]})


@scenario("remind/include_wildcard", '[remind]\ninclude = ["mcp_*"]\n')
async def _include_wildcard(s: Script) -> None:
    """Only mcp_* tools are tracked; bash (not included) is transparent and
    never reminded, even four times in a row."""
    await s.start("main")
    read = {"uri": "file:///repo/README.md"}
    await s.call("main", "mcp_fs_read", read, "# repo")
    await s.call("main", "bash", {"command": "ls"}, "README.md")
    await s.call("main", "mcp_fs_read", read, "# repo")
    for _ in range(4):
        await s.call("main", "bash", {"command": "ls"}, "README.md")
    await s.call("main", "mcp_fs_read", read, "# repo")


@scenario("remind/regex_metacharacters_literal", '[remind]\ninclude = ["mcp.fs[*"]\nexclude = []\n')
async def _regex_metacharacters_literal(s: Script) -> None:
    """In "mcp.fs[*" only the star is a wildcard: "mcpXfs[1]+" is not tracked
    (the dot is a dot), "mcp.fs[1]+" is, and its third call is reminded."""
    await s.start("main")
    for _ in range(3):
        await s.call("main", "mcpXfs[1]+", {"q": 1})
    for _ in range(3):
        await s.call("main", "mcp.fs[1]+", {"q": 1})


@scenario("remind/property_order_at_depth")
async def _property_order_at_depth(s: Script) -> None:
    """Five calls whose arguments differ only in key order, at every depth,
    are one chain; the detailed text quotes the key-sorted form."""
    await s.start("main")
    orders = [
        {"query": "loader", "filters": {"lang": "py", "paths": [{"root": "src", "depth": 2}]}},
        {"filters": {"paths": [{"depth": 2, "root": "src"}], "lang": "py"}, "query": "loader"},
        {"query": "loader", "filters": {"paths": [{"depth": 2, "root": "src"}], "lang": "py"}},
        {"filters": {"lang": "py", "paths": [{"root": "src", "depth": 2}]}, "query": "loader"},
        {"query": "loader", "filters": {"lang": "py", "paths": [{"depth": 2, "root": "src"}]}},
    ]
    for args in orders:
        await s.call("main", "search", args, "0 results")


@scenario("remind/interleaved_agents")
async def _interleaved_agents(s: Script) -> None:
    """A parent and its subagent interleave the same call; each has its own
    chain, so each is reminded at its own third call, and sub's read resets
    only sub."""
    await s.start("main")
    await s.start("sub", parent="main")
    await s.call("main", "grep", GREP, "no matches")
    await s.call("sub", "grep", GREP, "no matches")
    await s.call("main", "grep", GREP, "no matches")
    await s.call("sub", "read", {"path": "src/cfg.py"}, "...")
    await s.call("main", "grep", GREP, "no matches")
    await s.call("sub", "grep", GREP, "no matches")
    await s.call("sub", "grep", GREP, "no matches")
    await s.call("sub", "grep", GREP, "no matches")


@scenario("remind/user_prompt_resets")
async def _user_prompt_resets(s: Script) -> None:
    """A genuine user message resets the agent's chain: two greps, a prompt,
    then the third grep after it is the first reminded."""
    await s.start("main")
    await s.user("main", "find where the config is loaded")
    await s.call("main", "grep", GREP, "no matches")
    await s.call("main", "grep", GREP, "no matches")
    await s.user("main", "keep looking, it must be there")
    await s.call("main", "grep", GREP, "no matches")
    await s.call("main", "grep", GREP, "no matches")
    await s.call("main", "grep", GREP, "no matches")


@scenario("remind/disposal_drops_state")
async def _disposal_drops_state(s: Script) -> None:
    """A subagent is disposed after two greps and started again under the same
    id: its chain starts over, so the reminder comes at the third grep after
    the restart, not at the first."""
    await s.start("main")
    await s.start("sub", parent="main")
    await s.call("sub", "grep", GREP, "no matches")
    await s.call("sub", "grep", GREP, "no matches")
    await s.dispose("sub")
    await s.start("sub", parent="main")
    await s.call("sub", "grep", GREP, "no matches")
    await s.call("sub", "grep", GREP, "no matches")
    await s.call("sub", "grep", GREP, "no matches")


@scenario("remind/denied_calls_count")
async def _denied_calls_count(s: Script) -> None:
    """A sandbox interceptor denies every bash call; the denied results still
    count, so the third identical denied call is reminded."""

    async def sandbox(call: ToolCall) -> Decision | None:
        if call.tool == "bash":
            return Decision.deny("bash is not allowed in this sandbox", "sandbox")
        return None

    s.bus.intercept("sandbox", sandbox)
    await s.start("main")
    for _ in range(3):
        await s.call("main", "bash", {"command": "rm -rf build"})


@scenario("remind/no_agent_ignored")
async def _no_agent_ignored(s: Script) -> None:
    """Direct calls with no agent (a test harness, say) are never counted:
    five identical ones get no reminder; the agent's own three do."""
    await s.start("main")
    for _ in range(5):
        await s.call(None, "grep", GREP, "no matches")
    for _ in range(3):
        await s.call("main", "grep", GREP, "no matches")


@scenario("remind/other_plugin_context")
async def _other_plugin_context(s: Script) -> None:
    """Another plugin adds context after every grep result: it does not reset
    the chain, and on the third call both messages are in the log, each with
    its own source."""
    await s.start("main")
    for _ in range(3):
        result = await s.call("main", "grep", GREP, "no matches")
        await s.context("main", result.call_id, "lint-hook", "lint: 0 problems in src/")


@scenario("remind/repeat_every", "[remind]\nrepeat_every = 2\n")
async def _repeat_every(s: Script) -> None:
    """repeat_every = 2 re-sends the detailed text every 2 repeats past the
    highest threshold: 3 (gentle), 5, 8, then 10, 12, 14."""
    await s.start("main")
    for _ in range(15):
        await s.call("main", "grep", GREP, "no matches")


async def _build(name: str, write_expected: bool) -> None:
    fn, config_toml = _REGISTRY[name]
    log = ROOT / f"{name}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    config_path = log.with_suffix(".toml")
    if config_toml is not None:
        config_path.write_text(config_toml)
    config = load_config(config_path) if config_toml is not None else None
    script = Script(log, config, session=name.replace("/", "-"))
    try:
        await fn(script)
    finally:
        script.close()
    outcome = await replay_log(log, config)
    lines = [v.json_line() for v in outcome.verdicts]
    print(f"{name}: {len(lines)} verdicts")
    for v in outcome.verdicts:
        print(f"  seq {v.seq} call {v.call_number} {v.agent} {v.policy}/{v.action} {v.tool} x{v.count}")
    if write_expected:
        log.with_suffix(".expected.jsonl").write_text("".join(line + "\n" for line in lines))


def main(argv: list[str]) -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    write_expected = "--expected" in argv
    names = [a for a in argv if not a.startswith("--")] or sorted(_REGISTRY)
    for name in names:
        anyio.run(_build, name, write_expected)


if __name__ == "__main__":
    main(sys.argv[1:])
