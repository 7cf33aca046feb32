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

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec

from bus import AgentStatus, ToolCall, ToolResult
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
            result = ToolResult.answering(call, decision.reason or "", is_error=True, denied_by=decision.by)
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
    lines = [msgspec.json.encode(v).decode() for v in outcome.verdicts]
    print(f"{name}: {len(lines)} verdicts")
    for v in outcome.verdicts:
        print(f"  seq {v.seq} call {v.call_number} {v.agent} {v.policy}/{v.action} {v.tool} x{v.count}")
    if write_expected:
        log.with_suffix(".expected.jsonl").write_text("".join(line + "\n" for line in lines))


def main(argv: list[str]) -> None:
    write_expected = "--expected" in argv
    names = [a for a in argv if not a.startswith("--")] or sorted(_REGISTRY)
    for name in names:
        anyio.run(_build, name, write_expected)


if __name__ == "__main__":
    main(sys.argv[1:])
