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
from typing import Any

import anyio
import structlog

from bus import AgentStatus, Decision, ToolCall, ToolResult
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


# --- turns (seed 002, issue 4) -------------------------------------------
# Every turns scenario runs the turns policy alone (remind off), so each
# verdict below is a turns verdict. "Turn k" is the agent's step k.

TURNS_ONLY = """\
[remind]
enabled = false

[turns]
threshold = 5
"""


async def _response(s: Script, agent_id: str, calls: list[tuple[str, Any, str]]) -> None:
    """One model response with parallel tool calls, as a runtime that runs
    them concurrently publishes it: every call decided first, then every
    result (a denied call's result is its denial text)."""
    agent = s.agent(agent_id)
    step = s.next_step(agent_id)
    s.clock.advance(1.0)
    decided = []
    for index, (tool, args, content) in enumerate(calls, 1):
        call = ToolCall(agent=agent, call_id=f"s{step}.{index}", step=step, tool=tool, args=args)
        decided.append((call, await s.bus.decide(call), content))
    for call, decision, content in decided:
        if decision.allowed:
            result = ToolResult.answering(call, content)
        else:
            result = ToolResult.answering(
                call, decision.reason or "", is_error=True, denied_by=decision.by, advice=decision.advice
            )
        await s.bus.publish(result)


@scenario("turns/fires_at_threshold", TURNS_ONLY)
async def _turns_fires_at_threshold(s: Script) -> None:
    """Threshold 5. Turn 1 reads a file; turns 2-6 grep with the same
    arguments, their keys in a different order each time (canonicalization
    makes them one pair). One advisory after the result of turn 6, the 5th
    consecutive turn (call 6, count 5); turn 7 calls something else."""
    await s.start("main")
    await s.user("main", "find where the config is loaded")
    await s.call("main", "read", {"path": "README.md"}, "# demo project")
    orders = [
        {"pattern": "load_config", "path": "src", "flags": ["-n"]},
        {"path": "src", "pattern": "load_config", "flags": ["-n"]},
        {"flags": ["-n"], "pattern": "load_config", "path": "src"},
        {"path": "src", "flags": ["-n"], "pattern": "load_config"},
        {"flags": ["-n"], "path": "src", "pattern": "load_config"},
    ]
    for args in orders:
        await s.call("main", "grep", args, "no matches")
    await s.call("main", "read", {"path": "src/settings.py"}, "CONFIG = load()")


@scenario("turns/silent_below_threshold", TURNS_ONLY)
async def _turns_silent_below_threshold(s: Script) -> None:
    """Threshold 5: grep in 4 consecutive turns, a read, grep in 4 more.
    The run never reaches 5, so no verdict."""
    await s.start("main")
    await s.user("main", "find where the config is loaded")
    for _ in range(4):
        await s.call("main", "grep", GREP, "no matches")
    await s.call("main", "read", {"path": "src/settings.py"}, "CONFIG = load()")
    for _ in range(4):
        await s.call("main", "grep", GREP, "no matches")


@scenario("turns/one_byte_differs", TURNS_ONLY)
async def _turns_one_byte_differs(s: Script) -> None:
    """Threshold 5: nine grep turns; the 5th pattern differs from the others
    by one byte (load_confiG). Runs of 4 on either side of it: no verdict."""
    await s.start("main")
    await s.user("main", "find where the config is loaded")
    for turn in range(1, 10):
        args = {"pattern": "load_confiG" if turn == 5 else "load_config", "path": "src"}
        await s.call("main", "grep", args, "no matches")


@scenario("turns/alternating", TURNS_ONLY)
async def _turns_alternating(s: Script) -> None:
    """Threshold 5: an edit/build cycle, A B A B ... for 12 turns. Each pair
    is in every other turn only, so no run passes 1: no verdict (alternating
    cycles are out of this policy's scope, as in the seed)."""
    await s.start("main")
    await s.user("main", "make the build pass")
    edit = {"path": "src/app.py", "old": "x = 1", "new": "x = 2"}
    for _ in range(6):
        await s.call("main", "edit", edit, "edited")
        await s.call("main", "bash", {"command": "make"}, "error: x is not defined")


@scenario("turns/disabled_at_zero", "[remind]\nenabled = false\n\n[turns]\nthreshold = 0\n")
async def _turns_disabled_at_zero(s: Script) -> None:
    """Threshold 0 switches the policy off: 12 identical grep turns and no
    verdict, no advisory, no denial, no halt."""
    await s.start("main")
    await s.user("main", "find where the config is loaded")
    for _ in range(12):
        await s.call("main", "grep", GREP, "no matches")


@scenario("turns/exempt_transparent", TURNS_ONLY + 'exempt = ["poll_*", "status"]\n')
async def _turns_exempt_transparent(s: Script) -> None:
    """Threshold 5, exempt poll_* and status. Turns 1-2 grep; turn 3 calls
    only poll_build (skipped, not a break); turns 4-5 grep, turn 5 with a
    parallel status call; turn 6 grep: the 5th grep turn, so one advisory
    after its result (call 7, count 5). Then poll_build in 10 consecutive
    turns: exempt, never counted, no verdict."""
    await s.start("main")
    await s.user("main", "wait for the build, then find the config loader")
    poll = {"job": "build-17"}
    await s.call("main", "grep", GREP, "no matches")
    await s.call("main", "grep", GREP, "no matches")
    await s.call("main", "poll_build", poll, "running")
    await s.call("main", "grep", GREP, "no matches")
    await _response(s, "main", [("grep", GREP, "no matches"), ("status", {}, "ok")])
    await s.call("main", "grep", GREP, "no matches")
    for _ in range(10):
        await s.call("main", "poll_build", poll, "running")


@scenario("turns/reset_after_firing", TURNS_ONLY + "deny_after = 0\nhalt_after = 0\n")
async def _turns_reset_after_firing(s: Script) -> None:
    """Threshold 5 with the ladder off (deny_after = halt_after = 0), the
    seed's v1 warn-and-continue: grep in 14 consecutive turns draws an
    advisory at turn 5 (count 5) and at turn 10 (count 10), silent in
    turns 6-9 and 11-14: after each advisory the next needs 5 more turns."""
    await s.start("main")
    await s.user("main", "find where the config is loaded")
    for _ in range(14):
        await s.call("main", "grep", GREP, "no matches")


@scenario("turns/parallel_calls", TURNS_ONLY)
async def _turns_parallel_calls(s: Script) -> None:
    """Threshold 5, defaults deny_after 2, halt_after 2. Each of 7 turns
    makes three parallel calls: the same grep twice and a read of a new file.
    The grep pair counts once per turn, so turn 4 (8 grep calls) is silent
    and turn 5 draws one advisory, after the first grep's result (call 13,
    count 5). Turn 6 runs; in turn 7 (count 7) both grep calls are denied
    (calls 19 and 20); the reads are never touched."""
    await s.start("main")
    await s.user("main", "find where the config is loaded")
    for turn in range(1, 8):
        await _response(
            s,
            "main",
            [
                ("grep", GREP, "no matches"),
                ("grep", GREP, "no matches"),
                ("read", {"path": f"src/module_{turn}.py"}, f"# module {turn}"),
            ],
        )


@scenario("turns/ladder", TURNS_ONLY + "deny_after = 2\nhalt_after = 2\n")
async def _turns_ladder(s: Script) -> None:
    """Threshold 5, deny_after 2, halt_after 2; the runtime ignores the halt
    request. grep in turns 1-12: advisory after turn 5 (count 5); turn 6
    runs; turns 7, 8, 9 denied; turn 9 also requests a halt (after its
    denied result; once per run); turns 10-12 still denied, the guard never
    goes silent. Turn 13 reads a file, which ends the grep run, so the grep
    in turn 14 runs again without a verdict."""
    await s.start("main")
    await s.user("main", "find where the config is loaded")
    for _ in range(12):
        await s.call("main", "grep", GREP, "no matches")
    await s.call("main", "read", {"path": "src/settings.py"}, "CONFIG = load()")
    await s.call("main", "grep", GREP, "no matches")


@scenario("turns/user_message_resets", TURNS_ONLY)
async def _turns_user_message_resets(s: Script) -> None:
    """Threshold 5, deny_after 2: grep in turns 1-7 (advisory at 5, denial
    at 7). The user then interjects; that resets the run and the ladder, so
    grep in turns 8-12 is allowed throughout and turn 12, the 5th since the
    message, draws a fresh advisory (count 5), not a denial."""
    await s.start("main")
    await s.user("main", "find where the config is loaded")
    for _ in range(7):
        await s.call("main", "grep", GREP, "no matches")
    await s.user("main", "the loader was just added on a branch; grep again")
    for _ in range(5):
        await s.call("main", "grep", GREP, "no matches")


@scenario("turns/quiet_turn_breaks_run", TURNS_ONLY)
async def _turns_quiet_turn_breaks_run(s: Script) -> None:
    """Threshold 5. grep in steps 1-4; step 5 is a response without tool
    calls (it shows as the jump from step 4 to 6); grep in steps 6-9; then
    agent/status idle; grep in steps 10-14. Both breaks end the run, so
    only step 14, the 5th consecutive turn after the idle, draws an
    advisory (call 13, count 5)."""
    await s.start("main")
    await s.user("main", "find where the config is loaded")
    for _ in range(4):
        await s.call("main", "grep", GREP, "no matches")
    s.next_step("main")
    for _ in range(4):
        await s.call("main", "grep", GREP, "no matches")
    await s.bus.publish(AgentStatus(agent=s.agent("main"), status="idle"))
    for _ in range(5):
        await s.call("main", "grep", GREP, "no matches")


@scenario("turns/issue_report", TURNS_ONLY + "deny_after = 2\nhalt_after = 2\n")
async def _turns_issue_report(s: Script) -> None:
    """Issue 4 / seed 002's report: 52 identical iterations in three loops,
    23 x a grep, 20 x a zodToJsonSchema script, 9 x a sed read, one turn
    each, the loops separated by the user's interjections. Defaults
    threshold 5, deny_after 2, halt_after 2; this model persists and the
    runtime ignores halt requests, so every rung shows:

    - grep, turns 1-23: advised at turn 5, denied at turns 7-23, halt
      requested at turn 9;
    - script, turns 24-43: advised at turn 28, denied at turns 30-43, halt
      requested at turn 32;
    - sed read, turns 44-52: advised at turn 48, denied at turns 50-52,
      halt requested at turn 52.

    40 verdicts: 3 advisories, 34 denials, 3 halt requests.
    """
    await s.start("main")
    await s.user("main", "export the settings schema as JSON Schema for the config UI")
    grep = {"pattern": "zodToJsonSchema", "path": "packages"}
    hit = "packages/ai/src/schema.ts:3:import { zodToJsonSchema } from 'zod-to-json-schema'"
    for _ in range(23):
        await s.call("main", "grep", grep, hit)
    await s.user("main", "you keep running the same grep; run the schema script instead")
    script = {"command": "node scripts/print-settings-schema.mjs"}
    for _ in range(20):
        await s.call(
            "main",
            "bash",
            script,
            "TypeError: Cannot read properties of undefined (reading '_def')\n"
            "    at parseDef (node_modules/zod-to-json-schema/dist/parseDef.js:14:19)",
            is_error=True,
        )
    await s.user("main", "the script fails the same way every time; read the schema file")
    sed = {"command": "sed -n '1,80p' packages/agent/src/settings-schema.ts"}
    for _ in range(9):
        await s.call("main", "bash", sed, "import { z } from 'zod';\nexport const Settings = z.object({ ... });")


# ---------------------------------------------------------------- rescue (seed 003)

_RESCUE_ADVICE = """\
[remind]
enabled = false

[rescue]
ask_command = "./ask-advice.sh"
"""

_RESCUE_UNAVAILABLE = """\
[remind]
enabled = false

[rescue]
ask_command = "./no-such-ask-command"
"""

_TASK = (
    "`serve --config path/to/app.toml` ignores the flag and always loads ./app.toml. Fix it; keep cargo clippy clean."
)
_GREP_X = {"pattern": "fn resolve_config_path", "path": "src"}
_GREP_X_OUT = "src/config.rs:88:pub fn resolve_config_path(explicit: Option<PathBuf>) -> PathBuf {"
_READ_Y = {"path": "src/config.rs", "offset": 80, "limit": 30}
_READ_Y_OUT = (
    "80  /// Where the config file lives: the explicit path if given, else ./app.toml.\n"
    "88  pub fn resolve_config_path(explicit: Option<PathBuf>) -> PathBuf {\n"
    '89      explicit.unwrap_or_else(|| PathBuf::from("app.toml"))\n'
    "90  }"
)


def _bash(command: str, description: str = "") -> dict[str, str]:
    return {"command": command, "description": description} if description else {"command": command}


def _edit(path: str, old: str, new: str) -> dict[str, str]:
    return {"path": path, "old_string": old, "new_string": new}


async def _incident_start(s: Script) -> None:
    """Calls 1-59: productive work. Edits come every few calls, each one a
    new epoch, and nothing repeats three times within one."""
    await s.start("main")
    await s.user("main", _TASK)
    a = "main"
    await s.call(a, "bash", _bash("ls", "List the repository"), "Cargo.toml\nsrc\ntests\nREADME.md", seconds=3)
    await s.call(a, "read", {"path": "Cargo.toml"}, '[package]\nname = "appd"\n[dependencies]\nclap = "4"', seconds=2)
    await s.call(a, "glob", {"pattern": "src/**/*.rs"}, "src/main.rs\nsrc/config.rs\nsrc/cli.rs\nsrc/server.rs")
    await s.call(a, "read", {"path": "src/main.rs"}, "fn main() {\n    let args = Cli::parse();\n    ...", seconds=3)
    await s.call(a, "read", {"path": "src/cli.rs"}, "#[derive(Parser)]\npub struct Cli { ... }", seconds=3)
    await s.call(a, "grep", {"pattern": "config", "path": "src/cli.rs"}, "12:    /// --config <PATH>\n13:    config")
    await s.call(
        a, "bash", _bash("cargo build", "Build the project"), "Finished dev [unoptimized] target(s)", seconds=9
    )
    await s.call(a, "bash", _bash("cargo run -- serve --config /tmp/x.toml", "Reproduce"), "loaded ./app.toml")
    await s.call(a, "todo_write", {"todos": [{"content": "trace --config", "status": "in_progress"}]})
    await s.call(a, "grep", {"pattern": "Serve", "path": "src"}, "src/cli.rs:20: Serve {\nsrc/main.rs:9: Serve")
    await s.call(a, "read", {"path": "src/server.rs"}, "pub fn run(cfg: Config) { ... }", seconds=3)
    await s.call(a, "grep", {"pattern": "fn load", "path": "src"}, "src/config.rs:40:pub fn load(path: &Path)")
    await s.call(a, "read", {"path": "src/config.rs"}, "pub struct Config { ... }\npub fn load(path: &Path) ...")
    # calls 14-29: a first fix to the CLI struct, built and tested twice
    await s.call(a, "edit", _edit("src/cli.rs", "config: Option<String>", "config: Option<PathBuf>"), "applied")
    await s.call(a, "bash", _bash("cargo build"), "error[E0308]: mismatched types\n --> src/main.rs:14", seconds=8)
    await s.call(a, "read", {"path": "src/main.rs", "offset": 10, "limit": 10}, "14:  let p = args.config;")
    await s.call(a, "edit", _edit("src/main.rs", "let p = args.config;", "let p = args.config.clone();"), "applied")
    await s.call(a, "bash", _bash("cargo build"), "Finished dev [unoptimized] target(s)", seconds=8)
    await s.call(a, "bash", _bash("cargo clippy"), "warning: redundant clone\n --> src/main.rs:14", seconds=10)
    await s.call(a, "edit", _edit("src/main.rs", "args.config.clone()", "args.config"), "applied")
    await s.call(a, "bash", _bash("cargo clippy"), "Finished dev [unoptimized] target(s)", seconds=10)
    await s.call(a, "bash", _bash("cargo test"), "test result: ok. 14 passed; 0 failed", seconds=12)
    await s.call(a, "bash", _bash("cargo run -- serve --config /tmp/x.toml", "Reproduce"), "loaded ./app.toml")
    await s.call(a, "grep", {"pattern": "app.toml", "path": "src"}, 'src/config.rs:89: PathBuf::from("app.toml")')
    await s.call(a, "grep", {"pattern": "load\\(", "path": "src"}, "src/main.rs:22: config::load(&path)")
    await s.call(a, "read", {"path": "src/main.rs", "offset": 15, "limit": 15}, "22: let cfg = config::load(&path)")
    await s.call(a, "grep", {"pattern": "let path", "path": "src/main.rs"}, "21: let path = default_path();")
    await s.call(a, "grep", {"pattern": "fn default_path", "path": "src"}, "src/config.rs:70:pub fn default_path()")
    await s.call(a, "read", {"path": "src/config.rs", "offset": 60, "limit": 20}, "70: pub fn default_path() -> ...")
    # calls 30-45: a helper, its test, and a wrong turn fixed
    await s.call(a, "edit", _edit("src/config.rs", "pub fn default_path()", "pub(crate) fn default_path()"), "applied")
    await s.call(a, "bash", _bash("cargo build"), "Finished dev [unoptimized] target(s)", seconds=8)
    await s.call(a, "read", {"path": "tests/cli.rs"}, "#[test] fn serve_uses_default() { ... }", seconds=3)
    await s.call(
        a,
        "edit",
        _edit("tests/cli.rs", "fn serve_uses_default()", "fn serve_uses_default() {}\n#[test] fn x()"),
        "applied",
    )
    await s.call(a, "bash", _bash("cargo test"), "error: expected `{`", is_error=True, seconds=6)
    await s.call(a, "read", {"path": "tests/cli.rs", "offset": 1, "limit": 20}, "3: fn serve_uses_default() {}")
    await s.call(a, "edit", _edit("tests/cli.rs", "#[test] fn x()", "#[test] fn serve_honors_config()"), "applied")
    await s.call(a, "bash", _bash("cargo test"), "test serve_honors_config ... FAILED", is_error=True, seconds=12)
    await s.call(a, "bash", _bash("cargo test serve_honors_config -- --nocapture"), "loaded ./app.toml", seconds=7)
    await s.call(a, "grep", {"pattern": "default_path\\(", "path": "src"}, "src/main.rs:21: default_path()")
    await s.call(a, "read", {"path": "src/server.rs", "offset": 1, "limit": 40}, "pub fn run(cfg: Config)")
    await s.call(a, "bash", _bash("git diff --stat"), " src/cli.rs | 2 +-\n src/config.rs | 2 +-\n tests/cli.rs | 4 ++")
    await s.call(a, "bash", _bash("git log --oneline -5"), "a1b2c3 serve: add --config flag")
    await s.call(a, "bash", _bash("git show a1b2c3 --stat"), " src/cli.rs | 4 ++++")
    await s.call(a, "read", {"path": "README.md"}, "appd serve [--config PATH]")
    # calls 46-59: the last productive stretch; the epoch that the loop will live in starts at call 55
    await s.call(a, "edit", _edit("README.md", "[--config PATH]", "[--config PATH]  (default ./app.toml)"), "applied")
    await s.call(a, "grep", {"pattern": "fn main", "path": "src/main.rs"}, "5:fn main() {")
    await s.call(a, "read", {"path": "src/main.rs", "offset": 1, "limit": 40}, "21: let path = default_path();")
    await s.call(a, "grep", _GREP_X, _GREP_X_OUT)
    await s.call(a, "read", {"path": "src/config.rs", "offset": 1, "limit": 60}, "40: pub fn load(path: &Path)")
    await s.call(a, "bash", _bash("cargo doc --no-deps"), "Documenting appd", seconds=15)
    await s.call(a, "glob", {"pattern": "tests/**/*.rs"}, "tests/cli.rs")
    await s.call(a, "bash", _bash("cargo tree -d"), "nothing to print", seconds=4)
    await s.call(a, "read", {"path": "Cargo.lock", "limit": 10}, "version = 3")
    await s.call(a, "todo_write", {"todos": [{"content": "wire --config into serve", "status": "in_progress"}]})
    await s.call(
        a, "edit", _edit("src/cli.rs", "/// --config <PATH>", "/// --config <PATH>: the config file"), "applied"
    )
    await s.call(a, "bash", _bash("cargo build"), "Finished dev [unoptimized] target(s)", seconds=8)
    await s.call(a, "bash", _bash("cargo clippy"), "Finished dev [unoptimized] target(s)", seconds=10)
    await s.call(a, "bash", _bash("cargo test"), "test serve_honors_config ... FAILED", is_error=True, seconds=12)
    await s.call(a, "read", _READ_Y, _READ_Y_OUT)


async def _incident_tail(s: Script) -> None:
    """Calls 171-192: out of the loop. Two edits, nine cargo invocations
    (cargo clippy four times around the pair of edits); no call repeats
    three times within one epoch."""
    a = "main"
    await s.call(a, "bash", _bash("cargo clippy"), "Finished dev [unoptimized] target(s)", seconds=10)
    await s.call(
        a,
        "edit",
        _edit("src/main.rs", "let path = default_path();", "let path = resolve_config_path(args.config);"),
        "applied",
    )
    await s.call(
        a,
        "bash",
        _bash("cargo build"),
        "error[E0425]: cannot find function `resolve_config_path`",
        is_error=True,
        seconds=8,
    )
    await s.call(
        a,
        "bash",
        _bash("cargo clippy"),
        "error[E0425]: cannot find function `resolve_config_path`",
        is_error=True,
        seconds=9,
    )
    await s.call(a, "read", {"path": "src/main.rs", "offset": 1, "limit": 10}, "3: use crate::config::load;")
    await s.call(
        a,
        "edit",
        _edit("src/main.rs", "use crate::config::load;", "use crate::config::{load, resolve_config_path};"),
        "applied",
    )
    await s.call(a, "bash", _bash("cargo build"), "Finished dev [unoptimized] target(s)", seconds=8)
    await s.call(a, "bash", _bash("cargo clippy"), "Finished dev [unoptimized] target(s)", seconds=10)
    await s.call(a, "bash", _bash("cargo test"), "test result: ok. 15 passed; 0 failed", seconds=12)
    await s.call(a, "bash", _bash("cargo run -- serve --config /tmp/x.toml", "Verify"), "loaded /tmp/x.toml", seconds=4)
    await s.call(a, "bash", _bash("cargo clippy -- -D warnings"), "Finished dev [unoptimized] target(s)", seconds=10)
    await s.call(a, "bash", _bash("rustfmt --check src/main.rs src/cli.rs"), "", seconds=2)
    await s.call(a, "bash", _bash("cargo test serve_honors_config"), "test serve_honors_config ... ok", seconds=7)
    await s.call(a, "bash", _bash("git diff --stat"), " src/main.rs | 4 ++--\n src/cli.rs | 2 +-\n README.md | 2 +-")
    await s.call(a, "read", {"path": "README.md", "limit": 20}, "appd serve [--config PATH]  (default ./app.toml)")
    await s.call(
        a, "grep", {"pattern": "default_path\\(", "path": "src"}, "src/config.rs:70: pub(crate) fn default_path()"
    )
    await s.call(a, "grep", {"pattern": "TODO", "path": "src"}, "")
    await s.call(a, "todo_write", {"todos": [{"content": "wire --config into serve", "status": "completed"}]})
    await s.call(a, "bash", _bash("git status --short"), " M README.md\n M src/cli.rs\n M src/main.rs")
    await s.call(a, "bash", _bash("git add -A"), "")
    await s.call(a, "bash", _bash("git commit -m 'serve: honor --config'"), "[main d4e5f6] serve: honor --config")
    await s.call(a, "bash", _bash("git log --oneline -1"), "d4e5f6 serve: honor --config")


@scenario("rescue/incident_192", _RESCUE_ADVICE)
async def _incident_192(s: Script) -> None:
    """Seed 003's incident, rebuilt: 192 calls. Calls 1-59 are productive;
    from call 60 to 170 the agent cycles `grep X ×5, read Y` (93 greps, 18
    reads) re-learning a one-line answer it already has (call 48 grepped X,
    call 59 read Y); calls 171-192 are a productive tail with two successful
    edits and nine cargo invocations (cargo clippy four times around them).

    Recorded with the live guard and a real ask command
    (scenarios/rescue/ask-advice.sh), so every denied call's result in the
    log is the denial text the model read. It proves: the first denial is
    the cycle's third call (call 62); the fifth occurrence (call 64)
    escalates, bought once, and the advice rides that denial and every later
    attempt at the same grep for free; the read that breaks the chain every
    sixth call (which defeats `remind`'s single-slot chain) is never denied,
    since it occurs only twice in any window of 12; and the tail draws 0
    denials."""
    await _incident_start(s)
    for n in range(111):
        if n % 6 == 5:
            await s.call("main", "read", _READ_Y, _READ_Y_OUT, seconds=4)
        else:
            await s.call("main", "grep", _GREP_X, _GREP_X_OUT, seconds=4)
    await _incident_tail(s)


@scenario("rescue/numbered_descriptions", _RESCUE_UNAVAILABLE)
async def _numbered_descriptions(s: Script) -> None:
    """Seed 003's live-testing finding: told to run one command six times,
    the model numbers each call's description "(run 1)" ... "(run 6)".
    `description` is an ignored argument, so the six are one signature: the
    third is denied, the fifth escalates (the ask command is unavailable
    here, so it falls back to the local denial: escalation-failed), the
    sixth is denied inside the cooldown that failed ask started."""
    await s.start("main")
    await s.user("main", "Run the flaky integration test six times and tell me how often it fails.")
    for n in range(1, 7):
        args = _bash("python -m pytest tests/test_sync.py -q", f"Run the flaky sync test (run {n})")
        await s.call("main", "bash", args, "1 passed in 4.1s", seconds=6)


@scenario(
    "rescue/polling",
    """\
[remind]
enabled = false

[rescue]
ask_command = "./no-such-ask-command"
exclude_commands = ['^curl -fsS http://localhost:8080/health$']
""",
)
async def _polling(s: Script) -> None:
    """Deliberate polling, seed 003: `docker ps` is denied at its third
    occurrence, and the denial blocks only that signature, so
    `sleep 10 && docker ps` still runs (twice, under the threshold). The
    health check matches `exclude_commands`: eight identical calls, never
    denied, never counted."""
    await s.start("main")
    await s.user("main", "Start the stack and wait until the api answers its health check.")
    await s.call("main", "bash", _bash("docker compose up -d"), "Container api  Started", seconds=5)
    for _ in range(3):
        await s.call("main", "bash", _bash("docker ps"), "api   Up 2 seconds (health: starting)", seconds=2)
    for _ in range(2):
        await s.call(
            "main", "bash", _bash("sleep 10 && docker ps"), "api   Up 14 seconds (health: starting)", seconds=11
        )
    for n in range(8):
        health = "ok" if n == 7 else "curl: (7) Failed to connect to localhost port 8080"
        await s.call("main", "bash", _bash("curl -fsS http://localhost:8080/health"), health, is_error=n < 7, seconds=3)


@scenario(
    "rescue/ask_unavailable",
    """\
[remind]
enabled = false

[rescue]
ask_command = "./no-such-ask-command"
max_rescues = 1
""",
)
async def _ask_unavailable(s: Script) -> None:
    """The ask command is missing: every escalation falls back to the free
    local denial (escalation-failed) and refunds the budget, so with
    `max_rescues = 1` the agent can still be escalated again once the 45 s
    cooldown has passed (event time: the 7th grep comes 50 s after the 5th).
    Calls inside the cooldown get the plain local denial."""
    await s.start("main")
    await s.user("main", "Why does the nightly job fail?")
    grep = {"pattern": "ERROR", "path": "/var/log/nightly.log"}
    for _ in range(6):
        await s.call("main", "grep", grep, "no matches", seconds=2)
    await s.call("main", "grep", grep, "no matches", seconds=48)


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


# --- loops (the recommended preset) -----------------------------------------
# Recorded live with the policy on, so the logs hold its messages, denials
# and halt requests as a runtime would: replay --check regenerates them.

LOOPS_ONLY = """\
[remind]
enabled = false

[loops]
"""


@scenario("loops/repeat_denied_then_halt", LOOPS_ONLY)
async def _loops_repeat_denied_then_halt(s: Script) -> None:
    """The same grep, same result: the 3rd is denied before it runs, and
    after three denials the runtime is asked to end the run."""
    await s.start("main")
    await s.user("main", "find where the config is loaded")
    for _ in range(5):
        await s.call("main", "grep", GREP, "no matches")


@scenario("loops/poll_backs_off", LOOPS_ONLY)
async def _loops_poll_backs_off(s: Script) -> None:
    """A build polled while its output advances is left alone; once it stops
    changing, polls a few seconds apart are told to back off from the fourth
    unchanged poll (5 s, then 10 s)."""
    await s.start("main")
    await s.user("main", "wait for the build")
    for n in range(3):
        await s.call("main", "BashOutput", {"bash_id": "b1"}, f"<status>running</status>\nstep {n}", seconds=3)
    for _ in range(5):
        await s.call("main", "BashOutput", {"bash_id": "b1"}, "<status>running</status>\nstep 2", seconds=3)


@scenario("loops/cycle_and_error_streak", LOOPS_ONLY)
async def _loops_cycle_and_error_streak(s: Script) -> None:
    """A two-call cycle draws one advisory, then its third round is denied;
    a "Done" from the user changes nothing. Then an unknown tool is called
    with new arguments each time: an advisory at the third failure, denial
    once eight have failed."""
    await s.start("main")
    await s.user("main", "why does the service not start?")
    for _ in range(2):
        await s.call("main", "ls", {}, "app.py service.log")
        await s.call("main", "read", {"path": "service.log"}, "ERROR bind: address in use")
    await s.user("main", "Done")
    await s.call("main", "ls", {}, "app.py service.log")
    for n in range(9):
        await s.call("main", "search_code", {"q": f"bind {n}"}, f"Error: unknown tool search_code ({n})", is_error=True)


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
