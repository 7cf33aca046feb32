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

import anyio

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
    write_expected = "--expected" in argv
    names = [a for a in argv if not a.startswith("--")] or sorted(_REGISTRY)
    for name in names:
        anyio.run(_build, name, write_expected)


if __name__ == "__main__":
    main(sys.argv[1:])
