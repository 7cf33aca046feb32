"""What one ``repeat-tool-guard hook`` invocation costs as its session grows.

    python -m tests.bench.hook_replay [--sizes 0,100,1000,5000] [--repeat R] [--processes P]

Claude Code runs the hook command as a fresh process for every hook event,
so each invocation rebuilds the guard by replaying the session log so far
(``guard.adapters.claude_hooks.run_hook``). For each size N this writes a
session log of N earlier tool calls (a realistic mix: distinct reads, an
edit-build cycle, a grep loop that ``rescue`` denies), then times:

- ``in process``: ``run_hook`` for one more ``PreToolUse``, best of R, in
  milliseconds and as a ratio to the empty session measured in the same run;
- ``process``: the whole ``python -m guard hook`` subprocess (interpreter
  start-up included), best of P, the way Claude Code pays for it.

Every configured policy is on (``remind``, ``turns``, ``rescue`` with a
missing ask command, so nothing leaves the machine and no replay would ask
anyway). Not a test: no timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import structlog

from guard import Config, RescueConfig, TurnsConfig
from guard.adapters import GuardLink
from guard.adapters.claude_hooks import ClaudeHooks, run_hook

SESSION = "bench-session"
REPO = Path(__file__).resolve().parents[2]


def _payload(event: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": SESSION, "hook_event_name": event, "cwd": "/w", "transcript_path": "/t", **fields}


def _calls(n: int) -> list[tuple[str, dict[str, str]]]:
    calls: list[tuple[str, dict[str, str]]] = []
    i = 0
    while len(calls) < n:
        calls += [("Read", {"file_path": f"src/mod{i}.py"}), ("Edit", {"file_path": f"src/mod{i}.py", "old": "a"})]
        calls += [("Bash", {"command": "pytest -q"})] + [("Grep", {"pattern": "load_config", "path": "src"})] * 4
        i += 1
    return calls[:n]


async def _write_session(path: Path, n: int, config: Config) -> None:
    link = GuardLink(config=config, log=path)
    hooks = ClaudeHooks(link)
    await hooks.handle(_payload("UserPromptSubmit", prompt="find the config loader"))
    for k, (tool, args) in enumerate(_calls(n)):
        pre = _payload("PreToolUse", tool_use_id=f"t{k}", tool_name=tool, tool_input=args)
        answer = await hooks.handle(pre)
        if "permissionDecision" not in answer.get("hookSpecificOutput", {}):
            await hooks.handle(pre | {"hook_event_name": "PostToolUse", "tool_response": "ok"})


async def _in_process(state: Path, config: Config, repeat: int) -> float:
    best = float("inf")
    for r in range(repeat):
        pre = _payload("PreToolUse", tool_use_id=f"x{r}", tool_name="Read", tool_input={"file_path": f"new{r}"})
        started = time.perf_counter()
        await run_hook(pre, state, config)
        best = min(best, time.perf_counter() - started)
    return best * 1000


def _process(state: Path, toml: Path, repeat: int) -> float:
    best = float("inf")
    for r in range(repeat):
        pre = _payload("PreToolUse", tool_use_id=f"p{r}", tool_name="Read", tool_input={"file_path": f"p{r}"})
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "guard", "hook", "--state-dir", str(state), "--config", str(toml)],
            input=json.dumps(pre),
            capture_output=True,
            text=True,
            cwd=REPO,
            check=True,
        )
        best = min(best, time.perf_counter() - started)
    return best * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="0,100,1000,5000", help="earlier tool calls in the session, comma-separated")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--processes", type=int, default=3)
    options = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    sizes = [int(size) for size in options.sizes.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        ask = str(root / "no-such-ask-command")
        config = Config(turns=TurnsConfig(), rescue=RescueConfig(ask_command=ask))
        toml = root / "guard.toml"
        toml.write_text(f'[turns]\n\n[rescue]\nask_command = "{ask}"\n')
        rows: list[tuple[int, int, float, float]] = []
        for size in sizes:
            state = root / f"state-{size}"
            state.mkdir()
            anyio.run(_write_session, state / f"{SESSION}.jsonl", size, config)
            events = (state / f"{SESSION}.jsonl").read_bytes().count(b"\n") - 1  # the header is no event
            base = state / "base.jsonl"
            shutil.copy(state / f"{SESSION}.jsonl", base)
            in_process = anyio.run(_in_process, state, config, options.repeat)
            shutil.copy(base, state / f"{SESSION}.jsonl")
            process = _process(state, toml, options.processes)
            rows.append((size, events, in_process, process))
    baseline_in, baseline_proc = rows[0][2], rows[0][3]
    print(f"one PreToolUse hook, best of {options.repeat} in process / {options.processes} as a process")
    print(f"  {'calls':>6} {'events':>7} {'in process':>12} {'ratio':>7} {'process':>10} {'ratio':>7}")
    for size, events, in_process, process in rows:
        print(
            f"  {size:6d} {events:7d} {in_process:9.2f} ms {in_process / baseline_in:6.1f}× "
            f"{process:7.0f} ms {process / baseline_proc:6.1f}×"
        )


if __name__ == "__main__":
    main()
